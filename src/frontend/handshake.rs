//! The server side of the MySQL handshake: greeting, capability negotiation, character set
//! check and mysql_native_password against the configured users, with a fresh scramble per
//! connection.

use std::collections::HashMap;

use mysql_common::constants::{CapabilityFlags, StatusFlags};
use mysql_common::io::ParseBuf;
use mysql_common::packets::{AuthPlugin, AuthSwitchRequest, HandshakePacket, HandshakeResponse};
use mysql_common::proto::MySerialize;
use mysql_common::scramble::scramble_native;
use rand::Rng;
use tokio::net::TcpStream;

use super::client::Client;
use crate::config::Config;
use crate::error::{ER_ACCESS_DENIED_ERROR, ER_UNKNOWN_CHARACTER_SET, ProxyError};
use crate::protocol::PacketStream;
use crate::sql::charset::{collation_names, decoding_for};

/// Collation id advertised in the greeting: utf8mb4_general_ci, what the backends use.
pub const SERVER_COLLATION: u8 = 45;

/// Capabilities the proxy offers. CLIENT_LONG_PASSWORD stays set so MariaDB clients do not
/// expect MariaDB-only extended capabilities; SESSION_TRACK is offered so clients read the
/// OK packet's info length-encoded (no session-state data is ever sent).
pub fn server_capabilities() -> CapabilityFlags {
    CapabilityFlags::CLIENT_LONG_PASSWORD
        | CapabilityFlags::CLIENT_FOUND_ROWS
        | CapabilityFlags::CLIENT_LONG_FLAG
        | CapabilityFlags::CLIENT_CONNECT_WITH_DB
        | CapabilityFlags::CLIENT_PROTOCOL_41
        | CapabilityFlags::CLIENT_INTERACTIVE
        | CapabilityFlags::CLIENT_IGNORE_SPACE
        | CapabilityFlags::CLIENT_IGNORE_SIGPIPE
        | CapabilityFlags::CLIENT_TRANSACTIONS
        | CapabilityFlags::CLIENT_SECURE_CONNECTION
        | CapabilityFlags::CLIENT_MULTI_STATEMENTS
        | CapabilityFlags::CLIENT_MULTI_RESULTS
        | CapabilityFlags::CLIENT_PS_MULTI_RESULTS
        | CapabilityFlags::CLIENT_PLUGIN_AUTH
        | CapabilityFlags::CLIENT_CONNECT_ATTRS
        | CapabilityFlags::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
        | CapabilityFlags::CLIENT_SESSION_TRACK
        | CapabilityFlags::CLIENT_DEPRECATE_EOF
}

/// A client that passed authentication.
pub struct Login {
    /// The connection, with the negotiated capabilities.
    pub client: Client,
    /// User name.
    pub user: String,
    /// Database asked for at connect.
    pub database: Option<String>,
    /// Handshake collation id.
    pub collation: u8,
    /// Connection attributes (`program_name`, ...).
    pub attributes: HashMap<String, String>,
}

/// What a client's handshake response (`Protocol::HandshakeResponse41`) says, read by
/// [`parse_response`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientHello {
    /// The capabilities the client asks for (not yet intersected with the server's).
    pub capabilities: CapabilityFlags,
    /// User name (invalid UTF-8 replaced).
    pub user: String,
    /// Database asked for at connect; `None` when absent or empty.
    pub database: Option<String>,
    /// Connection attributes (`program_name`, ...); empty when none were sent.
    pub attributes: HashMap<String, String>,
    /// Handshake collation id.
    pub collation: u8,
    /// The authentication response (the scramble for mysql_native_password).
    pub token: Vec<u8>,
    /// The client answered with mysql_native_password (or named no plugin); otherwise the
    /// proxy asks for it with an auth switch.
    pub native: bool,
}

/// Reads a client's handshake response payload (the packet after the greeting, without
/// its 4-byte header). `None` when it is not a handshake response mysql_common can read:
/// truncated, malformed, or a 32-byte SSL request.
pub fn parse_response(reply: &[u8]) -> Option<ClientHello> {
    let response: HandshakeResponse<'_> = ParseBuf(reply).parse(()).ok()?;
    Some(ClientHello {
        capabilities: response.capabilities(),
        user: String::from_utf8_lossy(response.user()).into_owned(),
        database: response
            .db_name()
            .filter(|d| !d.is_empty())
            .map(|d| String::from_utf8_lossy(d).into_owned()),
        attributes: response.connect_attributes().unwrap_or_default(),
        collation: response.collation(),
        token: response.scramble_buf().to_vec(),
        native: matches!(
            response.auth_plugin(),
            None | Some(AuthPlugin::MysqlNativePassword)
        ),
    })
}

/// A 20-byte scramble of printable characters (never NUL).
fn scramble() -> [u8; 20] {
    let mut rng = rand::rng();
    std::array::from_fn(|_| rng.random_range(33u8..=126))
}

fn native_token(nonce: &[u8], password: &str) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    scramble_native(nonce, password.as_bytes())
        .map(|s| s.to_vec())
        .unwrap_or_default()
}

/// Equal in time independent of where the inputs differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Runs the handshake. Returns `Ok(None)` when the client went away or was refused (the
/// error packet has been sent).
pub async fn accept(
    tcp: TcpStream,
    config: &Config,
    server_version: &str,
    connection_id: u32,
    peer: &str,
) -> Result<Option<Login>, ProxyError> {
    let mut stream = PacketStream::new(tcp, config.server.max_packet_size);
    let io = |e: std::io::Error| ProxyError::Io(format!("handshake: {e}"));
    let nonce = scramble();
    let mut part2 = nonce[8..].to_vec();
    part2.push(0);
    let greeting = HandshakePacket::new(
        10,
        server_version.as_bytes(),
        connection_id,
        nonce[..8].try_into().expect("8 bytes"),
        Some(part2),
        server_capabilities(),
        SERVER_COLLATION,
        StatusFlags::SERVER_STATUS_AUTOCOMMIT,
        Some(&b"mysql_native_password"[..]),
    );
    let mut buf = Vec::new();
    greeting.serialize(&mut buf);
    stream.write_packet(&buf).map_err(io)?;
    stream.flush().await.map_err(io)?;

    let Some(reply) = stream.read_packet().await.map_err(io)? else {
        return Ok(None);
    };
    let mut client = Client {
        stream,
        caps: server_capabilities(),
    };
    let refuse = |client: &mut Client, e: ProxyError| -> Result<Option<Login>, ProxyError> {
        client.error(&e)?;
        Ok(None)
    };
    let Some(hello) = parse_response(&reply) else {
        let ssl = reply.len() == 32;
        let message = if ssl {
            "routekey-proxy does not offer TLS on this port; connect without SSL (the sidecar listens on loopback)"
        } else {
            "Bad handshake"
        };
        client.error(&ProxyError::client(1043, b"08S01", message))?;
        client.flush().await?;
        return Ok(None);
    };
    client.caps = hello.capabilities & server_capabilities();
    let ClientHello {
        user,
        database,
        attributes,
        collation,
        mut token,
        native,
        ..
    } = hello;

    if let Some((charset, _)) = collation_names(collation) {
        if let Err(message) = decoding_for(&charset) {
            let result = refuse(
                &mut client,
                ProxyError::client(ER_UNKNOWN_CHARACTER_SET, b"42000", message),
            );
            client.flush().await?;
            return result;
        }
    }
    if !native {
        // Ask for mysql_native_password with the same scramble.
        let data = buf_with_nul(&nonce);
        let switch = AuthSwitchRequest::new(&b"mysql_native_password"[..], &data[..]);
        let mut out = Vec::new();
        switch.serialize(&mut out);
        client.packet(&out)?;
        client.flush().await?;
        let Some(answer) = client.stream.read_packet().await.map_err(io)? else {
            return Ok(None);
        };
        token = answer.to_vec();
    }
    let password_given = !token.is_empty();
    let accepted = config
        .user(&user)
        .is_some_and(|u| same(&token, &native_token(&nonce, &u.password)));
    if !accepted {
        let host = peer.rsplit_once(':').map_or(peer, |(h, _)| h);
        let result = refuse(
            &mut client,
            ProxyError::client(
                ER_ACCESS_DENIED_ERROR,
                b"28000",
                format!(
                    "Access denied for user '{user}'@'{host}' (using password: {})",
                    if password_given { "YES" } else { "NO" }
                ),
            ),
        );
        client.flush().await?;
        return result;
    }
    Ok(Some(Login {
        client,
        user,
        database,
        collation,
        attributes,
    }))
}

fn buf_with_nul(nonce: &[u8; 20]) -> Vec<u8> {
    let mut v = nonce.to_vec();
    v.push(0);
    v
}
