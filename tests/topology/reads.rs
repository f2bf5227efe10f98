//! Reads on replicas: read your writes (and tokens), lag, a killed and a stalled replica,
//! what stays on the primary.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::common::{self, Harness, fresh_new_id, insert_order_sql};
use mysql_async::prelude::*;
use routekey_proxy::config::DatasourceId;

use crate::fixture::*;

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
