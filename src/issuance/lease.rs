//! Worker id leases (SPEC §6): a generator issues ids only while it holds a lease on its
//! worker id, a row in a lease table on the meta datasource, so two generators never share
//! one. Leases are taken in a transaction, renewed by heartbeat and expire when not renewed;
//! a holder stops issuing at its own deadline, which falls before the row expires, and a
//! lease is taken over only after it expired plus a grace period.
//!
//! Each row also carries `issued_until_ms`, a bound on the timestamps its ids carry: taking
//! or renewing a lease raises it to the holder's new deadline (on the holder's clock) before
//! the holder may issue up to it, and a clean release lowers it to the last timestamp really
//! issued. The next holder starts after it, and a worker id whose bound is ahead of the
//! local clock is not taken (a restart on a clock behind the previous holder's), so even
//! holders whose clocks disagree never issue the same id.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{IsolationLevel, TxOpts};
use thiserror::Error;

use crate::config::Config;
use crate::error::{ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT, ER_NO_SUCH_TABLE};

/// A lease could not be taken or renewed.
#[derive(Debug, Clone, Error)]
pub enum LeaseError {
    /// Every worker id is leased.
    #[error(
        "no free worker id: all {0} worker ids are leased by live generators (widen the worker field of the id layout to run more issuing proxies)"
    )]
    Full(u64),
    /// The lease table cannot be reached.
    #[error("lease table: {0}")]
    Store(String),
}

/// A lease held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// The worker id.
    pub worker: u64,
    /// No id a previous holder issued with this worker id carries a later timestamp
    /// (Unix ms); 0 for a worker id never leased.
    pub issued_until_ms: u64,
    /// The holder may issue until this local time (Unix ms) unless it renews; the row's
    /// bound was raised to it.
    pub deadline_ms: u64,
}

/// A row of the lease table as an acquirer reads it: worker id, holder, expired past its
/// grace (0/1), issued_until_ms, ms until it is expired past its grace.
type LeaseRow = (u64, String, u8, u64, i64);

/// What one attempt to take a lease found.
enum Acquired {
    Lease(Lease),
    /// Every worker id is held.
    Full,
    /// None is free, but rows nobody holds become usable after this long.
    SettlingFor(Duration),
}

/// The lease table.
pub struct LeaseStore {
    pool: crate::route::index::MemberPools,
    table: String,
    ttl: Duration,
    grace: Duration,
    holder: String,
    workers: u64,
    timeout: Duration,
}

fn store_error(e: impl std::fmt::Display) -> LeaseError {
    LeaseError::Store(e.to_string())
}

impl LeaseStore {
    /// The store of a configuration, identified as `holder` (unique per process).
    pub fn new(config: &Config, holder: String) -> Self {
        let index = &config.index;
        let ds = config.datasource(index.datasource);
        let opts = |member: &crate::config::Datasource| {
            crate::route::index::control_conn_opts(member)
                .client_found_rows(true)
                .pool_opts(
                    mysql_async::PoolOpts::default()
                        // A connection per renewal (every third of the lease time;
                        // mysql_async closes it on return): a renewal never rides a
                        // connection that a partition left half-open.
                        .with_constraints(
                            mysql_async::PoolConstraints::new(0, 2).unwrap_or_default(),
                        ),
                )
        };
        let quote = |n: &str| format!("`{}`", n.replace('`', "``"));
        Self {
            pool: crate::route::index::MemberPools::new(ds, opts),
            table: format!(
                "{}.{}",
                quote(&index.database),
                quote(&config.issuance.lease_table)
            ),
            ttl: config.issuance.lease_ttl,
            grace: config.issuance.lease_ttl / 5,
            holder,
            workers: 1 << config.layout.worker_bits(),
            timeout: ds.connect_timeout.max(Duration::from_secs(2)),
        }
    }

    /// The cell naming the lease datasource's primary
    /// ([`crate::route::index::MemberPools::primary_cell`]).
    pub fn primary_cell(&self) -> std::sync::Arc<std::sync::atomic::AtomicUsize> {
        self.pool.primary_cell()
    }

    /// How long a lease lasts after a renewal.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    async fn bounded<T>(
        &self,
        f: impl std::future::Future<Output = Result<T, mysql_async::Error>>,
    ) -> Result<T, LeaseError> {
        match tokio::time::timeout(self.timeout, f).await {
            Ok(r) => r.map_err(store_error),
            Err(_) => Err(LeaseError::Store(format!(
                "no answer within {:?}",
                self.timeout
            ))),
        }
    }

    /// Takes a free worker id. `now_ms` reads the local clock (Unix ms): a worker id whose
    /// previous holder issued later than that is left alone. The holder may issue until
    /// `now_ms` plus the lease time unless it renews.
    ///
    /// Worker id rows this call has to create (first use, or a lease table that was lost
    /// while proxies may still hold leases from it) are usable only a lease time and its
    /// grace later; when nothing else is free, the call waits for them.
    pub async fn acquire(
        &self,
        now_ms: &(dyn Fn() -> u64 + Send + Sync),
    ) -> Result<Lease, LeaseError> {
        let mut attempt = 0;
        let mut waited = Duration::ZERO;
        loop {
            let outcome = match tokio::time::timeout(self.timeout, self.try_acquire(now_ms())).await
            {
                Err(_) => Err(LeaseError::Store(format!(
                    "no answer within {:?}",
                    self.timeout
                ))),
                Ok(Err(mysql_async::Error::Server(e)))
                    if attempt < 5
                        && (e.code == ER_LOCK_DEADLOCK || e.code == ER_LOCK_WAIT_TIMEOUT) =>
                {
                    attempt += 1;
                    let pause = rand::random_range(5..50u64) * attempt;
                    tokio::time::sleep(Duration::from_millis(pause)).await;
                    continue;
                }
                Ok(Err(e)) => Err(store_error(e)),
                Ok(Ok(outcome)) => Ok(outcome),
            };
            match outcome? {
                Acquired::Lease(lease) => return Ok(lease),
                Acquired::Full => return Err(LeaseError::Full(self.workers)),
                Acquired::SettlingFor(wait) => {
                    let limit = self.ttl + self.grace + Duration::from_secs(1);
                    if waited + wait > limit {
                        return Err(LeaseError::Full(self.workers));
                    }
                    tracing::info!(
                        ?wait,
                        "worker id rows were just created (first use, or the lease table was lost); waiting until no earlier holder can still use them"
                    );
                    tokio::time::sleep(wait).await;
                    waited += wait;
                }
            }
        }
    }

    /// Creates the lease table and its missing worker id rows, if any, and otherwise reads
    /// every row: (worker id, holder, expired past its grace, issued_until_ms, ms until it
    /// is). New rows count as held by nobody for a lease time and its grace (`None`): if the
    /// table was lost, a proxy may still be issuing with any of these worker ids.
    async fn provision(
        &self,
        conn: &mut mysql_async::Conn,
    ) -> Result<Option<Vec<LeaseRow>>, mysql_async::Error> {
        let ttl_us = self.ttl.as_micros() as u64;
        let grace_us = self.grace.as_micros() as u64;
        let table = &self.table;
        conn.query_drop(format!(
            "CREATE TABLE IF NOT EXISTS {table} (\
             worker_id SMALLINT UNSIGNED NOT NULL PRIMARY KEY, \
             holder VARCHAR(128) NOT NULL, \
             expires_at DATETIME(3) NOT NULL, \
             issued_until_ms BIGINT UNSIGNED NOT NULL DEFAULT 0, \
             updated_at DATETIME(3) NOT NULL) ENGINE=InnoDB"
        ))
        .await?;
        // A consistent read (no locks) of every row.
        let rows: Vec<LeaseRow> = conn
            .query(format!(
                "SELECT worker_id, holder, expires_at < NOW(3) - INTERVAL {grace_us} MICROSECOND, issued_until_ms, \
                 CAST(GREATEST(0, TIMESTAMPDIFF(MICROSECOND, NOW(3) - INTERVAL {grace_us} MICROSECOND, expires_at)) / 1000 AS SIGNED) \
                 FROM {table} WHERE worker_id < {}",
                self.workers
            ))
            .await?;
        let missing: Vec<u64> = (0..self.workers)
            .filter(|w| !rows.iter().any(|r| r.0 == *w))
            .collect();
        if missing.is_empty() {
            return Ok(Some(rows));
        }
        let values: Vec<String> = missing
            .iter()
            .map(|w| format!("({w}, '', NOW(3) + INTERVAL {ttl_us} MICROSECOND, 0, NOW(3))"))
            .collect();
        conn.query_drop(format!(
            "INSERT IGNORE INTO {table} (worker_id, holder, expires_at, issued_until_ms, updated_at) VALUES {}",
            values.join(", ")
        ))
        .await?;
        Ok(None)
    }

    /// Makes sure the lease table and its rows exist (at startup, so that rows it creates
    /// have settled before the first id is asked for); takes no lease.
    pub async fn prepare(&self) -> Result<(), LeaseError> {
        let prepared = async {
            let mut conn = self.pool.primary().get_conn().await?;
            self.provision(&mut conn).await
        };
        match tokio::time::timeout(self.timeout, prepared).await {
            Err(_) => Err(LeaseError::Store(format!(
                "no answer within {:?}",
                self.timeout
            ))),
            Ok(r) => r.map(drop).map_err(store_error),
        }
    }

    async fn try_acquire(&self, now_ms: u64) -> Result<Acquired, mysql_async::Error> {
        let ttl_us = self.ttl.as_micros() as u64;
        let bound = now_ms.saturating_add(ttl_us / 1000);
        let grace_us = self.grace.as_micros() as u64;
        let table = &self.table;
        let mut conn = self.pool.primary().get_conn().await?;
        // Nothing here waits long for a row lock: another acquirer may be stalled holding one.
        conn.query_drop("SET SESSION innodb_lock_wait_timeout = 1")
            .await?;
        let Some(rows) = self.provision(&mut conn).await? else {
            return Ok(Acquired::SettlingFor(self.ttl + self.grace));
        };
        let usable = |expired: u8, until: u64| expired == 1 && until <= now_ms;
        for &(worker, _, expired, until, _) in &rows {
            if !usable(expired, until) {
                continue;
            }
            let mut opts = TxOpts::default();
            opts.with_isolation_level(IsolationLevel::ReadCommitted);
            let mut tx = conn.start_transaction(opts).await?;
            // Lock this row only; another acquirer on it is skipped, not waited for.
            let locked: Option<(u8, u64)> = tx
                .exec_first(
                    format!(
                        "SELECT expires_at < NOW(3) - INTERVAL {grace_us} MICROSECOND, issued_until_ms \
                         FROM {table} WHERE worker_id = ? FOR UPDATE SKIP LOCKED"
                    ),
                    (worker,),
                )
                .await?;
            match locked {
                Some((expired, until)) if usable(expired, until) => {
                    tx.exec_drop(
                        format!(
                            "UPDATE {table} SET holder = ?, expires_at = NOW(3) + INTERVAL ? MICROSECOND, \
                             issued_until_ms = GREATEST(issued_until_ms, ?), updated_at = NOW(3) WHERE worker_id = ?"
                        ),
                        (&self.holder, ttl_us, bound, worker),
                    )
                    .await?;
                    tx.commit().await?;
                    return Ok(Acquired::Lease(Lease {
                        worker,
                        issued_until_ms: until,
                        deadline_ms: bound,
                    }));
                }
                _ => tx.rollback().await?,
            }
        }
        // Nothing free now: rows that nobody holds become free when their settling ends.
        let settling = rows
            .iter()
            .filter(|r| r.1.is_empty() && r.2 == 0)
            .map(|r| Duration::from_millis(u64::try_from(r.4).unwrap_or(0) + 1))
            .min();
        Ok(match settling {
            Some(wait) => Acquired::SettlingFor(wait),
            None => Acquired::Full,
        })
    }

    /// Renews a lease and raises its bound to `issue_until_ms` (the holder's new deadline,
    /// Unix ms on its clock); `Ok(false)` when the lease is no longer this holder's (taken
    /// over after it expired, or the lease table is gone).
    pub async fn renew(&self, worker: u64, issue_until_ms: u64) -> Result<bool, LeaseError> {
        let ttl_us = self.ttl.as_micros() as u64;
        let table = &self.table;
        let renewed = async {
            let mut conn = self.pool.primary().get_conn().await?;
            conn.exec_drop(
                format!(
                    "UPDATE {table} SET expires_at = NOW(3) + INTERVAL ? MICROSECOND, \
                     issued_until_ms = GREATEST(issued_until_ms, ?), updated_at = NOW(3) \
                     WHERE worker_id = ? AND holder = ?"
                ),
                (ttl_us, issue_until_ms, worker, &self.holder),
            )
            .await?;
            Ok::<_, mysql_async::Error>(conn.affected_rows() == 1)
        };
        match tokio::time::timeout(self.timeout, renewed).await {
            Err(_) => Err(LeaseError::Store(format!(
                "no answer within {:?}",
                self.timeout
            ))),
            Ok(Ok(mine)) => Ok(mine),
            // ER_NO_SUCH_TABLE: the lease table was dropped or restored from before it
            // existed; the lease went with it, and another proxy may create the row again.
            Ok(Err(mysql_async::Error::Server(e))) if e.code == ER_NO_SUCH_TABLE => Ok(false),
            Ok(Err(e)) => Err(store_error(e)),
        }
    }

    /// Gives a lease back; `issued_until_ms` is the last timestamp really issued (the holder
    /// has stopped issuing), which may lower the bound to it.
    pub async fn release(&self, worker: u64, issued_until_ms: u64) -> Result<(), LeaseError> {
        let table = &self.table;
        self.bounded(async {
            let mut conn = self.pool.primary().get_conn().await?;
            conn.exec_drop(
                format!(
                    "UPDATE {table} SET expires_at = '1970-01-01 00:00:01', \
                     issued_until_ms = ?, updated_at = NOW(3) \
                     WHERE worker_id = ? AND holder = ?"
                ),
                (issued_until_ms, worker, &self.holder),
            )
            .await
        })
        .await
    }
}
