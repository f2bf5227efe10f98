//! The sandbox of these tests, the proxy processes they start, kill and restart, and what
//! they read straight from the MariaDB servers.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::{Conn, Opts, OptsBuilder};
use routekey_proxy::config::Config;
use routekey_proxy::id::{IdFields, IdLayout, SNOWFLAKE_EPOCH_MS};

pub const BIN: &str = env!("CARGO_BIN_EXE_routekey-proxy");
/// routekey-proxy's XA format id (29291, "rk").
pub const FORMAT_ID: u32 = routekey_proxy::execute::xa::FORMAT_ID;
/// EU_CHANNEL: shards 0-3, all on ds0.
pub const EU: u8 = 5;
/// BIZ_CHANNEL: shards 12-15, all on ds1.
pub const BIZ: u8 = 3;
/// The decision table every datasource holds.
pub const DECISIONS: &str = "routekey.routekey_xa_decisions";

/// One test at a time: they kill and restart the sandbox's servers.
pub static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The sandbox folder (`ROUTEKEY_XA_SANDBOX_DIR`, default `.sandbox-xa`).
pub fn dir() -> String {
    std::env::var("ROUTEKEY_XA_SANDBOX_DIR")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/.sandbox-xa").to_owned())
}

/// Port of dsN (`ROUTEKEY_XA_DS0_PORT`/`DS1_PORT`, default 33361/33362).
pub fn port(ds: usize) -> u16 {
    std::env::var(format!("ROUTEKEY_XA_DS{ds}_PORT"))
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(33361 + ds as u16)
}

/// Runs `scripts/sandbox.sh` on this sandbox (at most 3 minutes); its stdout, or a panic
/// with its stderr.
pub async fn sandbox(args: &[&str]) -> String {
    let mut cmd =
        tokio::process::Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/sandbox.sh"));
    cmd.args(args)
        .env("ROUTEKEY_SANDBOX_DIR", dir())
        .env("ROUTEKEY_DS0_PORT", port(0).to_string())
        .env("ROUTEKEY_DS1_PORT", port(1).to_string())
        .env_remove("ROUTEKEY_REPLICAS")
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(180), cmd.output())
        .await
        .unwrap_or_else(|_| panic!("scripts/sandbox.sh {args:?} took over 3 minutes"))
        .expect("scripts/sandbox.sh runs");
    assert!(
        out.status.success(),
        "scripts/sandbox.sh {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The lock, and the sandbox as `up` leaves it: both servers running, everything seeded.
/// Branches of ours a failed earlier run left prepared are rolled back first (they would
/// hold the seed's `DROP TABLE` on their metadata locks).
pub async fn fresh() -> tokio::sync::MutexGuard<'static, ()> {
    let guard = LOCK.lock().await;
    for ds in 0..2 {
        let Some(mut conn) = try_server(ds).await else {
            continue;
        };
        for (gtrid, bqual) in prepared_of_ours(&mut conn).await {
            eprintln!("ds{ds}: rolling back branch {gtrid}/{bqual} an earlier run left");
            let _ = conn
                .query_drop(format!("XA ROLLBACK {}", xid_sql(&gtrid, &bqual)))
                .await;
        }
    }
    sandbox(&["up", "--replicas", "0"]).await;
    guard
}

/// Runs a test's body, at most `limit` (its proxies are killed when it is dropped).
pub async fn within<F: std::future::Future<Output = ()>>(limit: Duration, body: F) {
    if tokio::time::timeout(limit, body).await.is_err() {
        panic!("the test did not finish within {limit:?}");
    }
}

/// Root connection options for dsN.
fn server_opts(ds: usize) -> Opts {
    OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port(ds))
        .user(Some("root"))
        .prefer_socket(false)
        .into()
}

/// A root connection straight to dsN's server, or `None` within 5 s.
pub async fn try_server(ds: usize) -> Option<Conn> {
    match tokio::time::timeout(Duration::from_secs(5), Conn::new(server_opts(ds))).await {
        Ok(Ok(c)) => Some(c),
        _ => None,
    }
}

/// A root connection straight to dsN's server.
pub async fn server(ds: usize) -> Conn {
    match tokio::time::timeout(Duration::from_secs(10), Conn::new(server_opts(ds))).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => panic!("ds{ds} on port {}: {e}", port(ds)),
        Err(_) => panic!("ds{ds} on port {}: no answer within 10 s", port(ds)),
    }
}

/// `X'..',X'..',29291`.
pub fn xid_sql(gtrid: &str, bqual: &str) -> String {
    let hex = |s: &str| s.bytes().map(|b| format!("{b:02x}")).collect::<String>();
    format!("X'{}',X'{}',{FORMAT_ID}", hex(gtrid), hex(bqual))
}

/// The prepared branches `XA RECOVER` lists on `conn` that are ours: format id 29291 and
/// a gtrid `rk:...`, as (gtrid, bqual).
pub async fn prepared_of_ours(conn: &mut Conn) -> Vec<(String, String)> {
    let rows: Vec<(i64, usize, usize, Vec<u8>)> = conn.query("XA RECOVER").await.unwrap();
    rows.into_iter()
        .filter(|(format, ..)| *format == i64::from(FORMAT_ID))
        .filter_map(|(_, g, b, data)| {
            let gtrid = String::from_utf8(data.get(..g)?.to_vec()).ok()?;
            let bqual = String::from_utf8(data.get(g..g + b)?.to_vec()).ok()?;
            gtrid.starts_with("rk:").then_some((gtrid, bqual))
        })
        .collect()
}

/// The branches of ours prepared on dsN now.
pub async fn prepared_on(ds: usize) -> Vec<(String, String)> {
    let mut conn = server(ds).await;
    prepared_of_ours(&mut conn).await
}

/// Waits (up to `limit`) until neither server lists a branch of ours; the time it took,
/// or a panic naming what is left.
pub async fn wait_no_prepared(limit: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let left: Vec<_> = [prepared_on(0).await, prepared_on(1).await].concat();
        if left.is_empty() {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < limit,
            "still prepared after {limit:?}: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `config/demo.toml` with this sandbox's ports and certificates.
pub fn config_text() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config/demo.toml"))
        .unwrap()
        .replace("127.0.0.1:33061", &format!("127.0.0.1:{}", port(0)))
        .replace("127.0.0.1:33062", &format!("127.0.0.1:{}", port(1)))
        .replace("\".sandbox/tls/", &format!("\"{}/tls/", dir()))
}

/// A TCP port free on 127.0.0.1 now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A folder of the test's own: the configuration file and each proxy's log. Removed when
/// the test passes, kept (and named) when it fails.
pub struct Workdir {
    pub path: PathBuf,
    pub config: PathBuf,
}

impl Workdir {
    pub fn new(tag: &str) -> Self {
        let path = std::env::temp_dir().join(format!("routekey-xa-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        let config = path.join("routekey.toml");
        std::fs::write(&config, config_text()).unwrap();
        Self { path, config }
    }

    /// The configuration as the proxies read it.
    pub fn config(&self) -> Config {
        Config::load(&self.config).expect("the test's configuration")
    }
}

impl Drop for Workdir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("the proxies' logs are kept in {}", self.path.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// How a proxy process is started.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `ROUTEKEY_FAILPOINTS`, if any.
    pub failpoints: Option<String>,
    /// `transactions.abandon_age`.
    pub abandon_age: &'static str,
    /// `transactions.resolve_interval`.
    pub resolve_interval: &'static str,
}

impl Settings {
    /// No failpoint, abandon 3 s, a resolver round every second.
    pub fn quick() -> Self {
        Self {
            failpoints: None,
            abandon_age: "3s",
            resolve_interval: "1s",
        }
    }

    pub fn failpoints(mut self, spec: &str) -> Self {
        self.failpoints = Some(spec.to_owned());
        self
    }
}

/// A `routekey-proxy` process (SIGKILLed when dropped).
pub struct Proc {
    pub child: Child,
    pub port: u16,
    pub admin: u16,
    pub log: PathBuf,
    pub settings: Settings,
}

impl Proc {
    /// Starts the binary on `port`/`admin` with `settings`, its log in `work`/`name`.log;
    /// returns once it accepts connections (or has already exited: a failpoint).
    pub async fn start(
        work: &Workdir,
        name: &str,
        port: u16,
        admin: u16,
        settings: Settings,
    ) -> Self {
        let mut admin = admin;
        for _ in 0..5 {
            let p = Self::start_once(work, name, port, admin, settings.clone()).await;
            // A port another process took since it was picked (free_port's race): the
            // admin port is picked again, the client port (the fleet's) waited for.
            let clash = p
                .log_text()
                .lines()
                .find(|l| l.contains("Address already in use"))
                .map(str::to_owned);
            match clash {
                Some(line) if line.contains("admin.listen") => admin = free_port(),
                Some(_) => tokio::time::sleep(Duration::from_millis(300)).await,
                None => return p,
            }
        }
        panic!("proxy {name}: its ports stayed in use by other processes");
    }

    async fn start_once(
        work: &Workdir,
        name: &str,
        port: u16,
        admin: u16,
        settings: Settings,
    ) -> Self {
        let log = work.path.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).unwrap();
        let mut cmd = Command::new(BIN);
        cmd.args(["serve", "--config"])
            .arg(&work.config)
            .env("ROUTEKEY_SERVER__LISTEN", format!("127.0.0.1:{port}"))
            .env("ROUTEKEY_ADMIN__LISTEN", format!("127.0.0.1:{admin}"))
            .env("ROUTEKEY_TRANSACTIONS__ABANDON_AGE", settings.abandon_age)
            .env(
                "ROUTEKEY_TRANSACTIONS__RESOLVE_INTERVAL",
                settings.resolve_interval,
            )
            .env("RUST_LOG", "routekey_proxy=info")
            .env_remove("ROUTEKEY_FAILPOINTS")
            .stdout(Stdio::null())
            .stderr(file);
        if let Some(spec) = &settings.failpoints {
            cmd.env("ROUTEKEY_FAILPOINTS", spec);
        }
        let child = cmd.spawn().expect("routekey-proxy starts");
        let mut p = Self {
            child,
            port,
            admin,
            log,
            settings,
        };
        let started = Instant::now();
        loop {
            if p.exited() {
                return p;
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return p;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "proxy {name} not listening after 20 s:\n{}",
                p.log_text()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Whether the process has exited.
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// SIGKILL, and waits for it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The failpoint that killed it, if one did.
    pub fn failpoint_reached(&self) -> Option<String> {
        let log = self.log_text();
        let line = log.lines().find(|l| l.contains("failpoint reached"))?;
        let point = line.split("point=").nth(1)?;
        Some(point.trim().trim_matches('"').to_owned())
    }

    /// Connection options for user `app`, database `orders`.
    pub fn opts(&self) -> Opts {
        client_opts(self.port)
    }

    pub async fn client(&self) -> Conn {
        tokio::time::timeout(Duration::from_secs(10), Conn::new(self.opts()))
            .await
            .expect("connecting through the proxy: no answer within 10 s")
            .expect("connecting through the proxy")
    }

    /// Its `/metrics` page.
    pub async fn metrics(&self) -> String {
        let get = async {
            reqwest::get(format!("http://127.0.0.1:{}/metrics", self.admin))
                .await?
                .text()
                .await
        };
        tokio::time::timeout(Duration::from_secs(10), get)
            .await
            .expect("/metrics within 10 s")
            .expect("/metrics")
    }

    /// `routekey_xa_resolved_total` by action: (commit, rollback).
    pub async fn resolved(&self) -> (u64, u64) {
        let text = self.metrics().await;
        (
            metric(&text, "routekey_xa_resolved_total{action=\"commit\"}"),
            metric(&text, "routekey_xa_resolved_total{action=\"rollback\"}"),
        )
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The value of the series `name` (with its labels) on a `/metrics` page; 0 when absent.
pub fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

/// Options for user `app`, database `orders`, through a proxy on `port`.
pub fn client_opts(port: u16) -> Opts {
    OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some("app"))
        .pass(Some("app"))
        .db_name(Some("orders"))
        .prefer_socket(false)
        .into()
}

/// The resolver's lines in a log: (committed, rolled back) branches.
pub fn resolver_lines(log: &str) -> (u64, u64) {
    let mut out = (0, 0);
    for line in log
        .lines()
        .filter(|l| l.contains("resolver finished an abandoned XA branch"))
    {
        if line.contains("decision=\"commit\"") {
            out.0 += 1;
        } else if line.contains("decision=\"abort\"") {
            out.1 += 1;
        }
    }
    out
}

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// A route-key id of channel `code` minted now (a second ago), unique in this process.
pub fn new_id(code: u8) -> u64 {
    let n = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    IdLayout::default()
        .compose(IdFields {
            timestamp: now - SNOWFLAKE_EPOCH_MS - 1000,
            worker: u64::from(std::process::id()) % 32,
            route_key: u64::from(code),
            sequence: (now * 31 + n) % 16384,
        })
        .unwrap()
}

/// The physical tables of each shard as the configuration places them: (server index,
/// `db.t_order_N`, `db.t_order_item_N`).
pub fn physical_tables(config: &Config) -> Vec<(usize, String, String)> {
    config
        .sharding
        .shards
        .iter()
        .map(|s| {
            (
                usize::from(s.datasource.0),
                format!("{}.{}", s.database, s.tables[0]),
                format!("{}.{}", s.database, s.tables[1]),
            )
        })
        .collect()
}

/// `CREATE DATABASE`/`CREATE TABLE` of the decision table as the proxy runs them, on
/// `conn`.
pub async fn create_decision_table(config: &Config, conn: &mut Conn) {
    for sql in routekey_proxy::execute::xa::create_statements(config) {
        conn.query_drop(sql).await.unwrap();
    }
}

/// The server's clock (`NOW(6)`), as text.
pub async fn server_now(conn: &mut Conn) -> String {
    conn.query_first::<String, _>("SELECT CAST(NOW(6) AS CHAR)")
        .await
        .unwrap()
        .unwrap()
}

/// The decision rows dsN recorded since `since` (its own clock): (commit, abort).
pub async fn decisions_since(ds: usize, since: &str) -> (u64, u64) {
    let mut conn = server(ds).await;
    let rows: Vec<(String, u64)> = conn
        .query(format!(
            "SELECT CAST(decision AS CHAR), COUNT(*) FROM {DECISIONS} WHERE decided_at >= '{since}' GROUP BY decision"
        ))
        .await
        .unwrap();
    let get = |d: &str| rows.iter().find(|(k, _)| k == d).map_or(0, |(_, n)| *n);
    (get("commit"), get("abort"))
}

/// The pid of dsN's `mariadbd` (`scripts/sandbox.sh pid`).
pub async fn server_pid(ds: usize) -> u32 {
    sandbox(&["pid", &format!("ds{ds}")])
        .await
        .trim()
        .parse()
        .expect("a pid")
}

/// SIGKILLs dsN's `mariadbd` and waits (up to 20 s) until it is gone.
pub async fn kill_server(ds: usize) {
    let pid = server_pid(ds).await;
    let status = tokio::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .await
        .unwrap();
    assert!(status.success(), "kill -KILL {pid}");
    let started = Instant::now();
    while Path::new(&format!("/proc/{pid}")).exists() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "mariadbd {pid} still there 20 s after SIGKILL"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Starts dsN's `mariadbd` again on its data directory (`scripts/sandbox.sh start`).
pub async fn start_server(ds: usize) {
    sandbox(&["start", &format!("ds{ds}")]).await;
}

/// Our orders as the servers hold them: order -> (server, cents), and every marker row
/// of theirs: (server, order, transfer, sku, cents).
pub async fn read_back(
    tables: &[(usize, String, String)],
    ids: &[u64],
) -> (
    HashMap<u64, Vec<(usize, i64)>>,
    Vec<(usize, u64, u32, String, i64)>,
) {
    let list = ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let mut orders: HashMap<u64, Vec<(usize, i64)>> = HashMap::new();
    let mut items = Vec::new();
    for ds in 0..2 {
        let mut conn = server(ds).await;
        for (_, t, ti) in tables.iter().filter(|(d, ..)| *d == ds) {
            let rows: Vec<(u64, i64)> = conn
                .query(format!(
                    "SELECT order_id, CAST(amount * 100 AS SIGNED) FROM {t} WHERE order_id IN ({list})"
                ))
                .await
                .unwrap();
            for (id, cents) in rows {
                orders.entry(id).or_default().push((ds, cents));
            }
            let rows: Vec<(u64, u32, String, i64)> = conn
                .query(format!(
                    "SELECT order_id, item_no, sku, CAST(price * 100 AS SIGNED) FROM {ti} WHERE order_id IN ({list})"
                ))
                .await
                .unwrap();
            items.extend(rows.into_iter().map(|(o, t, s, c)| (ds, o, t, s, c)));
        }
    }
    (orders, items)
}

/// A transfer of 10.00 from `debit` to `credit` through the proxy of `opts`, on a
/// connection of its own: each side's UPDATE and marker row (item `tid`), the debit's side
/// first (the decision branch) when `debit_first`; the COMMIT's result.
pub async fn transfer_through(
    opts: mysql_async::Opts,
    tid: u32,
    debit: u64,
    credit: u64,
    debit_first: bool,
) -> Result<(), mysql_async::Error> {
    let mut c = tokio::time::timeout(Duration::from_secs(10), Conn::new(opts))
        .await
        .expect("connecting through the proxy: no answer within 10 s")
        .expect("connecting through the proxy");
    let side = |id: u64, sign: char, sku: &str| {
        [
            format!("UPDATE t_order SET amount = amount {sign} 10.00 WHERE order_id = {id}"),
            format!(
                "INSERT INTO t_order_item (order_id, item_no, sku, qty, price) VALUES ({id}, {tid}, '{sku}', 1, 10.00)"
            ),
        ]
    };
    let (d, k) = (side(debit, '-', "xa-debit"), side(credit, '+', "xa-credit"));
    let (first, second) = if debit_first { (d, k) } else { (k, d) };
    c.query_drop("BEGIN").await.unwrap();
    for sql in first.iter().chain(&second) {
        c.query_drop(sql).await.unwrap();
    }
    let commit = tokio::time::timeout(Duration::from_secs(30), c.query_drop("COMMIT"))
        .await
        .expect("COMMIT answered (or the connection closed) within 30 s");
    drop(c);
    commit
}
