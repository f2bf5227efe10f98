//! The resolver every sidecar runs (issue 27; SPEC §5): it finishes the XA branches a
//! coordinator left prepared (a killed process, a lost connection, a failed `XA COMMIT`).
//!
//! Each round (`transactions.resolve_interval`) it runs `XA RECOVER` on every datasource's
//! primary and keeps the branches of ours (format id [`super::xa::FORMAT_ID`], gtrid
//! `rk:...`). A branch this resolver has seen prepared for `transactions.abandon_age` is
//! decided by the record on its decision datasource (the xid's bqual names it, after the
//! branch's datasource number): `commit` →
//! `XA COMMIT`; none → `abort` is recorded first (the key makes exactly one of the two
//! possible), then `XA ROLLBACK`. An "unknown xid" answer (1397: its owner is still
//! connected, or another resolver finished it) is never taken as done: the next round
//! looks again. Nothing is kept on the sidecar's disk: a sidecar that restarts resolves
//! its own leftovers and others' the same way.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::xa::{Coordinator, Decision, InDoubt, Xid};
use crate::backend::BackendConn;
use crate::config::{Config, DatasourceId};
use crate::error::ProxyError;
use crate::topology::Topology;

/// What one resolver remembers between rounds: when it first saw each branch prepared and
/// on which datasources the decision table exists.
#[derive(Default)]
pub struct Resolver {
    first_seen: HashMap<(String, Xid), Instant>,
    provisioned: Vec<String>,
    /// The last error of each datasource whose `XA RECOVER` fails (logged once per error).
    failing: HashMap<String, String>,
}

impl Resolver {
    /// One round over every datasource of `config`; what it found replaces
    /// `coordinator.in_doubt`. Each datasource's work is bounded by its
    /// `connect_timeout` + 10 s; one that does not answer is left for the next round.
    pub async fn round(&mut self, config: &Config, topology: &Topology, coordinator: &Coordinator) {
        coordinator
            .counters
            .resolver_rounds
            .fetch_add(1, Ordering::Relaxed);
        let mut conns: Vec<(DatasourceId, BackendConn)> = Vec::new();
        let mut listed: Vec<(DatasourceId, Xid)> = Vec::new();
        let mut answered_all = true;
        let mut errors: HashMap<String, String> = HashMap::new();
        for (i, ds) in config.datasources.iter().enumerate() {
            let id = DatasourceId(i as u16);
            let bound = ds.connect_timeout + Duration::from_secs(10);
            let found = tokio::time::timeout(bound, self.recover(config, topology, id)).await;
            match found {
                Ok(Ok((conn, xids))) => {
                    if self.failing.remove(&ds.name).is_some() {
                        tracing::info!(datasource = %ds.name, "resolver: XA RECOVER answers again");
                    }
                    listed.extend(xids.into_iter().map(|x| (id, x)));
                    conns.push((id, conn));
                }
                Ok(Err(e)) => {
                    answered_all = false;
                    let why = e.to_string();
                    if self.failing.get(&ds.name) != Some(&why) {
                        tracing::warn!(datasource = %ds.name, error = %why, "resolver: XA RECOVER failed; this datasource's prepared branches are not resolved until it answers");
                    }
                    self.failing.insert(ds.name.clone(), why.clone());
                    errors.insert(ds.name.clone(), why);
                    continue;
                }
                Err(_) => {
                    answered_all = false;
                    errors.insert(ds.name.clone(), format!("no answer within {bound:?}"));
                }
            }
        }
        // Forget what is no longer prepared where the datasource answered.
        let answered: Vec<String> = conns
            .iter()
            .map(|(id, _)| config.datasource(*id).name.clone())
            .collect();
        let now = Instant::now();
        self.first_seen.retain(|(ds, xid), _| {
            !answered.contains(ds)
                || listed
                    .iter()
                    .any(|(id, x)| x == xid && config.datasource(*id).name == *ds)
        });
        let mut in_doubt = Vec::with_capacity(listed.len());
        for (id, xid) in &listed {
            let name = config.datasource(*id).name.clone();
            let first = *self
                .first_seen
                .entry((name.clone(), xid.clone()))
                .or_insert(now);
            let mut entry = InDoubt {
                xid: xid.clone(),
                datasource: name,
                first_seen: first,
                decision: None,
                error: None,
            };
            if now.duration_since(first) >= config.transactions.abandon_age {
                let bound = config.datasource(*id).connect_timeout + Duration::from_secs(10);
                let resolved =
                    tokio::time::timeout(bound, resolve(config, coordinator, &mut conns, *id, xid))
                        .await
                        .unwrap_or_else(|_| Err((None, format!("no answer within {bound:?}"))));
                match resolved {
                    Ok(()) => continue,
                    Err((decision, why)) => {
                        entry.decision = decision.map(|d| d.as_str().to_owned());
                        entry.error = Some(why);
                    }
                }
            }
            in_doubt.push(entry);
        }
        // A branch whose datasource did not answer stays listed as last seen.
        if let Ok(mut shown) = coordinator.in_doubt.lock() {
            let kept: Vec<InDoubt> = shown
                .iter()
                .filter(|d| !answered.contains(&d.datasource))
                .cloned()
                .map(|mut d| {
                    d.error = errors.get(&d.datasource).cloned().or(d.error);
                    d
                })
                .collect();
            *shown = kept;
            shown.extend(in_doubt);
        }
        if answered_all {
            let keep: Vec<&Xid> = listed.iter().map(|(_, x)| x).collect();
            // Bounded like the rest of the round: a decision row locked by someone else
            // must not stall the next round's XA RECOVER.
            let bound = Duration::from_secs(10);
            if tokio::time::timeout(bound, prune(config, &mut conns, &keep))
                .await
                .is_err()
            {
                tracing::warn!(
                    "resolver: pruning old decision records took over 10 s; left for a later round"
                );
            }
        }
    }

    /// `XA RECOVER` on the primary of `id` (and the decision table created there once).
    async fn recover(
        &mut self,
        config: &Config,
        topology: &Topology,
        id: DatasourceId,
    ) -> Result<(BackendConn, Vec<Xid>), ProxyError> {
        let ds = config.datasource(id);
        let mut conn = super::xa::primary_connection(
            ds,
            topology.cluster(id).map(|c| &**c),
            id,
            config.server.max_packet_size,
        )
        .await?;
        if !self.provisioned.contains(&ds.name) {
            // Once per datasource and process. Without CREATE privilege MariaDB refuses
            // even `IF NOT EXISTS` of a table that exists: a table made by hand serves, and
            // the branches are still recovered.
            for sql in super::xa::create_statements(config) {
                if let Err(e) = conn.execute(sql.as_bytes()).await {
                    tracing::warn!(datasource = %ds.name, error = %e, "resolver: the decision table could not be created (create it by hand, docs/operations.md, or grant CREATE on its database)");
                    break;
                }
            }
            self.provisioned.push(ds.name.clone());
        }
        let (_, rows) = conn.query_rows(b"XA RECOVER").await?;
        Ok((
            conn,
            rows.iter().filter_map(|r| Xid::from_recover(r)).collect(),
        ))
    }
}

/// Decides and finishes one abandoned branch of `xid` on `id`. `Err` carries the decision
/// if one was read, and why the branch is still prepared.
async fn resolve(
    config: &Config,
    coordinator: &Coordinator,
    conns: &mut [(DatasourceId, BackendConn)],
    id: DatasourceId,
    xid: &Xid,
) -> Result<(), (Option<Decision>, String)> {
    let Some(decision_ds) = config
        .datasources
        .iter()
        .position(|d| d.name == xid.decision())
        .map(|i| DatasourceId(i as u16))
    else {
        return Err((
            None,
            format!(
                "its decision datasource `{}` is not in this configuration",
                xid.decision()
            ),
        ));
    };
    let table = config.transactions.decision_table_sql();
    let Some((_, conn)) = conns.iter_mut().find(|(d, _)| *d == decision_ds) else {
        return Err((
            None,
            format!("its decision datasource {} did not answer", xid.decision()),
        ));
    };
    let decision = match super::xa::recorded(conn, &table, xid).await {
        Ok(Some(d)) => d,
        Ok(None) => super::xa::decide_unless_decided(conn, &table, xid, coordinator.sidecar())
            .await
            .map_err(|e| (None, format!("recording abort failed: {e}")))?,
        Err(e) => return Err((None, format!("reading the decision failed: {e}"))),
    };
    let (_, conn) = conns
        .iter_mut()
        .find(|(d, _)| *d == id)
        .expect("listed from this connection");
    let verb = match decision {
        Decision::Commit => "COMMIT",
        Decision::Abort => "ROLLBACK",
    };
    let sql = format!("XA {verb} {}", xid.sql());
    match conn.execute(sql.as_bytes()).await {
        Ok(_) => {
            let counter = match decision {
                Decision::Commit => &coordinator.counters.resolved_commit,
                Decision::Abort => &coordinator.counters.resolved_rollback,
            };
            counter.fetch_add(1, Ordering::Relaxed);
            tracing::info!(xid = %xid, datasource = %config.datasource(id).name, decision = decision.as_str(), "resolver finished an abandoned XA branch");
            Ok(())
        }
        Err(ProxyError::Backend { code, .. }) if code == super::xa::ER_XA_RBROLLBACK => {
            // A read-only branch: MariaDB drops it once its owner is gone (nothing to
            // commit); XA RECOVER no longer lists it.
            tracing::info!(xid = %xid, datasource = %config.datasource(id).name, "resolver: a read-only branch was rolled back by the server (nothing to commit)");
            Ok(())
        }
        Err(ProxyError::Backend { code, .. }) if code == super::xa::ER_XAER_NOTA => Err((
            Some(decision),
            "XAER_NOTA: its owner's connection is still open, or another resolver finished it; looked at again next round".to_owned(),
        )),
        Err(e) => Err((Some(decision), format!("XA {verb} failed: {e}"))),
    }
}

/// Deletes decision records older than `transactions.decision_retention` whose xid no
/// datasource holds prepared (every datasource answered this round). Records are dated in
/// UTC by the proxies' clocks ([`super::xa::utc_now_literal`]), so no session's
/// `timestamp` or `time_zone` makes a fresh one look old.
async fn prune(config: &Config, conns: &mut [(DatasourceId, BackendConn)], keep: &[&Xid]) {
    let table = config.transactions.decision_table_sql();
    let mut sql = format!(
        "DELETE FROM {table} WHERE decided_at < {}",
        super::xa::utc_now_literal(config.transactions.decision_retention)
    );
    if !keep.is_empty() {
        let list: Vec<String> = keep.iter().map(|x| x.gtrid_literal()).collect();
        sql.push_str(&format!(" AND xid NOT IN ({})", list.join(", ")));
    }
    sql.push_str(" LIMIT 10000");
    for (id, conn) in conns.iter_mut() {
        // A locked row gives up in 2 s (the next round tries again).
        let _ = conn
            .execute(b"SET SESSION innodb_lock_wait_timeout = 2")
            .await;
        if let Err(e) = conn.execute(sql.as_bytes()).await {
            tracing::debug!(datasource = %config.datasource(*id).name, error = %e, "resolver: pruning decisions failed");
        }
    }
}
