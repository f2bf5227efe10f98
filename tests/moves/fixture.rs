//! The sandbox of the shard move tests (ds0, ds1 seeded, ds2 the empty spare), the
//! proxies they run in-process, the `shards move` command they run (and kill) as a
//! process, the load they put on the proxies meanwhile, and what they read straight from
//! the servers.

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::{Conn, Opts, OptsBuilder};
use routekey_proxy::config::Config;

use super::common::{Harness, fresh_new_id};

pub const BIN: &str = env!("CARGO_BIN_EXE_routekey-proxy");
/// BIZ_CHANNEL: shards 12-15, on ds1; the shards the tests move.
pub const BIZ: u8 = 3;
/// CN_CHANNEL (shards 8-11: ds0) and CORP_CHANNEL (shards 16-19: ds1): not moved.
pub const CN: u8 = 1;
pub const CORP: u8 = 4;
/// The moved shards.
pub const MOVED: &str = "12-15";

/// One test at a time: they share the sandbox and its shard map.
pub static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The sandbox folder (`ROUTEKEY_MOVE_SANDBOX_DIR`, default `.sandbox-move`).
pub fn dir() -> String {
    std::env::var("ROUTEKEY_MOVE_SANDBOX_DIR")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/.sandbox-move").to_owned())
}

/// Port of dsN (`ROUTEKEY_MOVE_DS0_PORT`.., default 33461, 33462, 33463).
pub fn port(ds: usize) -> u16 {
    std::env::var(format!("ROUTEKEY_MOVE_DS{ds}_PORT"))
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(33461 + ds as u16)
}

/// Runs `scripts/sandbox.sh` on this sandbox (at most 3 minutes); its stdout.
pub async fn sandbox(args: &[&str]) -> String {
    let mut cmd =
        tokio::process::Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/sandbox.sh"));
    cmd.args(args)
        .env("ROUTEKEY_SANDBOX_DIR", dir())
        .env("ROUTEKEY_DS0_PORT", port(0).to_string())
        .env("ROUTEKEY_DS1_PORT", port(1).to_string())
        .env("ROUTEKEY_DS2_PORT", port(2).to_string())
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

/// The lock, and the sandbox as `up --spare` leaves it: ds0 and ds1 seeded (the shard map
/// and moves tables gone with `order_meta`), ds2 empty.
pub async fn fresh() -> tokio::sync::MutexGuard<'static, ()> {
    let guard = LOCK.lock().await;
    sandbox(&["up", "--replicas", "0", "--spare"]).await;
    guard
}

/// Runs a test's body, at most `limit`.
pub async fn within<F: std::future::Future<Output = ()>>(limit: Duration, body: F) {
    if tokio::time::timeout(limit, body).await.is_err() {
        panic!("the test did not finish within {limit:?}");
    }
}

/// A root connection straight to dsN's server.
pub async fn server(ds: usize) -> Conn {
    let opts: Opts = OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port(ds))
        .user(Some("root"))
        .prefer_socket(false)
        .into();
    tokio::time::timeout(Duration::from_secs(10), Conn::new(opts))
        .await
        .unwrap_or_else(|_| panic!("ds{ds}: no answer within 10 s"))
        .unwrap_or_else(|e| panic!("ds{ds} on port {}: {e}", port(ds)))
}

/// `config/demo.toml` with this sandbox's ports and certificates, ds2 defined (no shards),
/// and the shard map read every `poll`.
pub fn config_text(poll: Duration) -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config/demo.toml"))
        .unwrap()
        .replace("127.0.0.1:33061", &format!("127.0.0.1:{}", port(0)))
        .replace("127.0.0.1:33062", &format!("127.0.0.1:{}", port(1)))
        .replace("\".sandbox/tls/", &format!("\"{}/tls/", dir()))
        .replace(
            "[id]\n",
            &format!(
                "[datasources.ds2]\naddress = \"127.0.0.1:{}\"\nuser = \"root\"\npassword = \"\"\ndatabase = \"orders\"\n\n[shard_map]\npoll_interval = \"{}\"\n\n[id]\n",
                port(2),
                humantime::format_duration(poll)
            ),
        )
}

/// The configuration of a proxy that reads the shard map every `poll`.
pub fn config(poll: Duration) -> Config {
    Config::from_toml(&config_text(poll), "moves").unwrap()
}

/// The configuration file the `shards move` command reads.
pub fn config_file() -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("routekey-moves-{}.toml", std::process::id()));
    std::fs::write(&path, config_text(Duration::from_secs(1))).unwrap();
    path
}

/// How one run of `shards move` ended.
#[derive(Debug)]
pub struct Ran {
    /// Its exit status; `None`: killed by a signal.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub took: Duration,
}

/// Runs `routekey-proxy shards move --shards MOVED <args>` (killing itself at `kill_at`
/// when given), at most 3 minutes.
pub async fn shards_move(args: &[&str], kill_at: Option<&str>) -> Ran {
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.arg("-c")
        .arg(config_file())
        .args(["shards", "move", "--shards", MOVED])
        .args(args)
        .kill_on_drop(true);
    match kill_at {
        Some(point) => cmd.env("ROUTEKEY_MOVE_KILL_AT", point),
        None => cmd.env_remove("ROUTEKEY_MOVE_KILL_AT"),
    };
    let started = Instant::now();
    let out = tokio::time::timeout(Duration::from_secs(180), cmd.output())
        .await
        .expect("shards move finishes within 3 minutes")
        .expect("shards move runs");
    let ran = Ran {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        took: started.elapsed(),
    };
    eprintln!(
        "shards move {args:?} (kill at {kill_at:?}): {:?} in {:?}\n{}{}",
        ran.code, ran.took, ran.stdout, ran.stderr
    );
    ran
}

/// The move's row in the moves table: (step, map_version, pause_ms, rows_copied).
pub async fn move_row(id: u64) -> (String, Option<u64>, Option<u64>, u64) {
    let mut c = server(0).await;
    c.exec_first(
        "SELECT step, map_version, pause_ms, rows_copied FROM order_meta.routekey_shard_moves WHERE id = ?",
        (id,),
    )
    .await
    .unwrap()
    .expect("the move's row")
}

/// The tables of the moved shards on dsN with `suffix` appended to their names, present.
pub async fn tables_on(ds: usize, suffix: &str) -> Vec<String> {
    let mut c = server(ds).await;
    let names: Vec<String> = c
        .query("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'order_shards' ORDER BY TABLE_NAME")
        .await
        .unwrap();
    (12..=15)
        .flat_map(|s| {
            [
                format!("t_order_{s}{suffix}"),
                format!("t_order_item_{s}{suffix}"),
            ]
        })
        .filter(|t| names.contains(t))
        .collect()
}

/// The tables in move `id`'s staging database on dsN (`order_shards__rk<id>`).
pub async fn staged_tables(ds: usize, id: u64) -> usize {
    let mut c = server(ds).await;
    let n: Option<usize> = c
        .exec_first(
            "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?",
            (format!("order_shards__rk{id}"),),
        )
        .await
        .unwrap();
    n.unwrap_or(0)
}

/// Every row of the moved shards' `t_order` tables on dsN (with `suffix`), order id ->
/// amount in cents.
pub async fn orders_on(ds: usize, suffix: &str) -> HashMap<u64, i64> {
    let mut c = server(ds).await;
    let mut out = HashMap::new();
    for s in 12..=15 {
        let rows: Vec<(u64, i64)> = c
            .query(format!(
                "SELECT order_id, CAST(amount * 100 AS SIGNED) FROM order_shards.t_order_{s}{suffix}"
            ))
            .await
            .unwrap();
        out.extend(rows);
    }
    out
}

/// The target's replication connections (none once a move switched or aborted).
pub async fn replication_connections(ds: usize) -> usize {
    let mut c = server(ds).await;
    let rows: Vec<mysql_async::Row> = c.query("SHOW ALL SLAVES STATUS").await.unwrap();
    rows.len()
}

/// What one writer or reader saw.
#[derive(Debug, Default)]
pub struct Seen {
    /// Orders this writer inserted and had acknowledged: id -> (channel code, acknowledged
    /// amount in cents, when its insert was acknowledged). `None` amount: a write of it
    /// failed, its amount is not known.
    pub orders: HashMap<u64, (u8, Option<i64>, Instant)>,
    /// Statements acknowledged.
    pub acked: u64,
    /// Errors, with the statement's channel.
    pub errors: Vec<String>,
    /// The longest statement on the moved channel.
    pub longest_moved: Duration,
    /// The longest statement elsewhere.
    pub longest_other: Duration,
    /// Reads that found no row (seeded rows are never deleted: a silent wrong answer).
    pub empty_reads: u64,
}

/// Writers and readers on several proxies until stopped.
pub struct Load {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<Seen>>,
}

const INSERT: &str = "INSERT INTO t_order (order_id, channel, region, user_id, amount, status, note, created_at) VALUES (?, ?, ?, 7, 1.00, 'new', NULL, NOW(3))";

fn channel_of(code: u8) -> (&'static str, &'static str) {
    match code {
        BIZ => ("BIZ_CHANNEL", "HK"),
        CN => ("CN_CHANNEL", "CN"),
        _ => ("CORP_CHANNEL", "KR"),
    }
}

impl Load {
    /// `writers` writers and `readers` readers, each statement through the next of
    /// `proxies` in turn; half the statements on the moved channel. Readers read `seeded`
    /// (order id, channel code) rows.
    pub async fn start(
        proxies: &[&Harness],
        writers: usize,
        readers: usize,
        seeded: Arc<Vec<(u64, u8)>>,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let opts: Vec<Opts> = proxies.iter().map(|p| p.opts()).collect();
        let mut tasks = Vec::new();
        for w in 0..writers {
            let (stop, opts) = (stop.clone(), opts.clone());
            tasks.push(tokio::spawn(async move { write(w, &opts, &stop).await }));
        }
        for r in 0..readers {
            let (stop, opts, seeded) = (stop.clone(), opts.clone(), seeded.clone());
            tasks.push(tokio::spawn(
                async move { read(r, &opts, &stop, &seeded).await },
            ));
        }
        Self { stop, tasks }
    }

    /// Stops the load; what every task saw.
    pub async fn finish(self) -> Vec<Seen> {
        self.stop.store(true, Ordering::Relaxed);
        let mut out = Vec::new();
        for t in self.tasks {
            out.push(t.await.unwrap());
        }
        out
    }
}

async fn connect_all(opts: &[Opts]) -> Vec<Conn> {
    let mut conns = Vec::new();
    for o in opts {
        conns.push(Conn::new(o.clone()).await.expect("connect through a proxy"));
    }
    conns
}

fn note(seen: &mut Seen, code: u8, took: Duration) {
    if code == BIZ {
        seen.longest_moved = seen.longest_moved.max(took);
    } else {
        seen.longest_other = seen.longest_other.max(took);
    }
}

async fn write(w: usize, opts: &[Opts], stop: &AtomicBool) -> Seen {
    let mut conns = connect_all(opts).await;
    let mut seen = Seen::default();
    let mut mine: Vec<u64> = Vec::new();
    let mut i = w;
    while !stop.load(Ordering::Relaxed) {
        i += 1;
        let conn = &mut conns[i % opts.len()];
        let code = if i % 2 == 0 {
            BIZ
        } else if i % 4 == 1 {
            CN
        } else {
            CORP
        };
        let update = i % 3 == 0 && !mine.is_empty();
        let started = Instant::now();
        if update {
            let id = mine[(i * 7919) % mine.len()];
            let code = seen.orders[&id].0;
            let result = conn
                .exec_drop(
                    "UPDATE t_order SET amount = amount + 1 WHERE order_id = ?",
                    (id,),
                )
                .await;
            note(&mut seen, code, started.elapsed());
            let entry = seen.orders.get_mut(&id).unwrap();
            match result {
                Ok(()) => {
                    seen.acked += 1;
                    entry.1 = entry.1.map(|a| a + 100);
                }
                Err(e) => {
                    seen.errors
                        .push(format!("UPDATE of {id} (channel {code}): {e}"));
                    entry.1 = None;
                }
            }
        } else {
            let id = fresh_new_id(code);
            let (channel, region) = channel_of(code);
            // Every fifth insert as text (COM_QUERY), the others prepared (COM_STMT_EXECUTE).
            let result = if i % 5 == 0 {
                conn.query_drop(format!(
                    "INSERT INTO t_order (order_id, channel, region, user_id, amount, status, note, created_at) VALUES ({id}, '{channel}', '{region}', 7, 1.00, 'new', NULL, NOW(3))"
                ))
                .await
            } else {
                conn.exec_drop(INSERT, (id, channel, region)).await
            };
            note(&mut seen, code, started.elapsed());
            match result {
                Ok(()) => {
                    seen.acked += 1;
                    seen.orders.insert(id, (code, Some(100), Instant::now()));
                    mine.push(id);
                }
                Err(e) => seen
                    .errors
                    .push(format!("INSERT of {id} (channel {code}): {e}")),
            }
        }
    }
    seen
}

async fn read(r: usize, opts: &[Opts], stop: &AtomicBool, seeded: &[(u64, u8)]) -> Seen {
    let mut conns = connect_all(opts).await;
    let mut seen = Seen::default();
    let mut i = r * 131;
    while !stop.load(Ordering::Relaxed) {
        i += 1;
        let (id, code) = seeded[i % seeded.len()];
        let conn = &mut conns[i % opts.len()];
        let started = Instant::now();
        if i % 7 == 0 {
            // A scatter over every shard, and one over the moved channel's.
            let sql = if i % 2 == 0 {
                "SELECT COUNT(*) FROM t_order"
            } else {
                "SELECT COUNT(*) FROM t_order WHERE channel = 'BIZ_CHANNEL'"
            };
            let started = Instant::now();
            let result: Result<Option<u64>, _> = conn.query_first(sql).await;
            note(&mut seen, BIZ, started.elapsed());
            match result {
                Ok(Some(n)) if n > 0 => seen.acked += 1,
                Ok(_) => seen.empty_reads += 1,
                Err(e) => seen.errors.push(format!("{sql}: {e}")),
            }
            continue;
        }
        let result: Result<Option<(u64, String)>, _> = if i % 3 == 0 {
            conn.query_first(format!(
                "SELECT order_id, status FROM t_order WHERE order_id = {id}"
            ))
            .await
        } else {
            conn.exec_first(
                "SELECT order_id, status FROM t_order WHERE order_id = ?",
                (id,),
            )
            .await
        };
        note(&mut seen, code, started.elapsed());
        match result {
            Ok(Some(_)) => seen.acked += 1,
            Ok(None) => seen.empty_reads += 1,
            Err(e) => seen
                .errors
                .push(format!("SELECT of {id} (channel {code}): {e}")),
        }
    }
    seen
}

/// Seeded orders of the moved channel and of the others, as (order id, channel code),
/// from the unsharded reference database.
pub async fn seeded_orders() -> Arc<Vec<(u64, u8)>> {
    let mut c = server(0).await;
    let rows: Vec<(u64, String)> = c
        .query("SELECT order_id, channel FROM orders_ref.t_order WHERE channel IN ('BIZ_CHANNEL', 'CN_CHANNEL', 'CORP_CHANNEL') ORDER BY order_id")
        .await
        .unwrap();
    Arc::new(
        rows.into_iter()
            .map(|(id, ch)| {
                let code = match ch.as_str() {
                    "BIZ_CHANNEL" => BIZ,
                    "CN_CHANNEL" => CN,
                    _ => CORP,
                };
                (id, code)
            })
            .collect(),
    )
}

/// Waits until `proxy` routes by shard map `version` (at most `limit`).
pub async fn wait_version(proxy: &Harness, version: u64, limit: Duration) {
    let started = Instant::now();
    while proxy.proxy.map_version() < version {
        assert!(
            started.elapsed() < limit,
            "the proxy routes by version {} after {limit:?}, not {version}",
            proxy.proxy.map_version()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The summed view of every task's `Seen`.
pub struct Totals {
    pub acked: u64,
    pub errors: Vec<String>,
    pub longest_moved: Duration,
    pub longest_other: Duration,
    pub empty_reads: u64,
    pub orders: HashMap<u64, (u8, Option<i64>, Instant)>,
}

pub fn totals(seen: Vec<Seen>) -> Totals {
    let mut t = Totals {
        acked: 0,
        errors: Vec::new(),
        longest_moved: Duration::ZERO,
        longest_other: Duration::ZERO,
        empty_reads: 0,
        orders: HashMap::new(),
    };
    for s in seen {
        t.acked += s.acked;
        t.errors.extend(s.errors);
        t.longest_moved = t.longest_moved.max(s.longest_moved);
        t.longest_other = t.longest_other.max(s.longest_other);
        t.empty_reads += s.empty_reads;
        t.orders.extend(s.orders);
    }
    t
}

/// Every acknowledged order of the moved channel is on dsN's moved tables with its
/// acknowledged amount; every one of the other channels is where the configuration puts
/// it (checked through the amounts on ds0/ds1's own tables). The number of moved-channel
/// orders checked.
pub async fn check_acknowledged(t: &Totals, home: usize) -> usize {
    let moved = orders_on(home, "").await;
    let mut checked = 0;
    for (id, (code, amount, _)) in &t.orders {
        if *code != BIZ {
            continue;
        }
        checked += 1;
        let found = moved.get(id);
        assert!(
            found.is_some(),
            "acknowledged order {id} is not on ds{home}"
        );
        if let Some(a) = amount {
            assert_eq!(found, Some(a), "order {id}: amount on ds{home}");
        }
    }
    checked
}
