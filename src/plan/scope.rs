//! Who may reach what (SPEC §8a): the databases one user's statements may name, and the
//! check that refuses a statement naming any other, before anything reaches a backend.
//!
//! The proxy's backend account serves every client user, so this allow-list is the only
//! thing between a client and whatever that account can reach. A user's scope is the
//! logical database, the default datasource's database (where unsharded tables live; the
//! logical database stands for it), `information_schema` and the databases its
//! configuration names (`databases = [...]`). Refusals use MySQL's own codes: 1044
//! (`ER_DBACCESS_DENIED_ERROR`) for a database as such (`USE`, COM_INIT_DB, the handshake,
//! `SHOW ... FROM db`), 1142 (`ER_TABLEACCESS_DENIED_ERROR`) for a table named with a
//! database outside the scope, 1370 (`ER_PROCACCESS_DENIED_ERROR`) for a routine.
//!
//! The statement check reads tokens only ([`check_statement`]), so it covers every
//! statement kind alike, those the SQL parser cannot read included: each qualified name
//! (`a.b`, `a.b.c`) is classified by where it stands. `a.b.c` is always database, table,
//! column; `a.b(` a routine in database `a`; `a.b` where a table is expected (after `FROM`,
//! `JOIN`, `INTO`, `UPDATE`, `TABLE`, `CALL`, ..., or after a comma in a table list) is
//! database `a`, table `b`; anywhere else `a.b` is a column of table or alias `a`, which
//! MySQL resolves among the statement's own tables (themselves checked where they stand).
//! In DDL without a query every `a.b` is taken for a table (no alias is declared there).
//! The text is read as the server may read it ([`check_text`]: a statement-level
//! `sql_mode`, executable comments for any version), and the planner checks the tables
//! the SQL parser found besides ([`crate::sql::Analysis::qualified_tables`]).

use crate::config::Config;
use crate::error::ProxyError;
use crate::sql::lexer::ident_text;
use crate::sql::lexer::{LexMode, Token, TokenKind};

/// ER_TABLEACCESS_DENIED_ERROR: a table in a database outside the user's scope.
pub const ER_TABLEACCESS_DENIED_ERROR: u16 = 1142;
/// ER_PROCACCESS_DENIED_ERROR: a routine in a database outside the user's scope.
pub const ER_PROCACCESS_DENIED_ERROR: u16 = 1370;
/// ER_KILL_DENIED_ERROR: `KILL` of another user's session without `process = true`.
pub const ER_KILL_DENIED_ERROR: u16 = 1095;

/// The name every user may read; MySQL compares it without regard to case.
pub const INFORMATION_SCHEMA: &str = "information_schema";

/// The databases one user may reach, and who it is (for the messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// The user's name.
    pub user: String,
    /// The client's host, as the messages name it.
    pub host: String,
    /// The logical database (always first), the default datasource's database when it is
    /// another name, then the user's `databases`, without duplicates. Compared exactly:
    /// MariaDB database names are case-sensitive on Linux, so `ORDERS_REF` may be another
    /// database than `orders_ref`.
    databases: Vec<String>,
    /// Databases known to exist outside the scope (lower case): the shard databases, the
    /// index table's, every datasource's, and the server's own (`mysql`, `sys`,
    /// `performance_schema`). A qualified name whose qualifier is one of them is refused
    /// wherever it stands (see [`check_statement`]).
    elsewhere: Vec<String>,
    /// `process = true`: sees and may kill every session.
    pub process: bool,
}

/// `information_schema` views MariaDB 10.11 has that show what the backend account sees of
/// the whole server (everything not in [`INFORMATION_SCHEMA_TABLES`]), and the prefixes
/// of plugin views (InnoDB, the thread pool, Galera, ...). Named anywhere in a statement,
/// with `information_schema` or as the current database, they are refused (1142): a
/// reader that missed a table position must not let them through.
const REFUSED_INFORMATION_SCHEMA_TABLES: [&str; 24] = [
    "all_plugins",
    "applicable_roles",
    "check_constraints",
    "client_statistics",
    "column_privileges",
    "enabled_roles",
    "events",
    "geometry_columns",
    "global_status",
    "index_statistics",
    "key_caches",
    "optimizer_trace",
    "parameters",
    "referential_constraints",
    "routines",
    "schema_privileges",
    "spatial_ref_sys",
    "system_variables",
    "tablespaces",
    "table_privileges",
    "table_statistics",
    "user_privileges",
    "user_statistics",
    "user_variables",
];

/// Prefixes of refused plugin views in `information_schema` (see
/// [`REFUSED_INFORMATION_SCHEMA_TABLES`]).
const REFUSED_INFORMATION_SCHEMA_PREFIXES: [&str; 6] = [
    "innodb_",
    "thread_pool_",
    "wsrep_",
    "rocksdb_",
    "spider_",
    "columnstore_",
];

/// Whether `name` is a refused `information_schema` view ([`REFUSED_INFORMATION_SCHEMA_TABLES`],
/// the prefixes, `views`, `users`), in any case.
fn is_refused_view(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    REFUSED_INFORMATION_SCHEMA_TABLES.contains(&lower.as_str())
        || REFUSED_INFORMATION_SCHEMA_PREFIXES
            .iter()
            .any(|p| lower.starts_with(p))
        || lower == "views"
        || lower == "users"
}

/// The server's own databases besides `information_schema`.
const SYSTEM_DATABASES: [&str; 3] = ["mysql", "sys", "performance_schema"];

impl Scope {
    /// The scope of user `user` (connected from `host`) under `config`. An unknown user
    /// gets the logical database and `information_schema` only.
    pub fn of(config: &Config, user: &str, host: &str) -> Self {
        let mut databases = vec![config.sharding.logical_database.clone()];
        let default = config.datasource(config.sharding.default_datasource);
        let configured = config.user(user);
        databases.extend(default.database.clone());
        databases.extend(configured.iter().flat_map(|u| u.databases.iter().cloned()));
        let mut unique: Vec<String> = Vec::with_capacity(databases.len());
        for db in databases {
            if !unique.contains(&db) && !db.eq_ignore_ascii_case(INFORMATION_SCHEMA) {
                unique.push(db);
            }
        }
        let known = config
            .sharding
            .shards
            .iter()
            .map(|s| s.database.as_str())
            .chain([config.index.database.as_str()])
            .chain(
                config
                    .datasources
                    .iter()
                    .filter_map(|d| d.database.as_deref()),
            )
            .chain(SYSTEM_DATABASES);
        let mut elsewhere: Vec<String> = Vec::new();
        for db in known {
            let lower = db.to_ascii_lowercase();
            if !unique.iter().any(|d| d.eq_ignore_ascii_case(db)) && !elsewhere.contains(&lower) {
                elsewhere.push(lower);
            }
        }
        Self {
            user: user.to_owned(),
            host: host.to_owned(),
            databases: unique,
            elsewhere,
            process: configured.is_some_and(|u| u.process),
        }
    }

    /// Adds the databases the servers were seen to have (lower case) to those known to
    /// exist outside the scope, but for the scope's own.
    #[must_use]
    pub fn with_server_databases(mut self, names: &[String]) -> Self {
        for name in names {
            let inside = self.databases.iter().any(|d| d.eq_ignore_ascii_case(name))
                || name.eq_ignore_ascii_case(INFORMATION_SCHEMA);
            if !inside && !self.elsewhere.contains(name) {
                self.elsewhere.push(name.clone());
            }
        }
        self
    }

    /// Whether `name` is a database known to exist outside the scope, in any case (a
    /// server with `lower_case_table_names` reads `MYSQL` as `mysql`).
    fn is_elsewhere(&self, name: &str) -> bool {
        self.elsewhere.iter().any(|d| d.eq_ignore_ascii_case(name))
    }

    /// Whether statements may name database `db`.
    pub fn allows(&self, db: &str) -> bool {
        db.eq_ignore_ascii_case(INFORMATION_SCHEMA) || self.databases.iter().any(|d| d == db)
    }

    /// Every database a statement may name, `information_schema` included (what
    /// `SHOW DATABASES` and `information_schema.SCHEMATA` list, of those the server has).
    pub fn databases(&self) -> impl Iterator<Item = &str> {
        self.databases
            .iter()
            .map(String::as_str)
            .chain([INFORMATION_SCHEMA])
    }

    /// Refuses database `db` unless it is in the scope (1044).
    ///
    /// # Errors
    /// ER_DBACCESS_DENIED_ERROR, as MySQL words it.
    pub fn check_database(&self, db: &str) -> Result<(), ProxyError> {
        if self.allows(db) {
            return Ok(());
        }
        Err(ProxyError::client(
            crate::error::ER_DBACCESS_DENIED_ERROR,
            b"42000",
            format!(
                "Access denied for user '{}'@'{}' to database '{db}'",
                self.user, self.host
            ),
        ))
    }

    /// Refuses table `db`.`table` unless `db` is in the scope (1142, with the statement's
    /// command name as MySQL gives it: `SELECT`, `INSERT`, ...).
    ///
    /// # Errors
    /// ER_TABLEACCESS_DENIED_ERROR.
    pub fn check_table(&self, command: &str, db: &str, table: &str) -> Result<(), ProxyError> {
        let readable = !db.eq_ignore_ascii_case(INFORMATION_SCHEMA)
            || INFORMATION_SCHEMA_TABLES
                .iter()
                .any(|t| t.eq_ignore_ascii_case(table));
        if self.allows(db) && readable {
            return Ok(());
        }
        Err(ProxyError::client(
            ER_TABLEACCESS_DENIED_ERROR,
            b"42000",
            format!(
                "{command} command denied to user '{}'@'{}' for table {}.{}",
                self.user,
                self.host,
                crate::sql::quote_ident(db),
                crate::sql::quote_ident(table)
            ),
        ))
    }

    /// Refuses routine `db`.`name` unless `db` is in the scope (1370).
    ///
    /// # Errors
    /// ER_PROCACCESS_DENIED_ERROR.
    pub fn check_routine(&self, db: &str, name: &str) -> Result<(), ProxyError> {
        if self.allows(db) {
            return Ok(());
        }
        Err(ProxyError::client(
            ER_PROCACCESS_DENIED_ERROR,
            b"42000",
            format!(
                "execute command denied to user '{}'@'{}' for routine '{db}.{name}'",
                self.user, self.host
            ),
        ))
    }

    /// Whether this user may see and `KILL` a session of user `owner`.
    pub fn reaches_session_of(&self, owner: &str) -> bool {
        self.process || owner == self.user
    }
}

/// Words after which a qualified name is a table (or view, sequence, routine) reference.
const TABLE_WORDS: [&str; 36] = [
    "from",
    // ODBC's `{OJ t1 LEFT OUTER JOIN t2 ON ...}`, which MariaDB reads.
    "oj",
    "join",
    "straight_join",
    "into",
    "insert",
    "replace",
    "update",
    "table",
    "tables",
    "using",
    "references",
    "call",
    "describe",
    "desc",
    "explain",
    "handler",
    "for",
    "exists",
    "view",
    "to",
    "as",
    "rename",
    "truncate",
    "delete",
    "ignore",
    "low_priority",
    "quick",
    "delayed",
    "sequence",
    "trigger",
    "procedure",
    "function",
    "event",
    "package",
    "body",
];

/// Words that start a table list: a comma after one of them separates tables.
const TABLE_LIST_WORDS: [&str; 9] = [
    "from", "join", "update", "into", "using", "table", "tables", "delete", "truncate",
];

/// Words that end a table list.
const CLAUSE_WORDS: [&str; 15] = [
    "where",
    "set",
    "group",
    "order",
    "having",
    "limit",
    "select",
    "values",
    "value",
    "union",
    "window",
    "returning",
    "except",
    "intersect",
    "procedure",
];

/// The `information_schema` tables a client may read: those the proxy answers itself
/// (filtered to the user's scope, or its own sessions; `TRIGGERS` and `PARTITIONS` for
/// mariadb-dump) and those that hold nothing of any database or client. The others
/// (`ROUTINES`, `VIEWS`, `INNODB_TRX`, the privilege tables, ...) would show what the
/// backend account sees of the whole server, so they are refused (1142).
pub const INFORMATION_SCHEMA_TABLES: [&str; 21] = [
    "tables",
    "columns",
    "statistics",
    "key_column_usage",
    "table_constraints",
    "schemata",
    "processlist",
    "triggers",
    "partitions",
    "character_sets",
    "collations",
    "collation_character_set_applicability",
    "engines",
    "keywords",
    "sql_functions",
    "plugins",
    "session_variables",
    "session_status",
    "global_variables",
    "files",
    "profiling",
];

/// Functions whose argument is a sequence (a table) in MariaDB.
const SEQUENCE_FUNCTIONS: [&str; 3] = ["nextval", "lastval", "setval"];

/// A statement's tokens as the check reads them.
struct Reader<'a> {
    sql: &'a [u8],
    tokens: Vec<&'a Token>,
    mode: LexMode,
}

impl<'a> Reader<'a> {
    fn word(&self, i: usize, w: &str) -> bool {
        self.tokens.get(i).is_some_and(|t| t.is_word(self.sql, w))
    }

    fn punct(&self, i: usize, p: &str) -> bool {
        self.tokens.get(i).is_some_and(|t| t.is_punct(self.sql, p))
    }

    fn is_name(&self, i: usize) -> bool {
        self.tokens
            .get(i)
            .is_some_and(|t| matches!(t.kind, TokenKind::Word | TokenKind::QuotedIdent))
    }

    fn name(&self, i: usize) -> String {
        ident_text(self.sql, self.tokens[i], self.mode)
    }

    /// The qualified name starting at `i`: its parts (`*` for a wildcard) and the index
    /// after it. A name followed by a number token that starts with `.` (`db.1t` lexed as
    /// `db`, `.1`, `t`) counts as qualified too: the check cannot tell, so it assumes so.
    fn chain(&self, i: usize) -> (Vec<String>, usize) {
        let mut parts = vec![self.name(i)];
        let mut j = i + 1;
        while let Some(t) = self.tokens.get(j) {
            if t.is_punct(self.sql, ".") {
                if self.is_name(j + 1) {
                    parts.push(self.name(j + 1));
                    j += 2;
                    continue;
                }
                if self.punct(j + 1, "*") {
                    parts.push("*".to_owned());
                    j += 2;
                }
                break;
            }
            if t.kind == TokenKind::Number && t.bytes(self.sql).starts_with(b".") {
                parts.push(String::from_utf8_lossy(&t.bytes(self.sql)[1..]).into_owned());
                j += 1;
                continue;
            }
            break;
        }
        (parts, j)
    }
}

impl Reader<'_> {
    /// Whether an unqualified name at `i` is a table a query reads: after `FROM`, `JOIN`,
    /// or a comma or parenthesis of a table list, in a statement other than `SHOW`
    /// (`DUAL` is no table).
    fn reads_table(&self, i: usize, in_list: bool) -> bool {
        let Some(before) = i.checked_sub(1) else {
            return false;
        };
        self.is_name(i)
            && !self.word(i, "dual")
            && !self.word(0, "show")
            && (["from", "join", "straight_join"]
                .iter()
                .any(|w| self.word(before, w))
                || ((self.punct(before, ",") || self.punct(before, "(")) && in_list))
    }

    /// Whether a name at `i` stands where a table is expected: after a word of
    /// [`TABLE_WORDS`], after a comma or parenthesis inside a table list (`in_list`),
    /// after `IN` in `SHOW`, after `ON`/`LIKE` in DDL, or as a sequence function's argument.
    fn table_position(&self, i: usize, in_list: bool, ddl: bool) -> bool {
        let Some(before) = i.checked_sub(1) else {
            return false;
        };
        let word = |w: &str| self.word(before, w);
        // ODBC's `{ ident table_ref ... }`: MariaDB takes any identifier after the brace.
        if before > 0 && self.punct(before - 1, "{") && self.is_name(before) {
            return true;
        }
        let clause_update = word("update")
            && (self.word(before.wrapping_sub(1), "key")
                || self.word(before.wrapping_sub(1), "for"));
        (TABLE_WORDS.iter().any(|w| word(w)) && !clause_update)
            || ((self.punct(before, ",") || self.punct(before, "(")) && in_list)
            || (self.word(0, "show") && word("in"))
            || (ddl && (word("on") || word("like")))
            || (self.punct(before, "(")
                && before > 0
                && SEQUENCE_FUNCTIONS.iter().any(|f| self.word(before - 1, f)))
    }
}

/// The command name MySQL gives in 1142 for a statement starting with `first`.
fn command_name(r: &Reader<'_>) -> String {
    let first = (0..r.tokens.len().min(8))
        .find(|&i| r.tokens[i].kind == TokenKind::Word && !r.word(i, "with"))
        .map(|i| r.name(i).to_ascii_uppercase());
    match first.as_deref() {
        Some("INSERT" | "REPLACE") => "INSERT".to_owned(),
        Some("UPDATE") => "UPDATE".to_owned(),
        Some("DELETE") => "DELETE".to_owned(),
        Some(
            w
            @ ("CREATE" | "DROP" | "ALTER" | "TRUNCATE" | "LOCK" | "INDEX" | "RENAME" | "HANDLER"),
        ) => w.to_owned(),
        _ => "SELECT".to_owned(),
    }
}

/// Refuses a statement that names a database outside `scope` (see the module
/// documentation for how names are read). `tokens` are the statement's, from the lexer;
/// executable comments count as the server runs them. `current` is the session's current
/// database.
///
/// # Errors
/// 1142 for a table, 1370 for a routine, 1044 for a database named as such (`SHOW ...
/// FROM db`, `SHOW CREATE DATABASE db`).
pub fn check_statement(
    scope: &Scope,
    sql: &[u8],
    tokens: &[Token],
    mode: LexMode,
    current: Option<&str>,
) -> Result<(), ProxyError> {
    let in_information_schema = current.is_some_and(|d| d.eq_ignore_ascii_case(INFORMATION_SCHEMA));
    let r = Reader {
        sql,
        mode,
        tokens: tokens.iter().filter(|t| !t.is_exec_marker()).collect(),
    };
    if r.word(0, "show") {
        check_show(scope, &r)?;
    }
    let command = command_name(&r);
    let starts_ddl = r.word(0, "create") || r.word(0, "drop") || r.word(0, "alter");
    // DDL without a query names tables wherever it names `a.b` (`UNION = (db.t)` of a MERGE
    // table, `CHECK (...)`): no alias is declared there to qualify a column.
    let ddl_names = starts_ddl && !r.tokens.iter().any(|t| t.is_word(sql, "select"));
    // One entry per parenthesis depth: whether a table list is open there.
    let mut lists = vec![false];
    // Per depth, whether its list was opened by INTO: only there do VALUE / VALUES end it
    // (elsewhere `value` may be an alias: `FROM t value, db.t2`).
    let mut into_lists = vec![false];
    let mut i = 0;
    while i < r.tokens.len() {
        let t = r.tokens[i];
        if t.is_punct(sql, "(") {
            // A parenthesis where a table is expected groups tables (`FROM (a, b)`); a
            // derived table's SELECT closes the list again.
            let after = |w: &str| i > 0 && r.word(i - 1, w);
            // `UPDATE (t1, db.t2) SET ...` and `DELETE ... USING (t1, db.t2)` group tables
            // too (a USING column list holds no qualified names).
            let grouping = *lists.last().expect("never empty")
                && (["from", "join", "straight_join", "update", "using"]
                    .iter()
                    .any(|w| after(w))
                    || (i > 0 && (r.punct(i - 1, ",") || r.punct(i - 1, "("))))
                || (i > 1 && r.punct(i - 1, "=") && r.word(i - 2, "union"))
                // A MERGE table's `UNION (db.t, ...)`, the `=` being optional.
                || (starts_ddl && i > 0 && r.word(i - 1, "union"));
            lists.push(grouping);
            into_lists.push(false);
        } else if t.is_punct(sql, ")") {
            if lists.len() > 1 {
                lists.pop();
                into_lists.pop();
            }
        } else if t.kind == TokenKind::Word {
            let is = |words: &[&str]| words.iter().any(|w| t.is_word(sql, w));
            let after_for = r.word(i.wrapping_sub(1), "for");
            // `ON DUPLICATE KEY UPDATE a = 1, b = 2` and `FOR UPDATE` are no table list.
            let clause_update =
                t.is_word(sql, "update") && (r.word(i.wrapping_sub(1), "key") || after_for);
            // An index hint's `FOR ORDER BY` / `FOR GROUP BY` (`t USE INDEX FOR ORDER BY
            // (i), db.t2`) stands inside the table list: it ends nothing.
            let index_hint = after_for && is(&["order", "group"]);
            let values = is(&["value", "values"]);
            let into = into_lists.last_mut().expect("never empty");
            let top = lists.last_mut().expect("never empty");
            if clause_update {
                *top = false;
            } else if is(&TABLE_LIST_WORDS) {
                *top = true;
                *into = t.is_word(sql, "into");
            } else if is(&CLAUSE_WORDS) && !index_hint && (!values || *into) {
                *top = false;
            }
        }
        let qualified = r.is_name(i)
            && r.tokens.get(i + 1).is_some_and(|n| {
                n.is_punct(sql, ".")
                    || (n.kind == TokenKind::Number && n.bytes(sql).starts_with(b"."))
            });
        let table_position =
            r.table_position(i, *lists.last().expect("never empty"), starts_ddl) || ddl_names;
        if !qualified {
            if in_information_schema && r.reads_table(i, *lists.last().expect("never empty")) {
                scope.check_table(&command, INFORMATION_SCHEMA, &r.name(i))?;
            }
            // With information_schema current, a refused view's name anywhere (not a
            // function, not a qualifier, not `x.name`) may be that view to the server.
            let bare = r.is_name(i)
                && !r.punct(i + 1, "(")
                && !i.checked_sub(1).is_some_and(|b| r.punct(b, "."));
            if in_information_schema && bare && is_refused_view(&r.name(i)) {
                scope.check_table(&command, INFORMATION_SCHEMA, &r.name(i))?;
            }
            i += 1;
            continue;
        }
        let (parts, next) = r.chain(i);
        // Whatever position the reader took this for: a qualifier naming a database known
        // outside the scope is that database to the server wherever it may be a table
        // (`t value, mysql.user`, `UPDATE (t, order_meta.idx)`, `{ x mysql.user ... }`), so
        // the name is refused even where it could be `alias.column` (an alias that is
        // also such a database's name is refused with it).
        if let [db, name, ..] = parts.as_slice() {
            if scope.is_elsewhere(db)
                || (db.eq_ignore_ascii_case(INFORMATION_SCHEMA) && is_refused_view(name))
            {
                let call = i.checked_sub(1).is_some_and(|b| r.word(b, "call"));
                return if r.punct(next, "(") && parts.len() == 2 && (!table_position || call) {
                    scope.check_routine(db, name)
                } else {
                    scope.check_table(&command, db, name)
                };
            }
        }
        match parts.as_slice() {
            [db, table, _, ..] => scope.check_table(&command, db, table)?,
            [db, routine]
                if r.punct(next, "(")
                    && (!table_position || i.checked_sub(1).is_some_and(|b| r.word(b, "call"))) =>
            {
                scope.check_routine(db, routine)?
            }
            [db, table] if table_position => scope.check_table(&command, db, table)?,
            _ => {}
        }
        i = next;
    }
    Ok(())
}

/// [`check_statement`] under every reading the server may give the text: the session's
/// lexing, and, when the text could make the server read it otherwise, those too. A
/// statement that changes `sql_mode` for itself (`SET STATEMENT sql_mode = 'ANSI_QUOTES'
/// FOR ...`) may turn `"db"` into an identifier or end a string at `\'`; a versioned
/// executable comment the proxy takes for a comment may run on a newer server. Each
/// reading must pass.
///
/// # Errors
/// As [`check_statement`].
pub fn check_text(
    scope: &Scope,
    sql: &[u8],
    tokens: &[Token],
    mode: LexMode,
    current: Option<&str>,
) -> Result<(), ProxyError> {
    check_statement(scope, sql, tokens, mode, current)?;
    for other in other_readings(sql, mode) {
        let lexed = crate::sql::lexer::lex(sql, other);
        check_statement(scope, sql, &lexed.tokens, other, current)?;
    }
    Ok(())
}

/// Whether [`check_text`] reads `sql` in `mode` only: no executable comment and no
/// `sql_mode` anywhere in its text (literals and comments included), so the server can
/// only lex it as the proxy does.
pub fn has_one_reading(sql: &[u8], mode: LexMode) -> bool {
    // Without building the list of other readings: this runs for every text statement.
    let (base, sql_mode) = reading_base(sql, mode);
    !sql_mode && base == mode
}

/// The lexings besides `mode` the server might apply to `sql` (see [`check_text`]).
fn other_readings(sql: &[u8], mode: LexMode) -> Vec<LexMode> {
    let (base, sql_mode) = reading_base(sql, mode);
    let mut out = Vec::new();
    if sql_mode {
        for ansi_quotes in [false, true] {
            for no_backslash_escapes in [false, true] {
                out.push(LexMode {
                    ansi_quotes,
                    no_backslash_escapes,
                    ..base
                });
            }
        }
    } else {
        out.push(base);
    }
    out.retain(|m| *m != mode);
    out
}

/// What the readings of `sql` start from: `mode`, with the newest server version when an
/// executable comment may run; and whether `sql_mode` appears anywhere in the text (then
/// each combination of `ANSI_QUOTES` and `NO_BACKSLASH_ESCAPES` is a reading too).
fn reading_base(sql: &[u8], mode: LexMode) -> (LexMode, bool) {
    let has = |needle: &[u8]| contains_ignore_ascii_case(sql, needle);
    let mut base = mode;
    if has(b"/*!") || has(b"/*m!") {
        base.server_version = u32::MAX;
    }
    (base, has(b"sql_mode"))
}

/// Whether `haystack` contains `needle` (whose first byte is not a letter, or is
/// lower-case), ASCII letters compared without case. Scans for the first byte with memchr,
/// so a statement without it costs one vectorised pass.
fn contains_ignore_ascii_case(haystack: &[u8], needle: &[u8]) -> bool {
    let Some((&first, rest)) = needle.split_first() else {
        return true;
    };
    let upper = first.to_ascii_uppercase();
    memchr::memchr2_iter(first, upper, haystack).any(|at| {
        haystack
            .get(at + 1..at + needle.len())
            .is_some_and(|w| w.eq_ignore_ascii_case(rest))
    })
}

/// `SHOW ... FROM db` / `IN db` and `SHOW CREATE DATABASE db`: the database as such (1044).
/// In `SHOW COLUMNS|FIELDS|INDEX|INDEXES|KEYS FROM t [FROM db]` the first `FROM` names a
/// table.
fn check_show(scope: &Scope, r: &Reader<'_>) -> Result<(), ProxyError> {
    let words: Vec<String> = (1..r.tokens.len().min(4))
        .filter(|&i| r.tokens[i].kind == TokenKind::Word)
        .map(|i| r.name(i).to_ascii_lowercase())
        .collect();
    let has = |w: &str| words.iter().any(|x| x == w);
    if r.word(1, "create") && (r.word(2, "database") || r.word(2, "schema")) {
        let mut i = 3;
        while r.word(i, "if") || r.word(i, "not") || r.word(i, "exists") {
            i += 1;
        }
        if r.is_name(i) {
            scope.check_database(&r.name(i))?;
        }
        return Ok(());
    }
    let mut table_first = ["columns", "fields", "index", "indexes", "keys"]
        .iter()
        .any(|w| has(w));
    for i in 1..r.tokens.len() {
        if !(r.word(i, "from") || r.word(i, "in")) {
            continue;
        }
        if table_first {
            table_first = false;
            continue;
        }
        if r.is_name(i + 1) && !r.punct(i + 2, ".") {
            scope.check_database(&r.name(i + 1))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
