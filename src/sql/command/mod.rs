//! Session and transaction commands, recognized from tokens alone: they decide how the
//! session holds its backend connections, so they never depend on the SQL parser (which
//! does not read every form MySQL accepts, such as `SET NAMES x, autocommit = 1`).

mod column;
mod lock;
mod topology;

use lock::LockStatement;
pub use lock::{Lock, LockItem};

use super::TokSpan;
use super::lexer::{Token, TokenKind, ident_text, unescape_string};
use crate::sql::lexer::LexMode;

/// One of a statement's first words as the classifier compares it: lowercased when it is a
/// bare word, kept inline (no allocation) up to 24 bytes.
type Word = compact_str::CompactString;

/// A command the session handles itself, or [`Command::Statement`] for everything else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `LOAD DATA [LOW_PRIORITY | CONCURRENT] LOCAL INFILE ...`: the client's file
    /// ([`crate::sql::load_data`]).
    LoadDataLocal,
    /// `BEGIN`, `START TRANSACTION ...`: replayed as written on each datasource that joins.
    Begin,
    /// `COMMIT [WORK]`.
    Commit,
    /// `ROLLBACK [WORK]`.
    Rollback,
    /// `COMMIT`/`ROLLBACK` with `AND CHAIN` or `RELEASE`.
    ChainOrRelease,
    /// `SAVEPOINT name`.
    Savepoint(String),
    /// `ROLLBACK [WORK] TO [SAVEPOINT] name`.
    RollbackTo(String),
    /// `RELEASE SAVEPOINT name`.
    ReleaseSavepoint(String),
    /// `SET ...` assignments.
    Set(Vec<SetItem>),
    /// `USE db`.
    Use(String),
    /// `SHOW WARNINGS`, `SHOW ERRORS`, `SHOW COUNT(*) WARNINGS`.
    ShowDiagnostics {
        /// ERRORS rather than WARNINGS.
        errors_only: bool,
        /// `COUNT(*)`.
        count: bool,
    },
    /// `SHOW [FULL] TABLES [FROM db] [LIKE 'pattern' | WHERE ...]`.
    ShowTables {
        /// `FULL`: a second column with the table type.
        full: bool,
        /// `FROM db`.
        database: Option<String>,
        /// `LIKE 'pattern'`, unescaped.
        like: Option<Vec<u8>>,
        /// A `WHERE` clause.
        filtered: bool,
    },
    /// A command about one table: `DESCRIBE t`, `SHOW COLUMNS FROM t`, `SHOW CREATE TABLE t`,
    /// `SHOW INDEX FROM t`.
    TableInfo {
        /// Tokens naming the table (`t` or `db.t`).
        table: TokSpan,
        /// `FROM db` after the table (SHOW COLUMNS/INDEX).
        database: Option<TokSpan>,
        /// The result holds the table name in its rows (SHOW CREATE TABLE, SHOW INDEX).
        names_in_rows: bool,
    },
    /// `XA ...`: two-phase commit, not yet supported.
    Xa,
    /// `LOCK TABLES ...`: each datasource locks the tables it holds (every shard's
    /// physical table of a logical one).
    LockTables(Lock),
    /// `UNLOCK TABLES`: on every connection the session holds.
    UnlockTables,
    /// `SHOW TABLE STATUS [FROM db] [LIKE 'pattern' | WHERE ...]`.
    ShowTableStatus {
        /// `FROM db`.
        database: Option<String>,
        /// Byte offset of the `LIKE` or `WHERE` clause, when there is one.
        filter: Option<usize>,
    },
    /// `KILL [CONNECTION | QUERY] id`.
    Kill {
        /// `KILL QUERY`.
        query_only: bool,
        /// The connection id named.
        id: Option<u64>,
        /// `KILL CONNECTION_ID()`: the client's own connection.
        own: bool,
    },
    /// `SHOW ROUTEKEY STATS`: the proxy's route resolution counters (SPEC §8).
    ShowRouteStats,
    /// `SHOW [SESSION | LOCAL] STATUS [LIKE ... | WHERE ...]`: the backend's answer with
    /// the `Ssl_` variables of a connection replaced by the client connection's, which
    /// only the proxy knows (the backend's describe the proxy's own link).
    ShowSessionStatus,
    /// `SHOW DATABASES | SCHEMAS [LIKE 'pattern' | WHERE ...]`: the databases the user may
    /// use (SPEC §8a), never the backend's list.
    ShowDatabases {
        /// Byte offset of the `LIKE` or `WHERE` clause, when there is one.
        filter: Option<usize>,
    },
    /// `SHOW [FULL] PROCESSLIST`: the proxy's own sessions the user may see (SPEC §8a),
    /// never the backend's threads.
    ShowProcesslist {
        /// `FULL`: statements not cut at 100 characters.
        full: bool,
    },
    /// `EXPLAIN ROUTE <statement>`: the plan of the statement, not run (SPEC §8).
    ExplainRoute {
        /// Byte offset where the explained statement starts: right after `ROUTE`, so
        /// comments (route hints) before its verb belong to it.
        body: usize,
    },
    /// `SHOW ROUTEKEY CALLERS`: who asks for ids without a region, most first.
    ShowCallers,
    /// `SHOW ROUTEKEY SHARDS`: each shard's channel, datasource, physical tables and the
    /// state of its datasource's pool.
    ShowRouteShards,
    /// `SHOW ROUTEKEY POOLS`: each datasource's pools: size, open, idle, in use, waits,
    /// connect errors.
    ShowRoutePools,
    /// `SHOW ROUTEKEY TOPOLOGY`: each member of each datasource: role, state, lag, GTID
    /// position, last probe, reads and writes served (issue 26).
    ShowRouteTopology,
    /// `SHOW ROUTEKEY TRANSACTIONS`: the XA branches of ours the resolver found prepared
    /// (issue 27).
    ShowRouteTransactions,
    /// `SELECT ROUTEKEY_WRITE_TOKEN() [[AS] alias]`: the positions of the session's last
    /// writes, for `/*after='TOKEN'*/` on another connection (issue 26).
    WriteToken {
        /// The result column's name: the alias, or the expression as written.
        column: String,
    },
    /// `SELECT NEXT_ORDER_ID(['region' | ?]) [[AS] alias]`: an order id (SPEC §6).
    NextOrderId {
        /// The region given.
        region: RegionArg,
        /// The result column's name: the alias, or the expression as written.
        column: String,
    },
    /// Account, privilege and server administration (`GRANT`, `SET PASSWORD`, `DROP
    /// DATABASE`, `SHUTDOWN`, `LOAD DATA`, `... INTO OUTFILE`, ...): the proxy logs in to
    /// its backends with a service account and never lets clients use it for these.
    Administrative(String),
    /// A statement the proxy refuses outright (dynamic SQL), with the reason.
    Refused(String),
    /// Any other statement: analysed as data.
    Statement,
}

/// The argument of `NEXT_ORDER_ID(...)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegionArg {
    /// None: route key 0.
    Missing,
    /// A string literal.
    Literal(String),
    /// `?`: a prepared statement's parameter.
    Param,
}

/// One assignment of a `SET` statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetItem {
    /// `NAMES cs [COLLATE c]`, `CHARACTER SET cs`, `CHARSET cs`: the character set named
    /// (`None` for DEFAULT).
    Names(Option<String>),
    /// A session system variable, name in lower case.
    SessionVar(String),
    /// `GLOBAL x`, `@@global.x`, `PERSIST x`.
    GlobalVar(String),
    /// `@x = ...`: the variable's name, lower case, with its `@`.
    UserVar(String),
    /// `[SESSION] TRANSACTION ...`; `session` false for the next transaction only.
    Transaction {
        /// Applies to the session, not only the next transaction.
        session: bool,
    },
    /// `PASSWORD`, `ROLE`, `DEFAULT ROLE`: account administration.
    Administrative(String),
    /// Anything else.
    Other,
}

/// Recognizes a command from a statement's tokens. Executable comments the server runs
/// (`/*!50000 GRANT ... */`) are read as the statement they hold.
pub fn classify(sql: &[u8], all_tokens: &[Token], mode: LexMode) -> Command {
    if !all_tokens.iter().any(Token::is_exec_marker) {
        // Most statements: the tokens as they are (no copy).
        return classify_plain(sql, all_tokens, mode);
    }
    // The statement without executable-comment delimiters, and where each token came from.
    let (origin, tokens): (Vec<usize>, Vec<Token>) = all_tokens
        .iter()
        .enumerate()
        .filter(|(_, t)| !t.is_exec_marker())
        .map(|(i, t)| (i, t.clone()))
        .unzip();
    let command = classify_plain(sql, &tokens, mode);
    match command {
        Command::TableInfo {
            table,
            database,
            names_in_rows,
        } => {
            let back = |s: TokSpan| TokSpan {
                first: origin[s.first as usize] as u32,
                last: origin[s.last as usize] as u32,
            };
            Command::TableInfo {
                table: back(table),
                database: database.map(back),
                names_in_rows,
            }
        }
        other => other,
    }
}

fn classify_plain(sql: &[u8], tokens: &[Token], mode: LexMode) -> Command {
    // Inline strings: the first words of a statement are keywords, short enough to need no
    // allocation (this runs for every statement).
    let words: Vec<Word> = tokens
        .iter()
        .take(6)
        .map(|t| {
            let text = String::from_utf8_lossy(t.bytes(sql));
            let mut word = Word::from(text.as_ref());
            if t.kind == TokenKind::Word {
                word.make_ascii_lowercase();
            }
            word
        })
        .collect();
    let w = |i: usize| words.get(i).map(Word::as_str).unwrap_or("");
    if crate::sql::load_data::is_local(sql, tokens) {
        return Command::LoadDataLocal;
    }
    if let Some(what) = administrative(sql, tokens, &words) {
        return Command::Administrative(what);
    }
    if let Some(statement) = lock::classify(sql, tokens, mode) {
        return match statement {
            LockStatement::Lock(lock) => Command::LockTables(lock),
            LockStatement::Unlock => Command::UnlockTables,
            LockStatement::Malformed => Command::Statement,
        };
    }
    if let Some(refused) = backend_diagnostics(sql, tokens) {
        return refused;
    }
    match w(0) {
        "prepare" | "deallocate" => return dynamic_sql(),
        "execute" => return dynamic_sql(),
        "drop" if w(1) == "prepare" => return dynamic_sql(),
        "set" if w(1) == "statement" => {
            // SET STATEMENT var = value [, ...] FOR <statement>: the statement decides.
            let Some(i) = set_statement_for(sql, tokens) else {
                return Command::Statement;
            };
            if let Some(name) = privileged_statement_variable(sql, &tokens[..i], mode) {
                return Command::Administrative(format!("SET STATEMENT {name}"));
            }
            // Only a data statement: the proxy handles SET, USE, transactions, SHOW and KILL
            // itself, and forwarding them whole would change a pooled connection's state
            // behind its back (`... FOR SET time_zone = ...`).
            return match classify_plain(sql, &tokens[i + 1..], mode) {
                c @ (Command::Administrative(_) | Command::Refused(_)) => c,
                Command::Statement => Command::Statement,
                _ => Command::Refused(
                    "SET STATEMENT ... FOR a statement that is not a query or a data change (SET, USE, a transaction statement, SHOW, KILL): run it without SET STATEMENT".to_owned(),
                ),
            };
        }
        _ => {}
    }
    let command = classify_session(sql, tokens, &words, mode);
    if let Command::Set(items) = &command {
        if let Some(SetItem::Administrative(what)) = items
            .iter()
            .find(|i| matches!(i, SetItem::Administrative(_)))
        {
            return Command::Administrative(what.clone());
        }
        if let Some(name) = items.iter().find_map(|i| match i {
            SetItem::SessionVar(name) if is_privileged_variable(name) => Some(name),
            _ => None,
        }) {
            return Command::Administrative(format!("SET {name}"));
        }
    }
    command
}

/// Session variables MariaDB lets only SUPER (or BINLOG ADMIN, REPLICATION ...) accounts
/// set: they keep a session's writes out of the binary log or the general log, or forge
/// replication identities. The backend account may hold those privileges; a client of the
/// proxy never gets them (1227, as MariaDB answers an account without them).
const PRIVILEGED_VARIABLES: [&str; 17] = [
    "sql_log_bin",
    "sql_log_off",
    "pseudo_thread_id",
    "pseudo_slave_mode",
    "server_id",
    "gtid_domain_id",
    "gtid_seq_no",
    "skip_replication",
    "binlog_format",
    "binlog_annotate_row_events",
    "binlog_direct_non_transactional_updates",
    "binlog_row_image",
    "binlog_row_metadata",
    "wsrep_on",
    "debug",
    "debug_dbug",
    "debug_sync",
];

/// Whether `name` (lower case) is one of [`PRIVILEGED_VARIABLES`].
fn is_privileged_variable(name: &str) -> bool {
    PRIVILEGED_VARIABLES.contains(&name)
}

/// The first privileged variable `SET STATEMENT a = 1, b = 2 FOR ...` sets (`tokens` from
/// `STATEMENT` up to `FOR`).
fn privileged_statement_variable(sql: &[u8], tokens: &[Token], mode: LexMode) -> Option<String> {
    let mut depth = 0i32;
    tokens.windows(2).enumerate().find_map(|(i, pair)| {
        if pair[0].is_punct(sql, "(") {
            depth += 1;
        } else if pair[0].is_punct(sql, ")") {
            depth -= 1;
        }
        let starts_item =
            i == 0 || tokens[i - 1].is_punct(sql, ",") || tokens[i - 1].is_word(sql, "statement");
        let named = depth == 0
            && starts_item
            && matches!(pair[0].kind, TokenKind::Word | TokenKind::QuotedIdent)
            && pair[1].is_punct(sql, "=");
        let name = ident_text(sql, &pair[0], mode).to_ascii_lowercase();
        (named && is_privileged_variable(&name)).then_some(name)
    })
}

/// `GET DIAGNOSTICS` and `@@warning_count` / `@@error_count` read the backend connection's
/// last statement, which on a pooled connection may be another session's (its warning
/// texts hold its data): refused, pointing at what the proxy answers for the session.
fn backend_diagnostics(sql: &[u8], tokens: &[Token]) -> Option<Command> {
    let counter = |t: &Token| {
        let text = String::from_utf8_lossy(t.bytes(sql)).to_ascii_lowercase();
        text.ends_with("warning_count") || text.ends_with("error_count")
    };
    let reads_counter = tokens.iter().enumerate().any(|(i, t)| {
        (t.kind == TokenKind::SystemVariable && counter(t))
            || (t.kind == TokenKind::Word
                && counter(t)
                && i >= 2
                && tokens[i - 1].is_punct(sql, ".")
                && tokens[i - 2].kind == TokenKind::SystemVariable)
    });
    let diagnostics = tokens.windows(2).take(2).any(|w| {
        w[0].is_word(sql, "get")
            && (w[1].is_word(sql, "diagnostics")
                || w[1].is_word(sql, "current")
                || w[1].is_word(sql, "stacked"))
    });
    (reads_counter || diagnostics).then(|| {
        Command::Refused(
            "GET DIAGNOSTICS, @@warning_count and @@error_count (they would read a pooled backend connection's last statement, perhaps another session's): SHOW WARNINGS and SHOW COUNT(*) WARNINGS answer for this session".to_owned(),
        )
    })
}

fn dynamic_sql() -> Command {
    Command::Refused(
        "dynamic SQL (PREPARE ... FROM, EXECUTE, EXECUTE IMMEDIATE): the statement it runs could not be routed or checked; use the binary protocol's prepared statements".to_owned(),
    )
}

fn classify_session(sql: &[u8], tokens: &[Token], words: &[Word], mode: LexMode) -> Command {
    let w = |i: usize| words.get(i).map(Word::as_str).unwrap_or("");
    let n = tokens.len();
    let name_at = |i: usize| tokens.get(i).map(|t| ident_text(sql, t, mode));
    match w(0) {
        "begin" if n == 1 || (n == 2 && w(1) == "work") => Command::Begin,
        "start" if w(1) == "transaction" => Command::Begin,
        "commit" | "rollback" => transaction_end(sql, tokens, words),
        "savepoint" if n == 2 => Command::Savepoint(name_at(1).unwrap_or_default()),
        "release" if w(1) == "savepoint" && n == 3 => {
            Command::ReleaseSavepoint(name_at(2).unwrap_or_default())
        }
        "set" if w(1) != "statement" => Command::Set(set_items(sql, &tokens[1..], mode)),
        "use" => {
            // `USE db` changes the database of the backend connection that runs it: the
            // proxy must see that one name, and refuses anything else.
            match &tokens[1..] {
                [name] if matches!(name.kind, TokenKind::Word | TokenKind::QuotedIdent) => {
                    Command::Use(ident_text(sql, name, mode))
                }
                _ => {
                    Command::Refused("USE with anything but one database name (USE db)".to_owned())
                }
            }
        }
        "xa" => Command::Xa,
        "kill" => {
            // KILL [HARD | SOFT] [CONNECTION | QUERY [ID]] id: the proxy ends its own
            // sessions (the kill is always hard); a query id is the backend's, not one of
            // the proxy's connection ids.
            let verb = if w(1) == "hard" || w(1) == "soft" {
                2
            } else {
                1
            };
            if w(verb) == "query" && w(verb + 1) == "id" {
                return Command::Refused(
                    "KILL QUERY ID (it takes a backend query id; the proxy kills by its own connection ids: KILL QUERY <connection id>)".to_owned(),
                );
            }
            let by_user = w(verb) == "user"
                || (w(verb) == "connection" || w(verb) == "query") && w(verb + 1) == "user";
            if by_user {
                return Command::Refused(
                    "KILL ... USER (the proxy kills by its own connection ids: SHOW PROCESSLIST lists them)".to_owned(),
                );
            }
            let query_only = w(verb) == "query";
            let own = tokens.windows(3).any(|t| {
                t[0].is_word(sql, "connection_id")
                    && t[1].is_punct(sql, "(")
                    && t[2].is_punct(sql, ")")
            });
            let id = tokens
                .last()
                .filter(|t| t.kind == TokenKind::Number)
                .and_then(|t| std::str::from_utf8(t.bytes(sql)).ok()?.parse().ok());
            Command::Kill {
                query_only,
                id: if own { None } else { id },
                own,
            }
        }
        "show" => show(sql, tokens, words, mode),
        "select" if w(1) == "next_order_id" => next_order_id(sql, tokens, mode),
        "select" if w(1) == "routekey_write_token" => topology::write_token(sql, tokens, mode)
            .map_or(Command::Statement, |column| Command::WriteToken { column }),
        "desc" | "describe" if n >= 2 => table_info(sql, tokens, 1, false, false),
        // The body starts right after ROUTE, so hints before its verb are read.
        "explain" if w(1) == "route" && n >= 3 => Command::ExplainRoute {
            body: tokens[1].range.end,
        },
        // EXPLAIN tbl is DESCRIBE tbl; EXPLAIN SELECT ... is a statement.
        "explain"
            if n >= 2
                && !matches!(
                    w(1),
                    "select"
                        | "update"
                        | "delete"
                        | "insert"
                        | "replace"
                        | "extended"
                        | "partitions"
                        | "format"
                        | "analyze"
                        | "("
                        | "with"
                        | "table"
                ) =>
        {
            table_info(sql, tokens, 1, false, false)
        }
        _ if calls_next_order_id(sql, tokens) => Command::Refused(NEXT_ORDER_ID_FORMS.to_owned()),
        _ => Command::Statement,
    }
}

/// What [`Command::Refused`] says of `NEXT_ORDER_ID` used in any other way.
const NEXT_ORDER_ID_FORMS: &str = "NEXT_ORDER_ID() other than alone in `SELECT NEXT_ORDER_ID(['region' | ?]) [[AS] alias]`; to insert a new order, leave order_id out of the INSERT and the proxy issues one";

/// A call of the proxy's own function `NEXT_ORDER_ID(`, which no backend knows.
fn calls_next_order_id(sql: &[u8], tokens: &[Token]) -> bool {
    tokens
        .windows(2)
        .any(|w| w[0].is_word(sql, "next_order_id") && w[1].is_punct(sql, "("))
}

/// `SELECT NEXT_ORDER_ID()`, `SELECT NEXT_ORDER_ID('GB')`, with an optional alias; other
/// uses of the function are statements (the server does not know it and says so).
fn next_order_id(sql: &[u8], tokens: &[Token], mode: LexMode) -> Command {
    let Some(open) = tokens.get(2).filter(|t| t.is_punct(sql, "(")) else {
        // A column named next_order_id.
        return if calls_next_order_id(sql, tokens) {
            Command::Refused(NEXT_ORDER_ID_FORMS.to_owned())
        } else {
            Command::Statement
        };
    };
    let (region, close) = match tokens.get(3) {
        Some(t) if t.is_punct(sql, ")") => (RegionArg::Missing, 3),
        Some(t)
            if t.kind == TokenKind::String
                && tokens.get(4).is_some_and(|c| c.is_punct(sql, ")")) =>
        {
            (RegionArg::Literal(ident_text(sql, t, mode)), 4)
        }
        Some(t)
            if t.kind == TokenKind::Placeholder
                && tokens.get(4).is_some_and(|c| c.is_punct(sql, ")")) =>
        {
            (RegionArg::Param, 4)
        }
        _ => return Command::Refused(NEXT_ORDER_ID_FORMS.to_owned()),
    };
    let _ = open;
    let Some(column) = column::call_column(sql, tokens, close, mode) else {
        return Command::Refused(NEXT_ORDER_ID_FORMS.to_owned());
    };
    Command::NextOrderId { region, column }
}

/// Objects whose CREATE/DROP/ALTER/RENAME is administration (accounts, databases, stored
/// programs), not data.
const ADMIN_OBJECTS: [&str; 9] = [
    "user",
    "role",
    "server",
    "database",
    "schema",
    "procedure",
    "function",
    "trigger",
    "event",
];

/// Statements that manage accounts, privileges, databases, replication, files on the
/// server or the server itself.
fn administrative(sql: &[u8], tokens: &[Token], words: &[Word]) -> Option<String> {
    let w = |i: usize| words.get(i).map(Word::as_str).unwrap_or("");
    let label = |n: usize| {
        (0..n)
            .map(|i| w(i).to_ascii_uppercase())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let found = match (w(0), w(1)) {
        (
            "grant" | "revoke" | "shutdown" | "install" | "uninstall" | "flush" | "purge"
            | "binlog" | "cache" | "backup",
            _,
        ) => Some(label(1)),
        ("change", "master" | "replication") => Some(label(2)),
        ("start" | "stop", "slave" | "replica" | "all") => Some(label(2)),
        ("reset", "master" | "slave" | "replica" | "binary") => Some(label(2)),
        ("load", "data") => Some(
            "LOAD DATA INFILE, which reads a file on the database server's host; LOAD DATA LOCAL INFILE loads the client's own file".to_owned(),
        ),
        ("load", "xml" | "index") => Some(label(2)),
        ("set", "password" | "role" | "default") => Some(label(2)),
        ("create" | "drop" | "alter" | "rename", _) => object_type(sql, tokens)
            .filter(|o| ADMIN_OBJECTS.contains(&o.as_str()))
            .map(|o| format!("{} {}", w(0).to_ascii_uppercase(), o.to_ascii_uppercase())),
        _ => None,
    };
    if found.is_some() {
        return found;
    }
    // CREATE/ALTER TABLE ... DATA DIRECTORY = '/path' (or INDEX DIRECTORY) puts files
    // where the server's host says, as FILE-privileged accounts may.
    if matches!(w(0), "create" | "alter")
        && tokens.windows(2).any(|p| {
            (p[0].is_word(sql, "data") || p[0].is_word(sql, "index"))
                && p[1].is_word(sql, "directory")
        })
    {
        return Some(format!(
            "{} TABLE ... DATA DIRECTORY",
            w(0).to_ascii_uppercase()
        ));
    }
    // SELECT ... INTO OUTFILE/DUMPFILE writes a file on the server's host; LOAD_FILE()
    // reads one.
    if tokens.windows(2).any(|p| {
        p[0].is_word(sql, "into") && (p[1].is_word(sql, "outfile") || p[1].is_word(sql, "dumpfile"))
    }) {
        return Some("SELECT ... INTO OUTFILE".to_owned());
    }
    // A function name may be backquoted (`` `load_file`(...) ``): the server calls it all
    // the same.
    tokens
        .windows(2)
        .any(|p| {
            matches!(p[0].kind, TokenKind::Word | TokenKind::QuotedIdent)
                && ident_is(sql, &p[0], "load_file")
                && p[1].is_punct(sql, "(")
        })
        .then(|| "LOAD_FILE()".to_owned())
}

/// The kind of object a CREATE/DROP/ALTER/RENAME names: the first word after the verb that
/// is not a modifier (`OR REPLACE`, `DEFINER = ...`, `IF NOT EXISTS`, ...). Stops at a
/// table, index or view, so column names are never taken for it.
fn object_type(sql: &[u8], tokens: &[Token]) -> Option<String> {
    const MODIFIERS: [&str; 14] = [
        "or",
        "replace",
        "definer",
        "current_user",
        "if",
        "not",
        "exists",
        "sql",
        "security",
        "invoker",
        "aggregate",
        "online",
        "offline",
        "ignore",
    ];
    const STOPS: [&str; 8] = [
        "table",
        "index",
        "view",
        "temporary",
        "unique",
        "fulltext",
        "spatial",
        "sequence",
    ];
    // The tokens come without executable-comment markers (see [`classify`]).
    let tokens = tokens.get(1..tokens.len().min(25)).unwrap_or(&[]);
    let mut i = 0;
    while i < tokens.len() {
        let t = &tokens[i];
        i += 1;
        if t.is_punct(sql, "(") {
            return None;
        }
        if t.kind != TokenKind::Word {
            continue;
        }
        let word = String::from_utf8_lossy(t.bytes(sql)).to_ascii_lowercase();
        if word == "definer" {
            // DEFINER = CURRENT_USER [()] | CURRENT_ROLE | name[@host]: the account name
            // may be any word (`view@localhost`), never the object's type.
            if tokens.get(i).is_some_and(|t| t.is_punct(sql, "=")) {
                i += 1;
            }
            let account = tokens.get(i)?;
            i += 1;
            let empty_parens = account.is_word(sql, "current_user")
                && tokens.get(i).is_some_and(|t| t.is_punct(sql, "("))
                && tokens.get(i + 1).is_some_and(|t| t.is_punct(sql, ")"));
            let at_host = tokens.get(i).is_some_and(|t| t.is_punct(sql, "@"));
            if empty_parens || at_host {
                i += 2;
            } else if tokens
                .get(i)
                .is_some_and(|t| t.kind == TokenKind::UserVariable)
            {
                i += 1;
            }
            continue;
        }
        if ADMIN_OBJECTS.contains(&word.as_str()) || STOPS.contains(&word.as_str()) {
            return Some(word);
        }
        if !MODIFIERS.contains(&word.as_str()) {
            // A word of no modifier: keep looking (ALGORITHM = MERGE, ...).
            continue;
        }
    }
    None
}

fn transaction_end(sql: &[u8], tokens: &[Token], words: &[Word]) -> Command {
    let rollback = words[0] == "rollback";
    let mut i = 1;
    if words.get(i).map(Word::as_str) == Some("work") {
        i += 1;
    }
    if rollback && words.get(i).map(Word::as_str) == Some("to") {
        let mut j = i + 1;
        if tokens.get(j).is_some_and(|t| t.is_word(sql, "savepoint")) {
            j += 1;
        }
        return Command::RollbackTo(
            tokens
                .get(j)
                .map(|t| ident_text(sql, t, LexMode::default()))
                .unwrap_or_default(),
        );
    }
    if i == tokens.len() {
        return if rollback {
            Command::Rollback
        } else {
            Command::Commit
        };
    }
    // AND NO CHAIN and NO RELEASE change nothing.
    let rest: Vec<String> = tokens[i..]
        .iter()
        .map(|t| String::from_utf8_lossy(t.bytes(sql)).to_ascii_lowercase())
        .collect();
    let chain = rest.windows(2).any(|w| w[0] == "and" && w[1] == "chain");
    let release = rest
        .iter()
        .enumerate()
        .any(|(k, t)| t == "release" && (k == 0 || rest[k - 1] != "no"));
    if chain || release {
        Command::ChainOrRelease
    } else if rollback {
        Command::Rollback
    } else {
        Command::Commit
    }
}

fn show(sql: &[u8], tokens: &[Token], words: &[Word], mode: LexMode) -> Command {
    let w = |i: usize| words.get(i).map(Word::as_str).unwrap_or("");
    match (w(1), w(2)) {
        ("warnings", _) => Command::ShowDiagnostics {
            errors_only: false,
            count: false,
        },
        ("errors", _) => Command::ShowDiagnostics {
            errors_only: true,
            count: false,
        },
        ("count", "(") if w(3) == "*" && w(4) == ")" => Command::ShowDiagnostics {
            errors_only: w(5) == "errors",
            count: true,
        },
        ("routekey", "stats") if tokens.len() == 3 => Command::ShowRouteStats,
        ("databases" | "schemas", _) => match tokens.get(2) {
            None => Command::ShowDatabases { filter: None },
            Some(t) if t.is_word(sql, "like") || t.is_word(sql, "where") => {
                Command::ShowDatabases {
                    filter: Some(t.range.start),
                }
            }
            // Never the backend's list.
            Some(_) => Command::Refused(
                "SHOW DATABASES other than `SHOW DATABASES [LIKE 'pattern' | WHERE ...]`"
                    .to_owned(),
            ),
        },
        ("processlist", _) if tokens.len() == 2 => Command::ShowProcesslist { full: false },
        ("full", "processlist") if tokens.len() == 3 => Command::ShowProcesslist { full: true },
        ("processlist", _) | ("full", "processlist") => Command::Refused(
            "SHOW PROCESSLIST with more words (use information_schema.PROCESSLIST)".to_owned(),
        ),
        // What the backend account sees of the whole server (other databases' routines
        // and tables, other clients' statements, its own grants): never a client's.
        (
            "engine" | "grants" | "open" | "binlog" | "binary" | "relaylog" | "master" | "slave"
            | "slaves" | "replica" | "replicas" | "all",
            _,
        )
        | ("procedure" | "function" | "package", _)
        | ("explain" | "analyze", "for")
        | ("table_statistics" | "index_statistics" | "user_statistics" | "client_statistics", _) => {
            Command::Administrative(format!("SHOW {}", w(1).to_ascii_uppercase()))
        }
        ("routekey", "callers") if tokens.len() == 3 => Command::ShowCallers,
        ("routekey", "shards") if tokens.len() == 3 => Command::ShowRouteShards,
        ("routekey", "pools") if tokens.len() == 3 => Command::ShowRoutePools,
        ("routekey", "topology") if tokens.len() == 3 => Command::ShowRouteTopology,
        ("routekey", "transactions") if tokens.len() == 3 => Command::ShowRouteTransactions,
        ("status", _) => show_session_status(sql, tokens, 2),
        ("session" | "local", "status") => show_session_status(sql, tokens, 3),
        ("tables", _) => show_tables(sql, tokens, 2, false, mode),
        ("table", "status") => show_table_status(sql, tokens, mode),
        ("full", "tables") => show_tables(sql, tokens, 3, true, mode),
        ("columns" | "fields", "from" | "in") => table_info(sql, tokens, 3, true, false),
        ("full", "columns" | "fields") if matches!(w(3), "from" | "in") => {
            table_info(sql, tokens, 4, true, false)
        }
        ("index" | "indexes" | "keys", "from" | "in") => table_info(sql, tokens, 3, true, true),
        ("create", "table") => table_info(sql, tokens, 3, false, true),
        // The backend's accounts and their password hashes.
        ("create", "user" | "role") => {
            Command::Administrative(format!("SHOW CREATE {}", w(2).to_ascii_uppercase()))
        }
        _ => Command::Statement,
    }
}

/// `SHOW [SESSION] STATUS`, alone or with `LIKE` or `WHERE` from token `i` on.
fn show_session_status(sql: &[u8], tokens: &[Token], i: usize) -> Command {
    match tokens.get(i) {
        None => Command::ShowSessionStatus,
        Some(t) if t.is_word(sql, "like") || t.is_word(sql, "where") => Command::ShowSessionStatus,
        Some(_) => Command::Statement,
    }
}

fn show_tables(sql: &[u8], tokens: &[Token], mut i: usize, full: bool, mode: LexMode) -> Command {
    let mut database = None;
    if tokens
        .get(i)
        .is_some_and(|t| t.is_word(sql, "from") || t.is_word(sql, "in"))
    {
        database = tokens.get(i + 1).map(|t| ident_text(sql, t, mode));
        i += 2;
    }
    let mut like = None;
    let mut filtered = false;
    if let Some(t) = tokens.get(i) {
        if t.is_word(sql, "like") {
            like = tokens
                .get(i + 1)
                .filter(|t| t.kind == TokenKind::String)
                .map(|t| unescape_string(t.bytes(sql), mode));
        } else {
            filtered = true;
        }
    }
    Command::ShowTables {
        full,
        database,
        like,
        filtered,
    }
}

fn show_table_status(sql: &[u8], tokens: &[Token], mode: LexMode) -> Command {
    let mut i = 3;
    let mut database = None;
    if tokens
        .get(i)
        .is_some_and(|t| t.is_word(sql, "from") || t.is_word(sql, "in"))
    {
        match tokens.get(i + 1) {
            Some(t) if matches!(t.kind, TokenKind::Word | TokenKind::QuotedIdent) => {
                database = Some(ident_text(sql, t, mode));
            }
            _ => return Command::Statement,
        }
        i += 2;
    }
    let filter = match tokens.get(i) {
        None => None,
        Some(t) if t.is_word(sql, "like") || t.is_word(sql, "where") => Some(t.range.start),
        Some(_) => return Command::Statement,
    };
    Command::ShowTableStatus { database, filter }
}

/// A table name at token `i` (`t` or `db . t`), then optionally `FROM|IN db`.
fn table_info(
    sql: &[u8],
    tokens: &[Token],
    i: usize,
    db_clause: bool,
    names_in_rows: bool,
) -> Command {
    let is_name = |k: usize| {
        tokens
            .get(k)
            .is_some_and(|t| matches!(t.kind, TokenKind::Word | TokenKind::QuotedIdent))
    };
    if !is_name(i) {
        return Command::Statement;
    }
    let qualified = tokens.get(i + 1).is_some_and(|t| t.is_punct(sql, ".")) && is_name(i + 2);
    let last = if qualified { i + 2 } else { i };
    let mut database = None;
    if db_clause
        && tokens
            .get(last + 1)
            .is_some_and(|t| t.is_word(sql, "from") || t.is_word(sql, "in"))
        && is_name(last + 2)
    {
        database = Some(TokSpan::one((last + 2) as u32));
    }
    Command::TableInfo {
        table: TokSpan {
            first: i as u32,
            last: last as u32,
        },
        database,
        names_in_rows,
    }
}

/// Splits `SET` assignments at top-level commas and classifies each.
fn set_items(sql: &[u8], tokens: &[Token], mode: LexMode) -> Vec<SetItem> {
    let mut items = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, t) in tokens.iter().enumerate() {
        if t.is_punct(sql, "(") {
            depth += 1;
        } else if t.is_punct(sql, ")") {
            depth -= 1;
        } else if depth == 0 && t.is_punct(sql, ",") {
            items.push(set_item(sql, &tokens[start..i], mode));
            start = i + 1;
        }
    }
    items.push(set_item(sql, &tokens[start..], mode));
    items
}

fn set_item(sql: &[u8], tokens: &[Token], mode: LexMode) -> SetItem {
    let Some(first) = tokens.first() else {
        return SetItem::Other;
    };
    // A name may be backquoted (`` SET `sql_mode` = ... ``): the server reads it the same.
    let word = |i: usize| {
        tokens
            .get(i)
            .filter(|t| matches!(t.kind, TokenKind::Word | TokenKind::QuotedIdent))
            .map(|t| ident_text(sql, t, mode).to_ascii_lowercase())
            .unwrap_or_default()
    };
    match first.kind {
        TokenKind::UserVariable => return SetItem::UserVar(user_variable_name(sql, first)),
        TokenKind::SystemVariable => {
            let mut text = String::from_utf8_lossy(&first.bytes(sql)[2..]).to_ascii_lowercase();
            // `@@session.`sql_mode``: the name after the scope is a token of its own; and
            // MariaDB takes `@@session . sql_mode` (spaces around the dot) as well.
            if text.ends_with('.') {
                text.push_str(&word(1));
            } else if !text.contains('.') && tokens.get(1).is_some_and(|t| t.is_punct(sql, ".")) {
                text.push('.');
                text.push_str(&word(2));
            }
            return match text.split_once('.') {
                Some(("global" | "persist" | "persist_only", name)) => {
                    SetItem::GlobalVar(name.to_owned())
                }
                Some(("session" | "local", name)) => SetItem::SessionVar(name.to_owned()),
                _ => SetItem::SessionVar(text),
            };
        }
        _ => {}
    }
    let charset_at = |i: usize| {
        tokens.get(i).and_then(|t| {
            let name = ident_text(sql, t, mode);
            (!name.eq_ignore_ascii_case("default")).then_some(name)
        })
    };
    match word(0).as_str() {
        "names" => SetItem::Names(charset_at(1)),
        "charset" => SetItem::Names(charset_at(1)),
        "character" if word(1) == "set" => SetItem::Names(charset_at(2)),
        "transaction" => SetItem::Transaction { session: false },
        "session" | "local" if word(1) == "transaction" => SetItem::Transaction { session: true },
        "global" | "persist" | "persist_only" if word(1) == "transaction" => {
            SetItem::GlobalVar("transaction".to_owned())
        }
        "global" | "persist" | "persist_only" => SetItem::GlobalVar(word(1)),
        "session" | "local" => SetItem::SessionVar(word(1)),
        "password" | "role" => {
            SetItem::Administrative(format!("SET {}", word(0).to_ascii_uppercase()))
        }
        "default" if word(1) == "role" => SetItem::Administrative("SET DEFAULT ROLE".to_owned()),
        _ if matches!(first.kind, TokenKind::Word | TokenKind::QuotedIdent)
            && tokens
                .get(1)
                .is_some_and(|t| t.is_punct(sql, "=") || t.is_punct(sql, ":=")) =>
        {
            SetItem::SessionVar(word(0))
        }
        _ => SetItem::Other,
    }
}

/// Whether a word or quoted identifier names `name` (ASCII case-insensitive), as
/// [`ident_text`] would read it.
fn ident_is(sql: &[u8], token: &Token, name: &str) -> bool {
    matches!(token.kind, TokenKind::Word | TokenKind::QuotedIdent)
        && ident_ref(sql, token, LexMode::default()).eq_ignore_ascii_case(name)
}

/// [`ident_text`], borrowed from the statement when nothing is to be unquoted (a bare word,
/// or a quoted identifier without a doubled quote in valid UTF-8): no allocation for the
/// names every statement has.
pub fn ident_ref<'a>(sql: &'a [u8], token: &Token, mode: LexMode) -> std::borrow::Cow<'a, str> {
    let raw = token.bytes(sql);
    match token.kind {
        TokenKind::Word => String::from_utf8_lossy(raw),
        TokenKind::QuotedIdent if raw.len() >= 2 && !raw[1..raw.len() - 1].contains(&raw[0]) => {
            String::from_utf8_lossy(&raw[1..raw.len() - 1])
        }
        _ => std::borrow::Cow::Owned(ident_text(sql, token, mode)),
    }
}

/// The name of a user variable token as the session knows it: `@` and the name, unquoted
/// (`@'a b'` is `@a b`) and lower-cased (MariaDB's user variable names ignore case).
pub fn user_variable_name(sql: &[u8], token: &Token) -> String {
    let raw = token.bytes(sql);
    let name = match raw.get(1) {
        Some(q @ (b'\'' | b'"' | b'`')) => {
            let inner = &raw[2..raw.len().saturating_sub(1).max(2)];
            let doubled = [*q, *q];
            String::from_utf8_lossy(inner).replace(
                std::str::from_utf8(&doubled).unwrap_or("``"),
                std::str::from_utf8(&doubled[..1]).unwrap_or("`"),
            )
        }
        _ => String::from_utf8_lossy(&raw[1..]).into_owned(),
    };
    format!("@{}", name.to_lowercase())
}

/// The position in `tokens` of the `FOR` that ends the settings of a `SET STATEMENT var =
/// value [, ...] FOR <statement>` (the first `FOR` outside parentheses), or `None`.
/// `tokens` are the whole statement's, `SET STATEMENT` included.
pub fn set_statement_for(sql: &[u8], tokens: &[Token]) -> Option<usize> {
    let mut depth = 0i32;
    for (i, t) in tokens.iter().enumerate() {
        if t.is_punct(sql, "(") {
            depth += 1;
        } else if t.is_punct(sql, ")") {
            depth -= 1;
        } else if depth == 0 && t.is_word(sql, "for") {
            return Some(i);
        }
    }
    None
}

#[cfg(test)]
mod tests;
