//! Operator commands of the binary: `check-config` and `decode` as functions that return
//! text (the binary prints it); `verify` and `index backfill` run on a runtime of their own
//! and return their exit status.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::config::Config;

/// A short summary of a valid configuration.
pub fn config_summary(c: &Config) -> String {
    let mut out = format!(
        "configuration is valid: listen {}, {} datasource(s), {} channel(s), {} shards, {} binding table(s), logical database `{}`\n",
        listen_summary(&c.server),
        c.datasources.len(),
        c.channels.len(),
        c.sharding.shards.len(),
        c.sharding.binding_tables.len(),
        c.sharding.logical_database
    );
    for ch in &c.channels {
        let last = ch.base_shard + c.sharding.shards_per_channel - 1;
        let mut homes: Vec<&str> = (ch.base_shard..=last)
            .map(|s| {
                c.datasource(c.sharding.shards[s as usize].datasource)
                    .name
                    .as_str()
            })
            .collect();
        homes.dedup();
        out.push_str(&format!(
            "  {:<16} code {:>2}  shards {}-{} on {}  route key since {}\n",
            ch.name,
            ch.code,
            ch.base_shard,
            last,
            homes.join(", "),
            humantime::format_rfc3339_millis(
                UNIX_EPOCH + std::time::Duration::from_millis(ch.route_key_since_ms)
            )
        ));
    }
    out.push_str(
        "  (the placement above is the file's: once the shard map table is seeded, it decides; `routekey-proxy shards status` prints it)\n",
    );
    let (on, off): (Vec<_>, Vec<_>) = c
        .channels
        .iter()
        .enumerate()
        .partition(|(i, _)| c.issuance.route_key_channels[*i]);
    let names = |v: Vec<(usize, &crate::config::Channel)>| {
        v.into_iter()
            .map(|(_, ch)| ch.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    out.push_str(&format!(
        "issuance: route-key ids for [{}], classic ids for [{}]; {} worker ids leased from {}.{} (ttl {:?}); admin HTTP on {}{}\n",
        names(on),
        names(off),
        1u64 << c.layout.worker_bits(),
        c.index.database,
        c.issuance.lease_table,
        c.issuance.lease_ttl,
        c.admin.listen,
        if crate::config::Admin::needs_token(c.admin.listen) {
            " (POST /v1/order-ids asks for the bearer token of admin.token_file)"
        } else {
            ""
        },
    ));
    out.trim_end().to_owned()
}

/// The fields of an order id, its channel and shard, or why it does not decode.
pub fn decode(c: &Config, text: &str) -> Result<String, String> {
    let id: u64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not an unsigned 64-bit decimal order id"))?;
    let decoder = c.route_key_decoder();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let f = c.layout.fields(id);
    let ts = c.layout.unix_ms(id);
    let time = UNIX_EPOCH
        .checked_add(std::time::Duration::from_millis(ts))
        .map(|t| humantime::format_rfc3339_millis(t).to_string())
        .unwrap_or_else(|| "out of range".into());
    let mut out = format!(
        "order id   {id}\ntimestamp  {} ms since epoch = {time}\nworker     {}\nroute key  {}\nsequence   {}\n",
        f.timestamp, f.worker, f.route_key, f.sequence
    );
    match decoder.decode(id, now) {
        Ok(ch) => {
            let shard = c.shard_of(ch, id);
            let s = &c.sharding.shards[shard as usize];
            out.push_str(&format!(
                "channel    {} (decoded from the route key)\nshard      {shard} on {}: {}.{}",
                c.channel(ch).name,
                c.datasource(s.datasource).name,
                s.database,
                s.tables.join(", ")
            ));
        }
        Err(reason) => {
            let why = match reason {
                crate::id::DecodeFailure::NoCode => "route key 0: issued without a region".to_owned(),
                crate::id::DecodeFailure::UnassignedCode(code) => format!("route key {code} is assigned to no channel"),
                crate::id::DecodeFailure::BeforeRouteKeySince => {
                    "its timestamp is before the route_key_since of the channel its code names: a legacy id".to_owned()
                }
                crate::id::DecodeFailure::InFuture => "its timestamp lies in the future".to_owned(),
            };
            out.push_str(&format!(
                "channel    not decodable ({}): {why}; the proxy resolves it through the index table",
                reason.label()
            ));
        }
    }
    Ok(out)
}

/// Runs `verify` to its end (or Ctrl-C), prints the summary on stdout and returns the exit
/// status (0 nothing wrong, 1 findings, 2 the scan could not finish).
///
/// # Errors
/// The run could not start (a report file that cannot be created, no runtime).
pub fn run_verify(
    config: &Config,
    options: &crate::legacy::verify::VerifyOptions,
) -> Result<u8, String> {
    run_to_end(|stop| async move {
        let config = &crate::moves::placed(config).await?;
        let outcome = crate::legacy::verify::verify(config, options, &stop).await?;
        Ok((outcome.summary(&options.scan.scope), outcome.exit_code()))
    })
}

/// Runs `index backfill` to its end (or Ctrl-C, saving its checkpoint), prints the summary
/// on stdout and returns the exit status (0 done, 1 rows left to a person, 2 not finished).
///
/// # Errors
/// The run could not start (see [`crate::legacy::backfill::backfill`]).
pub fn run_backfill(
    config: &Config,
    options: &crate::legacy::backfill::BackfillOptions,
) -> Result<u8, String> {
    run_to_end(|stop| async move {
        let outcome =
            crate::legacy::backfill::backfill(&crate::moves::placed(config).await?, options, &stop)
                .await?;
        Ok((outcome.summary(options), outcome.exit_code()))
    })
}

/// Runs `shards move` to its end, prints the summary on stdout and returns the exit status
/// (0 done, 1 the checksums differ, 3 not finished: rerun to go on; 2, from the caller,
/// when it could not start). Ctrl-C or SIGTERM stop
/// it at the next safe point (never with the fence standing); a rerun goes on.
///
/// # Errors
/// The move could not start (see [`crate::moves::run`]).
pub fn run_shards_move(config: &Config, options: &crate::moves::MoveOptions) -> Result<u8, String> {
    run_to_end(|stop| async move { crate::moves::run(config, options, stop).await })
}

/// Prints `shards status` (the newest shard map version and the last moves); exit 0.
///
/// # Errors
/// The meta datasource did not answer.
pub fn run_shards_status(config: &Config) -> Result<u8, String> {
    run_to_end(|_stop| async move {
        let text = crate::moves::status(config, std::time::Duration::from_secs(10)).await?;
        Ok((text, 0))
    })
}

/// Runs a tool on a runtime of its own, stopped by Ctrl-C or SIGTERM; prints the summary it
/// returns and returns its exit status.
fn run_to_end<F, Fut>(run: F) -> Result<u8, String>
where
    F: FnOnce(std::sync::Arc<crate::legacy::Stop>) -> Fut,
    Fut: std::future::Future<Output = Result<(String, u8), String>>,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let (summary, status) = run(stop_on_ctrl_c()).await?;
        // A closed stdout (`| head`) is not an error of the tool.
        use std::io::Write;
        let _ = writeln!(std::io::stdout(), "{}", summary.trim_end());
        Ok(status)
    })
}

/// A stop the first Ctrl-C (SIGINT) or SIGTERM asks for, so a run stops between two order
/// ids with its report and checkpoint written; a second signal ends the process at once
/// (status 130).
fn stop_on_ctrl_c() -> std::sync::Arc<crate::legacy::Stop> {
    use tokio::signal::unix::{SignalKind, signal};
    let stop = std::sync::Arc::new(crate::legacy::Stop::default());
    let flag = stop.clone();
    tokio::spawn(async move {
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            return;
        };
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        eprintln!("stopping at the next safe point (Ctrl-C again to abort at once)");
        flag.request();
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        std::process::exit(130);
    });
    stop
}

/// `127.0.0.1:3307`, `/run/routekey/mysql.sock`, or both.
fn listen_summary(server: &crate::config::ServerConfig) -> String {
    let tcp = server.listen.map(|a| a.to_string());
    let socket = server.socket.as_ref().map(|s| s.path.display().to_string());
    [tcp, socket]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" and ")
}
