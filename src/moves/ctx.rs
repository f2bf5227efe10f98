//! What a `shards move` run works with: its options, the connections to the meta
//! datasource and to the source's and target's primaries, the moved tables.

use std::ops::RangeInclusive;
use std::time::Duration;

use mysql_async::prelude::Queryable;

use super::servers;
use super::state::{Move, Moves};
use crate::config::{Config, Datasource};

/// What `shards move` is asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Move the shards to this datasource (or go on with that move).
    To(String),
    /// Move the shards back where their last switched move took them from.
    Reverse,
    /// Undo the move under way before its map is published.
    Abort,
    /// Drop the source tables switched moves of the shards left renamed.
    Finish,
}

/// `shards move`'s options.
#[derive(Debug, Clone)]
pub struct MoveOptions {
    /// The shards.
    pub shards: RangeInclusive<u32>,
    /// What to do.
    pub action: Action,
    /// The longest writes to the moved shards may pause at the cut-over (default 2 s).
    pub max_pause: Duration,
    /// How long catching up and waiting for a cut-over moment may take before the run
    /// gives up (the move stays where it is; a rerun goes on).
    pub catch_up_timeout: Duration,
    /// Bound on connecting to a server.
    pub connect_timeout: Duration,
    /// Progress bars (a terminal) instead of lines.
    pub terminal: bool,
    /// How to run this command again (`routekey-proxy -c FILE`), for the hints printed.
    pub command: String,
}

/// What a run touches: the meta datasource, the source and target primaries, the moved
/// tables.
pub struct Ctx<'a> {
    /// The configuration (its shard ranges are not used: the shard map table is).
    pub config: &'a Config,
    /// The run's options.
    pub options: &'a MoveOptions,
    /// The meta datasource's primary.
    pub meta: mysql_async::Conn,
    /// The shard map table, qualified and quoted.
    pub map_table: String,
    /// The moves table, qualified and quoted.
    pub moves_table: String,
    /// The source's primary.
    pub source: mysql_async::Conn,
    /// Its `host:port` (the target replicates from there).
    pub source_address: String,
    /// The source datasource's position in the configuration.
    pub source_index: usize,
    /// The target's primary.
    pub target: mysql_async::Conn,
    /// The target datasource's position in the configuration.
    pub target_index: usize,

    /// The moved shards' physical tables.
    pub tables: Vec<MovedTable>,
    /// The move's id (its staging databases on the target are named by it).
    pub move_id: u64,
    /// Set by Ctrl-C or SIGTERM: the run stops at the next safe point.
    pub stop: std::sync::Arc<crate::legacy::Stop>,
}

impl Ctx<'_> {
    /// Records `mv`'s step and findings in the moves table.
    ///
    /// # Errors
    /// The meta datasource's: the step is not recorded, so it must not be taken.
    pub async fn record(&mut self, mv: &Move) -> Result<(), String> {
        Moves {
            table: &self.moves_table,
        }
        .record(&mut self.meta, mv)
        .await
    }

    /// The target datasource.
    pub fn target_id(&self) -> crate::config::DatasourceId {
        crate::config::DatasourceId(self.target_index as u16)
    }

    /// The source datasource.
    pub fn source_ds(&self) -> &Datasource {
        &self.config.datasources[self.source_index]
    }

    /// The moved tables as the move stages them on the target ([`MovedTable::staged`]).
    pub fn staged(&self) -> Vec<MovedTable> {
        self.tables.iter().map(|t| t.staged(self.move_id)).collect()
    }

    /// The staging databases on the target, each once.
    pub fn staging_databases(&self) -> Vec<String> {
        let mut dbs: Vec<String> = self.staged().into_iter().map(|t| t.database).collect();
        dbs.sort();
        dbs.dedup();
        dbs
    }

    /// A line on stderr.
    pub fn say(&self, line: &str) {
        eprintln!("shards move: {line}");
    }
}

/// Kills the process at a named point when `ROUTEKEY_MOVE_KILL_AT` names it (tests of a
/// rerun after SIGKILL): `copied`, `caught_up`, `verified`, `fenced` (the fence standing,
/// the copy still staged), `placed` (the copy in place, the map not published),
/// `published`.
pub fn failpoint(point: &str) {
    if std::env::var("ROUTEKEY_MOVE_KILL_AT").is_ok_and(|p| p == point) {
        eprintln!("shards move: failpoint {point}: SIGKILL");
        let pid = std::process::id().to_string();
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid])
            .status();
        std::process::abort();
    }
}

/// The moved shards' physical tables.
pub fn moved_tables(config: &Config, shards: &RangeInclusive<u32>) -> Vec<MovedTable> {
    shards
        .clone()
        .flat_map(|s| {
            let shard = &config.sharding.shards[s as usize];
            shard.tables.iter().map(|t| MovedTable {
                database: shard.database.clone(),
                table: t.clone(),
            })
        })
        .collect()
}

/// The position of datasource `name` in the configuration.
///
/// # Errors
/// The configuration does not define it.
pub fn datasource_index(config: &Config, name: &str) -> Result<usize, String> {
    config
        .datasources
        .iter()
        .position(|d| d.name == name)
        .ok_or_else(|| {
            format!(
                "no datasource `{name}` in the configuration (add it to every proxy's configuration first)"
            )
        })
}

/// The move's replication connection on the target stopped with an error: the copy starts
/// over (a transaction prepared across the snapshot, a target written by hand); stopped
/// without one: it is started again.
///
/// # Errors
/// The replication broke (the caller records the move back at its copy step).
pub async fn check_replica(ctx: &mut Ctx<'_>) -> Result<(), String> {
    let st = servers::replica_status(&mut ctx.target).await?;
    match st.error {
        Some(e) if !st.sql_running || !st.io_running => Err(format!(
            "the target's replication of the moved tables stopped: {e}"
        )),
        // Stopped without an error (the target restarted with --skip-slave-start, a STOP
        // SLAVE by hand): it goes on from where it stopped.
        None if st.exists && (!st.sql_running || !st.io_running) => {
            servers::start_replication(&mut ctx.target).await
        }
        _ => Ok(()),
    }
}

/// A physical table of a moved shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MovedTable {
    /// Its database.
    pub database: String,
    /// Its name.
    pub table: String,
}

impl MovedTable {
    /// `db`.`table`, quoted.
    pub fn sql(&self) -> String {
        format!(
            "{}.{}",
            crate::sql::quote_ident(&self.database),
            crate::sql::quote_ident(&self.table)
        )
    }

    /// `db`.`table<suffix>`, quoted.
    pub fn renamed_sql(&self, suffix: &str) -> String {
        format!(
            "{}.{}",
            crate::sql::quote_ident(&self.database),
            crate::sql::quote_ident(&format!("{}{suffix}", self.table))
        )
    }

    /// `db.table`, as `replicate_do_table` lists it.
    pub fn filter_name(&self) -> String {
        format!("{}.{}", self.database, self.table)
    }

    /// Where move `id` builds this table on the target: the same name in the staging
    /// database `<db>__rk<id>`, which no shard map names, so no proxy (however old its map)
    /// reaches the copy before the cut-over moves it into place.
    pub fn staged(&self, id: u64) -> MovedTable {
        MovedTable {
            database: staging_database(&self.database, id),
            table: self.table.clone(),
        }
    }
}

/// The staging database of move `id` for shard database `database`.
pub fn staging_database(database: &str, id: u64) -> String {
    format!("{database}__rk{id}")
}

/// Which of `tables` exist on the server, under their names with `suffix` appended when
/// `suffix` is given: (present, absent).
pub async fn existing(
    conn: &mut mysql_async::Conn,
    tables: &[MovedTable],
    suffix: &str,
) -> Result<(usize, usize), String> {
    let mut present = 0;
    for t in tables {
        let n: Option<u64> = conn
            .exec_first(
                "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
                (&t.database, format!("{}{suffix}", t.table)),
            )
            .await
            .map_err(|e| e.to_string())?;
        if n.unwrap_or(0) > 0 {
            present += 1;
        }
    }
    Ok((present, tables.len() - present))
}

/// Rows the tables hold on the server (0 for a table that is not there).
pub async fn row_count(conn: &mut mysql_async::Conn, tables: &[MovedTable]) -> Result<u64, String> {
    let (present, _) = existing(conn, tables, "").await?;
    if present == 0 {
        return Ok(0);
    }
    let mut total = 0;
    for t in tables {
        let (here, _) = existing(conn, std::slice::from_ref(t), "").await?;
        if here == 0 {
            continue;
        }
        let n: Option<u64> = conn
            .query_first(format!("SELECT COUNT(*) FROM {}", t.sql()))
            .await
            .map_err(|e| e.to_string())?;
        total += n.unwrap_or(0);
    }
    Ok(total)
}

/// Each moved table's columns on the source and its staged copy's on the target are the
/// same (names, types, nullability, order).
///
/// # Errors
/// A server's, or a definition changed on the source since the copy (DDL does not reach
/// the staged copy): the move must start again.
pub async fn same_definitions(ctx: &mut Ctx<'_>) -> Result<(), String> {
    const COLUMNS: &str = "SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION";
    type Column = (String, String, String);
    for (t, staged) in ctx.tables.clone().iter().zip(ctx.staged()) {
        let source: Vec<Column> = ctx
            .source
            .exec(COLUMNS, (&t.database, &t.table))
            .await
            .map_err(|e| e.to_string())?;
        let target: Vec<Column> = ctx
            .target
            .exec(COLUMNS, (&staged.database, &staged.table))
            .await
            .map_err(|e| e.to_string())?;
        if source != target {
            return Err(format!(
                "the definition of {} changed on the source during the move (DDL does not reach the staged copy): --abort the move and start it again",
                t.sql()
            ));
        }
    }
    Ok(())
}
