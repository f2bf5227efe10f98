//! The typed, validated configuration the rest of the program trusts (built by
//! [`super::validate`] from the raw TOML of [`super::raw`]).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

pub use crate::id::ChannelId;
use crate::id::{IdLayout, RouteKeyDecoder};

/// A datasource, by its position in [`Config::datasources`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DatasourceId(pub u16);

/// A binding table, by its position in [`Sharding::binding_tables`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableId(pub u8);

/// A configuration error: where it is and what is wrong.
#[derive(Debug, Error)]
#[error("{origin}{line}: {message}", line = .line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct ConfigError {
    /// The file (or other origin) the text came from.
    pub origin: String,
    /// 1-based line of the offending key, when known.
    pub line: Option<usize>,
    /// What is wrong, starting with the key.
    pub message: String,
}

/// The validated configuration of one proxy process.
#[derive(Debug, Clone)]
pub struct Config {
    /// The MySQL listener and what it advertises.
    pub server: ServerConfig,
    /// Accounts clients log in with.
    pub users: Vec<User>,
    /// MySQL servers, each with its own pool.
    pub datasources: Vec<Datasource>,
    /// Bit layout of order ids (SPEC §2).
    pub layout: IdLayout,
    /// How far in the future an embedded timestamp may lie and still decode.
    pub clock_skew: Duration,
    /// Channels, indexed by [`ChannelId`].
    pub channels: Vec<Channel>,
    /// Region code (upper case) -> channel.
    pub regions: HashMap<String, ChannelId>,
    /// Sharded tables and the shard map.
    pub sharding: Sharding,
    /// The index table of legacy ids (SPEC §4.3).
    pub index: IndexTable,
    /// The in-process cache of index answers.
    pub cache: CacheConfig,
    /// Issuing order ids (SPEC §6).
    pub issuance: Issuance,
    /// The HTTP admin port.
    pub admin: Admin,
    /// What the logs say of statements.
    pub log: LogConfig,
    /// How the members of clustered datasources are probed and used (`[topology]`).
    pub topology: TopologySettings,
    /// Transactions that write on several datasources (`[transactions]`).
    pub transactions: Transactions,
    /// The versioned shard map in the meta datasource (`[shard_map]`).
    pub shard_map: ShardMapConfig,
    /// Keys set by `ROUTEKEY_...` environment overrides ([`mod@env`]), dotted; empty when none.
    pub overrides: Vec<String>,
}

/// Issuing order ids.
#[derive(Debug, Clone)]
pub struct Issuance {
    /// Per channel ([`ChannelId`] order): issues route-key ids (else classic Snowflake ids,
    /// whose orders get index rows). Default: every channel.
    pub route_key_channels: Vec<bool>,
    /// A clock step back up to this long is waited out; a longer one refuses (default 5 ms).
    pub clock_tolerance: Duration,
    /// Lease table of worker ids, in the index table's database (default
    /// `routekey_worker_lease`, created if missing).
    pub lease_table: String,
    /// A lease expires this long after its last renewal (default 10 s); renewed every third.
    pub lease_ttl: Duration,
    /// Classic ids carry machine id `legacy_machine_base + worker id` (default 512), so they
    /// cannot collide with the machine ids of the generator they replace.
    pub legacy_machine_base: u64,
    /// The classic layout: machine bits (default 10) and sequence bits (default 12).
    pub legacy: crate::id::generator::LegacyLayout,
}

/// Logging (`[log]`); the level comes from `RUST_LOG`, the format from `--log-format`.
#[derive(Debug, Clone, Default)]
pub struct LogConfig {
    /// How statements appear in the log (at debug level, one line per statement).
    pub statements: StatementLog,
}

/// How statements appear in the log. Orders hold personal data, so the default keeps
/// literals out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StatementLog {
    /// The statement's digest: its tokens with every literal replaced by `?`, comments
    /// dropped; backend error messages that echo values have their quoted parts replaced.
    #[default]
    Digest,
    /// The statement as sent and the backend's error messages as they are.
    Full,
}

/// The HTTP admin port.
#[derive(Debug, Clone)]
pub struct Admin {
    /// Address (default 127.0.0.1:9307).
    pub listen: SocketAddr,
    /// The bearer token `POST /v1/order-ids` asks for when the port listens on an address
    /// that is not loopback, read from `admin.token_file` (a mounted Secret; one trailing
    /// newline dropped) at start and at every reload. `None` without `token_file`, which
    /// only a loopback `listen` allows (see [`Admin::check`]).
    pub token: Option<AdminToken>,
}

impl Admin {
    /// Whether a listener on `addr` needs the token: any address but a loopback one
    /// (`0.0.0.0` and `::` included; `::ffff:127.0.0.1` counts as loopback).
    pub fn needs_token(addr: SocketAddr) -> bool {
        !addr.ip().to_canonical().is_loopback()
    }

    /// Refuses a `listen` address that needs a token when no `token_file` gave one. Run
    /// when the file is validated and again after command-line flags changed `listen`.
    pub fn check(&self) -> Result<(), String> {
        if Self::needs_token(self.listen) && self.token.is_none() {
            return Err(format!(
                "admin.listen {} is not a loopback address: admin.token_file is required (POST /v1/order-ids then asks for `Authorization: Bearer <token>`)",
                self.listen
            ));
        }
        Ok(())
    }
}

/// The admin port's bearer token. Its `Debug` form does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct AdminToken(String);

impl AdminToken {
    /// A token; `None` when `text` is empty or only whitespace (an empty Secret is a
    /// deployment mistake, never a token anyone may send).
    pub fn new(text: &str) -> Option<Self> {
        let text = text.trim();
        (!text.is_empty()).then(|| Self(text.to_owned()))
    }

    /// Whether `given` is the token, compared in time independent of where they differ
    /// (`subtle`), so the comparison does not tell a caller how much of a guess was right.
    pub fn matches(&self, given: &[u8]) -> bool {
        use subtle::ConstantTimeEq;
        self.0.as_bytes().ct_eq(given).into()
    }
}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(..)")
    }
}

/// The MySQL listener.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// TCP address to listen on (`listen`, e.g. `127.0.0.1:3307`); `None` when `listen = ""`
    /// and clients connect over [`ServerConfig::socket`] only.
    pub listen: Option<SocketAddr>,
    /// A Unix socket to listen on as well (`socket`, `socket_mode`), for applications in
    /// the same pod or host. Read at start; a change needs a restart.
    pub socket: Option<UnixSocket>,
    /// Version string sent in the handshake; empty (the default): the default datasource's
    /// own, so drivers see the server they are really talking to.
    pub server_version: String,
    /// Largest packet accepted from a client or a backend, in bytes (default 64 MiB).
    pub max_packet_size: usize,
    /// Statement shapes whose analysis is kept for reuse (default 10,000).
    pub analysis_cache_capacity: u64,
    /// A client that has not finished its handshake by then is dropped (default 10 s).
    pub handshake_timeout: Duration,
    /// A client that takes none of what the proxy writes to it for this long is
    /// disconnected (default 60 s, MariaDB's `net_write_timeout`; at least 1 s, or zero to
    /// turn it off): a client that stopped reading a result holds the statement's backend
    /// connections only this long, not until `query_timeout`. It counts from the last time
    /// the socket took bytes, which the kernel reports only after a good part of its send
    /// buffer (megabytes) drained: a reader slower than about that much per timeout is cut,
    /// as MariaDB cuts it. Applies to connections accepted after a reload.
    pub client_write_timeout: Duration,
    /// Client connections served at once, on TCP and the Unix socket together (default
    /// 2048, ProxySQL's `mysql-max_connections`). One more is answered ER_CON_COUNT_ERROR
    /// (1040, "Too many connections") instead of a greeting and closed. Reloadable.
    pub max_connections: usize,
    /// On SIGTERM or `/quitquitquit`: how long running statements and open transactions
    /// may take to finish, counted from the signal, before what is left is closed (open
    /// transactions rolled back on the backend). Default 30 s.
    pub drain_timeout: Duration,
    /// On SIGTERM: how long the listener keeps accepting (while `/readyz` already says 503)
    /// before it closes, for pods whose app still opens connections after the signal.
    /// Default 0. Counts against `drain_timeout`.
    pub drain_delay: Duration,
    /// TLS toward clients (`tls_cert_file` and `tls_key_file`, both or neither): offered in
    /// the greeting when set; `None` (the default): clients asking for TLS are refused.
    pub tls: Option<TlsFiles>,
    /// `rsa_private_key_file`: an RSA key (PEM, PKCS#8 or PKCS#1) for the
    /// caching_sha2_password public key exchange over clear-text TCP; its public half is
    /// what clients are sent. `None` (the default): full authentication needs TLS.
    pub rsa_private_key_file: Option<PathBuf>,
    /// Threads of the runtime that serves clients. `None` (the default): as many as the
    /// CPUs the process may use, which follows its CPU affinity and cgroup quota
    /// ([`std::thread::available_parallelism`]), e.g. 1 for a container limited to one CPU.
    /// Read at start; a change needs a restart.
    pub worker_threads: Option<usize>,
}

impl ServerConfig {
    /// The runtime's thread count: `worker_threads`, else the CPUs the process may use
    /// (1 when that cannot be read).
    pub fn runtime_threads(&self) -> usize {
        self.worker_threads.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        })
    }
}

/// The certificate chain and private key the client listener offers (PEM files, read at
/// start and again at every reload; paths relative to the working directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// `server.tls_cert_file`: the certificate, then any intermediates.
    pub cert_file: PathBuf,
    /// `server.tls_key_file`: its private key (PKCS#8, PKCS#1 or SEC1).
    pub key_file: PathBuf,
}

/// The Unix socket listener: its path and file mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnixSocket {
    /// `server.socket`: the socket file. A stale file (no process answers on it) is replaced
    /// at start; the file is removed when the listener closes (drain, exit).
    pub path: PathBuf,
    /// `server.socket_mode`: its permission bits, written in octal (default `"0660"`: the
    /// proxy's user and group may connect).
    pub mode: u32,
}

/// A client account.
#[derive(Debug, Clone)]
pub struct User {
    /// Login name.
    pub name: String,
    /// How the password is known: in clear (from `password`, `password_env` or
    /// `password_file`), or as the hash `mysql.user` stores (`password_hash`). Only
    /// scrambles cross the wire, or the clear password inside TLS or RSA encryption.
    pub credential: Credential,
    /// The authentication plugin clients must use (`auth_plugin`, default
    /// `mysql_native_password`); a client that opens with the other one is switched.
    pub auth_plugin: AuthPlugin,
    /// Refused unless the connection is secure (TLS; a local socket would count too), with
    /// ER_ACCESS_DENIED_ERROR as MySQL answers a `REQUIRE SSL` account (default false).
    pub require_tls: bool,
    /// Reads without a usable order id run on every shard (`allow`, the default) or are
    /// refused; a `/*scatter='allow'*/` or `/*scatter='refuse'*/` hint overrides it for
    /// one statement.
    pub scatter: Scatter,
    /// UPDATE/DELETE without a usable order id: refused (`refuse`, the default), or run on
    /// every shard they reach when those all lie on one datasource (`allow`).
    pub scatter_writes: Scatter,
    /// Databases on the default datasource this user may reach besides the logical
    /// database and `information_schema` (`databases = [...]`, default none): statements
    /// naming them pass through unchanged. A shard database, the index table's database
    /// or `mysql` here is a configuration error (SPEC §8a).
    pub databases: Vec<String>,
    /// `process = true`: `SHOW PROCESSLIST` lists every session of the proxy and `KILL`
    /// reaches any of them; otherwise (the default) only the user's own.
    pub process: bool,
    /// `load_data_local = true`: `LOAD DATA LOCAL INFILE` streams the client's file into a
    /// table the user reaches (a sharded table's rows each to their shard); otherwise (the
    /// default, as drivers keep it off too) refused with 4166.
    pub load_data_local: bool,
    /// Where this user's reads go on a datasource with replicas (`reads`, default
    /// `primary`); a `/*read='primary'*/` or `/*read='replica'*/` hint overrides it for one
    /// statement.
    pub reads: Reads,
    /// Whether a read from a replica must see the session's own earlier writes
    /// (`consistency`, default `session`).
    pub consistency: Consistency,
}

impl User {
    /// A `mysql_native_password` user with a clear password and the defaults of the
    /// other keys (scatter reads allowed, scatter writes refused, TLS not required, no
    /// databases beyond the logical one and `information_schema`, own sessions only).
    pub fn new(name: &str, password: &str) -> Self {
        Self {
            name: name.to_owned(),
            credential: Credential::Password(password.to_owned()),
            auth_plugin: AuthPlugin::MysqlNativePassword,
            require_tls: false,
            scatter: Scatter::Allow,
            scatter_writes: Scatter::Refuse,
            databases: Vec::new(),
            process: false,
            load_data_local: false,
            reads: Reads::Primary,
            consistency: Consistency::Session,
        }
    }
}

/// Where a user's reads go on a datasource whose `members` include replicas (issue 26).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Reads {
    /// The primary, as every statement (default).
    #[default]
    Primary,
    /// A healthy replica, for reads outside a read-write transaction that need no one
    /// connection (locking reads, statements that pin stay on the primary); the primary
    /// when no replica can serve.
    Replica,
}

/// What a read served by a replica must have seen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Consistency {
    /// The session's own committed writes on that datasource (its GTIDs): a replica that
    /// has not applied them is waited for up to `topology.causal_wait`, else the primary
    /// reads (default).
    #[default]
    Session,
    /// Whatever the replica has applied.
    Eventual,
}

/// `[topology]`: the probes of clustered datasources' members and the bounds of failover
/// and causal reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopologySettings {
    /// Time between two probes of a member (default 1 s).
    pub probe_interval: Duration,
    /// Bound on one probe, connect included (default 1 s); a member whose probe runs over
    /// is down for that round.
    pub probe_timeout: Duration,
    /// How long a write waits for a primary to be known (none writable: a failover under
    /// way) before it fails (default 10 s).
    pub failover_wait: Duration,
    /// A replica further behind (or with replication stopped) gets no reads (default 5 s).
    pub max_replica_lag: Duration,
    /// How long a read waits on a replica for the session's writes (`MASTER_GTID_WAIT`)
    /// before the primary reads instead (default 50 ms).
    pub causal_wait: Duration,
}

impl Default for TopologySettings {
    fn default() -> Self {
        Self {
            probe_interval: Duration::from_secs(1),
            probe_timeout: Duration::from_secs(1),
            failover_wait: Duration::from_secs(10),
            max_replica_lag: Duration::from_secs(5),
            causal_wait: Duration::from_millis(50),
        }
    }
}

/// What a transaction (or one statement) that writes on more than one datasource gets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CrossDatasource {
    /// It commits on all of them or on none: the first datasource written keeps a plain
    /// transaction (the decision branch), every other one an XA branch, committed by the
    /// protocol of SPEC §5 and docs/decisions/0004 (default).
    #[default]
    Atomic,
    /// The write on a second datasource is refused with 1235 (before issue 27).
    Refuse,
}

/// `[transactions]`: atomic commits across datasources and the resolver that finishes what
/// a coordinator left (SPEC §5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transactions {
    /// Atomic or refused.
    pub cross_datasource: CrossDatasource,
    /// A prepared XA branch of ours that a resolver has seen for this long is decided by it
    /// (default 30 s): committed when its decision datasource recorded a commit, else an
    /// abort is recorded and it is rolled back.
    pub abandon_age: Duration,
    /// Time between two resolver rounds (`XA RECOVER` on every datasource's primary;
    /// default 5 s).
    pub resolve_interval: Duration,
    /// Decision records older than this are deleted, once every datasource answered a
    /// round and none holds their xid (default 24 h).
    pub decision_retention: Duration,
    /// The database of the decision table on every datasource (default `routekey`, created
    /// if missing).
    pub database: String,
    /// The decision table (default `routekey_xa_decisions`, created if missing).
    pub decision_table: String,
}

impl Default for Transactions {
    fn default() -> Self {
        Self {
            cross_datasource: CrossDatasource::Atomic,
            abandon_age: Duration::from_secs(30),
            resolve_interval: Duration::from_secs(5),
            decision_retention: Duration::from_secs(24 * 3600),
            database: "routekey".to_owned(),
            decision_table: "routekey_xa_decisions".to_owned(),
        }
    }
}

impl Transactions {
    /// The decision table, quoted and qualified by its database.
    pub fn decision_table_sql(&self) -> String {
        let q = |n: &str| format!("`{}`", n.replace('`', "``"));
        format!("{}.{}", q(&self.database), q(&self.decision_table))
    }
}

/// `[shard_map]`: the versioned shard map in the meta datasource (docs/operations.md,
/// "Moving shards"). The configuration's `[[sharding.shards]]` seed it; after that the
/// table decides where each shard lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardMapConfig {
    /// The table of shard map versions, in the index database on the meta datasource
    /// (default `routekey_shard_map`, created if missing).
    pub table: String,
    /// The table of `shards move` runs, next to it (default `routekey_shard_moves`).
    pub moves_table: String,
    /// Time between two reads of the newest version (default 1 s).
    pub poll_interval: Duration,
    /// How long a statement that met a moved shard's fence (its table renamed away on the
    /// old datasource while a move cuts over) waits for the map that moves it, then runs
    /// once more (default 5 s).
    pub fence_wait: Duration,
}

impl Default for ShardMapConfig {
    fn default() -> Self {
        Self {
            table: "routekey_shard_map".to_owned(),
            moves_table: "routekey_shard_moves".to_owned(),
            poll_interval: Duration::from_secs(1),
            fence_wait: Duration::from_secs(5),
        }
    }
}

/// A client authentication plugin the proxy speaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthPlugin {
    /// SHA1 scramble (the default; MySQL 8.4 and 9 clients may lack it).
    #[default]
    MysqlNativePassword,
    /// SHA256 scramble with a cached fast path; the first login of a (user, password)
    /// needs TLS or the RSA key exchange.
    CachingSha2Password,
}

impl AuthPlugin {
    /// The name on the wire.
    pub fn name(self) -> &'static str {
        match self {
            Self::MysqlNativePassword => "mysql_native_password",
            Self::CachingSha2Password => "caching_sha2_password",
        }
    }
}

use super::credential::Credential;

/// Whether statements without a usable order id may run on every shard.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scatter {
    /// They may.
    #[default]
    Allow,
    /// They are refused with ER_NOT_SUPPORTED_YET and the reason.
    Refuse,
}

/// What a read does with an order id no layer resolves (SPEC §4.4).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnresolvedReads {
    /// Answer "no such row", as MySQL would for a row that does not exist (default).
    #[default]
    Empty,
    /// Look for it on every shard of the table; found on exactly one, its channel is
    /// cached (in-process and Redis, never in the index table); found nowhere, a negative
    /// entry for `cache.negative_ttl`.
    Probe,
}

/// A MySQL server the proxy connects to, and its pool settings.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Datasource {
    /// Name used in the shard map (`ds0`).
    pub name: String,
    /// `host:port`: the only server (`address`), or the first of `members` (what a
    /// member's own view of the datasource, [`Datasource::member`], names).
    pub address: String,
    /// Its servers, `host:port` each: `[address]`, or `members` in the order written.
    pub members: Vec<String>,
    /// Configured with `members`: the members are probed and the primary is whichever is
    /// writable (issue 26). A datasource with `address` alone is one server, never probed.
    pub cluster: bool,
    /// Backend account.
    pub user: String,
    /// Backend password (from `password`, `password_env` or `password_file`).
    pub password: String,
    /// Database its connections select at connect, if any.
    pub database: Option<String>,
    /// Largest number of connections in each of its pools (default 32).
    pub pool_size: u32,
    /// Bound on opening one backend connection, handshake included (default 2 s).
    pub connect_timeout: Duration,
    /// Bound on waiting for a pooled connection (default 5 s).
    pub checkout_timeout: Duration,
    /// Idle connections are closed after this long (default 10 min).
    pub idle_timeout: Duration,
    /// Bound on one client statement on this datasource (default 10 min; 0 = none). A
    /// statement over it gets an error and its backend connection is closed.
    pub query_timeout: Duration,
    /// TLS toward this datasource, data path and control path alike (`tls`, default `off`).
    pub tls: BackendTls,
    /// The CA certificates (DER) that `verify_ca` and `verify_identity` trust, read from
    /// `tls_ca_file` (PEM) when the configuration is loaded; empty when no file is given.
    pub tls_ca_certs: Vec<Vec<u8>>,
}

/// TLS toward a backend, with the meanings of MySQL's `--ssl-mode` (the client's names for
/// the same choices).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendTls {
    /// Plain TCP (default).
    #[default]
    Off,
    /// Encrypted; the server's certificate is not checked (like `--ssl-mode=REQUIRED`). A
    /// server that does not offer TLS is refused.
    Required,
    /// Encrypted, and the certificate must chain to `tls_ca_file`; the host name is not
    /// checked (`VERIFY_CA`).
    VerifyCa,
    /// As `verify_ca`, and the certificate must name the host (or IP address) of
    /// `address` (`VERIFY_IDENTITY`).
    VerifyIdentity,
}

impl Datasource {
    /// The datasource as its member `member` (index into [`Datasource::members`]) is
    /// reached: the same settings, `address` that member's. Connections and their errors
    /// name the server they reach.
    /// A datasource of one server is that server whatever its `members` say (tests and
    /// tools move it by setting `address`).
    pub fn member(&self, member: usize) -> Datasource {
        let mut one = self.clone();
        if let Some(address) = self.members.get(member).filter(|_| self.cluster) {
            one.address.clone_from(address);
        }
        one
    }

    /// How many servers it has: its `members`, or 1.
    pub fn member_count(&self) -> usize {
        if self.cluster { self.members.len() } else { 1 }
    }
}

impl BackendTls {
    /// The configuration's name of the mode (`off`, `required`, `verify_ca`, `verify_identity`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Required => "required",
            Self::VerifyCa => "verify_ca",
            Self::VerifyIdentity => "verify_identity",
        }
    }
}

/// A channel: a group of `shards_per_channel` consecutive shards.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Channel {
    /// Name as stored in the `channel` columns (`EU_CHANNEL`).
    pub name: String,
    /// Route key code carried in new order ids (1..2^route_key_bits-1).
    pub code: u8,
    /// First shard of the channel.
    pub base_shard: u32,
    /// When the channel's generator switched to route-key ids, Unix ms. Ids of this code
    /// with an earlier timestamp are legacy ids (SPEC §4.1).
    pub route_key_since_ms: u64,
}

/// The sharded tables and where each shard lives.
#[derive(Debug, Clone)]
pub struct Sharding {
    /// The database clients see (`orders`).
    pub logical_database: String,
    /// Where unsharded tables live.
    pub default_datasource: DatasourceId,
    /// Shards per channel (default 4): `shard = base_shard + order_id mod n`.
    pub shards_per_channel: u32,
    /// Logical names (lower case) of the binding tables, indexed by [`TableId`].
    pub binding_tables: Vec<String>,
    /// The shard key column (lower case, default `order_id`).
    pub shard_key: String,
    /// Column holding the channel name (lower case, default `channel`).
    pub channel_column: String,
    /// Column holding the region code (lower case, default `region`).
    pub region_column: String,
    /// Indexed by shard number.
    pub shards: Vec<Shard>,
    /// Changes whenever the shard map changes; part of every cache key.
    pub shard_map_version: u64,
    /// The version of the shard map table in force ([`crate::config::shard_map`]); 0 while
    /// the configuration's `[[sharding.shards]]` are (before the table was first read).
    pub map_version: u64,
    /// Order ids no layer resolves (default: empty answer).
    pub unresolved_reads: UnresolvedReads,
    /// Rows (or groups) a merge of several shards' results may hold in memory before the
    /// statement fails (default 1,000,000).
    pub merge_row_cap: u64,
    /// Connections one statement holds at most (`None`, the default: one per shard it
    /// reaches); at least the number of datasources holding shards.
    pub max_fan_out: Option<u32>,
    /// A scatter read asks the shards of one datasource in one statement, their selects
    /// joined with `UNION ALL` (default `true`; `false`: one statement per shard). Which
    /// statements combine is `plan::scatter`'s rule (docs/dba.md, "One statement per
    /// datasource").
    pub combine_shards: bool,
}

/// Where one shard lives.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Shard {
    /// Its datasource.
    pub datasource: DatasourceId,
    /// Physical database.
    pub database: String,
    /// Physical table names, indexed by [`TableId`].
    pub tables: Vec<String>,
    /// How its result column definitions are renamed to logical names: built once with the
    /// configuration, shared by every statement that reaches the shard.
    pub names: std::sync::Arc<ResultNames>,
}

/// The index table: `order_id -> channel name`, on the meta datasource.
#[derive(Debug, Clone)]
pub struct IndexTable {
    /// The meta datasource.
    pub datasource: DatasourceId,
    /// Its database.
    pub database: String,
    /// Its table.
    pub table: String,
    /// Order id column.
    pub order_id_column: String,
    /// Channel name column.
    pub channel_column: String,
    /// The column that holds each row's creation time (a `TIMESTAMP`/`DATETIME` the server
    /// fills); `None` (the default) when not configured. `index backfill --prune-dangling`
    /// needs it to keep index rows younger than `--min-age` and refuses without it.
    pub created_at_column: Option<String>,
    /// Bound on one lookup or insert (default 2 s).
    pub timeout: Duration,
}

/// Cache of index-table answers (SPEC §4.3, layer 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheConfig {
    /// Entries kept (default 1,000,000).
    pub capacity: u64,
    /// Lifetime of a found channel (default 1 h).
    pub ttl: Duration,
    /// Lifetime of a "not in the index" answer (default 2 s).
    pub negative_ttl: Duration,
    /// The shared tier between this cache and the index table; `None` (no `redis_url`,
    /// the default): no shared tier.
    pub redis: Option<RedisTier>,
}

/// The optional shared cache tier (Redis) behind the in-process cache, for many proxies
/// (SPEC §4.3): found channels only, under `routekey:v{shard_map_version}:{order_id}`, kept
/// for [`CacheConfig::ttl`]. A Redis that fails or is slow is skipped, never an error for a
/// client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisTier {
    /// `redis://[user:password@]host[:port][/db]` or `redis+unix:///path[?db=n]` (TLS
    /// `rediss://` is not built in); validated by `redis::Client::open`.
    pub url: String,
    /// Bound on one Redis call, connecting included (default 50 ms).
    pub timeout: Duration,
    /// After a failed or timed-out call the tier is skipped this long (default 1 s), so a
    /// dead Redis costs no time per statement.
    pub retry_after: Duration,
}

impl Config {
    /// The route-key decoder for this configuration's layout, channels and clock skew
    /// (built once per configuration).
    pub fn route_key_decoder(&self) -> RouteKeyDecoder {
        RouteKeyDecoder::new(
            self.layout,
            self.channels
                .iter()
                .enumerate()
                .map(|(i, c)| (ChannelId(i as u8), c.code, c.route_key_since_ms)),
            self.clock_skew,
        )
    }

    /// The channel with this name, compared as MySQL's `_ci` collations do.
    pub fn channel_by_name(&self, name: &str) -> Option<ChannelId> {
        self.channels
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name.trim_end()))
            .map(|i| ChannelId(i as u8))
    }

    /// The channel a region code maps to.
    pub fn channel_by_region(&self, region: &str) -> Option<ChannelId> {
        self.regions
            .get(&region.trim_end().to_ascii_uppercase())
            .copied()
    }

    /// The channel whose shard range (`base_shard` and the `shards_per_channel` after it)
    /// holds `shard`; `None` for a shard no channel maps.
    pub fn channel_of_shard(&self, shard: u32) -> Option<ChannelId> {
        let per = self.sharding.shards_per_channel;
        self.channels
            .iter()
            .position(|c| (c.base_shard..c.base_shard + per).contains(&shard))
            .map(|i| ChannelId(i as u8))
    }

    /// The channel of `id`.
    pub fn channel(&self, id: ChannelId) -> &Channel {
        &self.channels[usize::from(id.0)]
    }

    /// One datasource.
    pub fn datasource(&self, id: DatasourceId) -> &Datasource {
        &self.datasources[usize::from(id.0)]
    }

    /// The shard holding `order_id` within `channel` (SPEC §3), unsigned arithmetic.
    #[inline]
    pub fn shard_of(&self, channel: ChannelId, order_id: u64) -> u32 {
        let n = u64::from(self.sharding.shards_per_channel);
        // The remainder is below shards_per_channel, a u32.
        self.channel(channel).base_shard + (order_id % n) as u32
    }

    /// A binding table by its logical name (case-insensitive).
    pub fn binding_table(&self, name: &str) -> Option<TableId> {
        self.sharding
            .binding_tables
            .iter()
            .position(|t| t.eq_ignore_ascii_case(name))
            .map(|i| TableId(i as u8))
    }

    /// The user with this name.
    pub fn user(&self, name: &str) -> Option<&User> {
        self.users.iter().find(|u| u.name == name)
    }
}

/// How result column definitions name tables: physical names of one shard back to
/// logical ones.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResultNames {
    /// The shard's physical database.
    pub physical_database: String,
    /// The logical database.
    pub logical_database: String,
    /// (physical, logical) table names.
    pub tables: Vec<(String, String)>,
}

impl ResultNames {
    /// The logical name of a physical table of this shard.
    pub fn logical_table(&self, physical: &[u8]) -> Option<&str> {
        self.tables
            .iter()
            .find(|(p, _)| p.as_bytes() == physical)
            .map(|(_, l)| l.as_str())
    }
}
