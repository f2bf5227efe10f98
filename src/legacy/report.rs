//! Findings out: JSON lines for machines (`--report FILE`), a summary table for people.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use super::check::{Finding, FindingKind};

/// How many findings the summary prints in full.
const EXAMPLES: usize = 20;

/// The findings of a run: counted by kind, written to the report file as they come, the
/// first few kept for the summary (memory does not grow with their number).
#[derive(Debug)]
pub struct Report {
    file: Option<BufWriter<File>>,
    counts: BTreeMap<FindingKind, u64>,
    examples: Vec<Finding>,
}

impl Report {
    /// A report writing JSON lines to `path` when given: a new file (an existing one is
    /// truncated), or with `append` (a resumed run) added to the end of what is there.
    ///
    /// # Errors
    /// The file cannot be created or opened.
    pub fn create(path: Option<&Path>, append: bool) -> io::Result<Self> {
        let file = match path {
            Some(p) => {
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .write(true)
                    .append(append)
                    .truncate(!append)
                    .open(p)
                    .map_err(|e| {
                        io::Error::new(e.kind(), format!("--report {}: {e}", p.display()))
                    })?;
                Some(BufWriter::new(file))
            }
            None => None,
        };
        Ok(Self {
            file,
            counts: BTreeMap::new(),
            examples: Vec::new(),
        })
    }

    /// Adds one finding: one JSON object per line, with at least `kind`, `table`, `shard`,
    /// `order_id` (a decimal string) and `detail`.
    ///
    /// # Errors
    /// The report file cannot be written.
    pub fn add(&mut self, finding: Finding) -> io::Result<()> {
        if let Some(file) = &mut self.file {
            serde_json::to_writer(&mut *file, &finding)?;
            file.write_all(b"\n")?;
        }
        *self.counts.entry(finding.kind).or_default() += 1;
        if self.examples.len() < EXAMPLES {
            self.examples.push(finding);
        }
        Ok(())
    }

    /// Findings by kind.
    pub fn counts(&self) -> &BTreeMap<FindingKind, u64> {
        &self.counts
    }

    /// Every finding added.
    pub fn total(&self) -> u64 {
        self.counts.values().sum()
    }

    /// Flushes the report file (before a checkpoint is saved, and at the end).
    ///
    /// # Errors
    /// The report file cannot be written.
    pub fn flush(&mut self) -> io::Result<()> {
        match &mut self.file {
            Some(f) => f
                .flush()
                .map_err(|e| io::Error::new(e.kind(), format!("--report: {e}"))),
            None => Ok(()),
        }
    }

    /// A table of counts by kind with what repairs each, then the first findings.
    pub fn summary(&self) -> String {
        let mut out = format!("{:<18} {:>10}  repaired by\n", "finding", "count");
        for kind in FindingKind::ALL {
            let n = self.counts.get(&kind).copied().unwrap_or(0);
            out.push_str(&format!(
                "{:<18} {n:>10}  {}\n",
                kind.label(),
                kind.repair()
            ));
        }
        out.push_str(&format!("{:<18} {:>10}\n", "total", self.total()));
        if !self.examples.is_empty() {
            let shown = self.examples.len() as u64;
            out.push_str(&format!(
                "\nfirst {shown} of {} finding(s):\n",
                self.total()
            ));
            for f in &self.examples {
                out.push_str(&format!(
                    "  {:<16} {:<28} shard {:<4} order_id {:<20} {}\n",
                    f.kind.label(),
                    f.table,
                    f.shard.map_or_else(|| "-".to_owned(), |s| s.to_string()),
                    f.order_id,
                    f.detail
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn findings_are_json_lines_and_counted() {
        let path = std::env::temp_dir().join(format!("rk-report-{}.jsonl", std::process::id()));
        let mut r = Report::create(Some(&path), false).unwrap();
        for id in [7, 8] {
            r.add(Finding {
                kind: FindingKind::WrongShard,
                table: "t_order".into(),
                shard: Some(3),
                order_id: id,
                detail: "on shard 3".into(),
            })
            .unwrap();
        }
        r.flush().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["kind"], "wrong_shard");
        assert_eq!(lines[1]["order_id"], "8");
        assert_eq!(lines[0]["shard"], 3);
        assert_eq!(r.total(), 2);
        assert!(r.summary().contains("wrong_shard                 2"));
        let _ = std::fs::remove_file(path);
    }
}
