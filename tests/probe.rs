//! Order ids no layer resolves, looked for on every shard of the table
//! (`sharding.unresolved_reads = "probe"`, SPEC §4.4): found on exactly one shard, the
//! row is answered and its channel cached (never written to the index table); found
//! nowhere, an empty answer and a negative cache entry; found on several shards, no guess.

mod common;

use common::*;
use routekey_proxy::config::{Config, UnresolvedReads};
use routekey_proxy::route::Layer;

/// The demo configuration with probes for unresolved reads.
fn probing() -> Config {
    let mut config = config();
    config.sharding.unresolved_reads = UnresolvedReads::Probe;
    config
}

#[tokio::test]
async fn a_probe_finds_an_id_on_one_shard_answers_it_and_learns_its_channel() {
    let h = Harness::start_with(probing()).await;
    let stats_by_layer = h.proxy.router_stats.clone();
    let mut c = h.client().await;
    let id = fresh_legacy_id();
    let _guard = Cleanup::new(&[id]);
    let shard = expected_shard("BIZ_CHANNEL", id);
    insert_physical(shard, id, "BIZ_CHANNEL", "probed").await;
    let sql = format!("SELECT order_id, channel, note FROM t_order WHERE order_id = {id}");
    let before = route_stats(&mut c).await;
    let got = rows(&mut c, &sql).await;
    assert_eq!(show_rows(&got), [format!("{id} | BIZ_CHANNEL | probed")]);
    let after = route_stats(&mut c).await;
    assert_eq!(after["probes_found"] - before["probes_found"], 1);
    assert_eq!(after["probes_not_found"], before["probes_not_found"]);
    // The second read is served from the cache, without a probe.
    let cached = stats_by_layer.layer(Layer::Cache);
    let got = rows(&mut c, &sql).await;
    assert_eq!(show_rows(&got), [format!("{id} | BIZ_CHANNEL | probed")]);
    assert_eq!(stats_by_layer.layer(Layer::Cache), cached + 1);
    assert_eq!(
        route_stats(&mut c).await["probes_found"],
        after["probes_found"]
    );
    let explained = rows(&mut c, &format!("EXPLAIN ROUTE {sql}")).await;
    assert_eq!(explained.len(), 1);
    assert_eq!(show(&explained[0][1]), "cache");
    assert_eq!(show(&explained[0][4]), shard.to_string());
    // Nothing was written to the index table: the probe's answer is a cache entry only.
    assert_eq!(index_channel(id).await, None);
    h.stop().await;
}

#[tokio::test]
async fn a_probe_that_finds_nothing_answers_empty_and_is_not_repeated_at_once() {
    let h = Harness::start_with(probing()).await;
    let mut c = h.client().await;
    let id = fresh_legacy_id();
    let before = route_stats(&mut c).await;
    let sql = format!("SELECT * FROM t_order WHERE order_id = {id}");
    assert!(rows(&mut c, &sql).await.is_empty());
    let agg = format!("SELECT COUNT(*), SUM(amount) FROM t_order WHERE order_id = {id}");
    let after = route_stats(&mut c).await;
    assert_eq!(after["probes_not_found"] - before["probes_not_found"], 1);
    assert_eq!(show_rows(&rows(&mut c, &agg).await), ["0 | NULL"]);
    // The negative answer is cached: no second probe within cache.negative_ttl.
    assert_eq!(
        route_stats(&mut c).await["probes_not_found"],
        after["probes_not_found"]
    );
    // An IN list with a decodable id probes only the unknown one and returns the other.
    let known = seed().channels["CN_CHANNEL"].new_format_ids[9];
    let other = fresh_legacy_id();
    let got = rows(
        &mut c,
        &format!("SELECT order_id FROM t_order WHERE order_id IN ({known}, {other})"),
    )
    .await;
    assert_eq!(show_rows(&got), [known.to_string()]);
    let last = route_stats(&mut c).await;
    assert_eq!(last["probes_not_found"] - after["probes_not_found"], 1);
    h.stop().await;
}

#[tokio::test]
async fn a_probe_that_finds_an_id_on_two_shards_returns_both_rows_and_learns_nothing() {
    let h = Harness::start_with(probing()).await;
    let mut c = h.client().await;
    let id = fresh_legacy_id();
    let _guard = Cleanup::new(&[id]);
    let (eu, corp) = (
        expected_shard("EU_CHANNEL", id),
        expected_shard("CORP_CHANNEL", id),
    );
    insert_physical(eu, id, "EU_CHANNEL", "one").await;
    insert_physical(corp, id, "CORP_CHANNEL", "two").await;
    let sql = format!("SELECT note FROM t_order WHERE order_id = {id} ORDER BY note");
    let before = route_stats(&mut c).await;
    // The rule: found on several shards, every row is returned (what one table
    // holding the rows would answer), no route is learned, and it is counted.
    for attempt in 1..=2 {
        let rows = try_rows(&mut c, &sql)
            .await
            .unwrap_or_else(|e| panic!("attempt {attempt}: {e}"));
        assert_eq!(
            show_rows(&rows),
            vec!["one".to_owned(), "two".to_owned()],
            "attempt {attempt}"
        );
        // Nothing was cached: the second read probes again.
        let now = route_stats(&mut c).await;
        assert_eq!(
            now["probes_ambiguous"] - before["probes_ambiguous"],
            attempt,
            "attempt {attempt}"
        );
    }
    assert_eq!(index_channel(id).await, None);
    assert_usable(&mut c).await;
    h.stop().await;
}
