//! What a session's reads on replicas must have seen (issue 26): the GTID position of its
//! last committed write on each clustered datasource, the writes whose GTID is still to be
//! read, and the statement's `/*after='TOKEN'*/`. Kept beside the session's connections
//! ([`super::Transaction`]), for the session's life.

use std::sync::atomic::{AtomicBool, Ordering};

use litemap::LiteMap;

use crate::backend::{BackendConn, PooledConn};
use crate::config::DatasourceId;
use crate::topology::gtid::GtidSet;

/// A session's causal bookkeeping.
#[derive(Default)]
pub struct Causal {
    /// By clustered datasource, the position of the session's last committed write there
    /// (`@@last_gtid`).
    written: Vec<(DatasourceId, GtidSet)>,
    /// The datasources written to whose GTID is not read yet (the write is not committed,
    /// or the statement has not ended).
    unsettled: Vec<DatasourceId>,
    /// This statement's `/*after='TOKEN'*/`: positions its reads must have applied too.
    after: Vec<(DatasourceId, GtidSet)>,
    /// Datasources where a write of the session committed without its GTID read (an
    /// implicit commit, a connection lost): its reads there go to the primary until a
    /// later write's GTID is known.
    unknown: Vec<DatasourceId>,
    /// A replica's connection was taken since [`Causal::take_replica_used`] last asked.
    replica_used: AtomicBool,
}

impl Causal {
    /// A write of the session on clustered datasource `ds` succeeded: its GTID is read
    /// once it commits ([`Causal::settle`]).
    pub fn record_write(&mut self, ds: DatasourceId) {
        if !self.unsettled.contains(&ds) {
            self.unsettled.push(ds);
        }
    }

    /// Some write's GTID is still to be read.
    pub fn unsettled(&self) -> bool {
        !self.unsettled.is_empty()
    }

    /// Reads `@@last_gtid` on the `held` connection of each datasource with a committed,
    /// unsettled write. A datasource whose GTID cannot be read keeps the session's reads
    /// there on the primary until a later write's is known.
    pub async fn settle(&mut self, held: &mut LiteMap<DatasourceId, PooledConn>) {
        for i in 0..self.unsettled.len() {
            let ds = self.unsettled[i];
            let read = match held.get_mut(&ds) {
                Some(conn) => last_gtid(conn).await,
                None => Err("the connection that wrote is gone".to_owned()),
            };
            match read {
                Ok(position) => {
                    self.unknown.retain(|d| *d != ds);
                    match self.written.iter_mut().find(|(d, _)| *d == ds) {
                        Some((_, p)) => p.merge(&position),
                        None => self.written.push((ds, position)),
                    }
                }
                Err(why) => {
                    tracing::warn!(%why, "the GTID of a session's write is unknown: its reads stay on the primary");
                    self.unknown_on(ds);
                }
            }
        }
        self.unsettled.clear();
    }

    /// The transaction ended where the GTIDs of its writes were not read (an implicit
    /// commit): those datasources' reads stay on the primary.
    pub fn ended_unread(&mut self) {
        for ds in std::mem::take(&mut self.unsettled) {
            self.unknown_on(ds);
        }
    }

    fn unknown_on(&mut self, ds: DatasourceId) {
        if !self.unknown.contains(&ds) {
            self.unknown.push(ds);
        }
    }

    /// Whether the session's reads of `ds` must stay on the primary (a write whose GTID
    /// is unknown).
    pub fn blocked(&self, ds: DatasourceId) -> bool {
        self.unknown.contains(&ds)
    }

    /// What a read of `ds` must have applied: the session's writes there (`mine`: causal
    /// reads) and the statement's `after` token.
    pub fn required(&self, ds: DatasourceId, mine: bool) -> GtidSet {
        let mut required = GtidSet::default();
        let written = self.written.iter().filter(|_| mine);
        for (_, position) in written.chain(self.after.iter()).filter(|(d, _)| *d == ds) {
            required.merge(position);
        }
        required
    }

    /// The positions of the session's last writes, by clustered datasource.
    pub fn written(&self) -> &[(DatasourceId, GtidSet)] {
        &self.written
    }

    /// This statement's `after` token positions (empty: none), replaced.
    pub fn set_after(&mut self, after: Vec<(DatasourceId, GtidSet)>) {
        self.after = after;
    }

    /// A replica's connection was taken.
    pub fn replica_taken(&self) {
        self.replica_used.store(true, Ordering::Relaxed);
    }

    /// Whether a replica's connection was taken since the last call (and forgets it).
    pub fn take_replica_used(&self) -> bool {
        self.replica_used.swap(false, Ordering::Relaxed)
    }
}

/// The GTID of the last transaction `conn` committed (`@@last_gtid`; empty when none).
async fn last_gtid(conn: &mut BackendConn) -> Result<GtidSet, String> {
    let (_, rows) = conn
        .query_rows(b"SELECT @@last_gtid")
        .await
        .map_err(|e| e.to_string())?;
    let text = rows
        .first()
        .and_then(|r| r.first().cloned().flatten())
        .unwrap_or_default();
    GtidSet::parse(&String::from_utf8_lossy(&text))
}
