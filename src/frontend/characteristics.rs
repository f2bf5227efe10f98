//! `SET TRANSACTION ...` without `SESSION` or `GLOBAL`: characteristics (isolation level,
//! `READ ONLY`, `READ WRITE`) for the session's next transaction only.
//!
//! The proxy keeps them (`Transaction::set_next_characteristics`) instead of sending them
//! to a backend connection, which another session could get from the pool with them still
//! pending. They reach a backend in front of the transaction they belong to:
//!
//! - `BEGIN`: on each datasource the transaction touches, before its `BEGIN`
//!   (`execute::transaction`).
//! - Otherwise the next statement that reads or writes a table is that transaction, as on
//!   MariaDB: with autocommit on, the statement runs in a transaction of its own
//!   (`SET TRANSACTION ...; START TRANSACTION`, the statement, `COMMIT`); with autocommit
//!   off, the transaction it starts is opened that way and stays open.
//!
//! As on MariaDB (measured on 10.11), a statement that touches no table (`SELECT 1`,
//! `SET @v = 1`, `SHOW ...`) leaves them pending, and so does a statement that fails (a
//! `READ ONLY` transaction's refused `UPDATE`, 1792): the characteristics apply to the
//! next one. One difference: MariaDB also leaves them pending after a statement on
//! non-transactional tables only (MyISAM, `information_schema`); the proxy, which does not
//! know a table's engine, counts that statement as the transaction.

use super::client::Client;
use super::session::Session;
use crate::error::ProxyError;
use crate::sql::lexer::{Token, TokenKind};
use crate::sql::{Analysis, Target, Verb};

/// What [`Session::open_for_characteristics`] did, for
/// [`Session::close_for_characteristics`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ForCharacteristics {
    /// No characteristics pending, a transaction already open, or a statement that is not
    /// a transaction on MariaDB: nothing to do.
    No,
    /// A DDL statement (its implicit commit ends the transaction the characteristics were
    /// for): they are spent when it succeeds.
    Implicit,
    /// A transaction was opened for the statement with the characteristics.
    Opened,
}

impl Session {
    /// Before a data statement runs: opens its transaction with the pending `SET
    /// TRANSACTION` characteristics when it is the transaction they are for.
    pub(super) fn open_for_characteristics(
        &mut self,
        analysis: &Analysis,
        sql: &[u8],
        tokens: &[Token],
    ) -> ForCharacteristics {
        if self.txn.next_characteristics().is_none()
            || self.in_transaction()
            || !touches_tables(analysis, sql, tokens)
        {
            return ForCharacteristics::No;
        }
        if analysis.verb == Verb::Ddl {
            return ForCharacteristics::Implicit;
        }
        self.txn.begin(b"START TRANSACTION");
        ForCharacteristics::Opened
    }

    /// After the statement ran (`ran`: its outcome, results already relayed): with
    /// autocommit on, the transaction opened for it ends (`COMMIT`, or `ROLLBACK` after a
    /// failure); with autocommit off it stays open unless the statement failed. The
    /// characteristics are spent when the statement succeeded and pending again otherwise.
    pub(super) async fn close_for_characteristics<T>(
        &mut self,
        done: ForCharacteristics,
        ran: Result<T, ProxyError>,
    ) -> Result<T, ProxyError> {
        match done {
            ForCharacteristics::No => ran,
            ForCharacteristics::Implicit => {
                if ran.is_ok() {
                    self.txn.clear_next_characteristics();
                }
                ran
            }
            ForCharacteristics::Opened => {
                let chars = self.txn.next_characteristics().map(<[u8]>::to_vec);
                match ran {
                    Ok(value) if self.autocommit => {
                        self.txn.end(b"COMMIT").await?;
                        Ok(value)
                    }
                    Ok(value) => Ok(value),
                    Err(e) => {
                        // Nothing else was in the transaction (none was open before).
                        self.txn.end(b"ROLLBACK").await.ok();
                        if let Some(chars) = chars {
                            self.txn.set_next_characteristics(&chars);
                        }
                        Err(e)
                    }
                }
            }
        }
    }

    /// Answers `SET TRANSACTION ...` (next transaction only) outside a transaction: kept
    /// for the statement that starts the next one.
    pub(super) fn set_next_characteristics(
        &mut self,
        client: &mut Client,
        sql: &[u8],
        more: bool,
    ) -> Result<(), ProxyError> {
        self.txn.set_next_characteristics(sql);
        self.warnings.clear();
        client.ok(&crate::protocol::packets::OkInfo {
            status: self.final_status(more),
            ..Default::default()
        })
    }
}

/// Whether MariaDB would count a statement as a transaction that spends pending
/// characteristics: one that reads or writes a table. `SELECT` and `DO` without `FROM`
/// (or `FROM DUAL` only), `SHOW` and the like do not; `CALL` does (its body may).
fn touches_tables(analysis: &Analysis, sql: &[u8], tokens: &[Token]) -> bool {
    match analysis.verb {
        Verb::Insert | Verb::Update | Verb::Delete | Verb::Ddl => true,
        _ if matches!(analysis.target, Target::Sharded(_)) => true,
        Verb::Select => reads_a_table(sql, tokens),
        Verb::Other => match first_word(sql, tokens) {
            Some(t) if t.is_word(sql, "call") => true,
            Some(t) if t.is_word(sql, "do") => reads_a_table(sql, tokens),
            _ => false,
        },
    }
}

/// A `FROM` followed by something other than `DUAL`, at any depth.
fn reads_a_table(sql: &[u8], tokens: &[Token]) -> bool {
    tokens
        .windows(2)
        .any(|w| w[0].is_word(sql, "from") && !w[1].is_word(sql, "dual"))
}

fn first_word<'t>(sql: &[u8], tokens: &'t [Token]) -> Option<&'t Token> {
    tokens
        .iter()
        .find(|t| t.kind != TokenKind::ExecCommentOpen && !t.is_punct(sql, "("))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::lexer::{LexMode, lex};

    fn touches(sql: &str, verb: Verb) -> bool {
        let lexed = lex(sql.as_bytes(), LexMode::default());
        let analysis = Analysis {
            verb,
            target: Target::Unsharded,
            session_fns: Vec::new(),
            pins: false,
            qualified_tables: Vec::new(),
        };
        touches_tables(&analysis, sql.as_bytes(), &lexed.tokens)
    }

    #[test]
    fn reads_and_writes_of_tables_are_the_transaction() {
        assert!(touches("SELECT * FROM t", Verb::Select));
        assert!(touches("SELECT (SELECT a FROM t) AS x", Verb::Select));
        assert!(touches(
            "select 1 from dual union select a from t",
            Verb::Select
        ));
        assert!(touches("UPDATE t SET a = 1", Verb::Update));
        assert!(touches("INSERT t VALUES (1)", Verb::Insert));
        assert!(touches("DELETE FROM t", Verb::Delete));
        assert!(touches("CREATE TABLE t (a INT)", Verb::Ddl));
        assert!(touches("CALL p()", Verb::Other));
        assert!(touches("DO (SELECT COUNT(*) FROM t)", Verb::Other));
    }

    #[test]
    fn statements_without_tables_leave_the_characteristics_pending() {
        assert!(!touches("SELECT 1", Verb::Select));
        assert!(!touches("SELECT 1 FROM DUAL", Verb::Select));
        assert!(!touches("SELECT @@tx_read_only", Verb::Select));
        assert!(!touches("DO 1", Verb::Other));
        assert!(!touches("SHOW TABLES FROM db", Verb::Other));
        assert!(!touches("HELP 'x'", Verb::Other));
    }
}
