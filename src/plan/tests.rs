//! The planner without sockets: an in-memory index table, statements from text.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use std::sync::Arc;

use super::*;
use crate::config::{ChannelId, Config};
use crate::error::ProxyError;
use crate::id::{IdFields, IdLayout};
use crate::rewrite::SessionValues;
use crate::route::index::{IndexError, IndexTable};
use crate::route::value::StatementValues;
use crate::route::{Layer, Router};
use crate::sql::analyze::{AnalyzeContext, analyze};
use crate::sql::charset::Decoding;
use crate::sql::hints::route_hints;
use crate::sql::lexer::{LexMode, lex};

/// An index table in memory, counting lookups.
#[derive(Default)]
struct MemoryIndex {
    rows: Mutex<HashMap<u64, String>>,
    lookups: AtomicUsize,
}

impl IndexTable for MemoryIndex {
    async fn lookup(&self, order_id: u64) -> Result<Option<String>, IndexError> {
        self.lookups.fetch_add(1, Ordering::Relaxed);
        Ok(self.rows.lock().unwrap().get(&order_id).cloned())
    }

    async fn insert(&self, order_id: u64, channel: &str) -> Result<String, IndexError> {
        let mut rows = self.rows.lock().unwrap();
        Ok(rows
            .entry(order_id)
            .or_insert_with(|| channel.to_owned())
            .clone())
    }
}

const NOW: u64 = 1_795_000_000_000; // late 2026
const JAN_2023: u64 = 1_672_531_200_000;

fn router() -> Router<MemoryIndex> {
    let config = Config::from_toml(include_str!("../../config/demo.toml"), "demo.toml").unwrap();
    Router::new(Arc::new(config), MemoryIndex::default())
}

/// The demo's configuration with one statement per shard (`combine_shards = false`).
fn per_shard_router() -> Router<MemoryIndex> {
    let toml = include_str!("../../config/demo.toml")
        .replace("[sharding]\n", "[sharding]\ncombine_shards = false\n");
    let config = Config::from_toml(&toml, "demo.toml").unwrap();
    assert!(!config.sharding.combine_shards);
    Router::new(Arc::new(config), MemoryIndex::default())
}

/// A route-key id of `code` minted at `NOW - 1 day`, with the given sequence.
fn new_id(code: u64, seq: u64) -> u64 {
    IdLayout::default()
        .compose(IdFields {
            timestamp: NOW - 86_400_000 - crate::id::SNOWFLAKE_EPOCH_MS,
            worker: 3,
            route_key: code,
            sequence: seq,
        })
        .unwrap()
}

/// A classic Snowflake id from 2023 whose bits 17-14 hold `code`.
fn legacy_id(code: u64, seq: u64) -> u64 {
    ((JAN_2023 - crate::id::SNOWFLAKE_EPOCH_MS) << 22) | ((code << 2) << 12) | seq
}

/// Plans `sql` and applies its effects, as running it would.
async fn route(r: &Router<MemoryIndex>, sql: &str) -> Result<Plan, ProxyError> {
    let plan = plan_only(r, sql).await?;
    r.apply(&plan.effects).await;
    Ok(plan)
}

/// Plans `sql` without applying anything (EXPLAIN ROUTE).
async fn plan_only(r: &Router<MemoryIndex>, sql: &str) -> Result<Plan, ProxyError> {
    plan_with(
        r,
        sql,
        ScatterPolicy {
            reads: true,
            writes: false,
        },
    )
    .await
}

/// Plans `sql` under a user's scatter policy, applying nothing.
async fn plan_with(
    r: &Router<MemoryIndex>,
    sql: &str,
    scatter: ScatterPolicy,
) -> Result<Plan, ProxyError> {
    let lexed = lex(sql.as_bytes(), LexMode::default());
    let cx = AnalyzeContext {
        config: r.config(),
        db_is_logical: true,
        decoding: Decoding::Utf8,
        pipes_as_concat: false,
    };
    let analysis = analyze(sql.as_bytes(), &lexed, cx).unwrap().analysis;
    let values = StatementValues {
        sql: sql.as_bytes(),
        tokens: &lexed.tokens,
        mode: LexMode::default(),
        params: &[],
        last_insert_id: 0,
        generated: &[],
    };
    let hints = route_hints(sql.as_bytes(), &lexed.comments).unwrap();
    let session = SessionValues::default();
    let inputs = Inputs {
        text: Text {
            sql: sql.as_bytes(),
            tokens: &lexed.tokens,
            prefix: b"",
        },
        analysis: &analysis,
        values,
        hints: &hints,
        session: &session,
        binary: false,
        scatter,
        now_ms: NOW,
        scope: None,
    };
    plan(r, &inputs).await.map_err(ProxyError::from)
}

fn shards(plan: &Plan) -> Vec<u32> {
    plan.steps.iter().flat_map(|s| s.shards.clone()).collect()
}

fn error_code(e: ProxyError) -> u16 {
    e.to_packet_parts().0
}

#[tokio::test]
async fn decodable_ids_route_by_their_bits_without_lookups() {
    let r = router();
    for (code, base) in [(5u64, 0u32), (2, 4), (1, 8), (3, 12), (4, 16)] {
        for seq in 0..8 {
            let id = new_id(code, seq);
            let plan = route(&r, &format!("SELECT * FROM t_order WHERE order_id = {id}"))
                .await
                .unwrap();
            assert_eq!(shards(&plan), [base + (id % 4) as u32]);
        }
    }
    assert_eq!(r.index().lookups.load(Ordering::Relaxed), 0);
    assert_eq!(r.stats().layer(Layer::Decode), 40);
}

#[tokio::test]
async fn decoded_id_wins_over_context_and_the_conflict_is_counted() {
    let r = router();
    let id = new_id(5, 1);
    let plan = route(
        &r,
        &format!("SELECT * FROM t_order WHERE order_id = {id} AND channel = 'CN_CHANNEL'"),
    )
    .await
    .unwrap();
    assert_eq!(shards(&plan), [(id % 4) as u32]);
    assert_eq!(r.stats().context_conflicts(), 1);
}

#[tokio::test]
async fn legacy_ids_are_never_routed_by_their_bits() {
    let r = router();
    // Bits 17-14 say EU, the index says CN.
    let id = legacy_id(5, 7);
    assert_eq!(IdLayout::default().route_key(id), 5);
    r.index()
        .rows
        .lock()
        .unwrap()
        .insert(id, "CN_CHANNEL".into());
    let sql = format!("SELECT * FROM t_order WHERE order_id = {id}");
    let plan = route(&r, &sql).await.unwrap();
    assert_eq!(shards(&plan), [8 + (id % 4) as u32]);
    // Second time from the cache.
    route(&r, &sql).await.unwrap();
    assert_eq!(r.index().lookups.load(Ordering::Relaxed), 1);
    assert_eq!(r.stats().layer(Layer::Index), 1);
    assert_eq!(r.stats().layer(Layer::Cache), 1);
}

#[tokio::test]
async fn reads_follow_context_before_the_index() {
    let r = router();
    let id = legacy_id(0, 1);
    let plan = route(
        &r,
        &format!("SELECT * FROM t_order WHERE order_id = {id} /*region='CN'*/"),
    )
    .await
    .unwrap();
    assert_eq!(shards(&plan), [8 + (id % 4) as u32]);
    assert_eq!(r.index().lookups.load(Ordering::Relaxed), 0);
    assert_eq!(r.stats().layer(Layer::Context), 1);
}

#[tokio::test]
async fn unresolved_reads_get_the_empty_answer_and_writes_are_refused() {
    let r = router();
    let id = legacy_id(0, 2);
    let plan = route(
        &r,
        &format!("SELECT COUNT(*) FROM t_order WHERE order_id = {id}"),
    )
    .await
    .unwrap();
    assert_eq!(plan.kind, PlanKind::Empty);
    assert_eq!(shards(&plan), [0]);
    let e = route(
        &r,
        &format!("UPDATE t_order SET status = 'x' WHERE order_id = {id}"),
    )
    .await
    .unwrap_err();
    assert_eq!(error_code(e), 1526);
    let e = route(
        &r,
        &format!(
            "DELETE FROM t_order WHERE order_id IN ({}, {id})",
            new_id(5, 1)
        ),
    )
    .await
    .unwrap_err();
    assert_eq!(error_code(e), 1526);
}

#[tokio::test]
async fn writes_consult_the_index_even_with_context() {
    let r = router();
    let id = legacy_id(0, 3);
    r.index()
        .rows
        .lock()
        .unwrap()
        .insert(id, "EU_CHANNEL".into());
    let e = route(
        &r,
        &format!(
            "UPDATE t_order SET status = 'x' WHERE order_id = {id} /*route_key='CN_CHANNEL'*/"
        ),
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("index table says"), "{e}");
    let plan = route(
        &r,
        &format!(
            "UPDATE t_order SET status = 'x' WHERE order_id = {id} AND channel = 'EU_CHANNEL'"
        ),
    )
    .await
    .unwrap();
    assert_eq!(shards(&plan), [(id % 4) as u32]);
    // An id the index does not know: the hint is followed, and counted.
    let unknown = legacy_id(0, 4);
    let plan = route(&r, &format!("UPDATE t_order SET status = 'x' WHERE order_id = {unknown} /*route_key='GLOBAL_CHANNEL'*/"))
        .await
        .unwrap();
    assert_eq!(shards(&plan), [4 + (unknown % 4) as u32]);
    assert_eq!(r.stats().hints_followed(), 1);
}

#[tokio::test]
async fn values_that_cannot_be_ids() {
    let r = router();
    let plan = route(&r, "SELECT * FROM t_order WHERE order_id = -5")
        .await
        .unwrap();
    assert_eq!(plan.kind, PlanKind::Empty);
    let plan = route(&r, "DELETE FROM t_order WHERE order_id IN (NULL, 1.5)")
        .await
        .unwrap();
    assert_eq!(plan.kind, PlanKind::NoRows);
    let e = route(&r, "SELECT * FROM t_order WHERE order_id = '12abc'")
        .await
        .unwrap_err();
    assert_eq!(error_code(e), 1292);
    let e = route(&r, "SELECT * FROM t_order WHERE order_id = 1 + 1")
        .await
        .unwrap_err();
    assert_eq!(error_code(e), 1235);
    let scatter = route(&r, "SELECT * FROM t_order WHERE status = 'PAID'")
        .await
        .unwrap();
    assert_eq!(scatter.kind, PlanKind::Scatter);
    assert_eq!(shards(&scatter).len(), 20);
}

#[tokio::test]
async fn in_lists_over_shards() {
    let r = router();
    let (a, b) = (new_id(5, 0), new_id(1, 1));
    let plan = route(
        &r,
        &format!("SELECT * FROM t_order WHERE order_id IN ({a}, {b})"),
    )
    .await
    .unwrap();
    assert_eq!(shards(&plan).len(), 2);
    assert!(plan.execution.merge().is_some());
    let e = route(
        &r,
        &format!("SELECT GROUP_CONCAT(note) FROM t_order WHERE order_id IN ({a}, {b})"),
    )
    .await
    .unwrap_err();
    assert_eq!(error_code(e), 1235);
    // Several ids on one shard may be ordered.
    let c = a + 4;
    route(
        &r,
        &format!("SELECT * FROM t_order WHERE order_id IN ({a}, {c}) ORDER BY amount"),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn inserts_split_by_shard_and_write_index_rows_for_legacy_ids() {
    let r = router();
    let (a, b) = (new_id(5, 0), new_id(5, 1));
    let legacy = legacy_id(0, 9);
    let plan = route(
        &r,
        &format!("INSERT INTO t_order (order_id, channel, region) VALUES ({a}, 'EU_CHANNEL', 'GB'), ({b}, 'EU_CHANNEL', 'GB'), ({legacy}, 'GLOBAL_CHANNEL', 'US')"),
    )
    .await
    .unwrap();
    assert_eq!(plan.ids.len(), 3);
    assert_eq!(plan.index_writes, vec![(legacy, ChannelId(1))]);
    // A region of another channel is the order's data, not a conflict (SPEC §4).
    let gb = new_id(2, 5);
    let plan = route(
        &r,
        &format!(
            "INSERT INTO t_order (order_id, channel, region) VALUES ({gb}, 'GLOBAL_CHANNEL', 'GB')"
        ),
    )
    .await
    .unwrap();
    assert_eq!(shards(&plan), [4 + (gb % 4) as u32]);
    // A channel value that contradicts the decoded id is refused.
    let e = route(
        &r,
        &format!(
            "INSERT INTO t_order (order_id, channel, region) VALUES ({gb}, 'EU_CHANNEL', 'GB')"
        ),
    )
    .await
    .unwrap_err();
    assert_eq!(error_code(e), 1526);
    // No id, no context: refused.
    let e = route(
        &r,
        &format!("INSERT INTO t_order (order_id, amount) VALUES ({legacy}, 1)"),
    )
    .await
    .unwrap_err();
    assert_eq!(error_code(e), 1526);
    // An index row naming another channel refuses the write.
    r.write_index(legacy, ChannelId(1)).await.unwrap();
    let e = r.write_index(legacy, ChannelId(0)).await.unwrap_err();
    assert_eq!(error_code(e), 1526);
}

#[tokio::test]
async fn updates_may_not_move_an_order() {
    let r = router();
    let id = new_id(5, 3);
    route(
        &r,
        &format!("UPDATE t_order SET order_id = {id}, region = 'FR' WHERE order_id = {id}"),
    )
    .await
    .unwrap();
    let e = route(
        &r,
        &format!("UPDATE t_order SET order_id = 1 WHERE order_id = {id}"),
    )
    .await
    .unwrap_err();
    assert_eq!(error_code(e), 1235);
    let e = route(
        &r,
        &format!("UPDATE t_order SET channel = 'CN_CHANNEL' WHERE order_id = {id}"),
    )
    .await
    .unwrap_err();
    assert_eq!(error_code(e), 1235);
    // The region is the order's data.
    route(
        &r,
        &format!("UPDATE t_order SET region = 'CN' WHERE order_id = {id}"),
    )
    .await
    .unwrap();
}

fn statements(plan: &Plan) -> Vec<String> {
    plan.steps
        .iter()
        .map(|s| String::from_utf8_lossy(&s.statement.sql).into_owned())
        .collect()
}

#[tokio::test]
async fn reads_without_an_order_id_scatter_over_every_shard_or_one_channel() {
    let r = per_shard_router();
    let plan = plan_only(&r, "SELECT COUNT(*) FROM t_order WHERE user_id = 7")
        .await
        .unwrap();
    assert_eq!(plan.kind, PlanKind::Scatter);
    assert_eq!(shards(&plan), (0..20).collect::<Vec<_>>());
    assert!(plan.execution.merge().is_some() && !plan.write);
    for (n, sql) in statements(&plan).iter().enumerate() {
        assert!(sql.contains(&format!("`t_order_{n}`")), "{sql}");
    }
    // A channel term narrows to its four shards; a region never narrows a scatter.
    let eu = plan_only(
        &r,
        "SELECT * FROM t_order WHERE channel = 'EU_CHANNEL' AND user_id = 7",
    )
    .await
    .unwrap();
    assert_eq!(shards(&eu), vec![0, 1, 2, 3]);
    let gb = plan_only(
        &r,
        "SELECT * FROM t_order WHERE region = 'GB' AND user_id = 7",
    )
    .await
    .unwrap();
    assert_eq!(shards(&gb).len(), 20);
    // A region beside a channel is data on reads too: the channel narrows.
    let corp_gb = plan_only(
        &r,
        "SELECT * FROM t_order WHERE channel = 'EU_CHANNEL' AND region = 'CN' AND user_id = 7",
    )
    .await
    .unwrap();
    assert_eq!(shards(&corp_gb), vec![0, 1, 2, 3]);
    // Two channels selecting no row: MySQL's empty answer, never a refusal nor a narrowing.
    let none = plan_only(
        &r,
        "SELECT * FROM t_order WHERE channel = 'EU_CHANNEL' AND channel = 'CN_CHANNEL'",
    )
    .await
    .unwrap();
    assert_eq!(shards(&none).len(), 20);
    // A hint that contradicts a predicate is still refused.
    let e = plan_only(
        &r,
        "/*route_key='CN_CHANNEL'*/ SELECT * FROM t_order WHERE channel = 'EU_CHANNEL'",
    )
    .await
    .unwrap_err();
    assert_eq!(error_code(e), 1526);
    // LIMIT n OFFSET o reaches each shard as LIMIT o+n.
    let top = plan_only(
        &r,
        "SELECT order_id FROM t_order ORDER BY created_at DESC LIMIT 10 OFFSET 5",
    )
    .await
    .unwrap();
    assert!(
        statements(&top).iter().all(|s| s.contains("LIMIT 15")),
        "{:?}",
        statements(&top)
    );
    // The user's policy refuses; the refusal is decided by the planner.
    let refuse = ScatterPolicy {
        reads: false,
        writes: false,
    };
    let e = plan_with(&r, "SELECT COUNT(*) FROM t_order", refuse)
        .await
        .unwrap_err();
    assert_eq!(error_code(e), 1235);
}

#[tokio::test]
async fn scatter_writes_stay_on_one_datasource_in_one_transaction() {
    let r = router();
    let sql = "UPDATE t_order SET status = 'ARCHIVED' WHERE channel = 'EU_CHANNEL' AND user_id = 7";
    let e = plan_only(&r, sql).await.unwrap_err();
    assert_eq!(error_code(e), 1235, "scatter_writes = refuse by default");
    let allow = ScatterPolicy {
        reads: true,
        writes: true,
    };
    let plan = plan_with(&r, sql, allow).await.unwrap();
    assert!(plan.write && plan.execution == crate::plan::Execution::Atomic);
    assert_eq!(shards(&plan), vec![0, 1, 2, 3]);
    // A refuse hint refuses the write; an allow hint never lifts the user's policy.
    let hinted = format!("/*scatter='refuse'*/ {sql}");
    let e = plan_with(&r, &hinted, allow).await.unwrap_err();
    assert_eq!(error_code(e), 1235, "{hinted}");
    let hinted = format!("/*scatter='allow'*/ {sql}");
    let e = plan_only(&r, &hinted).await.unwrap_err();
    assert_eq!(error_code(e), 1235, "{hinted}");
    // CN_CHANNEL's shards lie on both datasources; all channels even more so: one
    // atomic plan over both (transactions.cross_datasource = "atomic", the default).
    let both = [
        "UPDATE t_order SET status = 'X' WHERE channel = 'CN_CHANNEL'",
        "DELETE FROM t_order WHERE user_id = 7",
    ];
    for sql in both {
        let plan = plan_with(&r, sql, allow).await.unwrap();
        assert!(
            plan.write && plan.execution == crate::plan::Execution::Atomic,
            "{sql}"
        );
        let mut datasources: Vec<_> = plan.steps.iter().map(|s| s.datasource.0).collect();
        datasources.dedup();
        assert_eq!(datasources, vec![0, 1], "{sql}");
    }
    let sql = "DELETE FROM t_order WHERE channel = 'EU_CHANNEL' ORDER BY created_at LIMIT 1";
    let e = plan_with(&r, sql, allow).await.unwrap_err();
    assert_eq!(error_code(e), 1235, "{sql}");
    // With cross_datasource = "refuse" they are refused, naming the setting.
    let toml = include_str!("../../config/demo.toml").replace(
        "[sharding]\n",
        "[transactions]\ncross_datasource = \"refuse\"\n\n[sharding]\n",
    );
    let config = Config::from_toml(&toml, "demo.toml").unwrap();
    let refusing = Router::new(Arc::new(config), MemoryIndex::default());
    for sql in both {
        let e = plan_with(&refusing, sql, allow).await.unwrap_err();
        assert!(e.to_string().contains("cross_datasource"), "{sql}: {e}");
        assert_eq!(error_code(e), 1235, "{sql}");
    }
}

#[tokio::test]
async fn a_region_is_data_on_writes_once_the_id_or_the_channel_names_a_channel() {
    let r = router();
    let id = new_id(2, 9); // GLOBAL_CHANNEL, shards 4-7
    let insert = |channel: &str| {
        format!(
            "INSERT INTO t_order (order_id, channel, region, user_id, amount, status, created_at) \
             VALUES ({id}, '{channel}', 'GB', 1, 1.00, 'NEW', NOW())"
        )
    };
    let plan = plan_only(&r, &insert("GLOBAL_CHANNEL")).await.unwrap();
    assert_eq!(shards(&plan), vec![4 + (id % 4) as u32]);
    // Only a channel that contradicts the decoded id is refused.
    let e = plan_only(&r, &insert("EU_CHANNEL")).await.unwrap_err();
    assert_eq!(error_code(e), 1526);
}

#[tokio::test]
async fn planning_is_pure_until_its_effects_are_applied() {
    let r = router();
    let id = legacy_id(5, 1);
    r.index()
        .rows
        .lock()
        .unwrap()
        .insert(id, "CN_CHANNEL".into());
    let sql = format!("SELECT * FROM t_order WHERE order_id = {id}");
    for _ in 0..2 {
        let plan = plan_only(&r, &sql).await.unwrap();
        assert_eq!(plan.ids[0].layer, RouteLayer::Index);
    }
    assert_eq!(
        r.index().lookups.load(Ordering::Relaxed),
        2,
        "nothing was cached"
    );
    route(&r, &sql).await.unwrap();
    let cached = plan_only(&r, &sql).await.unwrap();
    assert_eq!(cached.ids[0].layer, RouteLayer::Cache);
    assert_eq!(r.index().lookups.load(Ordering::Relaxed), 3);
}

#[tokio::test]
async fn explain_rows_name_each_layer() {
    let r = router();
    let config = r.config().clone();
    let layer = |plan: &Plan| -> Vec<&'static str> {
        explain::rows(plan, &config)
            .iter()
            .map(|row| row.layer)
            .collect()
    };
    let decoded = plan_only(
        &r,
        &format!("SELECT * FROM t_order WHERE order_id = {}", new_id(5, 2)),
    )
    .await
    .unwrap();
    assert_eq!(layer(&decoded), ["decode"]);
    let context = format!(
        "SELECT * FROM t_order WHERE order_id = {} AND channel = 'BIZ_CHANNEL'",
        legacy_id(5, 3)
    );
    let context = plan_only(&r, &context).await.unwrap();
    assert_eq!(layer(&context), ["context"]);
    let rows = explain::rows(&context, &config);
    assert_eq!(rows[0].channel.as_deref(), Some("BIZ_CHANNEL"));
    assert_eq!(rows[0].decode_failure, Some("before_route_key_since"));
    let unresolved = plan_only(
        &r,
        &format!("SELECT * FROM t_order WHERE order_id = {}", legacy_id(1, 4)),
    )
    .await
    .unwrap();
    assert_eq!(layer(&unresolved), ["unresolved"]);
    let scatter = plan_only(&r, "SELECT COUNT(*) FROM t_order_item")
        .await
        .unwrap();
    // One row per statement sent: a datasource's, with the tables of its shards.
    let rows = explain::rows(&scatter, &config);
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|row| row.layer == "scatter"
        && row.order_id.is_none()
        && row.shard.is_none()
        && row.channel.is_none()));
    let tables = |from, to| {
        (from..=to)
            .map(|n| format!("order_shards.t_order_item_{n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    assert_eq!(rows[0].physical_table, Some(tables(0, 9)));
    assert_eq!(rows[1].physical_table, Some(tables(10, 19)));
    assert_eq!(rows[1].datasource.as_deref(), Some("ds1"));
    // Per shard, a row per shard.
    let per_shard = plan_only(&per_shard_router(), "SELECT COUNT(*) FROM t_order_item")
        .await
        .unwrap();
    let rows = explain::rows(&per_shard, &config);
    assert_eq!(rows.len(), 20);
    assert_eq!(
        rows[19].physical_table.as_deref(),
        Some("order_shards.t_order_item_19")
    );
    let unsharded = plan_only(&r, "SELECT * FROM t_merchant").await.unwrap();
    assert_eq!(layer(&unsharded), ["unsharded"]);
    let issued = plan_only(
        &r,
        "INSERT INTO t_order (channel, region, user_id, amount, status, created_at) VALUES ('EU_CHANNEL', 'GB', 1, 1.00, 'NEW', NOW())",
    )
    .await
    .unwrap();
    assert_eq!(layer(&issued), ["issued"]);
}

/// A legacy id nothing resolves, under `unresolved_reads = "probe"`: the plan looks on
/// every shard of the table and keeps the ids, so what the shards hold is learnt when it
/// has run; on a table of one shard too, whose reply is relayed rather than merged.
#[tokio::test]
async fn a_probe_keeps_its_ids_whatever_the_number_of_shards() {
    let probe = include_str!("../../config/demo.toml")
        .replace("[sharding]\n", "[sharding]\nunresolved_reads = \"probe\"\n");
    // The demo's servers, index and cache; one channel of one shard.
    let demo = include_str!("../../config/demo.toml");
    let (head, rest) = demo.split_at(demo.find("[[channels]]").unwrap());
    let tail = &rest[rest.find("[index]").unwrap()..];
    let one_shard = format!(
        r#"{head}
[[channels]]
name = "EU_CHANNEL"
code = 5
base_shard = 0
route_key_since = "2024-01-01T00:00:00Z"
[sharding]
logical_database = "orders"
default_datasource = "ds0"
shards_per_channel = 1
binding_tables = ["t_order"]
physical_database = "order_shards"
physical_table = "{{table}}_{{shard}}"
unresolved_reads = "probe"
[[sharding.shards]]
first = 0
last = 0
datasource = "ds0"
{tail}"#
    );
    // Combined, the 20 shards are asked in one statement per datasource.
    for (text, steps, merged) in [(probe.as_str(), 2, true), (one_shard.as_str(), 1, false)] {
        let config = Config::from_toml(text, "probe.toml").unwrap();
        let r = Router::new(Arc::new(config), MemoryIndex::default());
        let id = legacy_id(5, 1);
        let plan = plan_only(&r, &format!("SELECT * FROM t_order WHERE order_id = {id}"))
            .await
            .unwrap();
        assert_eq!(plan.kind, PlanKind::Probe);
        assert_eq!(plan.steps.len(), steps);
        let Execution::Probe { spec, ids } = &plan.execution else {
            panic!("a probe whose ids are lost: {:?}", plan.execution);
        };
        assert_eq!(ids, &[id]);
        assert_eq!(spec.is_some(), merged);
    }
}

#[tokio::test]
async fn a_scatter_asks_each_datasource_once_where_a_union_keeps_its_meaning() {
    let r = router();
    let plan = plan_only(
        &r,
        "SELECT channel, COUNT(*) FROM t_order WHERE user_id = 7 GROUP BY channel",
    )
    .await
    .unwrap();
    assert_eq!(plan.kind, PlanKind::Scatter);
    assert_eq!(plan.steps.len(), 2);
    assert_eq!(plan.steps[0].shards, (0..10).collect::<Vec<_>>());
    assert_eq!(plan.steps[1].shards, (10..20).collect::<Vec<_>>());
    for (step, sql) in plan.steps.iter().zip(statements(&plan)) {
        assert!(sql.starts_with("(SELECT channel, COUNT(*)"), "{sql}");
        assert_eq!(sql.matches(") UNION ALL (SELECT").count(), 9, "{sql}");
        // Partial groups are never cut; the server streams a bare UNION ALL.
        assert!(sql.ends_with("\n)"), "{sql}");
        for n in &step.shards {
            assert!(sql.contains(&format!("`t_order_{n}` WHERE")), "{sql}");
        }
    }
    // Until its columns are described: the first shard alone, as the per-shard plan
    // sends it, its datasource's other shards combined.
    let combined = plan.combined.as_ref().expect("combined");
    assert!(!combined.describe_only);
    let describing: Vec<&[u32]> = combined.describing.iter().map(|s| &s.shards[..]).collect();
    assert_eq!(
        describing,
        [
            &[0][..],
            &(1..10).collect::<Vec<_>>(),
            &plan.steps[1].shards
        ]
    );
    assert_eq!(
        combined.describing[0].statement.sql,
        per_shard_statement(
            "SELECT channel, COUNT(*) FROM t_order WHERE user_id = 7 GROUP BY channel",
            0
        )
        .await
    );
    // What the merge computes is described by a statement of its own (`LIMIT 0`).
    let avg = plan_only(&r, "SELECT MAX(amount) - 1 FROM t_order WHERE user_id = 7")
        .await
        .unwrap();
    let combined = avg.combined.as_ref().expect("combined");
    let first = String::from_utf8_lossy(&combined.describing[0].statement.sql).into_owned();
    assert!(
        combined.describe_only && first.ends_with("LIMIT 0"),
        "{first}"
    );
    assert_eq!(combined.describing[1..], avg.steps[..]);
    // ORDER BY ... LIMIT: each shard cut at offset + count, the merge cuts again.
    let top = plan_only(
        &r,
        "SELECT order_id FROM t_order WHERE user_id = 7 ORDER BY created_at DESC LIMIT 5, 10",
    )
    .await
    .unwrap();
    assert_eq!(top.steps.len(), 2);
    assert_eq!(statements(&top)[0].matches("LIMIT 15\n)").count(), 10);
    // Nothing follows a union: the proxy sorts each datasource's runs.
    assert!(statements(&top)[0].ends_with("LIMIT 15\n)"));
    // (Under a session sql_select_limit, `LIMIT 2^64-1` follows: tests/scatter.rs.)
    // The description's key is the statement as sent: a value anywhere counts (a WHERE
    // the optimizer finds impossible changes how columns are described).
    let shape = |sql: &'static str| {
        let r = &r;
        async move {
            plan_only(r, sql)
                .await
                .unwrap()
                .combined
                .and_then(|c| c.shape)
                .unwrap()
        }
    };
    assert_eq!(
        shape("SELECT COUNT(*) FROM t_order WHERE user_id = 7").await,
        shape("SELECT /* trace 42 */ COUNT(*)  FROM t_order WHERE user_id = 7").await,
        "comments and spacing do not count"
    );
    assert_ne!(
        shape("SELECT COUNT(*) FROM t_order WHERE user_id = 7").await,
        shape("SELECT COUNT(*) FROM t_order WHERE 1 = 0").await
    );
    assert_ne!(
        shape("SELECT COUNT(*), 'a' FROM t_order WHERE user_id = 7").await,
        shape("SELECT COUNT(*), 'ab' FROM t_order WHERE user_id = 7").await
    );
    // Off by configuration: a statement per shard.
    let off = plan_only(
        &per_shard_router(),
        "SELECT COUNT(*) FROM t_order WHERE user_id = 7",
    )
    .await
    .unwrap();
    assert_eq!((off.steps.len(), off.combined.is_none()), (20, true));
}

/// The statement the per-shard plan sends to `shard`.
async fn per_shard_statement(sql: &str, shard: u32) -> Vec<u8> {
    let plan = plan_only(&per_shard_router(), sql).await.unwrap();
    let step = plan.steps.iter().find(|s| s.shards == [shard]).unwrap();
    step.statement.sql.clone()
}

#[tokio::test]
async fn statements_whose_meaning_a_union_changes_run_per_shard() {
    let r = router();
    let long_in = format!(
        "SELECT order_id FROM t_order WHERE user_id IN ({})",
        (0..20_000)
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let declined = [
        "SELECT order_id FROM t_order WHERE user_id = @u",
        "SELECT SQL_CALC_FOUND_ROWS order_id FROM t_order WHERE user_id = 7 LIMIT 3",
        "SELECT order_id FROM t_order WHERE user_id = 7 ORDER BY created_at",
        "SELECT order_id FROM t_order WHERE user_id = 7 LIMIT 3 FOR UPDATE",
        "SELECT SQL_NO_CACHE order_id FROM t_order WHERE user_id = 7",
        "SELECT /*!40001 SQL_NO_CACHE */ order_id FROM t_order WHERE user_id = 7",
        "SELECT HIGH_PRIORITY order_id FROM t_order WHERE user_id = 7",
        "SELECT SQL_BUFFER_RESULT order_id FROM t_order WHERE user_id = 7",
        long_in.as_str(),
    ];
    for sql in declined {
        let plan = plan_only(&r, sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        assert_eq!(
            (plan.steps.len(), plan.combined.is_none()),
            (20, true),
            "{}",
            &sql[..sql.len().min(120)]
        );
    }
}
