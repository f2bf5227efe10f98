//! The listener: `run(listener, config, shutdown)` serves clients until `shutdown`
//! resolves, then drains. Tests start it in-process on `127.0.0.1:0`.

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::config::Config;
use crate::proxy::{KILL_GRACE, Proxy};

/// Serves MySQL clients on `listener` until `shutdown` completes; then stops accepting and
/// ends the sessions still open.
pub async fn run(
    listener: TcpListener,
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
    listener: TcpListener,
    proxy: Arc<Proxy>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let mut sessions = JoinSet::new();
    let issuer = proxy.issuer.clone();
    tokio::spawn(async move { issuer.prepare().await });
    tokio::pin!(shutdown);
    let accept = |sessions: &mut JoinSet<()>, accepted: std::io::Result<_>| match accepted {
        Ok((tcp, peer)) => {
            sessions.spawn(crate::frontend::serve(proxy.clone(), tcp, peer));
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
            .map(|h| crate::frontend::kill_running_statement(h));
        let _ = tokio::time::timeout(KILL_GRACE, futures_util::future::join_all(kills)).await;
        // Killed sessions reset their backend connections (rolling back) and end; any
        // still stuck are aborted, and their connections closed rather than pooled.
        let _ = tokio::time::timeout(KILL_GRACE, async {
            while sessions.join_next().await.is_some() {}
        })
        .await;
        sessions.shutdown().await;
    }
    proxy.issuer.release().await;
    tracing::info!("drained");
    Ok(())
}
