//! Whether a SELECT may be answered by a replica (issue 26): it reads, and needs nothing
//! of the one connection a session's writes and locks live on. Decided from tokens alone,
//! erring toward the primary: a word that might lock, write or take a named lock sends
//! the statement to the primary.

use super::lexer::{Token, TokenKind};

/// Words whose presence keeps a SELECT on the primary: locking reads (`FOR UPDATE`,
/// `FOR SHARE`, `LOCK IN SHARE MODE`), `INTO` (variables, files), named locks, sequences.
const PRIMARY_WORDS: &[&str] = &[
    "update",
    "share",
    "lock",
    "into",
    "get_lock",
    "release_lock",
    "release_all_locks",
    "is_used_lock",
    "is_free_lock",
    "nextval",
    "lastval",
    "setval",
    "next",
    "previous",
];

/// Whether the SELECT `sql` (its `tokens`) may run on a replica: no user variable
/// assigned, no executable comment (it may hide any of these), no word of
/// [`PRIMARY_WORDS`], no `LAST_INSERT_ID(expr)` (it sets the session's value), no system
/// variable (`@@read_only`, `@@last_gtid`, `@@gtid_binlog_pos`: a server's own state, which
/// an application reads of the server it writes to).
pub fn replica_may_answer(sql: &[u8], tokens: &[Token]) -> bool {
    for (i, t) in tokens.iter().enumerate() {
        match t.kind {
            TokenKind::ExecCommentOpen | TokenKind::SystemVariable => return false,
            TokenKind::Punct if t.is_punct(sql, ":=") => return false,
            TokenKind::Word => {
                if PRIMARY_WORDS.iter().any(|w| t.is_word(sql, w)) {
                    return false;
                }
                if t.is_word(sql, "last_insert_id")
                    && tokens.get(i + 1).is_some_and(|n| n.is_punct(sql, "("))
                    && tokens.get(i + 2).is_some_and(|n| !n.is_punct(sql, ")"))
                {
                    return false;
                }
            }
            _ => {}
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::lexer::{LexMode, lex};

    fn may(sql: &str) -> bool {
        let lexed = lex(sql.as_bytes(), LexMode::default());
        replica_may_answer(sql.as_bytes(), &lexed.tokens)
    }

    #[test]
    fn plain_reads_may_go_to_a_replica() {
        assert!(may("SELECT * FROM t_order WHERE order_id = 5"));
        assert!(may("SELECT COUNT(*), LAST_INSERT_ID() FROM t_order"));
        assert!(may("SELECT 'for update' AS note, @x FROM dual"));
    }

    #[test]
    fn reads_that_need_the_primary() {
        for sql in [
            "SELECT * FROM t_order WHERE order_id = 5 FOR UPDATE",
            "SELECT * FROM t_order WHERE order_id = 5 LOCK IN SHARE MODE",
            "SELECT * FROM t_order FOR SHARE",
            "SELECT note INTO @n FROM t_order WHERE order_id = 5",
            "SELECT GET_LOCK('a', 1)",
            "SELECT @n := note FROM t_order",
            "SELECT NEXT VALUE FOR s",
            "SELECT NEXTVAL(s)",
            "SELECT LAST_INSERT_ID(7)",
            "SELECT /*!40000 SQL_NO_CACHE */ 1",
            "SELECT @@read_only",
            "SELECT @@global.gtid_binlog_pos, order_id FROM t_order",
        ] {
            assert!(!may(sql), "{sql}");
        }
    }
}
