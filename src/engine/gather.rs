//! Merging several shards' result sets into the one answer a single table would give
//! (SPEC §5), streamed to the client: an ordered merge interleaves the shards' sorted rows;
//! grouping combines partial groups in memory (bounded by `sharding.merge_row_cap`);
//! DISTINCT remembers what it sent (bounded too); OFFSET and LIMIT cut the merged rows.
//! The hidden columns the merge needed are dropped from every row. A shard that fails
//! fails the statement: no partial answer is ever completed.

use std::collections::HashSet;

use bytes::BytesMut;

use super::outcome::Outcome;
use crate::backend::Reply;
use crate::error::ProxyError;
use crate::execute::Results;
use crate::merge::group::Groups;
use crate::merge::keys::{Key, MergeError, Row};
use crate::merge::{MergeSpec, SortKey};
use crate::plan::Plan;
use crate::protocol::row::{ColumnMeta, Protocol, build_row, split_row, truncate_text_row};
use crate::wire::client::Client;

fn merge_error(e: MergeError) -> ProxyError {
    let what = format!("{} (merging the results of several shards)", e.message);
    if e.over_cap {
        ProxyError::MergeCap(what)
    } else {
        ProxyError::not_yet(what)
    }
}

/// OFFSET and LIMIT over the merged rows.
struct Cut {
    skip: u64,
    left: Option<u64>,
}

impl Cut {
    /// Whether the next merged row is sent.
    fn take(&mut self) -> bool {
        if self.skip > 0 {
            self.skip -= 1;
            return false;
        }
        match &mut self.left {
            Some(0) => false,
            Some(n) => {
                *n -= 1;
                true
            }
            None => true,
        }
    }

    fn done(&self) -> bool {
        self.left == Some(0)
    }
}

/// The result set's shape: every column's definition, how many the client sees.
struct Shape {
    metas: Vec<ColumnMeta>,
    visible: usize,
    protocol: Protocol,
}

impl Shape {
    fn hidden(&self) -> usize {
        self.metas.len() - self.visible
    }

    /// A shard row without its hidden columns.
    fn visible_row(&self, packet: &BytesMut) -> Result<Vec<u8>, MergeError> {
        if self.visible == self.metas.len() {
            return Ok(packet.to_vec());
        }
        match self.protocol {
            Protocol::Text => truncate_text_row(packet, self.visible)
                .map(<[u8]>::to_vec)
                .ok_or_else(|| MergeError::new("a malformed row from a shard".to_owned())),
            Protocol::Binary => {
                let mut values = Vec::with_capacity(self.metas.len());
                split_row(packet, &self.metas, self.protocol, &mut values)?;
                Ok(build_row(
                    &values[..self.visible],
                    &self.metas[..self.visible],
                    self.protocol,
                ))
            }
        }
    }
}

/// Writes the merged result of a running plan (all but its final terminator).
pub(super) async fn merged(
    client: &mut Client,
    results: &mut Results<'_, '_>,
    plan: &Plan,
    spec: &MergeSpec,
    binary: bool,
    status: u16,
) -> Result<Outcome, ProxyError> {
    let sorted = !spec.order.is_empty() && spec.grouping.is_none();
    if sorted {
        results.buffer_shared_lanes(spec.row_cap).await?;
    }
    let (defs, columns_status) = result_set(results.reply(0).await?)?;
    let metas = defs
        .iter()
        .map(|d| ColumnMeta::parse(d))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| ProxyError::Internal("a column definition the merge cannot read".into()))?;
    if metas.len() < spec.hidden {
        return Err(ProxyError::Internal(
            "fewer columns than the merge added".into(),
        ));
    }
    let shape = Shape {
        visible: metas.len() - spec.hidden,
        metas,
        protocol: if binary {
            Protocol::Binary
        } else {
            Protocol::Text
        },
    };
    // The first shard's flags stand for all: each plans the same statement on a table of
    // the same definition, as the one table would be planned.
    client.send_columns(
        &defs[..shape.visible],
        plan.steps[0].names.as_ref(),
        crate::protocol::status::relayed(status, columns_status),
    )?;
    let count_all = results.counts_found_rows() && spec.distinct.is_some();
    let mut m = Merger {
        client,
        results,
        spec,
        shape,
        out: Outcome {
            result_set: true,
            ..Default::default()
        },
        cut: Cut {
            skip: spec.offset,
            left: spec.limit,
        },
        seen: HashSet::new(),
        steps: plan.steps.len(),
        found: 0,
        count_all,
    };
    if sorted {
        for step in 1..m.steps {
            m.open(step).await?;
        }
        m.ordered().await?;
    } else if spec.grouping.is_some() {
        m.grouped().await?;
    } else {
        m.concatenated().await?;
    }
    // The shards' FOUND_ROWS() count their own rows or groups; a grouped or DISTINCT
    // answer has as many as the merge found (SQL_CALC_FOUND_ROWS).
    if spec.grouping.is_some() || spec.distinct.is_some() {
        m.results.found_rows = m.found;
    }
    m.finish()
}

/// A result set's column definitions and the status flags of the EOF after them.
fn result_set(reply: Reply) -> Result<(Vec<BytesMut>, u16), ProxyError> {
    match reply {
        Reply::ResultSet { columns, status } => Ok((columns, status)),
        Reply::Ok(_) => Err(ProxyError::Internal(
            "a shard answered a merged SELECT without a result set".into(),
        )),
    }
}

struct Merger<'a, 'r, 'c, 'p> {
    client: &'a mut Client,
    results: &'r mut Results<'c, 'p>,
    spec: &'a MergeSpec,
    shape: Shape,
    out: Outcome,
    cut: Cut,
    seen: HashSet<Vec<u8>>,
    steps: usize,
    /// Merged rows before OFFSET and LIMIT: `FOUND_ROWS()` of a grouped or DISTINCT merge.
    found: u64,
    /// Go on merging (and counting) past LIMIT: `SQL_CALC_FOUND_ROWS` with DISTINCT.
    count_all: bool,
}

impl Merger<'_, '_, '_, '_> {
    /// Reads a later step's column definitions: the same number of columns as the first.
    async fn open(&mut self, step: usize) -> Result<(), ProxyError> {
        let (defs, _) = result_set(self.results.reply(step).await?)?;
        if defs.len() != self.shape.metas.len() {
            return Err(ProxyError::Internal(format!(
                "shards returned different column counts ({} and {})",
                self.shape.metas.len(),
                defs.len()
            )));
        }
        Ok(())
    }

    /// Sends a merged row unless DISTINCT has sent its equal, OFFSET skips it or LIMIT
    /// was reached.
    async fn emit(&mut self, packet: Vec<u8>, row: Option<&BytesMut>) -> Result<(), ProxyError> {
        if let (Some(keys), Some(source)) = (&self.spec.distinct, row) {
            let r = Row::split(
                source,
                &self.shape.metas,
                self.shape.protocol,
                self.shape.hidden(),
            )
            .map_err(merge_error)?;
            let mut canonical = Vec::new();
            for k in keys {
                r.key(k).map_err(merge_error)?.canonical(&mut canonical);
            }
            if self.seen.contains(&canonical) {
                return Ok(());
            }
            if self.seen.len() as u64 >= self.spec.row_cap {
                return Err(crate::execute::results::row_cap_error(self.spec.row_cap));
            }
            self.seen.insert(canonical);
        }
        self.found += 1;
        if !self.cut.take() {
            return Ok(());
        }
        self.client.packet(&packet)?;
        self.out.rows += 1;
        self.client.flush_if_full().await
    }

    /// Reads what is left of a step (after LIMIT was reached), so its connection is clean.
    async fn drain(&mut self, step: usize) -> Result<(), ProxyError> {
        while self.results.next_row(step).await?.is_some() {}
        Ok(())
    }

    /// Steps one after another (DISTINCT and LIMIT without ORDER BY).
    async fn concatenated(&mut self) -> Result<(), ProxyError> {
        for step in 0..self.steps {
            if step > 0 {
                self.open(step).await?;
            }
            while let Some(row) = self.results.next_row(step).await? {
                if self.cut.done() && !self.count_all {
                    continue;
                }
                let visible = self.shape.visible_row(&row).map_err(merge_error)?;
                self.emit(visible, Some(&row)).await?;
            }
        }
        Ok(())
    }

    /// The shards' sorted rows interleaved by the ORDER BY keys (ties: the earlier shard).
    async fn ordered(&mut self) -> Result<(), ProxyError> {
        let mut heads: Vec<Option<(BytesMut, Vec<Key>)>> = Vec::with_capacity(self.steps);
        for step in 0..self.steps {
            heads.push(self.head(step).await?);
        }
        while !self.cut.done() || self.count_all {
            let mut best: Option<usize> = None;
            for (i, head) in heads.iter().enumerate() {
                let Some((_, keys)) = head else { continue };
                let better = match best.and_then(|b| heads[b].as_ref()) {
                    None => true,
                    Some((_, current)) => {
                        compare(keys, current, &self.spec.order) == std::cmp::Ordering::Less
                    }
                };
                if better {
                    best = Some(i);
                }
            }
            let Some(step) = best else { break };
            let (row, _) = heads[step].take().expect("chosen head");
            let visible = self.shape.visible_row(&row).map_err(merge_error)?;
            self.emit(visible, Some(&row)).await?;
            heads[step] = self.head(step).await?;
        }
        for (step, head) in heads.iter().enumerate() {
            if head.is_some() {
                self.drain(step).await?;
            }
        }
        Ok(())
    }

    /// The next row of a step with its ORDER BY keys.
    async fn head(&mut self, step: usize) -> Result<Option<(BytesMut, Vec<Key>)>, ProxyError> {
        let Some(row) = self.results.next_row(step).await? else {
            return Ok(None);
        };
        let keys = {
            let r = Row::split(
                &row,
                &self.shape.metas,
                self.shape.protocol,
                self.shape.hidden(),
            )
            .map_err(merge_error)?;
            self.spec
                .order
                .iter()
                .map(|k| r.key(&k.key))
                .collect::<Result<Vec<_>, _>>()
                .map_err(merge_error)?
        };
        Ok(Some((row, keys)))
    }

    /// Partial groups of every step combined, then HAVING, ORDER BY, OFFSET and LIMIT.
    async fn grouped(&mut self) -> Result<(), ProxyError> {
        let grouping = self.spec.grouping.as_ref().expect("grouped merge");
        let mut groups = Groups::new(
            grouping,
            &self.shape.metas,
            self.shape.protocol,
            self.shape.hidden(),
            self.spec.row_cap,
        );
        for step in 0..self.steps {
            if step > 0 {
                let (defs, _) = result_set(self.results.reply(step).await?)?;
                if defs.len() != self.shape.metas.len() {
                    return Err(ProxyError::Internal(
                        "shards returned different column counts".into(),
                    ));
                }
            }
            while let Some(row) = self.results.next_row(step).await? {
                groups.add(&row).map_err(merge_error)?;
            }
        }
        let merged = groups.finish(&self.spec.order).map_err(merge_error)?;
        let found = merged.len() as u64;
        for row in merged {
            if self.cut.done() {
                break;
            }
            let values: Vec<Option<&[u8]>> = row.raws.iter().map(|v| v.as_deref()).collect();
            let visible = &self.shape.metas[..self.shape.visible];
            let packet = build_row(&values, visible, self.shape.protocol);
            self.emit(packet, None).await?;
        }
        self.found = found;
        Ok(())
    }

    fn finish(mut self) -> Result<Outcome, ProxyError> {
        for step in 0..self.steps {
            if let Some(end) = self.results.end(step) {
                self.out.warnings += u32::from(end.warnings);
                self.out.add_end(end.status);
            }
        }
        Ok(self.out)
    }
}

/// Orders two rows by their keys.
fn compare(a: &[Key], b: &[Key], order: &[SortKey]) -> std::cmp::Ordering {
    for ((x, y), key) in a.iter().zip(b).zip(order) {
        let o = x.compare(y);
        let o = if key.descending { o.reverse() } else { o };
        if o.is_ne() {
            return o;
        }
    }
    std::cmp::Ordering::Equal
}
