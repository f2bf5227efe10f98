//! The server side of the MySQL handshake: greeting, the TLS upgrade when the client asks
//! (an SSLRequest, then the TLS handshake, then the HandshakeResponse inside TLS),
//! capability negotiation, the character set check, and authentication with the user's
//! plugin (`mysql_native_password` or `caching_sha2_password`; a client that opens with the
//! other one gets an AuthSwitchRequest), with a fresh scramble per connection.
//!
//! [`accept`] reads the client's handshake response; [`authenticate_client`] checks its
//! proof and reads the rest of the exchange, but leaves the final answer (OK or ERR) to its
//! caller. Between the two the caller waits when failed logins of the (address, user) ask
//! for it ([`crate::access::Logins`]): nothing that tells a right proof from a wrong one (the
//! caching_sha2_password fast path's 0x03 or 0x04) is sent before that wait, and the wait
//! does not count against the handshake timeout.

use std::collections::HashMap;

use mysql_common::constants::{CapabilityFlags, StatusFlags};
use mysql_common::io::ParseBuf;
use mysql_common::packets::{AuthPlugin, AuthSwitchRequest, HandshakePacket, HandshakeResponse};
use mysql_common::proto::MySerialize;

use super::client::Client;
use super::stream::{ClientStream, TlsInfo, Transport};
use crate::access::tls::ClientSecurity;
use crate::access::{self, Logins};
use crate::config::{AuthPlugin as Plugin, Config, User};
use crate::error::{ER_ACCESS_DENIED_ERROR, ER_UNKNOWN_CHARACTER_SET, ProxyError};
use crate::protocol::PacketStream;
use crate::sql::charset::{collation_names, decoding_for};

/// Collation id advertised in the greeting: utf8mb4_general_ci, what the backends use.
pub const SERVER_COLLATION: u8 = 45;

/// The largest packet a client may send before it is authenticated, in bytes: a
/// handshake response (user, proof, database, plugin name, up to 64 KiB of connection
/// attributes as MySQL allows) or an authentication reply fits many times over, and an
/// unauthenticated client cannot make the proxy hold `server.max_packet_size` bytes.
pub const MAX_HANDSHAKE_PACKET: usize = 128 * 1024;

/// ER_HANDSHAKE_ERROR: a first packet that is neither a HandshakeResponse nor, with TLS
/// configured, an SSLRequest.
const ER_HANDSHAKE_ERROR: u16 = 1043;

/// Capabilities the proxy offers (CLIENT_SSL is added when TLS is configured).
/// CLIENT_LONG_PASSWORD stays set so MariaDB clients do not expect MariaDB-only extended
/// capabilities; SESSION_TRACK is offered so clients read the OK packet's info
/// length-encoded, and get the schema and system-variable changes a server tracks;
/// LOCAL_FILES so a client that enables it may `LOAD DATA LOCAL INFILE` (the proxy asks
/// for a file only in answer to that statement, by the name the statement gives).
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
        | CapabilityFlags::CLIENT_LOCAL_FILES
}

/// The plugin the greeting names (its scramble is computed for it by most clients).
const GREETING_PLUGIN: Plugin = Plugin::MysqlNativePassword;

/// What a handshake needs from the proxy.
pub struct Context<'a> {
    /// The configuration in force (users, limits).
    pub config: &'a Config,
    /// Its TLS certificate and RSA key.
    pub security: &'a ClientSecurity,
    /// The fast-path cache.
    pub logins: &'a Logins,
    /// The version string of the greeting.
    pub server_version: &'a str,
    /// The status flags of the greeting: a new session's, as the servers start one
    /// (`AUTOCOMMIT`, and the flags of their `sql_mode`: clients escape by them from the
    /// start).
    pub status: u16,
    /// The connection id of the greeting (what `KILL` takes).
    pub connection_id: u32,
    /// `ip:port` of the client (`localhost` on a Unix socket), for messages.
    pub peer: &'a str,
}

/// A client that finished the handshake, accepted or not yet told it is refused.
pub struct Login {
    /// The connection, with the negotiated capabilities.
    pub client: Client,
    /// User name as the client sent it.
    pub user: String,
    /// Database asked for at connect.
    pub database: Option<String>,
    /// Handshake collation id.
    pub collation: u8,
    /// Connection attributes (`program_name`, ...).
    pub attributes: HashMap<String, String>,
    /// The TLS parameters; `None` in clear text.
    pub tls: Option<TlsInfo>,
    /// `Ok` when the login is accepted; else the error to send and, for the log, why.
    pub verdict: Result<(), Refusal>,
}

/// A refused login.
pub struct Refusal {
    /// What the client is told (ER_ACCESS_DENIED_ERROR, as MySQL words it).
    pub error: ProxyError,
    /// Why, for the log (never the password).
    pub reason: &'static str,
    /// Whether the user name is a configured user's (metrics label).
    pub known_user: bool,
}

/// What a client's handshake response (`Protocol::HandshakeResponse41`) says, read by
/// [`parse_response`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientHello {
    /// The capabilities the client asks for (not yet intersected with the server's).
    pub caps: CapabilityFlags,
    /// User name (invalid UTF-8 replaced).
    pub user: String,
    /// Database asked for at connect; `None` when absent or empty.
    pub database: Option<String>,
    /// Connection attributes (`program_name`, ...); empty when none were sent.
    pub attributes: HashMap<String, String>,
    /// Handshake collation id.
    pub collation: u8,
    /// The authentication response of the plugin the client opened with.
    pub token: Vec<u8>,
    /// That plugin, when the proxy speaks it (none named counts as mysql_native_password);
    /// `None` for another plugin (the client is switched).
    pub plugin: Option<Plugin>,
}

/// A client whose handshake response has been read, not yet authenticated.
pub struct Hello {
    client: Client,
    nonce: [u8; 20],
    response: ClientHello,
}

impl Hello {
    /// The user name the client sent.
    pub fn user(&self) -> &str {
        &self.response.user
    }
}

/// Runs the handshake up to the client's handshake response (greeting, TLS upgrade,
/// character set check). Returns `Ok(None)` when the client went away or was refused
/// before authentication (bad packet, unknown character set; the error packet has been
/// sent).
///
/// TLS is offered on TCP only: a Unix socket is secure as it is (MySQL counts it so for
/// `require_tls`), and the greeting on it does not offer SSL.
pub async fn accept(
    transport: ClientStream,
    cx: &Context<'_>,
) -> Result<Option<Hello>, ProxyError> {
    let io = |e: std::io::Error| ProxyError::Io(format!("handshake: {e}"));
    let max_packet = cx.config.server.max_packet_size.min(MAX_HANDSHAKE_PACKET);
    let tcp = matches!(transport.transport(), Transport::Tcp(_));
    let mut stream = PacketStream::new(transport, max_packet);
    let nonce = access::scramble();
    let mut offered = server_capabilities();
    if tcp && cx.security.tls.is_some() {
        offered |= CapabilityFlags::CLIENT_SSL;
    }
    greet(&mut stream, cx, &nonce, offered).await.map_err(io)?;
    let Some(mut reply) = stream.read_packet_unbuffered().await.map_err(io)? else {
        return Ok(None);
    };
    if is_ssl_request(&reply) {
        let Some(acceptor) = cx.security.tls.clone().filter(|_| tcp) else {
            let message = "SSL connection requested, but this proxy has no TLS certificate (server.tls_cert_file); connect without SSL";
            return bad_handshake(stream, offered, message).await;
        };
        stream = stream
            .upgrade(|s| s.start_tls(acceptor))
            .await
            .map_err(|e| ProxyError::Io(format!("TLS handshake: {e}")))?;
        let Some(next) = stream.read_packet().await.map_err(io)? else {
            return Ok(None);
        };
        reply = next;
    }
    let Some(response) = parse_response(&reply) else {
        return bad_handshake(stream, offered, "Bad handshake").await;
    };
    let mut client = Client {
        stream,
        caps: response.caps & offered,
        renamed: Default::default(),
        held_back: None,
    };
    if let Some((charset, _)) = collation_names(response.collation) {
        if let Err(message) = decoding_for(&charset) {
            let e = ProxyError::client(ER_UNKNOWN_CHARACTER_SET, b"42000", message);
            client.error(&e)?;
            client.flush().await?;
            return Ok(None);
        }
    }
    Ok(Some(Hello {
        client,
        nonce,
        response,
    }))
}

/// Checks the proof of a client [`accept`] read with its user's plugin (switching the
/// client to it first, the caching_sha2_password exchange), then `require_tls`. The
/// verdict is in the returned [`Login`]; nothing final has been sent.
///
/// # Errors
/// [`ProxyError::ClientGone`] when the client goes away or breaks the exchange.
pub async fn authenticate_client(hello: Hello, cx: &Context<'_>) -> Result<Login, ProxyError> {
    let Hello {
        mut client,
        nonce,
        response,
    } = hello;
    let user = cx.config.user(&response.user);
    let verdict = authenticate(&mut client, cx, &nonce, user, &response).await?;
    let verdict = verdict.and_then(|()| match user {
        Some(u) if u.require_tls && !client.stream.get_ref().is_secure() => Err("TLS required"),
        _ => Ok(()),
    });
    let tls = client.stream.get_ref().tls_info();
    client
        .stream
        .set_max_packet(cx.config.server.max_packet_size);
    Ok(Login {
        verdict: verdict.map_err(|reason| Refusal {
            error: access_denied(&response.user, cx.peer, !response.token.is_empty()),
            reason,
            known_user: user.is_some(),
        }),
        client,
        user: response.user,
        database: response.database,
        collation: response.collation,
        attributes: response.attributes,
        tls,
    })
}

async fn greet(
    stream: &mut PacketStream<ClientStream>,
    cx: &Context<'_>,
    nonce: &[u8; 20],
    offered: CapabilityFlags,
) -> std::io::Result<()> {
    let mut part2 = nonce[8..].to_vec();
    part2.push(0);
    let greeting = HandshakePacket::new(
        10,
        cx.server_version.as_bytes(),
        cx.connection_id,
        nonce[..8].try_into().expect("8 bytes"),
        Some(part2),
        offered,
        SERVER_COLLATION,
        StatusFlags::from_bits_retain(cx.status),
        Some(GREETING_PLUGIN.name().as_bytes()),
    );
    let mut buf = Vec::new();
    greeting.serialize(&mut buf);
    stream.write_packet(&buf)?;
    stream.flush().await
}

/// An SSLRequest: the first 32 bytes of a HandshakeResponse, with CLIENT_SSL set.
fn is_ssl_request(packet: &[u8]) -> bool {
    packet.len() == 32
        && packet[..4]
            .try_into()
            .is_ok_and(|b: [u8; 4]| u32::from_le_bytes(b) & CapabilityFlags::CLIENT_SSL.bits() != 0)
}

async fn bad_handshake(
    stream: PacketStream<ClientStream>,
    offered: CapabilityFlags,
    message: &str,
) -> Result<Option<Hello>, ProxyError> {
    let mut client = Client {
        stream,
        caps: offered,
        renamed: Default::default(),
        held_back: None,
    };
    client.error(&ProxyError::client(ER_HANDSHAKE_ERROR, b"08S01", message))?;
    client.flush().await?;
    Ok(None)
}

/// Reads a client's handshake response payload (the packet after the greeting, without
/// its 4-byte header). `None` when it is not a handshake response mysql_common can read:
/// truncated, malformed, or a 32-byte SSL request.
pub fn parse_response(packet: &[u8]) -> Option<ClientHello> {
    let r: HandshakeResponse<'_> = ParseBuf(packet).parse(()).ok()?;
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    Some(ClientHello {
        caps: r.capabilities(),
        user: text(r.user()),
        database: r.db_name().filter(|d| !d.is_empty()).map(text),
        attributes: r.connect_attributes().unwrap_or_default(),
        collation: r.collation(),
        token: r.scramble_buf().to_vec(),
        plugin: match r.auth_plugin() {
            None | Some(AuthPlugin::MysqlNativePassword) => Some(Plugin::MysqlNativePassword),
            Some(AuthPlugin::CachingSha2Password) => Some(Plugin::CachingSha2Password),
            Some(_) => None,
        },
    })
}

/// MySQL's answer to every refused login (wrong password, unknown user, `REQUIRE SSL`).
fn access_denied(user: &str, peer: &str, password_given: bool) -> ProxyError {
    let host = peer.rsplit_once(':').map_or(peer, |(h, _)| h);
    ProxyError::client(
        ER_ACCESS_DENIED_ERROR,
        b"28000",
        format!(
            "Access denied for user '{user}'@'{host}' (using password: {})",
            if password_given { "YES" } else { "NO" }
        ),
    )
}

/// Checks the client's proof with the user's plugin, switching the client to it first
/// when it opened with another. Unknown users go through the same steps and fail.
async fn authenticate(
    client: &mut Client,
    cx: &Context<'_>,
    nonce: &[u8; 20],
    user: Option<&User>,
    response: &ClientHello,
) -> Result<Result<(), &'static str>, ProxyError> {
    let plugin = user.map_or(
        response.plugin.unwrap_or(Plugin::MysqlNativePassword),
        |u| u.auth_plugin,
    );
    let mut token = response.token.clone();
    // libmysqlclient opening with a plugin other than the greeting's sends no data and
    // waits to be asked (MySQL's server restarts the exchange then): an empty token from
    // such a client is a question, not an empty password.
    let unasked = plugin != GREETING_PLUGIN && token.is_empty();
    if response.plugin != Some(plugin) || unasked {
        let mut data = nonce.to_vec();
        data.push(0);
        let mut out = Vec::new();
        AuthSwitchRequest::new(plugin.name().as_bytes(), &data[..]).serialize(&mut out);
        client.packet(&out)?;
        client.flush().await?;
        token = client.stream.expect_packet().await.map_err(gone)?.to_vec();
    }
    let Some(user) = user else {
        if plugin == Plugin::CachingSha2Password && !token.is_empty() {
            // As for a wrong password: the client is asked for the full authentication.
            let _ = sha2_full(client, cx, nonce).await?;
        }
        return Ok(Err("unknown user"));
    };
    let accepted = match plugin {
        Plugin::MysqlNativePassword => access::native_ok(nonce, &token, &user.credential),
        Plugin::CachingSha2Password => {
            return sha2(client, cx, nonce, user, &token).await;
        }
    };
    Ok(if accepted {
        Ok(())
    } else {
        Err("wrong password")
    })
}

fn gone(e: std::io::Error) -> ProxyError {
    ProxyError::ClientGone(format!("handshake: {e}"))
}

/// AuthMoreData (0x01) bytes of caching_sha2_password: fast authentication succeeded.
const FAST_AUTH_SUCCESS: u8 = 0x03;
/// AuthMoreData: send the password in full.
const PERFORM_FULL_AUTHENTICATION: u8 = 0x04;
/// The client's request for the server's RSA public key.
const REQUEST_PUBLIC_KEY: &[u8] = &[0x02];

async fn sha2(
    client: &mut Client,
    cx: &Context<'_>,
    nonce: &[u8; 20],
    user: &User,
    token: &[u8],
) -> Result<Result<(), &'static str>, ProxyError> {
    if token.is_empty() || token == [0] {
        let empty = access::is_empty_password(&user.credential);
        return Ok(if empty { Ok(()) } else { Err("wrong password") });
    }
    let cached = cx.logins.sha2_cached(&user.name, &user.credential);
    if cached.is_some_and(|stage2| access::sha2_fast_ok(nonce, token, &stage2)) {
        client.packet(&[0x01, FAST_AUTH_SUCCESS])?;
        return Ok(Ok(()));
    }
    let password = match sha2_full(client, cx, nonce).await? {
        Ok(p) => p,
        Err(reason) => return Ok(Err(reason)),
    };
    // A `$A$005$` hash costs 5,000 SHA-256 rounds: on a blocking thread, as the RSA step.
    let credential = user.credential.clone();
    let checked = tokio::task::spawn_blocking(move || access::full_ok(&password, &credential))
        .await
        .map_err(|e| ProxyError::Io(format!("password check: {e}")))?;
    match checked {
        Some(stage2) => {
            cx.logins.sha2_learnt(&user.name, &user.credential, stage2);
            Ok(Ok(()))
        }
        None => Ok(Err("wrong password")),
    }
}

/// Asks for the password in full and reads it: in clear inside TLS, or encrypted with the
/// RSA key (sent first when the client asks for it with 0x02).
async fn sha2_full(
    client: &mut Client,
    cx: &Context<'_>,
    nonce: &[u8; 20],
) -> Result<Result<Vec<u8>, &'static str>, ProxyError> {
    client.packet(&[0x01, PERFORM_FULL_AUTHENTICATION])?;
    client.flush().await?;
    let mut packet = client.stream.expect_packet().await.map_err(gone)?.to_vec();
    if client.stream.get_ref().is_secure() {
        if packet.last() == Some(&0) {
            packet.pop();
        }
        return Ok(Ok(packet));
    }
    let Some(key) = cx.security.rsa.clone() else {
        return Ok(Err(
            "caching_sha2_password full authentication over clear-text TCP without an RSA key (server.rsa_private_key_file)",
        ));
    };
    if packet == REQUEST_PUBLIC_KEY {
        let mut out = vec![0x01];
        out.extend_from_slice(key.public_pem.as_bytes());
        client.packet(&out)?;
        client.flush().await?;
        packet = client.stream.expect_packet().await.map_err(gone)?.to_vec();
    }
    // An RSA decryption takes a millisecond or more: on a blocking thread, so a flood of
    // them does not stall the sessions that share this worker.
    let nonce = *nonce;
    let password =
        tokio::task::spawn_blocking(move || access::rsa_password(&key.private, &nonce, &packet))
            .await
            .map_err(|e| ProxyError::Io(format!("RSA decryption: {e}")))?;
    Ok(password.ok_or("password not RSA-encrypted with the proxy's key"))
}
