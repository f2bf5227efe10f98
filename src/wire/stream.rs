//! The byte stream under a client session: plain TCP, TLS over TCP after the client's
//! SSLRequest, or a Unix socket (`server.socket`). An enum rather than a boxed trait object,
//! so each read and write is one `match` (no dynamic dispatch per packet). Writes carry
//! `server.client_write_timeout` (MariaDB's `net_write_timeout`).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, UnixStream};
use tokio_rustls::server::TlsStream;

/// A client connection: its transport, and the bound on how long a write may wait for the
/// client to take bytes.
pub struct ClientStream {
    transport: Transport,
    /// `server.client_write_timeout`; `None`: writes wait as long as the client makes them.
    write_timeout: Option<Duration>,
    /// Armed when a write first has to wait (the client's receive window is full), cleared
    /// by any write that makes progress and by every read: a write that completes at once,
    /// the usual case, never sets up a timer.
    write_deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    /// The session, once logged in: a `KILL` of it ends a write that waits for the client.
    session: Option<std::sync::Arc<crate::session_registry::SessionHandle>>,
    /// Its kill signal, watched (like the deadline) only while a write waits.
    killed: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
}

/// A client connection's transport.
pub enum Transport {
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
    /// A client connection on `transport`, its writes without a timeout until
    /// [`ClientStream::set_write_timeout`].
    pub fn new(transport: Transport) -> Self {
        Self {
            transport,
            write_timeout: None,
            write_deadline: None,
            session: None,
            killed: None,
        }
    }

    /// The session served on this stream: its `KILL` ends a write that waits for the
    /// client (a client that stopped reading its result).
    pub fn set_session(&mut self, session: std::sync::Arc<crate::session_registry::SessionHandle>) {
        self.session = Some(session);
    }

    /// Bounds how long a write may wait without the client taking a byte (zero: no bound).
    /// A write past it fails with `TimedOut`, which ends the session.
    pub fn set_write_timeout(&mut self, timeout: Duration) {
        self.write_timeout = (!timeout.is_zero()).then_some(timeout);
    }

    /// The transport under it.
    pub fn transport(&self) -> &Transport {
        &self.transport
    }

    /// Makes closing this connection abortive (a TCP reset, as MariaDB's close of a
    /// session that idled past its `wait_timeout` is): the client's next command fails at
    /// once, and drivers report the server gone (2006) rather than a connection lost
    /// during the query. A Unix socket has no reset: it closes as usual.
    pub fn reset_on_close(&self) {
        let tcp = match &self.transport {
            Transport::Tcp(tcp) => tcp,
            Transport::Tls(tls) => tls.get_ref().0,
            Transport::Unix(_) => return,
        };
        let _ = tcp.set_zero_linger();
    }

    /// TLS over this stream's TCP (after the client's SSLRequest); another transport is
    /// kept as it is. The write timeout carries over.
    ///
    /// # Errors
    ///
    /// The TLS handshake's.
    pub async fn start_tls(self, acceptor: tokio_rustls::TlsAcceptor) -> io::Result<Self> {
        let transport = match self.transport {
            Transport::Tcp(tcp) => Transport::Tls(Box::new(acceptor.accept(tcp).await?)),
            other => other,
        };
        Ok(Self {
            transport,
            write_timeout: self.write_timeout,
            write_deadline: None,
            session: self.session,
            killed: None,
        })
    }

    /// Whether a user with `require_tls` may log in over this stream: TLS (and local
    /// sockets, when they exist) are secure; clear-text TCP is not.
    pub fn is_secure(&self) -> bool {
        match self.transport {
            Transport::Tcp(_) => false,
            Transport::Tls(_) | Transport::Unix(_) => true,
        }
    }

    /// The TLS parameters, `None` in clear text.
    pub fn tls_info(&self) -> Option<TlsInfo> {
        let Transport::Tls(tls) = &self.transport else {
            return None;
        };
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

    /// A write that returned `Pending`: pending until the client takes bytes, the session
    /// is killed, or the write timeout (counted from the first write that had to wait)
    /// runs out.
    fn poll_write_deadline<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        if let Some(session) = &self.session {
            let killed = self.killed.get_or_insert_with(|| {
                let session = session.clone();
                Box::pin(async move { session.stop_signal(false).await })
            });
            if killed.as_mut().poll(cx).is_ready() {
                self.clear_waits();
                tracing::warn!(
                    "client disconnected: it took none of its reply and its session was killed"
                );
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "the session was killed while its client was not reading",
                )));
            }
        }
        let Some(timeout) = self.write_timeout else {
            return Poll::Pending;
        };
        let deadline = self
            .write_deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match deadline.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.clear_waits();
                tracing::warn!(
                    ?timeout,
                    "client disconnected: it took none of its reply within server.client_write_timeout"
                );
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "the client took none of the reply for {timeout:?} (server.client_write_timeout)"
                    ),
                )))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    /// No write waits (any more): the deadline and the kill watch go.
    fn clear_waits(&mut self) {
        if self.write_deadline.is_some() || self.killed.is_some() {
            self.write_deadline = None;
            self.killed = None;
        }
    }

    /// The outcome of a write poll: progress (or an error) clears the deadline; `Pending`
    /// arms it.
    fn after_write<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match polled {
            Poll::Ready(result) => {
                self.clear_waits();
                Poll::Ready(result)
            }
            Poll::Pending => self.poll_write_deadline(cx),
        }
    }
}

impl AsyncRead for ClientStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        // A read starts a new exchange: a deadline left by a write that was given up
        // (its statement cancelled) must not count against the next one.
        this.clear_waits();
        Pin::new(&mut this.transport).poll_read(cx, buf)
    }
}

impl AsyncWrite for ClientStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.transport).poll_write(cx, buf);
        this.after_write(cx, polled)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.transport).poll_flush(cx);
        this.after_write(cx, polled)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.transport).poll_shutdown(cx);
        this.after_write(cx, polled)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.transport).poll_write_vectored(cx, bufs);
        this.after_write(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.transport.is_write_vectored()
    }
}

crate::protocol::delegate_stream_io!(Transport { Tcp, Tls, Unix });
