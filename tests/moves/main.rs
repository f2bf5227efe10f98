//! Shard moves (issue 28) against real MariaDB servers: the sandbox `.sandbox-move` (ds0
//! and ds1 seeded, ds2 an empty spare; `scripts/sandbox.sh up --spare`), proxies in-process,
//! `routekey-proxy shards move` as a process that the tests kill at named points. BIZ_CHANNEL's
//! shards 12-15 move from ds1 to ds2 while writers and readers keep going through three
//! proxies, one of which reads the shard map only every 30 s.
//!
//! Run alone: `cargo test --test moves -- --nocapture --test-threads=1` (the main sandbox must
//! be up too: the harness checks it).

#[path = "../common/mod.rs"]
mod common;
mod fixture;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::Harness;
use fixture::*;

const SECOND: Duration = Duration::from_secs(1);

/// The three proxies: two reading the shard map every second, one every 30 s.
async fn proxies() -> (Harness, Harness, Harness) {
    let a = Harness::start_with(config(SECOND)).await;
    let b = Harness::start_with(config(SECOND)).await;
    let c = Harness::start_with(config(30 * SECOND)).await;
    for p in [&a, &b, &c] {
        wait_version(p, 1, 10 * SECOND).await;
    }
    (a, b, c)
}

/// The checks every move ends with: no client error or empty read, every acknowledged
/// write of the moved channel at `home`, none inserted after `moved_at` on the source's
/// renamed tables `old_suffix` on `old` (no proxy, however late, wrote there), and every row
/// the source held when it was fenced on `home`. The moved-channel orders checked.
async fn check_after(
    t: &Totals,
    home: usize,
    old: usize,
    old_suffix: &str,
    moved_at: Instant,
) -> usize {
    assert!(t.errors.is_empty(), "client errors: {:#?}", t.errors);
    assert_eq!(
        t.empty_reads, 0,
        "reads of seeded orders that found nothing"
    );
    let checked = check_acknowledged(t, home).await;
    let source = orders_on(old, old_suffix).await;
    let late: Vec<u64> = t
        .orders
        .iter()
        .filter(|(_, (code, _, at))| *code == BIZ && *at > moved_at)
        .map(|(id, _)| *id)
        .collect();
    assert!(
        !late.is_empty(),
        "no write of the moved channel after the move"
    );
    for id in &late {
        assert!(
            !source.contains_key(id),
            "order {id}, acknowledged after the move, is in the source's renamed tables"
        );
    }
    let target = orders_on(home, "").await;
    for id in source.keys() {
        assert!(
            target.contains_key(id),
            "order {id} of the source is not on ds{home}"
        );
    }
    eprintln!(
        "checked: {} statements acknowledged, {checked} moved-channel orders on ds{home}, {} inserted after the move, {} source rows all on the target; longest statement {:?} on the moved channel, {:?} elsewhere",
        t.acked,
        late.len(),
        source.len(),
        t.longest_moved,
        t.longest_other
    );
    checked
}

fn fence_waits(p: &Harness) -> [u64; 4] {
    let f = &p.proxy.shard_map.fence_waits;
    [0, 1, 2, 3].map(|i| f[i].load(Ordering::Relaxed))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_move_under_load_loses_nothing_and_pauses_writes_briefly() {
    let _guard = fresh().await;
    within(Duration::from_secs(300), async {
        let (a, b, c) = proxies().await;
        let load = Load::start(&[&a, &b, &c], 16, 16, seeded_orders().await).await;
        tokio::time::sleep(2 * SECOND).await;
        let ran = shards_move(&["--to", "ds2"], None).await;
        assert_eq!(ran.code, Some(0), "the move failed");
        assert!(ran.stdout.contains("checksums equal"), "{}", ran.stdout);
        let moved_at = Instant::now();
        tokio::time::sleep(3 * SECOND).await;
        let t = totals(load.finish().await);
        check_after(&t, 2, 1, "__moved_1", moved_at).await;
        // The pause: --max-pause (2 s) + 1 s at most, for every client statement.
        assert!(
            t.longest_moved < 3 * SECOND,
            "a statement on the moved shards took {:?}",
            t.longest_moved
        );
        let (step, version, pause, rows) = move_row(1).await;
        assert_eq!((step.as_str(), version), ("switched", Some(2)));
        assert!(pause.is_some_and(|p| p < 2000), "pause {pause:?} ms");
        // Every proxy routes by version 2; the one that reads the map every 30 s learned it
        // from the fence.
        for p in [&a, &b, &c] {
            assert_eq!(p.proxy.map_version(), 2);
        }
        assert!(fence_waits(&c)[0] > 0, "the slow proxy never met the fence");
        assert!(a.metrics_text().await.contains("routekey_shard_map_version 2"));
        assert_eq!(tables_on(1, "").await, Vec::<String>::new(), "the source still has the moved tables under their names");
        assert_eq!(tables_on(1, "__moved_1").await.len(), 8);
        assert_eq!(tables_on(2, "").await.len(), 8);
        assert_eq!(replication_connections(2).await, 0);
        eprintln!(
            "move under load: {rows} rows copied, writes paused {pause:?} ms at the cut-over, fence waits (moved, not moving, undone, timed out): {:?} {:?} {:?}",
            fence_waits(&a),
            fence_waits(&b),
            fence_waits(&c)
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_move_killed_after_each_step_finishes_when_run_again() {
    let _guard = fresh().await;
    within(Duration::from_secs(300), async {
        let (a, _b, c) = proxies().await;
        let load = Load::start(&[&a, &c], 4, 4, seeded_orders().await).await;
        tokio::time::sleep(SECOND).await;
        let mut steps = Vec::new();
        for point in [
            "copied",
            "caught_up",
            "verified",
            "fenced",
            "placed",
            "published",
        ] {
            let ran = shards_move(&["--to", "ds2"], Some(point)).await;
            assert_eq!(ran.code, None, "the run was to be killed at {point}");
            steps.push((point, move_row(1).await.0));
        }
        eprintln!("killed at / step recorded: {steps:?}");
        assert_eq!(
            steps.iter().map(|s| s.1.as_str()).collect::<Vec<_>>(),
            [
                "catch_up", "verify", "cut_over", "fenced", "fenced", "fenced"
            ]
        );
        let ran = shards_move(&["--to", "ds2"], None).await;
        assert_eq!(ran.code, Some(0), "the last run failed");
        let moved_at = Instant::now();
        tokio::time::sleep(2 * SECOND).await;
        let t = totals(load.finish().await);
        check_after(&t, 2, 1, "__moved_1", moved_at).await;
        assert_eq!(move_row(1).await.0, "switched");
        assert_eq!(replication_connections(2).await, 0);
        assert_eq!(a.proxy.map_version(), 2);
        assert_eq!(c.proxy.map_version(), 2);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_abort_before_the_cut_over_leaves_the_source_serving() {
    let _guard = fresh().await;
    within(Duration::from_secs(300), async {
        let (a, _b, c) = proxies().await;
        let load = Load::start(&[&a, &c], 4, 4, seeded_orders().await).await;
        tokio::time::sleep(SECOND).await;
        // Killed with the fence standing (the source's tables renamed), then aborted.
        let ran = shards_move(&["--to", "ds2"], Some("fenced")).await;
        assert_eq!(ran.code, None);
        assert_eq!(tables_on(1, "__moved_1").await.len(), 8, "the fence stands");
        let ran = shards_move(&["--abort"], None).await;
        assert_eq!(ran.code, Some(0), "the abort failed");
        assert_eq!(move_row(1).await.0, "aborted");
        // Killed after its copy, then aborted.
        let ran = shards_move(&["--to", "ds2"], Some("copied")).await;
        assert_eq!(ran.code, None);
        assert_eq!(staged_tables(2, 2).await, 8, "the copy is staged");
        assert!(tables_on(2, "").await.is_empty(), "no proxy reaches the copy");
        let ran = shards_move(&["--abort"], None).await;
        assert_eq!(ran.code, Some(0), "the abort failed");
        assert_eq!(move_row(2).await.0, "aborted");
        tokio::time::sleep(SECOND).await;
        let t = totals(load.finish().await);
        assert!(t.errors.is_empty(), "client errors: {:#?}", t.errors);
        assert_eq!(t.empty_reads, 0);
        let checked = check_acknowledged(&t, 1).await;
        assert_eq!(tables_on(1, "").await.len(), 8, "the source serves under the tables' names");
        assert!(tables_on(1, "__moved_1").await.is_empty());
        assert!(tables_on(2, "").await.is_empty(), "the target's copy is gone");
        assert_eq!(staged_tables(2, 1).await + staged_tables(2, 2).await, 0);
        assert_eq!(replication_connections(2).await, 0);
        assert_eq!(a.proxy.map_version(), 1);
        // Killed with the copy in place (the map not published): only going on is safe.
        let ran = shards_move(&["--to", "ds2"], Some("placed")).await;
        assert_eq!(ran.code, None);
        let ran = shards_move(&["--abort"], None).await;
        assert_eq!(ran.code, Some(2), "an abort with the copy in place must be refused");
        let ran = shards_move(&["--to", "ds2"], None).await;
        assert_eq!(ran.code, Some(0), "the rerun failed");
        assert_eq!(move_row(3).await.0, "switched");
        wait_version(&a, 2, 5 * SECOND).await;
        // Refusals change nothing and say so with status 2; not finished is 3.
        assert_eq!(shards_move(&["--to", "ds9"], None).await.code, Some(2));
        assert_eq!(shards_move(&["--abort"], None).await.code, Some(2));
        assert_eq!(shards_move(&["--to", "ds2"], None).await.code, Some(2));
        // DDL on a moved table during a move (here the way back) refuses the cut-over.
        let ran = shards_move(&["--reverse"], Some("verified")).await;
        assert_eq!(ran.code, None);
        {
            use mysql_async::prelude::*;
            let mut ds2 = server(2).await;
            ds2.query_drop("ALTER TABLE order_shards.t_order_12 ADD COLUMN extra INT NULL")
                .await
                .unwrap();
        }
        let ran = shards_move(&["--to", "ds1"], None).await;
        assert_eq!(ran.code, Some(3));
        assert!(ran.stdout.contains("changed on the source"), "{}", ran.stdout);
        assert_eq!(shards_move(&["--abort"], None).await.code, Some(0));
        assert_eq!(tables_on(2, "").await.len(), 8, "ds2 serves on");
        eprintln!(
            "abort: {checked} moved-channel orders on ds1, {} statements acknowledged; fence waits {:?} {:?}",
            t.acked,
            fence_waits(&a),
            fence_waits(&c)
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reversed_move_returns_the_shards_and_finish_drops_the_old_tables() {
    let _guard = fresh().await;
    within(Duration::from_secs(300), async {
        let (a, _b, c) = proxies().await;
        let load = Load::start(&[&a, &c], 4, 4, seeded_orders().await).await;
        tokio::time::sleep(SECOND).await;
        let ran = shards_move(&["--to", "ds2"], None).await;
        assert_eq!(ran.code, Some(0));
        tokio::time::sleep(SECOND).await;
        let ran = shards_move(&["--reverse"], None).await;
        assert_eq!(ran.code, Some(0), "the reverse failed");
        assert!(ran.stdout.contains("checksums equal"), "{}", ran.stdout);
        let moved_at = Instant::now();
        tokio::time::sleep(2 * SECOND).await;
        let t = totals(load.finish().await);
        check_after(&t, 1, 2, "__moved_2", moved_at).await;
        assert_eq!(move_row(2).await.1, Some(3));
        assert_eq!(a.proxy.map_version(), 3);
        assert_eq!(c.proxy.map_version(), 3);
        let ran = shards_move(&["--finish"], None).await;
        assert_eq!(ran.code, Some(0), "finish failed");
        assert!(tables_on(1, "__moved_1").await.is_empty());
        assert!(tables_on(2, "__moved_2").await.is_empty());
        assert_eq!(tables_on(1, "").await.len(), 8);
        assert_eq!(
            (move_row(1).await.0, move_row(2).await.0),
            ("finished".into(), "finished".into())
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_transaction_or_a_pinned_session_across_the_cut_over_is_told_so() {
    use mysql_async::prelude::*;
    let _guard = fresh().await;
    within(Duration::from_secs(300), async {
        let (a, _b, _c) = proxies().await;
        let seeded = seeded_orders().await;
        let biz = seeded.iter().find(|(_, code)| *code == BIZ).unwrap().0;
        let cn = seeded.iter().find(|(_, code)| *code == CN).unwrap().0;
        // A transaction that began before the cut-over (on ds0 only: the fence does not wait
        // for it) and reaches the moved shard after it.
        let mut txn = a.client().await;
        txn.query_drop("BEGIN").await.unwrap();
        txn.exec_drop("UPDATE t_order SET note = 'txn' WHERE order_id = ?", (cn,))
            .await
            .unwrap();
        // A session pinned to its backend connections by a temporary table.
        let mut pinned = a.client().await;
        pinned
            .query_drop("CREATE TEMPORARY TABLE scratch (a INT)")
            .await
            .unwrap();
        let ran = shards_move(&["--to", "ds2"], None).await;
        assert_eq!(ran.code, Some(0));
        wait_version(&a, 2, 5 * SECOND).await;
        let e = txn
            .exec_drop("UPDATE t_order SET note = 'txn' WHERE order_id = ?", (biz,))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("1412"), "{e}");
        txn.query_drop("ROLLBACK").await.unwrap();
        // Run again, the transaction routes by the new map.
        txn.query_drop("BEGIN").await.unwrap();
        txn.exec_drop("UPDATE t_order SET note = 'txn' WHERE order_id = ?", (biz,))
            .await
            .unwrap();
        txn.query_drop("COMMIT").await.unwrap();
        let mut ds2 = server(2).await;
        let shard = 12 + (biz % 4);
        let note: Option<Option<String>> = ds2
            .query_first(format!(
                "SELECT note FROM order_shards.t_order_{shard} WHERE order_id = {biz}"
            ))
            .await
            .unwrap();
        assert_eq!(
            note,
            Some(Some("txn".into())),
            "the retried transaction's write on ds2"
        );
        let e = pinned
            .exec_drop(
                "UPDATE t_order SET note = 'pinned' WHERE order_id = ?",
                (biz,),
            )
            .await
            .unwrap_err();
        assert!(e.to_string().contains("1927"), "{e}");
        // A new connection follows.
        let mut fresh_conn = a.client().await;
        fresh_conn
            .exec_drop("UPDATE t_order SET note = 'new' WHERE order_id = ?", (biz,))
            .await
            .unwrap();
    })
    .await;
}
