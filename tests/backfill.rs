//! `routekey-proxy index backfill` against the sandbox servers, on a copy of the shards
//! (tests/common/legacy.rs): interrupted and resumed, rate-limited, racing the proxy's own
//! inserts, with the shared cache tier, and when a write fails.

mod common;

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::legacy::*;
use common::redis_server::RedisServer;
use common::*;
use mysql_async::prelude::*;
use routekey_proxy::route::shared_cache::shared_key;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_interrupted_and_resumed_writes_each_row_once_at_the_rate_asked() {
    let f = Fixture::new("resume").await;
    let ids = unindexed_orders(&f, 300).await;
    let checkpoint = std::env::temp_dir().join(format!("rk-ckpt-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&checkpoint);
    let ckpt = checkpoint.to_str().unwrap();

    // 300 rows at 100 rows/s (about three seconds): interrupted once its first index rows
    // are written, whenever that is on a loaded machine, so that it stops half-way.
    let child = Command::new(BIN)
        .arg("--config")
        .arg(&f.path)
        .args([
            "index",
            "backfill",
            "--checkpoint",
            ckpt,
            "--rows-per-second",
            "100",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while f.index_rows().await == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no index row written within 120 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let first = child.wait_with_output().unwrap();
    assert_eq!(first.status.code(), Some(2), "{}", text(&first));
    assert!(
        String::from_utf8_lossy(&first.stdout).contains("STOPPED"),
        "{}",
        text(&first)
    );
    let written_first = summary_number(&first, "index rows written");
    assert!(
        written_first > 0 && written_first < 300,
        "interrupted after {written_first} rows: {}",
        text(&first)
    );
    assert_eq!(f.index_rows().await, written_first);

    let second = f.run(&["index", "backfill", "--checkpoint", ckpt]);
    assert_eq!(second.status.code(), Some(0), "{}", text(&second));
    assert_eq!(
        summary_number(&second, "index rows written"),
        300 - written_first,
        "{}",
        text(&second)
    );
    assert_eq!(
        summary_number(&second, "already present"),
        0,
        "{}",
        text(&second)
    );
    assert_eq!(f.index_rows().await, 300);
    for id in ids.iter().step_by(37) {
        assert!(f.indexed(*id).await.is_some());
    }
    // A finished run's checkpoint is refused (it would scan nothing), and so is one of
    // another run.
    let third = f.run(&["index", "backfill", "--checkpoint", ckpt]);
    assert_eq!(third.status.code(), Some(2), "{}", text(&third));
    assert!(
        String::from_utf8_lossy(&third.stderr).contains("finished"),
        "{}",
        text(&third)
    );
    let other = f.run(&[
        "index",
        "backfill",
        "--prune-dangling",
        "--checkpoint",
        ckpt,
    ]);
    assert_eq!(other.status.code(), Some(2), "{}", text(&other));
    assert!(
        String::from_utf8_lossy(&other.stderr).contains("another run"),
        "{}",
        text(&other)
    );
    let _ = std::fs::remove_file(&checkpoint);

    // The rate limit: 600 rows scanned (300 orders, 300 index rows) at 200 rows/s.
    let out = f.run(&["index", "backfill", "--dry-run", "--rows-per-second", "200"]);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let rate: f64 = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("rows scanned"))
        .and_then(|l| l.split('(').nth(1))
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no rate in {stdout}"));
    assert_eq!(summary_number(&out, "rows scanned"), 600, "{stdout}");
    assert!(
        (160.0..=240.0).contains(&rate),
        "scanned at {rate} rows/s, asked 200: {stdout}"
    );
    f.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_and_prune_delete_the_shared_cache_keys_of_the_ids_they_change() {
    let redis = RedisServer::start().await;
    let f = Fixture::with_cache("redis", &format!("redis_url = \"{}\"", redis.url())).await;
    let cn = "CN_CHANNEL";
    let missing = fresh_legacy_id();
    f.order(expected_shard(cn, missing), missing, cn).await;
    let dangling = fresh_legacy_id();
    f.index(dangling, cn, 7200).await;
    let untouched = fresh_legacy_id();
    f.order(expected_shard(cn, untouched), untouched, cn).await;
    f.index(untouched, cn, 7200).await;
    let version = f.config.sharding.shard_map_version;
    for id in [missing, dangling, untouched] {
        redis.set(&shared_key(version, id), cn).await;
    }
    let out = f.run(&["index", "backfill", "--prune-dangling"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(redis.get(&shared_key(version, missing)).await, None);
    assert_eq!(redis.get(&shared_key(version, dangling)).await, None);
    assert_eq!(
        redis.get(&shared_key(version, untouched)).await.as_deref(),
        Some(cn)
    );
    f.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prune_never_takes_the_index_row_of_an_insert_in_flight() {
    let f = Fixture::new("race").await;
    let cn = "CN_CHANNEL";
    // An old index row, left by a failed insert of a legacy order that is now retried.
    let (cached, blocked) = (fresh_legacy_id(), fresh_legacy_id());
    f.index(cached, cn, 7200).await;
    f.index(blocked, cn, 7200).await;
    let h = Harness::start_with(f.config.clone()).await;
    let mut app = h.client().await;
    // The proxy caches the channel of `cached` (a read), then the row is pruned: the insert
    // must write it again rather than trust its cache.
    let read = format!("SELECT order_id FROM t_order WHERE order_id = {cached}");
    assert!(rows(&mut app, &read).await.is_empty());
    let out = f.run(&[
        "index",
        "backfill",
        "--prune-dangling",
        "--shard",
        &expected_shard(cn, cached).to_string(),
    ]);
    assert_eq!(summary_number(&out, "dangling pruned"), 1, "{}", text(&out));
    assert_eq!(f.indexed(cached).await, None);
    exec(&mut app, &insert_order_sql(cached, cn, "retried")).await;
    assert_eq!(
        f.indexed(cached).await.as_deref(),
        Some(cn),
        "insert after a prune left no index row"
    );

    // An insert whose shard write waits on a lock while a prune runs: its index row was
    // marked young before the shard write, so the prune keeps it.
    let shard = expected_shard(cn, blocked);
    let mut locker = backend(datasource_of(shard)).await;
    locker.query_drop("BEGIN").await.unwrap();
    locker
        .query_drop(format!(
            "SELECT * FROM {}.t_order_{shard} WHERE order_id BETWEEN {} AND {} FOR UPDATE",
            f.physical,
            blocked - 10,
            blocked + 10
        ))
        .await
        .unwrap();
    let mut writer = h.client().await;
    let insert = insert_order_sql(blocked, cn, "blocked");
    let pending = tokio::spawn(async move { writer.query_drop(insert).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!pending.is_finished(), "the insert should wait on the lock");
    let out = f.run(&["index", "backfill", "--prune-dangling"]);
    assert_eq!(summary_number(&out, "dangling pruned"), 0, "{}", text(&out));
    assert_eq!(summary_number(&out, "dangling kept"), 1, "{}", text(&out));
    locker.query_drop("COMMIT").await.unwrap();
    pending.await.unwrap().unwrap();
    assert_eq!(f.indexed(blocked).await.as_deref(), Some(cn));
    let out = f.run(&["verify", "--recheck-after", "0s"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    drop(app);
    h.stop().await;
    f.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_never_indexes_an_id_issued_while_it_runs() {
    let f = Fixture::new("during").await;
    unindexed_orders(&f, 40).await;
    // 80 rows at 20 rows/s: about 4 s, longer than the configured clock skew (0 s here).
    let text_config = std::fs::read_to_string(&f.path)
        .unwrap()
        .replace("clock_skew = \"5s\"", "clock_skew = \"0s\"");
    std::fs::write(&f.path, text_config).unwrap();
    let child = Command::new(BIN)
        .arg("--config")
        .arg(&f.path)
        .args(["index", "backfill", "--rows-per-second", "20"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // An order issued now, with a route key: its id is above every legacy id, so the scan
    // reaches it last, seconds after it started.
    let layout = f.config.layout;
    let id = layout
        .compose(routekey_proxy::id::IdFields {
            timestamp: now_ms() - layout.epoch_ms(),
            worker: 1,
            route_key: 5,
            sequence: 7,
        })
        .unwrap();
    f.order(expected_shard("EU_CHANNEL", id), id, "EU_CHANNEL")
        .await;
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        summary_number(&out, "index rows written"),
        40,
        "{}",
        text(&out)
    );
    assert_eq!(f.indexed(id).await, None, "a decodable id got an index row");
    f.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_and_resumed_backfill_reports_each_row_left_to_a_person_once() {
    let f = Fixture::new("stopreport").await;
    unindexed_orders(&f, 60).await;
    // Legacy EU orders on GLOBAL shards: their channel does not route them where they are.
    let mut misplaced = BTreeSet::new();
    for _ in 0..60 {
        let id = fresh_legacy_id();
        f.order(expected_shard("GLOBAL_CHANNEL", id), id, "EU_CHANNEL")
            .await;
        misplaced.insert(id);
    }
    let dir = std::env::temp_dir();
    let ckpt = dir.join(format!("rk-stopreport-{}.json", std::process::id()));
    let report = dir.join(format!("rk-stopreport-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&ckpt);
    let args = [
        "index",
        "backfill",
        "--checkpoint",
        ckpt.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ];
    // 120 rows at 40 rows/s, stopped by SIGTERM (as Kubernetes stops a job) after ~1 s.
    let child = Command::new(BIN)
        .arg("--config")
        .arg(&f.path)
        .args(args)
        .args(["--rows-per-second", "40"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let first = child.wait_with_output().unwrap();
    assert_eq!(first.status.code(), Some(2), "{}", text(&first));
    let second = f.run(&args);
    assert_eq!(second.status.code(), Some(1), "{}", text(&second));
    let lines = std::fs::read_to_string(&report).unwrap();
    let ids: Vec<u64> = report_lines(&report).into_iter().map(|l| l.1).collect();
    assert_eq!(
        lines.lines().count(),
        60,
        "{}\n{}",
        text(&first),
        text(&second)
    );
    assert_eq!(ids.into_iter().collect::<BTreeSet<_>>(), misplaced);
    assert_eq!(f.index_rows().await, 60);
    let _ = std::fs::remove_file(ckpt);
    let _ = std::fs::remove_file(report);
    f.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prune_keeps_the_index_row_of_items_whose_order_was_deleted() {
    let f = Fixture::new("orphans").await;
    let cn = "CN_CHANNEL";
    let id = fresh_legacy_id();
    f.item(expected_shard(cn, id), id).await;
    f.index(id, cn, 7200).await;
    let out = f.run(&["index", "backfill", "--prune-dangling"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(summary_number(&out, "dangling pruned"), 0, "{}", text(&out));
    assert_eq!(summary_number(&out, "needs a person"), 1, "{}", text(&out));
    assert_eq!(f.indexed(id).await.as_deref(), Some(cn));
    // Through the proxy the items are still found by their order id.
    let h = Harness::start_with(f.config.clone()).await;
    let mut app = h.client().await;
    let sql = format!("SELECT item_no FROM t_order_item WHERE order_id = {id}");
    assert_eq!(rows(&mut app, &sql).await.len(), 2);
    drop(app);
    h.stop().await;
    f.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_whose_write_failed_is_done_again_by_the_resumed_run() {
    let f = Fixture::new("failedbatch").await;
    unindexed_orders(&f, 50).await;
    let ckpt = std::env::temp_dir().join(format!("rk-failedbatch-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&ckpt);
    let ckpt = ckpt.to_str().unwrap().to_owned();
    // Every insert into the index table waits on this lock; the backfill gives up after 1 s.
    let mut locker = backend(0).await;
    locker.query_drop("BEGIN").await.unwrap();
    locker
        .query_drop(format!(
            "SELECT * FROM {}.t_order_index WHERE order_id >= 0 FOR UPDATE",
            f.meta
        ))
        .await
        .unwrap();
    let out = f.run(&[
        "index",
        "backfill",
        "--checkpoint",
        &ckpt,
        "--read-timeout",
        "1s",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    // The checkpoint stays before the batch it could not write.
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&ckpt).unwrap()).unwrap();
    assert!(saved["after"].is_null(), "{saved}");
    locker.query_drop("ROLLBACK").await.unwrap();
    drop(locker);
    // The resumed run writes what is missing (the server may have finished inserts the
    // first run gave up waiting for: those rows are there already, and not written twice).
    let out = f.run(&["index", "backfill", "--checkpoint", &ckpt]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(f.index_rows().await, 50, "{}", text(&out));
    let out = f.run(&["verify", "--recheck-after", "0s"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let _ = std::fs::remove_file(ckpt);
    f.drop().await;
}
