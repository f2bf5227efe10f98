//! The index-table writes of a backfill: an index row written, a dangling one deleted, the
//! shared cache's key of the id forgotten.

use std::time::Duration;

use mysql_async::prelude::Queryable;

use super::super::scan::{ScanError, Sources};
use super::super::{qualified, quote_ident};
use crate::config::Config;
use crate::route::shared_cache::shared_key;

/// What writing an index row found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    /// The row was written.
    Inserted,
    /// A row exists already (written meanwhile by a proxy inserting the order, or by
    /// another backfill), naming this channel (or, `Other`, another one or NULL).
    Present,
    /// A row exists naming another channel (or NULL); left as it is.
    Other(Option<String>),
}

/// The statements of the index table.
pub struct IndexWrites {
    datasource: usize,
    table: String,
    /// `(order id column, channel column)`, quoted.
    columns: (String, String),
    insert: String,
    channel_of: String,
    /// The prune's condition on age, after `WHERE id IN (...)`.
    older_than: String,
    redis: Option<redis::aio::MultiplexedConnection>,
    /// A shared tier is configured (its keys must be deleted, connected or not).
    redis_configured: bool,
    shard_map_version: u64,
}

impl IndexWrites {
    /// The statements for `config`'s index table, and a connection to the shared cache tier
    /// when one is configured and answers (else its keys expire at `cache.ttl`).
    pub async fn new(config: &Config) -> Self {
        let ix = &config.index;
        let table = qualified(&ix.database, &ix.table);
        let (id, channel) = (
            quote_ident(&ix.order_id_column),
            quote_ident(&ix.channel_column),
        );
        let created = ix
            .created_at_column
            .as_deref()
            .map_or_else(String::new, quote_ident);
        Self {
            datasource: ix.datasource.0 as usize,
            insert: format!("INSERT INTO {table} ({id}, {channel}) VALUES (?, ?)"),
            channel_of: format!("SELECT {channel} FROM {table} WHERE {id} = ?"),
            older_than: format!("{created} < NOW(6) - INTERVAL ? MICROSECOND"),
            table,
            columns: (id, channel),
            redis: redis_connection(config).await,
            redis_configured: config.cache.redis.is_some(),
            shard_map_version: config.sharding.shard_map_version,
        }
    }

    /// Writes `order_id -> channel` unless a row exists; never overwrites one.
    ///
    /// # Errors
    /// The index table cannot be written or read.
    pub async fn insert(
        &self,
        sources: &Sources,
        order_id: u64,
        channel: &str,
    ) -> Result<Written, ScanError> {
        let pool = sources.pool(self.datasource);
        let result = sources
            .bounded("index table", async {
                let mut conn = pool.get_conn().await?;
                match conn.exec_drop(&self.insert, (order_id, channel)).await {
                    Ok(()) => Ok(None),
                    Err(mysql_async::Error::Server(e)) if e.code == crate::error::ER_DUP_ENTRY => {
                        conn.exec_first::<Option<String>, _, _>(&self.channel_of, (order_id,))
                            .await
                            .map(|c| Some(c.flatten()))
                    }
                    Err(e) => Err(e),
                }
            })
            .await?;
        Ok(match result {
            None => Written::Inserted,
            Some(Some(now)) if now.eq_ignore_ascii_case(channel) => Written::Present,
            Some(now) => Written::Other(now),
        })
    }

    /// Writes every row in one statement; `false` when a row exists already (the server
    /// then writes none of them: the caller goes row by row).
    ///
    /// # Errors
    /// The index table cannot be written.
    pub async fn insert_all(
        &self,
        sources: &Sources,
        rows: &[(u64, &str)],
    ) -> Result<bool, ScanError> {
        let (id, channel) = &self.columns;
        let values = vec!["(?, ?)"; rows.len()].join(", ");
        let sql = format!(
            "INSERT INTO {} ({id}, {channel}) VALUES {values}",
            self.table
        );
        let params: Vec<mysql_async::Value> = rows
            .iter()
            .flat_map(|(id, ch)| [(*id).into(), (*ch).into()])
            .collect();
        let pool = sources.pool(self.datasource);
        sources
            .bounded("index table", async {
                let mut conn = pool.get_conn().await?;
                match conn.exec_drop(sql, params).await {
                    Ok(()) => Ok(true),
                    Err(mysql_async::Error::Server(e)) if e.code == crate::error::ER_DUP_ENTRY => {
                        Ok(false)
                    }
                    Err(e) => Err(e),
                }
            })
            .await
    }

    /// Deletes the index rows of `order_ids` that are older than `min_age` by the server's
    /// clock (the age test is part of the `DELETE`); returns how many it deleted.
    ///
    /// # Errors
    /// The index table cannot be written.
    pub async fn prune(
        &self,
        sources: &Sources,
        order_ids: &[u64],
        min_age: Duration,
    ) -> Result<u64, ScanError> {
        let micros = u64::try_from(min_age.as_micros()).unwrap_or(u64::MAX);
        let list = order_ids
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let sql = format!(
            "DELETE FROM {} WHERE {} IN ({list}) AND {}",
            self.table, self.columns.0, self.older_than
        );
        let pool = sources.pool(self.datasource);
        sources
            .bounded("index table", async {
                let mut conn = pool.get_conn().await?;
                conn.exec_drop(sql, (micros,)).await?;
                Ok(conn.affected_rows())
            })
            .await
    }

    /// Deletes the shared cache's entries of `order_ids`, so their next lookup reads the
    /// index; returns whether it could (no tier configured counts as done; a tier that
    /// could not be reached does not).
    pub async fn forget_cached(&mut self, order_ids: &[u64]) -> bool {
        if order_ids.is_empty() || !self.redis_configured {
            return true;
        }
        let Some(redis) = &mut self.redis else {
            return false;
        };
        let mut del = redis::cmd("DEL");
        for id in order_ids {
            del.arg(shared_key(self.shard_map_version, *id));
        }
        let done = tokio::time::timeout(Duration::from_secs(1), del.query_async::<i64>(redis));
        matches!(done.await, Ok(Ok(_)))
    }
}

async fn redis_connection(config: &Config) -> Option<redis::aio::MultiplexedConnection> {
    let tier = config.cache.redis.as_ref()?;
    let connect = async {
        redis::Client::open(tier.url.as_str())?
            .get_multiplexed_async_connection()
            .await
    };
    let warning = "cached routes of changed ids expire at cache.ttl";
    match tokio::time::timeout(Duration::from_secs(5), connect).await {
        Ok(Ok(c)) => Some(c),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "Redis unreachable: {warning}");
            None
        }
        Err(_) => {
            tracing::warn!("Redis did not answer within 5s: {warning}");
            None
        }
    }
}
