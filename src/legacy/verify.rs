//! `routekey-proxy verify`: can every order be found by its id, and if not, which ones and
//! why. Read-only.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::check::{Checker, Finding};
use super::progress::Progress;
use super::report::Report;
use super::scan::{MergedScan, ScanError, Sources, Tables};
use super::{Scope, StopFlag, stopped};
use crate::config::Config;

/// How many order ids with findings wait for their second look together.
const RECHECK_BATCH: usize = 200;

/// What `verify` reads and where it writes.
#[derive(Debug, Clone)]
pub struct VerifyOptions {
    /// The shards to scan.
    pub scope: Scope,
    /// JSON lines of findings go here when set.
    pub report: Option<PathBuf>,
    /// Rows per keyset page (memory is about pages x scanned tables rows).
    pub page: usize,
    /// A finding is checked again no sooner than this after it was seen, so that an insert
    /// in flight (its index row committed before its shard row) is not reported.
    pub recheck_after: Duration,
    /// Draw a progress bar (a terminal) instead of plain lines.
    pub terminal: bool,
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

/// Findings of the scan waiting for their second look.
struct Pending {
    first_seen: Option<Instant>,
    ids: Vec<u64>,
    findings: Vec<Finding>,
}

/// Scans `options.scope` and reports what is wrong (findings checked twice).
///
/// # Errors
/// The report file cannot be created (nothing was scanned).
pub async fn verify(
    config: &Config,
    options: &VerifyOptions,
    stop: &StopFlag,
) -> Result<VerifyOutcome, String> {
    let mut report = Report::create(options.report.as_deref()).map_err(|e| e.to_string())?;
    let tables = Tables { items: true };
    let streams = config.sharding.binding_tables.len() * options.scope.shards().count() + 1;
    let sources = Sources::new(config, streams);
    let total = sources.estimated_rows(config, &options.scope, tables).await;
    let mut progress = Progress::new("verify", total, options.terminal);
    let mut scan = MergedScan::new(config, &options.scope, tables, None, options.page);
    let checker = Checker::new(config, now_unix_ms());
    let mut pending = Pending {
        first_seen: None,
        ids: Vec::new(),
        findings: Vec::new(),
    };
    let mut ids = 0u64;
    let mut error = None;
    loop {
        if stopped(stop) {
            error = Some("interrupted".to_owned());
            break;
        }
        let s = match scan.next(&sources).await {
            Ok(Some(s)) => s,
            Ok(None) => break,
            Err(e) => {
                error = Some(e.to_string());
                break;
            }
        };
        ids += 1;
        let found = checker.check(&s, &options.scope);
        if !found.is_empty() {
            pending.first_seen.get_or_insert_with(Instant::now);
            pending.ids.push(s.order_id);
            pending.findings.extend(found);
        }
        if pending.ids.len() >= RECHECK_BATCH
            && let Err(e) = recheck(config, &sources, options, &mut pending, &mut report).await
        {
            error = Some(e.to_string());
            break;
        }
        progress.update(scan.rows_read(), || {
            format!("{} finding(s)", report.total())
        });
    }
    if error.is_none()
        && let Err(e) = recheck(config, &sources, options, &mut pending, &mut report).await
    {
        error = Some(e.to_string());
    }
    progress.finish(scan.rows_read(), &format!("{} finding(s)", report.total()));
    sources.disconnect().await;
    report.finish().map_err(|e| e.to_string())?;
    Ok(VerifyOutcome {
        report,
        rows_read: scan.rows_read(),
        ids,
        error,
    })
}

/// The second look: the pending ids read again on every shard. A finding is reported when
/// the fresh view still shows it; what the fresh view shows besides on the scanned shards
/// (a dangling index row whose order sits on a shard outside a narrowed scan) is reported
/// too.
async fn recheck(
    config: &Config,
    sources: &Sources,
    options: &VerifyOptions,
    pending: &mut Pending,
    report: &mut Report,
) -> Result<(), ScanError> {
    let Some(first) = pending.first_seen.take() else {
        return Ok(());
    };
    let wait = options.recheck_after.saturating_sub(first.elapsed());
    tokio::time::sleep(wait).await;
    let everything = Scope::new(config, None, &[]).map_err(ScanError)?;
    let checker = Checker::new(config, now_unix_ms());
    let fresh: BTreeMap<u64, _> = sources.sightings_of(config, &pending.ids).await?;
    for s in fresh.values() {
        for f in checker.check(s, &everything) {
            let before = pending.findings.iter().any(|b| b.same_fault(&f));
            let in_scope = f.shard.is_none_or(|n| options.scope.contains(n));
            if before || in_scope {
                report.add(f).map_err(|e| ScanError(e.to_string()))?;
            }
        }
    }
    pending.ids.clear();
    pending.findings.clear();
    Ok(())
}

/// The current time in Unix milliseconds (the decode window's "now").
pub(crate) fn now_unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
