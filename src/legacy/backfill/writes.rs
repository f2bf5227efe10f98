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
    insert: String,
    channel_of: String,
    prune: String,
    redis: Option<redis::aio::MultiplexedConnection>,
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
            prune: format!(
                "DELETE FROM {table} WHERE {id} = ? AND {created} < NOW(6) - INTERVAL ? MICROSECOND"
            ),
            redis: redis_connection(config).await,
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
                    Err(mysql_async::Error::Server(e)) if e.code == 1062 => conn
                        .exec_first::<Option<String>, _, _>(&self.channel_of, (order_id,))
                        .await
                        .map(|c| Some(c.flatten())),
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

    /// Deletes the index row of `order_id` when it is older than `min_age` by the server's
    /// clock; returns whether it did.
    ///
    /// # Errors
    /// The index table cannot be written.
    pub async fn prune(
        &self,
        sources: &Sources,
        order_id: u64,
        min_age: Duration,
    ) -> Result<bool, ScanError> {
        let micros = u64::try_from(min_age.as_micros()).unwrap_or(u64::MAX);
        let pool = sources.pool(self.datasource);
        let affected = sources
            .bounded("index table", async {
                let mut conn = pool.get_conn().await?;
                conn.exec_drop(&self.prune, (order_id, micros)).await?;
                Ok(conn.affected_rows())
            })
            .await?;
        Ok(affected == 1)
    }

    /// Deletes the shared cache's entry for `order_id`, so the next lookup reads the index;
    /// returns whether it could (no tier configured counts as done).
    pub async fn forget_cached(&mut self, order_id: u64) -> bool {
        let Some(redis) = &mut self.redis else {
            return true;
        };
        let key = shared_key(self.shard_map_version, order_id);
        let del = redis::cmd("DEL").arg(key).to_owned();
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
