//! Each order id is resolved by the layer SPEC §4 names, and the router's counters show it:
//! new-format ids decode with no index lookup; legacy ids go to the index once, then to the
//! cache; a statement's context answers for reads; nothing is guessed.

mod common;

use common::*;
use routekey_proxy::route::{Layer, LookupResult, RouteStats};

/// The counters of every layer, in `Layer::ALL` order.
fn snapshot(stats: &RouteStats) -> [u64; 5] {
    Layer::ALL.map(|l| stats.layer(l))
}

/// Counter increase per layer since `before`, by label.
fn delta(stats: &RouteStats, before: [u64; 5]) -> Vec<(&'static str, u64)> {
    Layer::ALL
        .iter()
        .zip(before)
        .map(|(l, b)| (l.label(), stats.layer(*l) - b))
        .filter(|(_, d)| *d > 0)
        .collect()
}

#[tokio::test]
async fn new_format_ids_are_decoded_without_touching_the_index() {
    let h = Harness::start().await;
    let stats = h.proxy.router_stats.clone();
    let mut c = h.client().await;
    let s = seed();
    let mut n = 0;
    for (name, ..) in CHANNELS {
        for id in s.channels[name].new_format_ids.iter().take(5) {
            let before = snapshot(&stats);
            let got = rows(
                &mut c,
                &format!("SELECT order_id FROM t_order WHERE order_id = {id}"),
            )
            .await;
            assert_eq!(got.len(), 1);
            assert_eq!(delta(&stats, before), [("decode", 1)], "{name} id {id}");
            n += 1;
        }
    }
    // Decoding is never cached: the same ids again count as decodes again.
    let before = snapshot(&stats);
    for (name, ..) in CHANNELS {
        let id = s.channels[name].new_format_ids[0];
        rows(
            &mut c,
            &format!("SELECT order_id FROM t_order WHERE order_id = {id}"),
        )
        .await;
    }
    assert_eq!(delta(&stats, before), [("decode", 5)]);
    assert!(n > 0);
    h.stop().await;
}

#[tokio::test]
async fn legacy_ids_go_to_the_index_once_then_to_the_cache() {
    let h = Harness::start().await;
    let stats = h.proxy.router_stats.clone();
    let mut c = h.client().await;
    let s = seed();
    let mut ids: Vec<u64> = CHANNELS
        .iter()
        .map(|(name, ..)| s.channels[*name].legacy_ids[10])
        .collect();
    // Legacy ids whose bits 17-14 hold an assigned code must not decode either.
    ids.extend(s.legacy_ids_with_code_bits.iter().skip(20).take(5));
    ids.sort();
    ids.dedup();
    for &id in &ids {
        let sql = format!("SELECT order_id FROM t_order WHERE order_id = {id}");
        let before = snapshot(&stats);
        assert_eq!(rows(&mut c, &sql).await.len(), 1, "{sql}");
        assert_eq!(
            delta(&stats, before),
            [("index", 1)],
            "first read of legacy id {id}"
        );
        let before = snapshot(&stats);
        assert_eq!(rows(&mut c, &sql).await.len(), 1, "{sql}");
        assert_eq!(
            delta(&stats, before),
            [("cache", 1)],
            "second read of legacy id {id}"
        );
    }
    h.stop().await;
}

#[tokio::test]
async fn an_in_list_counts_one_resolution_per_id() {
    let h = Harness::start().await;
    let stats = h.proxy.router_stats.clone();
    let mut c = h.client().await;
    let s = seed();
    let new = [
        s.channels["EU_CHANNEL"].new_format_ids[20],
        s.channels["CORP_CHANNEL"].new_format_ids[20],
    ];
    let legacy = [
        s.channels["GLOBAL_CHANNEL"].legacy_ids[20],
        s.channels["BIZ_CHANNEL"].legacy_ids[20],
        s.channels["CN_CHANNEL"].legacy_ids[20],
    ];
    let sql = format!(
        "SELECT order_id FROM t_order WHERE order_id IN ({}, {}, {}, {}, {})",
        new[0], legacy[0], new[1], legacy[1], legacy[2]
    );
    let before = snapshot(&stats);
    assert_eq!(rows(&mut c, &sql).await.len(), 5);
    assert_eq!(delta(&stats, before), [("decode", 2), ("index", 3)]);
    h.stop().await;
}

#[tokio::test]
async fn context_resolves_legacy_reads_and_is_never_cached() {
    let h = Harness::start().await;
    let stats = h.proxy.router_stats.clone();
    let mut c = h.client().await;
    let mut r = reference().await;
    let s = seed();
    let id = s.channels["BIZ_CHANNEL"].legacy_ids[30];
    let want = rows(
        &mut r,
        &format!("SELECT * FROM t_order WHERE order_id = {id}"),
    )
    .await;
    for sql in [
        format!("SELECT * FROM t_order WHERE order_id = {id} AND channel = 'BIZ_CHANNEL'"),
        format!("SELECT * FROM t_order WHERE region = 'HK' AND order_id = {id}"),
        format!("/*route_key='BIZ_CHANNEL'*/ SELECT * FROM t_order WHERE order_id = {id}"),
        format!("SELECT * FROM t_order WHERE order_id = {id} /*region='TW'*/"),
        format!(
            "SELECT /*app='x%20y',route_key='BIZ_CHANNEL'*/ * FROM t_order WHERE order_id = {id}"
        ),
    ] {
        let before = snapshot(&stats);
        let got = rows(&mut c, &sql).await;
        let want_here = if sql.contains("region = 'HK'") {
            rows(&mut r, &sql).await
        } else {
            want.clone()
        };
        assert_same_rows(&got, &want_here, &sql);
        assert_eq!(delta(&stats, before), [("context", 1)], "{sql}");
    }
    // Context was not cached: a plain read goes to the index.
    let before = snapshot(&stats);
    let got = rows(
        &mut c,
        &format!("SELECT * FROM t_order WHERE order_id = {id}"),
    )
    .await;
    assert_same_rows(&got, &want, "plain read after context reads");
    assert_eq!(delta(&stats, before), [("index", 1)]);
    h.stop().await;
}

#[tokio::test]
async fn a_decodable_id_wins_over_a_contradicting_hint_and_the_conflict_is_counted() {
    let h = Harness::start().await;
    let stats = h.proxy.router_stats.clone();
    let mut c = h.client().await;
    let mut r = reference().await;
    let s = seed();
    let id = s.channels["EU_CHANNEL"].new_format_ids[40];
    let want = rows(
        &mut r,
        &format!("SELECT * FROM t_order WHERE order_id = {id}"),
    )
    .await;
    let conflicts = stats.context_conflicts();
    let before = snapshot(&stats);
    let got = rows(
        &mut c,
        &format!("/*route_key='CORP_CHANNEL'*/ SELECT * FROM t_order WHERE order_id = {id}"),
    )
    .await;
    assert_same_rows(&got, &want, "hinted read of a decodable id");
    assert_eq!(delta(&stats, before), [("decode", 1)]);
    assert_eq!(stats.context_conflicts(), conflicts + 1);
    h.stop().await;
}

#[tokio::test]
async fn unknown_legacy_ids_are_unresolved_and_negative_answers_expire() {
    let h = Harness::start().await;
    let stats = h.proxy.router_stats.clone();
    let mut c = h.client().await;
    let id = fresh_legacy_id();
    let sql = format!("SELECT * FROM t_order WHERE order_id = {id}");
    let before = snapshot(&stats);
    assert!(rows(&mut c, &sql).await.is_empty());
    assert_eq!(delta(&stats, before), [("unresolved", 1)]);

    // The order appears (written by another proxy or the tooling): after the negative
    // TTL (2 s in demo.toml) the read finds it on its shard.
    let _guard = Cleanup::new(&[id]);
    let shard = expected_shard("CORP_CHANNEL", id);
    insert_physical(shard, id, "CORP_CHANNEL", "appears later").await;
    let mut meta = backend(0).await;
    exec(
        &mut meta,
        &format!(
            "INSERT INTO order_meta.t_order_index (order_id, channel) VALUES ({id}, 'CORP_CHANNEL')"
        ),
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(2600)).await;
    let before = snapshot(&stats);
    let got = rows(&mut c, &sql).await;
    assert_eq!(
        got.len(),
        1,
        "the order is found once the negative entry expired"
    );
    assert_eq!(delta(&stats, before), [("index", 1)]);
    h.stop().await;
}

#[tokio::test]
async fn a_dba_sees_the_layer_counters_through_sql() {
    use mysql_async::prelude::*;
    let h = Harness::start().await;
    let seed = seed();
    let mut c = h.client().await;
    let before = route_stats(&mut c).await;
    let eu = &seed.channels["EU_CHANNEL"];
    let (new, legacy) = (eu.new_format_ids[3], eu.legacy_ids[3]);
    c.query_drop(format!("SELECT * FROM t_order WHERE order_id = {new}"))
        .await
        .unwrap();
    for _ in 0..2 {
        c.query_drop(format!("SELECT * FROM t_order WHERE order_id = {legacy}"))
            .await
            .unwrap();
    }
    let after = route_stats(&mut c).await;
    let moved = |k: &str| after[k] - before[k];
    assert_eq!(moved("resolved_by_decode"), 1);
    assert_eq!(moved("resolved_by_index"), 1);
    assert_eq!(moved("resolved_by_cache"), 1);
    assert_eq!(moved("decode_failed_before_route_key_since"), 2);
    assert_eq!(moved("unresolved"), 0);
}

#[tokio::test]
async fn a_refused_write_still_counts_its_resolution_and_its_index_lookup() {
    let h = Harness::start().await;
    let stats = h.proxy.router_stats.clone();
    let mut c = h.client().await;
    let lookups = || h.proxy.router_stats.lookups(LookupResult::NotFound);
    // A legacy id the index does not know: the write is refused, the id counted unresolved.
    let id = fresh_legacy_id();
    let (before, looked) = (snapshot(&stats), lookups());
    let sql = format!("UPDATE t_order SET status = 'PAID' WHERE order_id = {id}");
    assert_eq!(error_code(&mut c, &sql).await, 1526);
    assert_eq!(delta(&stats, before), [("unresolved", 1)]);
    assert_eq!(lookups() - looked, 1);
    // A hint contradicting the index: refused, the index's answer counted.
    let s = seed();
    let global = s.channels["GLOBAL_CHANNEL"].legacy_ids[3];
    let before = snapshot(&stats);
    let sql = format!(
        "UPDATE t_order /*route_key='EU_CHANNEL'*/ SET status = status WHERE order_id = {global}"
    );
    assert_eq!(error_code(&mut c, &sql).await, 1526);
    let moved = delta(&stats, before);
    assert!(
        moved == [("cache", 1)] || moved == [("index", 1)],
        "{moved:?}"
    );
    // EXPLAIN ROUTE of the refused write counts nothing.
    let before = snapshot(&stats);
    let _ = error_code(
        &mut c,
        &format!("EXPLAIN ROUTE UPDATE t_order SET status = 'PAID' WHERE order_id = {id}"),
    )
    .await;
    assert_eq!(delta(&stats, before), []);
    h.stop().await;
}
