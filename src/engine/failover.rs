//! A statement on a clustered datasource that runs again when the member it went to could
//! not take it and nothing reached the client (issue 26):
//!
//! - a read a replica could not answer (it went down, refused, or lost the connection)
//!   runs once more on the primary;
//! - a write (or a primary read) outside a transaction that the primary refused as
//!   read-only (1290: a switchover under way) or that found no primary to connect to
//!   runs again once a probe round has looked, until `topology.failover_wait` from the
//!   statement's start.
//!
//! A write whose connection was lost after it was sent is never run again: the client
//! gets the error (it may have committed).

use tokio::time::Instant;

use super::session::Session;
use crate::error::{ER_OPTION_PREVENTS_STATEMENT, ProxyError};
use crate::execute::Access;
use crate::plan::Plan;

/// A statement's allowance of attempts.
pub(super) struct Retry {
    /// Writes and primary reads stop trying then.
    deadline: Instant,
    /// Outside a transaction, with autocommit on and nothing pinned, as it started.
    alone: bool,
    /// The replica read ran again on the primary already.
    read_moved: bool,
}

impl Retry {
    /// The allowance of a statement about to run `plan`.
    pub(super) fn new(session: &Session, plan: &Plan) -> Self {
        let wait = plan
            .steps
            .iter()
            .filter_map(|s| session.rt.topology.cluster(s.datasource))
            .map(|c| c.settings.failover_wait)
            .max()
            .unwrap_or_default();
        Self {
            deadline: Instant::now() + wait,
            alone: !session.in_transaction() && session.state.autocommit && !session.txn.pinned(),
            read_moved: false,
        }
    }

    /// Whether to run `plan` again after it failed with `e` (`untouched`: nothing was
    /// written to the client), having waited for what a retry needs.
    pub(super) async fn again(
        &mut self,
        session: &mut Session,
        plan: &Plan,
        e: &ProxyError,
        untouched: bool,
    ) -> bool {
        if !untouched || !self.alone {
            return false;
        }
        let Some(cluster) = plan
            .steps
            .iter()
            .find_map(|s| session.rt.topology.cluster(s.datasource))
            .cloned()
        else {
            return false;
        };
        let refused =
            matches!(e, ProxyError::Backend { code, .. } if *code == ER_OPTION_PREVENTS_STATEMENT);
        let unreachable = matches!(e, ProxyError::Unavailable(_));
        let on_replica = session.txn.causal.take_replica_used();
        if session.step_access == Access::Read && on_replica && !self.read_moved {
            if refused {
                // The read writes (a stored function): on the primary it is a write whose
                // GTID the session's later reads must see.
                for step in &plan.steps {
                    session.record_write(step.datasource);
                }
            }
            if refused || unreachable || matches!(e, ProxyError::Io(_)) {
                self.read_moved = true;
                session.step_access = Access::Primary;
                session.txn.release_idle();
                cluster.nudge();
                return true;
            }
            return false;
        }
        if !(refused || unreachable) || Instant::now() >= self.deadline {
            return false;
        }
        session.txn.release_idle();
        cluster
            .counters
            .writes_retried
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tracing::info!(datasource = %cluster.name, error = %e, "a statement the primary could not take runs again after a probe round");
        let _ = tokio::time::timeout_at(self.deadline, cluster.next_round()).await;
        Instant::now() < self.deadline
    }
}

/// Resolves when a replica the session's running statement reads from fails its probe
/// (a server stopped or cut off: the read would wait for it as long as it stays so), or
/// when the statement is killed: the error the statement ends with. Runs beside a read
/// that may be on a replica ([`super::run`]); never resolves for `None`.
pub(super) async fn replica_lost(
    watched: Option<(
        std::sync::Arc<crate::proxy::Runtime>,
        std::sync::Arc<crate::session_registry::SessionHandle>,
    )>,
) -> ProxyError {
    let Some((rt, handle)) = watched else {
        // Nothing to watch: the statement ends on its own.
        return std::future::pending().await;
    };
    let mut rounds: Vec<_> = rt.topology.clusters().map(|c| c.rounds()).collect();
    loop {
        let next =
            futures_util::future::select_all(rounds.iter_mut().map(|r| Box::pin(r.changed())));
        tokio::select! {
            _ = next => {}
            () = handle.query_kill_signal() => return ProxyError::interrupted(),
        }
        let Some(running) = handle.running() else {
            continue;
        };
        for &(ds, member, _) in &running.threads {
            let Some(cluster) = rt.topology.cluster(ds) else {
                continue;
            };
            if cluster.role(member) == crate::topology::view::Role::Down {
                return ProxyError::Unavailable(format!(
                    "replica {} of datasource {} stopped answering its probes during the read",
                    cluster.members[member].address, cluster.name
                ));
            }
        }
    }
}
