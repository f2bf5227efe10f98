//! The planner: from a statement's analysis and values to its [`Plan`].

use std::collections::BTreeMap;

use super::model::{IdRoute, Inputs, Plan, PlanKind, RouteLayer};
use super::planner::{Planner, statement, with_prefix};
use super::scatter;
use crate::config::{ChannelId, Config};
use crate::error::ProxyError;
use crate::rewrite::{Segment, unsharded_edits};
use crate::route::index::IndexTable;
use crate::route::value::{KeyValue, StatementValues};
use crate::route::{Effects, Layer, RouteContext, Router};
use crate::sql::hints::RouteHints;
use crate::sql::{
    ContextKind, ContextSlot, InsertRow, Placement, Refusal, ShardedPlan, ValueSlot, Verb,
};

/// The MySQL error of a statement the analysis refused.
pub fn refusal(r: &Refusal) -> ProxyError {
    match r {
        Refusal::NotYet(what) => ProxyError::not_yet(what),
        Refusal::Unsupported(what) => ProxyError::unsupported(what),
        Refusal::Unparsed(message) => ProxyError::not_yet(format!(
            "statements on sharded tables that its SQL parser cannot read (parser: {message})"
        )),
    }
}

/// A statement the planner refused: the error for the client, and what planning learnt
/// before it refused (an id resolved as unresolved, an index lookup), which still counts.
#[derive(Debug)]
pub struct Refused {
    /// The client's error.
    pub error: ProxyError,
    /// Counters and cache fills collected before the refusal.
    pub effects: Effects,
}

impl From<Refused> for ProxyError {
    fn from(r: Refused) -> Self {
        r.error
    }
}

/// Plans one data statement (see the module documentation of [`crate::plan`]).
///
/// # Errors
/// The statement is refused ([`Refused`]: its MySQL error, and the effects planning
/// collected, for the caller to count).
pub async fn plan<I: IndexTable>(router: &Router<I>, inputs: &Inputs<'_>) -> Result<Plan, Refused> {
    let refused = |error| Refused {
        error,
        effects: Effects::default(),
    };
    if let Some(scope) = inputs.scope {
        let command = match inputs.analysis.verb {
            Verb::Insert => "INSERT",
            Verb::Update => "UPDATE",
            Verb::Delete => "DELETE",
            _ => "SELECT",
        };
        for (db, table) in &inputs.analysis.qualified_tables {
            scope.check_table(command, db, table).map_err(refused)?;
        }
    }
    let sharded = match &inputs.analysis.placement {
        Placement::Unsharded => return Ok(unsharded(router.config(), inputs)),
        Placement::Refused(r) => return Err(refused(refusal(r))),
        Placement::Sharded(p) => &**p,
    };
    let mut fx = Effects::default();
    let planner = Planner {
        router,
        inputs,
        sharded,
        fx: &mut fx,
        ids: Vec::new(),
    };
    let planned = if inputs.analysis.verb == Verb::Insert {
        planner.insert().await
    } else {
        planner.by_key().await
    };
    planned.map_err(|error| Refused { error, effects: fx })
}

/// The channel each row of an INSERT names through its channel/region column or the
/// statement's hints (`None` for a row that names none): where the proxy issues the ids
/// of an INSERT without the shard key (SPEC §6).
pub fn insert_channels<I: IndexTable>(
    router: &Router<I>,
    plan: &ShardedPlan,
    values: &StatementValues<'_>,
    hints: &RouteHints,
) -> Result<Vec<Option<ChannelId>>, ProxyError> {
    plan.rows
        .iter()
        .map(|row| router.context(&row_context(row), hints, values, true))
        .collect()
}

fn row_context(row: &InsertRow) -> Vec<ContextSlot> {
    let mut slots: Vec<ContextSlot> = Vec::with_capacity(2);
    slots.extend(row.channel.map(|value| ContextSlot {
        kind: ContextKind::Channel,
        value,
    }));
    slots.extend(row.region.map(|value| ContextSlot {
        kind: ContextKind::Region,
        value,
    }));
    slots
}

/// A statement without sharded tables: the default datasource.
fn unsharded(config: &Config, inputs: &Inputs<'_>) -> Plan {
    let st = statement(inputs);
    let rendered = st.render_segments(
        &with_prefix(inputs, vec![Segment::Original(0..st.sql.len())]),
        unsharded_edits(&st, inputs.analysis, inputs.session),
    );
    let mut plan = Plan::single_rendered(config.sharding.default_datasource, rendered, None);
    plan.ids = vec![IdRoute {
        order_id: None,
        layer: RouteLayer::Unsharded,
        decode_failure: None,
        channel: None,
        shard: None,
    }];
    plan
}

impl<I: IndexTable> Planner<'_, '_, I> {
    /// SELECT, UPDATE, DELETE: by the order ids of the WHERE clause, else a scatter.
    async fn by_key(mut self) -> Result<Plan, ProxyError> {
        let inputs = self.inputs;
        let write = inputs.analysis.verb != Verb::Select;
        let context = self.router.route_context(
            &self.sharded.context,
            inputs.hints,
            &inputs.values,
            write,
        )?;
        if self.sharded.key_values.is_empty() {
            return scatter::plan_scatter(self, context.map(|c| c.channel), write);
        }
        let mut ids = Vec::with_capacity(self.sharded.key_values.len());
        for slot in &self.sharded.key_values {
            ids.extend(self.id_of(*slot, "routing")?);
        }
        let mut shards = BTreeMap::new();
        let mut channels = Vec::new();
        let mut unresolved = Vec::new();
        let mut nowhere = false;
        for &id in &ids {
            let resolved = self
                .router
                .resolve(id, write, context, inputs.now_ms, self.fx)
                .await?;
            match resolved.channel {
                Some(channel) => {
                    let shard = self.config().shard_of(channel, id);
                    shards.insert(shard, ());
                    channels.push(channel);
                    self.record(id, &resolved, Some(shard));
                }
                None if write => {
                    return Err(ProxyError::unroutable(format!(
                        "cannot route this write: {key} {id} does not carry a route key and the index table has no row for it; name its channel with a `{ch}` predicate or a /*route_key='...'*/ hint",
                        key = self.key_name(),
                        ch = self.config().sharding.channel_column,
                    )));
                }
                None => {
                    nowhere |= resolved.known_nowhere;
                    unresolved.push(id);
                    self.record(id, &resolved, None);
                }
            }
        }
        if !unresolved.is_empty()
            && !nowhere
            && self.config().sharding.unresolved_reads == crate::config::UnresolvedReads::Probe
        {
            return scatter::plan_probe(self, unresolved);
        }
        if shards.is_empty() {
            return Ok(if write {
                self.finish(PlanKind::NoRows, Vec::new(), Vec::new())
            } else {
                let first = self.router.first_shard();
                let step = self.shard_step(first, &[], true);
                self.finish(PlanKind::Empty, vec![step], Vec::new())
            });
        }
        if inputs.analysis.verb == Verb::Update {
            self.check_update(&ids, &channels)?;
        }
        let shards: Vec<u32> = shards.into_keys().collect();
        if shards.len() > 1 && !write {
            return scatter::plan_merge(self, PlanKind::Routed, shards);
        }
        let steps = shards
            .iter()
            .map(|&s| self.shard_step(s, &[], false))
            .collect();
        self.finish_write_or_read(PlanKind::Routed, steps, Vec::new(), write)
    }

    /// An UPDATE may not move an order: `order_id` only to its own value, the channel
    /// column only to its own channel. The region column is the order's data (SPEC §4).
    fn check_update(&self, ids: &[u64], channels: &[ChannelId]) -> Result<(), ProxyError> {
        let values = &self.inputs.values;
        if let Some(slot) = self.sharded.sets_key {
            let unchanged = ids.len() == 1 && values.key(slot) == KeyValue::Id(ids[0]);
            if !unchanged {
                return Err(ProxyError::unsupported(format!(
                    "changing {}: an order keeps its id (it decides the shard)",
                    self.key_name()
                )));
            }
        }
        for slot in &self.sharded.sets_context {
            if slot.kind != ContextKind::Channel {
                continue;
            }
            let target = self.router.claim(slot, values);
            if target.is_none() || channels.iter().any(|c| Some(*c) != target) {
                return Err(ProxyError::unsupported(format!(
                    "setting the {} column to a value of another channel: the order would sit on the wrong shard",
                    self.config().sharding.channel_column
                )));
            }
        }
        Ok(())
    }

    /// INSERT: each row by its order id (decoded, else its channel column or hint, checked
    /// against the index); rows split by shard; index rows for ids that do not decode.
    async fn insert(mut self) -> Result<Plan, ProxyError> {
        let inputs = self.inputs;
        let values = &inputs.values;
        let key = self.key_name().to_owned();
        let awaits_ids = self.sharded.key_insert.is_some() && values.generated.is_empty();
        let mut by_shard: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        let mut index_writes = Vec::new();
        for (i, row) in self.sharded.rows.iter().enumerate() {
            let Some(slot) = row.order_id else {
                return Err(ProxyError::not_yet(format!(
                    "INSERT into a sharded table without {key}: leave the column out of an INSERT into the orders table to have the proxy issue one"
                )));
            };
            let context =
                self.router
                    .route_context(&row_context(row), inputs.hints, values, true)?;
            if awaits_ids {
                self.ids.push(IdRoute {
                    order_id: None,
                    layer: RouteLayer::Issued,
                    decode_failure: None,
                    channel: context.map(|c| c.channel),
                    shard: None,
                });
                continue;
            }
            let id = match self.id_of(slot, "INSERT")? {
                Some(id) => id,
                None => {
                    return Err(ProxyError::unroutable(format!(
                        "cannot route this INSERT: row {} has no usable {key} (NULL or negative); leave the column out to have the proxy issue one",
                        i + 1
                    )));
                }
            };
            if let (ValueSlot::Generated(_), Some(RouteContext { channel, .. })) = (slot, context) {
                // An id the proxy just issued for this row's channel: a route-key id decodes;
                // a legacy-format one (channel not switched on yet) gets its index row.
                let decoded = self.router.decoder().decode(id, inputs.now_ms).is_ok();
                self.fx.layers.push(if decoded {
                    Layer::Decode
                } else {
                    Layer::Context
                });
                if !decoded {
                    index_writes.push((id, channel));
                }
                let shard = self.config().shard_of(channel, id);
                by_shard.entry(shard).or_default().push(i);
                self.ids.push(IdRoute {
                    order_id: Some(id),
                    layer: RouteLayer::Issued,
                    decode_failure: None,
                    channel: Some(channel),
                    shard: Some(shard),
                });
                continue;
            }
            let resolved = self
                .router
                .resolve(id, true, context, inputs.now_ms, self.fx)
                .await?;
            let Some(channel) = resolved.channel else {
                return Err(ProxyError::unroutable(format!(
                    "cannot route this INSERT: {key} {id} does not carry a route key, the index table has no row for it, and the row names no known channel or region"
                )));
            };
            self.check_row_channel(i, row, id, channel)?;
            // Every insert of an id that does not decode writes its index row first, also
            // when the cache or the index answered: the row may have been pruned since as
            // dangling (`index backfill --prune-dangling`), and writing it again marks it
            // young, so a prune running now keeps it (SPEC §5, docs/legacy-ids.md).
            if resolved.layer != Layer::Decode {
                index_writes.push((id, channel));
            }
            let shard = self.config().shard_of(channel, id);
            by_shard.entry(shard).or_default().push(i);
            self.record(id, &resolved, Some(shard));
        }
        if awaits_ids {
            return Ok(self.finish(PlanKind::AwaitsIds, Vec::new(), Vec::new()));
        }
        let steps = by_shard
            .iter()
            .map(|(&shard, rows)| self.shard_step(shard, rows, false))
            .collect();
        self.finish_write_or_read(PlanKind::Routed, steps, index_writes, true)
    }

    /// A row's own `channel` value must name its id's channel: the row would sit on its
    /// id's shard with another channel's name. Its `region` is data (SPEC §4).
    fn check_row_channel(
        &self,
        i: usize,
        row: &InsertRow,
        id: u64,
        channel: ChannelId,
    ) -> Result<(), ProxyError> {
        let Some(value) = row.channel else {
            return Ok(());
        };
        let slot = ContextSlot {
            kind: ContextKind::Channel,
            value,
        };
        match self.router.claim(&slot, &self.inputs.values) {
            Some(named) if named != channel => Err(ProxyError::unroutable(format!(
                "row {} of this INSERT: {} {id} belongs to {} but its {} value '{}' names another channel; refusing the insert",
                i + 1,
                self.key_name(),
                self.config().channel(channel).name,
                self.config().sharding.channel_column,
                self.inputs.values.text(value).unwrap_or_default(),
            ))),
            _ => Ok(()),
        }
    }
}
