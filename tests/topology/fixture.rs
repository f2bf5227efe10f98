//! The replication sandbox of these tests, their configuration and the clients' loops.

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::common::{self, Harness, fresh_new_id, insert_order_sql};
use mysql_async::prelude::*;
use mysql_async::{Conn, Opts, OptsBuilder};
use routekey_proxy::config::{Config, Consistency, DatasourceId, Reads, User};

/// BIZ_CHANNEL's shards (12-15) all lie on ds1: its orders are written on ds1's primary.
pub const BIZ: u8 = 3;
pub const PROBE: Duration = Duration::from_millis(500);

pub static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub fn dir() -> String {
    std::env::var("ROUTEKEY_TOPOLOGY_SANDBOX_DIR")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/.sandbox-topology").to_owned())
}

pub fn port(ds: usize) -> u16 {
    std::env::var(format!("ROUTEKEY_TOPOLOGY_DS{ds}_PORT"))
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(33261 + ds as u16)
}

/// Port of dsN's primary (`replica` false) or its replica as the sandbox started them.
pub fn member_port(ds: usize, replica: bool) -> u16 {
    port(ds) + if replica { 10 } else { 0 }
}

/// Runs `scripts/sandbox.sh` on this sandbox; its stdout, or a panic with its stderr.
pub async fn sandbox(args: &[&str]) -> String {
    let mut cmd =
        tokio::process::Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/sandbox.sh"));
    cmd.args(args)
        .env("ROUTEKEY_SANDBOX_DIR", dir())
        .env("ROUTEKEY_DS0_PORT", port(0).to_string())
        .env("ROUTEKEY_DS1_PORT", port(1).to_string())
        .kill_on_drop(true);
    let out = cmd.output().await.expect("scripts/sandbox.sh runs");
    assert!(
        out.status.success(),
        "scripts/sandbox.sh {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The canonical topology: each dsN its primary, one replica of it, everything seeded.
pub async fn canonical() -> tokio::sync::MutexGuard<'static, ()> {
    let guard = LOCK.lock().await;
    sandbox(&["up", "--replicas", "1"]).await;
    guard
}

/// A root connection straight to a server.
pub async fn server(port: u16) -> Conn {
    let opts: Opts = OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some("root"))
        .prefer_socket(false)
        .into();
    Conn::new(opts)
        .await
        .unwrap_or_else(|e| panic!("server on {port}: {e}"))
}

/// The demo configuration with both datasources as clusters of this sandbox (primary
/// first), reached as `routekey_rw` (an account `read_only` stops), probed every 500 ms;
/// users `app` (reads on the primary), `app_ro` (reads on replicas, causal) and `app_ev`
/// (reads on replicas, eventual).
pub fn cluster_config() -> Config {
    let mut config = common::config();
    for (i, ds) in config.datasources.iter_mut().enumerate() {
        ds.members = vec![
            format!("127.0.0.1:{}", member_port(i, false)),
            format!("127.0.0.1:{}", member_port(i, true)),
        ];
        ds.address = ds.members[0].clone();
        ds.cluster = true;
        ds.user = "routekey_rw".into();
        ds.password = "routekey-secret".into();
    }
    config.topology.probe_interval = PROBE;
    config.topology.probe_timeout = PROBE;
    for (name, consistency) in [
        ("app_ro", Consistency::Session),
        ("app_ev", Consistency::Eventual),
    ] {
        let mut user = User::new(name, "app");
        user.reads = Reads::Replica;
        user.consistency = consistency;
        config.users.push(user);
    }
    config
}

pub async fn client(h: &Harness, user: &str) -> Conn {
    let opts = OptsBuilder::from_opts(h.opts())
        .user(Some(user))
        .pass(Some("app"));
    Conn::new(opts).await.unwrap()
}

/// Waits until every member of both datasources was probed and ds1's replica serves reads.
pub async fn settled(h: &Harness) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let rt = h.proxy.runtime();
        let ready = (0..2).all(|d| {
            let view = rt.topology.cluster(DatasourceId(d)).unwrap().view();
            view.members[1].readable
                && rt.topology.cluster(DatasourceId(d)).unwrap().primary_now() == Some(0)
        });
        if ready {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the clusters did not settle: {:?}",
            rt.topology.cluster(DatasourceId(1)).unwrap().view()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// ds1's counters: (primary reads, replica reads, reads by its replica member).
pub fn ds1_reads(h: &Harness) -> (u64, u64, u64) {
    let rt = h.proxy.runtime();
    let c = rt.topology.cluster(DatasourceId(1)).unwrap();
    (
        c.counters.primary_reads.load(Ordering::Relaxed),
        c.counters.replica_reads.load(Ordering::Relaxed),
        c.members[1].reads.load(Ordering::Relaxed),
    )
}

/// Holds a read lock on ds1's replica tables in bursts (`burst` every `every`) until
/// `stop`: its SQL thread falls behind meanwhile while it stays in rotation.
pub fn slow_replica(
    stop: Arc<AtomicBool>,
    burst: Duration,
    every: Duration,
) -> tokio::task::JoinHandle<u64> {
    tokio::spawn(async move {
        let mut conn = server(member_port(1, true)).await;
        let mut bursts = 0;
        while !stop.load(Ordering::Relaxed) {
            conn.query_drop("FLUSH TABLES WITH READ LOCK")
                .await
                .unwrap();
            tokio::time::sleep(burst).await;
            conn.query_drop("UNLOCK TABLES").await.unwrap();
            bursts += 1;
            tokio::time::sleep(every.saturating_sub(burst)).await;
        }
        bursts
    })
}

/// `clients` sessions of `user` each run `pairs` inserts of a BIZ order and a read of it
/// (the read on another statement of the same session); returns the reads that missed.
pub async fn insert_then_read(h: &Harness, user: &str, clients: usize, pairs: usize) -> u64 {
    let misses = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let mut c = client(h, user).await;
        let misses = misses.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..pairs {
                let id = fresh_new_id(BIZ);
                c.query_drop(insert_order_sql(id, "BIZ_CHANNEL", "ryw"))
                    .await
                    .unwrap();
                let got: Option<u64> = c
                    .query_first(format!(
                        "SELECT order_id FROM t_order WHERE order_id = {id}"
                    ))
                    .await
                    .unwrap();
                if got != Some(id) {
                    misses.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    misses.load(Ordering::Relaxed)
}

/// A reader's task: reads that succeeded, failed, and the errors.
pub type Reader = tokio::task::JoinHandle<(u64, u64, Vec<String>)>;

/// Reads of seeded BIZ orders by `clients` sessions of `user` until `stop`; counts errors.
pub fn readers(
    h: &Harness,
    user: &'static str,
    clients: usize,
    stop: Arc<AtomicBool>,
) -> Vec<Reader> {
    let ids: Vec<u64> = common::seed().channels["BIZ_CHANNEL"]
        .new_format_ids
        .clone();
    (0..clients)
        .map(|i| {
            let opts = OptsBuilder::from_opts(h.opts())
                .user(Some(user))
                .pass(Some("app"));
            let stop = stop.clone();
            let ids = ids.clone();
            tokio::spawn(async move {
                let mut c = Conn::new(opts).await.unwrap();
                let (mut ok, mut failed, mut errors) = (0, 0, Vec::new());
                let mut k = i;
                while !stop.load(Ordering::Relaxed) {
                    let id = ids[k % ids.len()];
                    k += 7;
                    match c
                        .query_first::<u64, _>(format!(
                            "SELECT order_id FROM t_order WHERE order_id = {id}"
                        ))
                        .await
                    {
                        Ok(Some(_)) => ok += 1,
                        Ok(None) => {
                            failed += 1;
                            errors.push(format!("order {id} not found"));
                        }
                        Err(e) => {
                            failed += 1;
                            errors.push(e.to_string());
                            c = Conn::new(c.opts().clone()).await.unwrap();
                        }
                    }
                }
                (ok, failed, errors)
            })
        })
        .collect()
}

pub async fn finish(tasks: Vec<Reader>) -> (u64, u64, Vec<String>) {
    let mut total = (0, 0, Vec::new());
    for t in tasks {
        let (ok, failed, errors) = t.await.unwrap();
        total.0 += ok;
        total.1 += failed;
        total.2.extend(errors);
    }
    total
}

pub async fn replica_reads_between(h: &Harness, wait: Duration) -> u64 {
    let before = ds1_reads(h).2;
    tokio::time::sleep(wait).await;
    ds1_reads(h).2 - before
}

/// A writer's task: its acknowledged ids (with when) and its errors (with when).
pub type Writer = tokio::task::JoinHandle<(Vec<(u64, Instant)>, Vec<(Instant, String)>)>;

/// Writers of BIZ orders through `user` until `stop`: (acknowledged ids, errors with the
/// time they happened).
pub fn writers(h: &Harness, clients: usize, stop: Arc<AtomicBool>) -> Vec<Writer> {
    (0..clients)
        .map(|_| {
            let opts = h.opts();
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut c = Conn::new(opts.clone()).await.unwrap();
                let (mut acked, mut errors) = (Vec::new(), Vec::new());
                while !stop.load(Ordering::Relaxed) {
                    let id = fresh_new_id(BIZ);
                    match c
                        .query_drop(insert_order_sql(id, "BIZ_CHANNEL", "failover"))
                        .await
                    {
                        Ok(()) => acked.push((id, Instant::now())),
                        Err(e) => {
                            errors.push((Instant::now(), e.to_string()));
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            if let Ok(fresh) = Conn::new(opts.clone()).await {
                                c = fresh;
                            }
                        }
                    }
                }
                (acked, errors)
            })
        })
        .collect()
}

pub async fn written(tasks: Vec<Writer>) -> (Vec<(u64, Instant)>, Vec<(Instant, String)>) {
    let (mut acked, mut errors) = (Vec::new(), Vec::new());
    for t in tasks {
        let (a, e) = t.await.unwrap();
        acked.extend(a);
        errors.extend(e);
    }
    (acked, errors)
}

/// How many of `ids` the BIZ shards of the server on `port` hold.
pub async fn present(port: u16, ids: &[u64]) -> usize {
    let mut conn = server(port).await;
    let mut found = 0;
    for chunk in ids.chunks(500) {
        let list = chunk
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let union = (12..16)
            .map(|s| {
                format!(
                    "SELECT COUNT(*) AS n FROM order_shards.t_order_{s} WHERE order_id IN ({list})"
                )
            })
            .collect::<Vec<_>>()
            .join(" UNION ALL ");
        let counts: Vec<u64> = conn.query(union).await.unwrap();
        found += counts.iter().sum::<u64>() as usize;
    }
    found
}

/// Statements ds1's primary (reads and primary accesses) and its replica (reads) served
/// during `f`.
pub async fn served_by<F: std::future::Future<Output = ()>>(h: &Harness, f: F) -> (u64, u64) {
    let rt = h.proxy.runtime();
    let c = rt.topology.cluster(DatasourceId(1)).unwrap();
    let primary =
        || c.members[0].reads.load(Ordering::Relaxed) + c.members[0].writes.load(Ordering::Relaxed);
    let (p0, r0) = (primary(), c.members[1].reads.load(Ordering::Relaxed));
    f.await;
    (
        primary() - p0,
        c.members[1].reads.load(Ordering::Relaxed) - r0,
    )
}
