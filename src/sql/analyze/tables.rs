//! What the analysis knows of the session, and finding sharded tables from tokens alone
//! (for statements the parser cannot read, or whose tables it does not report).

use crate::config::{Config, TableId};
use crate::sql::TokSpan;
use crate::sql::charset::Decoding;
use crate::sql::lexer::TokenKind;
use crate::sql::predicates::Positions;

/// What the analysis needs to know about the session.
#[derive(Debug, Clone, Copy)]
pub struct AnalyzeContext<'a> {
    /// Logical database, binding tables and their columns.
    pub config: &'a Config,
    /// The session's current database is the logical database, so unqualified names of
    /// binding tables are the sharded tables.
    pub db_is_logical: bool,
    /// How statement bytes decode.
    pub decoding: Decoding,
    /// `||` concatenates (sql_mode PIPES_AS_CONCAT) instead of meaning OR.
    pub pipes_as_concat: bool,
}

/// Whether any token names a sharded table: a binding table name, unqualified while the
/// session is in the logical database, or qualified by the logical database. Used for
/// statements the parser cannot read and statements whose table names it does not report.
pub fn mentions_sharded_table(pos: &Positions<'_>, cx: AnalyzeContext<'_>) -> bool {
    token_mentions_sharded_table(pos.decoded_sql(), pos.tokens, cx)
}

/// [`mentions_sharded_table`] on raw tokens.
pub fn token_mentions_sharded_table(
    sql: &[u8],
    tokens: &[crate::sql::lexer::Token],
    cx: AnalyzeContext<'_>,
) -> bool {
    !sharded_table_tokens(sql, tokens, cx).is_empty()
}

/// The tokens that name sharded tables, found without parsing: each span covers the table
/// name and its `db.` qualifier when it has one.
pub fn sharded_table_tokens(
    sql: &[u8],
    tokens: &[crate::sql::lexer::Token],
    cx: AnalyzeContext<'_>,
) -> Vec<(TokSpan, TableId)> {
    let mode = crate::sql::lexer::LexMode::default();
    let name = |t: &crate::sql::lexer::Token| crate::sql::lexer::ident_text(sql, t, mode);
    let mut out = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        if !matches!(t.kind, TokenKind::Word | TokenKind::QuotedIdent) {
            continue;
        }
        let Some(table) = cx.config.binding_table(&name(t)) else {
            continue;
        };
        let dotted = i >= 1 && tokens[i - 1].is_punct(sql, ".");
        let span = if dotted {
            let qualified_by_logical = i >= 2
                && cx
                    .config
                    .sharding
                    .logical_database
                    .eq_ignore_ascii_case(&name(&tokens[i - 2]));
            if !qualified_by_logical {
                continue;
            }
            TokSpan {
                first: (i - 2) as u32,
                last: i as u32,
            }
        } else if cx.db_is_logical {
            TokSpan::one(i as u32)
        } else {
            continue;
        };
        out.push((span, table));
    }
    out
}
