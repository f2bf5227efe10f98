//! The versioned shard map this proxy follows (docs/operations.md, "Moving shards"): read
//! from the meta datasource's shard map table at start and every
//! `shard_map.poll_interval` ([`super::Proxy::refresh_shard_map`], the server's poller), and
//! applied to a copy of the configuration in force as one new runtime, so a statement runs
//! wholly under one version. A statement that meets a moved shard's fence (its table
//! renamed away by a cut-over) waits here for the version that moves it
//! ([`super::Proxy::await_shard_map_after`]) and runs once more.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::config::Config;
use crate::config::shard_map::ShardMap;
use crate::route::shard_map::ShardMapStore;

/// Time between two reads of the map while a statement waits at a fence.
pub(super) const FENCE_POLL: Duration = Duration::from_millis(50);

/// What a fenced statement's wait came to (`routekey_shard_fence_waits_total{result}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FenceWait {
    /// A newer map is in force: run the statement again under it.
    Moved,
    /// No cut-over stands and no newer map exists: the table is missing for another reason.
    NotMoving,
    /// A cut-over stood, and was undone (the move tries again later, or was aborted): the
    /// tables are back under the same map; run the statement again.
    Undone,
    /// A cut-over still stands after [`FENCE_RETRY`]: run the statement again to see
    /// whether it is gone (a cut-over undone between two looks at the moves table).
    StillFenced,
    /// A cut-over stands, but its map did not come within `shard_map.fence_wait`.
    TimedOut,
}

/// How long a statement waits at a standing fence before it runs again.
pub const FENCE_RETRY: Duration = Duration::from_millis(250);

/// The shard map state of one proxy.
pub struct Follower {
    /// The tables on the meta datasource.
    pub store: ShardMapStore,
    /// The version in force; `None` until the table was first read (the configuration's
    /// ranges are in force then).
    pub(super) applied: Mutex<Option<ShardMap>>,
    /// The newest version read from the table (0: none read yet).
    pub(super) newest_read: AtomicU64,
    /// Reads of the table that failed.
    pub read_failures: AtomicU64,
    /// Versions read that this proxy could not apply (a datasource it does not define).
    pub apply_failures: AtomicU64,
    /// Fence waits by result: moved, not moving, undone, timed out.
    pub fence_waits: [AtomicU64; 4],
    /// Signalled whenever a version is applied.
    pub(super) changed: tokio::sync::Notify,
    /// When the statements at a fence last read the map, and whether it answered.
    pub(super) last_read: tokio::sync::Mutex<Option<(std::time::Instant, bool)>>,
    /// When they last asked whether a cut-over stands, and the answer.
    moving: tokio::sync::Mutex<Option<(std::time::Instant, bool)>>,
}

impl Follower {
    /// The follower of `config`'s meta datasource (no connection opens yet).
    pub fn new(config: &Config) -> Self {
        Self {
            store: ShardMapStore::new(config),
            applied: Mutex::new(None),
            newest_read: AtomicU64::new(0),
            read_failures: AtomicU64::new(0),
            apply_failures: AtomicU64::new(0),
            fence_waits: Default::default(),
            changed: tokio::sync::Notify::new(),
            last_read: tokio::sync::Mutex::new(None),
            moving: tokio::sync::Mutex::new(None),
        }
    }

    pub(super) fn applied(&self) -> Option<ShardMap> {
        self.applied
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// `config` with the version in force applied (a reloaded file keeps the table's map).
    ///
    /// # Errors
    /// The new configuration cannot hold that map (a datasource it names is gone).
    pub fn overlay(&self, config: Config) -> Result<Config, String> {
        match self.applied() {
            Some(map) => map.apply(&config),
            None => Ok(config),
        }
    }

    /// The newest version read from the table (0 before the first read).
    pub fn newest_read(&self) -> u64 {
        self.newest_read.load(Ordering::Relaxed)
    }

    /// Whether a move's cut-over stands fenced now (the moves table), read at most once per
    /// [`FENCE_POLL`] for all the statements waiting at once; `None` when the meta
    /// datasource did not answer.
    pub async fn moving(&self) -> Option<bool> {
        let mut last = self.moving.lock().await;
        if let Some((at, answer)) = *last
            && at.elapsed() < FENCE_POLL
        {
            return Some(answer);
        }
        let answer = self.store.cut_over_in_progress().await.ok()?;
        *last = Some((std::time::Instant::now(), answer));
        Some(answer)
    }

    /// Counts one fence wait's result.
    pub fn count_fence_wait(&self, result: FenceWait) {
        let i = match result {
            FenceWait::Moved => 0,
            FenceWait::NotMoving => 1,
            FenceWait::Undone => 2,
            FenceWait::TimedOut => 3,
            // Not an end: the statement runs again and may wait on.
            FenceWait::StillFenced => return,
        };
        self.fence_waits[i].fetch_add(1, Ordering::Relaxed);
    }
}
