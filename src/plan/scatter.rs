//! Plans that reach several shards: scatters (no usable order id), IN lists over several
//! shards, and probes for ids nothing resolves. A read's shards each get the statement
//! with the columns and clauses its merge needs ([`crate::sql::MultiShard`]); a write
//! without an order id runs on every shard it reaches, on one datasource, atomically.

use super::combine;
use super::model::{Execution, IdRoute, Plan, PlanKind, RouteLayer, Step};
use super::planner::{Planner, statement, with_prefix};
use crate::config::{ChannelId, Config, DatasourceId};
use crate::error::ProxyError;
use crate::merge::MergeSpec;
use crate::rewrite::{Edit, Frag, Segment, shard_edits};
use crate::route::index::IndexTable;
use crate::route::value::KeyValue;
use crate::sql::{ContextKind, MultiShard, Piece, ValueSlot};

/// Every shard of the channels, in order; or one channel's.
fn table_shards(config: &Config, channel: Option<ChannelId>) -> Vec<u32> {
    let per = config.sharding.shards_per_channel;
    let mut shards: Vec<u32> = config
        .channels
        .iter()
        .enumerate()
        .filter(|(i, _)| channel.is_none_or(|c| usize::from(c.0) == *i))
        .flat_map(|(_, c)| c.base_shard..c.base_shard + per)
        .collect();
    shards.sort_unstable();
    shards.dedup();
    shards
}

/// A statement without a usable order id (SPEC §5): a read runs on every shard of the
/// table, or on one channel's when a top-level `channel = '...'` names one (a region, a
/// hint or anything else never narrows it); a write only when the user may and every
/// shard it reaches lies on one datasource.
pub(super) fn plan_scatter<I: IndexTable>(
    mut p: Planner<'_, '_, I>,
    _context: Option<ChannelId>,
    write: bool,
) -> Result<Plan, ProxyError> {
    let inputs = p.inputs;
    let key = p.config().sharding.shard_key.clone();
    // A `/*scatter='refuse'*/` hint refuses a write too; an `allow` hint never lifts the
    // user's scatter_writes policy.
    let hint_refuses_write = write && inputs.hints.scatter == Some(false) && inputs.scatter.writes;
    let allowed = if write {
        inputs.scatter.writes && !hint_refuses_write
    } else {
        inputs.hints.scatter.unwrap_or(inputs.scatter.reads)
    };
    if !allowed {
        return Err(ProxyError::not_yet(if hint_refuses_write {
            format!(
                "UPDATE or DELETE on sharded tables without `{key} = value` or `{key} IN (...)` in the WHERE clause under a /*scatter='refuse'*/ hint"
            )
        } else if write {
            format!(
                "UPDATE or DELETE on sharded tables without `{key} = value` or `{key} IN (...)` in the WHERE clause for this user (scatter_writes = \"refuse\"; name the order ids)"
            )
        } else {
            format!(
                "statements on sharded tables without `{key} = value` or `{key} IN (...)` in the WHERE clause for this user or statement (scatter = \"refuse\"; a /*scatter='allow'*/ hint allows one statement)"
            )
        }));
    }
    let channel = narrowing_channel(&p);
    let shards = table_shards(p.config(), channel);
    for &shard in &shards {
        p.ids.push(IdRoute {
            order_id: None,
            layer: RouteLayer::Scatter,
            decode_failure: None,
            channel: p.config().channel_of_shard(shard),
            shard: Some(shard),
        });
    }
    if write {
        return scatter_write(p, shards);
    }
    plan_merge(p, PlanKind::Scatter, shards)
}

/// The one channel a top-level `channel = '...'` names, if exactly one.
fn narrowing_channel<I: IndexTable>(p: &Planner<'_, '_, I>) -> Option<ChannelId> {
    let mut named = p
        .sharded
        .context
        .iter()
        .filter(|s| s.kind == ContextKind::Channel)
        .map(|s| p.router.claim(s, &p.inputs.values));
    let first = named.next()??;
    named.all(|c| c == Some(first)).then_some(first)
}

fn scatter_write<I: IndexTable>(
    p: Planner<'_, '_, I>,
    shards: Vec<u32>,
) -> Result<Plan, ProxyError> {
    let config = p.config();
    let datasources: Vec<DatasourceId> = {
        let mut d: Vec<DatasourceId> = shards
            .iter()
            .map(|s| config.sharding.shards[*s as usize].datasource)
            .collect();
        d.sort();
        d.dedup();
        d
    };
    let refuse = config.transactions.cross_datasource == crate::config::CrossDatasource::Refuse;
    if datasources.len() > 1 && refuse {
        let names: Vec<&str> = datasources
            .iter()
            .map(|d| config.datasource(*d).name.as_str())
            .collect();
        return Err(ProxyError::not_yet(format!(
            "an UPDATE or DELETE without order ids that reaches shards on several datasources ({}) with transactions.cross_datasource = \"refuse\"; narrow it with a `{} = '...'` predicate",
            names.join(", "),
            config.sharding.channel_column
        )));
    }
    if shards.len() > 1 && p.sharded.needs_merge {
        return Err(ProxyError::not_yet(
            "ORDER BY or LIMIT on an UPDATE or DELETE that runs on several shards",
        ));
    }
    let steps = shards
        .iter()
        .map(|&s| p.shard_step(s, &[], false))
        .collect();
    p.finish_write_or_read(PlanKind::Scatter, steps, Vec::new(), true)
}

/// A read of several shards merged as one table would answer; one shard needs no merge.
pub(super) fn plan_merge<I: IndexTable>(
    p: Planner<'_, '_, I>,
    kind: PlanKind,
    shards: Vec<u32>,
) -> Result<Plan, ProxyError> {
    if shards.len() == 1 {
        let step = p.shard_step(shards[0], &[], false);
        return Ok(p.finish(kind, vec![step], Vec::new()));
    }
    let Some(multi) = p.sharded.multi.as_deref() else {
        return Err(ProxyError::not_yet(
            "this statement on several shards (only SELECT merges results)",
        ));
    };
    if let Some(why) = &multi.refused {
        return Err(ProxyError::not_yet(why));
    }
    // Every shard gets the prefix and would cut its own part; the merge reads only the
    // session's value (see `bind_limit`).
    if p.inputs
        .text
        .prefix
        .windows(b"sql_select_limit".len())
        .any(|w| w.eq_ignore_ascii_case(b"sql_select_limit"))
    {
        return Err(ProxyError::not_yet(
            "SET STATEMENT sql_select_limit = ... FOR a SELECT over several shards (set it for the session, or give the SELECT a LIMIT)",
        ));
    }
    let mut merge = multi.merge.clone();
    let pushed = bind_limit(&p, multi, &mut merge)?;
    let combined = match combine::declined(&p, kind, multi, &merge, pushed, &shards) {
        Some(why) => {
            tracing::trace!(why, "a merged read runs one statement per shard");
            None
        }
        None => combined_steps(&p, multi, pushed, &shards),
    };
    let (steps, combined) = match combined {
        Some((steps, combined)) => (steps, Some(combined)),
        None => {
            let mut steps: Vec<Step> = shards
                .iter()
                .map(|&s| multi_step(&p, s, multi, pushed, true, true))
                .collect();
            if !multi.computed.is_empty() {
                // The shards' rows carry NULL for what the merge computes; the first
                // statement only describes the columns, as the server types them
                // (`LIMIT 0`: no row is evaluated).
                steps.insert(0, multi_step(&p, shards[0], multi, Some(0), false, true));
            }
            (steps, None)
        }
    };
    let mut plan = p.finish(kind, steps, Vec::new());
    plan.execution = Execution::Merge(Box::new(merge));
    plan.combined = combined;
    Ok(plan)
}

/// The steps of a read whose shards of one datasource are asked in one statement
/// ([`combine`]), and how it describes its columns; `None` when a combined statement would
/// be too long.
fn combined_steps<I: IndexTable>(
    p: &Planner<'_, '_, I>,
    multi: &MultiShard,
    pushed: Option<u64>,
    shards: &[u32],
) -> Option<(Vec<Step>, Box<super::model::Combined>)> {
    let prefix = p.inputs.text.prefix;
    let bodies: Vec<Step> = shards
        .iter()
        .map(|&s| multi_step(p, s, multi, pushed, true, false))
        .collect();
    let outer = combine::outer_clause(p);
    let steps = combine::combine(prefix, bodies.clone(), outer)?;
    let describe_only = !multi.computed.is_empty();
    let describing = if describe_only {
        // The computed items' types: the first shard's statement with them, `LIMIT 0`.
        let mut describing = vec![multi_step(p, shards[0], multi, Some(0), false, true)];
        describing.extend(steps.iter().cloned());
        describing
    } else {
        // The first shard alone, as the per-shard plan sends it: its result's columns are
        // the answer's, and its rows part of it.
        let mut describing = vec![multi_step(p, shards[0], multi, pushed, true, true)];
        describing.extend(combine::combine(prefix, bodies[1..].to_vec(), outer)?);
        describing
    };
    let shape = combine::shape(p, shards);
    Some((steps, combine::combined(describing, describe_only, shape)))
}

/// Order ids nothing resolves, looked for on every shard of the table: the statement runs
/// on all of them and is merged; what the shards hold is learnt when it runs.
pub(super) fn plan_probe<I: IndexTable>(
    mut p: Planner<'_, '_, I>,
    unresolved: Vec<u64>,
) -> Result<Plan, ProxyError> {
    let shards = table_shards(p.config(), None);
    p.ids
        .retain(|r| r.order_id.is_none_or(|id| !unresolved.contains(&id)));
    for &id in &unresolved {
        for &shard in &shards {
            p.ids.push(IdRoute {
                order_id: Some(id),
                layer: RouteLayer::Probe,
                decode_failure: None,
                channel: p.config().channel_of_shard(shard),
                shard: Some(shard),
            });
        }
    }
    let mut plan = plan_merge(p, PlanKind::Probe, shards)?;
    // A table of one shard is relayed, not merged: the probe learns from it all the same.
    let spec = match std::mem::replace(&mut plan.execution, Execution::Relay) {
        Execution::Merge(spec) => Some(spec),
        _ => None,
    };
    plan.execution = Execution::Probe {
        spec,
        ids: unresolved,
    };
    Ok(plan)
}

/// Sets the merge's offset, limit and row cap from the statement's values; returns the
/// LIMIT each shard gets (offset + count) when it is pushed down.
fn bind_limit<I: IndexTable>(
    p: &Planner<'_, '_, I>,
    multi: &MultiShard,
    merge: &mut MergeSpec,
) -> Result<Option<u64>, ProxyError> {
    merge.row_cap = p.config().sharding.merge_row_cap;
    // SQL_CALC_FOUND_ROWS with DISTINCT: the merge counts every distinct row, so the
    // shards send all of theirs (each shard's own count says nothing of duplicates).
    let calc_found_rows = multi.calc_found_rows;
    let count_distinct = calc_found_rows && merge.distinct.is_some();
    let Some(limit) = multi.limit else {
        // `sql_select_limit` cuts what one server returns for a SELECT without LIMIT:
        // each shard would cut its own part. The merge cuts instead, and each shard gets
        // an explicit LIMIT, which the server obeys in place of the session's.
        return Ok(p.inputs.session.select_limit.map(|n| {
            merge.limit = Some(n);
            merge.offset = 0;
            if merge.grouping.is_some() || count_distinct {
                u64::MAX
            } else {
                n
            }
        }));
    };
    let number = |slot: ValueSlot| -> Result<u64, ProxyError> {
        match p.inputs.values.key(slot) {
            KeyValue::Id(n) => Ok(n),
            _ => Err(ProxyError::client(
                crate::error::ER_WRONG_ARGUMENTS,
                b"HY000",
                "Incorrect arguments to LIMIT (routekey-proxy reads LIMIT and OFFSET as non-negative integers)",
            )),
        }
    };
    let count = number(limit.count)?;
    let offset = match limit.offset {
        Some(slot) => number(slot)?,
        None => 0,
    };
    merge.limit = Some(count);
    merge.offset = offset;
    Ok(if limit.push_down && !count_distinct {
        Some(offset.saturating_add(count))
    } else if count == 0
        && !calc_found_rows
        && merge.grouping.as_ref().is_some_and(|g| !g.keys.is_empty())
    {
        // Grouped: the answer is empty; shards need not group (and describe their
        // columns as the server does for LIMIT 0).
        Some(0)
    } else {
        None
    })
}

/// One shard's statement of a multi-shard read: the shard's names, the hidden columns
/// before `FROM`, the removed clauses, and `LIMIT offset + count` when pushed down; with
/// `blank_computed`, `NULL` for the select items the merge computes; with `prefixed`, after
/// the statement's prefix (`SET STATEMENT ... FOR `; a combined statement carries it once).
fn multi_step<I: IndexTable>(
    p: &Planner<'_, '_, I>,
    shard: u32,
    multi: &MultiShard,
    pushed_limit: Option<u64>,
    blank_computed: bool,
    prefixed: bool,
) -> Step {
    let inputs = p.inputs;
    let config = p.config();
    let s = &config.sharding.shards[shard as usize];
    let st = statement(inputs);
    let keys = p.key_edits(false);
    let mut edits = shard_edits(&st, inputs.analysis, p.sharded, s, &keys, inputs.session);
    if !multi.hidden.is_empty() {
        let at = st.tokens[multi.insert_before as usize].range.start;
        let mut with = Vec::new();
        for column in &multi.hidden {
            with.push(Frag::text(", "));
            for piece in column {
                with.push(match piece {
                    Piece::Text(t) => Frag::text(*t),
                    Piece::Tokens(span) => Frag::Tokens(*span),
                });
            }
        }
        with.push(Frag::text(" "));
        edits.push(Edit { at: at..at, with });
    }
    for span in &multi.removed {
        edits.push(Edit {
            at: st.bytes_of(*span),
            with: vec![Frag::text(" ")],
        });
    }
    if blank_computed {
        // Sorted before the edits inside it (unless one starts at its first byte: then
        // the item stays, as before), it replaces them; the hidden columns copy the
        // aggregates' tokens with their own edits.
        for span in &multi.computed {
            edits.push(Edit {
                at: st.bytes_of(*span),
                with: vec![Frag::text("NULL")],
            });
        }
    }
    if let Some(limit) = multi.limit {
        let with = match pushed_limit {
            Some(n) => format!("LIMIT {n}"),
            None => " ".to_owned(),
        };
        edits.push(Edit {
            at: st.bytes_of(limit.span),
            with: vec![Frag::text(with)],
        });
    }
    let body = match (multi.limit, pushed_limit) {
        // In place of the session's sql_select_limit (see `bind_limit`): a segment of its
        // own, since the hidden columns copy tokens (and the edits inside them).
        (None, Some(n)) => {
            let at = st.tokens[multi.tail as usize].range.end;
            vec![
                Segment::Original(0..at),
                Segment::Bytes(format!(" LIMIT {n}").into_bytes()),
                Segment::Original(at..st.sql.len()),
            ]
        }
        _ => vec![Segment::Original(0..st.sql.len())],
    };
    let segments = if prefixed {
        with_prefix(inputs, body)
    } else {
        body
    };
    Step {
        datasource: s.datasource,
        shards: vec![shard],
        statement: st.render_segments(&segments, edits),
        names: Some(s.names.clone()),
    }
}
