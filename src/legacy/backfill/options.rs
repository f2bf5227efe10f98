//! What an `index backfill` run is asked to do.

use std::path::PathBuf;
use std::time::Duration;

use crate::config::Config;
use crate::legacy::ScanOptions;

/// What `index backfill` does.
#[derive(Debug, Clone)]
pub struct BackfillOptions {
    /// What to scan, and how.
    pub scan: ScanOptions,
    /// Count what would be written or pruned, write nothing.
    pub dry_run: bool,
    /// Resume from and save progress to this file.
    pub checkpoint: Option<PathBuf>,
    /// Bound on rows scanned per second (order rows and index rows), for production; at
    /// least 0.001.
    pub rows_per_second: Option<f64>,
    /// Also delete dangling index rows older than `min_age`.
    pub prune_dangling: bool,
    /// A dangling index row younger than this is kept (default 1 h).
    pub min_age: Duration,
    /// JSON lines of what needs a person go here when set.
    pub report: Option<PathBuf>,
}

impl BackfillOptions {
    /// What a run does, as its checkpoint records it: a resume must do the same.
    pub(super) fn run_label(&self, config: &Config) -> String {
        let ix = &config.index;
        let prune = if self.prune_dangling {
            format!(
                "prune dangling older than {}",
                humantime::format_duration(self.min_age)
            )
        } else {
            "no prune".to_owned()
        };
        format!(
            "{}; {prune}; index {}.{}; shard map v{:016x}",
            self.scan.scope, ix.database, ix.table, config.sharding.shard_map_version
        )
    }
}
