//! Merging several shards' result sets into the one answer a single table would give
//! (SPEC §5), streamed to the client: an ordered merge interleaves the shards' sorted rows;
//! grouping combines partial groups in memory (bounded by `sharding.merge_row_cap`);
//! DISTINCT remembers what it sent (bounded too); OFFSET and LIMIT cut the merged rows.
//! The hidden columns the merge needed are dropped from every row. A shard that fails
//! fails the statement: no partial answer is ever completed.

use std::collections::{HashSet, VecDeque};

use bytes::BytesMut;

use super::outcome::Outcome;
use crate::backend::Reply;
use crate::error::ProxyError;
use crate::execute::Results;
use crate::merge::columns::{ColumnCache, DescribedColumns, fingerprint};
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

/// A shard row with its ORDER BY keys.
type Keyed = (BytesMut, Vec<Key>);

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
    /// The shape of rows described by `defs`, of which `hidden` are the merge's; `counts`
    /// are the column counts of the steps read so far, which must agree.
    fn new(
        defs: &[BytesMut],
        hidden: usize,
        counts: &[usize],
        binary: bool,
    ) -> Result<Self, ProxyError> {
        let metas = defs
            .iter()
            .map(|d| ColumnMeta::parse(d))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                ProxyError::Internal("a column definition the merge cannot read".into())
            })?;
        if metas.len() < hidden {
            return Err(ProxyError::Internal(
                "fewer columns than the merge added".into(),
            ));
        }
        if let Some(n) = counts.iter().find(|n| **n != metas.len()) {
            return Err(ProxyError::Internal(format!(
                "shards returned different column counts ({} and {n})",
                metas.len()
            )));
        }
        Ok(Shape {
            visible: metas.len() - hidden,
            metas,
            protocol: if binary {
                Protocol::Binary
            } else {
                Protocol::Text
            },
        })
    }

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

/// Writes the merged result of a running plan (all but its final terminator). `columns`
/// keeps the descriptions of combined reads ([`crate::plan::Combined`]).
pub(super) async fn merged(
    client: &mut Client,
    results: &mut Results<'_, '_>,
    plan: &Plan,
    spec: &MergeSpec,
    binary: bool,
    status: u16,
    columns: &ColumnCache,
) -> Result<Outcome, ProxyError> {
    let sorted = !spec.order.is_empty() && spec.grouping.is_none();
    if sorted {
        results.buffer_shared_lanes(spec.row_cap).await?;
    }
    let (first, columns_status) = result_set(results.reply(0).await?)?;
    let mut opened = vec![false; plan.steps.len()];
    opened[0] = true;
    let mut counts = vec![first.len()];
    let mut describing = None;
    let defs = match plan.combined.as_deref() {
        None => first,
        Some(combined) => match &combined.columns {
            Some(known) => held(results, plan, known, first, &mut opened, &mut counts).await?,
            // Step 0 describes the answer's columns; they are kept once the first combined
            // step's own definitions are read (`Describing::note`).
            None => {
                if combined.shape.is_some() {
                    describing = Describing::new(plan, combined.key, &first);
                }
                first
            }
        },
    };
    let names = plan.steps[0].names.as_ref();
    let shape = Shape::new(&defs, spec.hidden, &counts, binary)?;
    let visible = defs[..shape.visible].to_vec();
    let count_all = results.counts_found_rows() && spec.distinct.is_some();
    // A combined step's rows come as its shards' sorted runs one after another.
    let unsorted_runs = plan
        .steps
        .iter()
        .map(|s| plan.combined.is_some() && s.shards.len() > 1)
        .collect();
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
        opened,
        unsorted_runs,
        runs: vec![None; plan.steps.len()],
        held: 0,
        describing,
        columns,
    };
    // Every step's reply begun before the answer's columns go out (when no two steps share
    // a connection): a step that fails at its start, such as a shard met at a move's fence
    // (1146), fails the statement with nothing sent, so it can run again.
    if sorted || m.results.lanes_unshared() {
        for step in 1..m.steps {
            m.open(step).await?;
        }
    }
    // The first shard's flags stand for all: each plans the same statement on a table of
    // the same definition, as the one table would be planned.
    m.client.send_columns(
        &visible,
        names,
        crate::protocol::status::relayed(status, columns_status),
    )?;
    if sorted {
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

/// The held column definitions of a combined read's answer, when the first combined
/// step describes its own as it did when they were described (else
/// [`ProxyError::Stale`]: the plan runs again, describing). `first` is step 0's; the
/// steps read up to the first combined one are marked `opened`, their column counts noted
/// in `counts`.
async fn held(
    results: &mut Results<'_, '_>,
    plan: &Plan,
    known: &DescribedColumns,
    first: Vec<BytesMut>,
    opened: &mut [bool],
    counts: &mut Vec<usize>,
) -> Result<Vec<BytesMut>, ProxyError> {
    let Some(union) = plan.steps.iter().position(|s| s.shards.len() > 1) else {
        return Err(ProxyError::Internal(
            "a combined read without a combined step".into(),
        ));
    };
    let mut union_defs = first;
    for (step, opened) in opened.iter_mut().enumerate().take(union + 1).skip(1) {
        let (defs, _) = result_set(results.reply(step).await?)?;
        *opened = true;
        counts.push(defs.len());
        union_defs = defs;
    }
    if fingerprint(&union_defs) == known.fingerprint {
        Ok(known.definitions.clone())
    } else {
        Err(ProxyError::Stale(
            "a combined read's columns are no longer described as they were kept".into(),
        ))
    }
}

/// A combined read that describes its columns as it runs: step 0's definitions are kept
/// with the fingerprint of the first combined step's, once that step is opened.
struct Describing {
    key: u64,
    definitions: Vec<BytesMut>,
    /// The first combined step.
    step: usize,
}

impl Describing {
    /// `None` when no step is combined (nothing to fingerprint: nothing is kept).
    fn new(plan: &Plan, key: u64, definitions: &[BytesMut]) -> Option<Self> {
        let step = plan.steps.iter().position(|s| s.shards.len() > 1)?;
        Some(Self {
            key,
            definitions: definitions.to_vec(),
            step,
        })
    }

    /// A step's definitions were read: at the first combined step, the description is
    /// kept.
    fn note(this: &mut Option<Self>, step: usize, defs: &[BytesMut], columns: &ColumnCache) {
        if this.as_ref().is_some_and(|d| d.step == step) {
            let d = this.take().expect("checked");
            columns.insert(
                d.key,
                DescribedColumns {
                    definitions: d.definitions,
                    fingerprint: fingerprint(defs),
                },
            );
        }
    }
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
    /// Steps whose column definitions were read.
    opened: Vec<bool>,
    /// Steps whose rows are several shards' sorted runs one after another (combined).
    unsorted_runs: Vec<bool>,
    /// Such a step's rows, read whole and sorted, with their ORDER BY keys.
    runs: Vec<Option<VecDeque<Keyed>>>,
    /// Rows held in `runs` (bounded by the row cap).
    held: u64,
    /// The description to keep, when the read describes its columns as it runs.
    describing: Option<Describing>,
    columns: &'a ColumnCache,
}

impl Merger<'_, '_, '_, '_> {
    /// Reads a later step's column definitions: the same number of columns as the first.
    async fn open(&mut self, step: usize) -> Result<(), ProxyError> {
        let expected = self.shape.metas.len();
        if let Some(defs) = open(self.results, &mut self.opened, step, expected).await? {
            Describing::note(&mut self.describing, step, &defs, self.columns);
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
        if self.runs[step].is_some() {
            // Read whole already.
            return Ok(());
        }
        while self.results.next_row(step).await?.is_some() {}
        Ok(())
    }

    /// Steps one after another (DISTINCT and LIMIT without ORDER BY).
    async fn concatenated(&mut self) -> Result<(), ProxyError> {
        for step in 0..self.steps {
            self.open(step).await?;
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
        if self.unsorted_runs[step] {
            if self.runs[step].is_none() {
                self.sort_runs(step).await?;
            }
            return Ok(self.runs[step].as_mut().and_then(VecDeque::pop_front));
        }
        let Some(row) = self.results.next_row(step).await? else {
            return Ok(None);
        };
        self.keyed(row).map(Some)
    }

    /// Reads a combined step's rows whole (each shard's sorted run, cut at its
    /// `LIMIT offset + count`) and sorts them by the ORDER BY keys as the merge compares
    /// them; equal rows keep the order they came in.
    async fn sort_runs(&mut self, step: usize) -> Result<(), ProxyError> {
        let mut rows = Vec::new();
        while let Some(row) = self.results.next_row(step).await? {
            self.held += 1;
            if self.held > self.spec.row_cap {
                return Err(crate::execute::results::row_cap_error(self.spec.row_cap));
            }
            rows.push(self.keyed(row)?);
        }
        let order = &self.spec.order;
        rows.sort_by(|a, b| compare(&a.1, &b.1, order));
        self.runs[step] = Some(rows.into());
        Ok(())
    }

    /// A row with its ORDER BY keys.
    fn keyed(&self, row: BytesMut) -> Result<(BytesMut, Vec<Key>), ProxyError> {
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
        Ok((row, keys))
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
            let expected = self.shape.metas.len();
            if let Some(defs) = open(self.results, &mut self.opened, step, expected).await? {
                Describing::note(&mut self.describing, step, &defs, self.columns);
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

/// Reads a step's column definitions, once (`None` when read before): as many columns as
/// `expected`.
async fn open(
    results: &mut Results<'_, '_>,
    opened: &mut [bool],
    step: usize,
    expected: usize,
) -> Result<Option<Vec<BytesMut>>, ProxyError> {
    if std::mem::replace(&mut opened[step], true) {
        return Ok(None);
    }
    let (defs, _) = result_set(results.reply(step).await?)?;
    if defs.len() != expected {
        return Err(ProxyError::Internal(format!(
            "shards returned different column counts ({expected} and {})",
            defs.len()
        )));
    }
    Ok(Some(defs))
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
