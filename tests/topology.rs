//! Datasources that are replication clusters (issue 26), against real MariaDB replication:
//! a sandbox of its own (`scripts/sandbox.sh up --replicas 1` in
//! `ROUTEKEY_TOPOLOGY_SANDBOX_DIR`, default `.sandbox-topology`, ports
//! `ROUTEKEY_TOPOLOGY_DS0_PORT`/`DS1_PORT`, default 33261/33262, replicas on +10) where each
//! datasource is a semi-synchronous primary and one replica. The tests kill, stop, slow
//! and promote its servers, so they run one at a time (a lock), each from the canonical
//! topology (`up` again). `scripts/test.sh` takes that sandbox down afterwards.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{Harness, fresh_new_id, insert_order_sql};
use mysql_async::prelude::*;
use mysql_async::{Conn, Opts, OptsBuilder};
use routekey_proxy::config::{Config, Consistency, DatasourceId, Reads, User};

/// BIZ_CHANNEL's shards (12-15) all lie on ds1: its orders are written on ds1's primary.
const BIZ: u8 = 3;
const PROBE: Duration = Duration::from_millis(500);

static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn dir() -> String {
    std::env::var("ROUTEKEY_TOPOLOGY_SANDBOX_DIR")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/.sandbox-topology").to_owned())
}

fn port(ds: usize) -> u16 {
    std::env::var(format!("ROUTEKEY_TOPOLOGY_DS{ds}_PORT"))
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(33261 + ds as u16)
}

/// Port of dsN's primary (`replica` false) or its replica as the sandbox started them.
fn member_port(ds: usize, replica: bool) -> u16 {
    port(ds) + if replica { 10 } else { 0 }
}

/// Runs `scripts/sandbox.sh` on this sandbox; its stdout, or a panic with its stderr.
async fn sandbox(args: &[&str]) -> String {
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
async fn canonical() -> tokio::sync::MutexGuard<'static, ()> {
    let guard = LOCK.lock().await;
    sandbox(&["up", "--replicas", "1"]).await;
    guard
}

/// A root connection straight to a server.
async fn server(port: u16) -> Conn {
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
fn cluster_config() -> Config {
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

async fn client(h: &Harness, user: &str) -> Conn {
    let opts = OptsBuilder::from_opts(h.opts())
        .user(Some(user))
        .pass(Some("app"));
    Conn::new(opts).await.unwrap()
}

/// Waits until every member of both datasources was probed and ds1's replica serves reads.
async fn settled(h: &Harness) {
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
fn ds1_reads(h: &Harness) -> (u64, u64, u64) {
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
fn slow_replica(
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
async fn insert_then_read(h: &Harness, user: &str, clients: usize, pairs: usize) -> u64 {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reads_see_the_sessions_own_writes_on_a_slowed_replica() {
    let _guard = canonical().await;
    let h = Harness::start_with(cluster_config()).await;
    settled(&h).await;
    let stop = Arc::new(AtomicBool::new(false));
    let slow = slow_replica(
        stop.clone(),
        Duration::from_millis(40),
        Duration::from_millis(400),
    );

    let before = ds1_reads(&h);
    let started = Instant::now();
    let misses = insert_then_read(&h, "app_ro", 16, 1250).await;
    let took = started.elapsed();
    let after = ds1_reads(&h);
    let (primary, replica) = (after.0 - before.0, after.1 - before.1);
    let rt = h.proxy.runtime();
    let counters = &rt.topology.cluster(DatasourceId(1)).unwrap().counters;
    eprintln!(
        "session consistency: 20000 pairs in {took:?}, {misses} misses, reads primary {primary} replica {replica}, causal waits caught up {} timed out {}",
        counters.causal_caught_up.load(Ordering::Relaxed),
        counters.causal_timed_out.load(Ordering::Relaxed)
    );
    assert_eq!(misses, 0, "a read missed the session's own write");
    assert!(primary + replica >= 20_000);
    assert!(
        replica * 10 >= (primary + replica) * 7,
        "replicas served {replica} of {} reads (under 70%)",
        primary + replica
    );

    // The same with consistency = "eventual": reads on the replica right after the write
    // miss it (the test shows the check is what prevents it).
    let misses = insert_then_read(&h, "app_ev", 16, 200).await;
    eprintln!("eventual consistency: 3200 pairs, {misses} misses");
    assert!(
        misses > 0,
        "eventual reads never missed: the replica was not behind"
    );

    // The token across two connections: one writes, the other reads with /*after=...*/.
    let mut writer = client(&h, "app").await;
    let mut reader = client(&h, "app_ro").await;
    let mut token_misses = 0;
    for _ in 0..500 {
        let id = fresh_new_id(BIZ);
        writer
            .query_drop(insert_order_sql(id, "BIZ_CHANNEL", "token"))
            .await
            .unwrap();
        let token: String = writer
            .query_first("SELECT ROUTEKEY_WRITE_TOKEN()")
            .await
            .unwrap()
            .unwrap();
        assert!(token.starts_with("ds1:"), "token {token}");
        let got: Option<u64> = reader
            .query_first(format!(
                "SELECT /*after='{token}'*/ order_id FROM t_order WHERE order_id = {id}"
            ))
            .await
            .unwrap();
        if got != Some(id) {
            token_misses += 1;
        }
    }
    eprintln!("token across connections: 500 pairs, {token_misses} misses");
    assert_eq!(token_misses, 0);
    stop.store(true, Ordering::Relaxed);
    let bursts = slow.await.unwrap();
    assert!(bursts > 3, "the replica was slowed {bursts} times");
    h.stop().await;
}

/// A reader's task: reads that succeeded, failed, and the errors.
type Reader = tokio::task::JoinHandle<(u64, u64, Vec<String>)>;

/// Reads of seeded BIZ orders by `clients` sessions of `user` until `stop`; counts errors.
fn readers(h: &Harness, user: &'static str, clients: usize, stop: Arc<AtomicBool>) -> Vec<Reader> {
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

async fn finish(tasks: Vec<Reader>) -> (u64, u64, Vec<String>) {
    let mut total = (0, 0, Vec::new());
    for t in tasks {
        let (ok, failed, errors) = t.await.unwrap();
        total.0 += ok;
        total.1 += failed;
        total.2.extend(errors);
    }
    total
}

async fn replica_reads_between(h: &Harness, wait: Duration) -> u64 {
    let before = ds1_reads(h).2;
    tokio::time::sleep(wait).await;
    ds1_reads(h).2 - before
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lagging_replica_gets_no_reads_until_it_catches_up() {
    let _guard = canonical().await;
    let h = Harness::start_with(cluster_config()).await;
    settled(&h).await;
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = readers(&h, "app_ro", 8, stop.clone());
    assert!(
        replica_reads_between(&h, Duration::from_secs(1)).await > 0,
        "the replica serves reads"
    );
    let mut replica = server(member_port(1, true)).await;
    replica.query_drop("STOP SLAVE SQL_THREAD").await.unwrap();
    let stopped = Instant::now();
    // Within probe_interval + 1 s no read goes to it any more.
    tokio::time::sleep(PROBE + Duration::from_secs(1)).await;
    let during = replica_reads_between(&h, Duration::from_secs(2)).await;
    assert_eq!(
        during, 0,
        "{during} reads went to a replica whose SQL thread is stopped"
    );
    let view = h
        .proxy
        .runtime()
        .topology
        .cluster(DatasourceId(1))
        .unwrap()
        .view();
    assert_eq!(
        view.members[1].lag, None,
        "a stopped SQL thread is not 0 lag"
    );
    replica.query_drop("START SLAVE SQL_THREAD").await.unwrap();
    // Back after two good probes in a row.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if replica_reads_between(&h, Duration::from_millis(300)).await > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the replica did not return to rotation"
        );
    }
    eprintln!(
        "lag: out of rotation within {:?}, back after start",
        stopped.elapsed()
    );
    stop.store(true, Ordering::Relaxed);
    let (ok, failed, errors) = finish(tasks).await;
    assert_eq!(failed, 0, "{errors:?}");
    assert!(ok > 100);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_replica_fails_no_read() {
    let _guard = canonical().await;
    let h = Harness::start_with(cluster_config()).await;
    settled(&h).await;
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = readers(&h, "app_ro", 16, stop.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let pid = sandbox(&["pid", "ds1r1"]).await;
    let killed = std::process::Command::new("kill")
        .args(["-9", pid.trim()])
        .status()
        .unwrap();
    assert!(killed.success());
    tokio::time::sleep(Duration::from_secs(3)).await;
    let during = replica_reads_between(&h, Duration::from_secs(1)).await;
    assert_eq!(during, 0, "reads went to a killed replica");
    sandbox(&["start", "ds1r1"]).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if replica_reads_between(&h, Duration::from_millis(300)).await > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the restarted replica did not return to rotation"
        );
    }
    stop.store(true, Ordering::Relaxed);
    let (ok, failed, errors) = finish(tasks).await;
    eprintln!("replica killed: {ok} reads, {failed} failed");
    assert_eq!(
        failed, 0,
        "reads failed when a replica was killed: {errors:?}"
    );
    h.stop().await;
}

/// A writer's task: its acknowledged ids (with when) and its errors (with when).
type Writer = tokio::task::JoinHandle<(Vec<(u64, Instant)>, Vec<(Instant, String)>)>;

/// Writers of BIZ orders through `user` until `stop`: (acknowledged ids, errors with the
/// time they happened).
fn writers(h: &Harness, clients: usize, stop: Arc<AtomicBool>) -> Vec<Writer> {
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

async fn written(tasks: Vec<Writer>) -> (Vec<(u64, Instant)>, Vec<(Instant, String)>) {
    let (mut acked, mut errors) = (Vec::new(), Vec::new());
    for t in tasks {
        let (a, e) = t.await.unwrap();
        acked.extend(a);
        errors.extend(e);
    }
    (acked, errors)
}

/// How many of `ids` the BIZ shards of the server on `port` hold.
async fn present(port: u16, ids: &[u64]) -> usize {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failover_keeps_every_acknowledged_write() {
    let _guard = canonical().await;
    let h = Harness::start_with(cluster_config()).await;
    settled(&h).await;
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = writers(&h, 16, stop.clone());
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let pid = sandbox(&["pid", "ds1"]).await;
    let killed_at = Instant::now();
    assert!(
        std::process::Command::new("kill")
            .args(["-9", pid.trim()])
            .status()
            .unwrap()
            .success()
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    sandbox(&["promote", "ds1r1"]).await;
    let promoted_at = Instant::now();
    let wait = h.proxy.runtime().config.topology.failover_wait;
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::Relaxed);
    let (acked, errors) = written(tasks).await;
    let first_after = acked
        .iter()
        .filter(|(_, t)| *t > promoted_at)
        .map(|(_, t)| *t)
        .min()
        .expect("writes resumed after the promotion");
    let resumed = first_after.duration_since(promoted_at);
    let ids: Vec<u64> = acked.iter().map(|(id, _)| *id).collect();
    let on_new_primary = present(member_port(1, true), &ids).await;
    eprintln!(
        "failover: {} writes acknowledged, {} errors ({:?}), killed at +0, promoted at +{:?}, writes resumed {:?} after the promotion, {on_new_primary} acknowledged rows on the new primary",
        ids.len(),
        errors.len(),
        errors.iter().map(|(_, e)| e.as_str()).collect::<Vec<_>>(),
        promoted_at.duration_since(killed_at),
        resumed
    );
    assert!(
        resumed <= wait + PROBE,
        "writes resumed {resumed:?} after the promotion"
    );
    assert_eq!(
        on_new_primary,
        ids.len(),
        "an acknowledged write is missing on the new primary"
    );
    // Errors only for the statements in flight when the primary died: at most one per writer.
    assert!(errors.len() <= 16, "{} errors: {errors:?}", errors.len());
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn switchover_loses_no_write() {
    let _guard = canonical().await;
    let h = Harness::start_with(cluster_config()).await;
    settled(&h).await;
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = writers(&h, 16, stop.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;
    sandbox(&["promote", "ds1r1"]).await;
    let promoted_at = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::Relaxed);
    let (acked, errors) = written(tasks).await;
    let after = acked.iter().filter(|(_, t)| *t > promoted_at).count();
    let ids: Vec<u64> = acked.iter().map(|(id, _)| *id).collect();
    let on_new_primary = present(member_port(1, true), &ids).await;
    let retried = h
        .proxy
        .runtime()
        .topology
        .cluster(DatasourceId(1))
        .unwrap()
        .counters
        .writes_retried
        .load(Ordering::Relaxed);
    eprintln!(
        "switchover: {} writes, {after} after the promotion, {} errors, {retried} retried, {on_new_primary} on the new primary",
        ids.len(),
        errors.len()
    );
    assert!(
        errors.is_empty(),
        "writes failed during a switchover: {errors:?}"
    );
    assert!(after > 0);
    assert_eq!(on_new_primary, ids.len());
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn split_brain_refuses_writes_and_keeps_reads() {
    let _guard = canonical().await;
    let h = Harness::start_with(cluster_config()).await;
    settled(&h).await;
    let mut c = h.client().await;
    let mut replica = server(member_port(1, true)).await;
    replica
        .query_drop("SET GLOBAL read_only = 0")
        .await
        .unwrap();
    tokio::time::sleep(PROBE * 3).await;
    let id = fresh_new_id(BIZ);
    let refused = c
        .query_drop(insert_order_sql(id, "BIZ_CHANNEL", "split"))
        .await;
    let (code, _, message) = common::server_error(refused);
    assert_eq!(code, 1290);
    assert!(
        message.contains("split brain")
            && message.contains(&format!("127.0.0.1:{}", member_port(1, true))),
        "{message}"
    );
    let seeded = common::seed().channels["BIZ_CHANNEL"].new_format_ids[0];
    let got: Option<u64> = c
        .query_first(format!(
            "SELECT order_id FROM t_order WHERE order_id = {seeded}"
        ))
        .await
        .unwrap();
    assert_eq!(got, Some(seeded), "reads go on during a split brain");
    // Writes to the other datasource are not affected.
    c.query_drop(insert_order_sql(
        fresh_new_id(5),
        "EU_CHANNEL",
        "split-other",
    ))
    .await
    .unwrap();
    let metrics = h.metrics_text().await;
    assert!(
        metrics.contains("routekey_split_brain{datasource=\"ds1\"} 1"),
        "{metrics}"
    );
    let topology: Vec<(String, String, String)> = c
        .query_map("SHOW ROUTEKEY TOPOLOGY", |row: mysql_async::Row| {
            (
                row.get::<String, _>(0).unwrap(),
                row.get::<String, _>(1).unwrap(),
                row.get::<String, _>(2).unwrap(),
            )
        })
        .await
        .unwrap();
    assert_eq!(
        topology
            .iter()
            .filter(|(ds, _, role)| ds == "ds1" && role == "writable")
            .count(),
        2,
        "{topology:?}"
    );
    replica
        .query_drop("SET GLOBAL read_only = 1")
        .await
        .unwrap();
    tokio::time::sleep(PROBE * 3).await;
    c.query_drop(insert_order_sql(id, "BIZ_CHANNEL", "split"))
        .await
        .unwrap();
    let metrics = h.metrics_text().await;
    assert!(metrics.contains("routekey_split_brain{datasource=\"ds1\"} 0"));
    // Every member metric the dashboard and docs/operations.md use is exported (a sample
    // of each; the lag is a replica's, so after the split brain).
    for name in [
        "routekey_member_up{",
        "routekey_member_role{",
        "routekey_member_lag_seconds{",
        "routekey_split_brain{",
        "routekey_reads_total{",
        "routekey_causal_waits_total{",
        "routekey_write_retries_total{",
    ] {
        assert!(
            metrics.lines().any(|l| l.starts_with(name)),
            "{name} is not exported"
        );
    }
    h.stop().await;
}

/// Statements ds1's primary (reads and primary accesses) and its replica (reads) served
/// during `f`.
async fn served_by<F: std::future::Future<Output = ()>>(h: &Harness, f: F) -> (u64, u64) {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn what_stays_on_the_primary_and_what_a_replica_reads() {
    let _guard = canonical().await;
    let h = Harness::start_with(cluster_config()).await;
    settled(&h).await;
    let seeded = common::seed().channels["BIZ_CHANNEL"].new_format_ids[3];
    let read = format!("SELECT order_id FROM t_order WHERE order_id = {seeded}");
    let mut ro = client(&h, "app_ro").await;
    let mut app = client(&h, "app").await;

    // A plain read of app_ro: the replica; of app: the primary; hints override both.
    assert_eq!(
        served_by(&h, async { ro.query_drop(&read).await.unwrap() }).await,
        (0, 1)
    );
    assert_eq!(
        served_by(&h, async { app.query_drop(&read).await.unwrap() }).await,
        (1, 0)
    );
    let hinted =
        format!("SELECT /*read='primary'*/ order_id FROM t_order WHERE order_id = {seeded}");
    assert_eq!(
        served_by(&h, async { ro.query_drop(&hinted).await.unwrap() }).await,
        (1, 0)
    );
    let hinted =
        format!("SELECT /*read='replica'*/ order_id FROM t_order WHERE order_id = {seeded}");
    assert_eq!(
        served_by(&h, async { app.query_drop(&hinted).await.unwrap() }).await,
        (0, 1)
    );

    // Locking reads and user variables assigned: the primary (the assignment pins its
    // session's connections, so a session of its own).
    let sql = format!("{read} FOR UPDATE");
    let (p, r) = served_by(&h, async { ro.query_drop(&sql).await.unwrap() }).await;
    assert_eq!((p > 0, r), (true, 0), "{sql}");
    let mut pinned = client(&h, "app_ro").await;
    let (p, r) = served_by(&h, async {
        pinned
            .query_drop(format!(
                "SELECT @x := order_id FROM t_order WHERE order_id = {seeded}"
            ))
            .await
            .unwrap();
        pinned.query_drop(&read).await.unwrap();
    })
    .await;
    assert_eq!((p, r), (2, 0), "a pinned session reads on the primary");
    // A read-write transaction: every statement on the primary.
    let (p, r) = served_by(&h, async {
        ro.query_drop("BEGIN").await.unwrap();
        ro.query_drop(&read).await.unwrap();
        ro.query_drop(&read).await.unwrap();
        ro.query_drop("COMMIT").await.unwrap();
    })
    .await;
    assert_eq!(
        (p > 0, r),
        (true, 0),
        "a transaction's reads stay on the primary"
    );
    // A read-only transaction: one replica for its whole life.
    let (p, r) = served_by(&h, async {
        ro.query_drop("START TRANSACTION READ ONLY").await.unwrap();
        ro.query_drop(&read).await.unwrap();
        ro.query_drop(&read).await.unwrap();
        ro.query_drop("COMMIT").await.unwrap();
    })
    .await;
    assert_eq!((p, r), (0, 2), "a READ ONLY transaction reads on a replica");
    // autocommit off: a transaction with every statement: the primary.
    let (p, r) = served_by(&h, async {
        ro.query_drop("SET autocommit = 0").await.unwrap();
        ro.query_drop(&read).await.unwrap();
        ro.query_drop("COMMIT").await.unwrap();
        ro.query_drop("SET autocommit = 1").await.unwrap();
    })
    .await;
    assert_eq!((p > 0, r), (true, 0));

    // Prepared statements execute on whichever member the read goes to.
    let stmt = ro
        .prep("SELECT order_id, note FROM t_order WHERE order_id = ?")
        .await
        .unwrap();
    let (p, r) = served_by(&h, async {
        for _ in 0..3 {
            let got: Option<(u64, Option<String>)> = ro.exec_first(&stmt, (seeded,)).await.unwrap();
            assert_eq!(got.map(|g| g.0), Some(seeded));
        }
    })
    .await;
    assert_eq!((p, r), (0, 3), "prepared executes on the replica");
    // A prepared read right after the session's write sees it.
    let id = fresh_new_id(BIZ);
    ro.query_drop(insert_order_sql(id, "BIZ_CHANNEL", "prepared"))
        .await
        .unwrap();
    let got: Option<(u64, Option<String>)> = ro.exec_first(&stmt, (id,)).await.unwrap();
    assert_eq!(got.map(|g| g.0), Some(id));

    // EXPLAIN ROUTE names the member.
    let member: Option<String> = ro
        .query_first::<mysql_async::Row, _>(format!("EXPLAIN ROUTE {read}"))
        .await
        .unwrap()
        .and_then(|row| row.get(8));
    assert_eq!(
        member.as_deref(),
        Some(format!("127.0.0.1:{} (replica)", member_port(1, true)).as_str())
    );
    let member: Option<String> = app
        .query_first::<mysql_async::Row, _>(format!("EXPLAIN ROUTE {read}"))
        .await
        .unwrap()
        .and_then(|row| row.get(8));
    assert_eq!(
        member.as_deref(),
        Some(format!("127.0.0.1:{} (primary)", member_port(1, false)).as_str())
    );

    // A bad token is an error naming it, not a silent read.
    let bad = ro
        .query_drop(format!(
            "SELECT /*after='ds9:0-1-1'*/ order_id FROM t_order WHERE order_id = {seeded}"
        ))
        .await;
    let (code, _, message) = common::server_error(bad);
    assert_eq!(code, 1210, "{message}");
    // SHOW ROUTEKEY TOPOLOGY: a row per member, roles from the probes.
    let rows: Vec<(String, String, String, String)> = ro
        .query_map("SHOW ROUTEKEY TOPOLOGY", |row: mysql_async::Row| {
            (
                row.get(0).unwrap(),
                row.get(1).unwrap(),
                row.get(2).unwrap(),
                row.get(3).unwrap(),
            )
        })
        .await
        .unwrap();
    assert_eq!(rows.len(), 4, "{rows:?}");
    assert_eq!(
        rows[2],
        (
            "ds1".into(),
            format!("127.0.0.1:{}", member_port(1, false)),
            "primary".into(),
            "serving_writes".into()
        )
    );
    assert_eq!(
        rows[3],
        (
            "ds1".into(),
            format!("127.0.0.1:{}", member_port(1, true)),
            "replica".into(),
            "serving_reads".into()
        )
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_in_stored_functions_stalled_replicas_and_no_primary() {
    let _guard = canonical().await;
    let mut config = cluster_config();
    config.topology.failover_wait = Duration::from_secs(2);
    let h = Harness::start_with(config).await;
    settled(&h).await;
    let mut primary0 = server(member_port(0, false)).await;
    let mut replica0 = server(member_port(0, true)).await;
    for server in [&mut primary0, &mut replica0] {
        server
            .query_drop("SET GLOBAL log_bin_trust_function_creators = 1")
            .await
            .unwrap();
    }
    primary0
        .query_drop(
            "CREATE OR REPLACE FUNCTION orders.add_merchant(m INT UNSIGNED) RETURNS INT MODIFIES SQL DATA \
             BEGIN INSERT INTO orders.t_merchant (merchant_id, name, country, created_at) VALUES (m, 'fn', 'GB', NOW()); RETURN 1; END",
        )
        .await
        .unwrap();
    // ds0's replica 2 s behind (in rotation: under max_replica_lag), once it has the
    // function.
    let pos: String = primary0
        .query_first("SELECT @@gtid_binlog_pos")
        .await
        .unwrap()
        .unwrap();
    let waited: Option<i64> = replica0
        .query_first(format!("SELECT MASTER_GTID_WAIT('{pos}', 10)"))
        .await
        .unwrap();
    assert_eq!(waited, Some(0));
    replica0
        .query_drop("STOP SLAVE; CHANGE MASTER TO MASTER_DELAY = 2; START SLAVE")
        .await
        .unwrap();
    tokio::time::sleep(PROBE * 4).await;

    // A SELECT calling a stored function that writes: refused by the replica, run on the
    // primary, and its write seen by the session's next read.
    let mut ro = client(&h, "app_ro").await;
    for m in 0..5u32 {
        let id = 4_000_000 + std::process::id() % 100_000 * 10 + m;
        let one: Option<i64> = ro
            .query_first(format!("SELECT orders.add_merchant({id})"))
            .await
            .unwrap();
        assert_eq!(one, Some(1));
        let got: Option<u32> = ro
            .query_first(format!(
                "SELECT merchant_id FROM t_merchant WHERE merchant_id = {id}"
            ))
            .await
            .unwrap();
        assert_eq!(
            got,
            Some(id),
            "the session's write by a stored function was missed"
        );
        primary0
            .query_drop(format!(
                "DELETE FROM orders.t_merchant WHERE merchant_id = {id}"
            ))
            .await
            .unwrap();
    }
    let token: String = ro
        .query_first("SELECT ROUTEKEY_WRITE_TOKEN()")
        .await
        .unwrap()
        .unwrap();
    assert!(token.starts_with("ds0:"), "{token}");
    // A server's own variables are the primary's.
    let read_only: Option<i64> = ro.query_first("SELECT @@read_only").await.unwrap();
    assert_eq!(read_only, Some(0));
    replica0
        .query_drop("STOP SLAVE; CHANGE MASTER TO MASTER_DELAY = 0; START SLAVE")
        .await
        .unwrap();

    // A replica stalled (SIGSTOP) under reads: the reads on it end once its probe fails,
    // and run again on the primary; none fails, none waits for the stall's end.
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = readers(&h, "app_ro", 8, stop.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let pid = sandbox(&["pid", "ds1r1"]).await;
    assert!(
        std::process::Command::new("kill")
            .args(["-STOP", pid.trim()])
            .status()
            .unwrap()
            .success()
    );
    let stalled = Instant::now();
    let mut c = client(&h, "app_ro").await;
    let seeded = common::seed().channels["BIZ_CHANNEL"].new_format_ids[1];
    tokio::time::sleep(Duration::from_secs(4)).await;
    let started = Instant::now();
    let _: Option<u64> = c
        .query_first(format!(
            "SELECT order_id FROM t_order WHERE order_id = {seeded}"
        ))
        .await
        .unwrap();
    let fresh_read = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let finished = tokio::time::timeout(Duration::from_secs(8), finish(tasks)).await;
    assert!(
        std::process::Command::new("kill")
            .args(["-CONT", pid.trim()])
            .status()
            .unwrap()
            .success()
    );
    let (ok, failed, errors) =
        finished.expect("reads held by a stalled replica past its probe's verdict");
    eprintln!(
        "stalled replica: {ok} reads, {failed} failed, a fresh read {fresh_read:?}, stall {:?}",
        stalled.elapsed()
    );
    assert_eq!(failed, 0, "{errors:?}");
    assert!(fresh_read < Duration::from_secs(1));

    // No writable member: a read waits failover_wait once, a write too; KILL QUERY ends
    // the wait at once.
    let mut p1 = server(member_port(1, false)).await;
    p1.query_drop("SET GLOBAL read_only = 1").await.unwrap();
    tokio::time::sleep(PROBE * 3).await;
    let mut app = client(&h, "app").await;
    let started = Instant::now();
    let code = common::error_code(
        &mut app,
        &format!("SELECT order_id FROM t_order WHERE order_id = {seeded}"),
    )
    .await;
    let waited = started.elapsed();
    assert_eq!(code, 1429);
    assert!(
        waited < Duration::from_millis(3500),
        "a read waited {waited:?} with failover_wait 2 s"
    );
    let id: u32 = app
        .query_first("SELECT CONNECTION_ID()")
        .await
        .unwrap()
        .unwrap();
    let mut killer = client(&h, "app").await;
    let write = tokio::spawn(async move {
        let started = Instant::now();
        let r = app
            .query_drop(insert_order_sql(fresh_new_id(BIZ), "BIZ_CHANNEL", "killed"))
            .await;
        (common::server_code(r), started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    killer.query_drop(format!("KILL QUERY {id}")).await.unwrap();
    let (code, took) = write.await.unwrap();
    p1.query_drop("SET GLOBAL read_only = 0").await.unwrap();
    assert_eq!(code, 1317);
    assert!(
        took < Duration::from_millis(1500),
        "KILL QUERY ended the wait after {took:?}"
    );
    h.stop().await;
}
