//! The state of planning one sharded statement, and the steps every plan builds from: the
//! statement one shard receives, the finished plan.

use super::model::{Execution, IdRoute, Inputs, Plan, PlanKind, RouteLayer, Step};
use crate::config::{ChannelId, Config};
use crate::error::{ER_TRUNCATED_WRONG_VALUE, ProxyError};
use crate::rewrite::{KeyEdits, Segment, Statement};
use crate::route::index::IndexTable;
use crate::route::value::KeyValue;
use crate::route::{Effects, Layer, Resolved, Router};
use crate::sql::{ShardedPlan, ValueSlot, Verb};

pub(super) fn statement<'a>(inputs: &Inputs<'a>) -> Statement<'a> {
    Statement {
        sql: inputs.text.sql,
        tokens: inputs.text.tokens,
    }
}

/// `segments` after the statement's prefix (`SET STATEMENT ... FOR `), if any.
pub(super) fn with_prefix(inputs: &Inputs<'_>, segments: Vec<Segment>) -> Vec<Segment> {
    if inputs.text.prefix.is_empty() {
        return segments;
    }
    let mut out = vec![Segment::Bytes(inputs.text.prefix.to_vec())];
    out.extend(segments);
    out
}

pub(super) struct Planner<'a, 'f, I> {
    pub(super) router: &'a Router<I>,
    pub(super) inputs: &'a Inputs<'a>,
    pub(super) sharded: &'a ShardedPlan,
    /// What planning learnt so far (counters, cache fills): the plan's effects, or, when
    /// the statement is refused, the caller's to count.
    pub(super) fx: &'f mut Effects,
    pub(super) ids: Vec<IdRoute>,
}

impl<I: IndexTable> Planner<'_, '_, I> {
    pub(super) fn config(&self) -> &Config {
        self.router.config()
    }

    pub(super) fn key_name(&self) -> &str {
        &self.config().sharding.shard_key
    }

    /// The order id a value slot holds, or the error that refuses it.
    pub(super) fn id_of(&self, slot: ValueSlot, what: &str) -> Result<Option<u64>, ProxyError> {
        match self.inputs.values.key(slot) {
            KeyValue::Id(id) => Ok(Some(id)),
            KeyValue::NoMatch => Ok(None),
            KeyValue::Invalid(m) => Err(ProxyError::client(ER_TRUNCATED_WRONG_VALUE, b"22007", m)),
            KeyValue::Expression => Err(ProxyError::not_yet(format!(
                "{what} by an expression on {}: give literal values",
                self.key_name()
            ))),
        }
    }

    pub(super) fn record(&mut self, id: u64, resolved: &Resolved, shard: Option<u32>) {
        self.ids.push(IdRoute {
            order_id: Some(id),
            layer: layer_of(resolved.layer),
            decode_failure: resolved.decode_failure,
            channel: resolved.channel,
            shard,
        });
    }

    /// How a shard's statement writes the order ids: generated ones in place (as
    /// parameters of a prepared execution), or every one as NULL when `null_keys`.
    pub(super) fn key_edits(&self, null_keys: bool) -> KeyEdits<'_> {
        KeyEdits {
            generated: self.inputs.values.generated,
            as_params: self.inputs.binary,
            shard_key: &self.config().sharding.shard_key,
            null_keys,
        }
    }

    /// The statement one shard receives (`rows` of an INSERT, all when empty), with the
    /// order ids replaced by NULL when `null_keys`.
    pub(super) fn shard_step(&self, shard: u32, rows: &[usize], null_keys: bool) -> Step {
        let inputs = self.inputs;
        let config = self.config();
        let s = &config.sharding.shards[shard as usize];
        let st = statement(inputs);
        let keys = self.key_edits(null_keys);
        let edits = crate::rewrite::shard_edits(
            &st,
            inputs.analysis,
            self.sharded,
            s,
            &keys,
            inputs.session,
        );
        let segments = with_prefix(
            inputs,
            crate::rewrite::row_segments(&st, self.sharded, rows),
        );
        Step {
            datasource: s.datasource,
            shards: vec![shard],
            statement: st.render_segments(&segments, edits),
            names: Some(s.names.clone()),
        }
    }

    /// A plan of these steps. A write on several datasources runs atomically (XA, with
    /// `transactions.cross_datasource = "atomic"`) or is refused; several steps of a write
    /// run as one backend transaction.
    pub(super) fn finish_write_or_read(
        self,
        kind: PlanKind,
        steps: Vec<Step>,
        index_writes: Vec<(u64, ChannelId)>,
        write: bool,
    ) -> Result<Plan, ProxyError> {
        let refuse =
            self.config().transactions.cross_datasource == crate::config::CrossDatasource::Refuse;
        if write && refuse {
            if let Some(first) = steps.first() {
                if steps.iter().any(|s| s.datasource != first.datasource) {
                    return Err(ProxyError::not_yet(
                        "a write whose rows lie on more than one datasource with transactions.cross_datasource = \"refuse\"; split it by datasource",
                    ));
                }
            }
        }
        let mut plan = self.finish(kind, steps, index_writes);
        plan.write = write;
        if write && plan.steps.len() > 1 {
            plan.execution = Execution::Atomic;
        }
        Ok(plan)
    }

    pub(super) fn finish(
        self,
        kind: PlanKind,
        steps: Vec<Step>,
        index_writes: Vec<(u64, ChannelId)>,
    ) -> Plan {
        let write = self.inputs.analysis.verb != Verb::Select;
        Plan {
            kind,
            ids: self.ids,
            steps,
            index_writes,
            write,
            execution: Execution::Relay,
            combined: None,
            effects: std::mem::take(self.fx),
            table: Some(self.sharded.primary_table),
        }
    }
}

/// The EXPLAIN layer of a resolution.
fn layer_of(layer: Layer) -> RouteLayer {
    match layer {
        Layer::Decode => RouteLayer::Decode,
        Layer::Context => RouteLayer::Context,
        Layer::Cache => RouteLayer::Cache,
        Layer::Index => RouteLayer::Index,
        Layer::Unresolved => RouteLayer::Unresolved,
    }
}
