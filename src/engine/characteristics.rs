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
//! `SET @v = 1`, `SHOW ...`) leaves them pending, and so does a statement the server
//! refused before it opened a table (1146, or a `READ ONLY` transaction's refused `UPDATE`,
//! 1792): the characteristics apply to the next one. One that failed later (1054, 1062)
//! spent them ([`spends_characteristics`]). DDL, `LOCK TABLES` and `UNLOCK TABLES` with
//! tables locked spend them (their implicit commit; `Session::lock_tables` for the latter
//! two). `CREATE`/`DROP TEMPORARY TABLE` leave them pending, and are refused with 1792
//! under a pending `READ ONLY` (the proxy answers, as MariaDB would); `CREATE TEMPORARY
//! TABLE ... SELECT` is a transaction of its own; a temporary sequence's DDL spends them.
//!
//! Differences left:
//! - MariaDB also leaves them pending after a statement on non-transactional tables only
//!   (MyISAM, `information_schema`); the proxy, which does not know a table's engine,
//!   counts that statement as the transaction.
//! - Under `LOCK TABLES`, MariaDB applies them to the next statement on a locked table;
//!   the proxy refuses that statement (1235: the transaction it would open releases the
//!   locks) until `UNLOCK TABLES`.
//! - Statements MariaDB counts as a transaction and the proxy does not (`ANALYZE TABLE`,
//!   `EXPLAIN`, `SET @v = (SELECT ... FROM t)`) leave them pending here: a later write may
//!   get 1792 that MariaDB would run, never the reverse.
//! - `FLUSH`, which spends them on MariaDB, is refused by the proxy.

use super::session::Session;
use crate::error::ProxyError;
use crate::protocol::status::MoreResults;
use crate::sql::characteristics::parse_set_transaction;
use crate::sql::lexer::{Lexed, Token, TokenKind};
use crate::sql::{Analysis, Placement, Verb};
use crate::wire::client::Client;

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
    ///
    /// # Errors
    ///
    /// 1792 for `CREATE`/`DROP TEMPORARY TABLE` under a pending `READ ONLY`, as MariaDB
    /// answers them (they leave the characteristics pending there too).
    pub(super) fn open_for_characteristics(
        &mut self,
        analysis: &Analysis,
        sql: &[u8],
        tokens: &[Token],
    ) -> Result<ForCharacteristics, ProxyError> {
        let Some(chars) = self.txn.next_characteristics() else {
            return Ok(ForCharacteristics::No);
        };
        if self.in_transaction() {
            return Ok(ForCharacteristics::No);
        }
        let role = role_of(analysis, sql, tokens);
        if self.txn.tables_locked() && role != Role::None {
            // A transaction opened for them would release the table locks (MariaDB's
            // START TRANSACTION unlocks tables), and MariaDB applies them to the statement
            // under the locks, which the proxy cannot do on a pooled connection's behalf.
            return Err(ProxyError::not_yet(
                "SET TRANSACTION (next transaction only) followed by a statement on tables under LOCK TABLES: run UNLOCK TABLES first, or use SET SESSION TRANSACTION",
            ));
        }
        match role {
            Role::None => Ok(ForCharacteristics::No),
            Role::TemporaryTable if chars.read_only == Some(true) => Err(read_only_transaction()),
            Role::TemporaryTable => Ok(ForCharacteristics::No),
            Role::ImplicitCommit => Ok(ForCharacteristics::Implicit),
            Role::Transaction if self.state.autocommit => {
                self.txn.begin_statement(b"START TRANSACTION");
                Ok(ForCharacteristics::Opened)
            }
            Role::Transaction => {
                self.txn.begin(b"START TRANSACTION", None);
                Ok(ForCharacteristics::Opened)
            }
        }
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
                // Its implicit commit comes first on MariaDB: spent even when it then fails.
                if matches!(ran, Ok(_) | Err(ProxyError::Backend { .. })) {
                    self.txn.clear_next_characteristics();
                }
                ran
            }
            ForCharacteristics::Opened => {
                let chars = self.txn.next_characteristics();
                match ran {
                    Ok(value) if self.state.autocommit => {
                        self.txn.end(b"COMMIT").await?;
                        Ok(value)
                    }
                    Ok(value) => Ok(value),
                    Err(e) if spends_characteristics(&e) && !self.state.autocommit => {
                        // The transaction it started stays open, with them, as on MariaDB.
                        Err(e)
                    }
                    Err(e) => {
                        // Nothing else was in the transaction (none was open before).
                        self.txn.end(b"ROLLBACK").await.ok();
                        self.txn.statement_rolled_back();
                        if !spends_characteristics(&e) {
                            if let Some(chars) = chars {
                                self.txn.set_next_characteristics(chars);
                            }
                        }
                        Err(e)
                    }
                }
            }
        }
    }

    /// Answers `SET TRANSACTION ...` (next transaction only) outside a transaction: checked
    /// (1064 for a text MariaDB refuses), then kept for the statement that starts the next
    /// transaction, added to what earlier ones set.
    pub(super) fn set_next_characteristics(
        &mut self,
        client: &mut Client,
        sql: &[u8],
        lexed: &Lexed,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        let tokens = &lexed.tokens;
        let after = tokens
            .iter()
            .position(|t| t.is_word(sql, "transaction"))
            .map_or(tokens.len(), |i| i + 1);
        let chars = parse_set_transaction(sql, &tokens[after..]).map_err(syntax_error)?;
        self.txn.set_next_characteristics(chars);
        self.state.warnings.clear();
        client.ok(&crate::protocol::packets::OkInfo {
            status: self.final_status(more),
            ..Default::default()
        })
    }
}

/// MariaDB's answer to a transaction statement it cannot read.
pub(super) fn syntax_error(what: String) -> ProxyError {
    ProxyError::client(
        crate::error::ER_PARSE_ERROR,
        b"42000",
        format!("You have an error in your SQL syntax: {what}"),
    )
}

/// MariaDB's 1792, for a statement a `READ ONLY` transaction may not run.
fn read_only_transaction() -> ProxyError {
    ProxyError::client(
        crate::error::ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION,
        b"25006",
        "Cannot execute statement in a READ ONLY transaction",
    )
}

/// What a statement is to pending characteristics on MariaDB (measured on 10.11).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Touches no table: they stay pending.
    None,
    /// Reads or writes a table: it is the transaction they are for.
    Transaction,
    /// DDL, and a temporary sequence's: its implicit commit spends them (`LOCK TABLES`,
    /// answered apart, spends them too: `Session::lock_tables`).
    ImplicitCommit,
    /// `CREATE`/`DROP TEMPORARY TABLE` without a `SELECT`: they stay pending, and a
    /// pending `READ ONLY` refuses it (1792).
    TemporaryTable,
}

fn role_of(analysis: &Analysis, sql: &[u8], tokens: &[Token]) -> Role {
    if analysis.verb == Verb::Ddl {
        return Role::ImplicitCommit;
    }
    if crate::sql::analyze::temporary_ddl(sql, tokens) {
        let sequence = tokens
            .iter()
            .take_while(|t| !t.is_punct(sql, "("))
            .any(|t| t.is_word(sql, "sequence"));
        return if sequence {
            // MariaDB runs a temporary sequence's DDL under a pending READ ONLY, and it
            // spends them.
            Role::ImplicitCommit
        } else if tokens.iter().any(|t| t.is_word(sql, "select")) {
            Role::Transaction
        } else {
            Role::TemporaryTable
        };
    }
    if touches_tables(analysis, sql, tokens) {
        Role::Transaction
    } else {
        Role::None
    }
}

/// Whether MariaDB would count a statement as a transaction that spends pending
/// characteristics: one that reads or writes a table. `SELECT` and `DO` without `FROM`
/// (or `FROM DUAL` only), `SHOW` and the like do not; `CALL` does (its body may).
fn touches_tables(analysis: &Analysis, sql: &[u8], tokens: &[Token]) -> bool {
    match analysis.verb {
        Verb::Insert | Verb::Update | Verb::Delete | Verb::Ddl => true,
        _ if matches!(analysis.placement, Placement::Sharded(_)) => true,
        Verb::Select => reads_a_table(sql, tokens),
        Verb::Other => match first_word(sql, tokens) {
            Some(t) if t.is_word(sql, "call") => true,
            Some(t) if t.is_word(sql, "do") => reads_a_table(sql, tokens),
            _ => false,
        },
    }
}

/// Whether a statement that failed with `e` spent the characteristics on MariaDB
/// (measured on 10.11): a statement the server refused before it opened a table (1146
/// unknown table, 1049 unknown database, 1142 no privilege; 1064, 1066, 1235 and 1582,
/// found while parsing) or refused for the
/// characteristics themselves (1792, a write in a READ ONLY transaction) leaves them
/// pending; one that failed later (1054 unknown column, 1062 duplicate key, ...) spent
/// them. A statement the proxy refused or that never got an answer leaves them pending.
fn spends_characteristics(e: &ProxyError) -> bool {
    match e {
        ProxyError::Backend { code, .. } => !matches!(
            code,
            1792 | 1146 | 1049 | 1142 | 1044 | 1064 | 1066 | 1235 | 1582
        ),
        _ => false,
    }
}

/// A `FROM` naming a table, at any depth: followed by a name (not `DUAL`, not a common
/// table expression's name, not a table function such as `JSON_TABLE(...)`), and not the
/// `FROM` inside `EXTRACT(YEAR FROM ...)`, `TRIM(... FROM ...)` or `SUBSTRING(... FROM
/// ...)`. A derived table `FROM (SELECT ...)` counts by the `FROM`s inside it. Tables of
/// engines without transactions (MyISAM, `information_schema`, the Sequence engine's
/// `seq_1_to_3`) count too: the proxy does not know a table's engine.
fn reads_a_table(sql: &[u8], tokens: &[Token]) -> bool {
    let ctes = cte_names(sql, tokens);
    // For each open parenthesis: whether it is a function's argument list (a `FROM` there
    // is the function's own) rather than a subquery or a derived table.
    let mut in_function: Vec<bool> = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        if t.is_punct(sql, "(") {
            let function = i > 0
                && matches!(tokens[i - 1].kind, TokenKind::Word)
                && !tokens
                    .get(i + 1)
                    .is_some_and(|n| n.is_word(sql, "select") || n.is_word(sql, "with"));
            in_function.push(function);
        } else if t.is_punct(sql, ")") {
            in_function.pop();
        } else if t.is_word(sql, "from") && !in_function.last().copied().unwrap_or(false) {
            let Some(name) = tokens.get(i + 1) else {
                continue;
            };
            let named = matches!(name.kind, TokenKind::Word | TokenKind::QuotedIdent)
                && !name.is_word(sql, "dual")
                && !tokens.get(i + 2).is_some_and(|n| n.is_punct(sql, "("))
                && !ctes.iter().any(|c| name.bytes(sql).eq_ignore_ascii_case(c));
            if named {
                return true;
            }
        }
    }
    false
}

/// The names every `WITH [RECURSIVE] name [(columns)] AS (...) [, name AS (...)]`
/// declares, at any depth: a common table expression may open the statement, a subquery or
/// a derived table, or an executable comment.
fn cte_names<'s>(sql: &'s [u8], tokens: &[Token]) -> Vec<&'s [u8]> {
    let tokens: Vec<&Token> = tokens.iter().filter(|t| !t.is_exec_marker()).collect();
    let mut names = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        if t.is_word(sql, "with") {
            names.extend(declared(sql, &tokens[i + 1..]));
        }
    }
    names
}

/// The names the list after a `WITH` declares; none when it is not such a list (`WITH
/// ROLLUP`, `WITH CONSISTENT SNAPSHOT`).
fn declared<'s>(sql: &'s [u8], tokens: &[&Token]) -> Vec<&'s [u8]> {
    let mut names = Vec::new();
    let mut j = usize::from(tokens.first().is_some_and(|t| t.is_word(sql, "recursive")));
    loop {
        let Some(name) = tokens
            .get(j)
            .filter(|t| matches!(t.kind, TokenKind::Word | TokenKind::QuotedIdent))
        else {
            return Vec::new();
        };
        j += 1;
        if tokens.get(j).is_some_and(|t| t.is_punct(sql, "(")) {
            let Some(end) = closing(sql, tokens, j) else {
                return Vec::new();
            };
            j = end + 1;
        }
        if !tokens.get(j).is_some_and(|t| t.is_word(sql, "as"))
            || !tokens.get(j + 1).is_some_and(|t| t.is_punct(sql, "("))
        {
            return Vec::new();
        }
        let Some(end) = closing(sql, tokens, j + 1) else {
            return Vec::new();
        };
        names.push(name.bytes(sql));
        j = end + 1;
        if !tokens.get(j).is_some_and(|t| t.is_punct(sql, ",")) {
            return names;
        }
        j += 1;
    }
}

/// Where the parenthesis opened at `open` closes.
fn closing(sql: &[u8], tokens: &[&Token], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (k, t) in tokens.iter().enumerate().skip(open) {
        if t.is_punct(sql, "(") {
            depth += 1;
        } else if t.is_punct(sql, ")") {
            depth -= 1;
            if depth == 0 {
                return Some(k);
            }
        }
    }
    None
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

    /// `f` on `sql`'s tokens and an analysis of verb `verb` on an unsharded table.
    fn on<T>(sql: &str, verb: Verb, f: fn(&Analysis, &[u8], &[Token]) -> T) -> T {
        let lexed = lex(sql.as_bytes(), LexMode::default());
        let analysis = Analysis {
            verb,
            placement: Placement::Unsharded,
            session_fns: Vec::new(),
            pins: false,
            qualified_tables: Vec::new(),
        };
        f(&analysis, sql.as_bytes(), &lexed.tokens)
    }

    fn touches(sql: &str, verb: Verb) -> bool {
        on(sql, verb, touches_tables)
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
        assert!(!touches(
            "SELECT EXTRACT(YEAR FROM NOW()) > 2000",
            Verb::Select
        ));
        assert!(!touches(
            "SELECT TRIM(LEADING 'x' FROM 'xxa')",
            Verb::Select
        ));
        assert!(!touches("SELECT SUBSTRING('abc' FROM 2)", Verb::Select));
        assert!(!touches("SELECT * FROM (SELECT 1 AS a) t", Verb::Select));
        assert!(!touches(
            "WITH x AS (SELECT 1 AS a), y AS (SELECT 2) SELECT * FROM x, y",
            Verb::Select
        ));
        assert!(!touches(
            "SELECT * FROM JSON_TABLE('[1]', '$[*]' COLUMNS (a INT PATH '$')) j",
            Verb::Select
        ));
    }

    #[test]
    fn temporary_table_ddl_leaves_them_pending_unless_it_selects() {
        let role = |sql: &str, verb: Verb| on(sql, verb, role_of);
        assert_eq!(
            role("CREATE TEMPORARY TABLE t (a INT)", Verb::Other),
            Role::TemporaryTable
        );
        assert_eq!(
            role("/*!32311 DROP TEMPORARY TABLE IF EXISTS t */", Verb::Other),
            Role::TemporaryTable
        );
        assert_eq!(
            role(
                "CREATE OR REPLACE TEMPORARY TABLE t AS SELECT 1",
                Verb::Other
            ),
            Role::Transaction
        );
        assert_eq!(
            role("CREATE TABLE t (a INT)", Verb::Ddl),
            Role::ImplicitCommit
        );
        assert_eq!(
            role("CREATE TEMPORARY SEQUENCE s", Verb::Other),
            Role::ImplicitCommit
        );
        assert_eq!(role("SELECT 1", Verb::Select), Role::None);
        assert_eq!(role("SELECT a FROM t", Verb::Select), Role::Transaction);
    }

    #[test]
    fn common_table_expressions_at_any_depth_are_no_tables() {
        assert!(!touches(
            "SELECT * FROM (WITH x AS (SELECT 1 AS a) SELECT * FROM x) d",
            Verb::Select
        ));
        assert!(!touches(
            "SELECT (WITH x AS (SELECT 1 AS a) SELECT a FROM x)",
            Verb::Select
        ));
        assert!(!touches(
            "/*!40000 WITH x AS (SELECT 1 AS a) SELECT * FROM x */",
            Verb::Select
        ));
        assert!(!touches(
            "WITH RECURSIVE r (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r",
            Verb::Select
        ));
        assert!(touches(
            "SELECT * FROM (WITH x AS (SELECT a FROM t) SELECT * FROM x) d",
            Verb::Select
        ));
        assert!(touches(
            "SELECT a, COUNT(*) FROM t GROUP BY a WITH ROLLUP",
            Verb::Select
        ));
    }

    #[test]
    fn tables_inside_subqueries_and_ctes_count() {
        assert!(touches("SELECT * FROM (SELECT a FROM t) d", Verb::Select));
        assert!(touches("SELECT EXISTS(SELECT 1 FROM t)", Verb::Select));
        assert!(touches(
            "SELECT COALESCE((SELECT a FROM t), 0)",
            Verb::Select
        ));
        assert!(touches(
            "WITH x AS (SELECT a FROM t) SELECT * FROM x",
            Verb::Select
        ));
        assert!(touches("SELECT 1 FROM `t`", Verb::Select));
    }
}
