//! `routekey-proxy verify` and `index backfill` against the sandbox servers, with faults
//! planted in a copy of the shards of this test's own (its own physical and index
//! databases, so other tests' rows never show up in a scan), run as the binary an operator
//! runs: exit status, summary, JSON report, Ctrl-C and resume.

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::redis_server::RedisServer;
use common::*;
use mysql_async::prelude::*;
use routekey_proxy::config::Config;
use routekey_proxy::route::shared_cache::shared_key;

const BIN: &str = env!("CARGO_BIN_EXE_routekey-proxy");

/// Physical and index databases of one test, and a configuration file naming them.
struct Fixture {
    physical: String,
    meta: String,
    path: PathBuf,
    config: Config,
}

impl Fixture {
    /// Creates `rk_legacy_<tag>` (every shard's tables, on the shard's server) and
    /// `rk_legacy_meta_<tag>` (the index table, on ds0), empty.
    async fn new(tag: &str) -> Self {
        Self::with_cache(tag, "").await
    }

    /// As [`Fixture::new`], with `cache` lines added to the `[cache]` table.
    async fn with_cache(tag: &str, cache: &str) -> Self {
        check_sandbox().await;
        let physical = format!("rk_legacy_{tag}");
        let meta = format!("rk_legacy_meta_{tag}");
        let text = include_str!("../config/demo.toml")
            .replace("\"order_shards\"", &format!("\"{physical}\""))
            .replace("\"order_meta\"", &format!("\"{meta}\""))
            .replace("127.0.0.1:33061", &format!("127.0.0.1:{}", sandbox_port(0)))
            .replace("127.0.0.1:33062", &format!("127.0.0.1:{}", sandbox_port(1)))
            .replace("[cache]\n", &format!("[cache]\n{cache}\n"));
        let path =
            std::env::temp_dir().join(format!("rk-legacy-{tag}-{}.toml", std::process::id()));
        std::fs::write(&path, &text).unwrap();
        let config = Config::from_toml(&text, "legacy test").unwrap();
        for ds in 0..2 {
            let mut c = backend(ds).await;
            c.query_drop(format!("DROP DATABASE IF EXISTS {physical}"))
                .await
                .unwrap();
            c.query_drop(format!("CREATE DATABASE {physical}"))
                .await
                .unwrap();
            if ds == 0 {
                c.query_drop(format!("DROP DATABASE IF EXISTS {meta}"))
                    .await
                    .unwrap();
                c.query_drop(format!("CREATE DATABASE {meta}"))
                    .await
                    .unwrap();
                c.query_drop(format!(
                    "CREATE TABLE {meta}.t_order_index LIKE order_meta.t_order_index"
                ))
                .await
                .unwrap();
            }
        }
        for shard in 0..20u32 {
            let mut c = backend(datasource_of(shard)).await;
            for t in ["t_order", "t_order_item"] {
                c.query_drop(format!(
                    "CREATE TABLE {physical}.{t}_{shard} LIKE order_shards.{t}_{shard}"
                ))
                .await
                .unwrap();
            }
        }
        Self {
            physical,
            meta,
            path,
            config,
        }
    }

    async fn order(&self, shard: u32, id: u64, channel: &str) {
        let mut c = backend(datasource_of(shard)).await;
        c.query_drop(format!(
            "INSERT INTO {}.t_order_{shard} (order_id, channel, region, user_id, amount, status, created_at) \
             VALUES ({id}, '{channel}', 'GB', 1, 9.99, 'NEW', NOW(3))",
            self.physical
        ))
        .await
        .unwrap();
    }

    async fn item(&self, shard: u32, id: u64) {
        let mut c = backend(datasource_of(shard)).await;
        c.query_drop(format!(
            "INSERT INTO {}.t_order_item_{shard} (order_id, item_no, sku, qty, price) VALUES ({id}, 1, 'SKU', 1, 9.99), ({id}, 2, 'SKU2', 2, 1.00)",
            self.physical
        ))
        .await
        .unwrap();
    }

    /// An index row written `age_secs` ago.
    async fn index(&self, id: u64, channel: &str, age_secs: u64) {
        let mut c = backend(0).await;
        c.query_drop(format!(
            "INSERT INTO {}.t_order_index (order_id, channel, created_at) VALUES ({id}, '{channel}', NOW(3) - INTERVAL {age_secs} SECOND)",
            self.meta
        ))
        .await
        .unwrap();
    }

    async fn indexed(&self, id: u64) -> Option<String> {
        let mut c = backend(0).await;
        c.query_first(format!(
            "SELECT channel FROM {}.t_order_index WHERE order_id = {id}",
            self.meta
        ))
        .await
        .unwrap()
    }

    async fn index_rows(&self) -> u64 {
        let mut c = backend(0).await;
        c.query_first(format!("SELECT COUNT(*) FROM {}.t_order_index", self.meta))
            .await
            .unwrap()
            .unwrap()
    }

    /// Clean orders of every channel: new-format ids and legacy ids with their index rows,
    /// each with items beside it.
    async fn clean_orders(&self, per_channel: usize) {
        for (name, code, _, _) in CHANNELS {
            for _ in 0..per_channel {
                let id = fresh_new_id(code);
                self.order(expected_shard(name, id), id, name).await;
                self.item(expected_shard(name, id), id).await;
                let old = fresh_legacy_id();
                self.order(expected_shard(name, old), old, name).await;
                self.item(expected_shard(name, old), old).await;
                self.index(old, name, 7200).await;
            }
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(BIN);
        cmd.arg("--config").arg(&self.path).args(args);
        cmd.output().unwrap()
    }

    async fn drop(self) {
        for ds in 0..2 {
            let mut c = backend(ds).await;
            let _ = c
                .query_drop(format!("DROP DATABASE IF EXISTS {}", self.physical))
                .await;
            let _ = c
                .query_drop(format!("DROP DATABASE IF EXISTS {}", self.meta))
                .await;
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The (kind, order_id, shard) of every line of a verify report.
fn report_lines(path: &std::path::Path) -> BTreeSet<(String, u64, Option<u64>)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            for key in ["kind", "table", "shard", "order_id", "detail"] {
                assert!(v.get(key).is_some(), "report line without {key}: {l}");
            }
            (
                v["kind"].as_str().unwrap().to_owned(),
                v["order_id"].as_str().unwrap().parse().unwrap(),
                v["shard"].as_u64(),
            )
        })
        .collect()
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn other_shard_of_same_channel(shard: u32) -> u32 {
    shard - shard % 4 + (shard + 1) % 4
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_finds_exactly_the_planted_faults_and_backfill_repairs_what_a_machine_may() {
    let f = Fixture::new("faults").await;
    f.clean_orders(3).await;
    let (eu, cn) = ("EU_CHANNEL", "CN_CHANNEL");
    // A legacy row without index row (its channel matches its shard): backfill writes it.
    let missing = fresh_legacy_id();
    f.order(expected_shard(cn, missing), missing, cn).await;
    // Dangling index rows: one old enough to prune, one too young.
    let (old_dangling, young_dangling) = (fresh_legacy_id(), fresh_legacy_id());
    f.index(old_dangling, cn, 7200).await;
    f.index(young_dangling, cn, 10).await;
    // An index row naming another channel than its row.
    let conflict = fresh_legacy_id();
    f.order(expected_shard(cn, conflict), conflict, cn).await;
    f.index(conflict, eu, 7200).await;
    // A decoded id on another shard of its channel.
    let wrong = fresh_new_id(5);
    let wrong_at = other_shard_of_same_channel(expected_shard(eu, wrong));
    f.order(wrong_at, wrong, eu).await;
    // A decoded EU id whose channel column says CN, on its own shard.
    let mismatch = fresh_new_id(5);
    f.order(expected_shard(eu, mismatch), mismatch, cn).await;
    // A duplicate: on its shard and on a GLOBAL shard.
    let dup = fresh_new_id(5);
    f.order(expected_shard(eu, dup), dup, eu).await;
    f.order(5, dup, eu).await;
    // Items away from their order, and items of an order that exists nowhere.
    let away = fresh_new_id(1);
    f.order(expected_shard(cn, away), away, cn).await;
    let away_at = other_shard_of_same_channel(expected_shard(cn, away));
    f.item(away_at, away).await;
    let orphan = fresh_new_id(1);
    f.item(expected_shard(cn, orphan), orphan).await;

    let cn_shard = |id| Some(u64::from(expected_shard(cn, id)));
    let needs_a_person: BTreeSet<(String, u64, Option<u64>)> = [
        ("index_conflict", conflict, cn_shard(conflict)),
        ("wrong_shard", wrong, Some(u64::from(wrong_at))),
        (
            "channel_mismatch",
            mismatch,
            Some(u64::from(expected_shard(eu, mismatch))),
        ),
        ("duplicate", dup, Some(5)),
        ("item_misplaced", away, Some(u64::from(away_at))),
        ("orphan_item", orphan, cn_shard(orphan)),
        ("dangling_index", young_dangling, cn_shard(young_dangling)),
    ]
    .into_iter()
    .map(|(k, id, s)| (k.to_owned(), id, s))
    .collect();
    let mut planted = needs_a_person.clone();
    planted.insert(("missing_index".into(), missing, cn_shard(missing)));
    planted.insert((
        "dangling_index".into(),
        old_dangling,
        cn_shard(old_dangling),
    ));

    // Before: the proxy cannot find the legacy order without index row.
    let h = Harness::start_with(f.config.clone()).await;
    let mut app = h.client().await;
    let sql = format!("SELECT order_id FROM t_order WHERE order_id = {missing}");
    assert!(rows(&mut app, &sql).await.is_empty());
    drop(app);
    h.stop().await;

    let report = std::env::temp_dir().join(format!("rk-verify-{}.jsonl", std::process::id()));
    let report_arg = report.to_str().unwrap();
    let out = f.run(&["verify", "--recheck-after", "0s", "--report", report_arg]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(report_lines(&report), planted, "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("total                       9"));

    let out = f.run(&["index", "backfill", "--prune-dangling"]);
    // The conflicting index row is left to a person (never overwritten): status 1.
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(
        summary_number(&out, "index rows written"),
        1,
        "{}",
        text(&out)
    );
    assert_eq!(summary_number(&out, "dangling pruned"), 1, "{}", text(&out));
    assert_eq!(summary_number(&out, "dangling kept"), 1, "{}", text(&out));
    // The conflicting index row and the duplicate.
    assert_eq!(summary_number(&out, "needs a person"), 2, "{}", text(&out));
    assert_eq!(f.indexed(missing).await.as_deref(), Some(cn));
    assert_eq!(f.indexed(conflict).await.as_deref(), Some(eu));
    assert_eq!(f.indexed(old_dangling).await, None);
    assert_eq!(f.indexed(young_dangling).await.as_deref(), Some(cn));

    let out = f.run(&["verify", "--recheck-after", "0s", "--report", report_arg]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(report_lines(&report), needs_a_person, "{}", text(&out));

    // After: the backfilled order is found through the proxy; the pruned id reads as not
    // found (no row, no error).
    let h = Harness::start_with(f.config.clone()).await;
    let mut app = h.client().await;
    let found = rows(&mut app, &sql).await;
    assert_eq!(found.len(), 1, "backfilled id {missing} not found");
    let gone = format!("SELECT order_id FROM t_order WHERE order_id = {old_dangling}");
    assert!(rows(&mut app, &gone).await.is_empty());
    drop(app);
    h.stop().await;

    // A narrowed scan sees only its shards' faults (the duplicate's other row is on a
    // GLOBAL shard, outside it).
    let out = f.run(&[
        "verify",
        "--recheck-after",
        "0s",
        "--channel",
        eu,
        "--report",
        report_arg,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let kinds: BTreeSet<String> = report_lines(&report).into_iter().map(|l| l.0).collect();
    assert_eq!(
        kinds,
        ["channel_mismatch", "wrong_shard"].map(String::from).into(),
        "{}",
        text(&out)
    );
    let _ = std::fs::remove_file(report);
    f.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_scan_exits_0_and_an_unreachable_datasource_exits_2() {
    let f = Fixture::new("clean").await;
    f.clean_orders(2).await;
    let out = f.run(&["verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("scan complete"));
    let out = f.run(&["index", "backfill", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // Order id 0 is read too (the first page has no lower bound), with any page size.
    f.order(0, 0, "EU_CHANNEL").await;
    let report = std::env::temp_dir().join(format!("rk-verify0-{}.jsonl", std::process::id()));
    for page in ["1", "3", "1000"] {
        let args = [
            "verify",
            "--page",
            page,
            "--recheck-after",
            "0s",
            "--report",
        ];
        let out = f.run(&[&args[..], &[report.to_str().unwrap()]].concat());
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        let want = [("missing_index".to_owned(), 0, Some(0))];
        assert_eq!(report_lines(&report), want.into(), "page {page}");
    }
    let _ = std::fs::remove_file(report);

    let broken = std::fs::read_to_string(&f.path).unwrap().replace(
        &format!("127.0.0.1:{}", sandbox_port(1)),
        &format!("127.0.0.1:{}", free_port()),
    );
    let path = f.path.with_extension("broken.toml");
    std::fs::write(&path, broken).unwrap();
    let out = Command::new(BIN)
        .arg("--config")
        .arg(&path)
        .arg("verify")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("INCOMPLETE"),
        "{}",
        text(&out)
    );
    let _ = std::fs::remove_file(path);
    f.drop().await;
}

/// Legacy orders without index rows on every shard, `n` of them.
async fn unindexed_orders(f: &Fixture, n: usize) -> Vec<u64> {
    let mut ids = Vec::new();
    for i in 0..n {
        let (name, ..) = CHANNELS[i % CHANNELS.len()];
        let id = fresh_legacy_id();
        f.order(expected_shard(name, id), id, name).await;
        ids.push(id);
    }
    ids
}

fn summary_number(out: &Output, label: &str) -> u64 {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with(label))
        .unwrap_or_else(|| panic!("no `{label}` in {}", text(out)));
    line.trim_start()[label.len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_interrupted_and_resumed_writes_each_row_once_at_the_rate_asked() {
    let f = Fixture::new("resume").await;
    let ids = unindexed_orders(&f, 300).await;
    let checkpoint = std::env::temp_dir().join(format!("rk-ckpt-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&checkpoint);
    let ckpt = checkpoint.to_str().unwrap();

    // 300 rows at 100 rows/s: interrupted after about a second.
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
    tokio::time::sleep(Duration::from_millis(1200)).await;
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
async fn a_duplicate_is_never_backfilled_and_a_narrowed_verify_sees_its_copy() {
    let f = Fixture::new("dup").await;
    let (eu, global) = ("EU_CHANNEL", "GLOBAL_CHANNEL");
    // A legacy id without index row on an EU shard and on a GLOBAL shard, each copy's
    // channel matching its shard: either could be backfilled if seen alone.
    let id = fresh_legacy_id();
    let (a, b) = (expected_shard(eu, id), expected_shard(global, id));
    f.order(a, id, eu).await;
    f.order(b, id, global).await;
    for scope in [vec!["--shard".to_owned(), b.to_string()], vec![]] {
        let args: Vec<&str> = ["index", "backfill"]
            .into_iter()
            .chain(scope.iter().map(String::as_str))
            .collect();
        let out = f.run(&args);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert_eq!(
            summary_number(&out, "index rows written"),
            0,
            "{}",
            text(&out)
        );
        assert_eq!(summary_number(&out, "needs a person"), 1, "{}", text(&out));
        assert_eq!(f.indexed(id).await, None);
    }
    let report = std::env::temp_dir().join(format!("rk-dup-{}.jsonl", std::process::id()));
    for shard in [a, b] {
        let shard = shard.to_string();
        let out = f.run(&[
            "verify",
            "--recheck-after",
            "0s",
            "--shard",
            &shard,
            "--report",
            report.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        let kinds: Vec<String> = report_lines(&report).into_iter().map(|l| l.0).collect();
        assert_eq!(
            kinds,
            ["duplicate"],
            "verify --shard {shard}: {}",
            text(&out)
        );
    }
    let _ = std::fs::remove_file(report);
    f.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_datasource_that_never_answers_ends_the_scan_with_status_2() {
    let f = Fixture::new("silent").await;
    // A server that accepts connections and never says a word.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let held = std::thread::spawn(move || {
        let mut open = Vec::new();
        for conn in silent.incoming().take(64) {
            open.push(conn);
        }
    });
    let text_config = std::fs::read_to_string(&f.path).unwrap().replace(
        &format!("127.0.0.1:{}", sandbox_port(1)),
        &format!("127.0.0.1:{port}"),
    );
    let path = f.path.with_extension("silent.toml");
    std::fs::write(&path, text_config).unwrap();
    let started = std::time::Instant::now();
    let out = Command::new(BIN)
        .arg("--config")
        .arg(&path)
        .args(["verify", "--read-timeout", "1s"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("INCOMPLETE"),
        "{}",
        text(&out)
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    let _ = std::fs::remove_file(path);
    drop(held);
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
