//! Progress of a long scan: a bar with rate and ETA on a terminal (indicatif), plain
//! periodic lines on stderr otherwise (logs, CI, `nohup`).

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How often a plain progress line is written.
const PLAIN_EVERY: Duration = Duration::from_secs(10);

/// Reports rows read against the servers' estimate of the total.
pub struct Progress {
    what: &'static str,
    bar: Option<ProgressBar>,
    started: Instant,
    last_line: Instant,
    total: u64,
}

impl Progress {
    /// Progress of `what` (`verify`, `backfill`) over about `total` rows (an estimate; 0
    /// when unknown); a bar when `terminal`.
    pub fn new(what: &'static str, total: u64, terminal: bool) -> Self {
        let bar = terminal.then(|| {
            let bar = ProgressBar::with_draw_target(Some(total.max(1)), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template(
                    "{prefix} [{elapsed_precise}] {wide_bar} {human_pos}/~{human_len} rows {per_sec} ETA {eta} {msg}",
                )
                .expect("a valid template"),
            );
            bar.set_prefix(what);
            bar
        });
        let now = Instant::now();
        Self {
            what,
            bar,
            started: now,
            last_line: now,
            total,
        }
    }

    /// `rows` read so far; `note` (findings, rows written) shown beside.
    pub fn update(&mut self, rows: u64, note: impl FnOnce() -> String) {
        if let Some(bar) = &self.bar {
            if rows > bar.length().unwrap_or(0) {
                bar.set_length(rows);
            }
            bar.set_position(rows);
            bar.set_message(note());
            return;
        }
        if self.last_line.elapsed() < PLAIN_EVERY {
            return;
        }
        self.last_line = Instant::now();
        eprintln!("{}", self.line(rows, &note()));
    }

    fn line(&self, rows: u64, note: &str) -> String {
        let secs = self.started.elapsed().as_secs_f64().max(0.001);
        let rate = rows as f64 / secs;
        let eta = if self.total > rows && rate > 0.0 {
            let left = Duration::from_secs(((self.total - rows) as f64 / rate) as u64);
            format!(", ETA {}", humantime::format_duration(left))
        } else {
            String::new()
        };
        format!(
            "{}: {rows} of ~{} rows, {rate:.0} rows/s{eta}; {note}",
            self.what, self.total
        )
    }

    /// Ends the bar (or writes a last plain line).
    pub fn finish(&self, rows: u64, note: &str) {
        match &self.bar {
            Some(bar) => {
                bar.set_position(rows);
                bar.abandon_with_message(note.to_owned());
            }
            None => eprintln!("{}", self.line(rows, note)),
        }
    }
}
