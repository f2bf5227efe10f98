//! The result column of a statement the proxy answers itself, `SELECT f(...) [[AS] alias]`.

use crate::sql::lexer::{LexMode, Token, TokenKind, ident_text};

/// The name of the one column of `SELECT f(...) [[AS] alias]`, whose call ends at token
/// `close`: the alias, or the call as written; `None` when anything else follows the call.
pub(super) fn call_column(
    sql: &[u8],
    tokens: &[Token],
    close: usize,
    mode: LexMode,
) -> Option<String> {
    match &tokens[close + 1..] {
        [] => Some(
            String::from_utf8_lossy(&sql[tokens[1].range.start..tokens[close].range.end])
                .into_owned(),
        ),
        [alias]
            if matches!(
                alias.kind,
                TokenKind::Word | TokenKind::QuotedIdent | TokenKind::String
            ) =>
        {
            Some(ident_text(sql, alias, mode))
        }
        [kw, alias] if kw.is_word(sql, "as") => Some(ident_text(sql, alias, mode)),
        _ => None,
    }
}
