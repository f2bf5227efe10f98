//! Step 2 of a move: the moved tables compared on source and target at one GTID position,
//! chunk by chunk. The target's replication is stopped, a snapshot taken on the source, and
//! the target let run exactly to the snapshot's position (`START SLAVE ... UNTIL
//! MASTER_LOG_FILE, MASTER_LOG_POS`); then each table's rows are grouped into [`CHUNKS`] chunks by a hash
//! of their first column, and each chunk's row count and sum of row hashes compared.

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;

use super::ctx::{Ctx, MovedTable};
use super::servers::{self, CONNECTION, literal};

/// Chunks per table.
pub const CHUNKS: u32 = 64;

/// How long the target may take to reach the snapshot's position.
const UNTIL_WAIT: Duration = Duration::from_secs(120);

/// One chunk's summary: (chunk, rows, sum of row hashes).
type Chunk = (u32, u64, String);

/// What the comparison found.
#[derive(Debug, Default)]
pub struct Comparison {
    /// Chunks compared over every table.
    pub chunks: u64,
    /// Rows on the source at the position.
    pub rows: u64,
    /// `table chunk N: source R rows, target S rows` for each chunk that differs.
    pub differences: Vec<String>,
}

/// The checksum query of `t` read from `from` (`t` itself, or its staged copy): `t`'s
/// columns from the server's catalog.
async fn checksum_sql(
    conn: &mut mysql_async::Conn,
    t: &MovedTable,
    from: &MovedTable,
) -> Result<String, String> {
    let columns: Vec<String> = conn
        .exec(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
            (&t.database, &t.table),
        )
        .await
        .map_err(|e| e.to_string())?;
    let first = columns
        .first()
        .ok_or_else(|| format!("{} has no columns", t.sql()))?;
    let parts: Vec<String> = columns
        .iter()
        .map(|c| {
            let c = crate::sql::quote_ident(c);
            format!("{c}, ISNULL({c})")
        })
        .collect();
    Ok(format!(
        "SELECT CAST(CRC32({first}) % {CHUNKS} AS UNSIGNED) AS chunk, COUNT(*), CAST(SUM(CRC32(CONCAT_WS('|', {}))) AS CHAR) FROM {} GROUP BY chunk ORDER BY chunk",
        parts.join(", "),
        from.sql(),
        first = crate::sql::quote_ident(first),
    ))
}

/// Compares the moved tables at one position; the target's replication runs again after.
///
/// # Errors
/// A server's, or the target did not reach the snapshot's position in time.
pub async fn compare(ctx: &mut Ctx<'_>) -> Result<Comparison, String> {
    servers::stop_replication(&mut ctx.target).await?;
    let (mut snap, _) = servers::primary(ctx.source_ds(), ctx.options.connect_timeout).await?;
    snap.query_drop(
        "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ; START TRANSACTION WITH CONSISTENT SNAPSHOT",
    )
    .await
    .map_err(|e| e.to_string())?;
    let (position, _) = servers::snapshot_position(&mut snap).await?;
    ctx.target
        .query_drop(format!(
            "START SLAVE '{CONNECTION}' UNTIL MASTER_LOG_FILE = {}, MASTER_LOG_POS = {}",
            literal(&position.file),
            position.pos
        ))
        .await
        .map_err(|e| format!("running the target to the snapshot's position: {e}"))?;
    let started = Instant::now();
    loop {
        let st = servers::replica_status(&mut ctx.target).await?;
        if let Some(e) = st.error.filter(|_| !st.sql_running) {
            return Err(format!("the target's replication stopped: {e}"));
        }
        if !st.sql_running && st.executed.as_ref().is_some_and(|e| *e >= position) {
            break;
        }
        if started.elapsed() > UNTIL_WAIT {
            return Err(format!(
                "the target did not reach the source's position {position} within {UNTIL_WAIT:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut out = Comparison::default();
    for (t, staged) in ctx.tables.clone().iter().zip(ctx.staged()) {
        let sql = checksum_sql(&mut snap, t, t).await?;
        let source: Vec<Chunk> = snap.query(&sql).await.map_err(|e| e.to_string())?;
        let sql = checksum_sql(&mut snap, t, &staged).await?;
        let target: Vec<Chunk> = ctx
            .target
            .query(&sql)
            .await
            .map_err(|e| format!("checksums of {} on the target: {e}", staged.sql()))?;
        out.chunks += u64::from(CHUNKS);
        out.rows += source.iter().map(|c| c.1).sum::<u64>();
        for chunk in 0..CHUNKS {
            let s = source.iter().find(|c| c.0 == chunk);
            let d = target.iter().find(|c| c.0 == chunk);
            if s != d {
                out.differences.push(format!(
                    "{} chunk {chunk}: source {} rows, target {} rows{}",
                    t.sql(),
                    s.map_or(0, |c| c.1),
                    d.map_or(0, |c| c.1),
                    if s.map(|c| c.1) == d.map(|c| c.1) {
                        " (the same count, other contents)"
                    } else {
                        ""
                    }
                ));
            }
        }
    }
    snap.query_drop("COMMIT").await.map_err(|e| e.to_string())?;
    servers::start_replication(&mut ctx.target).await?;
    Ok(out)
}
