//! `EXPLAIN ROUTE <statement>` (SPEC §8): the plan as rows, without running it. One row
//! per order id and shard: the layer that placed it, why its route key did not decode,
//! its channel, shard, datasource and physical table, and exactly the statement that shard
//! would receive.

use super::{Plan, PlanKind};
use crate::config::Config;

/// The result columns, in order.
pub const COLUMNS: [&str; 8] = [
    "order_id",
    "layer",
    "decode_failure",
    "channel",
    "shard",
    "datasource",
    "physical_table",
    "statement",
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
