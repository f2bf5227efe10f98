//! The frontend: a client connection from accept to close. [`serve`] runs the wire's
//! handshake and authentication (`wire::handshake`), starts the connection's session in the
//! engine, and runs the command loop: it reads one command at a time (so pipelined commands
//! are answered in order) and hands it to the engine ([`crate::engine::command`]).
//!
//! It knows no plan, pool or backend connection: everything a command does happens below,
//! in the engine.

use std::sync::Arc;

use crate::engine::command::{Next, protocol_command, welcome};
use crate::engine::session::Session;
use crate::proxy::Proxy;
use crate::wire::client::Client;
use crate::wire::handshake;
use crate::wire::stream::{ClientStream, Peer, Transport};

/// ER_CON_COUNT_ERROR: `server.max_connections` clients are served already.
const ER_CON_COUNT_ERROR: u16 = 1040;

/// Answers a client over `server.max_connections` with ER_CON_COUNT_ERROR in place of the
/// greeting (as MariaDB does) and closes the connection.
pub async fn refuse_connection(transport: ClientStream, peer: Peer, limit: usize) {
    use tokio::io::AsyncWriteExt;
    tracing::warn!(peer = %peer.name, limit, "too many connections: refused (server.max_connections)");
    let mut packet = vec![0, 0, 0, 0, 0xFF];
    packet.extend_from_slice(&ER_CON_COUNT_ERROR.to_le_bytes());
    // Before the handshake no capabilities are agreed: no SQL state marker, as MariaDB.
    packet.extend_from_slice(b"Too many connections");
    let len = u32::try_from(packet.len() - 4).expect("a short packet");
    packet[..3].copy_from_slice(&len.to_le_bytes()[..3]);
    let mut transport = transport;
    let write = async {
        transport.write_all(&packet).await?;
        transport.shutdown().await
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), write).await;
}

/// Serves one client connection until it quits or fails.
pub async fn serve(proxy: Arc<Proxy>, mut transport: ClientStream, peer: Peer) {
    if let Transport::Tcp(tcp) = transport.transport() {
        let _ = tcp.set_nodelay(true);
    }
    let counted = proxy.clone();
    let _connected = counted.metrics.client_connected();
    let id = proxy.next_connection_id();
    let runtime = proxy.runtime();
    transport.set_write_timeout(runtime.config.server.client_write_timeout);
    let limit = runtime.config.server.handshake_timeout;
    let version = proxy.server_version().await;
    let defaults = proxy.session_defaults().await;
    let greeting_status = crate::protocol::status::AUTOCOMMIT
        | defaults.as_ref().map_or(0, |d| {
            crate::protocol::status::sql_mode_flags(&String::from_utf8_lossy(&d.sql_mode))
        });
    let peer_text = peer.name.clone();
    let cx = handshake::Context {
        config: &runtime.config,
        security: &runtime.client_security,
        logins: &proxy.logins,
        server_version: &version,
        status: greeting_status,
        connection_id: id,
        peer: &peer_text,
    };
    let started = tokio::time::Instant::now();
    let hello = match tokio::time::timeout(limit, handshake::accept(transport, &cx)).await {
        Ok(Ok(Some(hello))) => hello,
        Ok(Ok(None)) => return,
        Ok(Err(e)) => {
            tracing::debug!(connection = id, error = %e, "handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(connection = id, peer = %peer.name, "handshake not finished in time");
            return;
        }
    };
    // The failed-login delay comes before anything that tells a right proof from a wrong
    // one, and outside the handshake timeout (an async sleep of this task alone).
    let user = hello.user().to_owned();
    let delay = proxy.logins.delay(peer.ip, &user);
    if !delay.is_zero() {
        tracing::debug!(user = %user, peer = %peer.name, ?delay, "recent failed logins: answering late");
        tokio::time::sleep(delay).await;
    }
    let left = limit.saturating_sub(started.elapsed());
    let login = match tokio::time::timeout(left, handshake::authenticate_client(hello, &cx)).await {
        Ok(Ok(login)) => login,
        Ok(Err(e)) => return abandoned(&proxy, &runtime.config, &user, &peer, &e.to_string()),
        Err(_) => {
            return abandoned(
                &proxy,
                &runtime.config,
                &user,
                &peer,
                "not finished in time",
            );
        }
    };
    let Some(login) = answer_login(&proxy, login, &peer, limit).await else {
        return;
    };
    let mut client = login.client;
    let collation = login.collation;
    let server_version = mariadb_version_number(&version);
    let mut session = Session::new(
        proxy.clone(),
        id,
        login.user,
        peer.host(),
        client.caps,
        collation,
        login.attributes,
    );
    session.connected_over(login.tls, server_version);
    client.stream.get_mut().set_session(session.handle());
    tracing::debug!(connection = id, user = %session.user(), "client connected");
    if !welcome(&mut session, &mut client, login.database.as_deref()).await {
        session.close().await;
        return;
    }
    serve_commands(&proxy, &mut session, &mut client, collation, id).await;
    session.close().await;
    tracing::debug!(connection = id, "client disconnected");
}

/// The command phase: reads and answers the client's commands until it quits, fails, is
/// killed, stays silent longer than its session's idle timeout
/// ([`Session::idle_timeout`]: the connection closes without a word, as MariaDB closes
/// it, and what the session held is released), or the proxy drains while it is not in a
/// transaction.
async fn serve_commands(
    proxy: &Proxy,
    session: &mut Session,
    client: &mut Client,
    collation: u8,
    id: u32,
) {
    loop {
        client.stream.reset_seq();
        let handle = session.handle();
        let idle = !session.in_transaction();
        if handle.killed() || idle && handle.draining() {
            break;
        }
        let limit = session.idle_timeout();
        handle.waits_for_command(limit);
        let read = tokio::select! {
            read = client.stream.read_packet() => read,
            () = handle.stop_signal(idle) => {
                if handle.idle_expired() && !handle.killed() {
                    tracing::info!(connection = id, user = %session.user(), ?limit, "client idle longer than the session's wait_timeout: disconnected, as the server would");
                    proxy.metrics.count_idle_timeout();
                    client.stream.get_ref().reset_on_close();
                }
                break;
            }
        };
        let packet = match read {
            Ok(Some(p)) => p,
            Ok(None) => break,
            Err(e) => {
                tracing::debug!(connection = id, error = %e, "client read failed");
                break;
            }
        };
        handle.command_starts();
        let next = protocol_command(session, client, &packet, collation).await;
        let flushed = client.flush().await;
        match (next, flushed) {
            (Ok(Next::Continue), Ok(())) => {}
            (Ok(Next::Quit), _) | (Err(_), _) | (_, Err(_)) => break,
        }
    }
}

/// A client that went away (or stalled) during authentication, after the handshake
/// response: a failed login, counted and logged as a refusal is. Otherwise a guesser could
/// read the caching_sha2_password fast path's answer (0x03 or 0x04) and hang up before
/// any failure counted.
fn abandoned(proxy: &Proxy, config: &crate::config::Config, user: &str, peer: &Peer, why: &str) {
    proxy.logins.failed(peer.ip, user);
    let known = config.user(user).is_some().then_some(user);
    proxy.metrics.count_login_failure(known);
    tracing::info!(user = %user, peer = %peer.name, reason = why, "login abandoned during authentication");
}

/// Tells the client whether it is in (the failed-login delay has been served before
/// authentication, in [`serve`]); counts and logs a refusal (never the password). `None`
/// when refused.
async fn answer_login(
    proxy: &Proxy,
    mut login: handshake::Login,
    peer: &Peer,
    limit: std::time::Duration,
) -> Option<handshake::Login> {
    let refusal = match std::mem::replace(&mut login.verdict, Ok(())) {
        Ok(()) => {
            proxy.logins.succeeded(peer.ip, &login.user);
            return Some(login);
        }
        Err(refusal) => refusal,
    };
    proxy.logins.failed(peer.ip, &login.user);
    let known = refusal.known_user.then_some(login.user.as_str());
    proxy.metrics.count_login_failure(known);
    tracing::info!(user = %login.user, peer = %peer.name, reason = refusal.reason, "login refused");
    let mut client = login.client;
    if client.error(&refusal.error).is_ok() {
        let _ = tokio::time::timeout(limit, client.flush()).await;
    }
    None
}

/// `10.11.19-MariaDB` (or `5.5.5-10.11.19-MariaDB`) as MariaDB numbers versions: 101119.
fn mariadb_version_number(version: &str) -> Option<u32> {
    let v = version.strip_prefix("5.5.5-").unwrap_or(version);
    let mut parts = v
        .split(|c: char| !c.is_ascii_digit())
        .filter(|p| !p.is_empty());
    let (major, minor, patch): (u32, u32, u32) = (
        parts.next()?.parse().ok()?,
        parts.next()?.parse().ok()?,
        parts.next()?.parse().ok()?,
    );
    Some(major * 10000 + minor * 100 + patch)
}
