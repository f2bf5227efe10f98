//! `routekey-proxy verify`: can every order be found by its id, and if not, which ones and
//! why. Read-only.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::check::{Checker, Finding, FindingKind};
use super::progress::Progress;
use super::report::Report;
use super::scan::{MergedScan, ScanError, Sightings, Sources, Tables};
use super::{ScanOptions, Scope, Stop};
use crate::config::Config;

/// Ids checked again together, at most.
const RECHECK_BATCH: usize = 500;

/// Ids waiting for their second look, at most: beyond it the scan waits for the oldest
/// (memory stays bounded however many rows are wrong).
const MAX_PENDING: usize = 100_000;

/// What `verify` reads and where it writes.
#[derive(Debug, Clone)]
pub struct VerifyOptions {
    /// What to scan, and how.
    pub scan: ScanOptions,
    /// JSON lines of findings go here when set.
    pub report: Option<PathBuf>,
    /// A finding is checked again no sooner than this after it was seen, so that an insert
    /// in flight (its index row committed before its shard row) is not reported.
    pub recheck_after: Duration,
}

/// How a run ended.
#[derive(Debug)]
pub struct VerifyOutcome {
    /// Findings, counted and summarized.
    pub report: Report,
    /// Rows read over every scanned table.
    pub rows_read: u64,
    /// Distinct order ids seen.
    pub ids: u64,
    /// Why the scan could not finish, if it could not (Ctrl-C included).
    pub error: Option<String>,
}

impl VerifyOutcome {
    /// The exit status: 0 nothing wrong, 1 findings, 2 the scan could not finish.
    pub fn exit_code(&self) -> u8 {
        match (&self.error, self.report.total()) {
            (Some(_), _) => 2,
            (None, 0) => 0,
            (None, _) => 1,
        }
    }

    /// The summary table people read.
    pub fn summary(&self, scope: &Scope) -> String {
        let state = match &self.error {
            Some(e) => format!("INCOMPLETE ({e}); the counts cover the ids read so far"),
            None => "complete".to_owned(),
        };
        format!(
            "verify: {scope}: {} rows read, {} order ids, scan {state}\n{}",
            self.rows_read,
            self.ids,
            self.report.summary()
        )
    }
}

/// An id whose scan showed something wrong, waiting for its second look.
struct Suspect {
    seen: Instant,
    order_id: u64,
    findings: Vec<Finding>,
}

/// The run: the scan, the suspects waiting for their second look, the report.
struct Run<'a> {
    config: &'a Config,
    options: &'a VerifyOptions,
    sources: Sources,
    checker: Checker<'a>,
    suspects: VecDeque<Suspect>,
    report: Report,
}

/// Scans `options.scan.scope` and reports what is wrong (each finding checked twice).
///
/// # Errors
/// The report file cannot be created (nothing was scanned). A report that cannot be
/// written later ends the run as incomplete.
pub async fn verify(
    config: &Config,
    options: &VerifyOptions,
    stop: &Stop,
) -> Result<VerifyOutcome, String> {
    let report = Report::create(options.report.as_deref(), false).map_err(|e| e.to_string())?;
    let tables = Tables { items: true };
    let streams = config.sharding.binding_tables.len() * options.scan.scope.shards().count() + 1;
    let mut run = Run {
        config,
        options,
        sources: Sources::new(config, streams, options.scan.read_timeout),
        checker: Checker::live(config),
        suspects: VecDeque::new(),
        report,
    };
    let total = run
        .sources
        .estimated_rows(config, &options.scan.scope)
        .await;
    let mut progress = Progress::new("verify", total, options.scan.terminal);
    let mut scan = MergedScan::new(config, &options.scan.scope, tables, None, options.scan.page);
    let mut ids = 0u64;
    let mut error = None;
    loop {
        let next = match stop.unless(scan.next(&run.sources)).await {
            None => Err(ScanError("interrupted".to_owned())),
            Some(next) => next,
        };
        let s = match next {
            Ok(Some(s)) => s,
            Ok(None) => break,
            Err(e) => {
                error = Some(e.0);
                break;
            }
        };
        ids += 1;
        run.suspect(&s);
        if let Err(e) = run.recheck_due(stop).await {
            error = Some(e.0);
            break;
        }
        let found = run.report.total();
        progress.update(scan.rows_read(), || format!("{found} finding(s)"));
    }
    // The rest get their second look now (at once when the run was cut short).
    let wait = error.is_none();
    if let Err(e) = run.recheck_all(wait, stop).await {
        if let Err(e) = run.report_unchecked(&e) {
            error.get_or_insert(e);
        }
        error.get_or_insert(e.0);
    }
    let found = run.report.total();
    progress.finish(scan.rows_read(), &format!("{found} finding(s)"));
    run.sources.disconnect().await;
    // A report that cannot be written leaves the run incomplete (its summary still prints).
    if let Err(e) = run.report.flush() {
        error.get_or_insert(e.to_string());
    }
    Ok(VerifyOutcome {
        report: run.report,
        rows_read: scan.rows_read(),
        ids,
        error,
    })
}

impl Run<'_> {
    fn suspect(&mut self, s: &Sightings) {
        let findings = self.checker.check(s, &self.options.scan.scope);
        if !findings.is_empty() {
            self.suspects.push_back(Suspect {
                seen: Instant::now(),
                order_id: s.order_id,
                findings,
            });
        }
    }

    /// Second looks at the suspects seen `recheck_after` ago or more, without waiting,
    /// unless too many wait: then the oldest are waited for.
    async fn recheck_due(&mut self, stop: &Stop) -> Result<(), ScanError> {
        loop {
            let due = self
                .suspects
                .front()
                .is_some_and(|s| s.seen.elapsed() >= self.options.recheck_after);
            if !(due || self.suspects.len() >= MAX_PENDING) {
                return Ok(());
            }
            self.recheck_batch(true, stop).await?;
        }
    }

    async fn recheck_all(&mut self, wait: bool, stop: &Stop) -> Result<(), ScanError> {
        while !self.suspects.is_empty() {
            self.recheck_batch(wait, stop).await?;
        }
        Ok(())
    }

    /// The second look at the oldest suspects: their ids read again on every shard. A
    /// finding is reported when the fresh view still shows it; what the fresh view shows
    /// besides on the scanned shards is reported too.
    async fn recheck_batch(&mut self, wait: bool, stop: &Stop) -> Result<(), ScanError> {
        let Some(first) = self.suspects.front() else {
            return Ok(());
        };
        if wait {
            let left = self
                .options
                .recheck_after
                .saturating_sub(first.seen.elapsed());
            if stop.unless(tokio::time::sleep(left)).await.is_none() {
                return Err(ScanError("interrupted".to_owned()));
            }
        }
        let n = self.suspects.len().min(RECHECK_BATCH);
        let ids: Vec<u64> = self.suspects.iter().take(n).map(|s| s.order_id).collect();
        let fresh = match stop
            .unless(self.sources.sightings_of(self.config, &ids))
            .await
        {
            Some(fresh) => fresh?,
            None => return Err(ScanError("interrupted".to_owned())),
        };
        let everything = Scope::everything(self.config);
        let batch: Vec<Suspect> = self.suspects.drain(..n).collect();
        for suspect in &batch {
            let Some(s) = fresh.get(&suspect.order_id) else {
                continue;
            };
            for f in self.checker.check(s, &everything) {
                let before = suspect.findings.iter().any(|b| b.same_fault(&f));
                if before || self.in_scope(&f, s) {
                    self.report.add(f).map_err(|e| ScanError(e.to_string()))?;
                }
            }
        }
        Ok(())
    }

    /// Whether a finding of the fresh view concerns a scanned shard (a duplicate: any of
    /// the shards holding it).
    fn in_scope(&self, f: &Finding, s: &Sightings) -> bool {
        let scope = &self.options.scan.scope;
        match (f.kind, f.shard) {
            (FindingKind::Duplicate, _) => s.orders.iter().any(|o| scope.contains(o.shard)),
            (_, Some(n)) => scope.contains(n),
            (_, None) => scope.is_everything(self.config),
        }
    }

    /// The suspects whose second look could not be had, reported as seen once.
    fn report_unchecked(&mut self, why: &ScanError) -> Result<(), String> {
        for suspect in std::mem::take(&mut self.suspects) {
            for mut f in suspect.findings {
                f.detail = format!("{} (seen once; not checked again: {})", f.detail, why.0);
                self.report.add(f).map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    }
}
