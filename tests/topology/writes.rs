//! Writes through a failover, a switchover and a split brain.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::common::{self, Harness, fresh_new_id, insert_order_sql};
use mysql_async::prelude::*;
use routekey_proxy::config::DatasourceId;

use crate::fixture::*;

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
