//! The proxy's own statements about clustered datasources (issue 26).

use super::column::call_column;
use crate::sql::lexer::{LexMode, Token};

/// `SELECT ROUTEKEY_WRITE_TOKEN()` with an optional alias: the result column's name; `None`
/// for any other use of the name, which is a statement (a column of that name, or the
/// server's error for an unknown function).
pub(super) fn write_token(sql: &[u8], tokens: &[Token], mode: LexMode) -> Option<String> {
    let called = tokens.get(2).is_some_and(|t| t.is_punct(sql, "("))
        && tokens.get(3).is_some_and(|t| t.is_punct(sql, ")"));
    if !called {
        return None;
    }
    call_column(sql, tokens, 3, mode)
}
