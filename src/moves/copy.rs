//! Step 1 of a move: the moved shards' tables created on the target, a consistent snapshot
//! of them copied with its GTID position, and the target set to replicate those tables
//! from that position (MariaDB's own replication, filtered with the connection's
//! `replicate_do_table`: docs/decisions/0005-shard-moves.md says why).

use mysql_async::Value;
use mysql_async::prelude::Queryable;

use super::ctx::{Ctx, MovedTable};
use super::servers::{self, BinlogPos, CONNECTION, literal};
use crate::legacy::progress::Progress;

/// Snapshots taken before one with no XA branch prepared on the source is given up on (the
/// copy goes on; a broken replication starts it over).
const SNAPSHOT_TRIES: u32 = 50;

/// Rows per INSERT of the copy (fewer for wide tables: at most 60,000 placeholders).
const BATCH_ROWS: usize = 500;

/// The copy: tables created on the target (dropped first: a copy starts over), a
/// snapshot copied, replication from its position started. Returns the snapshot's
/// position and the rows copied.
///
/// # Errors
/// A server's; the move stays at its copy step (a rerun starts the copy over).
pub async fn copy(ctx: &mut Ctx<'_>) -> Result<(String, u64), String> {
    prepare_target(ctx).await?;
    copy_snapshot(ctx).await
}

/// `CREATE DATABASE IF NOT EXISTS db` on the target.
async fn create_database(target: &mut mysql_async::Conn, db: &str) -> Result<(), String> {
    target
        .query_drop(format!(
            "CREATE DATABASE IF NOT EXISTS {}",
            crate::sql::quote_ident(db)
        ))
        .await
        .map_err(|e| format!("creating database {db} on the target: {e}"))
}

/// The target made ready for a copy: no replication connection of an earlier attempt, the
/// datasource's and the shard databases, fresh staging databases with the moved tables'
/// definitions. The source must log ROW.
async fn prepare_target(ctx: &mut Ctx<'_>) -> Result<(), String> {
    servers::forget_replication(&mut ctx.target).await?;
    // The database the target datasource's connections select (a new server has none).
    if let Some(db) = ctx.config.datasource(ctx.target_id()).database.clone() {
        create_database(&mut ctx.target, &db).await?;
    }
    // Row-based binary logging: the target's replication renames the database of row
    // events into the staging database (`replicate_rewrite_db` rewrites a statement's
    // default database only, so a statement-logged change would miss the filter).
    let format: Option<String> = ctx
        .source
        .query_first("SELECT @@global.binlog_format")
        .await
        .map_err(|e| e.to_string())?;
    if !format
        .as_deref()
        .is_some_and(|f| f.eq_ignore_ascii_case("ROW"))
    {
        return Err(format!(
            "the source logs binlog_format = {}: a move needs ROW (SET GLOBAL binlog_format = 'ROW', and in the server's configuration)",
            format.unwrap_or_default()
        ));
    }
    let mut real: Vec<String> = ctx.tables.iter().map(|t| t.database.clone()).collect();
    real.dedup();
    for db in real {
        // Where the copies go at the cut-over.
        create_database(&mut ctx.target, &db).await?;
    }
    for db in ctx.staging_databases() {
        ctx.target
            .query_drop(format!(
                "DROP DATABASE IF EXISTS {0}; CREATE DATABASE {0}",
                crate::sql::quote_ident(&db)
            ))
            .await
            .map_err(|e| format!("preparing the staging database {db} on the target: {e}"))?;
    }
    for (t, staged) in ctx.tables.clone().iter().zip(ctx.staged()) {
        let create: Option<(String, String)> = ctx
            .source
            .query_first(format!("SHOW CREATE TABLE {}", t.sql()))
            .await
            .map_err(|e| format!("reading the definition of {} on the source: {e}", t.sql()))?;
        let (_, create) = create.ok_or_else(|| format!("{} is not on the source", t.sql()))?;
        ctx.target
            .query_drop(format!(
                "USE {}; {create}",
                crate::sql::quote_ident(&staged.database)
            ))
            .await
            .map_err(|e| format!("creating {} on the target: {e}", staged.sql()))?;
    }
    Ok(())
}

/// The snapshot copied into the staging databases and the target's replication started
/// from its position; the position and the rows copied.
async fn copy_snapshot(ctx: &mut Ctx<'_>) -> Result<(String, u64), String> {
    // The snapshot: a transaction of its own, on a connection of its own, taken when no XA
    // branch is prepared on the source (a branch prepared before the snapshot and committed
    // after it would stop the target's replication: its XA COMMIT names an xid the target
    // never saw prepared).
    let (mut snap, _) = servers::primary(ctx.source_ds(), ctx.options.connect_timeout).await?;
    let mut tries = 0;
    let (position, gtid) = loop {
        snap.query_drop(
            "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ; START TRANSACTION WITH CONSISTENT SNAPSHOT",
        )
        .await
        .map_err(|e| format!("starting the snapshot on the source: {e}"))?;
        let position = servers::snapshot_position(&mut snap).await?;
        tries += 1;
        if servers::prepared_xa(&mut snap).await? == 0 || tries == SNAPSHOT_TRIES {
            break position;
        }
        snap.query_drop("ROLLBACK")
            .await
            .map_err(|e| e.to_string())?;
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let estimate = estimated_rows(&mut snap, &ctx.tables).await;
    let mut progress = Progress::new("copy", estimate, ctx.options.terminal);
    let mut copied = 0u64;
    ctx.target
        .query_drop("SET SESSION foreign_key_checks = 0, unique_checks = 0")
        .await
        .map_err(|e| e.to_string())?;
    for (t, staged) in ctx.tables.clone().iter().zip(ctx.staged()) {
        copied += copy_table(&mut snap, &mut ctx.target, t, &staged, &mut |n| {
            progress.update(copied + n, || t.filter_name())
        })
        .await?;
    }
    snap.query_drop("COMMIT").await.map_err(|e| e.to_string())?;
    progress.finish(copied, "copied");
    follow(ctx, &position).await?;
    Ok((format!("{position} (GTID {gtid})"), copied))
}

/// The servers' estimate of the rows of `tables` (0 when unknown).
async fn estimated_rows(conn: &mut mysql_async::Conn, tables: &[MovedTable]) -> u64 {
    let mut total = 0;
    for t in tables {
        let n: Option<Option<u64>> = conn
            .exec_first(
                "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
                (&t.database, &t.table),
            )
            .await
            .unwrap_or(None);
        total += n.flatten().unwrap_or(0);
    }
    total
}

/// Copies one table's rows as the snapshot sees them into its staged table on the target,
/// in multi-row INSERTs of the values as the server sent them (text: the target converts
/// them back exactly); the rows copied.
async fn copy_table(
    snap: &mut mysql_async::Conn,
    target: &mut mysql_async::Conn,
    t: &MovedTable,
    staged: &MovedTable,
    progress: &mut impl FnMut(u64),
) -> Result<u64, String> {
    let failed = |e: mysql_async::Error| format!("copying {}: {e}", t.sql());
    let mut result = snap
        .query_iter(format!("SELECT * FROM {}", t.sql()))
        .await
        .map_err(failed)?;
    let columns = result.columns().map_or(0, |c| c.len()).max(1);
    let per_insert = BATCH_ROWS.min(60_000 / columns).max(1);
    let mut batch: Vec<Value> = Vec::with_capacity(per_insert * columns);
    let mut rows = 0u64;
    let mut pending = 0usize;
    while let Some(row) = result.next().await.map_err(failed)? {
        batch.extend(row.unwrap());
        pending += 1;
        if pending == per_insert {
            insert(target, staged, columns, pending, std::mem::take(&mut batch)).await?;
            rows += pending as u64;
            pending = 0;
            progress(rows);
        }
    }
    drop(result);
    if pending > 0 {
        insert(target, staged, columns, pending, batch).await?;
        rows += pending as u64;
        progress(rows);
    }
    Ok(rows)
}

async fn insert(
    target: &mut mysql_async::Conn,
    t: &MovedTable,
    columns: usize,
    rows: usize,
    values: Vec<Value>,
) -> Result<(), String> {
    let row = format!("({})", vec!["?"; columns].join(","));
    let sql = format!(
        "INSERT INTO {} VALUES {}",
        t.sql(),
        vec![row; rows].join(",")
    );
    target
        .exec_drop(sql, values)
        .await
        .map_err(|e| format!("writing {} on the target: {e}", t.sql()))
}

/// Points the target's move connection at the source's primary from `position` (binary
/// log coordinates: the target's own GTID state is left alone, whatever domains the two
/// servers share), the moved tables' row events renamed into the staging databases and
/// only theirs applied, and starts it.
pub async fn follow(ctx: &mut Ctx<'_>, position: &BinlogPos) -> Result<(), String> {
    let ds = ctx.source_ds().clone();
    let (host, port) = ctx
        .source_address
        .rsplit_once(':')
        .ok_or_else(|| format!("source address `{}` has no port", ctx.source_address))?;
    let ssl = if ds.tls == crate::config::BackendTls::Off {
        ""
    } else {
        ", MASTER_SSL = 1"
    };
    let filter: Vec<String> = ctx.staged().iter().map(MovedTable::filter_name).collect();
    let mut rewrite: Vec<String> = ctx
        .tables
        .iter()
        .zip(ctx.staged())
        .map(|(t, s)| format!("{}->{}", t.database, s.database))
        .collect();
    rewrite.sort();
    rewrite.dedup();
    let sql = format!(
        "CHANGE MASTER '{CONNECTION}' TO MASTER_HOST = {host}, MASTER_PORT = {port},
             MASTER_USER = {user}, MASTER_PASSWORD = {password}, MASTER_CONNECT_RETRY = 1,
             MASTER_LOG_FILE = {file}, MASTER_LOG_POS = {pos}, MASTER_USE_GTID = no{ssl};
         SET GLOBAL {CONNECTION}.replicate_rewrite_db = {rewrite};
         SET GLOBAL {CONNECTION}.replicate_do_table = {filter};
         START SLAVE '{CONNECTION}'",
        host = literal(host.trim_start_matches('[').trim_end_matches(']')),
        port = port
            .parse::<u16>()
            .map_err(|_| format!("source port `{port}`"))?,
        user = literal(&ds.user),
        password = literal(&ds.password),
        file = literal(&position.file),
        pos = position.pos,
        filter = literal(&filter.join(",")),
        rewrite = literal(&rewrite.join(",")),
    );
    ctx.target
        .query_drop(sql)
        .await
        .map_err(|e| format!("starting replication of the moved tables on the target: {e}"))
}
