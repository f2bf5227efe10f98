//! The process around the proxy (SPEC §7): binds the MySQL and admin listeners, serves
//! until a drain ends, and turns signals and file changes into drains and reloads.
//!
//! - SIGTERM or SIGINT: drain ([`crate::server::serve`]); a second one exits at once
//!   (status 130 for SIGINT, 143 for SIGTERM).
//! - SIGHUP, or a change in the configuration file's directory (a Kubernetes ConfigMap is
//!   swapped through a `..data` symlink, so the directory is watched, not the file): the
//!   file is read again, environment overrides and command-line flags applied, validated,
//!   and put in force by [`Proxy::reload`]; a file that does not validate leaves the
//!   running configuration as it is (logged and counted).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};

use crate::config::Config;
use crate::proxy::Proxy;

/// Changes to the running configuration that the command line makes (its flags win over
/// the file and the environment, at start and at every reload).
pub type Flags = Arc<dyn Fn(&mut Config) -> Result<(), String> + Send + Sync>;

/// How long file events are gathered before one reload (editors write in several steps).
const SETTLE: Duration = Duration::from_millis(300);

/// Loads the configuration at `path` with the environment's overrides and `flags`.
pub fn load(path: &Path, flags: &Flags) -> Result<Config, String> {
    let mut config = Config::load(path).map_err(|e| e.to_string())?;
    flags(&mut config)?;
    // A flag may have moved the admin port off loopback.
    config.admin.check()?;
    Ok(config)
}

/// Serves until a drain ends: the MySQL listener, the admin port, signals, reloads.
pub async fn run(path: PathBuf, config: Config, flags: Flags) -> Result<(), String> {
    crate::access::tls::ClientSecurity::load(&config.server)?;
    let listeners = bind(&config.server).await?;
    let admin = tokio::net::TcpListener::bind(config.admin.listen)
        .await
        .map_err(|e| {
            format!(
                "cannot listen on {} (admin.listen): {e}",
                config.admin.listen
            )
        })?;
    tracing::info!(
        address = ?config.server.listen,
        socket = ?config.server.socket.as_ref().map(|s| &s.path),
        admin = %config.admin.listen,
        overrides = ?config.overrides,
        "routekey-proxy serving MySQL clients"
    );
    let proxy = Proxy::new(config);
    tokio::spawn(signals(proxy.clone(), path.clone(), flags.clone()));
    let _watch = watch(proxy.clone(), path, flags)
        .map_err(|e| tracing::warn!(error = %e, "cannot watch the configuration file; reload with SIGHUP"))
        .ok();
    let (admin_stop, admin_stopped) = tokio::sync::oneshot::channel::<()>();
    let admin = tokio::spawn(crate::admin::serve(admin, proxy.clone(), async {
        let _ = admin_stopped.await;
    }));
    let served = crate::server::serve(listeners, proxy, std::future::pending()).await;
    let _ = admin_stop.send(());
    if let Ok(Err(e)) = admin.await {
        tracing::warn!(error = %e, "admin port");
    }
    served.map_err(|e| e.to_string())
}

/// The MySQL listeners `server.listen` and `server.socket` name.
async fn bind(server: &crate::config::ServerConfig) -> Result<crate::server::Listeners, String> {
    let mut listeners = crate::server::Listeners::default();
    if let Some(address) = server.listen {
        let tcp = tokio::net::TcpListener::bind(address)
            .await
            .map_err(|e| format!("cannot listen on {address}: {e}"))?;
        listeners.tcp = Some(tcp);
    }
    if let Some(socket) = &server.socket {
        let unix = crate::server::SocketListener::bind(socket)
            .await
            .map_err(|e| {
                format!(
                    "cannot listen on {} (server.socket): {e}",
                    socket.path.display()
                )
            })?;
        listeners.socket = Some(unix);
    }
    Ok(listeners)
}

async fn signals(proxy: Arc<Proxy>, path: PathBuf, flags: Flags) {
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        tracing::error!("cannot install signal handlers");
        return;
    };
    let mut draining = false;
    loop {
        let status = tokio::select! {
            _ = term.recv() => 143,
            _ = int.recv() => 130,
            _ = hup.recv() => {
                reload(&proxy, &path, &flags, "SIGHUP");
                continue;
            }
        };
        if draining {
            tracing::warn!("second signal: exiting without waiting for the drain");
            std::process::exit(status);
        }
        draining = true;
        tracing::info!("signal received: draining (a second signal exits at once)");
        proxy.request_drain();
    }
}

/// Reads, validates and applies the configuration file; logs and counts the outcome.
pub fn reload(proxy: &Proxy, path: &Path, flags: &Flags, why: &str) {
    let result = match load(path, flags) {
        Ok(config) => proxy.reload(config),
        Err(e) => {
            proxy.metrics.count_reload(false);
            Err(e)
        }
    };
    match result {
        Ok(generation) => tracing::info!(generation, why, "configuration reloaded"),
        Err(e) => tracing::warn!(
            error = %e,
            why,
            "configuration not reloaded; the running configuration stays in force"
        ),
    }
}

/// The files a reload reads besides the configuration: the client TLS certificate and
/// key and the RSA key, as the configuration at start names them.
fn material_files(config: &Config) -> Vec<PathBuf> {
    let server = &config.server;
    let tls = server
        .tls
        .iter()
        .flat_map(|t| [t.cert_file.clone(), t.key_file.clone()]);
    tls.chain(server.rsa_private_key_file.clone()).collect()
}

/// Watches the directories of `path` and of the TLS and RSA files; a change to one of
/// their entries (or a `..data` symlink swap) reloads the configuration, and with it those
/// files, once they settle. The watcher stops when the returned value is dropped.
fn watch(proxy: Arc<Proxy>, path: PathBuf, flags: Flags) -> notify::Result<impl Drop> {
    use notify::Watcher;
    let dir_of = |p: &Path| {
        p.parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf()
    };
    let files: Vec<PathBuf> = std::iter::once(path.clone())
        .chain(material_files(&proxy.runtime().config))
        .collect();
    let names: Vec<_> = files
        .iter()
        .filter_map(|f| f.file_name().map(|n| n.to_owned()))
        .collect();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        let ours = event.paths.iter().any(|p| {
            p.file_name()
                .is_some_and(|f| f == "..data" || names.iter().any(|n| n == f))
        });
        if ours && !matches!(event.kind, notify::EventKind::Access(_)) {
            let _ = tx.send(());
        }
    })?;
    let mut dirs: Vec<PathBuf> = files.iter().map(|f| dir_of(f)).collect();
    dirs.sort();
    dirs.dedup();
    for dir in &dirs {
        watcher.watch(dir, notify::RecursiveMode::NonRecursive)?;
    }
    tokio::spawn(async move {
        let read_all = || {
            files
                .iter()
                .map(|f| std::fs::read(f).ok())
                .collect::<Vec<_>>()
        };
        let mut last = read_all();
        while rx.recv().await.is_some() {
            tokio::time::sleep(SETTLE).await;
            while rx.try_recv().is_ok() {}
            let now = read_all();
            if now[0].is_none() || now == last {
                continue;
            }
            last = now;
            reload(&proxy, &path, &flags, "file changed");
        }
    });
    Ok(watcher)
}
