//! The end-to-end harness: the whole proxy in-process on `127.0.0.1:0`, in front of the
//! sandbox that `scripts/sandbox.sh up` starts (two MariaDB servers, config/demo.toml).
//! Tests read placement straight from the physical tables and compare results with the
//! unsharded reference database `orders_ref`.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use mysql_async::prelude::*;
use mysql_async::{Conn, Opts, OptsBuilder};
use routekey_proxy::config::Config;
use routekey_proxy::id::{IdFields, IdLayout, SNOWFLAKE_EPOCH_MS};
use routekey_proxy::server::{Proxy, serve};
use tokio::sync::oneshot;

/// The demo configuration the sandbox is built for.
pub fn config() -> Config {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/config/demo.toml");
    Config::load(std::path::Path::new(path)).expect("config/demo.toml")
}

/// A proxy running in-process.
pub struct Harness {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its shared state (counters, config).
    pub proxy: Arc<Proxy>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Harness {
    /// Starts a proxy with the demo configuration.
    pub async fn start() -> Self {
        Self::start_with(config()).await
    }

    /// Starts a proxy with `config`.
    pub async fn start_with(config: Config) -> Self {
        check_sandbox().await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let proxy = Proxy::new(config);
        let (tx, rx) = oneshot::channel::<()>();
        let p = proxy.clone();
        let task = tokio::spawn(async move {
            serve(listener, p, async {
                let _ = rx.await;
            })
            .await
            .unwrap();
        });
        Self {
            addr,
            proxy,
            shutdown: Some(tx),
            task: Some(task),
        }
    }

    /// Connection options for the demo user, database `orders`.
    pub fn opts(&self) -> Opts {
        OptsBuilder::default()
            .ip_or_hostname(self.addr.ip().to_string())
            .tcp_port(self.addr.port())
            .user(Some("app"))
            .pass(Some("app"))
            .db_name(Some("orders"))
            .prefer_socket(false)
            .into()
    }

    /// A client connection through the proxy.
    pub async fn client(&self) -> Conn {
        Conn::new(self.opts())
            .await
            .expect("connect through the proxy")
    }

    /// Stops the proxy.
    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// Port of sandbox server `ds` (0 or 1).
pub fn sandbox_port(ds: usize) -> u16 {
    let var = format!("ROUTEKEY_DS{ds}_PORT");
    std::env::var(var)
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(33061 + ds as u16)
}

/// A direct connection to sandbox server `ds` as root, no database selected.
pub async fn backend(ds: usize) -> Conn {
    let opts: Opts = OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(sandbox_port(ds))
        .user(Some("root"))
        .prefer_socket(false)
        .into();
    Conn::new(opts).await.unwrap_or_else(|e| {
        panic!("sandbox server ds{ds} is not reachable ({e}): run scripts/sandbox.sh up")
    })
}

async fn check_sandbox() {
    for ds in 0..2 {
        drop(backend(ds).await);
    }
}

/// The reference database (every seeded order, unsharded) on ds0.
pub async fn reference() -> Conn {
    let mut c = backend(0).await;
    c.query_drop("USE orders_ref").await.unwrap();
    c
}

/// Where shard `shard` lives: (sandbox server index, `order_shards.t_order_N`,
/// `order_shards.t_order_item_N`).
pub fn physical(shard: u32) -> (usize, String, String) {
    let c = config();
    let s = &c.sharding.shards[shard as usize];
    (
        usize::from(s.datasource.0),
        format!("{}.{}", s.database, s.tables[0]),
        format!("{}.{}", s.database, s.tables[1]),
    )
}

/// Shards (of all 20) whose physical `t_order` holds `order_id`.
pub async fn shards_holding(order_id: u64) -> Vec<u32> {
    let c = config();
    let mut out = Vec::new();
    for shard in 0..c.sharding.shards.len() as u32 {
        let (ds, table, _) = physical(shard);
        let mut conn = backend(ds).await;
        let n: Option<u64> = conn
            .exec_first(
                format!("SELECT COUNT(*) FROM {table} WHERE order_id = ?"),
                (order_id,),
            )
            .await
            .unwrap();
        if n.unwrap_or(0) > 0 {
            out.push(shard);
        }
    }
    out
}

/// The seeded ids, from `.sandbox/seed-summary.json`.
#[derive(Debug, serde::Deserialize)]
pub struct Seed {
    /// Per channel name.
    pub channels: std::collections::HashMap<String, SeedChannel>,
    /// Legacy ids whose bits 17-14 hold an assigned code.
    pub legacy_ids_with_code_bits: Vec<u64>,
}

/// The seeded ids of one channel.
#[derive(Debug, serde::Deserialize)]
pub struct SeedChannel {
    /// Route key code.
    pub code: u8,
    /// First shard.
    pub base_shard: u32,
    /// Route-key ids.
    pub new_format_ids: Vec<u64>,
    /// Legacy ids (with index rows).
    pub legacy_ids: Vec<u64>,
}

/// Reads the seed summary.
pub fn seed() -> Seed {
    let dir = std::env::var("ROUTEKEY_SANDBOX_DIR")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/.sandbox").to_owned());
    let text = std::fs::read_to_string(format!("{dir}/seed-summary.json"))
        .expect("seed-summary.json: run scripts/sandbox.sh up");
    serde_json::from_str(&text).unwrap()
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A route-key id of channel `code` that no other test uses: minted now, with a sequence
/// unique within this process and a worker derived from the process id.
pub fn fresh_new_id(code: u8) -> u64 {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    IdLayout::default()
        .compose(IdFields {
            timestamp: now_ms() - SNOWFLAKE_EPOCH_MS - 1000,
            worker: u64::from(std::process::id()) % 32,
            route_key: u64::from(code),
            sequence: (n * 7 + now_ms()) % 16384,
        })
        .unwrap()
}

/// A classic Snowflake id from 2023 that no other test uses (not decodable: its timestamp
/// is before every channel's route_key_since).
pub fn fresh_legacy_id() -> u64 {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let ts = 1_672_531_200_000u64 + (now_ms() % 86_400_000) + n;
    ((ts - SNOWFLAKE_EPOCH_MS) << 22) | ((u64::from(std::process::id()) % 1024) << 12) | (n % 4096)
}
