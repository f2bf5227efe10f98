//! The branches of a session's transaction across datasources (issue 27; docs/decisions/
//! 0004): the first datasource the transaction touches keeps its plain transaction (the
//! decision branch), every later one joins as an XA branch of one xid; and the write rule
//! where a transaction cannot be atomic (`cross_datasource = "refuse"`, a transaction
//! started `WITH CONSISTENT SNAPSHOT`).

use super::xa::{Coordinator, DecisionSource, Distributed, Xid};
use crate::config::{Config, CrossDatasource, DatasourceId};
use crate::error::ProxyError;
use crate::topology::Topology;

/// A transaction's XA branches, if it has any, and whether it may start them.
#[derive(Default)]
pub struct Branches {
    /// Its XA branches, once a second datasource joined it.
    xa: Option<Distributed>,
    /// Started `WITH CONSISTENT SNAPSHOT` on every datasource: no XA branch (`XA START`
    /// takes no snapshot), so its writes stay on one datasource.
    snapshot: bool,
}

impl Branches {
    /// The XA branches, when the transaction has some.
    pub fn distributed(&self) -> Option<&Distributed> {
        self.xa.as_ref()
    }

    /// The XA branches, taken out (the transaction ends).
    pub fn take(&mut self) -> Option<Distributed> {
        self.xa.take()
    }

    /// `ds` holds a branch of the transaction (its decision branch or an XA branch).
    pub fn includes(&self, ds: DatasourceId) -> bool {
        self.xa
            .as_ref()
            .is_some_and(|d| d.decision == ds || d.branches.contains(&ds))
    }

    /// `Some("decision")` for the plain transaction of a transaction with XA branches,
    /// `Some("xa")` for an XA branch, `None` otherwise (EXPLAIN ROUTE's `branch`).
    pub fn branch_of(&self, ds: DatasourceId) -> Option<&'static str> {
        let d = self.xa.as_ref()?;
        if d.decision == ds {
            Some("decision")
        } else if d.branches.contains(&ds) {
            Some("xa")
        } else {
            None
        }
    }

    /// The transaction started `WITH CONSISTENT SNAPSHOT` on every datasource.
    pub fn snapshot_everywhere(&mut self) {
        self.snapshot = true;
    }

    /// No transaction: no branch, no snapshot.
    pub fn clear(&mut self) {
        self.xa = None;
        self.snapshot = false;
    }

    /// Why the transaction cannot start XA branches under `config` (so its writes stay on
    /// one datasource), with `locked`: the session holds `LOCK TABLES`; `None` when it can.
    pub fn single_datasource(&self, config: &Config, locked: bool) -> Option<&'static str> {
        if config.transactions.cross_datasource != CrossDatasource::Atomic {
            Some("one transaction with transactions.cross_datasource = \"refuse\"")
        } else if self.snapshot {
            Some(
                "a transaction started WITH CONSISTENT SNAPSHOT (XA START takes no snapshot, so it cannot be atomic)",
            )
        } else if locked {
            Some(
                "a session holding LOCK TABLES (MariaDB refuses XA START under table locks, so it cannot be atomic)",
            )
        } else {
            None
        }
    }

    /// The xid and decision datasource `ds` joins with as an XA branch, given `other`, a
    /// datasource that holds the transaction already (the decision branch when none has
    /// branched yet); `None` when `ds` is the transaction's already, or nothing else is.
    pub fn branch_for(
        &self,
        ds: DatasourceId,
        other: impl FnOnce() -> Option<DatasourceId>,
        config: &Config,
        coordinator: &Coordinator,
    ) -> Option<(Xid, DatasourceId)> {
        if let Some(d) = &self.xa {
            return (d.decision != ds && !d.branches.contains(&ds))
                .then(|| (d.xid(ds), d.decision));
        }
        let decision = other()?;
        let name = &config.datasource(decision).name;
        Some((Xid::branch(&coordinator.next_gtrid(), ds, name), decision))
    }

    /// `ds` joined the transaction as the XA branch `xid` decided on `decision`.
    pub fn record(
        &mut self,
        ds: DatasourceId,
        (xid, decision): (Xid, DatasourceId),
        coordinator: &std::sync::Arc<Coordinator>,
        config: &Config,
        topology: &Topology,
    ) {
        let d = self.xa.get_or_insert_with(|| Distributed {
            decision_name: xid.decision().to_owned(),
            gtrid: xid.gtrid,
            decision,
            branches: Vec::new(),
            source: DecisionSource::new(coordinator.clone(), config, topology, decision),
        });
        d.branches.push(ds);
    }

    /// The write rule for a statement about to write to `ds` when the transaction cannot
    /// be atomic (`single`: why, [`Branches::single_datasource`]): it writes to one
    /// datasource at most (`written`: the one it wrote to).
    ///
    /// # Errors
    /// 1235 naming both datasources and why.
    pub fn check_write(
        written: Option<DatasourceId>,
        ds: DatasourceId,
        single: Option<&'static str>,
        config: &Config,
    ) -> Result<(), ProxyError> {
        let Some(why) = single else {
            return Ok(());
        };
        match written {
            Some(w) if w != ds => Err(ProxyError::not_yet(format!(
                "writes to a second datasource in {why}: this transaction writes to {} and this statement to {}; the transaction is left as it was",
                config.datasource(w).name,
                config.datasource(ds).name
            ))),
            _ => Ok(()),
        }
    }

    /// [`Branches::check_write`] for a statement writing on `datasources`: one on several
    /// datasources where no XA branch can start is refused too.
    ///
    /// # Errors
    /// 1235 naming the datasources and why.
    pub fn check_writes(
        written: Option<DatasourceId>,
        datasources: &[DatasourceId],
        single: Option<&'static str>,
        config: &Config,
    ) -> Result<(), ProxyError> {
        for &ds in datasources {
            Self::check_write(written, ds, single, config)?;
        }
        match (datasources, single) {
            ([first, second, ..], Some(why)) => Err(ProxyError::not_yet(format!(
                "a write on datasources {} and {} in {why}; nothing was run",
                config.datasource(*first).name,
                config.datasource(*second).name,
            ))),
            _ => Ok(()),
        }
    }
}

/// Brings `conn` into a session's transaction: the `SET TRANSACTION` characteristics
/// (`chars`) and the `BEGIN` text of an explicit one, then the savepoints set so far (also
/// for the implicit transaction of autocommit off).
pub(super) async fn start_on(
    conn: &mut crate::backend::BackendConn,
    begin: Option<&[u8]>,
    chars: Option<crate::sql::characteristics::Characteristics>,
    savepoints: &[String],
    xa: Option<&Xid>,
) -> Result<(), ProxyError> {
    if let Some(xid) = xa {
        // An XA branch: the characteristics, then `XA START` instead of the `BEGIN` text
        // (a read-only transaction never gets one).
        if let Some(chars) = chars {
            conn.execute(&chars.sql()).await?;
        }
        conn.execute(format!("XA START {}", xid.sql()).as_bytes())
            .await?;
    } else if let Some(begin) = begin {
        if let Some(chars) = chars {
            conn.execute(&chars.sql()).await?;
        }
        conn.execute(begin).await?;
    }
    for savepoint in savepoints {
        let sql = format!("SAVEPOINT {}", crate::rewrite::quote_ident(savepoint));
        conn.execute(sql.as_bytes()).await?;
    }
    Ok(())
}
