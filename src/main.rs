//! The `routekey-proxy` command: parses the command line and calls the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use routekey_proxy::config::Config;
use routekey_proxy::tools;

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
    #[arg(long)]
    listen: Option<String>,
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
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "routekey_proxy=info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let result = match cli.command.unwrap_or(Cmd::Serve) {
        Cmd::CheckConfig { file } => Config::load(&file)
            .map(|c| {
                println!("{}", tools::config_summary(&c));
            })
            .map_err(|e| e.to_string()),
        Cmd::Decode { id } => {
            load(&cli.config).and_then(|c| tools::decode(&c, &id).map(|text| println!("{text}")))
        }
        Cmd::Serve => load(&cli.config).and_then(|mut c| {
            if let Some(listen) = cli.listen {
                c.server.listen = listen
                    .parse()
                    .map_err(|_| format!("--listen: `{listen}` is not an address with a port"))?;
            }
            serve(c)
        }),
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

fn serve(config: Config) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(config.server.listen)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", config.server.listen))?;
        tracing::info!(address = %config.server.listen, "routekey-proxy serving MySQL clients");
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        routekey_proxy::server::run(listener, config, shutdown)
            .await
            .map_err(|e| e.to_string())
    })
}
