//! The end-to-end harness: the whole proxy in-process on `127.0.0.1:0`, in front of the
//! sandbox that `scripts/sandbox.sh up` starts (two MariaDB servers, config/demo.toml).
//! Tests read placement straight from the physical tables and compare results with the
//! unsharded reference database `orders_ref`.

#![allow(dead_code)]

pub mod lease;
pub mod legacy;
pub mod raw;
pub mod redis_server;
pub mod wire;

#[allow(unused_imports)]
pub use lease::*;
#[allow(unused_imports)]
pub use raw::*;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use mysql_async::prelude::*;
use mysql_async::{Conn, Opts, OptsBuilder};
use routekey_proxy::config::Config;
use routekey_proxy::id::{IdFields, IdLayout, SNOWFLAKE_EPOCH_MS};
use routekey_proxy::proxy::Proxy;
use routekey_proxy::server::serve;
use tokio::sync::oneshot;

/// The demo configuration the sandbox is built for, with the sandbox's ports from
/// `ROUTEKEY_DS0_PORT` / `ROUTEKEY_DS1_PORT` when they are set.
pub fn config() -> Config {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/config/demo.toml");
    let mut config = Config::load(std::path::Path::new(path)).expect("config/demo.toml");
    for (i, ds) in config.datasources.iter_mut().enumerate() {
        ds.address = format!("127.0.0.1:{}", sandbox_port(i));
    }
    let tls = format!("{}/tls", sandbox_dir());
    if let Some(files) = config.server.tls.as_mut() {
        files.cert_file = format!("{tls}/server.pem").into();
        files.key_file = format!("{tls}/server-key.pem").into();
    }
    if config.server.rsa_private_key_file.is_some() {
        config.server.rsa_private_key_file = Some(format!("{tls}/server-key.pem").into());
    }
    config
}

/// `config` with `transactions.cross_datasource = "refuse"`: a write on a second datasource
/// in one transaction, or a statement whose rows lie on two, is refused (before issue 27).
pub fn refusing(mut config: Config) -> Config {
    config.transactions.cross_datasource = routekey_proxy::config::CrossDatasource::Refuse;
    config
}

/// The sandbox folder (`ROUTEKEY_SANDBOX_DIR`, default `.sandbox` in the repository).
pub fn sandbox_dir() -> String {
    std::env::var("ROUTEKEY_SANDBOX_DIR")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/.sandbox").to_owned())
}

/// A proxy running in-process, with its admin HTTP port.
pub struct Harness {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Where its admin HTTP port listens.
    pub admin: SocketAddr,
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
        Self::start_with_admin(config, "127.0.0.1:0").await
    }

    /// Starts a proxy with `config`, its admin port bound to `admin_bind` (an address with
    /// a port; port 0 for any).
    pub async fn start_with_admin(config: Config, admin_bind: &str) -> Self {
        check_sandbox().await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let admin_listener = tokio::net::TcpListener::bind(admin_bind).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let admin = admin_listener.local_addr().unwrap();
        let proxy = Proxy::new(config);
        let (tx, rx) = oneshot::channel::<()>();
        let (admin_tx, admin_rx) = oneshot::channel::<()>();
        let p = proxy.clone();
        let admin_task = tokio::spawn(routekey_proxy::admin::serve(
            admin_listener,
            proxy.clone(),
            async {
                let _ = admin_rx.await;
            },
        ));
        let task = tokio::spawn(async move {
            serve(listener, p, async {
                let _ = rx.await;
            })
            .await
            .unwrap();
            let _ = admin_tx.send(());
            let _ = admin_task.await;
        });
        // The shard map table's first reading (a runtime of its own) before the test begins,
        // so a test sees the generations its own reloads make.
        let started = std::time::Instant::now();
        while proxy.map_version() == 0
            && proxy
                .shard_map
                .read_failures
                .load(std::sync::atomic::Ordering::Relaxed)
                == 0
            && started.elapsed() < std::time::Duration::from_secs(10)
        {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        Self {
            addr,
            admin,
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

    /// Waits up to `limit` for the proxy to stop by itself (a drain); true when it did.
    pub async fn wait_stopped(&mut self, limit: std::time::Duration) -> bool {
        match self.task.as_mut() {
            Some(task) => tokio::time::timeout(limit, task).await.is_ok(),
            None => true,
        }
    }

    /// The admin port's `/metrics` page (Prometheus text format).
    pub async fn metrics_text(&self) -> String {
        reqwest::get(format!("http://{}/metrics", self.admin))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
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

/// A TCP port free on 127.0.0.1 now (for a proxy process a test starts).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Panics with a clear message when the sandbox is not up.
pub async fn check_sandbox() {
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

/// Now, in Unix ms.
pub fn now_ms() -> u64 {
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
    // One reading of the clock for both fields: two ids of one millisecond then differ in
    // their sequence (read twice, a thread descheduled between the readings could mint
    // another thread's id).
    let now = now_ms();
    IdLayout::default()
        .compose(IdFields {
            timestamp: now - SNOWFLAKE_EPOCH_MS - 1000,
            worker: u64::from(std::process::id()) % 32,
            route_key: u64::from(code),
            sequence: (n * 7 + now) % 16384,
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

// ---------------------------------------------------------------------------------------
// Helpers shared by the end-to-end test files.
// ---------------------------------------------------------------------------------------

pub use mysql_async::Value;

/// A row as plain values (text protocol: `Value::Bytes` or `Value::NULL`).
pub type Values = Vec<Value>;

/// `SHOW ROUTEKEY STATS` through the MySQL port, as a map (counter -> value).
pub async fn route_stats(c: &mut Conn) -> std::collections::HashMap<String, u64> {
    c.query::<(String, u64), _>("SHOW ROUTEKEY STATS")
        .await
        .unwrap()
        .into_iter()
        .collect()
}

/// Every row of a text query, in the order received.
pub async fn rows(c: &mut Conn, sql: &str) -> Vec<Values> {
    try_rows(c, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}\n  failed: {e}"))
}

/// Every row of a text query, or its error.
pub async fn try_rows(c: &mut Conn, sql: &str) -> Result<Vec<Values>, mysql_async::Error> {
    let got: Vec<mysql_async::Row> = c.query(sql).await?;
    Ok(got.into_iter().map(|r| r.unwrap()).collect())
}

/// Every row of a text query, sorted (for answers combined from several shards).
pub async fn sorted_rows(c: &mut Conn, sql: &str) -> Vec<Values> {
    let mut r = rows(c, sql).await;
    r.sort_by_cached_key(|row| row.iter().map(show).collect::<Vec<_>>());
    r
}

/// Column names and types of a text query's result.
pub async fn columns(c: &mut Conn, sql: &str) -> Vec<(String, String)> {
    let result = c.query_iter(sql).await.unwrap();
    let cols = result
        .columns_ref()
        .iter()
        .map(|c| (c.name_str().into_owned(), format!("{:?}", c.column_type())))
        .collect();
    result.drop_result().await.unwrap();
    cols
}

/// The MySQL error code of a failed query; panics if the query succeeded or failed
/// without a server error.
pub fn server_code<T: std::fmt::Debug>(r: Result<T, mysql_async::Error>) -> u16 {
    server_error(r).0
}

/// (code, SQLSTATE, message) of a failed query.
pub fn server_error<T: std::fmt::Debug>(r: Result<T, mysql_async::Error>) -> (u16, String, String) {
    match r {
        Err(mysql_async::Error::Server(e)) => (e.code, e.state, e.message),
        Err(other) => panic!("expected a MySQL error packet, got {other:?}"),
        Ok(v) => panic!("expected a MySQL error, the statement succeeded: {v:?}"),
    }
}

/// Runs `sql` through `c`, expecting a MySQL error; returns its code.
pub async fn error_code(c: &mut Conn, sql: &str) -> u16 {
    let r = c.query_drop(sql).await;
    match r {
        Err(mysql_async::Error::Server(e)) => e.code,
        Err(other) => panic!("{sql}\n  expected a MySQL error packet, got {other:?}"),
        Ok(()) => panic!("{sql}\n  expected a MySQL error, the statement succeeded"),
    }
}

/// Runs `sql` through `c` and panics with the statement on error.
pub async fn exec(c: &mut Conn, sql: &str) {
    c.query_drop(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}\n  failed: {e}"));
}

/// The connection still serves: a trivial statement and a routed read both answer.
pub async fn assert_usable(c: &mut Conn) {
    let one: Option<u64> = c
        .query_first("SELECT 1")
        .await
        .expect("SELECT 1 after an error");
    assert_eq!(one, Some(1));
    let s = seed();
    let id = s.channels["EU_CHANNEL"].new_format_ids[0];
    let got: Option<u64> = c
        .query_first(format!(
            "SELECT order_id FROM t_order WHERE order_id = {id}"
        ))
        .await
        .expect("routed read after an error");
    assert_eq!(got, Some(id));
}

/// Channel names, codes, base shards and a region of each, from the demo configuration.
pub const CHANNELS: [(&str, u8, u32, &str); 5] = [
    ("EU_CHANNEL", 5, 0, "GB"),
    ("GLOBAL_CHANNEL", 2, 4, "US"),
    ("CN_CHANNEL", 1, 8, "CN"),
    ("BIZ_CHANNEL", 3, 12, "HK"),
    ("CORP_CHANNEL", 4, 16, "KR"),
];

/// The channel row of `name` in [`CHANNELS`].
pub fn channel(name: &str) -> (&'static str, u8, u32, &'static str) {
    *CHANNELS
        .iter()
        .find(|c| c.0 == name)
        .unwrap_or_else(|| panic!("unknown channel {name}"))
}

/// The shard an order of `channel_name` with id `id` belongs to (SPEC §3).
pub fn expected_shard(channel_name: &str, id: u64) -> u32 {
    channel(channel_name).2 + (id % 4) as u32
}

/// The sandbox server of a shard.
pub fn datasource_of(shard: u32) -> usize {
    physical(shard).0
}

/// A fresh route-key id of channel `code` whose shard lies on sandbox server `ds`.
pub fn fresh_new_id_on(code: u8, ds: usize) -> u64 {
    let name = CHANNELS.iter().find(|c| c.1 == code).unwrap().0;
    for _ in 0..1000 {
        let id = fresh_new_id(code);
        if datasource_of(expected_shard(name, id)) == ds {
            return id;
        }
    }
    panic!("channel {name} has no shard on ds{ds}")
}

/// A fresh route-key id of channel `code` with `id % 4 == rem`.
pub fn fresh_new_id_mod(code: u8, rem: u64) -> u64 {
    loop {
        let id = fresh_new_id(code);
        if id % 4 == rem {
            return id;
        }
    }
}

/// A fresh legacy id (not decodable) whose bits 17-14 nevertheless hold `code`, so that a
/// router trusting the bits would pick that code's channel.
pub fn fresh_legacy_id_with_code(code: u8) -> u64 {
    let id = fresh_legacy_id();
    (id & !(0xF << 14)) | (u64::from(code) << 14)
}

/// Shards (of all 20) whose physical `t_order` and `t_order_item` hold `order_id`, with
/// one query per sandbox server.
pub async fn placement(order_id: u64) -> (Vec<u32>, Vec<u32>) {
    let shards = config().sharding.shards.len() as u32;
    let mut orders = Vec::new();
    let mut items = Vec::new();
    for ds in 0..2 {
        let mut parts = Vec::new();
        for shard in (0..shards).filter(|s| datasource_of(*s) == ds) {
            let (_, t, ti) = physical(shard);
            parts.push(format!(
                "SELECT {shard}, (SELECT COUNT(*) FROM {t} WHERE order_id = {order_id}), (SELECT COUNT(*) FROM {ti} WHERE order_id = {order_id})"
            ));
        }
        let mut conn = backend(ds).await;
        let got: Vec<(u32, u64, u64)> = conn.query(parts.join(" UNION ALL ")).await.unwrap();
        for (shard, o, i) in got {
            if o > 0 {
                orders.push(shard);
            }
            if i > 0 {
                items.push(shard);
            }
        }
    }
    orders.sort();
    items.sort();
    (orders, items)
}

/// The `t_order` row of `order_id` read directly from physical shard `shard`.
pub async fn physical_row(shard: u32, order_id: u64) -> Option<Values> {
    let (ds, t, _) = physical(shard);
    let mut conn = backend(ds).await;
    let mut r = rows(
        &mut conn,
        &format!("SELECT * FROM {t} WHERE order_id = {order_id}"),
    )
    .await;
    assert!(r.len() <= 1);
    r.pop()
}

/// The channel the index table names for `order_id`.
pub async fn index_channel(order_id: u64) -> Option<String> {
    let mut conn = backend(0).await;
    conn.query_first(format!(
        "SELECT channel FROM order_meta.t_order_index WHERE order_id = {order_id}"
    ))
    .await
    .unwrap()
}

/// An INSERT of one `t_order` row (all columns) for the logical table.
pub fn insert_order_sql(id: u64, channel_name: &str, note: &str) -> String {
    let region = channel(channel_name).3;
    format!(
        "INSERT INTO t_order (order_id, channel, region, user_id, amount, status, note, created_at) \
         VALUES ({id}, '{channel_name}', '{region}', 7, 12.34, 'CREATED', '{note}', '2026-01-02 03:04:05.678')"
    )
}

/// The VALUES tuple of one `t_order` row, for multi-row inserts.
pub fn order_tuple(id: u64, channel_name: &str, note: &str) -> String {
    let region = channel(channel_name).3;
    format!(
        "({id}, '{channel_name}', '{region}', 7, 12.34, 'CREATED', '{note}', '2026-01-02 03:04:05.678')"
    )
}

/// The column list matching [`order_tuple`].
pub const ORDER_COLUMNS: &str =
    "(order_id, channel, region, user_id, amount, status, note, created_at)";

/// Inserts a `t_order` row straight into physical shard `shard`, bypassing the proxy.
pub async fn insert_physical(shard: u32, id: u64, channel_name: &str, note: &str) {
    let (ds, t, _) = physical(shard);
    let mut conn = backend(ds).await;
    exec(
        &mut conn,
        &format!(
            "INSERT INTO {t} {ORDER_COLUMNS} VALUES {}",
            order_tuple(id, channel_name, note)
        ),
    )
    .await;
}

/// Deletes every trace of `ids`: their rows on all physical shards, in the reference
/// database (a differential test writes there too) and their index rows.
pub async fn purge(ids: &[u64]) {
    if ids.is_empty() {
        return;
    }
    let list = ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let shards = config().sharding.shards.len() as u32;
    for ds in 0..2 {
        let mut conn = backend(ds).await;
        for shard in (0..shards).filter(|s| datasource_of(*s) == ds) {
            let (_, t, ti) = physical(shard);
            exec(
                &mut conn,
                &format!("DELETE FROM {t} WHERE order_id IN ({list})"),
            )
            .await;
            exec(
                &mut conn,
                &format!("DELETE FROM {ti} WHERE order_id IN ({list})"),
            )
            .await;
        }
        if ds == 0 {
            for table in [
                "order_meta.t_order_index",
                "orders_ref.t_order",
                "orders_ref.t_order_item",
            ] {
                exec(
                    &mut conn,
                    &format!("DELETE FROM {table} WHERE order_id IN ({list})"),
                )
                .await;
            }
        }
    }
}

/// Purges the ids it was given when dropped, even when the test panics.
#[derive(Default)]
pub struct Cleanup(std::sync::Mutex<Vec<u64>>);

impl Cleanup {
    /// A guard for `ids`.
    pub fn new(ids: &[u64]) -> Self {
        Self(std::sync::Mutex::new(ids.to_vec()))
    }

    /// Adds an id (returns it).
    pub fn add(&self, id: u64) -> u64 {
        self.0.lock().unwrap().push(id);
        id
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let ids = std::mem::take(&mut *self.0.lock().unwrap());
        if ids.is_empty() {
            return;
        }
        // Runs on its own thread and runtime: Drop may run inside the test's runtime.
        let _ = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(purge(&ids));
        })
        .join();
    }
}

/// A value as text (for messages).
pub fn show(v: &Value) -> String {
    match v {
        Value::NULL => "NULL".to_owned(),
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        other => format!("{other:?}"),
    }
}

/// Rows as text lines (for messages).
pub fn show_rows(rows: &[Values]) -> Vec<String> {
    rows.iter()
        .map(|r| r.iter().map(show).collect::<Vec<_>>().join(" | "))
        .collect()
}

/// Panics with the rows only one side has when `got != want`.
pub fn assert_same_rows(got: &[Values], want: &[Values], what: &str) {
    if got == want {
        return;
    }
    let g = show_rows(got);
    let w = show_rows(want);
    let extra: Vec<_> = g.iter().filter(|r| !w.contains(r)).collect();
    let missing: Vec<_> = w.iter().filter(|r| !g.contains(r)).collect();
    panic!(
        "{what}\n  got {} rows, expected {}\n  unexpected: {extra:#?}\n  missing: {missing:#?}\n  got (in order): {g:#?}",
        got.len(),
        want.len()
    );
}

/// A seeded order on sandbox server `ds` (varying with `i`).
pub fn order_on(ds: usize, i: usize) -> u64 {
    let s = seed();
    let names = if ds == 0 {
        ["EU_CHANNEL", "GLOBAL_CHANNEL"]
    } else {
        ["BIZ_CHANNEL", "CORP_CHANNEL"]
    };
    s.channels[names[i % 2]].new_format_ids[i % 50]
}
