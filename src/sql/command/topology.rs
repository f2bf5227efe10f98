//! The proxy's own statements about clustered datasources (issue 26).

use crate::sql::lexer::{LexMode, Token, TokenKind, ident_text};

/// `SELECT ROUTEKEY_WRITE_TOKEN()` with an optional alias: the result column's name; `None`
/// for any other use of the name, which is a statement (a column of that name, or the
/// server's error for an unknown function).
pub(super) fn write_token(sql: &[u8], tokens: &[Token], mode: LexMode) -> Option<String> {
    let called = tokens.get(2).is_some_and(|t| t.is_punct(sql, "("))
        && tokens.get(3).is_some_and(|t| t.is_punct(sql, ")"));
    if !called {
        return None;
    }
    let expression =
        String::from_utf8_lossy(&sql[tokens[1].range.start..tokens[3].range.end]).into_owned();
    let column = match &tokens[4..] {
        [] => expression,
        [alias]
            if matches!(
                alias.kind,
                TokenKind::Word | TokenKind::QuotedIdent | TokenKind::String
            ) =>
        {
            ident_text(sql, alias, mode)
        }
        [kw, alias] if kw.is_word(sql, "as") => ident_text(sql, alias, mode),
        _ => return None,
    };
    Some(column)
}
