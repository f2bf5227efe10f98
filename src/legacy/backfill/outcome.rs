//! What a backfill run did, and its summary for people.

use std::time::Duration;

use super::options::BackfillOptions;

/// What a run did (this run's counts; the checkpoint holds the totals over resumes).
#[derive(Debug, Default)]
pub struct BackfillOutcome {
    /// Rows scanned.
    pub scanned: u64,
    /// How long the run took.
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
    /// whose channel does not match their shard, duplicates.
    pub needs_person: u64,
    /// For a resumed run, rows left to a person over every run of its checkpoint.
    pub needs_person_total: Option<u64>,
    /// Redis keys that could not be deleted (they expire at `cache.ttl`).
    pub cache_errors: u64,
    /// The order id the run resumed above (`None` from the start).
    pub resumed_after: Option<u64>,
    /// Why it stopped early, if it did (Ctrl-C included).
    pub error: Option<String>,
}

impl BackfillOutcome {
    /// The exit status: 0 done, 1 done with rows left to a person (by any run of its
    /// checkpoint), 2 not finished.
    pub fn exit_code(&self) -> u8 {
        match (
            &self.error,
            self.needs_person_total.unwrap_or(self.needs_person),
        ) {
            (Some(_), _) => 2,
            (None, 0) => 0,
            (None, _) => 1,
        }
    }

    /// One line per count, `label  value`, for people (and for scripts: labels are stable).
    pub fn summary(&self, options: &BackfillOptions) -> String {
        let dry = options.dry_run;
        let state = match &self.error {
            Some(e) => format!("STOPPED ({e}); run again with the same --checkpoint to resume"),
            None if dry => "complete (dry run: nothing written)".to_owned(),
            None => "complete".to_owned(),
        };
        let secs = self.elapsed.as_secs_f64();
        let mut lines = vec![
            (
                "rows scanned",
                format!(
                    "{} in {secs:.1}s ({:.0} rows/s)",
                    self.scanned,
                    self.scanned as f64 / secs.max(0.001)
                ),
            ),
            (
                if dry {
                    "index rows to write"
                } else {
                    "index rows written"
                },
                self.written.to_string(),
            ),
            ("already present", self.already_present.to_string()),
        ];
        if options.prune_dangling {
            lines.push((
                if dry {
                    "dangling to prune"
                } else {
                    "dangling pruned"
                },
                self.pruned.to_string(),
            ));
            lines.push((
                "dangling kept",
                format!(
                    "{} (younger than {})",
                    self.kept_young,
                    humantime::format_duration(options.min_age)
                ),
            ));
        }
        lines.push((
            "needs a person",
            match self.needs_person_total {
                Some(total) => format!(
                    "{} ({total} over every run of the checkpoint)",
                    self.needs_person
                ),
                None => self.needs_person.to_string(),
            },
        ));
        if self.cache_errors > 0 {
            lines.push((
                "Redis keys kept",
                format!(
                    "{} (delete failed; they expire at cache.ttl)",
                    self.cache_errors
                ),
            ));
        }
        if let Some(after) = self.resumed_after {
            lines.push(("resumed above", format!("order id {after}")));
        }
        let mut out = format!("index backfill: {}: {state}\n", options.scan.scope);
        for (label, value) in lines {
            out.push_str(&format!("  {label:<20} {value}\n"));
        }
        out
    }
}
