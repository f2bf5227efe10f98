//! One client's session: who it is, the state it asked for (database, session variables,
//! identity values, diagnostics), its hold on backend connections ([`Transaction`]) and
//! its prepared statements. Handlers in the sibling modules read and change it; nothing
//! outside the engine does.

use std::collections::HashMap;
use std::sync::Arc;

use mysql_common::constants::CapabilityFlags;

use super::checks::Checks;
use super::state::SessionState;
use crate::backend::BackendConn;
use crate::error::ProxyError;
use crate::execute::Target;
use crate::execute::{Transaction, Wants};
use crate::protocol::status;
use crate::protocol::status::MoreResults;
use crate::proxy::{Proxy, Runtime};
use crate::rewrite::SessionValues;

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
    /// What the session asked for and was told: its variables, characteristics,
    /// identity values and diagnostics ([`SessionState`]).
    pub(super) state: SessionState,
    /// Backend connections held, the transaction, pins.
    pub(super) txn: Transaction,
    /// Prepared statements.
    pub(super) statements: super::prepared::registry::Statements,
    /// This session as other sessions see it (KILL).
    pub(super) handle: Arc<crate::session_registry::SessionHandle>,
    /// The client connection's TLS parameters (`Ssl_cipher`, `Ssl_version`); `None` in
    /// clear text.
    pub(super) tls: Option<crate::wire::stream::TlsInfo>,
    /// What its statements are checked against: the user's scope and the memo of shapes
    /// that passed ([`Checks`]).
    pub(super) checks: Checks,
    /// The user's `reads` and whether its replica reads are causal (`consistency =
    /// "session"`), as configured at login.
    pub(super) user_reads: (crate::config::Reads, bool),
    /// The running data statement's `/*read=...*/` hint, if any.
    pub(super) statement_reads: Option<crate::config::Reads>,
    /// How the running data statement's steps reach their datasources: `Read` when it
    /// only reads and needs no one connection (a replica may serve it), else `Primary`.
    pub(super) step_access: crate::execute::Access,
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
        // The servers' own defaults, so every connection the session uses has them (a
        // pooled one opened before a `SET GLOBAL` too) and the status flags say so.
        let defaults = proxy.cached_session_defaults();
        let interactive = caps.contains(CapabilityFlags::CLIENT_INTERACTIVE);
        let state = SessionState::new(collation, interactive, defaults);
        let handle = proxy.sessions.register(id, &user, &host);
        let rt = proxy.runtime();
        let checks = Checks::new(&proxy, &rt, &user, &host);
        let user_reads = rt
            .config
            .user(&user)
            .map_or((crate::config::Reads::Primary, true), |u| {
                (
                    u.reads,
                    u.consistency == crate::config::Consistency::Session,
                )
            });
        Self {
            user_reads,
            statement_reads: None,
            step_access: crate::execute::Access::Primary,
            user_at_host: format!("{user}@{host}").into(),
            current_user: format!("{user}@%").into(),
            checks,
            rt,
            proxy,
            id,
            user,
            host,
            caps,
            attributes,
            state,
            txn: Transaction::default(),
            statements: Default::default(),
            handle,
            tls: None,
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
            self.state.lex_mode.server_version = v;
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
        self.state.database.as_deref()
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
            self.state.autocommit,
            in_transaction,
            in_transaction && self.txn.read_only(self.state.read_only()),
            self.state.sql_mode_flags(),
            more,
        )
    }

    /// How long the client may stay silent between commands before the session ends
    /// (`SessionState::idle_timeout`, in `engine/state.rs`).
    pub fn idle_timeout(&self) -> std::time::Duration {
        self.state
            .idle_timeout(self.txn.shown(), self.txn.changed_rows())
    }

    /// Values for session functions.
    pub(super) fn session_values(&self) -> SessionValues {
        SessionValues {
            last_insert_id: self.state.last_insert_id,
            connection_id: self.id,
            database: self.state.database.clone(),
            row_count: self.state.row_count,
            found_rows: self.state.found_rows,
            user: self.user_at_host.clone(),
            current_user: self.current_user.clone(),
            select_limit: self.state.select_limit,
        }
    }

    /// The session's transaction, and what a backend connection must carry to serve it
    /// (borrowed side by side).
    pub(super) fn parts(&mut self) -> (&mut Transaction, Wants<'_>) {
        let logical = &self.rt.config.sharding.logical_database;
        let database = self
            .state
            .database
            .as_deref()
            .filter(|d| !d.eq_ignore_ascii_case(logical));
        let wants = Wants {
            config: &self.rt.config,
            pools: &self.rt.pools,
            vars: &self.state.vars,
            database,
            autocommit: self.state.autocommit,
            found_rows: self.caps.contains(CapabilityFlags::CLIENT_FOUND_ROWS),
            session: Some(&self.handle),
            topology: &self.rt.topology,
            reads: self.statement_reads.unwrap_or(self.user_reads.0),
            causal: self.user_reads.1,
            coordinator: &self.proxy.coordinator,
        };
        (&mut self.txn, wants)
    }

    /// Records a write of the session on `ds` ([`Transaction::record_write`]): on a
    /// clustered datasource, its GTID is read when it commits.
    pub(super) fn record_write(&mut self, ds: crate::config::DatasourceId) {
        let clustered = self.rt.topology.cluster(ds).is_some();
        self.txn.record_write(ds, clustered);
    }

    /// The connection to `target` this session uses (every access the engine makes
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
        self.state.vars.insert("sql_mode".to_owned(), literal);
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
        self.checks.follow(&self.proxy, &self.user, &self.host);
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
        let database = self.state.database.take();
        let server_version = self.state.lex_mode.server_version;
        *self = fresh;
        self.state.database = database;
        self.state.lex_mode.server_version = server_version;
    }
}
