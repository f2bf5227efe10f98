//! The legacy tail's tools (SPEC §8): `routekey-proxy verify` proves that every order can be
//! found by its id and names the ones that cannot; `routekey-proxy index backfill` repairs
//! what a machine can repair (missing index rows, dangling index rows).
//!
//! Both read the shards and the index table directly over the control path (mysql_async),
//! never through the proxy, and share one shape:
//!
//! ```text
//! scan    (keyset-paged scans of each physical table and of the index table, in order_id order)
//!   -> merge (one k-way merge by order_id: every sighting of one id, on every shard, at once)
//!   -> check (pure: the routing rules of SPEC §3-4 applied to one id's sightings)
//!   -> verify: recheck each finding, report it | backfill: write or prune one index row
//! ```
//!
//! Memory does not grow with table size: each scan holds one page, and an id's sightings
//! are dropped once it has been checked. The first binding table (`t_order`) is the order
//! table, the one with the channel column; the others (`t_order_item`) are checked for
//! sitting beside their order.

pub mod backfill;
pub mod check;
pub mod checkpoint;
pub mod progress;
pub mod report;
pub mod scan;
pub mod verify;

use std::collections::BTreeSet;
use std::fmt;

use crate::config::Config;
use crate::sql::quote_ident;

/// Which shards a run reads: all of them, or those `--channel` and `--shard` leave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    shards: BTreeSet<u32>,
    label: String,
}

impl Scope {
    /// Every shard of the configuration, narrowed to the shards of `channel` (a channel name)
    /// and to `shards` when given.
    ///
    /// # Errors
    /// An unknown channel, a shard number the configuration does not have, or a narrowing
    /// that leaves no shard.
    pub fn new(config: &Config, channel: Option<&str>, shards: &[u32]) -> Result<Self, String> {
        let count = config.sharding.shards.len() as u32;
        let mut set: BTreeSet<u32> = (0..count).collect();
        let mut label = Vec::new();
        if let Some(name) = channel {
            let id = config
                .channel_by_name(name)
                .ok_or_else(|| format!("--channel: no channel named `{name}`"))?;
            let base = config.channel(id).base_shard;
            set.retain(|s| (base..base + config.sharding.shards_per_channel).contains(s));
            label.push(format!("channel {}", config.channel(id).name));
        }
        if !shards.is_empty() {
            if let Some(bad) = shards.iter().find(|s| **s >= count) {
                return Err(format!(
                    "--shard: shard {bad} does not exist (shards 0-{})",
                    count - 1
                ));
            }
            set.retain(|s| shards.contains(s));
            label.push(format!(
                "shard {}",
                shards
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
        if set.is_empty() {
            return Err(format!("{} leave no shard to scan", label.join(" and ")));
        }
        // Named by the shards it reads, however they were asked for: a checkpoint compares it.
        let label = if set.len() == count as usize {
            "all shards".to_owned()
        } else {
            format!("shards {}", ranges(&set))
        };
        Ok(Self { shards: set, label })
    }

    /// Every shard of `config`.
    pub fn everything(config: &Config) -> Self {
        let count = config.sharding.shards.len() as u32;
        Self {
            shards: (0..count).collect(),
            label: "all shards".to_owned(),
        }
    }

    /// Whether the run reads `shard`.
    pub fn contains(&self, shard: u32) -> bool {
        self.shards.contains(&shard)
    }

    /// The shards, ascending.
    pub fn shards(&self) -> impl Iterator<Item = u32> + '_ {
        self.shards.iter().copied()
    }

    /// Whether every shard is read (only then can "exists nowhere" be said from the scan).
    pub fn is_everything(&self, config: &Config) -> bool {
        self.shards.len() == config.sharding.shards.len()
    }
}

/// `0-3,9,12-13`: consecutive shard numbers as ranges.
fn ranges(set: &BTreeSet<u32>) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut iter = set.iter().copied().peekable();
    while let Some(first) = iter.next() {
        let mut last = first;
        while iter.peek() == Some(&(last + 1)) {
            last = iter.next().unwrap_or(last);
        }
        out.push(if first == last {
            first.to_string()
        } else {
            format!("{first}-{last}")
        });
    }
    out.join(",")
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label)
    }
}

/// What a scan reads and how: the options `verify` and `index backfill` share.
#[derive(Debug, Clone)]
pub struct ScanOptions {
    /// The shards to scan.
    pub scope: Scope,
    /// Rows per keyset page (memory is about pages x scanned tables rows).
    pub page: usize,
    /// Bound on one connect, read or write; a datasource that hangs longer ends the run
    /// (exit status 2).
    pub read_timeout: std::time::Duration,
    /// Draw a progress bar (a terminal) instead of plain lines.
    pub terminal: bool,
}

/// Asks a run to stop cleanly (the Ctrl-C handler does): it stops between two order ids,
/// also while it waits for a datasource or for its rate limit.
#[derive(Debug)]
pub struct Stop(tokio::sync::watch::Sender<bool>);

impl Default for Stop {
    fn default() -> Self {
        Self(tokio::sync::watch::Sender::new(false))
    }
}

impl Stop {
    /// Asks the run to stop.
    pub fn request(&self) {
        self.0.send_replace(true);
    }

    /// Whether a stop was asked for.
    pub fn requested(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once a stop is asked for.
    pub async fn wait(&self) {
        let mut rx = self.0.subscribe();
        let _ = rx.wait_for(|stop| *stop).await;
    }

    /// Runs `f` unless a stop is asked for first (`None` then).
    pub async fn unless<T>(&self, f: impl std::future::Future<Output = T>) -> Option<T> {
        tokio::select! {
            biased;
            () = self.wait() => None,
            v = f => Some(v),
        }
    }
}

fn qualified(database: &str, table: &str) -> String {
    format!("{}.{}", quote_ident(database), quote_ident(table))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn demo() -> Config {
        Config::from_toml(include_str!("../../config/demo.toml"), "demo.toml").unwrap()
    }

    #[test]
    fn scope_narrows_by_channel_and_shard() {
        let c = demo();
        let all = Scope::new(&c, None, &[]).unwrap();
        assert!(all.is_everything(&c));
        assert_eq!(all.to_string(), "all shards");
        let eu = Scope::new(&c, Some("EU_CHANNEL"), &[]).unwrap();
        assert_eq!(eu.shards().collect::<Vec<_>>(), vec![0, 1, 2, 3]);
        let one = Scope::new(&c, Some("GLOBAL_CHANNEL"), &[5, 9]).unwrap();
        assert_eq!(one.shards().collect::<Vec<_>>(), vec![5]);
        // Named by its shards, however they were asked for.
        assert_eq!(eu.to_string(), "shards 0-3");
        assert_eq!(Scope::new(&c, None, &[3, 1, 0, 2]).unwrap(), eu);
        assert_eq!(
            Scope::new(&c, None, &[9, 12, 13, 0]).unwrap().to_string(),
            "shards 0,9,12-13"
        );
        assert!(Scope::new(&c, Some("EU_CHANNEL"), &[9]).is_err());
        assert!(Scope::new(&c, Some("NOPE"), &[]).is_err());
        assert!(Scope::new(&c, None, &[20]).is_err());
    }
}
