//! One client's session: its state (database, session variables, transaction, pins,
//! identity values) and the backend connections it holds.
//!
//! A session holds no backend connection between statements unless it is in a
//! transaction or pinned. Whichever connection serves it gets the session's variables and
//! database applied first, only what differs; a connection carrying variables the session
//! did not set is reset first. A transaction holds one connection per datasource, and a
//! datasource that joins later replays the transaction's start and its savepoints.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use mysql_common::constants::{CapabilityFlags, StatusFlags};

use crate::backend::{BackendConn, PooledConn};
use crate::config::DatasourceId;
use crate::error::ProxyError;
use crate::rewrite::SessionValues;
use crate::server::Proxy;
use crate::sql::charset::{Decoding, collation_names, decoding_for};
use crate::sql::lexer::LexMode;

impl Drop for Session {
    fn drop(&mut self) {
        self.proxy.sessions.unregister(&self.handle);
    }
}

/// One entry of `SHOW WARNINGS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// `Note`, `Warning` or `Error`.
    pub level: Vec<u8>,
    /// Error code.
    pub code: Vec<u8>,
    /// Message.
    pub message: Vec<u8>,
}

/// The transaction the session is in, as the client sees it.
#[derive(Debug, Default)]
pub struct Transaction {
    /// The `BEGIN`/`START TRANSACTION` text, replayed on each datasource that joins.
    pub begin: Option<Vec<u8>>,
    /// `SET TRANSACTION ...` for the next transaction only.
    pub next_characteristics: Option<Vec<u8>>,
    /// Savepoints in the order they were set.
    pub savepoints: Vec<String>,
    /// The datasource this transaction writes to (one at most, until XA).
    pub write_datasource: Option<DatasourceId>,
}

/// The state of one client connection.
pub struct Session {
    /// Shared proxy state.
    pub proxy: Arc<Proxy>,
    /// The configuration this session works under now: taken again from the proxy at each
    /// statement while the session holds no backend connection ([`Session::refresh`]).
    pub rt: Arc<crate::server::Runtime>,
    /// The proxy's connection id (handshake, `CONNECTION_ID()`, `KILL`).
    pub id: u32,
    /// The MySQL user.
    pub user: String,
    /// The client's host.
    pub host: String,
    /// Capabilities negotiated with the client.
    pub caps: CapabilityFlags,
    /// Connection attributes (`program_name`, ...).
    pub attributes: HashMap<String, String>,
    /// Current database.
    pub database: Option<String>,
    /// Session variables as SQL literals, by lower-case name; always holds the character
    /// set variables and `autocommit`. User variables set with `SET @x = ...` are kept
    /// here too, under their `@name`, and applied to every connection the session uses.
    pub vars: BTreeMap<String, Vec<u8>>,
    /// `autocommit`.
    pub autocommit: bool,
    /// How statements are lexed (from `sql_mode`).
    pub lex_mode: LexMode,
    /// How statements decode (from `character_set_client`).
    pub decoding: Decoding,
    /// Backend connections held, by datasource.
    pub held: BTreeMap<DatasourceId, PooledConn>,
    /// State the proxy cannot carry was created: connections stay held until the end.
    pub pinned: bool,
    /// The transaction.
    pub txn: Transaction,
    /// `LAST_INSERT_ID()`.
    pub last_insert_id: u64,
    /// `ROW_COUNT()`.
    pub row_count: i64,
    /// `FOUND_ROWS()`.
    pub found_rows: u64,
    /// What `SHOW WARNINGS` lists: the previous statement's diagnostics.
    pub warnings: Vec<Diagnostic>,
    /// Prepared statements.
    pub statements: super::prepared::Statements,
    /// The client asked for IGNORE_SPACE; not applied to a connection yet.
    ignore_space_pending: bool,
    /// This session as other sessions see it (KILL).
    pub handle: Arc<super::registry::SessionHandle>,
    /// A backend connection holding part of a transaction or pinned state failed: the
    /// client connection must close after the error (why, for the log).
    pub lost: Option<String>,
}

/// Pooled connections idle at least this long are probed before use (one non-blocking
/// read, no round trip): a connection the server closed is discarded, not handed out.
const IDLE_PROBE_AFTER: Duration = Duration::ZERO;

/// Variables every session sets explicitly on its connections.
const CHARSET_VARS: [&str; 4] = [
    "character_set_client",
    "character_set_connection",
    "character_set_results",
    "collation_connection",
];

fn literal(s: &str) -> Vec<u8> {
    crate::rewrite::quote_string(s.as_bytes())
}

impl Session {
    /// A new session for a logged-in client with handshake collation `collation`.
    pub fn new(
        proxy: Arc<Proxy>,
        id: u32,
        user: String,
        host: String,
        caps: CapabilityFlags,
        collation: u8,
        attributes: HashMap<String, String>,
    ) -> Self {
        let (charset, collation) = match collation_names(collation) {
            // MySQL 8 collations (ids above 247) are unknown to MariaDB 10.x.
            Some((cs, coll)) if collation <= 247 => (cs, coll),
            Some((cs, _)) if cs == "utf8mb4" => (cs, "utf8mb4_general_ci".to_owned()),
            _ => ("utf8mb4".to_owned(), "utf8mb4_general_ci".to_owned()),
        };
        let mut vars = BTreeMap::new();
        for name in &CHARSET_VARS[..3] {
            vars.insert((*name).to_owned(), literal(&charset));
        }
        vars.insert("collation_connection".to_owned(), literal(&collation));
        vars.insert("autocommit".to_owned(), b"1".to_vec());
        vars.insert("last_insert_id".to_owned(), b"0".to_vec());
        let handle = proxy.sessions.register(id, &user);
        Self {
            decoding: decoding_for(&charset).unwrap_or(Decoding::Utf8),
            rt: proxy.runtime(),
            proxy,
            id,
            user,
            host,
            caps,
            attributes,
            database: None,
            vars,
            autocommit: true,
            lex_mode: LexMode::default(),
            held: BTreeMap::new(),
            pinned: false,
            txn: Transaction::default(),
            last_insert_id: 0,
            row_count: -1,
            found_rows: 0,
            warnings: Vec::new(),
            lost: None,
            statements: Default::default(),
            ignore_space_pending: caps.contains(CapabilityFlags::CLIENT_IGNORE_SPACE),
            handle,
        }
    }

    /// Sets `LAST_INSERT_ID()`; connections the session uses get it too, so
    /// `@@last_insert_id` and `@@identity` agree with it.
    pub fn set_last_insert_id(&mut self, id: u64) {
        self.last_insert_id = id;
        self.vars
            .insert("last_insert_id".to_owned(), id.to_string().into_bytes());
    }

    /// Refuses databases clients may not reach (the physical shard databases, the index
    /// table's, `mysql`), named as `db.` qualifiers in a statement.
    pub fn check_database_access(
        &self,
        sql: &[u8],
        lexed: &crate::sql::lexer::Lexed,
    ) -> Result<(), ProxyError> {
        let protected = &self.rt.protected_databases;
        if protected.is_empty() {
            return Ok(());
        }
        // Executable comments are transparent: `/*!order_shards*/.t` names the database too.
        let tokens: Vec<&crate::sql::lexer::Token> = lexed
            .tokens
            .iter()
            .filter(|t| {
                !matches!(
                    t.kind,
                    crate::sql::lexer::TokenKind::ExecCommentOpen
                        | crate::sql::lexer::TokenKind::ExecCommentClose
                )
            })
            .collect();
        for w in tokens.windows(2) {
            if w[1].is_punct(sql, ".")
                && matches!(
                    w[0].kind,
                    crate::sql::lexer::TokenKind::Word | crate::sql::lexer::TokenKind::QuotedIdent
                )
            {
                let name = crate::sql::command::ident_text(sql, w[0], self.lex_mode);
                self.check_database(&name)?;
            }
        }
        Ok(())
    }

    /// Refuses a database clients may not reach.
    pub fn check_database(&self, name: &str) -> Result<(), ProxyError> {
        if self
            .rt
            .protected_databases
            .iter()
            .any(|p| p.eq_ignore_ascii_case(name))
        {
            return Err(ProxyError::client(
                crate::error::ER_DBACCESS_DENIED_ERROR,
                b"42000",
                format!(
                    "Access denied for user '{}'@'%' to database '{name}' (routekey-proxy keeps its shard and index databases to itself)",
                    self.user
                ),
            ));
        }
        Ok(())
    }

    /// The session's current database is the logical database.
    pub fn in_logical_database(&self) -> bool {
        self.database
            .as_deref()
            .is_some_and(|d| d.eq_ignore_ascii_case(&self.rt.config.sharding.logical_database))
    }

    /// The client negotiated CLIENT_FOUND_ROWS: its connections come from those pools.
    pub fn found_rows(&self) -> bool {
        self.caps.contains(CapabilityFlags::CLIENT_FOUND_ROWS)
    }

    /// In a transaction as MySQL would report it: after BEGIN, or while a held connection
    /// has one open (autocommit off starts one with the first statement).
    pub fn in_transaction(&self) -> bool {
        self.txn.begin.is_some() || self.held.values().any(|c| c.in_transaction())
    }

    /// Status flags for the client's OK and EOF packets.
    pub fn status(&self) -> u16 {
        let mut status = 0u16;
        if self.autocommit {
            status |= StatusFlags::SERVER_STATUS_AUTOCOMMIT.bits();
        }
        if self.in_transaction() {
            status |= StatusFlags::SERVER_STATUS_IN_TRANS.bits();
        }
        status
    }

    /// Collation id and bytes per character of the results the client receives
    /// (`character_set_results`): the proxy's own result columns are described in it.
    pub fn result_charset(&self) -> (u16, u32) {
        let cs = self.vars.get("character_set_results").map(|v| {
            String::from_utf8_lossy(v)
                .trim_matches('\'')
                .to_ascii_lowercase()
        });
        match cs.as_deref() {
            Some("utf8mb4") => (45, 4),
            Some("latin1") => (8, 1),
            Some("ascii") => (11, 1),
            Some("binary") => (63, 1),
            _ => (33, 3),
        }
    }

    /// Values for session functions.
    pub fn session_values(&self) -> SessionValues {
        SessionValues {
            last_insert_id: self.last_insert_id,
            connection_id: self.id,
            database: self.database.clone(),
            row_count: self.row_count,
            found_rows: self.found_rows,
            user: format!("{}@{}", self.user, self.host),
            current_user: format!("{}@%", self.user),
            generated_ids: Vec::new(),
            generated_as_params: false,
            shard_key: self.rt.config.sharding.shard_key.clone(),
        }
    }

    /// The database a connection to `ds` should have selected.
    fn backend_database(&self, ds: DatasourceId) -> Option<String> {
        let config = &self.rt.config;
        match &self.database {
            Some(db) if !self.in_logical_database() && ds == config.sharding.default_datasource => {
                Some(db.clone())
            }
            _ => config.datasource(ds).database.clone(),
        }
    }

    /// The connection to `ds` this session uses: the one it holds, or one from the pool
    /// prepared for this session (and joined to its transaction).
    pub async fn connection(&mut self, ds: DatasourceId) -> Result<&mut BackendConn, ProxyError> {
        if !self.held.contains_key(&ds) {
            let conn = self.fresh_connection(ds).await?;
            self.held.insert(ds, conn);
        }
        Ok(self.held.get_mut(&ds).expect("inserted above"))
    }

    /// A pooled connection to `ds`, alive and prepared for this session. A connection the
    /// server closed (restart, wait_timeout, KILL) is discarded and the next one tried; so
    /// is one whose preparation fails on its socket.
    async fn fresh_connection(&mut self, ds: DatasourceId) -> Result<PooledConn, ProxyError> {
        let datasource = self.rt.config.datasource(ds).clone();
        let mut dead = 0;
        loop {
            let mut conn = self.rt.pools.get(ds, self.found_rows()).await?;
            if !conn.still_alive(IDLE_PROBE_AFTER) {
                conn.mark_broken();
                dead += 1;
                if dead > datasource.pool_size {
                    return Err(ProxyError::Unavailable(format!(
                        "datasource {} ({}): every pooled connection was closed by the server",
                        datasource.name, datasource.address
                    )));
                }
                continue;
            }
            let prepared =
                tokio::time::timeout(datasource.connect_timeout, self.prepare(&mut conn, ds)).await;
            let failure = match prepared {
                Ok(Ok(())) => return self.with_client_flags(conn).await,
                Ok(Err(e)) => e,
                Err(_) => ProxyError::Unavailable(format!(
                    "datasource {} ({}): no answer within {:?}",
                    datasource.name, datasource.address, datasource.connect_timeout
                )),
            };
            let retry = matches!(failure, ProxyError::Io(_)) && dead < 2;
            if !matches!(failure, ProxyError::Backend { .. }) {
                conn.mark_broken();
            }
            if !retry {
                return Err(failure);
            }
            dead += 1;
        }
    }

    /// The client's CLIENT_IGNORE_SPACE makes the server add IGNORE_SPACE to its sql_mode:
    /// the first connection the session uses does so, and the result becomes the session's
    /// sql_mode (then applied to every other connection like any variable).
    async fn with_client_flags(&mut self, mut conn: PooledConn) -> Result<PooledConn, ProxyError> {
        if !self.ignore_space_pending {
            return Ok(conn);
        }
        let applied = async {
            conn.execute(b"SET @@session.sql_mode = CONCAT(@@session.sql_mode, ',IGNORE_SPACE')")
                .await?;
            let (_, rows) = conn.query_rows(b"SELECT @@session.sql_mode").await?;
            Ok::<_, ProxyError>(
                rows.into_iter()
                    .next()
                    .and_then(|r| r.into_iter().next().flatten())
                    .unwrap_or_default(),
            )
        }
        .await;
        match applied {
            Ok(mode) => {
                let literal = crate::rewrite::quote_string(&mode);
                conn.state
                    .vars
                    .insert("sql_mode".to_owned(), literal.clone());
                self.vars.insert("sql_mode".to_owned(), literal);
                self.ignore_space_pending = false;
                Ok(conn)
            }
            Err(e) => {
                conn.mark_broken();
                Err(e)
            }
        }
    }

    /// Applies the session's variables and database to a connection, and joins it to the
    /// open transaction.
    async fn prepare(&self, conn: &mut BackendConn, ds: DatasourceId) -> Result<(), ProxyError> {
        let foreign = conn.state.vars.keys().any(|k| !self.vars.contains_key(k));
        if foreign {
            conn.reset().await?;
            conn.state.database = None;
        }
        self.apply_vars(conn).await?;
        if let Some(db) = self.backend_database(ds) {
            if conn.state.database.as_deref() != Some(db.as_str()) {
                conn.init_db(&db).await?;
            }
        }
        if let Some(begin) = &self.txn.begin {
            if let Some(chars) = &self.txn.next_characteristics {
                conn.execute(chars).await?;
            }
            conn.execute(begin).await?;
        }
        if self.in_transaction() || !self.autocommit {
            for savepoint in &self.txn.savepoints {
                let sql = format!("SAVEPOINT {}", crate::rewrite::quote_ident(savepoint));
                conn.execute(sql.as_bytes()).await?;
            }
        }
        Ok(())
    }

    /// Brings every held connection to the session's variables (after a `SET`).
    pub async fn sync_held(&mut self) -> Result<(), ProxyError> {
        let datasources: Vec<DatasourceId> = self.held.keys().copied().collect();
        for ds in datasources {
            let mut conn = self.held.remove(&ds).expect("listed");
            let applied = self.apply_vars(&mut conn).await;
            self.held.insert(ds, conn);
            applied?;
        }
        Ok(())
    }

    /// Sets on `conn` the session variables whose values differ there: system variables
    /// first, then user variables (so their literals are read in the session's charset).
    async fn apply_vars(&self, conn: &mut BackendConn) -> Result<(), ProxyError> {
        self.apply_names(conn).await?;
        let diff: Vec<(&String, &Vec<u8>)> = self
            .vars
            .iter()
            .filter(|(k, v)| conn.state.vars.get(*k) != Some(*v))
            .collect();
        let (user, system): (Vec<_>, Vec<_>) =
            diff.into_iter().partition(|(k, _)| k.starts_with('@'));
        for group in [system, user] {
            if group.is_empty() {
                continue;
            }
            let mut sql = b"SET ".to_vec();
            for (i, (name, value)) in group.iter().enumerate() {
                if i > 0 {
                    sql.extend_from_slice(b", ");
                }
                match name.strip_prefix('@') {
                    Some(user) => {
                        sql.push(b'@');
                        sql.extend_from_slice(crate::rewrite::quote_ident(user).as_bytes());
                    }
                    None => {
                        sql.extend_from_slice(b"@@session.");
                        sql.extend_from_slice(name.as_bytes());
                    }
                }
                sql.extend_from_slice(b" = ");
                sql.extend_from_slice(value);
            }
            if let Err(e) = conn.execute(&sql).await {
                conn.mark_broken();
                return Err(e);
            }
            for (name, value) in group {
                conn.state.vars.insert(name.clone(), value.clone());
            }
        }
        Ok(())
    }

    /// The character set variables, with `SET NAMES cs COLLATE c` when client, connection
    /// and results agree: only that form makes MariaDB describe result columns in the
    /// client's collation (setting collation_connection alone leaves the charset's default).
    async fn apply_names(&self, conn: &mut BackendConn) -> Result<(), ProxyError> {
        let differs = CHARSET_VARS
            .iter()
            .any(|k| self.vars.get(*k) != conn.state.vars.get(*k));
        if !differs {
            return Ok(());
        }
        let get = |k: &str| self.vars.get(k);
        let (client, connection, results, collation) = (
            get("character_set_client"),
            get("character_set_connection"),
            get("character_set_results"),
            get("collation_connection"),
        );
        let (Some(cs), Some(coll)) = (client, collation) else {
            return Ok(());
        };
        if connection != Some(cs) || results != Some(cs) {
            // Different sets per direction: the variables are set one by one.
            return Ok(());
        }
        let mut sql = b"SET NAMES ".to_vec();
        sql.extend_from_slice(cs);
        sql.extend_from_slice(b" COLLATE ");
        sql.extend_from_slice(coll);
        if let Err(e) = conn.execute(&sql).await {
            conn.mark_broken();
            return Err(e);
        }
        for k in CHARSET_VARS {
            if let Some(v) = self.vars.get(k) {
                conn.state.vars.insert(k.to_owned(), v.clone());
            }
        }
        Ok(())
    }

    /// After a statement failed: with autocommit off or in an explicit transaction, the
    /// connections it ran on keep their transaction open on the server.
    pub fn after_failed_statement(&mut self, datasources: &[DatasourceId]) {
        if !self.autocommit || self.txn.begin.is_some() {
            for ds in datasources {
                if let Some(conn) = self.held.get_mut(ds) {
                    conn.assume_in_transaction();
                }
            }
        }
    }

    /// After a statement: returns the connections the session need not hold to the pool,
    /// discards broken ones, and ends the transaction bookkeeping when none is open.
    pub fn release_idle(&mut self) {
        let pinned = self.pinned;
        let explicit = self.txn.begin.is_some();
        if let Some(c) = self
            .held
            .values()
            .find(|c| c.is_broken() && (pinned || explicit || c.in_transaction()))
        {
            self.lost = Some(format!(
                "the backend connection (thread {}) holding this session's transaction or session state failed; its work is rolled back",
                c.thread_id()
            ));
        }
        self.held
            .retain(|_, c| !c.is_broken() && (pinned || c.in_transaction()));
        if !self.in_transaction() {
            self.txn.savepoints.clear();
            self.txn.write_datasource = None;
        }
    }

    /// Checks the write rule for a statement about to write to `ds`: a transaction writes
    /// to one datasource at most.
    pub fn check_write(&self, ds: DatasourceId) -> Result<(), ProxyError> {
        match self.txn.write_datasource {
            Some(w) if w != ds => {
                let config = &self.rt.config;
                Err(ProxyError::not_yet(format!(
                    "writes to a second datasource in one transaction: this transaction writes to {} and this statement to {} (atomic cross-datasource writes need XA); the transaction is left as it was",
                    config.datasource(w).name,
                    config.datasource(ds).name
                )))
            }
            _ => Ok(()),
        }
    }

    /// Records that a write to `ds` succeeded inside the open transaction.
    pub fn record_write(&mut self, ds: DatasourceId) {
        if self.in_transaction() {
            self.txn.write_datasource = Some(ds);
        }
    }

    /// Ends the transaction on every held connection with `sql` (COMMIT or ROLLBACK).
    /// Read-only datasources go first, the writer last. The first error is returned after
    /// every connection got the statement.
    pub async fn end_transaction(&mut self, sql: &[u8]) -> Result<(), ProxyError> {
        let writer = self.txn.write_datasource;
        let mut order: Vec<DatasourceId> = self.held.keys().copied().collect();
        order.sort_by_key(|ds| Some(*ds) == writer);
        let mut first_error = None;
        for ds in order {
            let conn = self.held.get_mut(&ds).expect("listed");
            if !conn.in_transaction() && self.txn.begin.is_none() {
                continue;
            }
            if let Err(e) = conn.execute(sql).await {
                first_error.get_or_insert(e);
            }
        }
        self.txn.begin = None;
        self.txn.next_characteristics = None;
        self.txn.savepoints.clear();
        self.txn.write_datasource = None;
        self.release_idle();
        first_error.map_or(Ok(()), Err)
    }

    /// Runs `sql` on every held connection (savepoint statements).
    pub async fn on_every_held(&mut self, sql: &[u8]) -> Result<(), ProxyError> {
        for conn in self.held.values_mut() {
            conn.execute(sql).await?;
        }
        Ok(())
    }

    /// Gives every connection back clean: rolls back and resets those with a transaction
    /// or pinned state (a reset that fails or hangs drops the connection instead).
    pub async fn release_all(&mut self) {
        let pinned = self.pinned;
        for (_, mut conn) in std::mem::take(&mut self.held) {
            if pinned || conn.in_transaction() {
                let reset = tokio::time::timeout(Duration::from_secs(2), conn.reset()).await;
                if !matches!(reset, Ok(Ok(()))) {
                    conn.mark_broken();
                }
            }
        }
        self.pinned = false;
        self.txn = Transaction::default();
    }

    /// Takes the proxy's current configuration when it changed. A transaction finishes
    /// under the configuration it began with. A session whose state lives on backend
    /// connections of the old configuration (user variables, locks, temporary tables:
    /// `pinned`) keeps it while the shard map and the datasources are unchanged; when they
    /// changed it cannot follow (its rows would go to the old shards), so it ends with
    /// ER_CONNECTION_KILLED and the client reconnects.
    pub fn refresh(&mut self) -> Result<(), ProxyError> {
        if self.proxy.generation() == self.rt.generation || self.in_transaction() {
            return Ok(());
        }
        let current = self.proxy.runtime();
        self.release_idle();
        if self.held.is_empty() && !self.pinned {
            self.rt = current;
            return Ok(());
        }
        let (old, new) = (&self.rt.config, &current.config);
        let same_servers = old.datasources.len() == new.datasources.len()
            && old
                .datasources
                .iter()
                .zip(&new.datasources)
                .all(|(a, b)| crate::server::same_server(a, b));
        if old.sharding.shard_map_version == new.sharding.shard_map_version && same_servers {
            return Ok(());
        }
        let why = "the shard map or the datasources changed in a configuration reload while this session kept state on its backend connections (user variables, locks, temporary tables); reconnect";
        self.lost = Some(why.to_owned());
        Err(ProxyError::client(
            crate::error::ER_CONNECTION_KILLED,
            b"70100",
            format!("Connection was killed: {why}"),
        ))
    }

    /// COM_RESET_CONNECTION: the session starts over (same user, same connection).
    pub async fn reset(&mut self, collation: u8) {
        self.release_all().await;
        let fresh = Session::new(
            self.proxy.clone(),
            self.id,
            std::mem::take(&mut self.user),
            std::mem::take(&mut self.host),
            self.caps,
            collation,
            std::mem::take(&mut self.attributes),
        );
        let database = self.database.take();
        *self = fresh;
        self.database = database;
    }
}
