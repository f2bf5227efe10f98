//! `routekey-proxy verify` against the sandbox servers, with faults planted in a copy of the
//! shards (tests/common/legacy.rs): it finds exactly the planted faults, checks each again
//! on every shard, narrows by shard, and ends with status 2 when it cannot finish.

mod common;

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use common::legacy::*;
use common::*;

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

    let (out, report) = f.verify(&[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(report, planted, "{}", text(&out));
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

    let (out, report) = f.verify(&[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(report, needs_a_person, "{}", text(&out));

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
    let (out, report) = f.verify(&["--channel", eu]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(
        Fixture::kinds(&report),
        ["channel_mismatch", "wrong_shard"].map(String::from).into(),
        "{}",
        text(&out)
    );
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
    for page in ["1", "3", "1000"] {
        let (out, report) = f.verify(&["--page", page]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        let want = [("missing_index".to_owned(), 0, Some(0))];
        assert_eq!(report, want.into(), "page {page}");
    }

    let path = f.config_with_ds1_at(&format!("127.0.0.1:{}", free_port()), "broken");
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
    for shard in [a, b] {
        let shard = shard.to_string();
        let (out, report) = f.verify(&["--shard", &shard]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        let kinds: Vec<String> = report.into_iter().map(|l| l.0).collect();
        assert_eq!(
            kinds,
            ["duplicate"],
            "verify --shard {shard}: {}",
            text(&out)
        );
    }
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
    let path = f.config_with_ds1_at(&format!("127.0.0.1:{port}"), "silent");
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
