//! The state one proxy process shares between its sessions, the admin port and the
//! signal handlers: the [`Runtime`] a configuration builds (swapped as one by
//! [`Proxy::reload`]), the id issuer, the session registry and the counters. It knows no
//! session's code: the listener ([`crate::server`]) hands connections to the frontend.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::backend::Pools;
use crate::config::Config;
use crate::execute::Target;
use crate::execute::control::{ControlConn, Source, control_connection};
use crate::route::Router;
use crate::route::index::MysqlIndexTable;
use crate::sql::shape::AnalysisCache;

pub mod shard_map;

/// After the drain deadline: how long killing running statements may take, and then how
/// long killed sessions get to roll back and end before they are aborted (so a drain ends
/// at most twice this after `drain_timeout`, whatever the backends do).
pub const KILL_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Greeting version while the default datasource cannot be asked.
pub const FALLBACK_VERSION: &str = "5.5.5-10.11.0-MariaDB-routekey-proxy";

/// What one configuration builds: the parts a reload replaces together. Sessions take
/// the current one at each statement while they hold no backend connection, so a
/// transaction finishes under the configuration it began with.
pub struct Runtime {
    /// The configuration.
    pub config: Arc<Config>,
    /// The router, with its index table and cache.
    pub router: Router<MysqlIndexTable>,
    /// Backend pools.
    pub pools: Pools,
    /// The members of clustered datasources: their probes and roles.
    pub topology: crate::topology::Topology,
    /// Analyses by statement shape (they depend on the configuration's tables).
    pub analyses: AnalysisCache,
    /// The column definitions of combined scatters' answers, by statement shape and
    /// session ([`crate::merge::columns`]).
    pub columns: crate::merge::columns::ColumnCache,
    /// 1 for the configuration loaded at start, then one more per reload.
    pub generation: u64,
    /// The TLS certificate and RSA key clients are offered, read from the files the
    /// configuration names (on reload, a file that does not load keeps the previous one).
    pub client_security: crate::access::tls::ClientSecurity,
}

impl Runtime {
    /// A connection for one of the proxy's own accesses to `target`'s datasource, under
    /// this configuration ([`crate::execute::control`]).
    pub async fn control_connection(
        &self,
        target: Target,
        source: Source,
    ) -> Result<ControlConn, crate::error::ProxyError> {
        // The proxy's own reads and writes go to the primary (a datasource of one server:
        // its server); with none known, the first member answers what it can.
        let member = self
            .topology
            .cluster(target.datasource)
            .and_then(|c| c.primary_now())
            .unwrap_or(0);
        control_connection(
            &self.pools,
            self.config.datasource(target.datasource),
            target,
            member,
            self.config.server.max_packet_size,
            source,
        )
        .await
    }

    fn build(config: Arc<Config>, previous: Option<&Runtime>) -> Self {
        let index = MysqlIndexTable::new(&config);
        let router = match previous {
            Some(p) if p.config.cache == config.cache => p.router.succeed(config.clone(), index),
            // New cache settings: a new cache, the same counters.
            Some(p) => Router::new(config.clone(), index).counting_into(&p.router),
            None => Router::new(config.clone(), index),
        };
        use crate::access::tls::ClientSecurity;
        let client_security = match previous {
            Some(p) => ClientSecurity::reload(&config.server, &p.client_security),
            None => ClientSecurity::load(&config.server).unwrap_or_else(|e| {
                tracing::error!(error = %e, "client TLS/RSA material not loaded; not offered");
                ClientSecurity::default()
            }),
        };
        let topology = crate::topology::Topology::new(&config, previous.map(|p| &p.topology));
        if let Some(cluster) = topology.cluster(config.index.datasource) {
            cluster.follow(&router.index().primary_cell());
        }
        Self {
            topology,
            client_security,
            router,
            pools: Pools::rebuild(&config, previous.map(|p| &p.pools)),
            analyses: AnalysisCache::new(config.server.analysis_cache_capacity),
            columns: crate::merge::columns::ColumnCache::new(config.server.analysis_cache_capacity),
            generation: previous.map_or(1, |p| p.generation + 1),
            config,
        }
    }
}

/// Whether two datasource definitions reach the same server as the same account and
/// database (pool sizes and timeouts aside).
pub fn same_server(a: &crate::config::Datasource, b: &crate::config::Datasource) -> bool {
    (
        &a.name,
        &a.address,
        &a.members,
        &a.user,
        &a.password,
        &a.database,
    ) == (
        &b.name,
        &b.address,
        &b.members,
        &b.user,
        &b.password,
        &b.database,
    )
}

/// State shared by every session of one proxy process.
pub struct Proxy {
    /// The configuration in force and what it built (swapped by [`Proxy::reload`]).
    runtime: arc_swap::ArcSwap<Runtime>,
    /// The configuration the process started with: its listeners, id layout and lease
    /// settings stay in force until a restart.
    pub config: Arc<Config>,
    /// The order id service.
    pub issuer: Arc<crate::issuance::Issuer>,
    /// Sessions by connection id (KILL).
    pub sessions: crate::session_registry::Registry,
    /// The caching_sha2_password fast-path cache and recent failed logins.
    pub logins: crate::access::Logins,
    /// Counters for `/metrics`.
    pub metrics: crate::metrics::Metrics,
    /// The coordinator of atomic commits across datasources and what its resolver found
    /// (kept across reloads: its xids' sequence).
    pub coordinator: Arc<crate::execute::xa::Coordinator>,
    /// Set once a drain is asked for (SIGTERM, `/quitquitquit`).
    drain_requested: tokio::sync::watch::Sender<bool>,
    /// Route resolution counters (kept across reloads).
    pub router_stats: Arc<crate::route::RouteStats>,
    /// The version string of the default datasource, learnt from its greeting.
    backend_version: tokio::sync::OnceCell<String>,
    next_connection_id: AtomicU32,
    reloading: std::sync::Mutex<()>,
    /// The databases the datasources have, as last read ([`Proxy::learn_server_databases`]).
    server_databases: arc_swap::ArcSwap<ServerDatabases>,
    /// What sessions start with, as last read ([`Proxy::learn_session_defaults`]).
    session_defaults: arc_swap::ArcSwapOption<SessionDefaults>,
    /// When [`Proxy::session_defaults`] were last read (or tried).
    session_defaults_read: std::sync::Mutex<Option<std::time::Instant>>,
    /// Held while they are read.
    reading_session_defaults: tokio::sync::Mutex<()>,
    /// The versioned shard map this proxy follows ([`shard_map`]).
    pub shard_map: shard_map::Follower,
}

/// What a new session starts with on the servers, read from the default datasource's
/// global variables: a session through the proxy starts the same (its `sql_mode`, which
/// decides how strings are escaped and names quoted, and so the `NO_BACKSLASH_ESCAPES` and
/// `ANSI_QUOTES` status flags clients escape by; its idle timeout) and keeps them, as a
/// server session keeps what it started with. Read by the first session, and again by a
/// session that starts [`SESSION_DEFAULTS_REFRESH`] or more after the last read, so a `SET
/// GLOBAL` on the server reaches new sessions within that time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionDefaults {
    /// `@@global.sql_mode` (mode names, comma-separated).
    pub sql_mode: Vec<u8>,
    /// `@@global.wait_timeout`, in seconds: a session's idle timeout.
    pub wait_timeout: u64,
    /// `@@global.interactive_timeout`, in seconds: the idle timeout of a session whose
    /// client says it is interactive (CLIENT_INTERACTIVE).
    pub interactive_timeout: u64,
    /// `@@global.session_track_schema`: a client that tracks session state is told of a
    /// new current database.
    pub session_track_schema: bool,
    /// `@@global.idle_transaction_timeout`, `idle_readonly_transaction_timeout` and
    /// `idle_write_transaction_timeout`, in seconds (0: off): the idle timeout inside a
    /// transaction.
    pub idle_transaction_timeouts: [u64; 3],
    /// 1 for the first values read, one more per change: sessions that start under the
    /// same generation start with the same variables.
    pub generation: u64,
}

/// How old [`SessionDefaults`] may be when a session starts with them.
pub const SESSION_DEFAULTS_REFRESH: std::time::Duration = std::time::Duration::from_secs(10);

/// The databases on the datasources (lower case, sorted, every datasource's together),
/// which the scope check refuses wherever their names qualify another (see
/// [`crate::plan::scope::Scope::with_server_databases`]). Names once seen stay until a
/// restart: a datasource that does not answer a later read removes nothing.
#[derive(Debug, Default)]
pub struct ServerDatabases {
    /// 0 before the first read; one more per change.
    pub version: u64,
    /// The names.
    pub names: Vec<String>,
}

/// How often [`Proxy::learn_server_databases`] runs while the proxy serves.
pub const SERVER_DATABASES_REFRESH: std::time::Duration = std::time::Duration::from_secs(60);

impl Proxy {
    /// Builds the shared state (no connection opens yet).
    pub fn new(config: Config) -> Arc<Self> {
        let config = Arc::new(config);
        let runtime = Runtime::build(config.clone(), None);
        let issuer =
            crate::issuance::Issuer::new(config.clone(), Arc::new(crate::issuance::SystemClock));
        let shard_map = shard_map::Follower::new(&config);
        if let Some(cluster) = runtime.topology.cluster(config.index.datasource) {
            cluster.follow(&issuer.lease_primary_cell());
            cluster.follow(&shard_map.store.primary_cell());
        }
        Arc::new(Self {
            shard_map,
            issuer,
            sessions: Default::default(),
            logins: Default::default(),
            metrics: Default::default(),
            coordinator: Default::default(),
            drain_requested: tokio::sync::watch::Sender::new(false),
            router_stats: runtime.router.stats().clone(),
            backend_version: tokio::sync::OnceCell::new(),
            next_connection_id: AtomicU32::new(1),
            runtime: arc_swap::ArcSwap::from_pointee(runtime),
            reloading: std::sync::Mutex::new(()),
            server_databases: Default::default(),
            session_defaults: Default::default(),
            session_defaults_read: Default::default(),
            reading_session_defaults: Default::default(),
            config,
        })
    }

    /// The databases the datasources were last seen to have.
    pub fn server_databases(&self) -> Arc<ServerDatabases> {
        self.server_databases.load_full()
    }

    /// The version of [`Proxy::server_databases`] (sessions ask at every statement).
    pub fn server_databases_version(&self) -> u64 {
        self.server_databases.load().version
    }

    /// Reads the database names of every datasource (`information_schema.SCHEMATA`, on a
    /// connection of its own, so the pools' clients and counts are untouched; a datasource
    /// that does not answer within 5 s is left for the next round) and adds those not seen
    /// before.
    pub async fn learn_server_databases(&self) {
        let runtime = self.runtime();
        let mut names = self.server_databases.load().names.clone();
        for (i, ds) in runtime.config.datasources.iter().enumerate() {
            let id = crate::config::DatasourceId(i as u16);
            let read = async {
                let mut conn = runtime
                    .control_connection(Target::read(id), Source::Own)
                    .await?;
                let (_, rows) = conn
                    .query_rows(b"SELECT SCHEMA_NAME FROM information_schema.SCHEMATA")
                    .await?;
                conn.close().await;
                Ok::<_, crate::error::ProxyError>(rows)
            };
            match tokio::time::timeout(std::time::Duration::from_secs(5), read).await {
                Ok(Ok(rows)) => names.extend(
                    rows.into_iter()
                        .filter_map(|r| r.into_iter().next().flatten())
                        .map(|v| String::from_utf8_lossy(&v).to_ascii_lowercase()),
                ),
                Ok(Err(e)) => {
                    tracing::debug!(datasource = %ds.name, error = %e, "database names not read");
                }
                Err(_) => tracing::debug!(datasource = %ds.name, "database names not read in 5 s"),
            }
        }
        names.sort();
        names.dedup();
        let current = self.server_databases.load();
        if names != current.names {
            self.server_databases.store(Arc::new(ServerDatabases {
                version: current.version + 1,
                names,
            }));
        }
    }

    /// What a new session starts with ([`SessionDefaults`]). Read again when the last read
    /// is [`SESSION_DEFAULTS_REFRESH`] old, by one session while the others go on with
    /// what was read before (the first session waits for the first read, bounded by the
    /// datasource's connect timeout). `None` while the default datasource was never
    /// reached: sessions then start with whatever their backend connections have, and
    /// follow it.
    pub async fn session_defaults(&self) -> Option<Arc<SessionDefaults>> {
        let fresh = || {
            self.session_defaults_read
                .lock()
                .expect("not poisoned")
                .is_some_and(|at| at.elapsed() < SESSION_DEFAULTS_REFRESH)
        };
        if fresh() {
            return self.session_defaults.load_full();
        }
        let _reading = match self.reading_session_defaults.try_lock() {
            Ok(guard) => guard,
            Err(_) if self.session_defaults.load().is_some() => {
                return self.session_defaults.load_full();
            }
            Err(_) => self.reading_session_defaults.lock().await,
        };
        if !fresh() {
            self.learn_session_defaults().await;
            *self.session_defaults_read.lock().expect("not poisoned") =
                Some(std::time::Instant::now());
        }
        self.session_defaults.load_full()
    }

    /// The [`SessionDefaults`] last read, without waiting.
    pub fn cached_session_defaults(&self) -> Option<Arc<SessionDefaults>> {
        self.session_defaults.load_full()
    }

    /// Reads the default datasource's global `sql_mode`, `wait_timeout` and
    /// `interactive_timeout` (on a pooled connection, within its connect timeout); keeps
    /// them, with a new generation, when they changed. A failed read keeps what was read
    /// before.
    pub async fn learn_session_defaults(&self) {
        let runtime = self.runtime();
        let ds = runtime.config.sharding.default_datasource;
        let limit = runtime.config.datasource(ds).connect_timeout * 2;
        let read = async {
            let mut conn = runtime
                .control_connection(Target::read(ds), Source::Pool)
                .await?;
            let (_, rows) = conn
                .query_rows(b"SELECT CONVERT(@@global.sql_mode USING binary), @@global.wait_timeout, @@global.interactive_timeout, @@global.session_track_schema, @@global.idle_transaction_timeout, @@global.idle_readonly_transaction_timeout, @@global.idle_write_transaction_timeout LIMIT 1")
                .await?;
            Ok::<_, crate::error::ProxyError>(rows.into_iter().next().unwrap_or_default())
        };
        let row = match tokio::time::timeout(limit, read).await {
            Ok(Ok(row)) => row,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "session defaults not read");
                return;
            }
            Err(_) => {
                tracing::debug!("session defaults not read in time");
                return;
            }
        };
        let cell = |i: usize| row.get(i).cloned().flatten().unwrap_or_default();
        let number = |i: usize| String::from_utf8_lossy(&cell(i)).parse::<u64>().ok();
        let current = self.session_defaults.load_full();
        let mut read = SessionDefaults {
            sql_mode: cell(0),
            wait_timeout: number(1).unwrap_or(28_800),
            interactive_timeout: number(2).unwrap_or(28_800),
            session_track_schema: cell(3) == b"1",
            idle_transaction_timeouts: [4, 5, 6].map(|i| number(i).unwrap_or(0)),
            generation: current.as_ref().map_or(1, |c| c.generation),
        };
        if current.as_deref() != Some(&read) {
            if current.is_some() {
                read.generation += 1;
                tracing::info!(sql_mode = %String::from_utf8_lossy(&read.sql_mode), wait_timeout = read.wait_timeout, interactive_timeout = read.interactive_timeout, session_track_schema = read.session_track_schema, idle_transaction_timeouts = ?read.idle_transaction_timeouts, "the servers' session defaults changed: new sessions start with them");
            }
            self.session_defaults.store(Some(Arc::new(read)));
        }
    }

    /// The configuration in force now and what it built.
    pub fn runtime(&self) -> Arc<Runtime> {
        self.runtime.load_full()
    }

    /// The generation of the configuration in force (no reference count taken: sessions
    /// ask at every statement).
    pub fn generation(&self) -> u64 {
        self.runtime.load().generation
    }

    /// Puts a new, validated configuration in force. Refused (and nothing changes) when it
    /// changes what only a restart can: the listen addresses, the id layout, the lease
    /// settings. Counted in `routekey_config_reloads_total` either way. Sessions pick the
    /// new configuration up at their next statement outside a transaction; pools of
    /// datasources defined as before keep their connections; a changed shard map empties
    /// the route cache (its keys carry the shard map version).
    pub fn reload(&self, config: Config) -> Result<u64, String> {
        let _one_at_a_time = self.reloading.lock().unwrap_or_else(|e| e.into_inner());
        let result = self.try_reload(config);
        self.metrics.count_reload(result.is_ok());
        result
    }

    fn try_reload(&self, config: Config) -> Result<u64, String> {
        // Where shards live is the shard map table's (when read), not the file's.
        let config = self.shard_map.overlay(config)?;
        let first = &self.config;
        let mut fixed = Vec::new();
        if config.server.listen != first.server.listen {
            fixed.push("server.listen");
        }
        if config.server.socket != first.server.socket {
            fixed.push("server.socket");
        }
        if config.admin.listen != first.admin.listen {
            fixed.push("admin.listen");
        }
        if config.server.worker_threads != first.server.worker_threads {
            fixed.push("server.worker_threads");
        }
        if config.layout != first.layout {
            fixed.push("[id] layout");
        }
        let (a, b) = (&config.issuance, &first.issuance);
        if a.lease_table != b.lease_table
            || a.lease_ttl != b.lease_ttl
            || a.legacy != b.legacy
            || a.legacy_machine_base != b.legacy_machine_base
            || config.index.database != first.index.database
            || !same_server(
                config.datasource(config.index.datasource),
                first.datasource(first.index.datasource),
            )
        {
            // The lease store keeps its connection settings: a lease taken on another
            // server (or database) would not exclude the holders of this one.
            fixed.push("[issuance] lease and legacy id settings, the index (meta) datasource");
        }
        let (a, b) = (&config.transactions, &first.transactions);
        if a.database != b.database || a.decision_table != b.decision_table {
            // A resolver reading another table finds no commit record and would roll back
            // branches this one says to commit (docs/operations.md: change it with no
            // branch prepared anywhere, on every sidecar at once).
            fixed.push("transactions.database, transactions.decision_table");
        }
        if !fixed.is_empty() {
            return Err(format!(
                "{} cannot change while the proxy runs; restart it to apply",
                fixed.join(", ")
            ));
        }
        Ok(self.install(config, false))
    }

    /// Builds the runtime of `config` from the one in force and puts it in force; its
    /// generation. `placement_only`: `config` is the one in force with other shard
    /// placement (a shard map version): the caches of analyses and of combined scatters'
    /// column descriptions carry over (neither depends on where shards live; a description
    /// that no longer fits is noticed and replaced when it is used).
    fn install(&self, config: Config, placement_only: bool) -> u64 {
        let config = Arc::new(config);
        let previous = self.runtime.load_full();
        let mut next = Runtime::build(config.clone(), Some(&previous));
        if placement_only {
            next.analyses = previous.analyses.clone();
            next.columns = previous.columns.clone();
        }
        if let Some(cluster) = next.topology.cluster(config.index.datasource) {
            cluster.follow(&self.issuer.lease_primary_cell());
            cluster.follow(&self.shard_map.store.primary_cell());
        }
        let generation = next.generation;
        self.issuer.reconfigure(config);
        self.runtime.store(Arc::new(next));
        generation
    }

    /// The version string clients see in the greeting: `server.server_version` when set,
    /// else the default datasource's own (learnt once; a fallback while it is down).
    pub async fn server_version(&self) -> String {
        let runtime = self.runtime();
        if !runtime.config.server.server_version.is_empty() {
            return runtime.config.server.server_version.clone();
        }
        let ds = runtime.config.sharding.default_datasource;
        let learnt = self
            .backend_version
            .get_or_try_init(|| async {
                let conn = runtime
                    .control_connection(Target::read(ds), Source::Pool)
                    .await?;
                Ok::<_, crate::error::ProxyError>(conn.server_version().to_owned())
            })
            .await;
        match learnt {
            Ok(v) => v.clone(),
            Err(_) => FALLBACK_VERSION.to_owned(),
        }
    }

    /// Asks [`crate::server::serve`] to drain and return: `/readyz` says 503 at once (see
    /// [`crate::config::ServerConfig::drain_timeout`]).
    pub fn request_drain(&self) {
        self.metrics.set_draining();
        self.drain_requested.send_replace(true);
    }

    /// Completes once a drain was asked for ([`Proxy::request_drain`]).
    pub async fn drain_requested(&self) {
        let mut rx = self.drain_requested.subscribe();
        let _ = rx.wait_for(|asked| *asked).await;
    }

    /// A new connection id (never 0).
    pub fn next_connection_id(&self) -> u32 {
        loop {
            let id = self.next_connection_id.fetch_add(1, Ordering::Relaxed);
            if id != 0 {
                return id;
            }
        }
    }
}

/// The versioned shard map ([`shard_map`]): read, applied, waited for at a fence.
impl Proxy {
    /// The shard map version in force (0: the configuration's ranges, the table not yet
    /// read).
    pub fn map_version(&self) -> u64 {
        self.runtime.load().config.sharding.map_version
    }

    /// [`Proxy::refresh_shard_map`] shared by the statements waiting at a fence: at most one
    /// read per half [`shard_map::FENCE_POLL`]; whether the last read succeeded.
    async fn refresh_shard_map_shared(&self) -> bool {
        let mut last = self.shard_map.last_read.lock().await;
        if let Some((at, ok)) = *last
            && at.elapsed() < shard_map::FENCE_POLL / 2
        {
            return ok;
        }
        let ok = self.refresh_shard_map().await.is_ok();
        *last = Some((std::time::Instant::now(), ok));
        ok
    }

    /// Reads the newest shard map version (creating and seeding the table when it is
    /// missing or empty) and puts it in force when it is newer than the one in force; the
    /// version in force after.
    ///
    /// # Errors
    /// The table could not be read (counted in `routekey_shard_map_read_failures_total`),
    /// or its newest version cannot apply to this proxy's configuration (counted in
    /// `routekey_shard_map_apply_failures_total`; the version in force stays).
    pub async fn refresh_shard_map(&self) -> Result<u64, String> {
        let config = self.runtime().config.clone();
        let f = &self.shard_map;
        let map = match f.store.newest_or_seed(&config).await {
            Ok(map) => map,
            Err(e) => {
                f.read_failures.fetch_add(1, Ordering::Relaxed);
                return Err(e);
            }
        };
        f.newest_read.fetch_max(map.version, Ordering::Relaxed);
        if map.version <= self.map_version() {
            return Ok(self.map_version());
        }
        let _one_at_a_time = self.reloading.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.runtime.load().config.clone();
        if map.version <= current.sharding.map_version {
            return Ok(current.sharding.map_version);
        }
        let next = map.apply(&current).inspect_err(|_| {
            f.apply_failures.fetch_add(1, Ordering::Relaxed);
        })?;
        let before = f.applied();
        if before
            .as_ref()
            .is_some_and(|b| b.datasources != map.datasources)
        {
            tracing::info!(version = map.version, shards = %map.describe(), "shard map version applied");
        } else {
            tracing::debug!(version = map.version, shards = %map.describe(), "shard map version applied");
        }
        *f.applied
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(map.clone());
        self.install(next, true);
        f.changed.notify_waiters();
        Ok(map.version)
    }

    /// After a statement under shard map `version` found a shard table missing: waits until
    /// a newer version is in force, as long as a move's cut-over stands fenced (the moves
    /// table says so), until `deadline` (`shard_map.fence_wait` after the statement's first
    /// fence); a fence undone meanwhile (the cut-over tries again later, or an abort) ends
    /// the wait too, and so does [`shard_map::FENCE_RETRY`] at a standing fence (the
    /// statement then runs again to see). Reads the map at once
    /// first (a proxy polling slowly learns of a published move here). The statements
    /// waiting at once share their reads of the meta datasource (one of each per
    /// [`shard_map::FENCE_POLL`]); while it does not answer, they wait on (a table is only
    /// "missing for another reason" once the meta datasource said nothing moves).
    pub async fn await_shard_map_after(
        &self,
        version: u64,
        deadline: std::time::Instant,
    ) -> shard_map::FenceWait {
        let started = std::time::Instant::now();
        let mut fenced = false;
        let result = loop {
            let read = self.refresh_shard_map_shared().await;
            if self.map_version() > version {
                break shard_map::FenceWait::Moved;
            }
            match (read, self.shard_map.moving().await) {
                (_, Some(true)) => fenced = true,
                // The cut-over this statement waited for was undone: the tables are back.
                (_, Some(false)) if fenced => break shard_map::FenceWait::Undone,
                // The newest map read and nothing moving: the table is missing for another
                // reason; the statement's own error stands.
                (true, Some(false)) => break shard_map::FenceWait::NotMoving,
                // The meta datasource did not answer: not known yet.
                _ => {}
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break shard_map::FenceWait::TimedOut;
            }
            if fenced && started.elapsed() >= shard_map::FENCE_RETRY {
                break shard_map::FenceWait::StillFenced;
            }
            let _ = tokio::time::timeout(
                left.min(shard_map::FENCE_POLL),
                self.shard_map.changed.notified(),
            )
            .await;
        };
        self.shard_map.count_fence_wait(result);
        result
    }
}
