//! Reading the shards and the index table in order_id order: keyset-paged scans of each
//! physical table merged into one stream of [`Sightings`], and the same view for a handful
//! of ids at once ([`Sources::sightings_of`], used to check a finding again).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use futures_util::future::try_join_all;
use mysql_async::prelude::Queryable;

use super::{Scope, qualified, quote_ident};
use crate::config::Config;
use crate::route::index::{control_opts, within};

/// A scan or a lookup could not be done (the run cannot finish: exit status 2).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct ScanError(pub String);

/// A row of the order table (the first binding table).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderRow {
    /// The shard holding it.
    pub shard: u32,
    /// Its channel column, as stored (`None` when NULL).
    pub channel: Option<String>,
}

/// Rows of another binding table (`t_order_item`) for one order id on one shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ItemRows {
    /// Index of the table in `sharding.binding_tables` (never 0).
    pub table: usize,
    /// The shard holding them.
    pub shard: u32,
}

/// The index table's row for an order id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexRow {
    /// The channel name it stores (`None` when NULL).
    pub channel: Option<String>,
    /// How long ago it was written, by the server's clock (`None` without
    /// `index.created_at_column`).
    pub age: Option<Duration>,
}

/// Everything the scanned tables hold for one order id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sightings {
    /// The order id.
    pub order_id: u64,
    /// Its rows in the order table, one per shard that holds one.
    pub orders: Vec<OrderRow>,
    /// Shards holding rows of the other binding tables.
    pub items: Vec<ItemRows>,
    /// Its index-table row.
    pub index: Option<IndexRow>,
}

impl Sightings {
    fn empty(order_id: u64) -> Self {
        Self {
            order_id,
            ..Self::default()
        }
    }
}

/// Which tables a scan reads besides the order table.
#[derive(Debug, Clone, Copy)]
pub struct Tables {
    /// The other binding tables (`t_order_item`).
    pub items: bool,
}

/// Connections to the datasources (one small mysql_async pool each, the control path),
/// every call bounded in time.
pub struct Sources {
    pools: Vec<mysql_async::Pool>,
    timeout: Duration,
}

impl Sources {
    /// Pools for every datasource of `config`, each of at most `connections` connections
    /// (opened on first use); a connect, read or write taking longer than `timeout` fails.
    pub fn new(config: &Config, connections: usize, timeout: Duration) -> Self {
        let pools = config
            .datasources
            .iter()
            .map(|ds| mysql_async::Pool::new(control_opts(ds, connections)))
            .collect();
        Self { pools, timeout }
    }

    /// The pool of datasource `ds`.
    pub fn pool(&self, ds: usize) -> &mysql_async::Pool {
        &self.pools[ds]
    }

    /// Runs `f` (a connection checkout and its statements) within the timeout; `what` names
    /// it in the error.
    ///
    /// # Errors
    /// `f` failed, or did not finish in time (a datasource that hangs).
    pub async fn bounded<T>(
        &self,
        what: &str,
        f: impl Future<Output = Result<T, mysql_async::Error>>,
    ) -> Result<T, ScanError> {
        within(self.timeout, what, f).await.map_err(ScanError)
    }

    /// What every shard (not only the scanned ones) and the index table hold for `ids`, by
    /// point reads: the view a finding is checked against again.
    ///
    /// # Errors
    /// A datasource cannot be reached or a table cannot be read.
    pub async fn sightings_of(
        &self,
        config: &Config,
        ids: &[u64],
    ) -> Result<BTreeMap<u64, Sightings>, ScanError> {
        let mut out: BTreeMap<u64, Sightings> =
            ids.iter().map(|id| (*id, Sightings::empty(*id))).collect();
        if ids.is_empty() {
            return Ok(out);
        }
        let list = ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
        for ds in 0..config.datasources.len() {
            let Some(sql) = point_reads_sql(config, ds, &list) else {
                continue;
            };
            let rows: Vec<(u32, u32, u64, Option<String>)> = self
                .bounded(&config.datasources[ds].name, async {
                    self.pools[ds].get_conn().await?.query(sql).await
                })
                .await?;
            for (shard, table, id, channel) in rows {
                let s = out.get_mut(&id).expect("only asked ids come back");
                if table == 0 {
                    s.orders.push(OrderRow { shard, channel });
                } else {
                    s.items.push(ItemRows {
                        table: table as usize,
                        shard,
                    });
                }
            }
        }
        let index = &config.index;
        let sql = format!(
            "SELECT {}, {}, {} FROM {} WHERE {} IN ({list})",
            quote_ident(&index.order_id_column),
            quote_ident(&index.channel_column),
            age_sql(config),
            qualified(&index.database, &index.table),
            quote_ident(&index.order_id_column),
        );
        let pool = &self.pools[index.datasource.0 as usize];
        let rows: Vec<(u64, Option<String>, Option<i64>)> = self
            .bounded("index table", async {
                pool.get_conn().await?.query(sql).await
            })
            .await?;
        for (id, channel, age) in rows {
            if let Some(s) = out.get_mut(&id) {
                s.index = Some(IndexRow {
                    channel,
                    age: age_of(age),
                });
            }
        }
        Ok(out)
    }

    /// The servers' row estimates (`information_schema.TABLES.TABLE_ROWS`) of the order
    /// tables a scan of `scope` reads and of the index table, for a progress bar; 0 where
    /// unknown.
    pub async fn estimated_rows(&self, config: &Config, scope: &Scope) -> u64 {
        let mut total = 0;
        for ds in 0..config.datasources.len() {
            let mut names = Vec::new();
            for shard in scope.shards() {
                let s = &config.sharding.shards[shard as usize];
                if s.datasource.0 as usize != ds {
                    continue;
                }
                names.push(format!("('{}','{}')", s.database, s.tables[0]));
            }
            if config.index.datasource.0 as usize == ds {
                names.push(format!(
                    "('{}','{}')",
                    config.index.database, config.index.table
                ));
            }
            if names.is_empty() {
                continue;
            }
            let sql = format!(
                "SELECT CAST(COALESCE(SUM(TABLE_ROWS),0) AS UNSIGNED) FROM information_schema.TABLES WHERE (TABLE_SCHEMA, TABLE_NAME) IN ({})",
                names.join(",")
            );
            let estimate = self.bounded("row estimate", async {
                self.pools[ds]
                    .get_conn()
                    .await?
                    .query_first::<u64, _>(sql)
                    .await
            });
            total += estimate.await.ok().flatten().unwrap_or(0);
        }
        total
    }

    /// Closes every pool.
    pub async fn disconnect(self) {
        for pool in self.pools {
            let _ = pool.disconnect().await;
        }
    }
}

/// One query per datasource reading every physical table of every binding table for the
/// ids in `list`: rows of `(shard, binding table index, order_id, channel or NULL)`.
fn point_reads_sql(config: &Config, ds: usize, list: &str) -> Option<String> {
    let key = quote_ident(&config.sharding.shard_key);
    let channel = quote_ident(&config.sharding.channel_column);
    let mut parts = Vec::new();
    for (n, shard) in config.sharding.shards.iter().enumerate() {
        if shard.datasource.0 as usize != ds {
            continue;
        }
        for (t, table) in shard.tables.iter().enumerate() {
            let from = qualified(&shard.database, table);
            parts.push(if t == 0 {
                format!("(SELECT {n}, 0, {key}, {channel} FROM {from} WHERE {key} IN ({list}))")
            } else {
                format!(
                    "(SELECT DISTINCT {n}, {t}, {key}, NULL FROM {from} WHERE {key} IN ({list}))"
                )
            });
        }
    }
    (!parts.is_empty()).then(|| parts.join(" UNION ALL "))
}

fn age_sql(config: &Config) -> String {
    match &config.index.created_at_column {
        Some(c) => format!(
            "CAST(TIMESTAMPDIFF(MICROSECOND, {}, NOW(6)) AS SIGNED)",
            quote_ident(c)
        ),
        None => "CAST(NULL AS SIGNED)".to_owned(),
    }
}

fn age_of(micros: Option<i64>) -> Option<Duration> {
    micros.map(|m| Duration::from_micros(m.max(0) as u64))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Orders { shard: u32 },
    Items { table: usize, shard: u32 },
    Index,
}

/// One keyset-paged scan: `WHERE key > last ORDER BY key LIMIT page`.
struct Stream {
    source: Source,
    datasource: usize,
    /// The first page's statement (no lower bound: an id of 0 is read too) and the next
    /// pages' (`key > ?`).
    first_sql: String,
    sql: String,
    label: String,
    after: Option<u64>,
    buffer: VecDeque<(u64, Option<String>, Option<i64>)>,
    done: bool,
}

impl Stream {
    async fn fill(&mut self, sources: &Sources, page: usize) -> Result<u64, ScanError> {
        let pool = sources.pool(self.datasource);
        let read = async {
            let mut conn = pool.get_conn().await?;
            match self.after {
                Some(after) => conn.exec(&self.sql, (after, page as u64)).await,
                None => conn.exec(&self.first_sql, (page as u64,)).await,
            }
        };
        let rows: Vec<(u64, Option<String>, Option<i64>)> =
            sources.bounded(&self.label, read).await?;
        self.done = rows.len() < page;
        if let Some(last) = rows.last() {
            self.after = Some(last.0);
        }
        // Progress counts order and index rows (what the estimate covers); an item scan
        // reads distinct order ids, not rows.
        let n = match self.source {
            Source::Items { .. } => 0,
            _ => rows.len() as u64,
        };
        self.buffer.extend(rows);
        Ok(n)
    }

    fn head(&self) -> Option<u64> {
        self.buffer.front().map(|r| r.0)
    }
}

/// The scans of a run merged by order id: yields each id once, with all its sightings.
pub struct MergedScan {
    streams: Vec<Stream>,
    page: usize,
    rows_read: u64,
}

impl MergedScan {
    /// Scans of the order table (and, with `tables.items`, the other binding tables) on
    /// every shard of `scope`, and of the index table, from ids above `after` (from the
    /// first id when `None`); `page` rows per read.
    pub fn new(
        config: &Config,
        scope: &Scope,
        tables: Tables,
        after: Option<u64>,
        page: usize,
    ) -> Self {
        let key = quote_ident(&config.sharding.shard_key);
        let channel = quote_ident(&config.sharding.channel_column);
        let mut streams = Vec::new();
        // `select` reads the columns from the table; `key` orders and bounds the pages.
        let mut push = |source, datasource: usize, select: String, key: &str, label: String| {
            streams.push(Stream {
                source,
                datasource,
                first_sql: format!("{select} ORDER BY {key} LIMIT ?"),
                sql: format!("{select} WHERE {key} > ? ORDER BY {key} LIMIT ?"),
                label,
                after,
                buffer: VecDeque::new(),
                done: false,
            })
        };
        for n in scope.shards() {
            let shard = &config.sharding.shards[n as usize];
            let last = if tables.items { shard.tables.len() } else { 1 };
            for (t, table) in shard.tables[..last].iter().enumerate() {
                let from = qualified(&shard.database, table);
                let (source, sql) = if t == 0 {
                    (
                        Source::Orders { shard: n },
                        format!("SELECT {key}, {channel}, CAST(NULL AS SIGNED) FROM {from}"),
                    )
                } else {
                    (
                        Source::Items { table: t, shard: n },
                        format!(
                            "SELECT DISTINCT {key}, CAST(NULL AS CHAR), CAST(NULL AS SIGNED) FROM {from}"
                        ),
                    )
                };
                push(
                    source,
                    shard.datasource.0 as usize,
                    sql,
                    &key,
                    format!("{from} (shard {n})"),
                );
            }
        }
        let index = &config.index;
        let id = quote_ident(&index.order_id_column);
        let from = qualified(&index.database, &index.table);
        push(
            Source::Index,
            index.datasource.0 as usize,
            format!(
                "SELECT {id}, {}, {} FROM {from}",
                quote_ident(&index.channel_column),
                age_sql(config)
            ),
            &id,
            format!("index table {from}"),
        );
        Self {
            streams,
            page: page.max(1),
            rows_read: 0,
        }
    }

    /// Rows of the order table and of the index table read so far.
    pub fn rows_read(&self) -> u64 {
        self.rows_read
    }

    /// The next order id (ascending) with everything the scanned tables hold for it; `None`
    /// when every scan is done. Empty pages are refilled together, concurrently.
    ///
    /// # Errors
    /// A table could not be read.
    pub async fn next(&mut self, sources: &Sources) -> Result<Option<Sightings>, ScanError> {
        let page = self.page;
        let refills = self
            .streams
            .iter_mut()
            .filter(|s| s.buffer.is_empty() && !s.done)
            .map(|s| s.fill(sources, page));
        self.rows_read += try_join_all(refills).await?.into_iter().sum::<u64>();
        let Some(id) = self.streams.iter().filter_map(Stream::head).min() else {
            return Ok(None);
        };
        let mut s = Sightings::empty(id);
        for stream in &mut self.streams {
            if stream.head() != Some(id) {
                continue;
            }
            let (_, channel, age) = stream.buffer.pop_front().expect("head checked");
            match stream.source {
                Source::Orders { shard } => s.orders.push(OrderRow { shard, channel }),
                Source::Items { table, shard } => s.items.push(ItemRows { table, shard }),
                Source::Index => {
                    s.index = Some(IndexRow {
                        channel,
                        age: age_of(age),
                    })
                }
            }
        }
        Ok(Some(s))
    }
}
