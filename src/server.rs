//! The listeners: `run(listeners, config, shutdown)` serves clients on TCP and/or a Unix
//! socket until `shutdown` resolves, then drains. Tests start it in-process on
//! `127.0.0.1:0`.

use std::future::Future;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::net::{TcpListener, UnixListener};
use tokio::task::JoinSet;

use crate::config::{Config, UnixSocket};
use crate::proxy::{KILL_GRACE, Proxy};
use crate::wire::stream::{ClientStream, Peer, Transport};

/// Where clients connect: a TCP listener, a Unix socket listener, or both.
#[derive(Default)]
pub struct Listeners {
    /// `server.listen`.
    pub tcp: Option<TcpListener>,
    /// `server.socket`.
    pub socket: Option<SocketListener>,
}

impl From<TcpListener> for Listeners {
    fn from(tcp: TcpListener) -> Self {
        Self {
            tcp: Some(tcp),
            socket: None,
        }
    }
}

impl Listeners {
    /// The next client on either listener.
    async fn accept(&self) -> io::Result<(ClientStream, Peer)> {
        let tcp = async {
            match &self.tcp {
                Some(l) => l
                    .accept()
                    .await
                    .map(|(s, addr)| (ClientStream::new(Transport::Tcp(s)), Peer::tcp(addr))),
                None => std::future::pending().await,
            }
        };
        let socket = async {
            match &self.socket {
                Some(l) => l
                    .listener
                    .accept()
                    .await
                    .map(|(s, _)| (ClientStream::new(Transport::Unix(s)), Peer::local())),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            accepted = tcp => accepted,
            accepted = socket => accepted,
        }
    }
}

/// A Unix socket listener that owns its file: binding replaces a stale file (one no
/// process answers on) and refuses one in use; dropping it removes the file, unless another
/// file has taken its place since.
pub struct SocketListener {
    listener: UnixListener,
    path: PathBuf,
    /// (device, inode) of the file this listener created.
    file: (u64, u64),
}

impl SocketListener {
    /// Binds `socket.path` with `socket.mode`.
    ///
    /// # Errors
    /// The path is in use by a live server, is not a socket, or cannot be bound or
    /// given its mode.
    pub async fn bind(socket: &UnixSocket) -> io::Result<Self> {
        let path = socket.path.as_path();
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            if !meta.file_type().is_socket() {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    "the path exists and is not a socket",
                ));
            }
            if tokio::net::UnixStream::connect(path).await.is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    "another process serves this socket",
                ));
            }
            tracing::info!(path = %path.display(), "replacing a stale socket file");
            std::fs::remove_file(path)?;
        }
        let listener = UnixListener::bind(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(socket.mode))?;
        let meta = std::fs::metadata(path)?;
        Ok(Self {
            listener,
            path: path.to_owned(),
            file: (meta.dev(), meta.ino()),
        })
    }

    /// The socket file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SocketListener {
    fn drop(&mut self) {
        let ours =
            std::fs::symlink_metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == self.file);
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Serves MySQL clients on `listener` until `shutdown` completes; then stops accepting and
/// ends the sessions still open.
pub async fn run(
    listener: impl Into<Listeners>,
    config: Config,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let proxy = Proxy::new(config);
    serve(listener, proxy, shutdown).await
}

/// [`run`] with shared state built by the caller (tests read its counters).
///
/// Serves until `shutdown` completes or [`Proxy::request_drain`] is called, then drains:
/// the listener keeps accepting for `server.drain_delay`, then closes; sessions close at
/// their next command boundary outside a transaction (idle ones at once); at
/// `server.drain_timeout` after the drain began, the sessions left are killed (running
/// statements with `KILL QUERY`, open transactions rolled back by resetting or closing
/// their backend connections). Then the worker id lease is released.
pub async fn serve(
    listener: impl Into<Listeners>,
    proxy: Arc<Proxy>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let listener: Listeners = listener.into();
    let mut sessions = JoinSet::new();
    let issuer = proxy.issuer.clone();
    tokio::spawn(async move { issuer.prepare().await });
    let background = background_tasks(&proxy);
    tokio::pin!(shutdown);
    let accept = |sessions: &mut JoinSet<()>, accepted: std::io::Result<_>| match accepted {
        Ok((transport, peer)) => {
            let limit = proxy.runtime().config.server.max_connections;
            if sessions.len() >= limit {
                proxy.metrics.count_connection_refused();
                tokio::spawn(crate::frontend::refuse_connection(transport, peer, limit));
            } else {
                sessions.spawn(crate::frontend::serve(proxy.clone(), transport, peer));
            }
            None
        }
        Err(e) => {
            tracing::warn!(error = %e, "accept failed");
            Some(std::time::Duration::from_millis(50))
        }
    };
    loop {
        tokio::select! {
            accepted = listener.accept() => if let Some(pause) = accept(&mut sessions, accepted) {
                tokio::time::sleep(pause).await;
            },
            Some(_) = sessions.join_next(), if !sessions.is_empty() => {}
            () = &mut shutdown => break,
            () = proxy.drain_requested() => break,
        }
    }
    proxy.request_drain();
    let began = tokio::time::Instant::now();
    let runtime = proxy.runtime();
    let server = &runtime.config.server;
    tracing::info!(
        sessions = sessions.len(),
        delay = ?server.drain_delay,
        timeout = ?server.drain_timeout,
        "draining: not ready; running statements and open transactions may finish"
    );
    let far = began + std::time::Duration::from_secs(86_400 * 365);
    let listen_until = began
        .checked_add(server.drain_delay)
        .unwrap_or(far)
        .min(far);
    loop {
        tokio::select! {
            accepted = listener.accept() => if let Some(pause) = accept(&mut sessions, accepted) {
                tokio::time::sleep(pause).await;
            },
            Some(_) = sessions.join_next(), if !sessions.is_empty() => {}
            () = tokio::time::sleep_until(listen_until) => break,
        }
    }
    drop(listener);
    proxy.sessions.drain();
    let deadline = began
        .checked_add(server.drain_timeout)
        .unwrap_or(far)
        .min(far);
    loop {
        tokio::select! {
            joined = sessions.join_next() => if joined.is_none() { break },
            () = tokio::time::sleep_until(deadline) => break,
        }
    }
    if !sessions.is_empty() {
        close_the_rest(&proxy, &mut sessions).await;
    }
    for task in background {
        task.abort();
    }
    proxy.issuer.release().await;
    tracing::info!("drained");
    Ok(())
}

/// The tasks that run beside the sessions while the proxy serves: learning the datasources'
/// database names (for the scope check: now, then every minute), closing idle clients
/// past their `wait_timeout`, the XA resolver and following the shard map table. They hold the proxy weakly; the caller aborts them at the end.
fn background_tasks(proxy: &Arc<Proxy>) -> [tokio::task::JoinHandle<()>; 4] {
    // The datasources' database names, for the scope check: now, then every minute.
    let learner = Arc::downgrade(proxy);
    let learning = tokio::spawn(async move {
        while let Some(proxy) = learner.upgrade() {
            proxy.learn_server_databases().await;
            drop(proxy);
            tokio::time::sleep(crate::proxy::SERVER_DATABASES_REFRESH).await;
        }
    });
    // Idle clients past their wait_timeout, for as long as the proxy serves.
    let sweeper = Arc::downgrade(proxy);
    let sweeping = tokio::spawn(async move {
        let mut every = tokio::time::interval(crate::session_registry::IDLE_SWEEP);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            let Some(proxy) = sweeper.upgrade() else {
                return;
            };
            proxy.sessions.expire_idle();
        }
    });
    // The resolver of abandoned XA branches: a round now, then every resolve_interval.
    let resolver = Arc::downgrade(proxy);
    let resolving = tokio::spawn(async move {
        let mut state = crate::execute::resolver::Resolver::default();
        loop {
            let Some(proxy) = resolver.upgrade() else {
                return;
            };
            let rt = proxy.runtime();
            state
                .round(&rt.config, &rt.topology, &proxy.coordinator)
                .await;
            let pause = rt.config.transactions.resolve_interval;
            drop((rt, proxy));
            tokio::time::sleep(pause).await;
        }
    });
    // The shard map table: read now, then every shard_map.poll_interval.
    let follower = Arc::downgrade(proxy);
    let following = tokio::spawn(async move {
        let mut failing = false;
        loop {
            let Some(proxy) = follower.upgrade() else {
                return;
            };
            match proxy.refresh_shard_map().await {
                Ok(_) if failing => {
                    failing = false;
                    tracing::info!(
                        version = proxy.map_version(),
                        "the shard map table answers again"
                    );
                }
                Ok(_) => {}
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!(error = %e, version = proxy.map_version(), "the shard map table cannot be followed; the version in force stays (retrying every poll_interval)");
                }
                Err(_) => {}
            }
            let pause = proxy.runtime().config.shard_map.poll_interval;
            drop(proxy);
            tokio::time::sleep(pause).await;
        }
    });
    [learning, sweeping, resolving, following]
}

/// At the drain deadline: the sessions left are killed and, if still stuck after
/// [`KILL_GRACE`], aborted.
async fn close_the_rest(proxy: &Proxy, sessions: &mut JoinSet<()>) {
    tracing::warn!(
        sessions = sessions.len(),
        "drain deadline passed: closing the sessions left; their open transactions roll back"
    );
    // Every running statement is killed at once, all within one bound (a backend that
    // stopped answering must not stretch the drain session by session).
    let handles = proxy.sessions.all();
    for handle in &handles {
        handle.kill();
    }
    let kills = handles
        .iter()
        .map(|h| crate::engine::kill_running_statement(h));
    let _ = tokio::time::timeout(KILL_GRACE, futures_util::future::join_all(kills)).await;
    // Killed sessions reset their backend connections (rolling back) and end; any
    // still stuck are aborted, and their connections closed rather than pooled.
    let _ = tokio::time::timeout(KILL_GRACE, async {
        while sessions.join_next().await.is_some() {}
    })
    .await;
    sessions.shutdown().await;
}
