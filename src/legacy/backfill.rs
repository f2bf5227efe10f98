//! `routekey-proxy index backfill`: writes the missing index rows of legacy orders and,
//! with `--prune-dangling`, deletes index rows whose order no shard holds.
//!
//! Only what a machine can decide is written: a row's own `channel` column, when that
//! channel routes the id to the shard holding the row; an index row naming another channel
//! is never overwritten (it is reported). A dangling index row is deleted only when it is
//! older than `--min-age` by the server's clock, checked in the `DELETE` itself, so an
//! insert whose shard write is still in flight keeps its index row. The shared cache's
//! (Redis) keys of changed ids are deleted; in-process caches forget them at their TTL.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;

use super::check::{Checker, FindingKind, Repair};
use super::checkpoint::Checkpoint;
use super::progress::Progress;
use super::report::Report;
use super::scan::{MergedScan, ScanError, Sightings, Sources, Tables};
use super::verify::now_unix_ms;
use super::{Scope, StopFlag, qualified, quote_ident, stopped};
use crate::config::{ChannelId, Config};
use crate::route::shared_cache::shared_key;

/// How often the checkpoint is saved while running (and always at the end).
const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// What `index backfill` does.
#[derive(Debug, Clone)]
pub struct BackfillOptions {
    /// The shards to scan.
    pub scope: Scope,
    /// Count what would be written or pruned, write nothing.
    pub dry_run: bool,
    /// Resume from and save progress to this file.
    pub checkpoint: Option<PathBuf>,
    /// Bound on rows scanned per second (order rows and index rows), for production.
    pub rows_per_second: Option<f64>,
    /// Also delete dangling index rows older than `min_age`.
    pub prune_dangling: bool,
    /// A dangling index row younger than this is kept (default 1 h).
    pub min_age: Duration,
    /// JSON lines of what needs a person go here when set.
    pub report: Option<PathBuf>,
    /// Rows per keyset page.
    pub page: usize,
    /// Draw a progress bar (a terminal) instead of plain lines.
    pub terminal: bool,
}

/// What a run did (this run's counts; the checkpoint holds the totals over resumes).
#[derive(Debug, Default)]
pub struct BackfillOutcome {
    /// Rows scanned.
    pub scanned: u64,
    /// How long the scan ran.
    pub elapsed: Duration,
    /// Index rows written (or, with `--dry-run`, that would be).
    pub written: u64,
    /// Missing index rows found written by someone else meanwhile (same channel).
    pub already_present: u64,
    /// Dangling index rows deleted (or, with `--dry-run`, that would be).
    pub pruned: u64,
    /// Dangling index rows kept because they are younger than `--min-age`.
    pub kept_young: u64,
    /// Rows left to a person (reported): index rows naming another channel, legacy rows
    /// whose channel does not match their shard.
    pub needs_person: u64,
    /// Redis keys that could not be deleted (they expire at `cache.ttl`).
    pub cache_errors: u64,
    /// The order id the run resumed above (`None` from the start).
    pub resumed_after: Option<u64>,
    /// Why it stopped early, if it did (Ctrl-C included).
    pub error: Option<String>,
}

impl BackfillOutcome {
    /// The exit status: 0 done, 1 done with rows left to a person, 2 not finished.
    pub fn exit_code(&self) -> u8 {
        match (&self.error, self.needs_person) {
            (Some(_), _) => 2,
            (None, 0) => 0,
            (None, _) => 1,
        }
    }

    /// One paragraph for people.
    pub fn summary(&self, options: &BackfillOptions) -> String {
        let verb = if options.dry_run {
            "would write"
        } else {
            "wrote"
        };
        let prune = if options.dry_run {
            "would prune"
        } else {
            "pruned"
        };
        let state = match &self.error {
            Some(e) => format!("STOPPED ({e}); run again with the same --checkpoint to resume"),
            None => "complete".to_owned(),
        };
        let mut out = format!(
            "index backfill: {}: {state}\n  rows scanned      {} in {:.1}s ({:.0} rows/s)\n  index rows {verb:<7}{}\n  already present   {}\n",
            options.scope,
            self.scanned,
            self.elapsed.as_secs_f64(),
            self.scanned as f64 / self.elapsed.as_secs_f64().max(0.001),
            self.written,
            self.already_present
        );
        if options.prune_dangling {
            out.push_str(&format!(
                "  dangling {prune:<9}{}\n  dangling kept     {} (younger than {})\n",
                self.pruned,
                self.kept_young,
                humantime::format_duration(options.min_age)
            ));
        }
        out.push_str(&format!(
            "  needs a person    {} (see `verify`)\n",
            self.needs_person
        ));
        if self.cache_errors > 0 {
            out.push_str(&format!(
                "  Redis keys not deleted: {} (they expire at cache.ttl)\n",
                self.cache_errors
            ));
        }
        if let Some(after) = self.resumed_after {
            out.push_str(&format!("  resumed above order id {after}\n"));
        }
        out
    }
}

/// The index table statements of a run.
struct IndexSql {
    insert: String,
    channel_of: String,
    prune: String,
}

impl IndexSql {
    fn new(config: &Config) -> Self {
        let ix = &config.index;
        let table = qualified(&ix.database, &ix.table);
        let (id, channel) = (
            quote_ident(&ix.order_id_column),
            quote_ident(&ix.channel_column),
        );
        let created = ix
            .created_at_column
            .as_deref()
            .map_or_else(String::new, quote_ident);
        Self {
            insert: format!("INSERT INTO {table} ({id}, {channel}) VALUES (?, ?)"),
            channel_of: format!("SELECT {channel} FROM {table} WHERE {id} = ?"),
            prune: format!(
                "DELETE FROM {table} WHERE {id} = ? AND {created} < NOW(6) - INTERVAL ? MICROSECOND"
            ),
        }
    }
}

/// One backfill run: the scan, the index connection, the counts.
struct Run<'a> {
    config: &'a Config,
    options: &'a BackfillOptions,
    sources: Sources,
    sql: IndexSql,
    redis: Option<redis::aio::MultiplexedConnection>,
    report: Report,
    outcome: BackfillOutcome,
    checkpoint: Checkpoint,
}

/// Writes missing index rows (and prunes dangling ones) over `options.scope`.
///
/// # Errors
/// The options cannot be honoured (pruning without `index.created_at_column`, a checkpoint
/// of another scope, a report file that cannot be created); nothing was done.
pub async fn backfill(
    config: &Config,
    options: &BackfillOptions,
    stop: &StopFlag,
) -> Result<BackfillOutcome, String> {
    if options.prune_dangling && config.index.created_at_column.is_none() {
        return Err(
            "--prune-dangling needs index.created_at_column in the configuration (the column holding each index row's creation time), so young rows of inserts in flight are kept"
                .to_owned(),
        );
    }
    let checkpoint = load_checkpoint(options)?;
    let report = Report::create(options.report.as_deref()).map_err(|e| e.to_string())?;
    let streams = options.scope.shards().count() + 2;
    let mut run = Run {
        config,
        options,
        sources: Sources::new(config, streams),
        sql: IndexSql::new(config),
        redis: redis_connection(config).await,
        report,
        outcome: BackfillOutcome {
            resumed_after: checkpoint.after,
            ..BackfillOutcome::default()
        },
        checkpoint,
    };
    let started = Instant::now();
    let result = run.scan(stop).await;
    run.outcome.elapsed = started.elapsed();
    run.outcome.error = result.err();
    run.save_checkpoint()
        .map_err(|e| format!("{e} (the run itself ended: {:?})", run.outcome.error))?;
    run.report.finish().map_err(|e| e.to_string())?;
    run.sources.disconnect().await;
    Ok(run.outcome)
}

fn load_checkpoint(options: &BackfillOptions) -> Result<Checkpoint, String> {
    let scope = options.scope.to_string();
    let Some(path) = &options.checkpoint else {
        return Ok(Checkpoint {
            scope,
            ..Checkpoint::default()
        });
    };
    match Checkpoint::load(path)? {
        Some(c) if c.scope != scope => Err(format!(
            "--checkpoint {}: saved by a run over {}, not {scope}; use another file",
            path.display(),
            c.scope
        )),
        Some(c) => Ok(c),
        None => Ok(Checkpoint {
            scope,
            ..Checkpoint::default()
        }),
    }
}

async fn redis_connection(config: &Config) -> Option<redis::aio::MultiplexedConnection> {
    let tier = config.cache.redis.as_ref()?;
    let connect = async {
        redis::Client::open(tier.url.as_str())?
            .get_multiplexed_async_connection()
            .await
    };
    match tokio::time::timeout(Duration::from_secs(5), connect).await {
        Ok(Ok(c)) => Some(c),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "Redis unreachable: cached routes of changed ids expire at cache.ttl");
            None
        }
        Err(_) => {
            tracing::warn!(
                "Redis did not answer within 5s: cached routes of changed ids expire at cache.ttl"
            );
            None
        }
    }
}

impl Run<'_> {
    async fn scan(&mut self, stop: &StopFlag) -> Result<(), String> {
        let options = self.options;
        let page = match options.rows_per_second {
            Some(rate) => options.page.min((rate as usize).max(1)),
            None => options.page,
        };
        let tables = Tables { items: false };
        let total = self
            .sources
            .estimated_rows(self.config, &options.scope, tables)
            .await;
        let mut progress = Progress::new("backfill", total, options.terminal);
        let mut scan = MergedScan::new(
            self.config,
            &options.scope,
            tables,
            self.checkpoint.after,
            page,
        );
        let checker = Checker::new(self.config, now_unix_ms());
        let started = Instant::now();
        let mut saved = Instant::now();
        while let Some(s) = scan.next(&self.sources).await.map_err(|e| e.to_string())? {
            if stopped(stop) {
                return Err("interrupted".to_owned());
            }
            let rows = s.orders.len() as u64 + u64::from(s.index.is_some());
            self.outcome.scanned += rows;
            self.checkpoint.scanned += rows;
            if let Some(rate) = options.rows_per_second {
                let due = started + Duration::from_secs_f64(self.outcome.scanned as f64 / rate);
                tokio::time::sleep_until(due.into()).await;
            }
            self.repair(&checker, &s).await.map_err(|e| e.to_string())?;
            self.checkpoint.after = Some(s.order_id);
            if saved.elapsed() >= CHECKPOINT_EVERY {
                self.save_checkpoint()?;
                saved = Instant::now();
            }
            let o = &self.outcome;
            progress.update(scan.rows_read(), || {
                format!("{} written, {} pruned", o.written, o.pruned)
            });
        }
        let o = &self.outcome;
        progress.finish(
            scan.rows_read(),
            &format!("{} written, {} pruned", o.written, o.pruned),
        );
        Ok(())
    }

    async fn repair(&mut self, checker: &Checker<'_>, s: &Sightings) -> Result<(), ScanError> {
        for f in checker.check(s, &self.options.scope) {
            if f.kind == FindingKind::IndexConflict {
                self.needs_person(f)?;
            }
        }
        match checker.repair(s) {
            Repair::None => {}
            Repair::WriteIndex(ch) => self.write_index(s.order_id, ch).await?,
            Repair::PruneIndex if self.options.prune_dangling && self.prunable(checker, s) => {
                self.prune(checker, s).await?;
            }
            Repair::PruneIndex => {}
            Repair::NeedsPerson(f) => self.needs_person(f)?,
        }
        Ok(())
    }

    fn needs_person(&mut self, f: super::check::Finding) -> Result<(), ScanError> {
        self.outcome.needs_person += 1;
        self.report.add(f).map_err(|e| ScanError(e.to_string()))
    }

    /// A dangling row inside the scope (its channel routes it to a scanned shard).
    fn prunable(&self, checker: &Checker<'_>, s: &Sightings) -> bool {
        !checker.check(s, &self.options.scope).is_empty()
    }

    async fn write_index(&mut self, id: u64, ch: ChannelId) -> Result<(), ScanError> {
        let name = self.config.channel(ch).name.clone();
        if self.options.dry_run {
            self.outcome.written += 1;
            return Ok(());
        }
        let mut conn = self.index_conn().await?;
        match conn.exec_drop(&self.sql.insert, (id, &name)).await {
            Ok(()) => {
                self.outcome.written += 1;
                self.checkpoint.written += 1;
                self.forget_cached(id).await;
                Ok(())
            }
            Err(mysql_async::Error::Server(e)) if e.code == 1062 => {
                // Written meanwhile (by a proxy inserting the order, or another backfill).
                let now: Option<Option<String>> = conn
                    .exec_first(&self.sql.channel_of, (id,))
                    .await
                    .map_err(|e| ScanError(format!("index table: {e}")))?;
                let now = now.flatten();
                if now.as_deref().and_then(|c| self.config.channel_by_name(c)) == Some(ch) {
                    self.outcome.already_present += 1;
                    return Ok(());
                }
                self.needs_person(super::check::Finding {
                    kind: FindingKind::IndexConflict,
                    table: self.config.sharding.binding_tables[0].clone(),
                    shard: Some(self.config.shard_of(ch, id)),
                    order_id: id,
                    detail: format!(
                        "the index names {} (written meanwhile), the row says {name}; not overwritten",
                        now.as_deref().unwrap_or("NULL")
                    ),
                })
            }
            Err(e) => Err(ScanError(format!("index table: {e}"))),
        }
    }

    async fn prune(&mut self, checker: &Checker<'_>, s: &Sightings) -> Result<(), ScanError> {
        // Read every shard again: the order may have been written since the scan passed.
        let fresh = self
            .sources
            .sightings_of(self.config, &[s.order_id])
            .await?;
        let Some(fresh) = fresh.get(&s.order_id) else {
            return Ok(());
        };
        if checker.repair(fresh) != Repair::PruneIndex {
            return Ok(());
        }
        let min_age = self.options.min_age;
        if self.options.dry_run {
            match fresh.index.as_ref().and_then(|i| i.age) {
                Some(age) if age >= min_age => self.outcome.pruned += 1,
                _ => self.outcome.kept_young += 1,
            }
            return Ok(());
        }
        let micros = u64::try_from(min_age.as_micros()).unwrap_or(u64::MAX);
        let mut conn = self.index_conn().await?;
        conn.exec_drop(&self.sql.prune, (s.order_id, micros))
            .await
            .map_err(|e| ScanError(format!("index table: {e}")))?;
        if conn.affected_rows() == 1 {
            self.outcome.pruned += 1;
            self.checkpoint.pruned += 1;
            self.forget_cached(s.order_id).await;
        } else {
            self.outcome.kept_young += 1;
        }
        Ok(())
    }

    async fn index_conn(&self) -> Result<mysql_async::Conn, ScanError> {
        self.sources
            .conn(self.config.index.datasource.0 as usize)
            .await
    }

    /// Deletes the shared cache's entry for `id`, so the next lookup reads the index.
    async fn forget_cached(&mut self, id: u64) {
        let Some(redis) = &mut self.redis else {
            return;
        };
        let key = shared_key(self.config.sharding.shard_map_version, id);
        let del = redis::cmd("DEL").arg(key).to_owned();
        let done =
            tokio::time::timeout(Duration::from_secs(1), del.query_async::<i64>(redis)).await;
        if !matches!(done, Ok(Ok(_))) {
            self.outcome.cache_errors += 1;
        }
    }

    fn save_checkpoint(&self) -> Result<(), String> {
        match &self.options.checkpoint {
            Some(path) if !self.options.dry_run => self.checkpoint.save(path),
            _ => Ok(()),
        }
    }
}
