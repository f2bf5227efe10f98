//! The `routekey-proxy` command: parses the command line and calls the library.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use routekey_proxy::config::Config;
use routekey_proxy::{legacy, process, tools};

/// mimalloc: per-thread free lists without glibc's arena locks. Under sysbench the allocator
/// went from about 6% of the proxy's samples (glibc) to 3.6%, and user CPU per point select
/// at 16 clients from 10.3 to 8.7 µs (docs/performance.md, "Experiments").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A MySQL-protocol sharding proxy that routes order-table statements by the route key
/// embedded in order ids.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Cmd>,
    /// Configuration file (for `serve`, the default command).
    #[arg(long, short, default_value = "config/demo.toml", global = true)]
    config: PathBuf,
    /// Listen address, overriding `server.listen`.
    #[arg(long, global = true)]
    listen: Option<String>,
    /// Admin HTTP listen address, overriding `admin.listen`.
    #[arg(long, global = true)]
    admin_listen: Option<String>,
    /// Log format: `text` (for people) or `json` (one object per line, for collectors).
    /// The level comes from RUST_LOG (default `routekey_proxy=info`).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve MySQL clients (the default).
    Serve,
    /// Validate a configuration file and print a summary.
    CheckConfig {
        /// The file to check (default: the `--config` file).
        file: Option<PathBuf>,
    },
    /// Print the fields of an order id, its channel and shard, or why it does not decode.
    Decode {
        /// The order id (unsigned 64-bit decimal).
        id: String,
    },
    /// Check every row of every sharded table against the routing rules, and the index
    /// table against the shards (read-only). Exit 0: nothing wrong; 1: findings; 2: the scan
    /// could not finish.
    Verify {
        #[command(flatten)]
        scan: ScanArgs,
        /// Write every finding to FILE as JSON lines (kind, table, shard, order_id, detail).
        #[arg(long, value_name = "FILE")]
        report: Option<PathBuf>,
        /// Wait at least this long before checking a finding again (traffic moves on).
        #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
        recheck_after: Duration,
    },
    /// Index-table maintenance.
    Index {
        #[command(subcommand)]
        command: IndexCmd,
    },
    /// Where shards live: the versioned shard map, and moving shards to another datasource.
    Shards {
        #[command(subcommand)]
        command: ShardsCmd,
    },
}

#[derive(Subcommand)]
enum ShardsCmd {
    /// Move shards to another datasource while the applications keep writing: copy, catch
    /// up, verify, cut over (docs/operations.md, "Moving shards"). Resumable: run the same
    /// command again after a kill or an error to go on. Exit 0: done; 1: the checksums
    /// differ (nothing cut over); 2: refused (bad arguments or usage: nothing done); 3: not
    /// finished (rerun to go on).
    Move {
        /// The shards, `8-11` or `8`, all on one datasource.
        #[arg(long, value_parser = routekey_proxy::config::shard_map::parse_shard_range)]
        shards: std::ops::RangeInclusive<u32>,
        /// The datasource to move them to (defined in every proxy's configuration).
        #[arg(long, required_unless_present_any = ["abort", "finish", "reverse"])]
        to: Option<String>,
        /// Undo the move under way (before its shard map version is published).
        #[arg(long, conflicts_with_all = ["to", "finish", "reverse"])]
        abort: bool,
        /// Drop the source tables the switched moves of these shards kept (renamed).
        #[arg(long, conflicts_with_all = ["to", "reverse"])]
        finish: bool,
        /// Move the shards back where their last switched move took them from.
        #[arg(long, conflicts_with = "to")]
        reverse: bool,
        /// The longest writes to the moved shards may pause at the cut-over; a target
        /// further behind makes the cut-over wait and try again.
        #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
        max_pause: Duration,
        /// Give up catching up (or waiting for a cut-over moment) after this long; the move
        /// stays where it is.
        #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
        catch_up_timeout: Duration,
    },
    /// The newest shard map version and the last moves.
    Status,
}

#[derive(Subcommand)]
enum IndexCmd {
    /// Write the missing index rows of legacy orders (the row's channel, only where it
    /// matches the shard holding it), and with --prune-dangling delete index rows whose
    /// order no shard holds. Exit 0: done; 1: rows left to a person; 2: not finished.
    Backfill {
        #[command(flatten)]
        scan: ScanArgs,
        /// Count what would be written or pruned; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Resume from FILE and save progress to it (each row is written once).
        #[arg(long, value_name = "FILE")]
        checkpoint: Option<PathBuf>,
        /// Scan at most this many rows per second.
        #[arg(long, value_name = "N")]
        rows_per_second: Option<f64>,
        /// Delete index rows whose order no shard holds, when older than --min-age.
        #[arg(long)]
        prune_dangling: bool,
        /// Keep dangling index rows younger than this (their insert may be in flight).
        #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
        min_age: Duration,
        /// Write the rows left to a person to FILE as JSON lines.
        #[arg(long, value_name = "FILE")]
        report: Option<PathBuf>,
    },
}

/// Which shards a scan reads, and how.
#[derive(clap::Args)]
struct ScanArgs {
    /// Only the shards of this channel.
    #[arg(long)]
    channel: Option<String>,
    /// Only these shards (repeat or comma-separate).
    #[arg(long, value_delimiter = ',')]
    shard: Vec<u32>,
    /// Rows per keyset-paged read.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    page: u32,
    /// Give up (exit status 2) when a datasource takes longer than this to connect or to
    /// answer one read or write.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    read_timeout: Duration,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "routekey_proxy=info".into());
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Json => logs.json().flatten_event(true).init(),
        LogFormat::Text => logs
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
    }
    let result = match cli.command.unwrap_or(Cmd::Serve) {
        // The TLS certificate, key and RSA key are read too: `serve` would refuse to start
        // without them.
        Cmd::CheckConfig { file } => Config::load(file.as_deref().unwrap_or(&cli.config))
            .map_err(|e| e.to_string())
            .and_then(|c| {
                routekey_proxy::access::tls::ClientSecurity::load(&c.server)?;
                println!("{}", tools::config_summary(&c));
                Ok(())
            }),
        Cmd::Decode { id } => {
            load(&cli.config).and_then(|c| tools::decode(&c, &id).map(|text| println!("{text}")))
        }
        Cmd::Verify {
            scan,
            report,
            recheck_after,
        } => {
            return exit_status(load(&cli.config).and_then(|c| {
                let options = legacy::verify::VerifyOptions {
                    scan: scan.options(&c)?,
                    report,
                    recheck_after,
                };
                tools::run_verify(&c, &options)
            }));
        }
        Cmd::Index {
            command:
                IndexCmd::Backfill {
                    scan,
                    dry_run,
                    checkpoint,
                    rows_per_second,
                    prune_dangling,
                    min_age,
                    report,
                },
        } => {
            return exit_status(load(&cli.config).and_then(|c| {
                let options = legacy::backfill::BackfillOptions {
                    scan: scan.options(&c)?,
                    dry_run,
                    checkpoint,
                    rows_per_second,
                    prune_dangling,
                    min_age,
                    report,
                };
                tools::run_backfill(&c, &options)
            }));
        }
        Cmd::Shards { command } => {
            return exit_status(load(&cli.config).and_then(|c| match command {
                ShardsCmd::Status => tools::run_shards_status(&c),
                ShardsCmd::Move {
                    shards,
                    to,
                    abort,
                    finish,
                    reverse,
                    max_pause,
                    catch_up_timeout,
                } => {
                    let action = match (to, abort, finish, reverse) {
                        (_, true, _, _) => routekey_proxy::moves::Action::Abort,
                        (_, _, true, _) => routekey_proxy::moves::Action::Finish,
                        (_, _, _, true) => routekey_proxy::moves::Action::Reverse,
                        (Some(to), ..) => routekey_proxy::moves::Action::To(to),
                        (None, ..) => return Err("--to, --abort, --finish or --reverse".into()),
                    };
                    tools::run_shards_move(
                        &c,
                        &routekey_proxy::moves::MoveOptions {
                            shards,
                            action,
                            max_pause,
                            catch_up_timeout,
                            connect_timeout: Duration::from_secs(10),
                            terminal: std::io::IsTerminal::is_terminal(&std::io::stderr()),
                            command: format!("routekey-proxy -c {}", cli.config.display()),
                        },
                    )
                }
            }));
        }
        Cmd::Serve => {
            let (listen, admin_listen) = (cli.listen.clone(), cli.admin_listen.clone());
            let flags: process::Flags = std::sync::Arc::new(move |c: &mut Config| {
                if let Some(listen) = &listen {
                    c.server.listen = match listen.as_str() {
                        // No TCP listener, as `listen = ""`: the Unix socket only.
                        "" if c.server.socket.is_some() => None,
                        _ => Some(listen.parse().map_err(|_| {
                            format!("--listen: `{listen}` is not an address with a port (\"\" only with server.socket)")
                        })?),
                    };
                }
                if let Some(listen) = &admin_listen {
                    c.admin.listen = listen.parse().map_err(|_| {
                        format!("--admin-listen: `{listen}` is not an address with a port")
                    })?;
                }
                Ok(())
            });
            process::load(&cli.config, &flags)
                .map_err(|e| format!("{e} (choose the file with --config FILE)"))
                .and_then(|c| serve(cli.config.clone(), c, flags))
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("routekey-proxy: {message}");
            ExitCode::FAILURE
        }
    }
}

impl ScanArgs {
    /// The scan these arguments ask for, under `config`.
    fn options(self, config: &Config) -> Result<legacy::ScanOptions, String> {
        Ok(legacy::ScanOptions {
            scope: legacy::Scope::new(config, self.channel.as_deref(), &self.shard)?,
            page: self.page as usize,
            read_timeout: self.read_timeout,
            terminal: std::io::IsTerminal::is_terminal(&std::io::stderr()),
        })
    }
}

/// A tool's own exit status, or 2 with the message when it could not start.
fn exit_status(result: Result<u8, String>) -> ExitCode {
    match result {
        Ok(code) => ExitCode::from(code),
        Err(message) => {
            eprintln!("routekey-proxy: {message}");
            ExitCode::from(2)
        }
    }
}

fn load(path: &std::path::Path) -> Result<Config, String> {
    Config::load(path).map_err(|e| format!("{e} (choose the file with --config FILE)"))
}

fn serve(path: PathBuf, config: Config, flags: process::Flags) -> Result<(), String> {
    let threads = config.server.runtime_threads();
    tracing::info!(worker_threads = threads, "starting the runtime");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(process::run(path, config, flags))
}
