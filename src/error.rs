//! Errors of every layer, each mapping to the MySQL error a client receives.
//!
//! Backend errors keep their own code, SQLSTATE and message. The proxy's own errors use
//! MySQL codes chosen to say what happened (the table is in `docs/errors.md`).

use thiserror::Error;

/// ER_CONNECTION_KILLED: the session is closed by the proxy (or a KILL).
pub const ER_CONNECTION_KILLED: u16 = 1927;
/// ER_NOT_SUPPORTED_YET: a statement the proxy does not route (yet).
pub const ER_NOT_SUPPORTED_YET: u16 = 1235;
/// The server runs with an option that prevents the statement (`--read-only`): MariaDB's
/// answer to a write on a replica, and the proxy's to a write during a split brain.
pub const ER_OPTION_PREVENTS_STATEMENT: u16 = 1290;
/// ER_NO_PARTITION_FOR_GIVEN_VALUE: a write the proxy cannot place on a shard.
pub const ER_NO_PARTITION_FOR_GIVEN_VALUE: u16 = 1526;
/// ER_TRUNCATED_WRONG_VALUE: an order id that is not a decimal integer.
pub const ER_TRUNCATED_WRONG_VALUE: u16 = 1292;
/// ER_CONNECT_TO_FOREIGN_DATA_SOURCE: a datasource (or the index table) is unreachable.
pub const ER_CONNECT_TO_FOREIGN_DATA_SOURCE: u16 = 1429;
/// ER_ACCESS_DENIED_ERROR.
pub const ER_ACCESS_DENIED_ERROR: u16 = 1045;
/// ER_UNKNOWN_COM_ERROR: a protocol command the proxy does not serve.
pub const ER_UNKNOWN_COM_ERROR: u16 = 1047;
/// ER_UNKNOWN_CHARACTER_SET: a client character set the proxy refuses.
pub const ER_UNKNOWN_CHARACTER_SET: u16 = 1115;
/// ER_QUERY_INTERRUPTED: a statement stopped by KILL QUERY (or KILL) while it waited for a
/// backend connection.
pub const ER_QUERY_INTERRUPTED: u16 = 1317;
/// A variable given a value it cannot take (`SET NAMES ucs2`: not a client character set).
pub const ER_WRONG_VALUE_FOR_VAR: u16 = 1231;
/// ER_PARSE_ERROR.
pub const ER_PARSE_ERROR: u16 = 1064;
/// ER_TABLE_NOT_LOCKED: a table `LOCK TABLES` did not lock, while tables are locked.
pub const ER_TABLE_NOT_LOCKED: u16 = 1100;
/// ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION: a statement a `READ ONLY` transaction may not
/// run (SQLSTATE 25006).
pub const ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION: u16 = 1792;
/// ER_NO_SUCH_THREAD: KILL of a connection id the client may not kill.
pub const ER_NO_SUCH_THREAD: u16 = 1094;
/// ER_NET_PACKET_TOO_LARGE.
pub const ER_NET_PACKET_TOO_LARGE: u16 = 1153;
/// ER_NO_DB_ERROR.
pub const ER_NO_DB_ERROR: u16 = 1046;
/// ER_SPECIFIC_ACCESS_DENIED_ERROR: administration statements are not forwarded.
pub const ER_SPECIFIC_ACCESS_DENIED_ERROR: u16 = 1227;
/// ER_DBACCESS_DENIED_ERROR: the physical and meta databases are not reachable by clients.
pub const ER_DBACCESS_DENIED_ERROR: u16 = 1044;
/// ER_STATEMENT_TIMEOUT (MariaDB): a statement ran past the datasource's query timeout.
pub const ER_STATEMENT_TIMEOUT: u16 = 1969;
/// ER_UNKNOWN_ERROR: a fault inside the proxy.
pub const ER_UNKNOWN_ERROR: u16 = 1105;
/// ER_ERROR_DURING_COMMIT: a COMMIT failed.
pub const ER_ERROR_DURING_COMMIT: u16 = 1180;
/// ER_EMPTY_QUERY: a statement of nothing but white space and comments.
pub const ER_EMPTY_QUERY: u16 = 1065;
/// ER_SP_DOES_NOT_EXIST: also a `ROLLBACK TO` or `RELEASE` of an unknown savepoint.
pub const ER_SP_DOES_NOT_EXIST: u16 = 1305;
/// ER_WRONG_ARGUMENTS: a malformed execution, or a LIMIT that is not a number.
pub const ER_WRONG_ARGUMENTS: u16 = 1210;
/// ER_UNKNOWN_STMT_HANDLER: a prepared statement id the session does not hold.
pub const ER_UNKNOWN_STMT_HANDLER: u16 = 1243;
/// ER_UNSUPPORTED_PS: a statement the prepared-statement protocol does not take.
pub const ER_UNSUPPORTED_PS: u16 = 1295;
/// ER_MAX_PREPARED_STMT_COUNT_REACHED: more prepared statements than a session may hold.
pub const ER_MAX_PREPARED_STMT_COUNT_REACHED: u16 = 1461;
/// ER_STMT_HAS_NO_OPEN_CURSOR: COM_STMT_FETCH without a cursor.
pub const ER_STMT_HAS_NO_OPEN_CURSOR: u16 = 1421;
/// ER_LOAD_INFILE_CAPABILITY_DISABLED (MariaDB): LOAD DATA LOCAL that the user or the
/// client has not enabled.
pub const ER_LOAD_INFILE_CAPABILITY_DISABLED: u16 = 4166;
/// ER_DUP_ENTRY: a duplicate key (the index table's rows, the lease table's).
pub const ER_DUP_ENTRY: u16 = 1062;
/// ER_NO_SUCH_TABLE.
pub const ER_NO_SUCH_TABLE: u16 = 1146;
/// ER_LOCK_WAIT_TIMEOUT.
pub const ER_LOCK_WAIT_TIMEOUT: u16 = 1205;
/// ER_LOCK_DEADLOCK.
pub const ER_LOCK_DEADLOCK: u16 = 1213;

/// An error that reaches the client as a MySQL error packet.
#[derive(Debug, Clone, Error)]
pub enum ProxyError {
    /// The client's statement is refused or invalid; the session continues.
    #[error("{message}")]
    Client {
        /// MySQL error code.
        code: u16,
        /// SQLSTATE.
        state: [u8; 5],
        /// Message.
        message: String,
    },
    /// The backend refused the statement: its error, unchanged.
    #[error("backend error {code}: {}", String::from_utf8_lossy(.message))]
    Backend {
        /// Backend error code.
        code: u16,
        /// Backend SQLSTATE.
        state: [u8; 5],
        /// Backend message bytes.
        message: Vec<u8>,
    },
    /// A datasource or the index table cannot be reached in time.
    #[error("{0}")]
    Unavailable(String),
    /// The connection to the client or a backend failed mid-command.
    #[error("i/o: {0}")]
    Io(String),
    /// A fault in the proxy itself.
    #[error("internal error: {0}")]
    Internal(String),
    /// A merge of several shards' results, or a cursor, that would hold more than
    /// `sharding.merge_row_cap` rows or groups in memory: refused as not supported yet
    /// (1235), and counted apart (`merge_row_cap_hits`). The text says what was refused.
    #[error("routekey-proxy doesn't yet support {0}")]
    MergeCap(String),
    /// The client connection failed: nothing more can be sent to it.
    #[error("client connection lost: {0}")]
    ClientGone(String),
    /// What the proxy kept about a statement no longer matches what a backend answered
    /// (a combined scatter's column description, [`crate::merge::columns`]): the engine
    /// runs the statement again without it, before anything reached the client. Never
    /// sent to a client as such.
    #[error("stale: {0}")]
    Stale(String),
}

impl ProxyError {
    /// A client-side error with a code and SQLSTATE.
    pub fn client(code: u16, state: &[u8; 5], message: impl Into<String>) -> Self {
        Self::Client {
            code,
            state: *state,
            message: message.into(),
        }
    }

    /// 1317: the statement was stopped by `KILL QUERY` (or `KILL`).
    pub fn interrupted() -> Self {
        Self::client(
            ER_QUERY_INTERRUPTED,
            b"70100",
            "Query execution was interrupted",
        )
    }

    /// A statement the proxy does not route yet.
    pub fn not_yet(what: impl std::fmt::Display) -> Self {
        Self::client(
            ER_NOT_SUPPORTED_YET,
            b"42000",
            format!("routekey-proxy doesn't yet support {what}"),
        )
    }

    /// A statement the proxy will not run.
    pub fn unsupported(what: impl std::fmt::Display) -> Self {
        Self::client(
            ER_NOT_SUPPORTED_YET,
            b"42000",
            format!("routekey-proxy does not support {what}"),
        )
    }

    /// 1227: an account, privilege, database or server administration statement (`what`
    /// names it), which the proxy does not pass to the shards' servers.
    pub fn administrative(what: impl std::fmt::Display) -> Self {
        Self::client(
            ER_SPECIFIC_ACCESS_DENIED_ERROR,
            b"42000",
            format!(
                "Access denied; routekey-proxy does not forward account, privilege, database or server administration statements ({what}): run them on the servers directly"
            ),
        )
    }

    /// A write the proxy cannot place on a shard.
    pub fn unroutable(message: impl Into<String>) -> Self {
        Self::client(ER_NO_PARTITION_FOR_GIVEN_VALUE, b"HY000", message)
    }

    /// Code, SQLSTATE and message of the error packet.
    pub fn to_packet_parts(&self) -> (u16, [u8; 5], Vec<u8>) {
        match self {
            Self::Client {
                code,
                state,
                message,
            } => (*code, *state, message.clone().into_bytes()),
            Self::Backend {
                code,
                state,
                message,
            } => (*code, *state, message.clone()),
            Self::Unavailable(m) => (
                ER_CONNECT_TO_FOREIGN_DATA_SOURCE,
                *b"HY000",
                format!("Unable to connect to foreign data source: {m}").into_bytes(),
            ),
            Self::Io(m) => (
                ER_CONNECT_TO_FOREIGN_DATA_SOURCE,
                *b"HY000",
                format!("Lost connection to a backend: {m}").into_bytes(),
            ),
            Self::ClientGone(m) => (
                2013,
                *b"HY000",
                format!("Lost connection to the client: {m}").into_bytes(),
            ),
            Self::MergeCap(m) => (
                ER_NOT_SUPPORTED_YET,
                *b"42000",
                format!("routekey-proxy doesn't yet support {m}").into_bytes(),
            ),
            // Only when the statement run again met it again (a table altered twice at once).
            Self::Stale(m) => (
                1615,
                *b"HY000",
                format!("routekey-proxy: {m} twice in a row; run the statement again").into_bytes(),
            ),
            Self::Internal(m) => (
                ER_UNKNOWN_ERROR,
                *b"HY000",
                format!("routekey-proxy internal error: {m}").into_bytes(),
            ),
        }
    }
}
