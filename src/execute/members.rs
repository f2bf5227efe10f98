//! Helpers of the member choice on clustered datasources (issue 26;
//! [`super::Transaction::fresh`] decides): a wait (for a pooled connection, for a primary)
//! that `KILL QUERY` ends, a replica's wait for the session's writes, and the error of a
//! write whose held connection's member is no longer the primary.

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

/// A connection from the pool of `member` of `ds`, or 1317 when the session's statement is
/// killed while it waits for one (a pool exhausted by other sessions, a server slow to
/// accept).
pub(super) async fn checkout(
    pools: &crate::backend::Pools,
    session: Option<&SessionHandle>,
    (ds, member): (crate::config::DatasourceId, usize),
    found_rows: bool,
) -> Result<crate::backend::PooledConn, ProxyError> {
    if session.is_some_and(|s| s.query_killed()) {
        return Err(ProxyError::interrupted());
    }
    let get = pools.get(ds, member, found_rows);
    killable(session, get).await
}

/// Waits on a replica's connection until it applied `required` (`MASTER_GTID_WAIT`, at
/// most `topology.causal_wait`): `true` when it did (remembered for the member), `false`
/// on a timeout or an error (counted; the primary reads instead).
pub(super) async fn wait_for(
    conn: &mut crate::backend::BackendConn,
    cluster: &Cluster,
    member: usize,
    required: &crate::topology::gtid::GtidSet,
) -> bool {
    let wait = cluster.settings.causal_wait.as_secs_f64();
    let sql = format!("SELECT MASTER_GTID_WAIT('{required}', {wait:.3})");
    let caught_up = matches!(
        conn.query_rows(sql.as_bytes()).await,
        Ok((_, rows)) if rows.first().and_then(|r| r.first()).is_some_and(|v| v.as_deref() == Some(b"0"))
    );
    if caught_up {
        cluster.caught_up(member, required);
    } else {
        cluster
            .counters
            .causal_timed_out
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    caught_up
}
