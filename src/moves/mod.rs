//! `routekey-proxy shards move`: moves shards to another datasource while the applications
//! keep writing (docs/operations.md, "Moving shards"; docs/decisions/0005-shard-moves.md).
//!
//! A move goes through its steps ([`state::Step`]), each recorded in the moves table on the
//! meta datasource before it is taken, so the command can be killed at any point and run
//! again to go on:
//! 1. **copy** ([`copy`]): the tables created on the target, a consistent snapshot copied
//!    with its GTID position, the target replicating the moved tables from there;
//! 2. **catch up**: the target close behind the source;
//! 3. **verify** ([`checksum`]): chunk checksums compared at one position, and `verify`'s
//!    rules run on the target;
//! 4. **cut-over** ([`cutover`]): the fence in the source database, the target caught up to
//!    it, the new shard map version published;
//! 5. the source tables stay renamed until `--finish` drops them; `--reverse` moves the
//!    shards back the same way, `--abort` undoes a move before its map is published.

pub mod checksum;
pub mod copy;
pub mod ctx;
pub mod cutover;
pub mod servers;
pub mod state;

pub use ctx::{Action, Ctx, MoveOptions};

use std::time::Duration;

use crate::config::Config;
use crate::config::shard_map::ShardMap;
use ctx::{check_replica, datasource_index, failpoint, moved_tables};
use state::{Move, Moves, Step};

/// The exit status of a run that stopped before the end: run it again to go on (0: done, 1:
/// the checksums differ, 2: refused, nothing done).
pub const NOT_FINISHED: u8 = 3;

/// Copies one run starts before it gives up (the target's replication broke after each).
const MAX_COPIES: u32 = 5;

/// Runs `shards move`; the summary and the exit status (0 done, 1 the checksums differ,
/// [`NOT_FINISHED`]: rerun to go on).
///
/// # Errors
/// The run could not start (a bad argument, an unreachable meta datasource).
pub async fn run(
    config: &Config,
    options: &MoveOptions,
    stop: std::sync::Arc<crate::legacy::Stop>,
) -> Result<(String, u8), String> {
    if options.max_pause < Duration::from_secs(1) {
        return Err(
            "--max-pause: at least 1s (the fence's rename waits whole seconds for open transactions)"
                .into(),
        );
    }
    let count = config.sharding.shards.len() as u32;
    if *options.shards.end() >= count {
        return Err(format!(
            "--shards: shard {} does not exist (shards 0-{})",
            options.shards.end(),
            count - 1
        ));
    }
    let (mut meta, map_table, moves_table, newest) = open_moves(config, options).await?;
    let active = Moves {
        table: &moves_table,
    }
    .active(&mut meta)
    .await?;
    if options.action == Action::Finish {
        if let Some(a) = active.filter(|a| a.shards == options.shards) {
            return Err(format!(
                "move {} of shards {} is at step {}: it must switch (or be aborted) before --finish",
                a.id,
                state::shards_text(&a.shards),
                a.step.name()
            ));
        }
        return finish(config, options, &mut meta, &moves_table).await;
    }
    let mv = choose(config, options, &mut meta, &moves_table, &newest, active).await?;
    let mut ctx = connect(config, options, meta, map_table, moves_table, &mv, stop).await?;
    if options.action == Action::Abort {
        return abort(&mut ctx, mv).await;
    }
    steps(&mut ctx, mv).await
}

/// The meta datasource's primary and the shard map and moves tables' names.
async fn meta_connection(
    config: &Config,
    timeout: Duration,
) -> Result<(mysql_async::Conn, String, String), String> {
    let (map_table, moves_table) = crate::route::shard_map::table_names(config);
    let meta_ds = config.datasource(config.index.datasource);
    let (meta, _) = servers::primary(meta_ds, timeout).await?;
    Ok((meta, map_table, moves_table))
}

/// The newest shard map version; `None` when the table is empty or not there yet.
async fn newest_if_any(
    meta: &mut mysql_async::Conn,
    map_table: &str,
) -> Result<Option<ShardMap>, String> {
    match crate::route::shard_map::newest(meta, map_table).await {
        Err(mysql_async::Error::Server(e)) if e.code == crate::error::ER_NO_SUCH_TABLE => Ok(None),
        read => read.map_err(|e| format!("reading the shard map: {e}")),
    }
}

/// The meta datasource for a run: the move lock taken, the tables there (seeded), and the
/// newest shard map version.
async fn open_moves(
    config: &Config,
    options: &MoveOptions,
) -> Result<(mysql_async::Conn, String, String, ShardMap), String> {
    let (mut meta, map_table, moves_table) =
        meta_connection(config, options.connect_timeout).await?;
    use mysql_async::prelude::Queryable;
    // One run at a time, fleet-wide: a named lock on the meta datasource, released when
    // this connection ends (a killed run's too).
    let locked: Option<Option<i64>> = meta
        .query_first("SELECT GET_LOCK('routekey_shards_move', 0)")
        .await
        .map_err(|e| format!("taking the move lock: {e}"))?;
    if locked != Some(Some(1)) {
        let holder: Option<Option<u64>> = meta
            .query_first("SELECT IS_USED_LOCK('routekey_shards_move')")
            .await
            .unwrap_or(None);
        return Err(format!(
            "another `shards move` runs (its connection {} on the meta datasource holds the lock routekey_shards_move)",
            holder.flatten().map_or("?".into(), |id| id.to_string())
        ));
    }
    meta.query_drop(crate::route::shard_map::create_map_table_sql(&map_table))
        .await
        .map_err(|e| format!("creating the shard map table: {e}"))?;
    meta.query_drop(crate::route::shard_map::create_moves_table_sql(
        &moves_table,
    ))
    .await
    .map_err(|e| format!("creating the moves table: {e}"))?;
    crate::route::shard_map::publish(
        &mut meta,
        &map_table,
        &ShardMap::of_config(config, 1),
        crate::route::shard_map::SEEDED_NOTE,
    )
    .await
    .map_err(|e| format!("seeding the shard map: {e}"))?;
    let newest = crate::route::shard_map::newest(&mut meta, &map_table)
        .await
        .map_err(|e| format!("reading the shard map: {e}"))?
        .ok_or("the shard map table is empty")?;
    Ok((meta, map_table, moves_table, newest))
}

/// The move a run works on: the one under way (when the options name it), or a new one.
async fn choose(
    config: &Config,
    options: &MoveOptions,
    meta: &mut mysql_async::Conn,
    moves_table: &str,
    newest: &ShardMap,
    active: Option<Move>,
) -> Result<Move, String> {
    let moves = Moves { table: moves_table };
    Ok(match (&options.action, active) {
        (Action::Abort, None) => {
            return Err(format!(
                "no move of shards {} is under way",
                state::shards_text(&options.shards)
            ));
        }
        (_, Some(a)) if a.shards != options.shards => {
            return Err(format!(
                "move {} of shards {} ({} -> {}) is under way at step {}: one move at a time (go on with `shards move --shards {} --to {}`, or --abort it)",
                a.id,
                state::shards_text(&a.shards),
                a.source,
                a.target,
                a.step.name(),
                state::shards_text(&a.shards),
                a.target
            ));
        }
        (Action::To(to), Some(a)) if *to != a.target => {
            return Err(format!(
                "move {} of these shards to {} is under way: go on with --to {}, or --abort it first",
                a.id, a.target, a.target
            ));
        }
        (_, Some(a)) => a,
        (Action::To(to), None) => start(config, options, meta, moves_table, newest, to).await?,
        (Action::Reverse, None) => {
            let last = moves
                .done(meta)
                .await?
                .into_iter()
                .find(|m| m.shards == options.shards)
                .ok_or_else(|| {
                    format!(
                        "no switched move of shards {} to reverse",
                        state::shards_text(&options.shards)
                    )
                })?;
            start(config, options, meta, moves_table, newest, &last.source).await?
        }
        (Action::Finish, None) => return Err("--finish chooses no move to run".into()),
    })
}

/// The run's context: the source's and target's primaries (distinct servers) and the moved
/// tables.
async fn connect<'a>(
    config: &'a Config,
    options: &'a MoveOptions,
    meta: mysql_async::Conn,
    map_table: String,
    moves_table: String,
    mv: &Move,
    stop: std::sync::Arc<crate::legacy::Stop>,
) -> Result<Ctx<'a>, String> {
    let source_index = datasource_index(config, &mv.source)?;
    let target_index = datasource_index(config, &mv.target)?;
    let (source, source_address) =
        servers::primary(&config.datasources[source_index], options.connect_timeout).await?;
    let (mut target, _) =
        servers::primary(&config.datasources[target_index], options.connect_timeout).await?;
    let target_ids = servers::ids(&mut target).await?;
    let (mut source_conn, source_address) = (source, source_address);
    let source_ids = servers::ids(&mut source_conn).await?;
    if source_ids.0 == target_ids.0 {
        return Err(format!(
            "{} and {} have the same server_id {}: the target would skip the source's transactions as its own",
            mv.source, mv.target, target_ids.0
        ));
    }
    let source = source_conn;
    Ok(Ctx {
        config,
        options,
        meta,
        map_table,
        moves_table: moves_table.clone(),
        source,
        source_address,
        source_index,
        target,
        target_index,
        tables: moved_tables(config, &options.shards),
        move_id: mv.id,
        stop,
    })
}

/// A new move's checks and its row.
async fn start(
    config: &Config,
    options: &MoveOptions,
    meta: &mut mysql_async::Conn,
    moves_table: &str,
    newest: &ShardMap,
    to: &str,
) -> Result<Move, String> {
    let target_index = datasource_index(config, to)?;
    let homes: Vec<&String> = options
        .shards
        .clone()
        .map(|s| &newest.datasources[s as usize])
        .collect();
    let source = homes[0].clone();
    if homes.iter().any(|h| **h != source) {
        return Err(format!(
            "shards {} lie on several datasources in shard map version {} ({}); move each datasource's part on its own",
            state::shards_text(&options.shards),
            newest.version,
            newest.describe()
        ));
    }
    if source == to {
        return Err(format!(
            "shards {} are on {to} already (shard map version {})",
            state::shards_text(&options.shards),
            newest.version
        ));
    }
    datasource_index(config, &source)?;
    let (mut target, _) =
        servers::primary(&config.datasources[target_index], options.connect_timeout).await?;
    let tables = moved_tables(config, &options.shards);
    let (present, _) = ctx::existing(&mut target, &tables, "").await?;
    if present > 0 {
        let rows = ctx::row_count(&mut target, &tables).await?;
        return Err(format!(
            "{to} already has {present} of the moved shards' tables ({}, ...; {rows} rows): the move would not be the only writer of them; drop them or choose another datasource",
            tables[0].sql()
        ));
    }
    use mysql_async::prelude::Queryable;
    let replicas: Vec<mysql_async::Row> = target
        .query("SHOW SLAVE HOSTS")
        .await
        .map_err(|e| format!("SHOW SLAVE HOSTS on {to}: {e}"))?;
    let logs_replicated: Option<u8> = target
        .query_first("SELECT @@log_slave_updates")
        .await
        .map_err(|e| e.to_string())?;
    if !replicas.is_empty() && logs_replicated != Some(1) {
        return Err(format!(
            "{to} has {} replica(s) and log_slave_updates = OFF: they would not get the changes it applies while catching up; turn it on first",
            replicas.len()
        ));
    }
    let st = servers::replica_status(&mut target).await?;
    if st.exists {
        return Err(format!(
            "{to} has a replication connection `{}` already (another move's?); finish that move (--finish) or remove it (STOP SLAVE '{0}'; RESET SLAVE '{0}' ALL)",
            servers::CONNECTION
        ));
    }
    let moves = Moves { table: moves_table };
    let mut mv = moves.insert(meta, &options.shards, &source, to).await?;
    // Its staging databases must be the move's own: one that exists is someone else's.
    let mut staging: Vec<String> = tables
        .iter()
        .map(|t| ctx::staging_database(&t.database, mv.id))
        .collect();
    staging.dedup();
    for db in &staging {
        let n: Option<u64> = target
            .exec_first(
                "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?",
                (db,),
            )
            .await
            .map_err(|e| e.to_string())?;
        if n.unwrap_or(0) > 0 {
            mv.step = Step::Aborted;
            mv.detail = Some(format!("{to} has a database {db} already"));
            moves.record(meta, &mv).await?;
            return Err(format!(
                "{to} has a database {db} already, the name this move would stage its copy under: rename or drop it, then move again"
            ));
        }
    }
    Ok(mv)
}

/// The steps from where the move stands to switched.
async fn steps(ctx: &mut Ctx<'_>, mut mv: Move) -> Result<(String, u8), String> {
    let started = std::time::Instant::now();
    let mut checked: Option<checksum::Comparison> = None;
    let mut copies = 0u32;
    loop {
        if ctx.stop.requested() && mv.step != Step::Fenced && mv.step.active() {
            return Ok((
                format!(
                    "move {}: stopped by a signal at step {}; rerun to go on, or --abort",
                    mv.id,
                    mv.step.name()
                ),
                NOT_FINISHED,
            ));
        }
        let result = match mv.step {
            Step::Copy if copies == MAX_COPIES => Err(format!(
                "the copy started {MAX_COPIES} times in this run and the target's replication broke each time: {}",
                mv.detail.as_deref().unwrap_or("")
            )),
            Step::Copy => {
                copies += 1;
                ctx.say(&format!(
                    "move {}: copying shards {} from {} to {}",
                    mv.id,
                    state::shards_text(&mv.shards),
                    mv.source,
                    mv.target
                ));
                let stop = ctx.stop.clone();
                match stop.unless(copy::copy(ctx)).await {
                    None => continue,
                    Some(copied) => copied.map(|(pos, rows)| {
                        mv.snapshot_pos = Some(pos);
                        mv.rows_copied = rows;
                        mv.step = Step::CatchUp;
                    }),
                }
            }
            Step::CatchUp => catch_up(ctx, &mut mv).await,
            Step::Verify => match verify(ctx, &mv).await {
                Ok(c) if c.differences.is_empty() => {
                    checked = Some(c);
                    mv.step = Step::CutOver;
                    Ok(())
                }
                Ok(c) => {
                    mv.detail = Some(format!("{} chunk(s) differ", c.differences.len()));
                    ctx.record(&mv).await?;
                    return Ok((
                        format!(
                            "move {}: the checksums differ; nothing was cut over (rerun to compare again, or --abort):\n  {}",
                            mv.id,
                            c.differences.join("\n  ")
                        ),
                        1,
                    ));
                }
                Err(e) => Err(e),
            },
            Step::CutOver => cutover::cut_over(ctx, &mut mv).await,
            Step::Fenced => cutover::resume_fenced(ctx, &mut mv).await,
            Step::Switched | Step::Finished | Step::Aborted => break,
        };
        if let Err(e) = result {
            mv.detail = Some(e.clone());
            let _ = ctx.record(&mv).await;
            return Ok((
                format!(
                    "move {}: stopped at step {}: {e}\nrerun `{} shards move --shards {} --to {}` to go on, or --abort",
                    mv.id,
                    mv.step.name(),
                    ctx.options.command,
                    state::shards_text(&mv.shards),
                    mv.target
                ),
                NOT_FINISHED,
            ));
        }
        if mv.step != Step::Copy {
            // A step done: what the last one noted is history.
            mv.detail = None;
        }
        ctx.record(&mv).await?;
        match mv.step {
            Step::CatchUp => failpoint("copied"),
            Step::Verify => failpoint("caught_up"),
            Step::CutOver => failpoint("verified"),
            _ => {}
        }
    }
    Ok((summary(&mv, checked, started), 0))
}

/// What a finished move says.
fn summary(
    mv: &Move,
    checked: Option<checksum::Comparison>,
    started: std::time::Instant,
) -> String {
    let mut out = format!(
        "move {}: shards {} moved from {} to {}: shard map version {} published; {} rows copied",
        mv.id,
        state::shards_text(&mv.shards),
        mv.source,
        mv.target,
        mv.map_version.unwrap_or(0),
        mv.rows_copied
    );
    if let Some(c) = checked {
        out.push_str(&format!(
            "; checksums equal ({} chunks, {} rows)",
            c.chunks, c.rows
        ));
    }
    if let Some(p) = mv.pause_ms {
        out.push_str(&format!("; writes paused {p} ms"));
    }
    out.push_str(&format!(
        "; {:.1} s.\nThe source keeps its tables as *{} until `shards move --shards {} --finish` (until then `--reverse` moves them back).",
        started.elapsed().as_secs_f64(),
        mv.suffix,
        state::shards_text(&mv.shards)
    ));
    out
}

/// Step 2: the target close behind the source; a broken replication starts the copy over.
async fn catch_up(ctx: &mut Ctx<'_>, mv: &mut Move) -> Result<(), String> {
    let give_up = std::time::Instant::now() + ctx.options.catch_up_timeout;
    loop {
        if let Err(e) = check_replica(ctx).await {
            ctx.say(&format!("{e}; the copy starts over"));
            mv.detail = Some(e);
            mv.step = Step::Copy;
            return Ok(());
        }
        let now = servers::master_status(&mut ctx.source).await?;
        let asked = std::time::Instant::now();
        if servers::has_applied(&mut ctx.target, &now, Duration::from_secs(1)).await? {
            mv.step = Step::Verify;
            return Ok(());
        }
        if asked.elapsed() < Duration::from_millis(500) {
            // Answered at once: the replication is not running (started above next round).
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        if std::time::Instant::now() > give_up {
            return Err("the target did not catch up within --catch-up-timeout".into());
        }
        if ctx.stop.requested() {
            return Ok(());
        }
        let st = servers::replica_status(&mut ctx.target).await?;
        ctx.say(&format!(
            "catching up: the target is {} s behind",
            st.behind.map_or("?".into(), |b| b.to_string())
        ));
    }
}

/// Step 3: chunk checksums at one position, then `verify`'s rules on the target's copy
/// (findings the source has too are the data's, not the move's).
async fn verify(ctx: &mut Ctx<'_>, mv: &Move) -> Result<checksum::Comparison, String> {
    let mut c = checksum::compare(ctx).await?;
    if !c.differences.is_empty() {
        return Ok(c);
    }
    ctx.say(&format!(
        "checksums equal: {} chunks, {} rows",
        c.chunks, c.rows
    ));
    let newest = crate::route::shard_map::newest(&mut ctx.meta, &ctx.map_table)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("the shard map table is empty")?;
    let mut moved = newest.clone();
    for s in mv.shards.clone() {
        moved.datasources[s as usize] = mv.target.clone();
    }
    let shards: Vec<u32> = mv.shards.clone().collect();
    let findings = |config: Config| {
        let shards = shards.clone();
        let terminal = ctx.options.terminal;
        async move {
            let options = crate::legacy::verify::VerifyOptions {
                scan: crate::legacy::ScanOptions {
                    scope: crate::legacy::Scope::new(&config, None, &shards)?,
                    page: 1000,
                    read_timeout: Duration::from_secs(60),
                    terminal,
                },
                report: None,
                recheck_after: Duration::from_secs(2),
            };
            let stop = crate::legacy::Stop::default();
            let outcome = crate::legacy::verify::verify(&config, &options, &stop).await?;
            match outcome.error {
                Some(e) => Err(format!("verify could not finish: {e}")),
                None => Ok(outcome.report.total()),
            }
        }
    };
    // The target's copy as it stands: in its staging databases.
    let mut staged = moved.apply(ctx.config)?;
    for s in mv.shards.clone() {
        let shard = &mut staged.sharding.shards[s as usize];
        shard.database = ctx::staging_database(&shard.database, mv.id);
    }
    let on_target = findings(staged).await?;
    if on_target > 0 {
        let on_source = findings(newest.apply(ctx.config)?).await?;
        if on_target > on_source {
            c.differences.push(format!(
                "verify finds {on_target} problem(s) in the target's copy, {on_source} on the source (`routekey-proxy verify --shard ...` lists them)"
            ));
        } else {
            ctx.say(&format!(
                "verify finds {on_target} problem(s) in the copy, as on the source (the data's, not the move's)"
            ));
        }
    }
    Ok(c)
}

/// `--abort`: the move under way undone before its map is published.
async fn abort(ctx: &mut Ctx<'_>, mut mv: Move) -> Result<(String, u8), String> {
    if mv.step == Step::Fenced {
        if cutover::is_published(ctx, &mv).await? {
            return Err(format!(
                "move {}: its shard map version is published; the target serves the shards: move them back with --reverse",
                mv.id
            ));
        }
        let (placed, _) = ctx::existing(&mut ctx.target, &ctx.tables, "").await?;
        if placed > 0 {
            // A proxy on an old map that routes the shards to the target (a move back) may
            // have written there since: dropping the copy would lose those writes.
            return Err(format!(
                "move {}: the copy is in place on {} already (a run stopped between placing it and publishing the map): only going on is safe; rerun the move",
                mv.id, mv.target
            ));
        }
        let (renamed, _) = ctx::existing(&mut ctx.source, &ctx.tables, &mv.suffix).await?;
        if renamed == ctx.tables.len() {
            cutover::undo_fence(ctx, &mut mv, "--abort").await?;
        } else if renamed > 0 {
            return Err(format!(
                "{renamed} of {} moved tables are renamed on the source: a person must look",
                ctx.tables.len()
            ));
        }
    }
    servers::forget_replication(&mut ctx.target).await?;
    use mysql_async::prelude::Queryable;
    for db in ctx.staging_databases() {
        ctx.target
            .query_drop(format!(
                "DROP DATABASE IF EXISTS {}",
                crate::sql::quote_ident(&db)
            ))
            .await
            .map_err(|e| format!("dropping the target's staging database {db}: {e}"))?;
    }
    mv.step = Step::Aborted;
    mv.detail = None;
    ctx.record(&mv).await?;
    Ok((
        format!(
            "move {}: aborted; shards {} stay on {}, the target's copy is dropped",
            mv.id,
            state::shards_text(&mv.shards),
            mv.source
        ),
        0,
    ))
}

/// `--finish`: the renamed source tables of the switched moves of these shards dropped.
async fn finish(
    config: &Config,
    options: &MoveOptions,
    meta: &mut mysql_async::Conn,
    moves_table: &str,
) -> Result<(String, u8), String> {
    use mysql_async::prelude::Queryable;
    let moves = Moves { table: moves_table };
    let done: Vec<Move> = moves
        .switched(meta)
        .await?
        .into_iter()
        .filter(|m| m.shards == options.shards)
        .collect();
    if done.is_empty() {
        return Err(format!(
            "no switched move of shards {} to finish",
            state::shards_text(&options.shards)
        ));
    }
    let mut lines = Vec::new();
    for mut mv in done {
        let ds = &config.datasources[datasource_index(config, &mv.source)?];
        let (mut source, _) = servers::primary(ds, options.connect_timeout).await?;
        let tables = moved_tables(config, &mv.shards);
        for t in &tables {
            source
                .query_drop(format!(
                    "DROP TABLE IF EXISTS {}",
                    t.renamed_sql(&mv.suffix)
                ))
                .await
                .map_err(|e| {
                    format!(
                        "dropping {} on {}: {e}",
                        t.renamed_sql(&mv.suffix),
                        mv.source
                    )
                })?;
        }
        // A switched move's target may still hold its stopped replication connection (its
        // removal after the switch failed).
        let target = &config.datasources[datasource_index(config, &mv.target)?];
        let (mut target, _) = servers::primary(target, options.connect_timeout).await?;
        servers::forget_replication(&mut target).await?;
        mv.step = Step::Finished;
        mv.detail = None;
        moves.record(meta, &mv).await?;
        lines.push(format!(
            "move {}: dropped {} table(s) *{} on {}",
            mv.id,
            tables.len(),
            mv.suffix,
            mv.source
        ));
    }
    Ok((lines.join("\n"), 0))
}

/// `shards status`: the newest shard map version and the last moves.
///
/// # Errors
/// The meta datasource did not answer.
pub async fn status(config: &Config, connect_timeout: Duration) -> Result<String, String> {
    let (mut meta, map_table, moves_table) = meta_connection(config, connect_timeout).await?;
    let newest = newest_if_any(&mut meta, &map_table).await?;
    let mut out = match newest {
        Some(map) => format!("shard map version {}: {}\n", map.version, map.describe()),
        None => format!(
            "shard map table empty or missing: the configuration's ranges ({}) are version 1 once a proxy or a move seeds it\n",
            ShardMap::of_config(config, 1).describe()
        ),
    };
    let recent = Moves {
        table: &moves_table,
    }
    .recent(&mut meta, 10)
    .await
    .unwrap_or_default();
    for m in recent {
        out.push_str(&format!(
            "move {}: shards {} {} -> {}: {}{}{}{}\n",
            m.id,
            state::shards_text(&m.shards),
            m.source,
            m.target,
            m.step.name(),
            m.map_version
                .filter(|_| matches!(m.step, Step::Switched | Step::Finished | Step::Fenced))
                .map_or(String::new(), |v| format!(", map version {v}")),
            m.pause_ms
                .map_or(String::new(), |p| format!(", writes paused {p} ms")),
            m.detail
                .as_deref()
                .map_or(String::new(), |d| format!(" ({d})")),
        ));
    }
    Ok(out)
}

/// `config` with the shard map table's newest version applied (as the proxies route), for
/// the tools that read the shards (`verify`, `index backfill`); `config` itself when the
/// table does not exist yet.
///
/// # Errors
/// The meta datasource did not answer, or the newest version names a datasource the
/// configuration lacks.
pub async fn placed(config: &Config) -> Result<Config, String> {
    let (mut meta, map_table, _) = meta_connection(config, Duration::from_secs(10)).await?;
    match newest_if_any(&mut meta, &map_table).await? {
        Some(map) => map.apply(config),
        None => Ok(config.clone()),
    }
}
