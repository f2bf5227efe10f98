//! Pools of backend connections (bb8): one per member of each datasource (its one server,
//! or each of its `members`) and per value of the connection flags that change results
//! (CLIENT_FOUND_ROWS).
//!
//! bb8 runs nothing when a connection comes back, so sessions reset or drop what they
//! leave dirty themselves (see `engine::session`). `test_on_check_out` is off: a clean
//! connection is not pinged on every checkout; a broken one is marked and discarded.

use futures_util::FutureExt;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bb8::{ErrorSink, ManageConnection, Pool, PooledConnection, RunError};
use tokio::sync::watch;

use super::conn::BackendConn;
use crate::config::{Config, Datasource, DatasourceId};
use crate::error::ProxyError;

/// Opens connections to one member of a datasource for bb8.
pub struct BackendManager {
    /// The datasource as the member is reached ([`Datasource::member`]).
    datasource: Datasource,
    id: DatasourceId,
    member: usize,
    found_rows: bool,
    max_packet: usize,
    /// The datasource's TLS client, built once per pool (TLS sessions resume across its
    /// connections); the error of a CA that does not load, reported at each connect.
    tls: Result<Option<tokio_rustls::TlsConnector>, String>,
}

impl ManageConnection for BackendManager {
    /// Boxed: a checkout moves the connection several times (out of the pool, into the
    /// session's map of held connections, back), and a pointer moves cheaper than the
    /// connection's few hundred bytes.
    type Connection = Box<BackendConn>;
    type Error = ProxyError;

    async fn connect(&self) -> Result<Box<BackendConn>, ProxyError> {
        let (ds, id) = (&self.datasource, self.id);
        let conn = match &self.tls {
            Ok(tls) => {
                BackendConn::connect_with(ds, id, self.found_rows, self.max_packet, tls.as_ref())
                    .await
            }
            // Builds it again, to report its error as a connect error.
            Err(_) => BackendConn::connect(ds, id, self.found_rows, self.max_packet).await,
        };
        conn.map(|mut c| {
            c.set_member(self.member);
            Box::new(c)
        })
    }

    async fn is_valid(&self, conn: &mut Box<BackendConn>) -> Result<(), ProxyError> {
        conn.ping(self.datasource.connect_timeout).await
    }

    fn has_broken(&self, conn: &mut Box<BackendConn>) -> bool {
        // A connection dropped inside a transaction (its session was aborted) is closed,
        // which rolls the transaction back, rather than handed to another session.
        conn.is_broken() || conn.in_transaction()
    }
}

/// Publishes connect errors so waiting sessions can fail fast when a datasource is down,
/// and counts them.
#[derive(Clone)]
struct ConnectErrors(Arc<watch::Sender<String>>, Arc<AtomicU64>);

impl std::fmt::Debug for ConnectErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConnectErrors")
    }
}

impl ErrorSink<ProxyError> for ConnectErrors {
    fn sink(&self, error: ProxyError) {
        tracing::warn!(%error, "backend connect failed");
        self.1.fetch_add(1, Ordering::Relaxed);
        self.0.send_replace(error.to_string());
    }

    fn boxed_clone(&self) -> Box<dyn ErrorSink<ProxyError>> {
        Box::new(self.clone())
    }
}

#[derive(Clone)]
struct DatasourcePool {
    pool: Pool<BackendManager>,
    errors: watch::Receiver<String>,
    connect_errors: Arc<AtomicU64>,
    name: String,
    /// The member's address.
    member: String,
    checkout_timeout: std::time::Duration,
    /// Its series of the checkout-wait histogram.
    wait: Histogram,
    /// What the pool was built from: a reload keeps the pool when this is unchanged.
    built_from: (Datasource, usize),
}

/// A pooled backend connection, owned by a session while it uses it.
pub type PooledConn = PooledConnection<'static, BackendManager>;

/// All pools of the proxy.
pub struct Pools {
    /// By datasource, by member, the main pool then the found-rows one ([`Pools::slot`]).
    pools: Vec<DatasourcePool>,
    /// Where each datasource's pools start in `pools`.
    first: Vec<usize>,
    waits: WaitHistograms,
}

/// Histograms of pool checkout waits (seconds) by `datasource` label.
pub type WaitHistograms = Family<Vec<(&'static str, String)>, Histogram, fn() -> Histogram>;

impl Pools {
    /// Builds the pools (no connection opens until first use).
    pub fn new(config: &Config) -> Self {
        Self::rebuild(config, None)
    }

    /// The pools of a reloaded configuration: a datasource defined as before, at the same
    /// position, keeps its pools and their connections (sessions holding one keep it
    /// either way); the others get new pools, and the old ones close as their last
    /// connection is given back.
    pub fn rebuild(config: &Config, previous: Option<&Pools>) -> Self {
        let waits: WaitHistograms = previous.map_or_else(
            || Family::new_with_constructor(crate::metrics::latency_histogram as fn() -> Histogram),
            |p| p.waits.clone(),
        );
        let mut pools = Vec::with_capacity(config.datasources.len() * 2);
        let mut first = Vec::with_capacity(config.datasources.len());
        for (i, whole) in config.datasources.iter().enumerate() {
            first.push(pools.len());
            let id = DatasourceId(i as u16);
            for (member, ds) in (0..whole.member_count()).map(|m| (m, whole.member(m))) {
                let built_from = (ds.clone(), config.server.max_packet_size);
                for found_rows in [false, true] {
                    let kept = previous
                        .and_then(|p| p.slot(id, member, found_rows))
                        .and_then(|at| previous.map(|p| &p.pools[at]))
                        .filter(|p| p.built_from == built_from);
                    if let Some(kept) = kept {
                        pools.push(kept.clone());
                        continue;
                    }
                    let (tx, rx) = watch::channel(String::new());
                    let connect_errors = Arc::new(AtomicU64::new(0));
                    let pool = Pool::builder()
                        .max_size(ds.pool_size)
                        .connection_timeout(ds.checkout_timeout)
                        .idle_timeout(Some(ds.idle_timeout))
                        .test_on_check_out(false)
                        // The most recently used connection first: warm, and its prepared
                        // statements and session settings most likely to fit.
                        .queue_strategy(bb8::QueueStrategy::Lifo)
                        .error_sink(Box::new(ConnectErrors(
                            Arc::new(tx),
                            connect_errors.clone(),
                        )))
                        .build_unchecked(BackendManager {
                            datasource: ds.clone(),
                            id,
                            member,
                            found_rows,
                            max_packet: config.server.max_packet_size,
                            tls: super::tls::connector(&ds),
                        });
                    pools.push(DatasourcePool {
                        pool,
                        errors: rx,
                        connect_errors,
                        name: ds.name.clone(),
                        member: ds.address.clone(),
                        checkout_timeout: ds.checkout_timeout,
                        wait: waits
                            .get_or_create(&vec![("datasource", ds.name.clone())])
                            .clone(),
                        built_from: built_from.clone(),
                    });
                }
            }
        }
        Self {
            pools,
            first,
            waits,
        }
    }

    /// Where the pool of `member` of `datasource` (`found_rows`: the found-rows one) is in
    /// `pools`, if it has one.
    fn slot(&self, datasource: DatasourceId, member: usize, found_rows: bool) -> Option<usize> {
        let at = self.first.get(usize::from(datasource.0))? + member * 2 + usize::from(found_rows);
        let end = self
            .first
            .get(usize::from(datasource.0) + 1)
            .copied()
            .unwrap_or(self.pools.len());
        (at < end).then_some(at)
    }

    fn pool(
        &self,
        datasource: DatasourceId,
        member: usize,
        found_rows: bool,
    ) -> Option<&DatasourcePool> {
        self.slot(datasource, member, found_rows)
            .map(|at| &self.pools[at])
    }

    /// A connection to `member` of `datasource` (0: the datasource's one server). Waits at
    /// most the datasource's checkout timeout; fails at once with the connect error when
    /// the member has no live connection and a connect attempt fails.
    pub async fn get(
        &self,
        datasource: DatasourceId,
        member: usize,
        found_rows: bool,
    ) -> Result<PooledConn, ProxyError> {
        let p = self.pool(datasource, member, found_rows).ok_or_else(|| {
            ProxyError::Internal(format!(
                "no pool for datasource {datasource:?} member {member}"
            ))
        })?;
        let started = std::time::Instant::now();
        let done = |result: Result<PooledConn, RunError<ProxyError>>| {
            p.wait.observe(started.elapsed().as_secs_f64());
            result.map_err(|e| match e {
                RunError::User(e) => e,
                RunError::TimedOut => ProxyError::Unavailable(format!(
                    "datasource {}: no connection available within {:?} (pool exhausted or backend unreachable; last connect error: {})",
                    p.name,
                    p.checkout_timeout,
                    non_empty(&p.errors.borrow()),
                )),
            })
        };
        let get = p.pool.get_owned();
        tokio::pin!(get);
        // An idle connection is there at once (the usual case): no watch on connect errors.
        if let Some(result) = get.as_mut().now_or_never() {
            return done(result);
        }
        let mut errors = p.errors.clone();
        errors.mark_unchanged();
        loop {
            tokio::select! {
                result = &mut get => return done(result),
                changed = errors.changed() => {
                    if changed.is_ok() && p.pool.state().connections == 0 {
                        return Err(ProxyError::Unavailable(errors.borrow().clone()));
                    }
                }
            }
        }
    }

    /// Whether every connection of the main pool of `member` of `datasource` is in use
    /// (the pool is at its size): the member answered them, and a checkout would only wait.
    pub fn saturated(&self, datasource: DatasourceId, member: usize) -> bool {
        self.pool(datasource, member, false).is_some_and(|p| {
            let state = p.pool.state();
            state.idle_connections == 0 && state.connections >= p.built_from.0.pool_size
        })
    }

    /// How many connections the pool of `datasource` may open (`pool_size`): a plan that
    /// takes several connections of one datasource at once (a scatter) takes no more, or it
    /// would wait for the ones it holds itself until the checkout timeout.
    pub fn capacity(&self, datasource: DatasourceId, found_rows: bool) -> usize {
        self.pool(datasource, 0, found_rows)
            .map_or(1, |p| p.built_from.0.pool_size as usize)
    }

    /// How many checkouts from the pool of `member` of `datasource` would not wait for
    /// another session's connection now: the idle connections, and the ones it may still
    /// open.
    pub fn available(&self, datasource: DatasourceId, member: usize, found_rows: bool) -> usize {
        self.pool(datasource, member, found_rows).map_or(0, |p| {
            let state = p.pool.state();
            let room = p.built_from.0.pool_size.saturating_sub(state.connections);
            (state.idle_connections + room) as usize
        })
    }

    /// Checkout wait times in seconds, labelled by datasource (`/metrics`).
    pub fn waits(&self) -> &WaitHistograms {
        &self.waits
    }

    /// Connections per pool: (datasource, found_rows, open, idle).
    pub fn state(&self) -> Vec<(String, bool, u32, u32)> {
        let mut out: Vec<_> = self
            .report()
            .into_iter()
            .map(|p| (p.datasource, p.pool == "found_rows", p.open, p.idle))
            .collect();
        out.sort();
        out
    }
}

/// One pool's state (`SHOW ROUTEKEY POOLS`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolReport {
    /// The datasource's name.
    pub datasource: String,
    /// The member's address (`host:port`).
    pub member: String,
    /// Its datasource is configured with `members` (metrics label its pools by member).
    pub clustered: bool,
    /// `main`, or `found_rows` (connections opened with CLIENT_FOUND_ROWS for the clients
    /// that ask for it).
    pub pool: &'static str,
    /// The pool's size (`pool_size`): connections it may open.
    pub size: u32,
    /// Connections open now.
    pub open: u32,
    /// Open connections idle in the pool.
    pub idle: u32,
    /// Checkouts that had to wait for a connection, since the pool was built.
    pub waits: u64,
    /// Checkouts that gave up after `checkout_timeout`.
    pub timeouts: u64,
    /// Failed connection attempts.
    pub connect_errors: u64,
    /// The last connect error's message, empty when none.
    pub last_error: String,
}

impl Pools {
    /// Every pool's state, by datasource (configuration order), main pool first.
    pub fn report(&self) -> Vec<PoolReport> {
        self.pools
            .iter()
            .enumerate()
            .map(|(i, p)| {
                // Pools come in pairs (main, found_rows) within each member.
                let i = i - self
                    .first
                    .iter()
                    .rev()
                    .find(|&&f| f <= i)
                    .copied()
                    .unwrap_or(0);
                let s = p.pool.state();
                PoolReport {
                    datasource: p.name.clone(),
                    member: p.member.clone(),
                    clustered: p.built_from.0.cluster,
                    pool: if i % 2 == 1 { "found_rows" } else { "main" },
                    size: p.built_from.0.pool_size,
                    open: s.connections,
                    idle: s.idle_connections,
                    waits: s.statistics.get_waited + s.statistics.get_timed_out,
                    timeouts: s.statistics.get_timed_out,
                    connect_errors: p.connect_errors.load(Ordering::Relaxed),
                    last_error: p.errors.borrow().clone(),
                }
            })
            .collect()
    }
}

fn non_empty(s: &str) -> &str {
    if s.is_empty() { "none" } else { s }
}
