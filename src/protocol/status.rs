//! The status word of OK and EOF packets (MariaDB's `SERVER_STATUS_*`, `include/mysql_com.h`),
//! and which of its flags a reply takes from where.
//!
//! Drivers act on these flags: they escape strings by `NO_BACKSLASH_ESCAPES` (PyMySQL,
//! Connector/J, mysql-connector, libmariadb's `mysql_real_escape_string`), so a flag that
//! differs from the mode in force is an injection; they track transactions by `IN_TRANS`
//! and `AUTOCOMMIT`, and read further results by `MORE_RESULTS_EXISTS`. A reply the proxy
//! builds carries the session's flags ([`session`]); a packet relayed from a backend keeps
//! the flags only that backend knows (what the statement did: index use, the transaction
//! it opened, the results a `CALL` still sends) over the session's ([`relayed`]).
//!
//! The `sql_mode` flags are always the session's, the mode the next statement is read
//! under, which is what a driver escapes for. MariaDB 10.11 differs in two places, both an
//! injection against it (a driver escapes the next statement for a mode the server no
//! longer has): the reply of `SET STATEMENT sql_mode = ... FOR ...` carries the statement's
//! mode, and after a stored routine that sets `sql_mode` (the server restores the caller's
//! mode when it returns) the flags keep the routine's until the next `SET`.

/// A transaction is open.
pub const IN_TRANS: u16 = 0x0001;
/// `autocommit` is on.
pub const AUTOCOMMIT: u16 = 0x0002;
/// Another result of the same command follows.
pub const MORE_RESULTS_EXISTS: u16 = 0x0008;
/// The statement used no good index.
pub const NO_GOOD_INDEX_USED: u16 = 0x0010;
/// The statement used no index (a full scan).
pub const NO_INDEX_USED: u16 = 0x0020;
/// A cursor is open for the executed prepared statement.
pub const CURSOR_EXISTS: u16 = 0x0040;
/// The cursor's last row was sent.
pub const LAST_ROW_SENT: u16 = 0x0080;
/// `sql_mode` has `NO_BACKSLASH_ESCAPES`: a backslash in a string is an ordinary character,
/// and clients escape a quote by doubling it.
pub const NO_BACKSLASH_ESCAPES: u16 = 0x0200;
/// The statement was slow (`long_query_time`).
pub const QUERY_WAS_SLOW: u16 = 0x0800;
/// The result set that follows holds a `CALL`'s OUT parameters (binary protocol).
pub const PS_OUT_PARAMS: u16 = 0x1000;
/// The open transaction is read-only.
pub const IN_TRANS_READONLY: u16 = 0x2000;
/// The OK packet carries session-state changes (CLIENT_SESSION_TRACK).
pub const SESSION_STATE_CHANGED: u16 = 0x4000;
/// `sql_mode` has `ANSI_QUOTES` (MariaDB's own flag: `"` quotes identifiers).
pub const ANSI_QUOTES: u16 = 0x8000;

/// Flags that describe the statement that ran, not the session.
pub const STATEMENT: u16 = NO_GOOD_INDEX_USED | NO_INDEX_USED | QUERY_WAS_SLOW;

/// Flags that follow `sql_mode`.
pub const SQL_MODE: u16 = NO_BACKSLASH_ESCAPES | ANSI_QUOTES;

/// The flags a relayed packet takes from the backend that sent it.
const FROM_BACKEND: u16 =
    STATEMENT | IN_TRANS | IN_TRANS_READONLY | MORE_RESULTS_EXISTS | PS_OUT_PARAMS;

/// Whether more statements of the same `COM_QUERY` follow the one being answered (a
/// multi-statement): its final packet then carries [`MORE_RESULTS_EXISTS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoreResults {
    /// Another statement of the query follows.
    Follow,
    /// This statement is the query's last (or its only one).
    None,
}

/// The status word of a reply the proxy builds for a session: `autocommit`, whether a
/// transaction is open and whether it is read-only, the flags of its `sql_mode`
/// ([`sql_mode_flags`]) and whether more results follow in the same command.
pub fn session(
    autocommit: bool,
    in_transaction: bool,
    read_only: bool,
    sql_mode: u16,
    more: MoreResults,
) -> u16 {
    let mut status = sql_mode & SQL_MODE;
    if autocommit {
        status |= AUTOCOMMIT;
    }
    if in_transaction {
        status |= IN_TRANS;
        if read_only {
            status |= IN_TRANS_READONLY;
        }
    }
    if more == MoreResults::Follow {
        status |= MORE_RESULTS_EXISTS;
    }
    status
}

/// The status word of a packet relayed from a backend (`backend`: the status word it
/// sent) to a session whose own word is `session`. The backend knows what the statement
/// did: its index use, the transaction it opened (the first statement on a table with
/// `autocommit` off), the results (and OUT parameters) a `CALL` still has to send. The
/// session knows the rest: `autocommit`, a `BEGIN` no backend saw yet, the statements of
/// the same query still to come, and the `sql_mode` in force (see the module
/// documentation). `SESSION_STATE_CHANGED` is never passed on: the session-state data it
/// announces is the proxy's to write.
pub fn relayed(session: u16, backend: u16) -> u16 {
    let mut taken = FROM_BACKEND;
    if session & (AUTOCOMMIT | IN_TRANS) == AUTOCOMMIT {
        // With autocommit on, only a BEGIN opens a transaction clients see, and the session
        // knows every BEGIN: one a backend reports is the proxy's own, around one
        // statement (pending SET TRANSACTION characteristics, an atomic write).
        taken &= !(IN_TRANS | IN_TRANS_READONLY);
    }
    (session & !SESSION_STATE_CHANGED) | (backend & taken)
}

/// The status flags of an `sql_mode` value as the server reads it back (`@@sql_mode`:
/// comma-separated mode names, combination modes such as `ANSI` already expanded).
pub fn sql_mode_flags(sql_mode: &str) -> u16 {
    let mut flags = 0;
    for mode in sql_mode.split(',').map(str::trim) {
        if mode.eq_ignore_ascii_case("NO_BACKSLASH_ESCAPES") {
            flags |= NO_BACKSLASH_ESCAPES;
        } else if mode.eq_ignore_ascii_case("ANSI_QUOTES") || mode.eq_ignore_ascii_case("ANSI") {
            flags |= ANSI_QUOTES;
        }
    }
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mode_flags_come_from_the_mode_names() {
        assert_eq!(sql_mode_flags(""), 0);
        assert_eq!(
            sql_mode_flags("STRICT_TRANS_TABLES,NO_BACKSLASH_ESCAPES"),
            NO_BACKSLASH_ESCAPES
        );
        assert_eq!(
            sql_mode_flags("REAL_AS_FLOAT,PIPES_AS_CONCAT,ANSI_QUOTES,IGNORE_SPACE,ANSI"),
            ANSI_QUOTES
        );
        assert_eq!(sql_mode_flags("ansi,no_backslash_escapes"), SQL_MODE);
        // A mode whose name only contains another's is not that mode.
        assert_eq!(sql_mode_flags("NO_BACKSLASH_ESCAPES_X"), 0);
    }

    #[test]
    fn a_relayed_word_takes_the_statement_from_the_backend_and_the_session_from_the_proxy() {
        let session_word = session(
            true,
            false,
            false,
            NO_BACKSLASH_ESCAPES,
            MoreResults::Follow,
        );
        assert_eq!(
            session_word,
            AUTOCOMMIT | NO_BACKSLASH_ESCAPES | MORE_RESULTS_EXISTS
        );
        // SET STATEMENT sql_mode = '' FOR ...: the backend ran it without the flag, and the
        // next statement is read under the session's mode again.
        let backend = AUTOCOMMIT | NO_INDEX_USED | SESSION_STATE_CHANGED;
        assert_eq!(
            relayed(session_word, backend),
            AUTOCOMMIT | NO_INDEX_USED | MORE_RESULTS_EXISTS | NO_BACKSLASH_ESCAPES
        );
        // A stale flag of a backend is not passed on.
        assert_eq!(
            relayed(AUTOCOMMIT, AUTOCOMMIT | NO_BACKSLASH_ESCAPES),
            AUTOCOMMIT
        );
        // autocommit off: the statement opened the transaction.
        let off = session(false, false, false, 0, MoreResults::None);
        assert_eq!(relayed(off, IN_TRANS), IN_TRANS);
        // A read-only flag without a transaction is not reported.
        assert_eq!(session(true, false, true, 0, MoreResults::None), AUTOCOMMIT);
        // With autocommit on, a transaction only a backend reports is the proxy's own.
        assert_eq!(
            relayed(AUTOCOMMIT, IN_TRANS | IN_TRANS_READONLY | NO_INDEX_USED),
            AUTOCOMMIT | NO_INDEX_USED
        );
    }
}
