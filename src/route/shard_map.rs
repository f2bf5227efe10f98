//! The shard map table in the meta datasource (docs/operations.md, "Moving shards"): one
//! row per version, the newest in force. Every proxy creates it when missing, seeds version
//! 1 from its configuration when it is empty, and reads the newest version at start and
//! every `shard_map.poll_interval`; `shards move` adds versions ([`publish`]). The table of
//! move runs lives beside it: a proxy asks it whether a cut-over is under way when a
//! statement meets a renamed shard table ([`ShardMapStore::cut_over_in_progress`]).

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use mysql_async::prelude::Queryable;

use super::index::{MemberPools, control_opts, within};
use crate::config::Config;
use crate::config::shard_map::ShardMap;
use crate::sql::quote_ident;

/// The note of version 1.
pub const SEEDED_NOTE: &str = "seeded from the configuration's [[sharding.shards]]";

/// The step of a move run while its fence stands on the source datasource (the moved tables
/// renamed away, the new map not yet published).
pub const FENCED_STEP: &str = "fenced";

/// `CREATE TABLE IF NOT EXISTS` of the shard map table, `table` qualified and quoted.
pub fn create_map_table_sql(table: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (
  version BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  datasources MEDIUMTEXT NOT NULL COMMENT 'one datasource name per shard, shard 0 first',
  published_at DATETIME(6) NOT NULL COMMENT 'UTC',
  note VARCHAR(255) NOT NULL DEFAULT ''
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
    )
}

/// `CREATE TABLE IF NOT EXISTS` of the table of move runs, `table` qualified and quoted.
pub fn create_moves_table_sql(table: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  shards VARCHAR(64) NOT NULL,
  source VARCHAR(64) NOT NULL,
  target VARCHAR(64) NOT NULL,
  step VARCHAR(16) NOT NULL,
  snapshot_pos TEXT NULL,
  fence_pos TEXT NULL,
  map_version BIGINT UNSIGNED NULL COMMENT 'the version the cut-over publishes',
  suffix VARCHAR(32) NOT NULL COMMENT 'appended to the source tables the cut-over renames',
  rows_copied BIGINT UNSIGNED NOT NULL DEFAULT 0,
  pause_ms BIGINT UNSIGNED NULL,
  detail TEXT NULL,
  started_at DATETIME(6) NOT NULL,
  updated_at DATETIME(6) NOT NULL,
  KEY (step)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
    )
}

/// The two tables' qualified, quoted names under `config`: (shard map, moves).
pub fn table_names(config: &Config) -> (String, String) {
    let db = quote_ident(&config.index.database);
    (
        format!("{db}.{}", quote_ident(&config.shard_map.table)),
        format!("{db}.{}", quote_ident(&config.shard_map.moves_table)),
    )
}

/// The newest version in `table`, `None` when it holds none.
///
/// # Errors
/// The server's, or a row that does not decode.
pub async fn newest(
    conn: &mut impl Queryable,
    table: &str,
) -> Result<Option<ShardMap>, mysql_async::Error> {
    let row: Option<(u64, String)> = conn
        .query_first(format!(
            "SELECT version, datasources FROM {table} ORDER BY version DESC LIMIT 1"
        ))
        .await?;
    row.map(|(v, text)| ShardMap::decode(v, &text))
        .transpose()
        .map_err(|e| mysql_async::Error::Other(e.into()))
}

/// Adds `map` as the next version (it must be the newest's + 1): `false` when that version
/// exists already (another move published first).
///
/// # Errors
/// The server's.
pub async fn publish(
    conn: &mut mysql_async::Conn,
    table: &str,
    map: &ShardMap,
    note: &str,
) -> Result<bool, mysql_async::Error> {
    conn.exec_drop(
        format!(
            "INSERT IGNORE INTO {table} (version, datasources, published_at, note) VALUES (?, ?, UTC_TIMESTAMP(6), ?)"
        ),
        (map.version, map.encode(), note),
    )
    .await?;
    Ok(conn.affected_rows() == 1)
}

/// The proxy's access to the shard map table and the moves table, on the meta datasource's
/// primary.
pub struct ShardMapStore {
    pools: MemberPools,
    map_table: String,
    moves_table: String,
    timeout: std::time::Duration,
}

impl ShardMapStore {
    /// The store of `config`'s meta (index) datasource; connections open on first use.
    pub fn new(config: &Config) -> Self {
        let (map_table, moves_table) = table_names(config);
        Self {
            pools: MemberPools::new(config.datasource(config.index.datasource), |m| {
                control_opts(m, 4)
            }),
            map_table,
            moves_table,
            timeout: config.index.timeout,
        }
    }

    /// The cell naming the meta datasource's primary, for the topology to keep.
    pub fn primary_cell(&self) -> Arc<AtomicUsize> {
        self.pools.primary_cell()
    }

    /// The newest version, creating the tables when missing and seeding version 1 with
    /// `config`'s map when the table is empty.
    ///
    /// # Errors
    /// The meta datasource did not answer within `index.timeout` or refused.
    pub async fn newest_or_seed(&self, config: &Config) -> Result<ShardMap, String> {
        within(self.timeout, "reading the shard map", async {
            let mut conn = self.pools.primary().get_conn().await?;
            if let Some(map) = newest(&mut conn, &self.map_table).await.or_else(|e| {
                if is_missing_table(&e) {
                    Ok(None)
                } else {
                    Err(e)
                }
            })? {
                return Ok(map);
            }
            conn.query_drop(create_map_table_sql(&self.map_table))
                .await?;
            conn.query_drop(create_moves_table_sql(&self.moves_table))
                .await?;
            publish(
                &mut conn,
                &self.map_table,
                &ShardMap::of_config(config, 1),
                SEEDED_NOTE,
            )
            .await?;
            newest(&mut conn, &self.map_table).await?.ok_or_else(|| {
                mysql_async::Error::Other("the seeded shard map is not there".into())
            })
        })
        .await
    }

    /// Whether a move's cut-over stands fenced now (its tables renamed away on the source,
    /// its map not yet published): a statement that met a missing shard table then waits
    /// for the map instead of failing.
    ///
    /// # Errors
    /// The meta datasource did not answer.
    pub async fn cut_over_in_progress(&self) -> Result<bool, String> {
        within(self.timeout, "reading the moves table", async {
            let mut conn = self.pools.primary().get_conn().await?;
            let n: Option<u64> = conn
                .exec_first(
                    format!("SELECT COUNT(*) FROM {} WHERE step = ?", self.moves_table),
                    (FENCED_STEP,),
                )
                .await?;
            Ok(n.unwrap_or(0) > 0)
        })
        .await
    }
}

/// Error 1146 (no such table): the shard map table not yet created.
fn is_missing_table(e: &mysql_async::Error) -> bool {
    matches!(e, mysql_async::Error::Server(s) if s.code == 1146)
}
