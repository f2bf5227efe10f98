//! One client's session: who it is, the state it asked for (database, session variables,
//! identity values, diagnostics), its hold on backend connections ([`Transaction`]) and
//! its prepared statements. Handlers in the sibling modules read and change it; nothing
//! outside the engine does.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use mysql_common::constants::CapabilityFlags;

use crate::backend::vars::SessionVars;
use crate::backend::{BackendConn, Diagnostic};
use crate::error::ProxyError;
use crate::execute::Target;
use crate::execute::{Transaction, Wants};
use crate::plan::scope::Scope;
use crate::protocol::status;
use crate::protocol::status::MoreResults;
use crate::proxy::{Proxy, Runtime};
use crate::rewrite::SessionValues;
use crate::sql::charset::CHARSET_VARS;
use crate::sql::charset::{Decoding, collation_names, decoding_for};
use crate::sql::lexer::LexMode;

impl Drop for Session {
    fn drop(&mut self) {
        self.proxy.sessions.unregister(&self.handle);
    }
}

/// The state of one client connection.
pub struct Session {
    /// Shared proxy state.
    pub(super) proxy: Arc<Proxy>,
    /// The configuration this session works under now: taken again from the proxy at each
    /// statement while the session holds no backend connection ([`Session::refresh`]).
    pub(super) rt: Arc<Runtime>,
    /// The proxy's connection id (handshake, `CONNECTION_ID()`, `KILL`).
    pub(super) id: u32,
    /// The MySQL user.
    pub(super) user: String,
    /// The client's host.
    pub(super) host: String,
    /// `USER()`'s value, `user@host`, made once.
    pub(super) user_at_host: Arc<str>,
    /// `CURRENT_USER()`'s value, `user@%`, made once.
    pub(super) current_user: Arc<str>,
    /// Capabilities negotiated with the client.
    pub(super) caps: CapabilityFlags,
    /// Connection attributes (`program_name`, ...).
    pub(super) attributes: HashMap<String, String>,
    /// Current database.
    pub(super) database: Option<String>,
    /// Session variables as SQL literals, by lower-case name; always holds the character
    /// set variables and `autocommit`. User variables set with `SET @x = ...` are kept
    /// here too, under their `@name`, and applied to every connection the session uses.
    pub(super) vars: SessionVars,
    /// `autocommit`.
    pub(super) autocommit: bool,
    /// How statements are lexed (from `sql_mode`).
    pub(super) lex_mode: LexMode,
    /// How statements decode (from `character_set_client`).
    pub(super) decoding: Decoding,
    /// Backend connections held, the transaction, pins.
    pub(super) txn: Transaction,
    /// `LAST_INSERT_ID()`.
    pub(super) last_insert_id: u64,
    /// `ROW_COUNT()`.
    pub(super) row_count: i64,
    /// `FOUND_ROWS()`.
    pub(super) found_rows: u64,
    /// `@@sql_select_limit` below its default, read when a SET changes it.
    pub(super) select_limit: Option<u64>,
    /// What `SHOW WARNINGS` lists: the previous statement's diagnostics.
    pub(super) warnings: Vec<Diagnostic>,
    /// Prepared statements.
    pub(super) statements: super::prepared::registry::Statements,
    /// This session as other sessions see it (KILL).
    pub(super) handle: Arc<crate::session_registry::SessionHandle>,
    /// The client connection's TLS parameters (`Ssl_cipher`, `Ssl_version`); `None` in
    /// clear text.
    pub(super) tls: Option<crate::wire::stream::TlsInfo>,
    /// The databases its user may reach under `rt` (SPEC §8a).
    scope: Arc<Scope>,
    /// The [`Proxy::server_databases`] version and the configuration generation `scope`
    /// was built with.
    scope_databases_version: u64,
    scope_generation: u64,
    /// The data-statement shapes this session ran last, under `scope` and `rt`.
    memo: super::memo::ShapeMemo,
    /// What the servers give a new session, as the proxy last read it when this session
    /// started (or was reset): kept, as a server session keeps what it started with.
    pub(super) defaults: Option<Arc<crate::proxy::SessionDefaults>>,
    /// The session's `wait_timeout` (at least 1 s): from `defaults` (`interactive_timeout`
    /// for an interactive client), then as `SET wait_timeout` reads back.
    pub(super) wait_timeout: std::time::Duration,
}

fn literal(s: &str) -> Vec<u8> {
    literal_bytes(s.as_bytes())
}

fn literal_bytes(s: &[u8]) -> Vec<u8> {
    crate::rewrite::quote_string(s)
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
        let collation_id = collation;
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
        // The servers' own defaults, so every connection the session uses has them (a
        // pooled one opened before a `SET GLOBAL` too) and the status flags say so.
        let defaults = proxy.cached_session_defaults();
        let interactive = caps.contains(CapabilityFlags::CLIENT_INTERACTIVE);
        let mut lex_mode = LexMode::default();
        if let Some(d) = &defaults {
            vars.insert("sql_mode".to_owned(), literal_bytes(&d.sql_mode));
            lex_mode = lex_mode.with_sql_mode(&String::from_utf8_lossy(&d.sql_mode));
            if interactive && d.interactive_timeout != d.wait_timeout {
                // MariaDB starts an interactive client's session with interactive_timeout
                // as its wait_timeout.
                vars.insert(
                    "wait_timeout".to_owned(),
                    d.interactive_timeout.to_string().into_bytes(),
                );
            }
        }
        let key = u64::from(collation_id)
            | u64::from(interactive) << 8
            | defaults.as_ref().map_or(0, |d| d.generation) << 9;
        let handle = proxy.sessions.register(id, &user, &host);
        let rt = proxy.runtime();
        let known = proxy.server_databases();
        let scope =
            Arc::new(Scope::of(&rt.config, &user, &host).with_server_databases(&known.names));
        Self {
            scope_databases_version: known.version,
            scope_generation: rt.generation,
            user_at_host: format!("{user}@{host}").into(),
            current_user: format!("{user}@%").into(),
            scope,
            decoding: decoding_for(&charset).unwrap_or(Decoding::Utf8),
            rt,
            proxy,
            id,
            user,
            host,
            caps,
            attributes,
            database: None,
            vars: SessionVars::handshake_default(key, vars),
            autocommit: true,
            lex_mode,
            txn: Transaction::default(),
            last_insert_id: 0,
            row_count: -1,
            found_rows: 0,
            select_limit: None,
            warnings: Vec::new(),
            statements: Default::default(),
            handle,
            tls: None,
            memo: Default::default(),
            wait_timeout: std::time::Duration::from_secs(
                defaults
                    .as_ref()
                    .map_or(28_800, |d| {
                        if interactive {
                            d.interactive_timeout
                        } else {
                            d.wait_timeout
                        }
                    })
                    .max(1),
            ),
            defaults,
        }
    }

    /// What the wire learned of the connection: its TLS parameters (`None` in clear text)
    /// and the servers' version as MariaDB numbers it (101119 for 10.11.19), which decides
    /// how statements lex.
    pub fn connected_over(
        &mut self,
        tls: Option<crate::wire::stream::TlsInfo>,
        server_version: Option<u32>,
    ) {
        self.tls = tls;
        if let Some(v) = server_version {
            self.lex_mode.server_version = v;
        }
    }

    /// This session as other sessions see it (`KILL`, the drain, the idle timeout).
    pub fn handle(&self) -> Arc<crate::session_registry::SessionHandle> {
        self.handle.clone()
    }

    /// Ends the session: gives back the backend connections it holds (a transaction left
    /// open rolls back, as when a client of the server disconnects).
    pub async fn close(&mut self) {
        self.txn.release_all().await;
    }

    /// The MySQL user.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// The current database.
    pub fn database(&self) -> Option<&str> {
        self.database.as_deref()
    }

    /// Sets `LAST_INSERT_ID()`; connections the session uses get it too, so
    /// `@@last_insert_id` and `@@identity` agree with it.
    pub(super) fn set_last_insert_id(&mut self, id: u64) {
        self.last_insert_id = id;
        self.vars
            .insert("last_insert_id".to_owned(), id.to_string().into_bytes());
    }

    /// The session's current database is the logical database.
    pub(super) fn in_logical_database(&self) -> bool {
        self.database
            .as_deref()
            .is_some_and(|d| d.eq_ignore_ascii_case(&self.rt.config.sharding.logical_database))
    }

    /// In a transaction as MySQL would report it.
    pub fn in_transaction(&self) -> bool {
        self.txn.in_transaction()
    }

    /// Status flags for the client's OK and EOF packets (see [`crate::protocol::status`]).
    pub(super) fn status(&self) -> u16 {
        self.final_status(MoreResults::None)
    }

    /// Status flags of a statement's final packet: `more` when another statement of the
    /// same query follows.
    pub(super) fn final_status(&self, more: MoreResults) -> u16 {
        let in_transaction = self.txn.shown();
        status::session(
            self.autocommit,
            in_transaction,
            in_transaction && self.txn.read_only(self.session_read_only()),
            self.sql_mode_flags(),
            more,
        )
    }

    /// The status flags of the session's `sql_mode` (`NO_BACKSLASH_ESCAPES`,
    /// `ANSI_QUOTES`), as the lexer reads statements under it.
    pub(super) fn sql_mode_flags(&self) -> u16 {
        let mut flags = 0;
        if self.lex_mode.no_backslash_escapes {
            flags |= status::NO_BACKSLASH_ESCAPES;
        }
        if self.lex_mode.ansi_quotes {
            flags |= status::ANSI_QUOTES;
        }
        flags
    }

    /// How long the client may stay silent between commands before the session ends, as
    /// MariaDB decides it (`THD::get_net_wait_timeout`): in a transaction,
    /// `idle_write_transaction_timeout` once it wrote or `idle_readonly_transaction_timeout`
    /// until then, else `idle_transaction_timeout`, whichever is set (above 0); otherwise
    /// `wait_timeout`, which an interactive client's session starts with at
    /// `interactive_timeout`. Session values where the session set them, the servers'
    /// defaults ([`crate::proxy::SessionDefaults`]) otherwise.
    pub fn idle_timeout(&self) -> std::time::Duration {
        if !self.txn.shown() {
            return self.wait_timeout;
        }
        let defaults = &self.defaults;
        let seconds = |name: &str, default: u64| {
            self.vars
                .get(name)
                .and_then(|v| std::str::from_utf8(v).ok()?.parse::<u64>().ok())
                .unwrap_or(default)
        };
        let idle = defaults
            .as_ref()
            .map_or([0; 3], |d| d.idle_transaction_timeouts);
        let (specific, default) = if self.txn.changed_rows() {
            ("idle_write_transaction_timeout", idle[2])
        } else {
            ("idle_readonly_transaction_timeout", idle[1])
        };
        [
            seconds(specific, default),
            seconds("idle_transaction_timeout", idle[0]),
        ]
        .into_iter()
        .find(|&limit| limit > 0)
        .map_or(self.wait_timeout, std::time::Duration::from_secs)
    }

    /// The session's `tx_read_only` (`SET SESSION TRANSACTION READ ONLY`).
    fn session_read_only(&self) -> bool {
        ["tx_read_only", "transaction_read_only"]
            .iter()
            .any(|v| self.vars.get(*v).is_some_and(|v| v == b"1"))
    }

    /// Collation id and bytes per character of the results the client receives
    /// (`character_set_results`): the proxy's own result columns are described in it.
    pub(super) fn result_charset(&self) -> (u16, u32) {
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
    pub(super) fn session_values(&self) -> SessionValues {
        SessionValues {
            last_insert_id: self.last_insert_id,
            connection_id: self.id,
            database: self.database.clone(),
            row_count: self.row_count,
            found_rows: self.found_rows,
            user: self.user_at_host.clone(),
            current_user: self.current_user.clone(),
            select_limit: self.select_limit,
        }
    }

    /// The session's transaction, and what a backend connection must carry to serve it
    /// (borrowed side by side).
    pub(super) fn parts(&mut self) -> (&mut Transaction, Wants<'_>) {
        let logical = &self.rt.config.sharding.logical_database;
        let database = self
            .database
            .as_deref()
            .filter(|d| !d.eq_ignore_ascii_case(logical));
        let wants = Wants {
            config: &self.rt.config,
            pools: &self.rt.pools,
            vars: &self.vars,
            database,
            autocommit: self.autocommit,
            found_rows: self.caps.contains(CapabilityFlags::CLIENT_FOUND_ROWS),
            session: Some(&self.handle),
        };
        (&mut self.txn, wants)
    }

    /// The connection to `target` this session uses (every access the frontend makes
    /// passes here: [`crate::execute::target`]): the one it holds, or one from the pool
    /// prepared for it (and joined to its transaction), then held until
    /// [`Transaction::release_idle`].
    pub(super) async fn connection(
        &mut self,
        target: Target,
    ) -> Result<&mut BackendConn, ProxyError> {
        let (txn, wants) = self.parts();
        txn.connection(target, &wants).await
    }

    /// The client asked for IGNORE_SPACE at login: the server adds it to the sql_mode of
    /// the first connection it opens for the session, and the result becomes the
    /// session's sql_mode (then applied to every connection like any variable).
    pub(super) async fn apply_ignore_space(&mut self) -> Result<(), ProxyError> {
        if !self.caps.contains(CapabilityFlags::CLIENT_IGNORE_SPACE) {
            return Ok(());
        }
        let ds = self.rt.config.sharding.default_datasource;
        let conn = self.connection(Target::primary(ds)).await?;
        let read = async {
            conn.execute(b"SET @@session.sql_mode = CONCAT(@@session.sql_mode, ',IGNORE_SPACE')")
                .await?;
            let (_, rows) = conn
                .query_rows(b"SELECT @@session.sql_mode LIMIT 1")
                .await?;
            Ok::<_, ProxyError>(
                rows.into_iter()
                    .next()
                    .and_then(|r| r.into_iter().next().flatten())
                    .unwrap_or_default(),
            )
        }
        .await;
        let mode = match read {
            Ok(mode) => mode,
            Err(e) => {
                conn.mark_broken();
                self.txn.release_idle();
                return Err(e);
            }
        };
        let literal = crate::rewrite::quote_string(&mode);
        conn.state
            .vars
            .insert("sql_mode".to_owned(), literal.clone());
        self.vars.insert("sql_mode".to_owned(), literal);
        self.txn.release_idle();
        Ok(())
    }

    /// Takes the proxy's current configuration when it changed. A transaction finishes
    /// under the configuration it began with. A session whose state lives on backend
    /// connections of the old configuration (user variables, locks, temporary tables:
    /// pinned) keeps it while the shard map and the datasources are unchanged; when they
    /// changed it cannot follow (its rows would go to the old shards), so it ends with
    /// ER_CONNECTION_KILLED and the client reconnects.
    pub(super) fn refresh(&mut self) -> Result<(), ProxyError> {
        // The scope follows the newest configuration at once, in a transaction and in a
        // pinned session too: it only narrows or widens what the checks let through.
        if self.proxy.server_databases_version() != self.scope_databases_version
            || self.proxy.generation() != self.scope_generation
        {
            self.build_scope();
        }
        if self.proxy.generation() == self.rt.generation || self.in_transaction() {
            return Ok(());
        }
        let current = self.proxy.runtime();
        self.txn.release_idle();
        if !self.txn.holds_any() && !self.txn.pinned() {
            self.rt = current;
            return Ok(());
        }
        let (old, new) = (&self.rt.config, &current.config);
        let same_servers = old.datasources.len() == new.datasources.len()
            && old
                .datasources
                .iter()
                .zip(&new.datasources)
                .all(|(a, b)| crate::proxy::same_server(a, b));
        if old.sharding.shard_map_version == new.sharding.shard_map_version && same_servers {
            return Ok(());
        }
        let why = "the shard map or the datasources changed in a configuration reload while this session kept state on its backend connections (user variables, locks, temporary tables); reconnect";
        self.txn.set_lost(why.to_owned());
        Err(ProxyError::client(
            crate::error::ER_CONNECTION_KILLED,
            b"70100",
            format!("Connection was killed: {why}"),
        ))
    }

    /// COM_RESET_CONNECTION: the session starts over (same user, same connection).
    pub(super) async fn reset(&mut self, collation: u8) {
        self.txn.release_all().await;
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
        let server_version = self.lex_mode.server_version;
        *self = fresh;
        self.database = database;
        self.lex_mode.server_version = server_version;
    }

    /// After an error, `SHOW WARNINGS` lists it.
    pub(super) fn record_error(&mut self, e: &ProxyError) {
        let (code, _, message) = e.to_packet_parts();
        self.warnings = vec![Diagnostic {
            level: b"Error".to_vec(),
            code: code.to_string().into_bytes(),
            message,
        }];
    }

    /// The user's scope under the configuration in force, with the databases the servers
    /// were last seen to have.
    fn build_scope(&mut self) {
        let known = self.proxy.server_databases();
        let current = self.proxy.runtime();
        self.scope = Arc::new(
            Scope::of(&current.config, &self.user, &self.host).with_server_databases(&known.names),
        );
        self.scope_databases_version = known.version;
        self.scope_generation = current.generation;
    }

    /// The databases this session's user may reach, under the configuration it works
    /// under.
    pub(super) fn scope(&self) -> Arc<Scope> {
        self.scope.clone()
    }

    /// Refuses a statement naming a database outside the user's scope (1142, 1370, 1044;
    /// [`crate::plan::scope::check_statement`]), before anything reaches a backend. A
    /// current database a reload took out of the scope refuses every statement but `USE`
    /// (1044): unqualified names would still reach it.
    pub(super) fn check_database_access(
        &self,
        sql: &[u8],
        lexed: &crate::sql::lexer::Lexed,
    ) -> Result<(), ProxyError> {
        self.check_name_bytes(sql, lexed)?;
        if let Some(db) = self.database.as_deref() {
            let is_use = lexed.tokens.first().is_some_and(|t| t.is_word(sql, "use"));
            if !is_use {
                self.scope.check_database(db)?;
            }
        }
        crate::plan::scope::check_text(
            &self.scope,
            sql,
            &lexed.tokens,
            self.lex_mode,
            self.database.as_deref(),
        )
    }

    /// Refuses names outside quotes with bytes above 0x7F in a single-byte character set.
    pub(super) fn check_name_bytes(
        &self,
        sql: &[u8],
        lexed: &crate::sql::lexer::Lexed,
    ) -> Result<(), ProxyError> {
        // In a single-byte character set a byte above 0x7F may be a space to the server
        // (0xA0 in latin1 and latin2, not in cp1251): the proxy, reading it as part of a
        // name, would not see the words it separates (`USE\xA0mysql`).
        if self.decoding == Decoding::SingleByte {
            let unquoted = lexed.tokens.iter().any(|t| {
                t.kind == crate::sql::lexer::TokenKind::Word
                    && t.bytes(sql).iter().any(|&b| b > 0x7F)
            });
            if unquoted {
                return Err(ProxyError::unsupported(
                    "a name with bytes above 0x7F outside quotes in a single-byte character set (some of them are spaces to the server): quote the name with backquotes, or use utf8mb4",
                ));
            }
        }
        Ok(())
    }

    /// The shape of a statement the session's memo may hold ([`super::memo`]), if it may.
    pub(super) fn memo_shape(
        &self,
        sql: &[u8],
        lexed: &crate::sql::lexer::Lexed,
    ) -> Option<Vec<u8>> {
        super::memo::ShapeMemo::<Scope>::eligible(sql, lexed, self.lex_mode).then(|| {
            crate::sql::shape::shape_key(sql, lexed, self.lex_mode, self.in_logical_database())
        })
    }

    /// The session's present epoch ([`super::memo::Epoch`]).
    pub(super) fn epoch(&self) -> super::memo::Epoch {
        super::memo::Epoch::new(
            &self.scope,
            self.rt.generation,
            self.database.as_deref(),
            self.lex_mode,
        )
    }

    /// Whether the session is in `epoch`.
    pub(super) fn in_epoch(&self, epoch: &super::memo::Epoch) -> bool {
        epoch.matches(
            &self.scope,
            self.rt.generation,
            self.database.as_deref(),
            self.lex_mode,
        )
    }

    /// The analysis of a data statement of shape `shape` that passed the checks under the
    /// session's present scope, configuration, database and lexer mode.
    pub(super) fn memo_get(&mut self, shape: &[u8]) -> Option<Arc<crate::sql::Analysis>> {
        self.memo.get(
            shape,
            &self.scope,
            self.rt.generation,
            self.database.as_deref(),
            self.lex_mode,
        )
    }

    /// Keeps a shape that just passed the checks as a plain data statement.
    pub(super) fn memo_insert(&mut self, shape: Vec<u8>, analysis: Arc<crate::sql::Analysis>) {
        self.memo.insert(
            shape,
            analysis,
            &self.scope,
            self.rt.generation,
            self.database.as_deref(),
            self.lex_mode,
        );
    }

    /// Refuses a database outside the user's scope (1044): `USE`, COM_INIT_DB, the
    /// handshake's database, `SHOW ... FROM db`.
    pub(super) fn check_database(&self, name: &str) -> Result<(), ProxyError> {
        self.scope().check_database(name)
    }
}
