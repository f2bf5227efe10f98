//! The coordinator's commit protocol over a session's held connections (issue 27;
//! docs/decisions/0004): prepare every XA branch, commit the decision inside the decision
//! branch, then commit the XA branches; the rollback of every branch; the decision read
//! back when its commit's connection was lost.

use std::sync::atomic::Ordering;
use std::time::Instant;

use litemap::LiteMap;

use super::xa::{
    Decision, Distributed, ER_XA_RBROLLBACK, ER_XAER_NOTA, decide_unless_decided,
    primary_connection,
};
use crate::backend::PooledConn;
use crate::config::DatasourceId;
use crate::error::ProxyError;

/// Commits a distributed transaction on the session's held connections by the protocol of
/// the module documentation. `Ok` only once the decision is a committed commit record;
/// the `XA COMMIT`s that fail after it are left to a resolver (the client is told OK: the
/// transaction is decided).
///
/// # Errors
/// - before the decision: the backend's error (every branch rolled back);
/// - the decision commit lost in flight and read back as an abort: 1402 (rolled back);
/// - the decision commit lost in flight and unreadable: 1180, naming the xid (a resolver
///   decides within `transactions.abandon_age`; never OK for a transaction that may roll
///   back).
pub async fn commit(
    held: &mut LiteMap<DatasourceId, PooledConn>,
    d: &Distributed,
) -> Result<(), ProxyError> {
    let coordinator = &d.source.coordinator;
    // 1. Prepare every XA branch.
    let mut prepared: Vec<DatasourceId> = Vec::with_capacity(d.branches.len());
    for &ds in &d.branches {
        let Some(conn) = held.get_mut(&ds) else {
            coordinator
                .counters
                .atomic_rolled_back
                .fetch_add(1, Ordering::Relaxed);
            rollback(held, d, &prepared).await;
            return Err(lost_branch(d, ds));
        };
        let bound = d.source.step_bound;
        let xid = d.xid(ds).sql();
        let end = step(conn, format!("XA END {xid}").as_bytes(), bound).await;
        let prepare = match end {
            Ok(_) => step(conn, format!("XA PREPARE {xid}").as_bytes(), bound).await,
            Err(e) => Err(e),
        };
        if let Err(e) = prepare {
            coordinator
                .counters
                .atomic_rolled_back
                .fetch_add(1, Ordering::Relaxed);
            rollback(held, d, &prepared).await;
            return Err(e);
        }
        coordinator
            .counters
            .prepared
            .fetch_add(1, Ordering::Relaxed);
        prepared.push(ds);
    }
    coordinator.failpoint("after_prepare");
    // 2. The decision: a commit record committed with the decision branch.
    match decide(held, d).await {
        Ok(()) => {}
        Err(Undecided::RolledBack(e)) => {
            coordinator
                .counters
                .atomic_rolled_back
                .fetch_add(1, Ordering::Relaxed);
            rollback(held, d, &prepared).await;
            return Err(e);
        }
        Err(Undecided::Lost(lost)) => match settle_lost(d, &lost).await {
            Ok(Decision::Commit) => {}
            Ok(Decision::Abort) => {
                coordinator
                    .counters
                    .atomic_rolled_back
                    .fetch_add(1, Ordering::Relaxed);
                rollback(held, d, &prepared).await;
                return Err(ProxyError::client(
                    ER_XA_RBROLLBACK,
                    b"XA100",
                    format!(
                        "XA_RBROLLBACK: Transaction branch was rolled back (the connection to decision datasource {} was lost during COMMIT ({lost}); the decision read back is abort: nothing was committed on any datasource)",
                        d.source.datasource.name
                    ),
                ));
            }
            Err(e) => {
                coordinator
                    .counters
                    .atomic_unknown
                    .fetch_add(1, Ordering::Relaxed);
                for ds in &d.branches {
                    if let Some(c) = held.get_mut(ds) {
                        c.mark_broken();
                    }
                }
                return Err(ProxyError::client(
                    crate::error::ER_ERROR_DURING_COMMIT,
                    b"HY000",
                    format!(
                        "Got error during COMMIT: the outcome of transaction {} is unknown (the connection to decision datasource {} was lost during COMMIT: {lost}; reading the decision back failed: {e}); a resolver commits or rolls back every branch within transactions.abandon_age; SHOW ROUTEKEY TRANSACTIONS lists it meanwhile",
                        d.gtrid, d.source.datasource.name
                    ),
                ));
            }
        },
    }
    coordinator.failpoint("after_decision");
    // 3. Commit every XA branch; a failure is the resolver's to finish.
    for (i, &ds) in d.branches.iter().enumerate() {
        if i > 0 {
            coordinator.failpoint("between_xa_commits");
        }
        let Some(conn) = held.get_mut(&ds) else {
            continue;
        };
        let committed = step(
            conn,
            format!("XA COMMIT {}", d.xid(ds).sql()).as_bytes(),
            d.source.step_bound,
        )
        .await;
        if let Err(e) = committed {
            tracing::warn!(xid = %d.xid(ds), datasource = ds.0, error = %e, "XA COMMIT after the decision failed; a resolver finishes the branch");
            coordinator
                .counters
                .commit_failures
                .fetch_add(1, Ordering::Relaxed);
            conn.mark_broken();
        }
    }
    coordinator
        .counters
        .commits_atomic
        .fetch_add(1, Ordering::Relaxed);
    Ok(())
}

fn lost_branch(d: &Distributed, ds: DatasourceId) -> ProxyError {
    ProxyError::Internal(format!(
        "the connection of XA branch {} on datasource #{} was not held at COMMIT; every branch was rolled back",
        d.gtrid, ds.0
    ))
}

/// Why the decision was not taken.
enum Undecided {
    /// Refused before or by the decision commit: nothing is committed.
    RolledBack(ProxyError),
    /// The connection failed during the decision commit: unknown.
    Lost(String),
}

/// Records the commit decision inside the decision branch and commits it. A missing
/// decision table is created on a connection of its own and the record tried again.
async fn decide(
    held: &mut LiteMap<DatasourceId, PooledConn>,
    d: &Distributed,
) -> Result<(), Undecided> {
    let Some(conn) = held.get_mut(&d.decision) else {
        return Err(Undecided::RolledBack(ProxyError::Internal(format!(
            "the decision branch of {} was not held at COMMIT",
            d.gtrid
        ))));
    };
    let insert = format!(
        "INSERT INTO {} (xid, decision, coordinator, decided_at) VALUES ({}, 'commit', '{}', {})",
        d.source.table,
        d.key().gtrid_literal(),
        d.source.coordinator.sidecar(),
        super::xa::utc_now_literal(std::time::Duration::ZERO)
    );
    let bound = d.source.step_bound;
    let mut inserted = step(conn, insert.as_bytes(), bound).await;
    if matches!(inserted, Err(ProxyError::Backend { code, .. }) if code == crate::error::ER_NO_SUCH_TABLE)
    {
        if let Err(e) = create_table(d).await {
            return Err(Undecided::RolledBack(e));
        }
        inserted = step(conn, insert.as_bytes(), bound).await;
    }
    match inserted {
        Ok(_) => {}
        Err(ProxyError::Backend { code, .. }) if code == crate::error::ER_DUP_ENTRY => {
            return Err(Undecided::RolledBack(ProxyError::client(
                ER_XA_RBROLLBACK,
                b"XA100",
                format!(
                    "XA_RBROLLBACK: Transaction branch was rolled back (transaction {} was decided as abort by a resolver: its prepared branches waited longer than transactions.abandon_age)",
                    d.gtrid
                ),
            )));
        }
        Err(e @ (ProxyError::Io(_) | ProxyError::Unavailable(_))) => {
            return Err(Undecided::RolledBack(e));
        }
        Err(e) => return Err(Undecided::RolledBack(e)),
    }
    match step(conn, b"COMMIT", bound).await {
        Ok(_) => Ok(()),
        Err(e @ ProxyError::Backend { .. }) => Err(Undecided::RolledBack(e)),
        Err(e) => {
            conn.mark_broken();
            Err(Undecided::Lost(e.to_string()))
        }
    }
}

/// One statement of the protocol on a branch's connection, within `bound` (half
/// `transactions.abandon_age`: a coordinator that has not decided by then gives way to the
/// resolvers). A statement that runs over closes its connection (what the server did with
/// it is unknown; a branch it leaves prepared is the resolvers').
async fn step(
    conn: &mut crate::backend::BackendConn,
    sql: &[u8],
    bound: std::time::Duration,
) -> Result<crate::protocol::packets::OkInfo, ProxyError> {
    match tokio::time::timeout(bound, conn.execute(sql)).await {
        Ok(done) => done,
        Err(_) => {
            conn.mark_broken();
            Err(ProxyError::Io(format!(
                "no answer within {bound:?} to {}",
                String::from_utf8_lossy(&sql[..sql.len().min(40)])
            )))
        }
    }
}

async fn create_table(d: &Distributed) -> Result<(), ProxyError> {
    let s = &d.source;
    let mut conn = primary_connection(
        &s.datasource,
        s.cluster.as_deref(),
        d.decision,
        s.max_packet,
    )
    .await?;
    for sql in &s.create {
        conn.execute(sql.as_bytes()).await?;
    }
    Ok(())
}

/// The decision of a commit whose connection was lost during `COMMIT`, read on a new
/// connection to the decision datasource's primary: the commit record if it is there,
/// else `abort` recorded now (which waits for the lost commit if the server still runs
/// it). Tried for up to 10 s.
async fn settle_lost(d: &Distributed, lost: &str) -> Result<Decision, ProxyError> {
    tracing::warn!(xid = %d.gtrid, error = lost, "the decision commit's connection was lost; reading the decision back");
    let s = &d.source;
    let deadline = Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let attempt = async {
            let mut conn = primary_connection(
                &s.datasource,
                s.cluster.as_deref(),
                d.decision,
                s.max_packet,
            )
            .await?;
            decide_unless_decided(&mut conn, &s.table, &d.key(), s.coordinator.sidecar()).await
        };
        match attempt.await {
            Ok(decision) => return Ok(decision),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(500)).await,
        }
    }
}

/// Rolls every branch back: the decision branch's plain transaction, the XA branches
/// (`XA ROLLBACK` of those in `prepared`, `XA END` + `XA ROLLBACK` of the others). A
/// connection that fails here is dropped (the server rolls back a branch that is not
/// prepared when its connection ends; a prepared one is the resolver's: no commit record
/// can exist for it).
pub async fn rollback(
    held: &mut LiteMap<DatasourceId, PooledConn>,
    d: &Distributed,
    prepared: &[DatasourceId],
) {
    let bound = d.source.step_bound;
    if let Some(conn) = held.get_mut(&d.decision) {
        // A connection that failed is dropped: the server rolls its transaction back.
        if !conn.is_broken() && step(conn, b"ROLLBACK", bound).await.is_err() {
            conn.mark_broken();
        }
    }
    for ds in &d.branches {
        let Some(conn) = held.get_mut(ds) else {
            continue;
        };
        if conn.is_broken() {
            continue;
        }
        let xid = d.xid(*ds).sql();
        if !prepared.contains(ds) {
            // Already idle (XA END ran) or rolled back by the server (a deadlock): the
            // error says which, the XA ROLLBACK below decides.
            let _ = step(conn, format!("XA END {xid}").as_bytes(), bound).await;
        }
        if conn.is_broken() {
            continue;
        }
        match step(conn, format!("XA ROLLBACK {xid}").as_bytes(), bound).await {
            Ok(_) => {}
            Err(ProxyError::Backend { code, .. }) if code == ER_XAER_NOTA => {}
            Err(e) => {
                tracing::debug!(xid = %d.xid(*ds), error = %e, "XA ROLLBACK failed; the connection is dropped");
                conn.mark_broken();
            }
        }
    }
}
