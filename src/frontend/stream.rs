//! The byte stream under a client session: plain TCP, TLS over TCP after the client's
//! SSLRequest, or a Unix socket (`server.socket`). An enum rather than a boxed trait object,
//! so each read and write is one `match` (no dynamic dispatch per packet).

use tokio::net::{TcpStream, UnixStream};
use tokio_rustls::server::TlsStream;

/// A client connection's transport.
pub enum ClientStream {
    /// TCP in clear text.
    Tcp(TcpStream),
    /// TLS over TCP (boxed: the TLS state is large, and the enum moves at the upgrade).
    Tls(Box<TlsStream<TcpStream>>),
    /// A Unix socket: a client on the same host (in Kubernetes, a container of the same pod
    /// sharing the socket's `emptyDir`).
    Unix(UnixStream),
}

/// Who is on the other end of a client connection, as logs, errors and `SHOW PROCESSLIST`
/// name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// The client's address; a Unix socket client counts as the loopback address (the key
    /// of its failed-login delays).
    pub ip: std::net::IpAddr,
    /// `127.0.0.1:53412` for TCP; `localhost` for a Unix socket, as MySQL names it.
    pub name: String,
}

impl Peer {
    /// A TCP client.
    pub fn tcp(addr: std::net::SocketAddr) -> Self {
        Self {
            ip: addr.ip(),
            name: addr.to_string(),
        }
    }

    /// A Unix socket client.
    pub fn local() -> Self {
        Self {
            ip: std::net::Ipv4Addr::LOCALHOST.into(),
            name: "localhost".to_owned(),
        }
    }

    /// The host part: `127.0.0.1`, or `localhost` for a Unix socket (`'user'@'host'` in
    /// errors, the `Host` of `SHOW PROCESSLIST`).
    pub fn host(&self) -> String {
        match self.name.parse::<std::net::SocketAddr>() {
            Ok(addr) => addr.ip().to_string(),
            Err(_) => self.name.clone(),
        }
    }
}

/// What `SHOW STATUS LIKE 'Ssl_%'` reports for a session: the negotiated protocol version
/// (`TLSv1.3`) and cipher suite (`TLS_AES_256_GCM_SHA384`, its IANA name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsInfo {
    /// `Ssl_version`: `TLSv1.2` or `TLSv1.3`.
    pub version: String,
    /// `Ssl_cipher`: the IANA name of the cipher suite.
    pub cipher: String,
}

impl ClientStream {
    /// Whether a user with `require_tls` may log in over this stream: TLS (and local
    /// sockets, when they exist) are secure; clear-text TCP is not.
    pub fn is_secure(&self) -> bool {
        match self {
            Self::Tcp(_) => false,
            Self::Tls(_) | Self::Unix(_) => true,
        }
    }

    /// The TLS parameters, `None` in clear text.
    pub fn tls_info(&self) -> Option<TlsInfo> {
        let Self::Tls(tls) = self else { return None };
        let (_, conn) = tls.get_ref();
        let version = match conn.protocol_version()? {
            rustls::ProtocolVersion::TLSv1_2 => "TLSv1.2".to_owned(),
            rustls::ProtocolVersion::TLSv1_3 => "TLSv1.3".to_owned(),
            other => format!("{other:?}"),
        };
        // rustls names TLS 1.3 suites `TLS13_...`; their IANA names (what MySQL shows)
        // start `TLS_`.
        let cipher = conn
            .negotiated_cipher_suite()
            .and_then(|s| s.suite().as_str())
            .unwrap_or_default()
            .replacen("TLS13_", "TLS_", 1);
        Some(TlsInfo { version, cipher })
    }
}

crate::protocol::delegate_stream_io!(ClientStream { Tcp, Tls, Unix });
