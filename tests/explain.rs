//! `EXPLAIN ROUTE <statement>` (SPEC §8): one row per order id and shard with the layer
//! that placed it (decode, context, cache, index, probe, unresolved, scatter, unsharded,
//! issued), why its route key did not decode, its channel, shard, datasource, physical
//! table and the statement that shard would receive. It runs nothing: no counter moves, no
//! cache fills, no id is issued, no row is written; each shard's statement, run directly
//! on the backend, gives the proxy's answer. As text and as a prepared statement.

mod common;

use common::*;
use mysql_async::prelude::*;
use mysql_async::{Conn, Row};
use routekey_proxy::config::{Config, UnresolvedReads};
use routekey_proxy::id::{IdFields, IdLayout, SNOWFLAKE_EPOCH_MS};

/// One row of EXPLAIN ROUTE.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ex {
    order_id: Option<u64>,
    layer: String,
    decode_failure: Option<String>,
    channel: Option<String>,
    shard: Option<u32>,
    datasource: Option<String>,
    physical_table: Option<String>,
    statement: Option<String>,
}

/// An EXPLAIN ROUTE row without its statement: (order id, layer, decode failure, channel,
/// shard, datasource, physical table).
type Route<'a> = (
    Option<u64>,
    &'a str,
    Option<&'a str>,
    Option<&'a str>,
    Option<u32>,
    Option<&'a str>,
    Option<&'a str>,
);

impl Ex {
    fn from_row(r: Row) -> Self {
        assert_eq!(r.len(), 10, "EXPLAIN ROUTE has 10 columns");
        Ex {
            order_id: r.get(0).unwrap(),
            layer: r.get(1).unwrap(),
            decode_failure: r.get(2).unwrap(),
            channel: r.get(3).unwrap(),
            shard: r.get(4).unwrap(),
            datasource: r.get(5).unwrap(),
            physical_table: r.get(6).unwrap(),
            statement: r.get(7).unwrap(),
        }
    }

    /// The row without its statement.
    fn route(&self) -> Route<'_> {
        (
            self.order_id,
            &self.layer,
            self.decode_failure.as_deref(),
            self.channel.as_deref(),
            self.shard,
            self.datasource.as_deref(),
            self.physical_table.as_deref(),
        )
    }
}

/// EXPLAIN ROUTE of `sql` as text.
async fn explain(c: &mut Conn, sql: &str) -> Vec<Ex> {
    let got: Vec<Row> = c
        .query(format!("EXPLAIN ROUTE {sql}"))
        .await
        .unwrap_or_else(|e| panic!("EXPLAIN ROUTE {sql}\n  failed: {e}"));
    got.into_iter().map(Ex::from_row).collect()
}

/// `order_shards.t_order_N`.
fn table_of(shard: u32) -> String {
    physical(shard).1
}

/// The shards a row's statement reads: its shard, or (a combined statement) the numbers of
/// the physical tables it lists.
fn shards_of(row: &Ex) -> Vec<u32> {
    match row.shard {
        Some(n) => vec![n],
        None => row
            .physical_table
            .as_deref()
            .unwrap_or_default()
            .split(", ")
            .map(|t| t.rsplit('_').next().unwrap().parse().unwrap())
            .collect(),
    }
}

/// The datasource name of a shard.
fn ds_name(shard: u32) -> &'static str {
    ["ds0", "ds1"][datasource_of(shard)]
}

/// A route-key id of `code` minted at `unix_ms` (any time, even outside its window).
fn id_at(code: u8, unix_ms: u64) -> u64 {
    IdLayout::default()
        .compose(IdFields {
            timestamp: unix_ms - SNOWFLAKE_EPOCH_MS,
            worker: 3,
            route_key: u64::from(code),
            sequence: fresh_new_id(5) % 16384,
        })
        .unwrap()
}

/// Runs a step's statement directly on its backend (database `orders`, as the proxy's
/// connections); its rows.
async fn run_on_backend(row: &Ex) -> Vec<Values> {
    let ds = if row.datasource.as_deref() == Some("ds1") {
        1
    } else {
        0
    };
    let mut conn = backend(ds).await;
    exec(&mut conn, "USE orders").await;
    rows(&mut conn, row.statement.as_deref().expect("a statement")).await
}

/// SHOW ROUTEKEY STATS and the resolution, lookup, scatter, probe and id counters of
/// `/metrics`, as text lines.
async fn counters(h: &Harness, c: &mut Conn) -> Vec<String> {
    let mut out: Vec<String> = c
        .query::<(String, u64), _>("SHOW ROUTEKEY STATS")
        .await
        .unwrap()
        .into_iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    let text = h.metrics_text().await;
    let watched = [
        "route_resolutions",
        "decode_failures",
        "context_conflicts",
        "index_lookup",
        "cache_redis",
        "scatter_statements",
        "statement_fan_out",
        "probes",
        "merge_row_cap",
        "ids_issued",
    ];
    out.extend(
        text.lines()
            .filter(|l| !l.starts_with('#') && watched.iter().any(|w| l.contains(w)))
            .map(str::to_owned),
    );
    assert!(
        out.iter().any(|l| l.contains("route_resolutions")),
        "{text}"
    );
    out
}

/// Panics with the counter lines that changed.
fn assert_unchanged(before: &[String], after: &[String], what: &str) {
    let changed: Vec<_> = after.iter().filter(|l| !before.contains(l)).collect();
    assert!(changed.is_empty(), "{what}: {changed:#?}");
    assert_eq!(before.len(), after.len(), "{what}");
}

#[tokio::test]
async fn a_decoded_id_shows_its_shard_and_the_statement_that_shard_runs() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let s = seed();
    let names: Vec<String> = columns(
        &mut c,
        "EXPLAIN ROUTE SELECT 1 FROM t_order WHERE order_id = 1",
    )
    .await
    .into_iter()
    .map(|(n, _)| n)
    .collect();
    assert_eq!(
        names,
        [
            "order_id",
            "layer",
            "decode_failure",
            "channel",
            "shard",
            "datasource",
            "physical_table",
            "statement",
            "member",
            "branch"
        ]
    );
    for (name, ..) in CHANNELS {
        let id = s.channels[name].new_format_ids[7];
        let shard = expected_shard(name, id);
        for sql in [
            format!("SELECT * FROM t_order WHERE order_id = {id}"),
            format!(
                "SELECT o.order_id, i.sku, i.qty FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id WHERE o.order_id = {id} ORDER BY i.item_no"
            ),
            format!("select `status`, amount from orders.T_ORDER where `order_id` = '{id}'"),
        ] {
            let got = explain(&mut c, &sql).await;
            assert_eq!(got.len(), 1, "{sql}");
            let t = table_of(shard);
            assert_eq!(
                got[0].route(),
                (
                    Some(id),
                    "decode",
                    None,
                    Some(name),
                    Some(shard),
                    Some(ds_name(shard)),
                    Some(t.as_str())
                ),
                "{sql}"
            );
            let statement = got[0].statement.clone().unwrap();
            assert!(
                statement.contains(&format!("t_order_{shard}")),
                "{statement}"
            );
            // Exactly the statement, not the space that followed `EXPLAIN ROUTE`.
            assert!(
                statement.starts_with(|ch: char| ch.is_ascii_alphabetic()),
                "{statement:?}"
            );
            // The statement, run directly, answers what the proxy answers.
            let want = rows(&mut c, &sql).await;
            assert!(!want.is_empty(), "{sql}");
            assert_same_rows(&run_on_backend(&got[0]).await, &want, &statement);
        }
    }
    h.stop().await;
}

#[tokio::test]
async fn an_in_list_shows_one_row_per_id_and_each_shards_statement_returns_its_rows() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let s = seed();
    let ids = [
        s.channels["EU_CHANNEL"].new_format_ids[11],
        s.channels["CORP_CHANNEL"].new_format_ids[11],
        s.channels["CN_CHANNEL"].new_format_ids[11],
    ];
    let sql = format!(
        "SELECT order_id, user_id, amount FROM t_order WHERE order_id IN ({}, {}, {})",
        ids[0], ids[1], ids[2]
    );
    let got = explain(&mut c, &sql).await;
    let want: Vec<(u64, u32)> = [
        ("EU_CHANNEL", ids[0]),
        ("CORP_CHANNEL", ids[1]),
        ("CN_CHANNEL", ids[2]),
    ]
    .iter()
    .map(|(n, id)| (*id, expected_shard(n, *id)))
    .collect();
    let seen: Vec<(u64, u32)> = got
        .iter()
        .map(|r| (r.order_id.unwrap(), r.shard.unwrap()))
        .collect();
    assert_eq!(seen, want);
    assert!(got.iter().all(|r| r.layer == "decode"));
    let mut union = Vec::new();
    for row in &got {
        let part = run_on_backend(row).await;
        assert_eq!(part.len(), 1, "{:?}", row.statement);
        assert_eq!(show(&part[0][0]), row.order_id.unwrap().to_string());
        union.extend(part);
    }
    union.sort_by_cached_key(|r| r.iter().map(show).collect::<Vec<_>>());
    assert_same_rows(&union, &sorted_rows(&mut c, &sql).await, &sql);
    h.stop().await;
}

#[tokio::test]
async fn legacy_ids_show_context_index_cache_and_unresolved_layers_with_their_decode_failure() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    // Code 3 (BIZ) bits, but minted in 2023: before BIZ's route_key_since.
    let id = fresh_legacy_id_with_code(3);
    let _guard = Cleanup::new(&[id]);
    let biz = expected_shard("BIZ_CHANNEL", id);
    let tb = table_of(biz);
    let sql = format!("SELECT * FROM t_order WHERE order_id = {id}");
    let before = Some("before_route_key_since");
    let at_biz = |layer| -> Route<'_> {
        let ds = Some(ds_name(biz));
        (
            Some(id),
            layer,
            before,
            Some("BIZ_CHANNEL"),
            Some(biz),
            ds,
            Some(&tb),
        )
    };
    // Not in the index: unresolved, answered by the first shard with the id nulled.
    let got = explain(&mut c, &sql).await;
    let t0 = table_of(0);
    assert_eq!(got.len(), 1);
    assert_eq!(
        got[0].route(),
        (
            Some(id),
            "unresolved",
            before,
            None,
            Some(0),
            Some("ds0"),
            Some(t0.as_str())
        )
    );
    assert!(run_on_backend(&got[0]).await.is_empty());
    // Context: a region predicate, a channel predicate, a hint.
    for hinted in [
        format!("{sql} AND region = 'TW'"),
        format!("{sql} AND channel = 'BIZ_CHANNEL'"),
        format!("{sql} /*region='HK'*/"),
        format!("SELECT /*route_key='BIZ_CHANNEL'*/ * FROM t_order WHERE order_id = {id}"),
    ] {
        let got = explain(&mut c, &hinted).await;
        assert_eq!(got.len(), 1, "{hinted}");
        assert_eq!(got[0].route(), at_biz("context"), "{hinted}");
    }
    // The index knows it: index, and EXPLAIN fills no cache; a read does.
    insert_physical(biz, id, "BIZ_CHANNEL", "legacy").await;
    let mut meta = backend(0).await;
    exec(
        &mut meta,
        &format!(
            "INSERT INTO order_meta.t_order_index (order_id, channel) VALUES ({id}, 'BIZ_CHANNEL')"
        ),
    )
    .await;
    // The negative answer of the first EXPLAIN was not cached either: index at once.
    for _ in 0..2 {
        let got = explain(&mut c, &sql).await;
        assert_eq!(got[0].route(), at_biz("index"));
    }
    let index_hits = h
        .proxy
        .router_stats
        .layer(routekey_proxy::route::Layer::Index);
    let want = rows(&mut c, &sql).await;
    assert_eq!(want.len(), 1);
    assert_eq!(
        h.proxy
            .router_stats
            .layer(routekey_proxy::route::Layer::Index),
        index_hits + 1
    );
    let got = explain(&mut c, &sql).await;
    assert_eq!(got[0].route(), at_biz("cache"));
    assert_same_rows(&run_on_backend(&got[0]).await, &want, &sql);
    h.stop().await;
}

#[tokio::test]
async fn every_decode_failure_is_named() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let now = now_ms();
    let cases = [
        (fresh_legacy_id_with_code(0), "no_code"),
        (id_at(7, now - 60_000), "unassigned_code"),
        (id_at(12, now - 60_000), "unassigned_code"),
        (fresh_legacy_id_with_code(5), "before_route_key_since"),
        (id_at(4, now + 3_600_000), "timestamp_in_future"),
    ];
    for (id, failure) in cases {
        let got = explain(
            &mut c,
            &format!("SELECT order_id FROM t_order WHERE order_id = {id}"),
        )
        .await;
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].layer, "unresolved", "{id}");
        assert_eq!(got[0].decode_failure.as_deref(), Some(failure), "{id}");
    }
    h.stop().await;
}

#[tokio::test]
async fn scatter_and_unsharded_statements_show_their_shards_and_datasource() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let mut r = reference().await;
    let sql = "SELECT order_id, amount FROM t_order WHERE user_id = 150";
    // One row per statement sent: until the shape's columns are described (it has not
    // run yet), the first shard alone, then each datasource's other shards in one.
    let got = explain(&mut c, sql).await;
    let shards: Vec<Vec<u32>> = got.iter().map(shards_of).collect();
    assert_eq!(
        shards,
        [vec![0], (1..10).collect::<Vec<_>>(), (10..20).collect()]
    );
    for row in &got {
        let first = shards_of(row)[0];
        let tables: Vec<String> = shards_of(row).into_iter().map(table_of).collect();
        let channel = CHANNELS
            .iter()
            .find(|ch| (ch.2..ch.2 + 4).contains(&first))
            .unwrap()
            .0;
        assert_eq!(
            row.route(),
            (
                None,
                "scatter",
                None,
                (row.shard.is_some()).then_some(channel),
                row.shard,
                Some(ds_name(first)),
                Some(tables.join(", ").as_str())
            )
        );
    }
    // Once run, one statement per datasource.
    let _ = rows(&mut c, sql).await;
    let described: Vec<Vec<u32>> = explain(&mut c, sql).await.iter().map(shards_of).collect();
    assert_eq!(described, [(0..10).collect::<Vec<_>>(), (10..20).collect()]);
    // Each shard's statement, run directly: together the proxy's (and the reference's) answer.
    let mut union = Vec::new();
    for row in &got {
        union.extend(run_on_backend(row).await);
    }
    union.sort_by_cached_key(|r| r.iter().map(show).collect::<Vec<_>>());
    assert!(!union.is_empty());
    assert_same_rows(&union, &sorted_rows(&mut c, sql).await, sql);
    assert_same_rows(&union, &sorted_rows(&mut r, sql).await, sql);

    let got = explain(&mut c, "SELECT COUNT(*) FROM t_merchant").await;
    assert_eq!(got.len(), 1);
    assert_eq!(
        got[0].route(),
        (None, "unsharded", None, None, None, Some("ds0"), None)
    );
    let want = rows(&mut c, "SELECT COUNT(*) FROM t_merchant").await;
    assert_eq!(run_on_backend(&got[0]).await, want);
    h.stop().await;
}

/// The demo configuration with probes for unresolved reads.
fn probing() -> Config {
    let mut config = config();
    config.sharding.unresolved_reads = UnresolvedReads::Probe;
    config
}

#[tokio::test]
async fn an_unresolved_id_under_probe_shows_every_shard_and_probes_nothing() {
    let h = Harness::start_with(probing()).await;
    let mut c = h.client().await;
    let id = fresh_legacy_id_with_code(2);
    let _guard = Cleanup::new(&[id]);
    let shard = expected_shard("GLOBAL_CHANNEL", id);
    insert_physical(shard, id, "GLOBAL_CHANNEL", "probe me").await;
    let sql = format!("SELECT order_id, note FROM t_order WHERE order_id = {id}");
    let before = counters(&h, &mut c).await;
    for _ in 0..2 {
        // One row per statement sent (every shard of a datasource in one, the first shard
        // alone while the shape's columns are not described): together every shard.
        let got = explain(&mut c, &sql).await;
        let shards: Vec<u32> = got.iter().flat_map(shards_of).collect();
        assert_eq!(shards, (0..20).collect::<Vec<_>>());
        for row in &got {
            assert_eq!((row.order_id, row.layer.as_str()), (Some(id), "probe"));
            let tables: Vec<String> = shards_of(row).into_iter().map(table_of).collect();
            assert_eq!(row.physical_table, Some(tables.join(", ")));
            let found = run_on_backend(row).await.len();
            assert_eq!(
                found,
                usize::from(shards_of(row).contains(&shard)),
                "{:?}",
                row.statement
            );
        }
    }
    assert_unchanged(
        &before,
        &counters(&h, &mut c).await,
        "EXPLAIN probed or counted",
    );
    // Now really probed, then cached.
    assert_eq!(
        show_rows(&rows(&mut c, &sql).await),
        [format!("{id} | probe me")]
    );
    let got = explain(&mut c, &sql).await;
    assert_eq!(got.len(), 1);
    assert_eq!(
        (got[0].layer.as_str(), got[0].shard),
        ("cache", Some(shard))
    );
    h.stop().await;
}

#[tokio::test]
async fn an_insert_without_an_order_id_shows_issued_rows_and_issues_nothing() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let user = 910_000_500u64;
    let sql = format!(
        "INSERT INTO t_order (channel, region, user_id, amount, status, created_at) VALUES \
         ('EU_CHANNEL', 'GB', {user}, 1.00, 'NEW', NOW()), ('CN_CHANNEL', 'CN', {user}, 1.00, 'NEW', NOW())"
    );
    let before = counters(&h, &mut c).await;
    let got = explain(&mut c, &sql).await;
    let routes: Vec<_> = got.iter().map(Ex::route).collect();
    assert_eq!(
        routes,
        [
            (None, "issued", None, Some("EU_CHANNEL"), None, None, None),
            (None, "issued", None, Some("CN_CHANNEL"), None, None, None),
        ]
    );
    let got = explain(&mut c, &format!("/*region='KR'*/ INSERT INTO t_order (region, user_id, amount, status, created_at) VALUES ('KR', {user}, 1, 'NEW', NOW())")).await;
    assert_eq!(got.len(), 1);
    assert_eq!(
        got[0].route(),
        (None, "issued", None, Some("CORP_CHANNEL"), None, None, None)
    );
    assert_unchanged(
        &before,
        &counters(&h, &mut c).await,
        "EXPLAIN issued an id or counted",
    );
    let last: Option<u64> = c.query_first("SELECT LAST_INSERT_ID()").await.unwrap();
    assert_eq!(last, Some(0));
    let written: Option<u64> = c
        .query_first(format!(
            "SELECT COUNT(*) FROM t_order WHERE user_id = {user}"
        ))
        .await
        .unwrap();
    assert_eq!(written, Some(0));
    h.stop().await;
}

#[tokio::test]
async fn explaining_writes_writes_nothing_and_moves_no_counter() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let new = fresh_new_id(1);
    let legacy = fresh_legacy_id();
    let existing = fresh_new_id(5);
    let _guard = Cleanup::new(&[new, legacy, existing]);
    exec(&mut c, &insert_order_sql(existing, "EU_CHANNEL", "before")).await;
    let shard = expected_shard("EU_CHANNEL", existing);
    let before = counters(&h, &mut c).await;
    let statements = [
        insert_order_sql(new, "CN_CHANNEL", "explained"),
        insert_order_sql(legacy, "CORP_CHANNEL", "explained"),
        format!("UPDATE t_order SET note = 'explained' WHERE order_id = {existing}"),
        format!("DELETE FROM t_order WHERE order_id = {existing}"),
        format!("DELETE FROM t_order_item WHERE order_id = {existing}"),
    ];
    let mut explained = Vec::new();
    for sql in &statements {
        explained.push(explain(&mut c, sql).await);
    }
    let cn = expected_shard("CN_CHANNEL", new);
    let corp = expected_shard("CORP_CHANNEL", legacy);
    assert_eq!(explained[0][0].route().0, Some(new));
    assert_eq!(
        (explained[0][0].layer.as_str(), explained[0][0].shard),
        ("decode", Some(cn))
    );
    assert_eq!(
        (explained[1][0].layer.as_str(), explained[1][0].shard),
        ("context", Some(corp))
    );
    for e in &explained[2..] {
        assert_eq!(
            (e.len(), e[0].layer.as_str(), e[0].shard),
            (1, "decode", Some(shard))
        );
    }
    let item_table = physical(shard).2;
    assert!(
        explained[4][0]
            .statement
            .as_deref()
            .unwrap()
            .contains(item_table.split('.').nth(1).unwrap())
    );
    assert_eq!(
        explained[4][0].physical_table.as_deref(),
        Some(item_table.as_str())
    );
    assert_unchanged(
        &before,
        &counters(&h, &mut c).await,
        "EXPLAIN of writes counted",
    );
    assert_eq!(placement(new).await, (vec![], vec![]));
    assert_eq!(placement(legacy).await, (vec![], vec![]));
    assert_eq!(index_channel(legacy).await, None);
    let row = physical_row(shard, existing).await.expect("still there");
    assert_eq!(show(&row[6]), "before");
    h.stop().await;
}

#[tokio::test]
async fn explain_route_refuses_what_running_would_refuse() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let legacy = fresh_legacy_id();
    for (sql, code) in [
        (
            "EXPLAIN ROUTE SELECT * FROM t_order WHERE user_id = 3 /*scatter='refuse'*/".to_owned(),
            1235,
        ),
        (
            "EXPLAIN ROUTE UPDATE t_order SET note = 'x' WHERE user_id = 3".to_owned(),
            1235,
        ),
        (
            format!("EXPLAIN ROUTE UPDATE t_order SET note = 'x' WHERE order_id = {legacy}"),
            1526,
        ),
        ("EXPLAIN ROUTE SET NAMES utf8mb4".to_owned(), 1064),
    ] {
        assert_eq!(error_code(&mut c, &sql).await, code, "{sql}");
    }
    assert_usable(&mut c).await;
    h.stop().await;
}

#[tokio::test]
async fn hints_before_the_explained_statements_verb_are_read() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    // Run, the statement honours a hint before its verb; explained, it must too.
    let id = fresh_legacy_id_with_code(3);
    let biz = expected_shard("BIZ_CHANNEL", id);
    let sql = format!("/*route_key='BIZ_CHANNEL'*/ SELECT * FROM t_order WHERE order_id = {id}");
    let got = explain(&mut c, &sql).await;
    assert_eq!(got.len(), 1, "{sql}");
    assert_eq!(
        (got[0].layer.as_str(), got[0].shard),
        ("context", Some(biz)),
        "EXPLAIN ROUTE {sql}"
    );
    let refuse = "/*scatter='refuse'*/ SELECT COUNT(*) FROM t_order WHERE user_id = 3";
    assert_eq!(error_code(&mut c, refuse).await, 1235, "{refuse}");
    assert_eq!(
        error_code(&mut c, &format!("EXPLAIN ROUTE {refuse}")).await,
        1235,
        "EXPLAIN ROUTE {refuse}"
    );
    h.stop().await;
}

#[tokio::test]
async fn explain_route_prepared_with_parameters_binds_them() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let s = seed();
    let id = s.channels["GLOBAL_CHANNEL"].new_format_ids[13];
    let shard = expected_shard("GLOBAL_CHANNEL", id);
    let st = c
        .prep("EXPLAIN ROUTE SELECT order_id, note FROM t_order WHERE order_id = ?")
        .await
        .unwrap();
    let got: Vec<Row> = c.exec(&st, (id,)).await.unwrap();
    let got: Vec<Ex> = got.into_iter().map(Ex::from_row).collect();
    let t = table_of(shard);
    assert_eq!(got.len(), 1);
    assert_eq!(
        got[0].route(),
        (
            Some(id),
            "decode",
            None,
            Some("GLOBAL_CHANNEL"),
            Some(shard),
            Some(ds_name(shard)),
            Some(t.as_str())
        )
    );
    assert!(
        got[0].statement.as_deref().unwrap().contains('?'),
        "{:?}",
        got[0].statement
    );
    // The same prepared statement with another id routes it anew.
    let other = s.channels["CORP_CHANNEL"].new_format_ids[13];
    let got: Vec<Row> = c.exec(&st, (other,)).await.unwrap();
    let got: Vec<Ex> = got.into_iter().map(Ex::from_row).collect();
    assert_eq!(
        (got[0].order_id, got[0].shard),
        (Some(other), Some(expected_shard("CORP_CHANNEL", other)))
    );

    // A legacy id with its region as a parameter: context.
    let legacy = fresh_legacy_id_with_code(1);
    let got: Vec<Row> = c
        .exec(
            "EXPLAIN ROUTE SELECT * FROM t_order WHERE order_id = ? AND region = ?",
            (legacy, "CN"),
        )
        .await
        .unwrap();
    let got: Vec<Ex> = got.into_iter().map(Ex::from_row).collect();
    let cn = expected_shard("CN_CHANNEL", legacy);
    assert_eq!(got[0].route().1, "context");
    assert_eq!(
        (got[0].channel.as_deref(), got[0].shard),
        (Some("CN_CHANNEL"), Some(cn))
    );
    // A scatter narrowed by a channel parameter.
    let got: Vec<Row> = c
        .exec(
            "EXPLAIN ROUTE SELECT COUNT(*) FROM t_order WHERE channel = ? AND user_id > ?",
            ("CORP_CHANNEL", 10),
        )
        .await
        .unwrap();
    // One row per statement sent: the first shard alone until the shape's columns are
    // described, then the channel's other shards (all on ds1) in one.
    let got: Vec<Ex> = got.into_iter().map(Ex::from_row).collect();
    let shards: Vec<Vec<u32>> = got.iter().map(shards_of).collect();
    assert_eq!(shards, [vec![16], vec![17, 18, 19]]);
    assert!(
        got.iter()
            .all(|r| r.channel.as_deref() == Some("CORP_CHANNEL"))
    );
    h.stop().await;
}
