//! `EXPLAIN ROUTE <statement>` (SPEC §8): the plan as rows, without running it. One row
//! per order id and shard: the layer that placed it, why its route key did not decode,
//! its channel, shard, datasource and physical table, and exactly the statement that shard
//! would receive. A combined read ([`super::Combined`]) shows one row per statement sent
//! instead: each datasource's, with the physical tables of the shards it asks, and, when
//! its columns are not yet described, the describing statement first (layer `describe`).

use super::{Plan, PlanKind};
use crate::config::Config;

/// The result columns, in order.
pub const COLUMNS: [&str; 10] = [
    "order_id",
    "layer",
    "decode_failure",
    "channel",
    "shard",
    "datasource",
    "physical_table",
    "statement",
    // Where the session's statement would go on a datasource with `members` (the engine
    // fills it in: the member depends on the session and the latest probe); NULL for a
    // datasource of one server.
    "member",
    // The transaction branch the statement runs in on that datasource (issue 27; the
    // engine fills it in from the session's transaction): `plain` (the transaction's one
    // datasource so far), `decision` (its plain transaction once XA branches exist), `xa`
    // (an XA branch), `new xa` (the statement would start one); NULL outside a transaction
    // for a statement on one datasource.
    "branch",
];

/// One row of EXPLAIN ROUTE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExplainRow {
    /// The order id (`NULL` for a scatter's shards and unsharded statements).
    pub order_id: Option<u64>,
    /// decode, context, cache, index, probe, unresolved, scatter, unsharded, issued.
    pub layer: &'static str,
    /// Why the route key did not decode (no_code, unassigned_code,
    /// before_route_key_since, timestamp_in_future).
    pub decode_failure: Option<&'static str>,
    /// The channel's name.
    pub channel: Option<String>,
    /// The shard.
    pub shard: Option<u32>,
    /// The datasource's name.
    pub datasource: Option<String>,
    /// `database.table` on the shard.
    pub physical_table: Option<String>,
    /// The statement that shard or datasource receives (`?` where a prepared statement's
    /// execution binds a value).
    pub statement: Option<Vec<u8>>,
}

/// The rows of a plan.
pub fn rows(plan: &Plan, config: &Config) -> Vec<ExplainRow> {
    if plan.combined.is_some() {
        return statement_rows(plan, config);
    }
    let primary_table = plan.table.map(|t| usize::from(t.0));
    plan.ids
        .iter()
        .map(|id| {
            // An unresolved read runs on the first shard with its ids nulled.
            let shard = id.shard.or(match plan.kind {
                PlanKind::Empty => plan.steps.first().and_then(|s| s.shards.first().copied()),
                _ => None,
            });
            let step = match (shard, plan.kind) {
                (_, PlanKind::Unsharded) => plan.steps.first(),
                (Some(n), _) => plan.steps.iter().find(|s| s.shards.contains(&n)),
                (None, _) => None,
            };
            let physical = match (shard, primary_table) {
                (Some(n), Some(t)) => {
                    let s = &config.sharding.shards[n as usize];
                    Some(format!("{}.{}", s.database, s.tables[t]))
                }
                _ => None,
            };
            ExplainRow {
                order_id: id.order_id,
                layer: id.layer.label(),
                decode_failure: id.decode_failure.map(|f| f.label()),
                channel: id.channel.map(|c| config.channel(c).name.clone()),
                shard,
                datasource: step.map(|s| config.datasource(s.datasource).name.clone()),
                physical_table: physical,
                // The text after `EXPLAIN ROUTE` starts with the space that followed it;
                // the statement run on its own would not.
                statement: step.map(|s| s.statement.sql.trim_ascii_start().to_vec()),
            }
        })
        .collect()
}

/// One row per statement of a combined read: its shards' layer, their order id and
/// channel when they share one, its shard when it asks one, the physical tables it reads.
fn statement_rows(plan: &Plan, config: &Config) -> Vec<ExplainRow> {
    let table = plan.table.map(|t| usize::from(t.0));
    let describing = plan
        .combined
        .as_ref()
        .is_some_and(|c| c.describe_only && c.columns.is_none() && plan.steps == c.describing);
    plan.steps
        .iter()
        .enumerate()
        .map(|(n, step)| {
            let ids: Vec<_> = plan
                .ids
                .iter()
                .filter(|i| i.shard.is_some_and(|s| step.shards.contains(&s)))
                .collect();
            let shared = |f: &dyn Fn(&super::IdRoute) -> Option<u64>| {
                let first = ids.first().and_then(|i| f(i));
                ids.iter().all(|i| f(i) == first).then_some(first).flatten()
            };
            let channel = shared(&|i| i.channel.map(|c| u64::from(c.0)));
            let physical: Vec<String> = match table {
                Some(t) => step
                    .shards
                    .iter()
                    .map(|&n| {
                        let s = &config.sharding.shards[n as usize];
                        format!("{}.{}", s.database, s.tables[t])
                    })
                    .collect(),
                None => Vec::new(),
            };
            ExplainRow {
                order_id: shared(&|i| i.order_id),
                layer: if describing && n == 0 {
                    "describe"
                } else {
                    ids.first().map_or("scatter", |i| i.layer.label())
                },
                decode_failure: None,
                channel: channel.map(|c| {
                    config
                        .channel(crate::config::ChannelId(c as u8))
                        .name
                        .clone()
                }),
                shard: match step.shards[..] {
                    [one] => Some(one),
                    _ => None,
                },
                datasource: Some(config.datasource(step.datasource).name.clone()),
                physical_table: (!physical.is_empty()).then(|| physical.join(", ")),
                statement: Some(step.statement.sql.trim_ascii_start().to_vec()),
            }
        })
        .collect()
}
