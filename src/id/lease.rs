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
}

/// The lease table.
pub struct LeaseStore {
    pool: mysql_async::Pool,
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
        let (host, port) = ds.address.rsplit_once(':').unwrap_or((&ds.address, "3306"));
        let opts = mysql_async::OptsBuilder::default()
            .ip_or_hostname(host.to_owned())
            .tcp_port(port.parse().unwrap_or(3306))
            .user(Some(ds.user.clone()))
            .pass(Some(ds.password.clone()))
            .client_found_rows(true)
            .pool_opts(
                mysql_async::PoolOpts::default()
                    .with_constraints(mysql_async::PoolConstraints::new(0, 2).unwrap_or_default()),
            );
        let quote = |n: &str| format!("`{}`", n.replace('`', "``"));
        Self {
            pool: mysql_async::Pool::new(opts),
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

    /// Takes a free worker id. `now_ms` is the local clock (Unix ms): a worker id whose
    /// previous holder issued later than that is left alone. The holder may issue until
    /// `now_ms` plus the lease time unless it renews. A deadlock or lock wait between
    /// acquirers is retried.
    pub async fn acquire(&self, now_ms: u64) -> Result<Lease, LeaseError> {
        let mut attempt = 0;
        loop {
            match tokio::time::timeout(self.timeout, self.try_acquire(now_ms)).await {
                Err(_) => {
                    return Err(LeaseError::Store(format!(
                        "no answer within {:?}",
                        self.timeout
                    )));
                }
                Ok(Err(mysql_async::Error::Server(e)))
                    if attempt < 5 && (e.code == 1213 || e.code == 1205) =>
                {
                    attempt += 1;
                    let pause = rand::random_range(5..50u64) * attempt;
                    tokio::time::sleep(Duration::from_millis(pause)).await;
                }
                Ok(Err(e)) => return Err(store_error(e)),
                Ok(Ok(None)) => return Err(LeaseError::Full(self.workers)),
                Ok(Ok(Some(lease))) => return Ok(lease),
            }
        }
    }

    async fn try_acquire(&self, now_ms: u64) -> Result<Option<Lease>, mysql_async::Error> {
        let ttl_us = self.ttl.as_micros() as u64;
        let bound = now_ms.saturating_add(ttl_us / 1000);
        let grace_us = self.grace.as_micros() as u64;
        let table = &self.table;
        let mut conn = self.pool.get_conn().await?;
        conn.query_drop(format!(
            "CREATE TABLE IF NOT EXISTS {table} (\
             worker_id SMALLINT UNSIGNED NOT NULL PRIMARY KEY, \
             holder VARCHAR(128) NOT NULL, \
             expires_at DATETIME(3) NOT NULL, \
             issued_until_ms BIGINT UNSIGNED NOT NULL DEFAULT 0, \
             updated_at DATETIME(3) NOT NULL) ENGINE=InnoDB"
        ))
        .await?;
        // One row per worker id, so acquirers queue on row locks instead of racing to
        // insert into gaps (InnoDB would deadlock them).
        let rows: Vec<String> = (0..self.workers)
            .map(|w| format!("({w}, '', '1970-01-01 00:00:01', 0, NOW(3))"))
            .collect();
        conn.query_drop(format!(
            "INSERT IGNORE INTO {table} (worker_id, holder, expires_at, issued_until_ms, updated_at) VALUES {}",
            rows.join(", ")
        ))
        .await?;
        let mut opts = TxOpts::default();
        opts.with_isolation_level(IsolationLevel::RepeatableRead);
        let mut tx = conn.start_transaction(opts).await?;
        // Locks every row: acquirers take turns.
        let rows: Vec<(u64, u8, u64)> = tx
            .query(format!(
                "SELECT worker_id, expires_at < NOW(3) - INTERVAL {grace_us} MICROSECOND, issued_until_ms \
                 FROM {table} WHERE worker_id < {} FOR UPDATE",
                self.workers
            ))
            .await?;
        let Some(&(worker, _, issued_until_ms)) = rows
            .iter()
            .find(|(_, expired, until)| *expired == 1 && *until <= now_ms)
        else {
            tx.rollback().await?;
            return Ok(None);
        };
        tx.exec_drop(
            format!(
                "UPDATE {table} SET holder = ?, expires_at = NOW(3) + INTERVAL ? MICROSECOND, \
                 issued_until_ms = GREATEST(issued_until_ms, ?), updated_at = NOW(3) WHERE worker_id = ?"
            ),
            (&self.holder, ttl_us, bound, worker),
        )
        .await?;
        tx.commit().await?;
        Ok(Some(Lease {
            worker,
            issued_until_ms,
        }))
    }

    /// Renews a lease and raises its bound to `issue_until_ms` (the holder's new deadline,
    /// Unix ms on its clock); `Ok(false)` when the lease is no longer this holder's (taken
    /// over after it expired).
    pub async fn renew(&self, worker: u64, issue_until_ms: u64) -> Result<bool, LeaseError> {
        let ttl_us = self.ttl.as_micros() as u64;
        let table = &self.table;
        self.bounded(async {
            let mut conn = self.pool.get_conn().await?;
            conn.exec_drop(
                format!(
                    "UPDATE {table} SET expires_at = NOW(3) + INTERVAL ? MICROSECOND, \
                     issued_until_ms = GREATEST(issued_until_ms, ?), updated_at = NOW(3) \
                     WHERE worker_id = ? AND holder = ?"
                ),
                (ttl_us, issue_until_ms, worker, &self.holder),
            )
            .await?;
            Ok(conn.affected_rows() == 1)
        })
        .await
    }

    /// Gives a lease back; `issued_until_ms` is the last timestamp really issued (the holder
    /// has stopped issuing), which may lower the bound to it.
    pub async fn release(&self, worker: u64, issued_until_ms: u64) -> Result<(), LeaseError> {
        let table = &self.table;
        self.bounded(async {
            let mut conn = self.pool.get_conn().await?;
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
