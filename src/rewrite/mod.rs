//! Rewriting a statement for one shard: logical table names become physical ones, session
//! functions become their values, an INSERT keeps only the shard's rows, and a statement
//! that runs on several shards gets the columns and clauses its merge needs.
//!
//! Edits replace byte ranges of the client's original bytes; everything else (comments,
//! optimizer hints, modifiers, literals, odd bytes in `_binary` strings) goes out exactly as
//! the client sent it. A rendered statement also lists the parameters its `?` placeholders
//! take, in order, so a prepared statement's execution binds what each shard's statement
//! needs (a copied expression takes its parameters again; a replaced one none).

mod session_fns;
mod shard;
mod statement;

pub use session_fns::SessionValues;
pub use shard::{KeyEdits, row_segments, shard_edits, unsharded_edits};
pub use statement::{Edit, Frag, Param, Rendered, Segment, Statement, quote_string};

pub use crate::sql::quote_ident;

#[cfg(test)]
mod analysis_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::TokSpan;
    use crate::sql::lexer::{LexMode, lex};

    #[test]
    fn quoting() {
        assert_eq!(quote_ident("a`b"), "`a``b`");
        assert_eq!(quote_string(b"it's"), b"'it''s'");
        assert_eq!(quote_string(b"a\\b"), b"X'615C62'");
    }

    #[test]
    fn edits_apply_inside_segments_and_copies() {
        let sql = b"SELECT a FROM t WHERE k = ? ORDER BY t.b";
        let lexed = lex(sql, LexMode::default());
        let st = Statement {
            sql,
            tokens: &lexed.tokens,
        };
        let t = |text: &str| {
            let i = lexed
                .tokens
                .iter()
                .position(|tok| tok.bytes(sql) == text.as_bytes())
                .unwrap();
            i as u32
        };
        let table_edits = || {
            lexed
                .tokens
                .iter()
                .filter(|tok| tok.bytes(sql) == b"t")
                .map(|tok| Edit {
                    at: tok.range.clone(),
                    with: vec![Frag::text("t_7")],
                })
                .collect::<Vec<_>>()
        };
        let mut edits = table_edits();
        let from = lexed.tokens[t("FROM") as usize].range.start;
        let order_key = TokSpan {
            first: t("ORDER") + 2,
            last: t("b"),
        };
        edits.push(Edit {
            at: from - 1..from - 1,
            with: vec![Frag::text(", "), Frag::Tokens(order_key)],
        });
        let out = st.render(edits);
        assert_eq!(
            String::from_utf8(out.sql).unwrap(),
            "SELECT a, t_7.b FROM t_7 WHERE k = ? ORDER BY t_7.b"
        );
        assert_eq!(out.params, vec![Param::Client(0)]);
        let segs = [
            Segment::Original(0..from),
            Segment::Bytes(b"FROM x".to_vec()),
        ];
        let out = st.render_segments(&segs, table_edits());
        assert_eq!(String::from_utf8(out.sql).unwrap(), "SELECT a FROM x");
        assert!(out.params.is_empty());
    }
}
