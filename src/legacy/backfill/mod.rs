//! `routekey-proxy index backfill`: writes the missing index rows of legacy orders and,
//! with `--prune-dangling`, deletes index rows whose order no shard holds.
//!
//! Only what a machine can decide is written: a row's own `channel` column, when that
//! channel routes the id to the shard holding the row; an index row naming another channel
//! is never overwritten (it is reported), and neither is a duplicate's. Each write and prune
//! is decided on a fresh read of every shard for that id, never on the scan's view alone (a
//! narrowed scan does not see the other shards; traffic moves on).
//!
//! A dangling index row is deleted only when it is older than `--min-age` by the server's
//! clock, checked in the `DELETE` itself. The proxy writes (or marks young) the index row of
//! every insert of an id that does not decode before its shard write, so an insert in flight
//! keeps its index row. The shared cache's (Redis) keys of changed ids are deleted;
//! in-process caches forget them at their TTL.

mod options;
mod outcome;
mod writes;

use std::time::{Duration, Instant};

pub use options::BackfillOptions;
pub use outcome::BackfillOutcome;
use writes::{IndexWrites, Written};

use super::check::{Checker, Finding, FindingKind, Repair};
use super::checkpoint::Checkpoint;
use super::progress::Progress;
use super::report::Report;
use super::scan::{MergedScan, ScanError, Sightings, Sources, Tables};
use super::{Scope, Stop};
use crate::config::{ChannelId, Config};

/// How often the checkpoint is saved while running (and always at the end).
const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// Ids decided together on one fresh read of every shard, at most.
const BATCH: usize = 500;

fn interrupted() -> ScanError {
    ScanError("interrupted".to_owned())
}

/// One backfill run: the scan's sources, the index writes, the counts.
struct Run<'a> {
    config: &'a Config,
    options: &'a BackfillOptions,
    sources: Sources,
    writes: IndexWrites,
    checker: Checker<'a>,
    report: Report,
    outcome: BackfillOutcome,
    checkpoint: Checkpoint,
    /// The last id the scan handed over (the checkpoint moves here once its batch is done).
    scanned_through: Option<u64>,
    /// Findings of the batch being decided, reported when it is done.
    unreported: Vec<Finding>,
    /// Rows scanned since the checkpoint last moved (added to its total when it moves).
    scanned_since_checkpoint: u64,
}

/// Writes missing index rows (and prunes dangling ones) over `options.scan.scope`.
///
/// # Errors
/// The options cannot be honoured; nothing was done: pruning without
/// `index.created_at_column`, a rate below 0.001 rows/s, a checkpoint of another run or of a
/// finished one, a checkpoint or report file that cannot be written.
pub async fn backfill(
    config: &Config,
    options: &BackfillOptions,
    stop: &Stop,
) -> Result<BackfillOutcome, String> {
    if options.prune_dangling && config.index.created_at_column.is_none() {
        return Err(
            "--prune-dangling needs index.created_at_column in the configuration (the column holding each index row's creation time), so young rows of inserts in flight are kept"
                .to_owned(),
        );
    }
    if options
        .rows_per_second
        .is_some_and(|r| r.is_nan() || r < 0.001)
    {
        return Err("--rows-per-second must be at least 0.001".to_owned());
    }
    let checkpoint = load_checkpoint(options, config)?;
    // A resumed run adds to the report of the runs before it.
    let resuming = checkpoint.after.is_some();
    let report = Report::create(options.report.as_deref(), resuming).map_err(|e| e.to_string())?;
    let streams = options.scan.scope.shards().count() + 2;
    let mut run = Run {
        config,
        options,
        sources: Sources::new(config, streams, options.scan.read_timeout),
        writes: IndexWrites::new(config).await,
        checker: Checker::live(config),
        report,
        outcome: BackfillOutcome {
            resumed_after: checkpoint.after,
            ..BackfillOutcome::default()
        },
        checkpoint,
        scanned_through: None,
        unreported: Vec::new(),
        scanned_since_checkpoint: 0,
    };
    // A checkpoint that cannot be written is found before anything is.
    run.save_checkpoint()?;
    let started = Instant::now();
    let result = run.scan(stop).await;
    run.outcome.elapsed = started.elapsed();
    if run.outcome.resumed_after.is_some() {
        run.outcome.needs_person_total = Some(run.checkpoint.needs_person);
    }
    // Finished only when the scan ended and its report is on disk.
    let result = result.and_then(|()| run.report.flush().map_err(|e| ScanError(e.to_string())));
    run.checkpoint.finished = result.is_ok();
    run.outcome.error = result.err().map(|e| e.0);
    if let Err(e) = run.save_checkpoint() {
        run.outcome.error.get_or_insert(e);
    }
    run.sources.disconnect().await;
    Ok(run.outcome)
}

fn load_checkpoint(options: &BackfillOptions, config: &Config) -> Result<Checkpoint, String> {
    let run = options.run_label(config);
    let fresh = Checkpoint {
        run: run.clone(),
        ..Checkpoint::default()
    };
    let Some(path) = &options.checkpoint else {
        return Ok(fresh);
    };
    let shown = path.display();
    match Checkpoint::load(path)? {
        Some(c) if c.run != run => Err(format!(
            "--checkpoint {shown}: saved by another run ({}), not this one ({run}); use another file",
            c.run
        )),
        Some(c) if c.finished => Err(format!(
            "--checkpoint {shown}: that run finished ({} rows scanned, {} index rows written, {} pruned); delete the file to run again",
            c.scanned, c.written, c.pruned
        )),
        Some(c) => Ok(c),
        None => Ok(fresh),
    }
}

/// Ids whose repair the scan proposed, waiting for their fresh read together.
#[derive(Default)]
struct Batch {
    /// (order id, whether a prune is proposed: a dangling row inside the scope).
    ids: Vec<(u64, bool)>,
    first: Option<Instant>,
}

impl Batch {
    fn due(&self) -> bool {
        self.ids.len() >= BATCH || self.first.is_some_and(|t| t.elapsed() >= CHECKPOINT_EVERY)
    }
}

impl Run<'_> {
    async fn scan(&mut self, stop: &Stop) -> Result<(), ScanError> {
        let options = self.options;
        let page = match options.rows_per_second {
            Some(rate) => options.scan.page.min((rate as usize).max(1)),
            None => options.scan.page,
        };
        let tables = Tables { items: false };
        let total = self
            .sources
            .estimated_rows(self.config, &options.scan.scope)
            .await;
        let mut progress = Progress::new("backfill", total, options.scan.terminal);
        let after = self.checkpoint.after;
        let mut scan = MergedScan::new(self.config, &options.scan.scope, tables, after, page);
        let started = Instant::now();
        let mut batch = Batch::default();
        let mut saved = Instant::now();
        let result = loop {
            let s = match stop.unless(scan.next(&self.sources)).await {
                None => break Err(interrupted()),
                Some(Err(e)) => break Err(e),
                Some(Ok(None)) => break Ok(()),
                Some(Ok(Some(s))) => s,
            };
            let rows = s.orders.len() as u64 + u64::from(s.index.is_some());
            if let Some(rate) = options.rows_per_second {
                let due =
                    started + Duration::from_secs_f64((self.outcome.scanned + rows) as f64 / rate);
                if stop
                    .unless(tokio::time::sleep_until(due.into()))
                    .await
                    .is_none()
                {
                    break Err(interrupted());
                }
            }
            self.propose(&s, &mut batch);
            self.outcome.scanned += rows;
            self.scanned_since_checkpoint += rows;
            self.scanned_through = Some(s.order_id);
            if batch.due() || (batch.ids.is_empty() && saved.elapsed() >= CHECKPOINT_EVERY) {
                match stop.unless(self.flush(&mut batch)).await {
                    Some(Ok(())) => saved = Instant::now(),
                    Some(Err(e)) => break Err(e),
                    None => break Err(interrupted()),
                }
            }
            progress.update(scan.rows_read(), || self.note());
        };
        // What was proposed is done now, unless a stop was asked for: then the checkpoint
        // stays before it, and a resumed run proposes it again.
        let flushed = match stop.unless(self.flush(&mut batch)).await {
            Some(flushed) => flushed,
            None => Err(interrupted()),
        };
        progress.finish(scan.rows_read(), &self.note());
        result.and(flushed)
    }

    /// Adds the id to the batch when the scan shows something to repair or report.
    fn propose(&self, s: &Sightings, batch: &mut Batch) {
        let proposed = self.checker.repair(s);
        let findings = self.checker.check(s, &self.options.scan.scope);
        let conflict = findings
            .iter()
            .any(|f| f.kind == FindingKind::IndexConflict);
        let prunable = proposed == Repair::PruneIndex
            && self.options.prune_dangling
            // Dangling inside the scope: its channel routes it to a scanned shard.
            && !findings.is_empty();
        if conflict
            || prunable
            || matches!(proposed, Repair::WriteIndex(_) | Repair::NeedsPerson(_))
        {
            batch.first.get_or_insert_with(Instant::now);
            batch.ids.push((s.order_id, prunable));
        }
    }

    /// Decides the batch on a fresh read of every shard, writes and prunes what is still
    /// to do, then moves the checkpoint to the last id scanned and saves it.
    async fn flush(&mut self, batch: &mut Batch) -> Result<(), ScanError> {
        self.unreported.clear();
        if !batch.ids.is_empty() {
            let ids: Vec<u64> = batch.ids.iter().map(|(id, _)| *id).collect();
            let fresh = self.sources.sightings_of(self.config, &ids).await?;
            let everything = Scope::everything(self.config);
            let (mut writes, mut prunes) = (Vec::new(), Vec::new());
            // The batch stays whole until its writes are done: a failed write leaves it (and
            // the checkpoint) where it was, to be tried again.
            for &(id, prunable) in &batch.ids {
                let Some(s) = fresh.get(&id) else { continue };
                for f in self.checker.check(s, &everything) {
                    if f.kind == FindingKind::IndexConflict {
                        self.needs_person(f);
                    }
                }
                match self.checker.repair(s) {
                    Repair::WriteIndex(ch) => writes.push((id, ch)),
                    Repair::PruneIndex if prunable => prunes.push(s.clone()),
                    Repair::NeedsPerson(f) => self.needs_person(f),
                    Repair::PruneIndex | Repair::None => {}
                }
            }
            self.write_indexes(&writes).await?;
            self.prune(&prunes).await?;
            batch.ids.clear();
            batch.first = None;
        }
        // From here on nothing waits, so a stop cannot cut it: the batch's findings, the
        // report on disk, then the checkpoint (it never claims more than the report holds).
        let found = std::mem::take(&mut self.unreported);
        self.outcome.needs_person += found.len() as u64;
        self.checkpoint.needs_person += found.len() as u64;
        for f in found {
            self.report.add(f).map_err(|e| ScanError(e.to_string()))?;
        }
        self.report.flush().map_err(|e| ScanError(e.to_string()))?;
        self.checkpoint.after = self.scanned_through.or(self.checkpoint.after);
        self.checkpoint.scanned += std::mem::take(&mut self.scanned_since_checkpoint);
        self.save_checkpoint().map_err(ScanError)
    }

    /// The progress line's note: what was (or, in a dry run, would be) written and pruned.
    fn note(&self) -> String {
        let o = &self.outcome;
        if self.options.dry_run {
            format!("{} to write, {} to prune (dry run)", o.written, o.pruned)
        } else {
            format!("{} written, {} pruned", o.written, o.pruned)
        }
    }

    /// Keeps a finding for the report; it is written with the checkpoint that moves past
    /// its batch, so a batch cut short by a stop is reported once, by the resumed run.
    fn needs_person(&mut self, f: Finding) {
        self.unreported.push(f);
    }

    /// Writes the index rows of one batch: one multi-row INSERT; when a row exists
    /// meanwhile (the whole statement is then refused), row by row.
    async fn write_indexes(&mut self, rows: &[(u64, ChannelId)]) -> Result<(), ScanError> {
        if rows.is_empty() {
            return Ok(());
        }
        if self.options.dry_run {
            self.outcome.written += rows.len() as u64;
            return Ok(());
        }
        let named: Vec<(u64, &str)> = rows
            .iter()
            .map(|(id, ch)| (*id, self.config.channel(*ch).name.as_str()))
            .collect();
        if self.writes.insert_all(&self.sources, &named).await? {
            self.outcome.written += rows.len() as u64;
            self.checkpoint.written += rows.len() as u64;
            self.forget_cached(rows.iter().map(|(id, _)| *id)).await;
            return Ok(());
        }
        for (id, ch) in rows {
            self.write_index(*id, *ch).await?;
        }
        Ok(())
    }

    async fn write_index(&mut self, id: u64, ch: ChannelId) -> Result<(), ScanError> {
        let name = self.config.channel(ch).name.clone();
        match self.writes.insert(&self.sources, id, &name).await? {
            Written::Inserted => {
                self.outcome.written += 1;
                self.checkpoint.written += 1;
                self.forget_cached([id]).await;
                Ok(())
            }
            Written::Present => {
                self.outcome.already_present += 1;
                Ok(())
            }
            Written::Other(now) => {
                self.needs_person(Finding {
                kind: FindingKind::IndexConflict,
                table: self.config.sharding.binding_tables[0].clone(),
                shard: Some(self.config.shard_of(ch, id)),
                order_id: id,
                detail: format!(
                    "the index names {} (written meanwhile), the row says {name}; not overwritten",
                    now.as_deref().unwrap_or("NULL")
                ),
            });
                Ok(())
            }
        }
    }

    /// Deletes the dangling index rows of one batch that are older than `--min-age`.
    async fn prune(&mut self, dangling: &[Sightings]) -> Result<(), ScanError> {
        if dangling.is_empty() {
            return Ok(());
        }
        let min_age = self.options.min_age;
        if self.options.dry_run {
            for s in dangling {
                match s.index.as_ref().and_then(|i| i.age) {
                    Some(age) if age >= min_age => self.outcome.pruned += 1,
                    _ => self.outcome.kept_young += 1,
                }
            }
            return Ok(());
        }
        let ids: Vec<u64> = dangling.iter().map(|s| s.order_id).collect();
        let pruned = self.writes.prune(&self.sources, &ids, min_age).await?;
        self.outcome.pruned += pruned;
        self.checkpoint.pruned += pruned;
        self.outcome.kept_young += ids.len() as u64 - pruned;
        self.forget_cached(ids).await;
        Ok(())
    }

    async fn forget_cached(&mut self, ids: impl IntoIterator<Item = u64>) {
        let ids: Vec<u64> = ids.into_iter().collect();
        if !self.writes.forget_cached(&ids).await {
            self.outcome.cache_errors += ids.len() as u64;
        }
    }

    fn save_checkpoint(&self) -> Result<(), String> {
        match &self.options.checkpoint {
            Some(path) if !self.options.dry_run => self.checkpoint.save(path),
            _ => Ok(()),
        }
    }
}
