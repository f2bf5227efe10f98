//! A statement that met a moved shard's fence (docs/operations.md, "Moving shards"): while a
//! `shards move` cuts over, the moved shards' tables are renamed away on their old
//! datasource, so a statement routed there under the old shard map fails with 1146 before
//! it changed anything. Outside a transaction it waits for the shard map version that
//! moves the shards and runs once more, so the client sees a pause, not an error; inside a
//! transaction (which finishes under the map it began with) the client is told to retry the
//! transaction; a session whose state lives on the old datasource's connections ends.

use super::session::Session;
use crate::error::{ER_NO_SUCH_TABLE, ProxyError};
use crate::proxy::shard_map::FenceWait;

/// MySQL's "Table definition has changed, please retry transaction".
const ER_TABLE_DEF_CHANGED: u16 = 1412;

/// One statement's wait at fences, over its runs: it waits at most `shard_map.fence_wait`
/// from the first fence it met (runs again meanwhile whenever the fence may be gone: a
/// cut-over undone and tried again meets it anew), and runs again after "nothing moving"
/// once.
#[derive(Debug, Default)]
pub(super) struct Fences {
    until: Option<std::time::Instant>,
    not_moving: bool,
}

/// What to do after a statement met the fence.
pub(super) enum AfterFence {
    /// Not a fence, or nothing to do: the statement's own error stands.
    Stands,
    /// A newer shard map is in force for this session: run the statement once more.
    RunAgain,
    /// The client gets this error instead.
    Replace(ProxyError),
}

impl Session {
    /// Whether `e` is a shard table missing on its datasource: a backend 1146 naming one
    /// of the shards' physical databases.
    fn met_fence(&self, e: &ProxyError) -> bool {
        let ProxyError::Backend { code, message, .. } = e else {
            return false;
        };
        if *code != ER_NO_SUCH_TABLE {
            return false;
        }
        let mut databases: Vec<&str> = self
            .rt
            .config
            .sharding
            .shards
            .iter()
            .map(|s| s.database.as_str())
            .collect();
        databases.dedup();
        databases.iter().any(|db| {
            let needle = format!("'{db}.");
            message
                .windows(needle.len())
                .any(|w| w == needle.as_bytes())
        })
    }

    /// After the statement run under shard map `version` failed with `e` (`untouched`:
    /// nothing reached the client): waits at the fence when it is one
    /// ([`crate::proxy::Proxy::await_shard_map_after`]) and says what follows.
    pub(super) async fn after_fence(
        &mut self,
        fences: &mut Fences,
        e: &ProxyError,
        version: u64,
        untouched: bool,
    ) -> AfterFence {
        if !untouched || !self.met_fence(e) {
            return AfterFence::Stands;
        }
        let until = *fences
            .until
            .get_or_insert_with(|| std::time::Instant::now() + self.rt.config.shard_map.fence_wait);
        match self.proxy.await_shard_map_after(version, until).await {
            FenceWait::Moved => {}
            // The tables are back where the map says, or may be: run again (the statement
            // failed before it changed anything).
            FenceWait::Undone | FenceWait::StillFenced => return AfterFence::RunAgain,
            // Nothing moving may also be a fence undone before this statement looked: one
            // more run says (the same 1146 if the table is really missing).
            FenceWait::NotMoving if !fences.not_moving => {
                fences.not_moving = true;
                return AfterFence::RunAgain;
            }
            FenceWait::NotMoving | FenceWait::TimedOut => return AfterFence::Stands,
        }
        let moved = format!(
            "a shard this statement reaches moved to another datasource (shard map version {} is in force now, this {} began under version {version})",
            self.proxy.map_version(),
            if self.in_transaction() {
                "transaction"
            } else {
                "session"
            },
        );
        if self.in_transaction() {
            return AfterFence::Replace(ProxyError::client(
                ER_TABLE_DEF_CHANGED,
                b"HY000",
                format!("Table definition has changed, please retry transaction: {moved}"),
            ));
        }
        match self.refresh() {
            Ok(()) if self.rt.config.sharding.map_version > version => AfterFence::RunAgain,
            Ok(()) => {
                // The session keeps state on the old map's connections (user variables,
                // locks, temporary tables): it cannot follow.
                let why = format!(
                    "{moved}, and this session keeps state on its backend connections (user variables, locks, temporary tables); reconnect"
                );
                self.txn.set_lost(why.clone());
                AfterFence::Replace(ProxyError::client(
                    crate::error::ER_CONNECTION_KILLED,
                    b"70100",
                    format!("Connection was killed: {why}"),
                ))
            }
            Err(e) => AfterFence::Replace(e),
        }
    }
}
