//! Step 3 of a move, the cut-over, fenced in the source database: one `RENAME TABLE` of
//! every moved table to its `__moved_<id>` name (it waits for open transactions on them,
//! at most half `--max-pause`, while new statements on them queue behind it); then the
//! target is let apply everything the source logged up to the rename, its copies move from
//! the staging databases into place, and the new shard map version is published. A proxy that has not yet read
//! the new version meets the fence (its statement fails with 1146 before it changed
//! anything), reads the map and runs the statement again on the target. When the target
//! cannot catch up within `--max-pause`, the rename is undone and the cut-over tried again
//! later, so writes never pause longer. The rename does not reach the target: its
//! replication applies only the staged tables (`replicate_do_table` on the staging
//! databases; the statement names the shard databases).

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;

use super::ctx::{self, Ctx, MovedTable};
use super::servers;
use super::state::{Move, Step};
use crate::config::shard_map::ShardMap;

/// Time between two looks while the cut-over waits for its moment.
const RETRY_PAUSE: Duration = Duration::from_millis(250);

/// The longest wait between two renames that open transactions made time out.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// `RENAME TABLE a TO a<suffix>, ...` (`back`: the other way).
fn rename_sql(tables: &[MovedTable], suffix: &str, back: bool) -> String {
    let pairs: Vec<String> = tables
        .iter()
        .map(|t| {
            let (from, to) = (t.sql(), t.renamed_sql(suffix));
            if back {
                format!("{to} TO {from}")
            } else {
                format!("{from} TO {to}")
            }
        })
        .collect();
    format!("RENAME TABLE {}", pairs.join(", "))
}

/// The map the cut-over publishes: the newest with the moved shards on the target.
async fn next_map(ctx: &mut Ctx<'_>, mv: &Move) -> Result<ShardMap, String> {
    let newest = crate::route::shard_map::newest(&mut ctx.meta, &ctx.map_table)
        .await
        .map_err(|e| format!("reading the shard map: {e}"))?
        .ok_or("the shard map table is empty")?;
    let mut map = newest.clone();
    for s in mv.shards.clone() {
        map.datasources[s as usize] = mv.target.clone();
    }
    map.version = mv.map_version.unwrap_or(newest.version + 1);
    Ok(map)
}

/// Whether version `map.version` is published with this content (`false`: not there).
///
/// # Errors
/// Another content holds the version: another move published in between.
async fn published(ctx: &mut Ctx<'_>, map: &ShardMap) -> Result<bool, String> {
    let row: Option<String> = ctx
        .meta
        .exec_first(
            format!(
                "SELECT datasources FROM {} WHERE version = ?",
                ctx.map_table
            ),
            (map.version,),
        )
        .await
        .map_err(|e| e.to_string())?;
    match row {
        None => Ok(false),
        Some(text) if text == map.encode() => Ok(true),
        Some(text) => Err(format!(
            "shard map version {} was published by someone else meanwhile ({text}); the moved tables stay renamed on the source: a person must decide (docs/operations.md, \"Moving shards\")",
            map.version
        )),
    }
}

/// Waits for the moment and cuts over; the move ends switched.
///
/// # Errors
/// A server's, or no moment came within `--catch-up-timeout` (the move stays at its
/// cut-over step; a rerun tries again).
pub async fn cut_over(ctx: &mut Ctx<'_>, mv: &mut Move) -> Result<(), String> {
    let give_up = Instant::now() + ctx.options.catch_up_timeout;
    let max_pause = ctx.options.max_pause;
    let rename_wait = (max_pause.as_secs() / 2).max(1);
    let mut attempts = 0u32;
    loop {
        if ctx.stop.requested() {
            return Ok(());
        }
        if Instant::now() > give_up {
            return Err(format!(
                "no cut-over within --catch-up-timeout ({}) after {attempts} attempt(s): {}",
                humantime::format_duration(ctx.options.catch_up_timeout),
                mv.detail.as_deref().unwrap_or("the target stayed behind")
            ));
        }
        // The target close behind: what the source logged until now applied within a
        // quarter of the pause allowed.
        let now = servers::master_status(&mut ctx.source).await?;
        if !servers::has_applied(&mut ctx.target, &now, max_pause / 4).await? {
            if let Err(e) = ctx::check_replica(ctx).await {
                ctx.say(&format!("{e}; the copy starts over"));
                mv.detail = Some(e);
                mv.step = Step::Copy;
                return Ok(());
            }
            mv.detail = Some("waiting: the target is behind the source".into());
            tokio::time::sleep(RETRY_PAUSE).await;
            ctx.say(&format!(
                "cut-over: the target is more than {:?} behind; waiting",
                max_pause / 4
            ));
            continue;
        }
        let prepared = servers::prepared_xa(&mut ctx.source).await?;
        if prepared > 0 {
            mv.detail = Some(format!(
                "waiting: {prepared} prepared XA branch(es) on the source"
            ));
            tokio::time::sleep(RETRY_PAUSE).await;
            continue;
        }
        // DDL on a moved table since the copy does not reach the staged copy (the
        // replication applies the staged tables' row events only): refuse to cut over.
        ctx::same_definitions(ctx).await?;
        attempts += 1;
        let map = next_map(ctx, mv).await?;
        mv.map_version = Some(map.version);
        mv.step = Step::Fenced;
        ctx.record(mv).await?;
        let started = Instant::now();
        let renamed = ctx
            .source
            .query_drop(format!(
                "SET STATEMENT lock_wait_timeout = {rename_wait} FOR {}",
                rename_sql(&ctx.tables, &mv.suffix, false)
            ))
            .await;
        if let Err(e) = renamed {
            mv.step = Step::CutOver;
            mv.detail = Some(format!(
                "attempt {attempts}: the fence waited for open transactions: {e}"
            ));
            ctx.record(mv).await?;
            // Backing off: each attempt pauses the moved shards' writes for as long as the
            // rename waits.
            let backoff = (RETRY_PAUSE * 2u32.pow(attempts.min(6))).min(MAX_BACKOFF);
            ctx.say(&format!(
                "cut-over attempt {attempts}: {e}; trying again in {backoff:?}"
            ));
            tokio::time::sleep(backoff).await;
            continue;
        }
        // A branch prepared before the rename commits into the renamed table: none may be.
        if servers::prepared_xa(&mut ctx.source).await? > 0 {
            undo_fence(ctx, mv, "a prepared XA branch appeared on the source").await?;
            continue;
        }
        let fence = servers::master_status(&mut ctx.source).await?;
        let left = max_pause.saturating_sub(started.elapsed());
        if !servers::has_applied(&mut ctx.target, &fence, left).await? {
            undo_fence(
                ctx,
                mv,
                "the target did not apply the fence's position within --max-pause",
            )
            .await?;
            continue;
        }
        mv.fence_pos = Some(fence.to_string());
        ctx.record(mv).await?;
        return finish_fenced(ctx, mv, map, Some(started)).await;
    }
}

/// Renames the moved tables back on the source (the target's staged copy never saw the
/// rename): the cut-over did not happen; it is tried again.
///
/// # Errors
/// A server's: the fence stands and the move stays fenced (a rerun resumes it).
pub async fn undo_fence(ctx: &mut Ctx<'_>, mv: &mut Move, why: &str) -> Result<(), String> {
    ctx.source
        .query_drop(rename_sql(&ctx.tables, &mv.suffix, true))
        .await
        .map_err(|e| format!("undoing the fence on the source ({why}): {e}"))?;
    mv.step = Step::CutOver;
    mv.detail = Some(format!("fence undone: {why}"));
    ctx.record(mv).await?;
    ctx.say(&format!("cut-over: fence undone ({why})"));
    tokio::time::sleep(RETRY_PAUSE).await;
    Ok(())
}

/// With the fence standing and the target caught up to it: the target's copies move from
/// their staging databases into place, the map is published, the move is switched.
async fn finish_fenced(
    ctx: &mut Ctx<'_>,
    mv: &mut Move,
    map: ShardMap,
    started: Option<Instant>,
) -> Result<(), String> {
    ctx::failpoint("fenced");
    servers::stop_replication(&mut ctx.target).await?;
    // The copies move from the staging databases into place: from now on (and not before)
    // a proxy that routes the shards to the target finds them.
    let staged = ctx.staged();
    let (in_staging, _) = ctx::existing(&mut ctx.target, &staged, "").await?;
    let (in_place, _) = ctx::existing(&mut ctx.target, &ctx.tables, "").await?;
    let n = ctx.tables.len();
    if in_staging == n && in_place == 0 {
        let pairs: Vec<String> = staged
            .iter()
            .zip(&ctx.tables)
            .map(|(s, t)| format!("{} TO {}", s.sql(), t.sql()))
            .collect();
        ctx.target
            .query_drop(format!("RENAME TABLE {}", pairs.join(", ")))
            .await
            .map_err(|e| format!("moving the target's copies into place: {e}"))?;
    } else if !(in_place == n && in_staging == 0) {
        return Err(format!(
            "the target holds {in_staging} of {n} moved tables staged and {in_place} in place: a person must look (docs/operations.md, \"Moving shards\")"
        ));
    }
    for db in ctx.staging_databases() {
        let _ = ctx
            .target
            .query_drop(format!(
                "DROP DATABASE IF EXISTS {}",
                crate::sql::quote_ident(&db)
            ))
            .await;
    }
    ctx::failpoint("placed");
    if !published(ctx, &map).await? {
        crate::route::shard_map::publish(
            &mut ctx.meta,
            &ctx.map_table,
            &map,
            &format!(
                "move {}: shards {} {} -> {}",
                mv.id,
                super::state::shards_text(&mv.shards),
                mv.source,
                mv.target
            ),
        )
        .await
        .map_err(|e| format!("publishing shard map version {}: {e}", map.version))?;
        if !published(ctx, &map).await? {
            return Err(format!("shard map version {} did not publish", map.version));
        }
    }
    let pause = started.map(|s| s.elapsed());
    ctx::failpoint("published");
    mv.pause_ms = pause.map(|p| p.as_millis() as u64);
    mv.step = Step::Switched;
    mv.detail = None;
    ctx.record(mv).await?;
    // The move is done; a connection left behind is removed by --finish (and named by a
    // later move's check).
    if let Err(e) = servers::forget_replication(&mut ctx.target).await {
        ctx.say(&format!(
            "the target's replication connection stays ({e}); `--finish` removes it"
        ));
    }
    Ok(())
}

/// A move found fenced by a rerun (the last run died during its cut-over): with the
/// source's tables renamed, the cut-over is finished; without, it starts over.
///
/// # Errors
/// A server's, or the tables are half renamed.
pub async fn resume_fenced(ctx: &mut Ctx<'_>, mv: &mut Move) -> Result<(), String> {
    let (renamed, _) = ctx::existing(&mut ctx.source, &ctx.tables, &mv.suffix).await?;
    let map = next_map(ctx, mv).await?;
    if renamed == 0 {
        if published(ctx, &map).await? {
            return Err(format!(
                "shard map version {} is published but the source's tables are not renamed: a person must look",
                map.version
            ));
        }
        servers::start_replication(&mut ctx.target).await?;
        mv.step = Step::CutOver;
        mv.detail = Some("the last run stopped before its fence; cutting over again".into());
        ctx.record(mv).await?;
        return Ok(());
    }
    if renamed != ctx.tables.len() {
        return Err(format!(
            "{renamed} of {} moved tables are renamed on the source: a person must look",
            ctx.tables.len()
        ));
    }
    ctx.say("resuming a cut-over: the fence stands; the target applies the rest");
    if !published(ctx, &map).await? {
        servers::start_replication(&mut ctx.target).await?;
        let fence = servers::master_status(&mut ctx.source).await?;
        if !servers::has_applied(&mut ctx.target, &fence, ctx.options.catch_up_timeout).await? {
            return Err("the target did not apply the fence's position".into());
        }
        mv.fence_pos = Some(fence.to_string());
    }
    finish_fenced(ctx, mv, map, None).await
}

/// Whether the move's map version is published with the shards on the target.
pub async fn is_published(ctx: &mut Ctx<'_>, mv: &Move) -> Result<bool, String> {
    if mv.map_version.is_none() {
        return Ok(false);
    }
    let map = next_map(ctx, mv).await?;
    published(ctx, &map).await
}
