//! The listener: `run(listener, config, shutdown)` serves clients until `shutdown`
//! resolves. Tests start it in-process on `127.0.0.1:0`.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::backend::Pools;
use crate::config::Config;
use crate::route::Router;
use crate::route::index::MysqlIndexTable;
use crate::sql::shape::AnalysisCache;

/// Greeting version while the default datasource cannot be asked.
pub const FALLBACK_VERSION: &str = "5.5.5-10.11.0-MariaDB-routekey-proxy";

/// State shared by every session of one proxy process.
pub struct Proxy {
    /// The configuration in force.
    pub config: Arc<Config>,
    /// The router, with its index table and cache.
    pub router: Router<MysqlIndexTable>,
    /// Backend pools.
    pub pools: Pools,
    /// Analyses by statement shape.
    pub analyses: AnalysisCache,
    /// The order id service.
    pub issuer: Arc<crate::id::issuer::Issuer>,
    /// Sessions by connection id (KILL).
    pub sessions: crate::frontend::registry::Registry,
    /// The version string of the default datasource, learnt from its greeting.
    backend_version: tokio::sync::OnceCell<String>,
    /// Databases clients may not reach: the physical shard databases, the index table's
    /// database and `mysql` (unless one of them is the logical or the default database).
    pub protected_databases: Vec<String>,
    next_connection_id: AtomicU32,
}

impl Proxy {
    /// Builds the shared state (no connection opens yet).
    pub fn new(config: Config) -> Arc<Self> {
        let config = Arc::new(config);
        let open = [
            Some(config.sharding.logical_database.to_ascii_lowercase()),
            config
                .datasource(config.sharding.default_datasource)
                .database
                .as_ref()
                .map(|d| d.to_ascii_lowercase()),
        ];
        let mut protected: Vec<String> = config
            .sharding
            .shards
            .iter()
            .map(|s| s.database.to_ascii_lowercase())
            .chain([
                config.index.database.to_ascii_lowercase(),
                "mysql".to_owned(),
            ])
            .filter(|d| !open.contains(&Some(d.clone())))
            .collect();
        protected.sort();
        protected.dedup();
        Arc::new(Self {
            issuer: crate::id::issuer::Issuer::new(
                config.clone(),
                Arc::new(crate::id::issuer::SystemClock),
            ),
            sessions: Default::default(),
            backend_version: tokio::sync::OnceCell::new(),
            protected_databases: protected,
            router: Router::new(config.clone(), MysqlIndexTable::new(&config)),
            pools: Pools::new(&config),
            analyses: AnalysisCache::new(config.server.analysis_cache_capacity),
            next_connection_id: AtomicU32::new(1),
            config,
        })
    }

    /// The version string clients see in the greeting: `server.server_version` when set,
    /// else the default datasource's own (learnt once; a fallback while it is down).
    pub async fn server_version(&self) -> String {
        if !self.config.server.server_version.is_empty() {
            return self.config.server.server_version.clone();
        }
        let ds = self.config.sharding.default_datasource;
        let learnt = self
            .backend_version
            .get_or_try_init(|| async {
                let conn = self.pools.get(ds, false).await?;
                Ok::<_, crate::error::ProxyError>(conn.server_version().to_owned())
            })
            .await;
        match learnt {
            Ok(v) => v.clone(),
            Err(_) => FALLBACK_VERSION.to_owned(),
        }
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

/// Serves MySQL clients on `listener` until `shutdown` completes; then stops accepting and
/// ends the sessions still open.
pub async fn run(
    listener: TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let proxy = Proxy::new(config);
    serve(listener, proxy, shutdown).await
}

/// [`run`] with shared state built by the caller (tests read its counters).
pub async fn serve(
    listener: TcpListener,
    proxy: Arc<Proxy>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let mut sessions = JoinSet::new();
    let issuer = proxy.issuer.clone();
    tokio::spawn(async move { issuer.prepare().await });
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, peer)) => {
                    sessions.spawn(crate::frontend::serve(proxy.clone(), tcp, peer));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            },
            Some(_) = sessions.join_next(), if !sessions.is_empty() => {}
            () = &mut shutdown => break,
        }
    }
    sessions.shutdown().await;
    proxy.issuer.release().await;
    Ok(())
}
