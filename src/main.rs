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
    #[arg(long, global = true)]
    listen: Option<String>,
    /// Admin HTTP listen address, overriding `admin.listen`.
    #[arg(long, global = true)]
    admin_listen: Option<String>,
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
            if let Some(listen) = cli.admin_listen {
                c.admin.listen = listen.parse().map_err(|_| {
                    format!("--admin-listen: `{listen}` is not an address with a port")
                })?;
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
        let admin = tokio::net::TcpListener::bind(config.admin.listen)
            .await
            .map_err(|e| {
                format!(
                    "cannot listen on {} (admin.listen): {e}",
                    config.admin.listen
                )
            })?;
        tracing::info!(
            address = %config.server.listen,
            admin = %config.admin.listen,
            "routekey-proxy serving MySQL clients"
        );
        let (stop, stopped) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            shutdown_signal().await;
            tracing::info!("shutting down");
            let _ = stop.send(true);
        });
        let until_stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        let proxy = routekey_proxy::server::Proxy::new(config);
        let admin = tokio::spawn(routekey_proxy::admin::serve(
            admin,
            proxy.clone(),
            until_stopped(stopped.clone()),
        ));
        let served = routekey_proxy::server::serve(listener, proxy, until_stopped(stopped)).await;
        if let Ok(Err(e)) = admin.await {
            tracing::warn!(error = %e, "admin port");
        }
        served.map_err(|e| e.to_string())
    })
}

/// Ctrl-C or SIGTERM (what Kubernetes sends a sidecar).
async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        Some(()) = async { match term.as_mut() { Some(t) => t.recv().await, None => std::future::pending().await } } => {}
    }
}
