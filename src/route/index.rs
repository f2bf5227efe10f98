//! Layer 3 (the index table, `order_id -> channel` on the meta datasource) and layer 0
//! (the in-process cache of its answers; the optional shared tier behind it is
//! [`super::shared_cache`]), SPEC §4.3.
//!
//! The index is reached through the [`IndexTable`] trait, so the router is tested with an
//! in-memory table; [`MysqlIndexTable`] is the real one, on mysql_async (the control path).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use thiserror::Error;

use crate::config::{BackendTls, ChannelId, Config, Datasource};
use crate::sql::quote_ident;

/// The index table could not answer.
#[derive(Debug, Clone, Error)]
#[error("index table: {0}")]
pub struct IndexError(pub String);

/// The index table: channel names by order id.
pub trait IndexTable: Send + Sync + 'static {
    /// The channel name stored for `order_id`, `None` when the index has no row for it.
    fn lookup(
        &self,
        order_id: u64,
    ) -> impl Future<Output = Result<Option<String>, IndexError>> + Send;

    /// Writes the row `order_id -> channel`, committed on its own. When a row exists
    /// already, returns the channel it names (which may differ); a row naming the same
    /// channel has its creation time set to now (with `index.created_at_column`), one naming
    /// another is left as it is.
    fn insert(
        &self,
        order_id: u64,
        channel: &str,
    ) -> impl Future<Output = Result<String, IndexError>> + Send;
}

/// The insert of an index row. With `index.created_at_column`, an existing row naming the
/// same channel has its creation time set to now instead (one affected row means inserted):
/// an insert relying on the row marks it young, so `index backfill --prune-dangling` keeps
/// it for `--min-age` while the shard write is in flight.
fn insert_sql(index: &crate::config::IndexTable, table: &str) -> String {
    let (id, channel) = (
        quote_ident(&index.order_id_column),
        quote_ident(&index.channel_column),
    );
    let insert = format!("INSERT INTO {table} ({id}, {channel}) VALUES (?, ?)");
    match &index.created_at_column {
        Some(created) => {
            let created = quote_ident(created);
            format!(
                "{insert} ON DUPLICATE KEY UPDATE {created} = IF({channel} = VALUES({channel}), NOW(6), {created})"
            )
        }
        None => insert,
    }
}

/// The index table on a MySQL server, through a small mysql_async pool.
pub struct MysqlIndexTable {
    pool: MemberPools,
    lookup_sql: String,
    insert_sql: String,
    timeout: Duration,
}

/// mysql_async pools to each member of a datasource (its one server, or each of its
/// `members`), and which member is its primary: the control path's statements go there.
/// The topology's prober sets it ([`MemberPools::primary_cell`]); until it does, the first
/// member.
pub struct MemberPools {
    members: Vec<mysql_async::Pool>,
    primary: Arc<AtomicUsize>,
}

impl MemberPools {
    /// A pool per member of `ds`, each with the options `opts` gives for the datasource
    /// as that member is reached ([`Datasource::member`]).
    pub fn new(ds: &Datasource, opts: impl Fn(&Datasource) -> mysql_async::OptsBuilder) -> Self {
        Self {
            members: (0..ds.member_count())
                .map(|m| mysql_async::Pool::new(opts(&ds.member(m))))
                .collect(),
            primary: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The primary's pool.
    pub fn primary(&self) -> &mysql_async::Pool {
        let m = self.primary.load(Ordering::Relaxed);
        self.members.get(m).unwrap_or(&self.members[0])
    }

    /// The cell that names the primary (a member index), for the topology to keep.
    pub fn primary_cell(&self) -> Arc<AtomicUsize> {
        self.primary.clone()
    }

    /// Closes every pool's connections.
    pub async fn disconnect(self) {
        for pool in self.members {
            let _ = pool.disconnect().await;
        }
    }
}

/// How long an idle control-path connection is kept for reuse. mysql_async's default (0)
/// closes every connection above the pool's minimum as soon as it is returned: one new TCP
/// connection and login per index lookup.
pub const CONTROL_IDLE_TTL: Duration = Duration::from_secs(60);

/// Runs one control-path call (a checkout and its statements) within `timeout`; the
/// error, the server's or "no answer within", names `what`.
///
/// # Errors
/// `f` failed or did not finish in time.
pub async fn within<T>(
    timeout: Duration,
    what: &str,
    f: impl Future<Output = Result<T, mysql_async::Error>>,
) -> Result<T, String> {
    match tokio::time::timeout(timeout, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{what}: {e}")),
        Err(_) => Err(format!(
            "{what}: no answer within {}",
            humantime::format_duration(timeout)
        )),
    }
}

/// Connection options of the control path (mysql_async) to datasource `ds`, in a pool of
/// at most `max_connections` connections opened on first use and kept idle for
/// [`CONTROL_IDLE_TTL`]. Connections are not reset when returned: the control path sets no
/// session state (a reset is one more round trip per use).
pub fn control_opts(ds: &Datasource, max_connections: usize) -> mysql_async::OptsBuilder {
    control_conn_opts(ds).pool_opts(
        mysql_async::PoolOpts::default()
            .with_constraints(
                mysql_async::PoolConstraints::new(0, max_connections.max(1)).unwrap_or_default(),
            )
            .with_inactive_connection_ttl(CONTROL_IDLE_TTL)
            .with_reset_connection(false),
    )
}

/// Where and as whom the control path connects to datasource `ds`, over TLS as its `tls`
/// says ([`control_ssl_opts`]); pool options are the caller's.
pub fn control_conn_opts(ds: &Datasource) -> mysql_async::OptsBuilder {
    let (host, port) = ds.address.rsplit_once(':').unwrap_or((&ds.address, "3306"));
    mysql_async::OptsBuilder::default()
        .ip_or_hostname(
            host.trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
        )
        .tcp_port(port.parse().unwrap_or(3306))
        .user(Some(ds.user.clone()))
        .pass(Some(ds.password.clone()))
        .ssl_opts(control_ssl_opts(ds))
}

/// mysql_async's TLS options for a datasource's `tls` mode: `required` accepts any
/// certificate; `verify_ca` and `verify_identity` trust only `tls_ca_file` (not the
/// built-in web roots). mysql_async 0.37.1 recognises a name mismatch by rustls's old
/// error text, which rustls 0.23.46 no longer produces, so on the control path `verify_ca`
/// also checks the name (it fails closed: never weaker than asked).
pub fn control_ssl_opts(ds: &Datasource) -> Option<mysql_async::SslOpts> {
    // mysql_async builds its rustls client from the process default provider.
    crate::crypto::provider();
    let roots: Vec<_> = ds
        .tls_ca_certs
        .iter()
        .map(|der| der.clone().into())
        .collect();
    let opts = mysql_async::SslOpts::default()
        .with_root_certs(roots)
        .with_disable_built_in_roots(true);
    match ds.tls {
        BackendTls::Off => None,
        BackendTls::Required => Some(
            opts.with_danger_accept_invalid_certs(true)
                .with_danger_skip_domain_validation(true),
        ),
        BackendTls::VerifyCa => Some(opts.with_danger_skip_domain_validation(true)),
        BackendTls::VerifyIdentity => Some(opts),
    }
}

/// An index table that cannot answer is a datasource the client cannot reach (1429).
impl From<IndexError> for crate::error::ProxyError {
    fn from(e: IndexError) -> Self {
        Self::Unavailable(e.to_string())
    }
}

impl MysqlIndexTable {
    /// Builds the pool for the configured index table (connections open on first use).
    pub fn new(config: &Config) -> Self {
        let index = &config.index;
        let ds = config.datasource(index.datasource);
        let size = ds.pool_size as usize;
        let table = format!(
            "{}.{}",
            quote_ident(&index.database),
            quote_ident(&index.table)
        );
        Self {
            pool: MemberPools::new(ds, |member| control_opts(member, size)),
            lookup_sql: format!(
                "SELECT {} FROM {table} WHERE {} = ?",
                quote_ident(&index.channel_column),
                quote_ident(&index.order_id_column)
            ),
            insert_sql: insert_sql(index, &table),
            timeout: index.timeout,
        }
    }

    async fn bounded<T>(
        &self,
        what: &str,
        f: impl Future<Output = Result<T, mysql_async::Error>>,
    ) -> Result<T, IndexError> {
        within(self.timeout, what, f).await.map_err(IndexError)
    }

    /// Closes the pools' connections.
    pub async fn disconnect(self) {
        self.pool.disconnect().await;
    }

    /// The cell naming the index datasource's primary ([`MemberPools::primary_cell`]).
    pub fn primary_cell(&self) -> Arc<AtomicUsize> {
        self.pool.primary_cell()
    }
}

impl IndexTable for MysqlIndexTable {
    async fn lookup(&self, order_id: u64) -> Result<Option<String>, IndexError> {
        self.bounded("lookup", async {
            let mut conn = self.pool.primary().get_conn().await?;
            conn.exec_first::<String, _, _>(&self.lookup_sql, (order_id,))
                .await
        })
        .await
    }

    async fn insert(&self, order_id: u64, channel: &str) -> Result<String, IndexError> {
        let inserted = self
            .bounded("insert", async {
                let mut conn = self.pool.primary().get_conn().await?;
                conn.exec_drop(&self.insert_sql, (order_id, channel))
                    .await
                    .map(|()| conn.affected_rows())
            })
            .await;
        match inserted {
            // Inserted; or (2) an existing row naming this channel, marked young.
            Ok(1 | 2) => Ok(channel.to_owned()),
            // A row naming another channel (left alone), or one already marked this very
            // microsecond: read what it says.
            Ok(_) => self.lookup(order_id).await?.ok_or_else(|| {
                IndexError(format!("row for {order_id} vanished after a duplicate key"))
            }),
            Err(e) if e.0.contains("1062") || e.0.contains("Duplicate entry") => {
                self.lookup(order_id).await?.ok_or_else(|| {
                    IndexError(format!("row for {order_id} vanished after a duplicate key"))
                })
            }
            Err(e) => Err(e),
        }
    }
}

/// What the route cache knows of an order id: the index table's answer, or that a probe of
/// every shard found it nowhere (SPEC §4.4, `sharding.unresolved_reads = "probe"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CachedRoute {
    /// The order's channel (from the index table, the shared tier, or a probe that found
    /// the order on exactly one shard).
    Channel(ChannelId),
    /// The index table has no row for it (kept for `cache.negative_ttl`).
    NotIndexed,
    /// No index row and no shard holds it (kept for `cache.negative_ttl`): reads answer "no
    /// such row" without probing again.
    Nowhere,
}

struct AnswerExpiry {
    ttl: Duration,
    negative_ttl: Duration,
}

impl moka::Expiry<(u64, u64), CachedRoute> for AnswerExpiry {
    fn expire_after_create(
        &self,
        _key: &(u64, u64),
        value: &CachedRoute,
        _created_at: Instant,
    ) -> Option<Duration> {
        Some(match value {
            CachedRoute::Channel(_) => self.ttl,
            CachedRoute::NotIndexed | CachedRoute::Nowhere => self.negative_ttl,
        })
    }

    fn expire_after_update(
        &self,
        key: &(u64, u64),
        value: &CachedRoute,
        updated_at: Instant,
        _duration_until_expiry: Option<Duration>,
    ) -> Option<Duration> {
        self.expire_after_create(key, value, updated_at)
    }
}

/// Layer 0: index answers by `(shard map version, order_id)`. Decoded and context routes
/// are never cached (SPEC §9.6). Planning only reads it ([`RouteCache::peek`]); what a
/// statement learnt is written when it runs ([`RouteCache::fill`]).
#[derive(Clone)]
pub struct RouteCache {
    cache: moka::sync::Cache<(u64, u64), CachedRoute>,
    version: u64,
}

impl RouteCache {
    /// A cache sized and timed by the configuration.
    pub fn new(config: &Config) -> Self {
        Self {
            cache: moka::sync::Cache::builder()
                .max_capacity(config.cache.capacity)
                .expire_after(AnswerExpiry {
                    ttl: config.cache.ttl,
                    negative_ttl: config.cache.negative_ttl,
                })
                .build(),
            version: config.sharding.shard_map_version,
        }
    }

    /// The same cache, for a reloaded configuration (its shard map version in the keys).
    pub fn for_config(&self, config: &Config) -> Self {
        Self {
            cache: self.cache.clone(),
            version: config.sharding.shard_map_version,
        }
    }

    /// What the cache holds for `order_id`, without changing it.
    pub fn peek(&self, order_id: u64) -> Option<CachedRoute> {
        self.cache.get(&(self.version, order_id))
    }

    /// Records what is known of `order_id` now.
    pub fn fill(&self, order_id: u64, route: CachedRoute) {
        self.cache.insert((self.version, order_id), route);
    }
}
