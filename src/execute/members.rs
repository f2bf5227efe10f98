//! Helpers of the member choice on clustered datasources (issue 26;
//! [`super::Transaction::fresh`] decides): a wait (for a pooled connection, for a primary)
//! that `KILL QUERY` ends, and the error of a write whose held connection's member is no
//! longer the primary.

use crate::error::ProxyError;
use crate::session_registry::SessionHandle;
use crate::topology::Cluster;

/// `wait` (for a primary during a failover), or 1317 as soon as the session's statement
/// is killed.
pub(super) async fn killable<T>(
    session: Option<&SessionHandle>,
    wait: impl std::future::Future<Output = Result<T, ProxyError>>,
) -> Result<T, ProxyError> {
    let Some(session) = session else {
        return wait.await;
    };
    tokio::pin!(wait);
    // Ready at once (an idle pooled connection, a known primary: the usual case): no
    // watch on kills.
    if let Some(done) = futures_util::FutureExt::now_or_never(wait.as_mut()) {
        return done;
    }
    tokio::select! {
        done = wait => done,
        () = session.query_kill_signal() => Err(ProxyError::interrupted()),
    }
}

/// The error of a write in a transaction whose connection reaches a member that is no
/// longer the primary: it is not sent (the member refuses writes, or a split brain).
pub(super) fn demoted(cluster: &Cluster, member: usize) -> ProxyError {
    ProxyError::client(
        crate::error::ER_OPTION_PREVENTS_STATEMENT,
        b"HY000",
        format!(
            "routekey-proxy: this transaction's connection reaches {} of datasource {}, which is no longer its primary ({}); the write is not sent: roll the transaction back and run it again",
            cluster.members[member].address,
            cluster.name,
            cluster.role(member).name()
        ),
    )
}
