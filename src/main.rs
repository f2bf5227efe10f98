//! The `routekey-proxy` command: parses the command line and calls the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use routekey_proxy::config::Config;
use routekey_proxy::{process, tools};

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
        /// The file to check.
        file: PathBuf,
    },
    /// Print the fields of an order id, its channel and shard, or why it does not decode.
    Decode {
        /// The order id (unsigned 64-bit decimal).
        id: String,
    },
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
        Cmd::CheckConfig { file } => Config::load(&file)
            .map(|c| {
                println!("{}", tools::config_summary(&c));
            })
            .map_err(|e| e.to_string()),
        Cmd::Decode { id } => {
            load(&cli.config).and_then(|c| tools::decode(&c, &id).map(|text| println!("{text}")))
        }
        Cmd::Serve => {
            let (listen, admin_listen) = (cli.listen.clone(), cli.admin_listen.clone());
            let flags: process::Flags = std::sync::Arc::new(move |c: &mut Config| {
                if let Some(listen) = &listen {
                    c.server.listen = listen.parse().map_err(|_| {
                        format!("--listen: `{listen}` is not an address with a port")
                    })?;
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

fn load(path: &std::path::Path) -> Result<Config, String> {
    Config::load(path).map_err(|e| format!("{e} (choose the file with --config FILE)"))
}

fn serve(path: PathBuf, config: Config, flags: process::Flags) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(process::run(path, config, flags))
}
