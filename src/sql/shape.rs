//! Reuse of analyses: statements that differ only in literals (and comments, and the
//! amount of whitespace) have the same shape and share one [`Analysis`], so the SQL parser
//! runs once per shape rather than once per statement.

use std::sync::Arc;

use super::Analysis;
use super::lexer::{LexMode, Lexed, TokenKind};

/// The shape of a statement: its tokens with literals replaced by their kind, plus what
/// else the analysis depends on (lexer mode, whether the session is in the logical database).
pub fn shape_key(sql: &[u8], lexed: &Lexed, mode: LexMode, db_is_logical: bool) -> Vec<u8> {
    let mut key = Vec::with_capacity(sql.len() + 1);
    key.push(
        u8::from(mode.no_backslash_escapes)
            | (u8::from(mode.ansi_quotes) << 1)
            | (u8::from(db_is_logical) << 2)
            | (u8::from(mode.pipes_as_concat) << 3),
    );
    for (token, &spaced) in lexed.tokens.iter().zip(&lexed.spaced) {
        if spaced {
            key.push(b' ');
        }
        match token.kind {
            TokenKind::Number => key.push(0x01),
            TokenKind::String => key.push(0x02),
            TokenKind::HexOrBit => key.push(0x03),
            _ => key.extend_from_slice(token.bytes(sql)),
        }
    }
    key
}

/// A statement's digest for logs: its tokens with every literal (string, number, hex, bit)
/// replaced by `?` and comments dropped, so no value a client sent reaches the log.
pub fn digest(sql: &[u8], lexed: &Lexed) -> String {
    let mut out = String::with_capacity(sql.len());
    for (token, &spaced) in lexed.tokens.iter().zip(&lexed.spaced) {
        if spaced && !out.is_empty() {
            out.push(' ');
        }
        match token.kind {
            TokenKind::Number | TokenKind::String | TokenKind::HexOrBit => out.push('?'),
            _ => out.push_str(&String::from_utf8_lossy(token.bytes(sql))),
        }
    }
    out
}

/// A bounded cache of analyses by shape.
#[derive(Clone)]
pub struct AnalysisCache {
    cache: moka::sync::Cache<Vec<u8>, Arc<Analysis>>,
}

impl AnalysisCache {
    /// A cache holding up to `capacity` shapes.
    pub fn new(capacity: u64) -> Self {
        Self {
            cache: moka::sync::Cache::new(capacity),
        }
    }

    /// The analysis of a shape, if kept.
    pub fn get(&self, key: &[u8]) -> Option<Arc<Analysis>> {
        self.cache.get(key)
    }

    /// Keeps an analysis.
    pub fn insert(&self, key: Vec<u8>, analysis: Arc<Analysis>) {
        self.cache.insert(key, analysis);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::lexer::lex;

    fn key(sql: &str) -> Vec<u8> {
        let m = LexMode::default();
        shape_key(sql.as_bytes(), &lex(sql.as_bytes(), m), m, true)
    }

    #[test]
    fn literals_and_comments_do_not_change_the_shape() {
        assert_eq!(
            key("SELECT * FROM t_order WHERE order_id = 1"),
            key("SELECT  *\nFROM t_order /* region='GB' */ WHERE order_id = 123456789")
        );
        assert_eq!(
            key("SELECT * FROM t WHERE a = 'x'"),
            key("SELECT * FROM t WHERE a = 'it''s'")
        );
    }

    #[test]
    fn digests_keep_no_literal() {
        let sql = "INSERT INTO t_order (order_id, buyer) /* buyer 'Ann' */ VALUES (42, 'Ann O''Neil'), (-7, x'ff')";
        let m = LexMode::default();
        let d = digest(sql.as_bytes(), &lex(sql.as_bytes(), m));
        assert_eq!(
            d,
            "INSERT INTO t_order (order_id, buyer) VALUES (?, ?), (-?, ?)"
        );
        assert!(!d.contains("Ann") && !d.contains("42"));
    }

    #[test]
    fn other_differences_do() {
        assert_ne!(
            key("SELECT * FROM t WHERE a = 1"),
            key("SELECT * FROM t WHERE a = '1'")
        );
        assert_ne!(
            key("SELECT * FROM t WHERE a IN (1)"),
            key("SELECT * FROM t WHERE a IN (1, 2)")
        );
        assert_ne!(
            key("SELECT * FROM t WHERE a = -1"),
            key("SELECT * FROM t WHERE a = 1")
        );
        assert_ne!(key("SELECT a<=b"), key("SELECT a< =b"));
        let m = LexMode::default();
        let sql = b"SELECT 1";
        let lexed = lex(sql, m);
        assert_ne!(
            shape_key(sql, &lexed, m, true),
            shape_key(sql, &lexed, m, false)
        );
    }
}
