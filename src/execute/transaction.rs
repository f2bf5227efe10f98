//! A session's hold on backend connections: the transaction (one connection per datasource
//! it touches, its start replayed and its savepoints kept for datasources that join later),
//! pinned state (user variables, locks, temporary tables the proxy cannot carry from one
//! connection to another) and the write rule (SPEC §5: a transaction that writes on several
//! datasources commits atomically, [`super::xa`], or is refused with
//! `transactions.cross_datasource = "refuse"`).
//!
//! A session holds no backend connection between statements unless it is in a transaction
//! or pinned. Whichever connection serves it gets the session's variables and database
//! applied first, only what differs; a connection carrying variables the session did not
//! set is reset first.

use litemap::LiteMap;
use std::time::Duration;

use super::target::{Access, Target};
use crate::backend::{BackendConn, PooledConn, Pools, vars::SessionVars};
use crate::config::{Config, DatasourceId, Reads};
use crate::error::ProxyError;
use crate::sql::characteristics::Characteristics;
use crate::topology::gtid::GtidSet;
use crate::topology::{Cluster, ReplicaChoice, Topology};

/// What a backend connection must carry to serve one session.
#[derive(Clone, Copy)]
pub struct Wants<'a> {
    /// The configuration the session runs under.
    pub config: &'a Config,
    /// Its pools.
    pub pools: &'a Pools,
    /// Session variables as SQL literals (user variables under `@name`).
    pub vars: &'a SessionVars,
    /// The database the default datasource's connections select: the session's own when
    /// it is not the logical database (`None`: the datasource's configured one).
    pub database: Option<&'a str>,
    /// `autocommit` is on.
    pub autocommit: bool,
    /// The client negotiated CLIENT_FOUND_ROWS: connections come from those pools.
    pub found_rows: bool,
    /// The session, whose KILL QUERY stops a wait for a pooled connection.
    pub session: Option<&'a crate::session_registry::SessionHandle>,
    /// The members of clustered datasources.
    pub topology: &'a Topology,
    /// Where this statement's reads ([`Access::Read`]) go on a clustered datasource: the
    /// user's `reads`, or the statement's `/*read=...*/` hint.
    pub reads: Reads,
    /// A replica's read must have applied the session's writes (`consistency = "session"`).
    pub causal: bool,
    /// The process's coordinator of atomic commits (xids, counters).
    pub coordinator: &'a std::sync::Arc<super::xa::Coordinator>,
}

impl Wants<'_> {
    /// The database a connection to `ds` selects.
    fn database(&self, ds: DatasourceId) -> Option<&str> {
        match self.database {
            Some(db) if ds == self.config.sharding.default_datasource => Some(db),
            _ => self.config.datasource(ds).database.as_deref(),
        }
    }
}

/// Pooled connections idle at least this long are probed before use (one non-blocking
/// read, no round trip): a connection the server closed is discarded, not handed out.
const IDLE_PROBE_AFTER: Duration = Duration::ZERO;

/// The connections a session holds and the transaction they carry.
#[derive(Default)]
pub struct Transaction {
    /// By datasource, in order: a sorted vector (one or two entries as a rule), whose
    /// storage stays with the session, so holding a connection for a statement allocates
    /// nothing.
    held: LiteMap<DatasourceId, PooledConn>,
    /// The `BEGIN`/`START TRANSACTION` text, replayed on each datasource that joins.
    begin: Option<Vec<u8>>,
    /// The XA branch a connection being prepared joins as (its xid and the decision
    /// datasource); set by [`Transaction::connection`] around [`Transaction::fresh`].
    joining: Option<(super::xa::Xid, DatasourceId)>,
    /// Its access mode: `Some(true)` for `READ ONLY`, `Some(false)` for `READ WRITE`.
    begin_read_only: Option<bool>,
    /// The proxy opened it for one statement with autocommit on (pending `SET
    /// TRANSACTION` characteristics): on MariaDB that statement is a transaction of its
    /// own, which clients are not told of.
    statement_only: bool,
    /// The datasources whose held connection joined the explicit transaction (got its
    /// `BEGIN`). A connection held from before `BEGIN` (a pinned session's) joins when the
    /// transaction first uses it, as a connection taken from the pool does.
    joined: Vec<DatasourceId>,
    /// `SET TRANSACTION ...` for the next transaction only: every characteristic set since
    /// the last transaction.
    next_characteristics: Option<Characteristics>,
    /// Savepoints in the order they were set.
    savepoints: Vec<String>,
    /// The datasource this transaction first wrote to (with `cross_datasource = "refuse"`
    /// the only one).
    write_datasource: Option<DatasourceId>,
    /// Its XA branches, once a second datasource joined it (`cross_datasource =
    /// "atomic"`), and whether it may start them.
    branches: super::branches::Branches,
    /// A statement of this transaction changed rows ([`Transaction::changed_rows`]).
    changed_rows: bool,
    /// State the proxy cannot carry was created: connections stay held until the end.
    pinned: bool,
    /// A connection holding the transaction or pinned state failed (why).
    lost: Option<String>,
    /// The datasources where `LOCK TABLES` holds table locks on the held connection
    /// (until `UNLOCK TABLES` or a `BEGIN`, which releases them on MariaDB); empty when no
    /// table is locked.
    locked: Vec<DatasourceId>,
    /// The failed statement's own transaction was rolled back already (one opened for
    /// pending `SET TRANSACTION` characteristics): [`Transaction::after_failed_statement`]
    /// must not take its connections to be in a transaction. Set and consumed within one
    /// statement.
    rolled_back: bool,
    /// What the session's reads on replicas must have seen (its writes' GTIDs, the
    /// statement's token).
    pub causal: super::causal::Causal,
}

impl Transaction {
    /// In a transaction as MySQL would report it: after BEGIN, or while a held connection
    /// has one open (autocommit off starts one with the first statement).
    pub fn in_transaction(&self) -> bool {
        self.begin.is_some()
            || self.branches.distributed().is_some()
            || self.held.values().any(|c| c.in_transaction())
    }

    /// The transaction has XA branches: its `COMMIT` is atomic across datasources.
    pub fn distributed(&self) -> Option<&super::xa::Distributed> {
        self.branches.distributed()
    }

    /// The branch `ds` holds in the open transaction
    /// ([`super::branches::Branches::branch_of`]).
    pub fn branch_of(&self, ds: DatasourceId) -> Option<&'static str> {
        self.branches.branch_of(ds)
    }

    /// Whether the open transaction is read-only (MariaDB's `SERVER_STATUS_IN_TRANS_READONLY`),
    /// with `session_read_only` the session's `tx_read_only`. Once a backend runs it, the
    /// backends say; before, a `BEGIN`'s own access mode, else pending `SET TRANSACTION`
    /// characteristics, else the session's mode, as MariaDB decides it at `BEGIN`.
    pub fn read_only(&self, session_read_only: bool) -> bool {
        let mut started = self.held.values().filter(|c| c.in_transaction()).peekable();
        if started.peek().is_some() {
            return started.any(|c| c.status() & crate::protocol::status::IN_TRANS_READONLY != 0);
        }
        if self.begin.is_none() {
            return false;
        }
        self.begin_read_only
            .or(self.next_characteristics.and_then(|c| c.read_only))
            .unwrap_or(session_read_only)
    }

    /// In a transaction that clients are told of (`SERVER_STATUS_IN_TRANS`): any but one
    /// the proxy opened for a single statement ([`Transaction::begin_statement`]).
    pub fn shown(&self) -> bool {
        self.in_transaction() && !self.statement_only
    }

    /// A transaction for one statement with autocommit on (with pending characteristics):
    /// as [`Transaction::begin`], but not shown to clients, as MariaDB shows no transaction
    /// around an autocommit statement.
    pub fn begin_statement(&mut self, sql: &[u8]) {
        self.begin(sql, None);
        self.statement_only = true;
    }

    /// An explicit transaction (`BEGIN`) is open.
    pub fn explicit(&self) -> bool {
        self.begin.is_some()
    }

    /// The session keeps its connections (state the proxy cannot carry).
    pub fn pinned(&self) -> bool {
        self.pinned
    }

    /// Keeps the session's connections until it ends.
    pub fn pin(&mut self) {
        self.pinned = true;
    }

    /// Why the session lost its transaction or pinned state, if it did: the client
    /// connection must close after the error.
    pub fn lost(&self) -> Option<&str> {
        self.lost.as_deref()
    }

    /// Marks the session lost (a reload it cannot follow).
    pub fn set_lost(&mut self, why: String) {
        self.lost = Some(why);
    }

    /// Whether any connection is held.
    pub fn holds_any(&self) -> bool {
        !self.held.is_empty()
    }

    /// Whether a connection to `ds` is held.
    pub fn holds(&self, ds: DatasourceId) -> bool {
        self.held.contains_key(&ds)
    }

    /// The datasources held, in order.
    pub fn held_datasources(&self) -> Vec<DatasourceId> {
        self.held.keys().copied().collect()
    }

    /// The datasources whose held connection holds the open transaction (it joined it, or
    /// a statement opened one there), in order.
    pub fn transaction_datasources(&self) -> Vec<DatasourceId> {
        self.held
            .iter()
            .filter(|(ds, c)| self.joined.contains(ds) || c.in_transaction())
            .map(|(ds, _)| *ds)
            .collect()
    }

    /// The backend thread of each held connection (what `KILL QUERY` on a backend names).
    pub fn held_threads(&self) -> Vec<(DatasourceId, usize, u32)> {
        self.held
            .iter()
            .map(|(ds, conn)| (*ds, conn.member(), conn.thread_id()))
            .collect()
    }

    /// The held connection to `ds`.
    pub fn held_mut(&mut self, ds: DatasourceId) -> Option<&mut BackendConn> {
        self.held.get_mut(&ds).map(|c| &mut ***c)
    }

    /// Every held connection, by datasource.
    pub fn held_iter_mut(&mut self) -> impl Iterator<Item = (DatasourceId, &mut PooledConn)> {
        self.held.iter_mut().map(|(ds, c)| (*ds, c))
    }

    /// The savepoints set, oldest first.
    pub fn savepoints(&self) -> &[String] {
        &self.savepoints
    }

    /// `BEGIN`: nothing reaches a backend until a statement does; each datasource the
    /// transaction touches starts it then, with the same text. `read_only`: the access
    /// mode the text names, if any.
    pub fn begin(&mut self, sql: &[u8], read_only: Option<bool>) {
        self.begin = Some(sql.to_vec());
        self.branches.clear();
        self.begin_read_only = read_only;
        self.statement_only = false;
        self.joined.clear();
        // MariaDB's START TRANSACTION releases the table locks (implicit UNLOCK TABLES).
        self.locked.clear();
    }

    /// The open transaction started `WITH CONSISTENT SNAPSHOT` on every datasource: it
    /// stays a plain transaction on each, and writes on one datasource at most.
    pub fn snapshot_everywhere(&mut self) {
        self.branches.snapshot_everywhere();
    }

    /// `SET TRANSACTION ...` for the next transaction only: added to those set before
    /// ([`Characteristics::then`]).
    pub fn set_next_characteristics(&mut self, later: Characteristics) {
        let before = self.next_characteristics.unwrap_or_default();
        self.next_characteristics = Some(before.then(later));
    }

    /// The pending characteristics, if any.
    pub fn next_characteristics(&self) -> Option<Characteristics> {
        self.next_characteristics
    }

    /// The pending characteristics are spent.
    pub fn clear_next_characteristics(&mut self) {
        self.next_characteristics = None;
    }

    /// Whether `LOCK TABLES` holds table locks on the session's connections.
    pub fn tables_locked(&self) -> bool {
        !self.locked.is_empty()
    }

    /// Whether the session's `LOCK TABLES` locked tables on `ds` (while tables are locked,
    /// MariaDB refuses every table not locked: a datasource with none can run none).
    pub fn locked_on(&self, ds: DatasourceId) -> bool {
        self.locked.contains(&ds)
    }

    /// `LOCK TABLES` took its locks on `datasources`; empty: `UNLOCK TABLES` released them.
    pub fn set_locked(&mut self, datasources: Vec<DatasourceId>) {
        self.locked = datasources;
    }

    /// The transaction opened for the statement that just failed was rolled back: the
    /// statement leaves no transaction open ([`Transaction::after_failed_statement`]).
    pub fn statement_rolled_back(&mut self) {
        self.rolled_back = true;
    }

    /// The door of every backend access a session makes ([`super::target`]): the
    /// connection to `target`'s datasource this session uses, the one it holds, or one from
    /// the pool prepared for the session (and joined to its transaction), then held.
    ///
    /// On a clustered datasource the member is chosen here ([`Transaction::fresh`]); a
    /// held connection serves every access while the session must keep it (a
    /// transaction, pinned state), but never a write on a member that is no longer the
    /// primary. A connection held for an earlier read of the statement that does not fit
    /// the access (a replica's, when the primary is needed) goes back to its pool first.
    pub async fn connection(
        &mut self,
        target: Target,
        wants: &Wants<'_>,
    ) -> Result<&mut BackendConn, ProxyError> {
        let ds = target.datasource;
        if let Some(conn) = self.held.get(&ds) {
            if let Some(cluster) = wants.topology.cluster(ds) {
                let keep = self.pinned || self.begin.is_some() || conn.in_transaction();
                let member = conn.member();
                let fits = match target.access {
                    Access::Primary => cluster.is_primary(member),
                    Access::Read => true,
                };
                if !fits && keep && !self.read_only(false) {
                    return Err(super::members::demoted(cluster, member));
                }
                if !fits && !keep {
                    self.held.remove(&ds);
                }
            }
        }
        if !self.held.contains_key(&ds) {
            // Prepared for the session, so joined to an explicit transaction (`prepare`):
            // as an XA branch when another datasource holds the transaction already.
            self.joining = self.xa_branch_for(ds, wants);
            let conn = self.fresh(target, wants).await;
            let joining = self.joining.take();
            self.held.insert(ds, conn?);
            if self.begin.is_some() || !wants.autocommit {
                self.joined.push(ds);
            }
            if let Some(branch) = joining {
                self.record_branch(ds, branch, wants);
            }
        } else {
            self.join(ds, wants).await?;
        }
        Ok(self.held.get_mut(&ds).expect("inserted above"))
    }

    /// Joins every held connection to the explicit transaction, if one is open (before a
    /// savepoint statement runs on all of them).
    pub async fn join_held(&mut self, wants: &Wants<'_>) -> Result<(), ProxyError> {
        let held: Vec<DatasourceId> = self.held.keys().copied().collect();
        for ds in held {
            self.join(ds, wants).await?;
        }
        Ok(())
    }

    /// Whether `ds`, about to join the open (or opening) transaction, joins as an XA
    /// branch, and with which xid and decision datasource: with `cross_datasource =
    /// "atomic"`, when the transaction may write (not `READ ONLY`) and another datasource
    /// holds it already (the first one keeps its plain transaction: the decision branch).
    fn xa_branch_for(
        &self,
        ds: DatasourceId,
        wants: &Wants<'_>,
    ) -> Option<(super::xa::Xid, DatasourceId)> {
        if (self.begin.is_none() && wants.autocommit) || !self.may_branch(wants.config, wants.vars)
        {
            return None;
        }
        let other = || {
            self.held
                .iter()
                .find(|(d, c)| **d != ds && (self.joined.contains(d) || c.in_transaction()))
                .map(|(d, _)| *d)
        };
        self.branches
            .branch_for(ds, other, wants.config, wants.coordinator)
    }

    /// Whether a datasource joining the open transaction starts an XA branch (the first
    /// one apart): `cross_datasource = "atomic"`, no `WITH CONSISTENT SNAPSHOT`, no `LOCK
    /// TABLES`, and not read-only (its `BEGIN`, pending characteristics, else the session's
    /// `transaction_read_only` in `vars`).
    pub fn may_branch(&self, config: &Config, vars: &SessionVars) -> bool {
        if self
            .branches
            .single_datasource(config, !self.locked.is_empty())
            .is_some()
        {
            return false;
        }
        !self
            .begin_read_only
            .or(self.next_characteristics.and_then(|c| c.read_only))
            .unwrap_or_else(|| vars.transaction_read_only())
    }

    /// `ds` joined the transaction as an XA branch.
    fn record_branch(
        &mut self,
        ds: DatasourceId,
        branch: (super::xa::Xid, DatasourceId),
        wants: &Wants<'_>,
    ) {
        self.branches
            .record(ds, branch, wants.coordinator, wants.config, wants.topology);
    }

    /// Starts the explicit transaction on the connection held for `ds` if it has not joined
    /// yet ([`start_on`], as [`Transaction::prepare`] does for a connection from the pool).
    /// Without this, a session pinned before `BEGIN` ran its statements outside the
    /// transaction and `ROLLBACK` undid nothing.
    async fn join(&mut self, ds: DatasourceId, wants: &Wants<'_>) -> Result<(), ProxyError> {
        if self.joined.contains(&ds) || (self.begin.is_none() && wants.autocommit) {
            return Ok(());
        }
        let branch = self.xa_branch_for(ds, wants);
        let conn = self.held.get_mut(&ds).expect("held");
        if self.begin.is_none() {
            // Autocommit off: the server opens the transaction with the next statement; a
            // connection held from before (pinned) joins as an XA branch when another
            // datasource holds the transaction, unless it holds a transaction already.
            let Some(branch) = branch.filter(|_| !conn.in_transaction()) else {
                return Ok(());
            };
            let start = super::branches::start_on(
                conn,
                None,
                self.next_characteristics,
                &self.savepoints,
                Some(&branch.0),
            );
            if let Err(e) = start.await {
                conn.mark_broken();
                return Err(e);
            }
            self.joined.push(ds);
            self.record_branch(ds, branch, wants);
            return Ok(());
        }
        let xid = branch.as_ref().map(|(xid, _)| xid);
        let started = super::branches::start_on(
            conn,
            self.begin.as_deref(),
            self.next_characteristics,
            &self.savepoints,
            xid,
        );
        if let Err(e) = started.await {
            // Characteristics may be left pending there: not this transaction's.
            conn.mark_broken();
            return Err(e);
        }
        self.joined.push(ds);
        if let Some(branch) = branch {
            self.record_branch(ds, branch, wants);
        }
        Ok(())
    }

    /// A pooled connection to `target`'s datasource, alive and prepared for the session,
    /// not held. On a clustered datasource: the primary for [`Access::Primary`] (waiting
    /// for one during a failover); for [`Access::Read`] with replica reads, a readable
    /// replica that has applied the session's writes (waited for up to
    /// `topology.causal_wait`), else the primary; a replica that cannot be reached leaves
    /// the read to the primary.
    pub async fn fresh(&self, target: Target, wants: &Wants<'_>) -> Result<PooledConn, ProxyError> {
        let ds = target.datasource;
        let Some(cluster) = wants.topology.cluster(ds) else {
            return self.fresh_on(ds, 0, wants).await;
        };
        if target.access == Access::Read && wants.reads == Reads::Replica {
            if let Some(required) = self.replica_read(ds, wants.causal, wants.autocommit) {
                if let Some(conn) = self.replica(cluster, &required, wants).await {
                    return Ok(conn);
                }
            }
        }
        let member = match target.access {
            Access::Read => {
                super::members::killable(wants.session, cluster.primary_for_read()).await?
            }
            Access::Primary => super::members::killable(wants.session, cluster.primary()).await?,
        };
        let conn = self.fresh_on(ds, member, wants).await;
        if conn.is_err() {
            // The primary may be gone: the next write looks again sooner.
            cluster.nudge();
        }
        conn
    }

    /// Whether a read may go to a replica: outside a transaction (but a `READ ONLY` one,
    /// which stays on its replica), with nothing pinned or locked on a connection.
    fn may_read_replica(&self) -> bool {
        let read_only_begin = self.begin.is_some() && self.begin_read_only == Some(true);
        (read_only_begin || !self.in_transaction()) && !self.pinned && self.locked.is_empty()
    }

    /// Whether a read of `ds` may go to a replica now, and if so what it must have applied
    /// ([`super::causal::Causal::required`]); `None`: the primary reads (a transaction, autocommit
    /// off — every statement is in one —, pinned state, locks, or a write whose GTID is
    /// unknown).
    pub fn replica_read(
        &self,
        ds: DatasourceId,
        causal: bool,
        autocommit: bool,
    ) -> Option<GtidSet> {
        let read_only_begin = self.begin.is_some() && self.begin_read_only == Some(true);
        let open = (autocommit || read_only_begin) && self.may_read_replica();
        (open && !self.causal.blocked(ds)).then(|| self.causal.required(ds, causal))
    }

    /// A replica's connection for a read, or `None` (the primary reads): none readable,
    /// the chosen one unreachable, or behind the session's writes beyond `causal_wait`.
    async fn replica(
        &self,
        cluster: &Cluster,
        required: &GtidSet,
        wants: &Wants<'_>,
    ) -> Option<PooledConn> {
        let ds = cluster.id;
        let (member, behind) = match cluster.replica(required) {
            ReplicaChoice::Ready(m) => (m, false),
            ReplicaChoice::Behind(m) => (m, true),
            ReplicaChoice::None => return None,
        };
        let mut conn = match self.fresh_on(ds, member, wants).await {
            Ok(conn) => conn,
            Err(e) => {
                tracing::debug!(error = %e, member = %cluster.members[member].address, "a replica read goes to the primary");
                cluster.nudge();
                return None;
            }
        };
        if behind && !super::members::wait_for(&mut conn, cluster, member, required).await {
            return None;
        }
        self.causal.replica_taken();
        Some(conn)
    }

    /// A pooled connection to `member` of `ds`, alive and prepared for the session, not
    /// held. A connection the server closed (restart, wait_timeout, KILL) is discarded and
    /// the next one tried; so is one whose preparation fails on its socket.
    async fn fresh_on(
        &self,
        ds: DatasourceId,
        member: usize,
        wants: &Wants<'_>,
    ) -> Result<PooledConn, ProxyError> {
        let datasource = wants.config.datasource(ds);
        let address = match datasource.members.get(member) {
            Some(m) if datasource.cluster => m,
            _ => &datasource.address,
        };
        let mut dead = 0;
        loop {
            let mut conn = super::members::checkout(
                wants.pools,
                wants.session,
                (ds, member),
                wants.found_rows,
            )
            .await?;
            if !conn.still_alive(IDLE_PROBE_AFTER) {
                conn.mark_broken();
                dead += 1;
                if dead > datasource.pool_size {
                    return Err(ProxyError::Unavailable(format!(
                        "datasource {} ({address}): every pooled connection was closed by the server",
                        datasource.name
                    )));
                }
                continue;
            }
            if self.prepared_already(&mut conn, ds, wants) {
                return Ok(conn);
            }
            let prepared = tokio::time::timeout(
                datasource.connect_timeout,
                self.prepare(&mut conn, ds, wants),
            )
            .await;
            let failure = match prepared {
                Ok(Ok(())) => return Ok(conn),
                Ok(Err(e)) => e,
                Err(_) => ProxyError::Unavailable(format!(
                    "datasource {} ({address}): no answer within {:?}",
                    datasource.name, datasource.connect_timeout
                )),
            };
            let retry = matches!(failure, ProxyError::Io(_)) && dead < 2;
            if !matches!(failure, ProxyError::Backend { .. }) {
                conn.mark_broken();
            }
            if !retry {
                return Err(failure);
            }
            dead += 1;
        }
    }

    /// Whether [`Transaction::prepare`] has nothing to send on `conn`: its variables and
    /// database are the session's, and no transaction or savepoint is to be opened there.
    /// The usual case, decided without a timer or a future.
    fn prepared_already(
        &self,
        conn: &mut BackendConn,
        ds: DatasourceId,
        wants: &Wants<'_>,
    ) -> bool {
        conn.has_vars(wants.vars)
            && self.begin.is_none()
            && self.joining.is_none()
            && (self.savepoints.is_empty() || (!self.in_transaction() && wants.autocommit))
            && wants
                .database(ds)
                .is_none_or(|db| conn.state.database.as_deref() == Some(db))
    }

    /// Applies the session's variables and database to a connection, and joins it to the
    /// open transaction.
    async fn prepare(
        &self,
        conn: &mut BackendConn,
        ds: DatasourceId,
        wants: &Wants<'_>,
    ) -> Result<(), ProxyError> {
        if conn.has_foreign_vars(wants.vars) {
            conn.reset().await?;
            conn.state.database = None;
        }
        conn.apply_vars(wants.vars).await?;
        if let Some(db) = wants.database(ds) {
            if conn.state.database.as_deref() != Some(db) {
                conn.init_db(db).await?;
            }
        }
        if self.in_transaction() || !wants.autocommit {
            let started = super::branches::start_on(
                conn,
                self.begin.as_deref(),
                self.next_characteristics,
                &self.savepoints,
                self.joining.as_ref().map(|(xid, _)| xid),
            )
            .await;
            if let Err(e) = started {
                // A `SET TRANSACTION` that ran before a failed `BEGIN` stays pending on the
                // connection: it must not reach another session through the pool.
                conn.mark_broken();
                return Err(e);
            }
        }
        Ok(())
    }

    /// Brings every held connection to the session's variables (after a `SET`).
    pub async fn sync_held(&mut self, vars: &SessionVars) -> Result<(), ProxyError> {
        for (_, conn) in self.held.iter_mut() {
            conn.apply_vars(vars).await?;
        }
        Ok(())
    }

    /// After a statement failed: with autocommit off or in an explicit transaction, the
    /// connections it ran on keep their transaction open on the server.
    pub fn after_failed_statement(&mut self, datasources: &[DatasourceId], autocommit: bool) {
        if std::mem::take(&mut self.rolled_back) {
            return;
        }
        if !autocommit || self.begin.is_some() {
            for ds in datasources {
                if let Some(conn) = self.held.get_mut(ds) {
                    conn.assume_in_transaction();
                }
            }
        }
    }

    /// After a statement: returns the connections the session need not hold to the pool,
    /// discards broken ones, and ends the transaction bookkeeping when none is open. A
    /// broken connection that held the transaction or pinned state makes the session lost.
    pub fn release_idle(&mut self) {
        let pinned = self.pinned;
        let explicit = self.begin.is_some() || self.branches.distributed().is_some();
        if let Some(c) = self
            .held
            .values()
            .find(|c| c.is_broken() && (pinned || explicit || c.in_transaction()))
        {
            self.lost = Some(format!(
                "the backend connection (thread {}) holding this session's transaction or session state failed; its work is rolled back",
                c.thread_id()
            ));
        }
        let branches = &self.branches;
        self.held.retain(|ds, c| {
            !c.is_broken() && (pinned || c.in_transaction() || branches.includes(*ds))
        });
        if !self.in_transaction() {
            self.savepoints.clear();
            self.write_datasource = None;
            self.changed_rows = false;
        }
    }

    /// Checks the write rule for a statement about to write to `ds` (a transaction that
    /// cannot be atomic writes to one datasource at most).
    ///
    /// # Errors
    /// 1235 naming both datasources ([`super::branches::Branches::check_write`]).
    pub fn check_write(&self, ds: DatasourceId, config: &Config) -> Result<(), ProxyError> {
        let single = self
            .branches
            .single_datasource(config, !self.locked.is_empty());
        super::branches::Branches::check_write(self.write_datasource, ds, single, config)
    }

    /// [`Transaction::check_write`] for a statement writing on `datasources`.
    ///
    /// # Errors
    /// 1235 ([`super::branches::Branches::check_writes`]).
    pub fn check_writes(
        &self,
        datasources: &[DatasourceId],
        config: &Config,
    ) -> Result<(), ProxyError> {
        let single = self
            .branches
            .single_datasource(config, !self.locked.is_empty());
        super::branches::Branches::check_writes(self.write_datasource, datasources, single, config)
    }

    /// Whether the open transaction changed a row (MariaDB's read-write transaction: a
    /// write that matched nothing, or set values to what they were, leaves it read-only).
    pub fn changed_rows(&self) -> bool {
        self.changed_rows
    }

    /// Records that a statement of the open transaction changed rows.
    pub fn record_changed_rows(&mut self) {
        if self.in_transaction() {
            self.changed_rows = true;
        }
    }

    /// Records that a write to `ds` succeeded (inside the open transaction: the
    /// transaction's datasource). `clustered`: `ds` has replicas, and the write's GTID is
    /// read once it commits ([`Transaction::settle`]).
    pub fn record_write(&mut self, ds: DatasourceId, clustered: bool) {
        if self.in_transaction() && self.write_datasource.is_none() {
            self.write_datasource = Some(ds);
        }
        if clustered {
            self.causal.record_write(ds);
        }
    }

    /// After a statement outside a transaction: reads the GTIDs of the session's
    /// committed writes on clustered datasources ([`super::causal::Causal::settle`]).
    pub async fn settle(&mut self) {
        if self.causal.unsettled() && !self.in_transaction() {
            self.causal.settle(&mut self.held).await;
        }
    }

    /// Ends the transaction on every held connection with `sql` (COMMIT or ROLLBACK).
    /// Read-only datasources go first, the writer last. The first error is returned after
    /// every connection got the statement.
    pub async fn end(&mut self, sql: &[u8]) -> Result<(), ProxyError> {
        if let Some(d) = self.branches.take() {
            // Boxed: the commit protocol's state would make every future that may end a
            // transaction (most statements') larger.
            return Box::pin(self.end_distributed(sql, d)).await;
        }
        let writer = self.write_datasource;
        let mut order: Vec<DatasourceId> = self.held.keys().copied().collect();
        order.sort_by_key(|ds| Some(*ds) == writer);
        let explicit = self.begin.is_some();
        let mut first_error = None;
        for ds in order {
            let conn = self.held.get_mut(&ds).expect("listed");
            // A connection held from before BEGIN that the transaction never used has no
            // part in it: a COMMIT there could only fail (a killed thread) and report an
            // error for a transaction that committed.
            let joined = explicit && self.joined.contains(&ds);
            if !conn.in_transaction() && !joined {
                continue;
            }
            if let Err(e) = conn.execute(sql).await {
                first_error.get_or_insert(e);
            }
        }
        if self.causal.unsettled() {
            self.causal.settle(&mut self.held).await;
        }
        self.ended();
        first_error.map_or(Ok(()), Err)
    }

    /// [`Transaction::end`] of a transaction with XA branches: `COMMIT` by the atomic
    /// protocol ([`super::commit::commit`]), `ROLLBACK` on every branch.
    async fn end_distributed(
        &mut self,
        sql: &[u8],
        d: super::xa::Distributed,
    ) -> Result<(), ProxyError> {
        let result = if sql.eq_ignore_ascii_case(b"COMMIT") {
            super::commit::commit(&mut self.held, &d).await
        } else {
            super::commit::rollback(&mut self.held, &d, &[]).await;
            Ok(())
        };
        if self.causal.unsettled() {
            self.causal.settle(&mut self.held).await;
        }
        self.ended();
        result
    }

    /// The transaction ended on every connection that had it (by `COMMIT`/`ROLLBACK`, or
    /// implicitly: `SET autocommit = 1` from 0 commits it): the bookkeeping follows, and
    /// connections the session need not hold go back to the pool.
    pub fn ended(&mut self) {
        // Committed (or rolled back) where its GTIDs were not read.
        self.causal.ended_unread();
        self.begin = None;
        self.branches.clear();
        self.begin_read_only = None;
        self.statement_only = false;
        self.joined.clear();
        self.clear_next_characteristics();
        self.savepoints.clear();
        self.write_datasource = None;
        self.changed_rows = false;
        self.release_idle();
    }

    /// Runs `sql` on every held connection (savepoint statements, `UNLOCK TABLES`).
    pub async fn on_every_held(&mut self, sql: &[u8]) -> Result<(), ProxyError> {
        for (_, conn) in self.held.iter_mut() {
            conn.execute(sql).await?;
        }
        Ok(())
    }

    /// Records `SAVEPOINT name` (after it ran on every held connection).
    pub fn savepoint_set(&mut self, name: String) {
        self.savepoints.retain(|s| !s.eq_ignore_ascii_case(&name));
        self.savepoints.push(name);
    }

    /// Whether savepoint `name` exists.
    pub fn has_savepoint(&self, name: &str) -> bool {
        self.savepoints.iter().any(|s| s.eq_ignore_ascii_case(name))
    }

    /// Records `ROLLBACK TO name` (later savepoints are gone) or `RELEASE SAVEPOINT name`
    /// (the named one too).
    pub fn savepoint_back_to(&mut self, name: &str, release: bool) {
        if let Some(i) = self
            .savepoints
            .iter()
            .position(|s| s.eq_ignore_ascii_case(name))
        {
            self.savepoints.truncate(if release { i } else { i + 1 });
        }
    }

    /// Gives every connection back clean: rolls back and resets those with a transaction
    /// or pinned state (a reset that fails or hangs drops the connection instead).
    pub async fn release_all(&mut self) {
        let pinned = self.pinned;
        if let Some(d) = self.branches.take() {
            // XA branches roll back when their connection closes (unless prepared: never
            // left so by a live session); no reset is trusted with them.
            for ds in std::iter::once(d.decision).chain(d.branches) {
                if let Some(c) = self.held.get_mut(&ds) {
                    c.mark_broken();
                }
            }
        }
        for (_, mut conn) in std::mem::take(&mut self.held) {
            if conn.is_broken() {
                continue;
            }
            if pinned || conn.in_transaction() {
                let reset = tokio::time::timeout(Duration::from_secs(2), conn.reset()).await;
                if !matches!(reset, Ok(Ok(()))) {
                    conn.mark_broken();
                }
            }
        }
        // What the session wrote stays: its reads must go on seeing it.
        let causal = std::mem::take(&mut self.causal);
        *self = Transaction::default();
        self.causal = causal;
    }
}
