//! One backend connection, driven by the proxy itself on mysql_common: client handshake
//! (TLS upgrade and authentication in [`super::tls`] and [`super::auth`]), commands, and
//! the session state the proxy applied to it.

use std::time::{Duration, Instant};

use bytes::BytesMut;
use mysql_common::constants::{CapabilityFlags, Command, StatusFlags};
use mysql_common::packets::{HandshakePacket, HandshakeResponse, SslRequest};
use mysql_common::proto::MySerialize;
use tokio::net::TcpStream;

use super::auth;
use super::reply::{Reply, ResultEnd, backend_error};
use super::statements::{BackendStatement, PreparedMetadata, StatementCache};
use super::tls::{self, BackendStream};
use super::vars::AppliedState;
use crate::config::{Datasource, DatasourceId};
use crate::error::ProxyError;
use crate::protocol::PacketStream;
use crate::protocol::packets::{
    ColumnInfo, OkInfo, ServerErr, column_info, is_eof, parse_err, parse_text_row,
};

/// One entry of `SHOW WARNINGS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// `Note`, `Warning` or `Error`.
    pub level: Vec<u8>,
    /// Error code.
    pub code: Vec<u8>,
    /// Message.
    pub message: Vec<u8>,
}

/// A connection to one datasource.
pub struct BackendConn {
    stream: PacketStream<BackendStream>,
    datasource: DatasourceId,
    /// Which member of the datasource it reaches (index into its `members`; 0 for a
    /// datasource of one server).
    member: usize,
    /// The backend's thread id.
    thread_id: u32,
    /// The version string of the backend's greeting.
    server_version: String,
    status: u16,
    broken: bool,
    /// A command was sent and its response is not fully read: if the session stops here
    /// (client gone, task cancelled), the connection must not go back to the pool.
    awaiting: bool,
    /// When its last response ended.
    idle_since: Instant,
    /// How the last result set read ended.
    result_end: ResultEnd,
    /// What the proxy set on this connection.
    pub state: AppliedState,
    /// Statements prepared on this connection, by their text and the state they were
    /// read in.
    statements: StatementCache,
}

impl std::fmt::Debug for BackendConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackendConn")
            .field("datasource", &self.datasource)
            .field("thread_id", &self.thread_id)
            .field("status", &self.status)
            .finish()
    }
}

/// Capabilities the proxy asks of every backend. No MULTI_STATEMENTS (the proxy splits
/// statements itself), no DEPRECATE_EOF. SESSION_TRACK: an OK then says which tracked
/// session variables a statement changed, in the form a client that tracks them is owed.
/// LOCAL_FILES: `LOAD DATA LOCAL INFILE` (the proxy sends only a client's file, for a
/// statement of that client; a request for a file at any other time gets an empty one).
fn base_capabilities() -> CapabilityFlags {
    CapabilityFlags::CLIENT_LONG_PASSWORD
        | CapabilityFlags::CLIENT_LONG_FLAG
        | CapabilityFlags::CLIENT_PROTOCOL_41
        | CapabilityFlags::CLIENT_TRANSACTIONS
        | CapabilityFlags::CLIENT_SECURE_CONNECTION
        | CapabilityFlags::CLIENT_MULTI_RESULTS
        | CapabilityFlags::CLIENT_PS_MULTI_RESULTS
        | CapabilityFlags::CLIENT_PLUGIN_AUTH
        | CapabilityFlags::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
        | CapabilityFlags::CLIENT_SESSION_TRACK
        | CapabilityFlags::CLIENT_LOCAL_FILES
}

fn unavailable(ds: &Datasource, what: impl std::fmt::Display) -> ProxyError {
    ProxyError::Unavailable(format!("datasource {} ({}): {what}", ds.name, ds.address))
}

impl BackendConn {
    /// Opens and authenticates a connection. `found_rows` sets CLIENT_FOUND_ROWS (UPDATE
    /// then reports matched rather than changed rows). The whole handshake, TLS included,
    /// is bounded by the datasource's connect timeout.
    pub async fn connect(
        ds: &Datasource,
        id: DatasourceId,
        found_rows: bool,
        max_packet: usize,
    ) -> Result<Self, ProxyError> {
        let tls = tls::connector(ds).map_err(|e| unavailable(ds, e))?;
        Self::connect_with(ds, id, found_rows, max_packet, tls.as_ref()).await
    }

    /// As [`BackendConn::connect`], with the datasource's TLS client (from
    /// [`tls::connector`]) built by the caller: a pool keeps one, so its connections
    /// resume TLS sessions instead of running full handshakes.
    pub async fn connect_with(
        ds: &Datasource,
        id: DatasourceId,
        found_rows: bool,
        max_packet: usize,
        tls: Option<&tokio_rustls::TlsConnector>,
    ) -> Result<Self, ProxyError> {
        match tokio::time::timeout(
            ds.connect_timeout,
            Self::open(ds, id, found_rows, max_packet, tls),
        )
        .await
        {
            Ok(result) => result,
            Err(_) => Err(unavailable(
                ds,
                format!("no connection within {:?}", ds.connect_timeout),
            )),
        }
    }

    async fn open(
        ds: &Datasource,
        id: DatasourceId,
        found_rows: bool,
        max_packet: usize,
        tls: Option<&tokio_rustls::TlsConnector>,
    ) -> Result<Self, ProxyError> {
        let tcp = TcpStream::connect(&ds.address)
            .await
            .map_err(|e| unavailable(ds, e))?;
        let _ = tcp.set_nodelay(true);
        let mut stream = PacketStream::new(BackendStream::Plain(tcp), max_packet);
        let io = |e: std::io::Error| unavailable(ds, e);
        let greeting = stream.expect_packet().await.map_err(io)?;
        if greeting.first() == Some(&0xff) {
            let e = parse_err(&greeting);
            return Err(unavailable(ds, String::from_utf8_lossy(&e.message)));
        }
        let handshake = crate::protocol::packets::parse_greeting(&greeting)
            .map_err(|e| unavailable(ds, format!("bad handshake: {e}")))?;
        let mut caps = base_capabilities() & handshake.capabilities();
        caps |= CapabilityFlags::CLIENT_PROTOCOL_41;
        if found_rows {
            caps |= CapabilityFlags::CLIENT_FOUND_ROWS;
        }
        let max_packet_u32 = u32::try_from(max_packet).unwrap_or(u32::MAX);
        let offers_tls = handshake
            .capabilities()
            .contains(CapabilityFlags::CLIENT_SSL);
        if let Some(connector) = tls {
            stream =
                start_tls(ds, stream, &handshake, &mut caps, connector, max_packet_u32).await?;
        }
        let nonce = handshake.nonce();
        let plugin = auth::first_plugin(handshake.auth_plugin());
        let data =
            auth::plugin_response(&plugin, &nonce, &ds.password).map_err(|e| unavailable(ds, e))?;
        let response = HandshakeResponse::new(
            Some(data),
            crate::protocol::packets::server_version_numbers(handshake.server_version_ref())
                .unwrap_or((5, 5, 5)),
            Some(ds.user.as_bytes()),
            ds.database.as_deref().map(str::as_bytes),
            Some(plugin.clone()),
            caps,
            None,
            max_packet_u32,
        );
        let mut buf = Vec::new();
        response.serialize(&mut buf);
        stream.write_packet(&buf).map_err(io)?;
        stream.flush().await.map_err(io)?;
        auth::finish(&mut stream, plugin, nonce, &ds.password)
            .await
            .map_err(|e| unavailable(ds, auth_hint(ds, &stream, offers_tls, e)))?;
        let mut state = AppliedState {
            database: ds.database.clone(),
            ..Default::default()
        };
        // HandshakeResponse asks for utf8mb4_general_ci; autocommit starts on.
        for (name, value) in [
            ("character_set_client", "'utf8mb4'"),
            ("character_set_connection", "'utf8mb4'"),
            ("character_set_results", "'utf8mb4'"),
            ("collation_connection", "'utf8mb4_general_ci'"),
            ("autocommit", "1"),
            ("last_insert_id", "0"),
        ] {
            state
                .vars
                .insert(name.to_owned(), value.as_bytes().to_vec());
        }
        Ok(Self {
            stream,
            datasource: id,
            member: 0,
            thread_id: handshake.connection_id(),
            server_version: handshake.server_version_str().into_owned(),
            status: StatusFlags::SERVER_STATUS_AUTOCOMMIT.bits(),
            broken: false,
            awaiting: false,
            idle_since: Instant::now(),
            result_end: ResultEnd::default(),
            state,
            statements: StatementCache::default(),
        })
    }

    /// The datasource this connection belongs to.
    pub fn datasource(&self) -> DatasourceId {
        self.datasource
    }

    /// Which member of its datasource it reaches (0 for a datasource of one server).
    pub fn member(&self) -> usize {
        self.member
    }

    /// Records which member it reaches (its pool knows).
    pub fn set_member(&mut self, member: usize) {
        self.member = member;
    }

    /// The backend's thread id (what `KILL` on the backend names).
    pub fn thread_id(&self) -> u32 {
        self.thread_id
    }

    /// The version string the backend's greeting carried.
    pub fn server_version(&self) -> &str {
        &self.server_version
    }

    /// The backend reported an open transaction in its last status.
    pub fn in_transaction(&self) -> bool {
        self.status & StatusFlags::SERVER_STATUS_IN_TRANS.bits() != 0
    }

    /// After a statement failed inside a transaction (explicit, or implicit with autocommit
    /// off): the error packet carries no status, but the server keeps the transaction open
    /// (and the failed statement's locks), so the connection is treated as in one until
    /// COMMIT or ROLLBACK says otherwise.
    pub fn assume_in_transaction(&mut self) {
        self.status |= StatusFlags::SERVER_STATUS_IN_TRANS.bits();
    }

    /// The last status flags the backend reported.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// Records the status of the OK or EOF packet that ends a result; the response is
    /// complete unless the backend announces more results.
    pub fn observe_status(&mut self, status: u16) {
        self.status = status;
        if status & StatusFlags::SERVER_MORE_RESULTS_EXISTS.bits() == 0 {
            self.response_done();
        }
    }

    fn response_done(&mut self) {
        self.awaiting = false;
        self.idle_since = Instant::now();
    }

    /// Records an ERR packet that ended a response; errors after which the server closes
    /// the connection (shutdown, killed, packet too large, network errors) mark it broken.
    pub fn observe_error(&mut self, e: &ServerErr) {
        self.response_done();
        if matches!(e.code, 1053 | 1077..=1081 | 1152..=1161 | 1927 | 4031) {
            self.broken = true;
        }
    }

    /// For a connection idle longer than `after`: whether its socket is still open and
    /// silent (a server that closed it, or sent an unsolicited error, is caught here rather
    /// than by the client's next statement). One non-blocking read; no round trip.
    pub fn still_alive(&mut self, after: Duration) -> bool {
        if self.idle_since.elapsed() < after {
            return true;
        }
        if self.stream.buffered() > 0 {
            return false;
        }
        self.stream.get_mut().idle_and_open()
    }

    /// The connection cannot be trusted any more (I/O error, unread rows): the pool drops it.
    pub fn mark_broken(&mut self) {
        self.broken = true;
    }

    /// A command was sent and its response is not read to its end (and the connection
    /// is not broken): reading on will not block forever.
    pub fn awaiting_reply(&self) -> bool {
        self.awaiting && !self.broken
    }

    /// Broken, or with a response still unread: not reusable.
    pub fn is_broken(&self) -> bool {
        self.broken || self.awaiting
    }

    fn io_error(&mut self, e: std::io::Error) -> ProxyError {
        self.broken = true;
        ProxyError::Io(e.to_string())
    }

    /// Sends a command packet (`command` byte, then `body`).
    pub async fn send_command(&mut self, command: Command, body: &[u8]) -> Result<(), ProxyError> {
        let mut payload = Vec::with_capacity(body.len() + 1);
        payload.push(command as u8);
        payload.extend_from_slice(body);
        self.send_raw_command(&payload).await
    }

    /// The next packet of a response.
    pub async fn read_packet(&mut self) -> Result<BytesMut, ProxyError> {
        match self.stream.expect_packet().await {
            Ok(p) => Ok(p),
            Err(e) => Err(self.io_error(e)),
        }
    }

    /// When the next row of the result set being read is at least `threshold` bytes, relays
    /// it to `to` as it arrives (never held whole: rows of many megabytes cost the proxy a
    /// buffer, not their size) and returns `true`; otherwise reads only as far as its header
    /// and returns `false`, for [`BackendConn::next_row`]. An EOF, OK or ERR packet is never
    /// that large. A client lost mid-row is [`ProxyError::ClientGone`], and leaves this
    /// connection broken (the rest of the row is unread).
    pub async fn relay_large_row<T>(
        &mut self,
        threshold: usize,
        to: &mut crate::protocol::PacketStream<T>,
    ) -> Result<bool, ProxyError>
    where
        T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    {
        match self.stream.peek_length().await {
            Ok(Some(len)) if len >= threshold => {}
            Ok(_) => return Ok(false),
            Err(e) => return Err(self.io_error(e)),
        }
        match self.stream.relay_packet(to).await {
            Ok(_) => Ok(true),
            Err(crate::protocol::stream::RelayError::Source(e)) => Err(self.io_error(e)),
            Err(crate::protocol::stream::RelayError::Sink(e)) => {
                self.mark_broken();
                Err(ProxyError::ClientGone(e.to_string()))
            }
        }
    }

    /// How the last result set read on this connection ended.
    pub fn result_end(&self) -> ResultEnd {
        self.result_end
    }

    pub(super) fn set_result_end(&mut self, end: ResultEnd) {
        self.result_end = end;
    }

    /// Queues one packet of a `LOAD DATA LOCAL INFILE` file.
    pub(super) fn write_file_packet(&mut self, data: &[u8]) -> Result<(), ProxyError> {
        self.stream.write_packet(data).map_err(|e| self.io_error(e))
    }

    /// Sends the queued file packets once enough are queued.
    pub(super) async fn flush_if_full(&mut self) -> Result<(), ProxyError> {
        if let Err(e) = self.stream.flush_if_full().await {
            return Err(self.io_error(e));
        }
        Ok(())
    }

    /// Sends the queued file packets.
    pub(super) async fn flush_file(&mut self) -> Result<(), ProxyError> {
        if let Err(e) = self.stream.flush().await {
            return Err(self.io_error(e));
        }
        Ok(())
    }

    /// Answers a LOCAL INFILE request with an empty packet (no file).
    pub(super) async fn send_empty_packet(&mut self) -> Result<(), ProxyError> {
        self.stream
            .write_packet(&[])
            .map_err(|e| self.io_error(e))?;
        self.stream.flush().await.map_err(|e| self.io_error(e))
    }

    /// Runs a statement and expects OK (result sets are read and dropped); a backend error
    /// becomes [`ProxyError::Backend`].
    pub async fn execute(&mut self, sql: &[u8]) -> Result<OkInfo, ProxyError> {
        self.send_command(Command::COM_QUERY, sql).await?;
        let reply = self.read_reply().await?;
        self.drain_reply(reply).await
    }

    /// Runs a query and collects its (small) result as packets: column definitions, rows.
    pub async fn query_raw(
        &mut self,
        sql: &[u8],
    ) -> Result<(Vec<BytesMut>, Vec<BytesMut>), ProxyError> {
        self.send_command(Command::COM_QUERY, sql).await?;
        match self.read_reply().await? {
            Reply::Ok(_) => Ok((Vec::new(), Vec::new())),
            Reply::ResultSet { columns, .. } => {
                let mut rows = Vec::new();
                while let Some(row) = self.next_row().await? {
                    rows.push(row);
                }
                Ok((columns, rows))
            }
        }
    }

    /// Runs a query and collects its (small) text result: column names and types, rows.
    pub async fn query_rows(
        &mut self,
        sql: &[u8],
    ) -> Result<(Vec<ColumnInfo>, Vec<Vec<Option<Vec<u8>>>>), ProxyError> {
        let (defs, raw) = self.query_raw(sql).await?;
        let columns: Vec<ColumnInfo> = defs
            .iter()
            .map(|d| {
                column_info(d).unwrap_or(ColumnInfo {
                    name: Vec::new(),
                    column_type: 0,
                    charset: 63,
                })
            })
            .collect();
        let rows = raw
            .iter()
            .map(|r| parse_text_row(r, columns.len()).unwrap_or_default())
            .collect();
        Ok((columns, rows))
    }

    /// The diagnostics of the last statement (`SHOW WARNINGS`).
    pub async fn diagnostics(&mut self) -> Result<Vec<Diagnostic>, ProxyError> {
        let (_, rows) = self.query_rows(b"SHOW WARNINGS").await?;
        Ok(rows
            .into_iter()
            .map(|r| {
                let mut it = r.into_iter().map(Option::unwrap_or_default);
                Diagnostic {
                    level: it.next().unwrap_or_default(),
                    code: it.next().unwrap_or_default(),
                    message: it.next().unwrap_or_default(),
                }
            })
            .collect())
    }

    /// The one unsigned number a query returns (0 when it returns none).
    pub async fn scalar(&mut self, sql: &[u8]) -> Result<u64, ProxyError> {
        let (_, rows) = self.query_rows(sql).await?;
        Ok(rows
            .first()
            .and_then(|r| r.first().cloned().flatten())
            .and_then(|v| String::from_utf8_lossy(&v).parse().ok())
            .unwrap_or(0))
    }

    /// Prepares `sql` with COM_STMT_PREPARE and closes it at once: the server's verdict on
    /// a statement without running it. A backend error is returned as is.
    pub async fn prepare_check(&mut self, sql: &[u8]) -> Result<(), ProxyError> {
        let prepared = self.prepare_raw(sql).await?;
        self.close_statement(prepared.statement.id).await
    }

    /// COM_STMT_PREPARE, reading the whole answer.
    async fn prepare_raw(&mut self, sql: &[u8]) -> Result<PreparedMetadata, ProxyError> {
        self.send_command(Command::COM_STMT_PREPARE, sql).await?;
        let first = self.read_packet().await?;
        if first.first() == Some(&0xff) {
            let e = parse_err(&first);
            self.observe_error(&e);
            return Err(backend_error(e));
        }
        let field = |i: usize| {
            u16::from_le_bytes([
                first.get(i).copied().unwrap_or(0),
                first.get(i + 1).copied().unwrap_or(0),
            ])
        };
        let id = u32::from_le_bytes(
            first
                .get(1..5)
                .and_then(|b| b.try_into().ok())
                .unwrap_or_default(),
        );
        let statement = BackendStatement {
            id,
            columns: field(5),
            params: field(7),
        };
        let warnings = field(10);
        let mut defs = [Vec::new(), Vec::new()];
        for (k, count) in [statement.params, statement.columns]
            .into_iter()
            .enumerate()
        {
            if count > 0 {
                for _ in 0..count {
                    defs[k].push(self.read_packet().await?);
                }
                let eof = self.read_packet().await?;
                if !is_eof(&eof) {
                    self.broken = true;
                    return Err(ProxyError::Internal(
                        "expected EOF after prepared statement definitions".into(),
                    ));
                }
            }
        }
        self.response_done();
        let [param_defs, column_defs] = defs;
        Ok(PreparedMetadata {
            statement,
            param_defs,
            column_defs,
            warnings,
        })
    }

    /// Prepares `sql` on this connection, or reuses the statement prepared before.
    pub async fn prepare_cached(
        &mut self,
        sql: &[u8],
    ) -> Result<std::sync::Arc<PreparedMetadata>, ProxyError> {
        if let Some(s) = self.statements.get(&self.state, sql) {
            return Ok(s);
        }
        let prepared = std::sync::Arc::new(self.prepare_raw(sql).await?);
        if let Some(old) = self.statements.evict_oldest_if_full() {
            self.close_statement(old.statement.id).await?;
        }
        self.statements.insert(&self.state, sql, prepared.clone());
        Ok(prepared)
    }

    /// Sends a command that has no reply (COM_STMT_CLOSE, COM_STMT_SEND_LONG_DATA).
    pub async fn send_no_reply(&mut self, command: Command, body: &[u8]) -> Result<(), ProxyError> {
        self.stream.reset_seq();
        let mut payload = Vec::with_capacity(body.len() + 1);
        payload.push(command as u8);
        payload.extend_from_slice(body);
        self.stream
            .write_packet(&payload)
            .map_err(|e| self.io_error(e))?;
        self.stream.flush().await.map_err(|e| self.io_error(e))
    }

    /// COM_STMT_CLOSE.
    async fn close_statement(&mut self, id: u32) -> Result<(), ProxyError> {
        self.send_no_reply(Command::COM_STMT_CLOSE, &id.to_le_bytes())
            .await
    }

    /// Sends a whole command payload (command byte included, e.g. a COM_STMT_EXECUTE
    /// built by the caller) and leaves the response to be read.
    pub async fn send_raw_command(&mut self, payload: &[u8]) -> Result<(), ProxyError> {
        self.stream.reset_seq();
        if let Err(e) = self.stream.write_packet(payload) {
            // Too large: nothing was sent, the connection stays usable.
            return Err(ProxyError::client(
                crate::error::ER_NET_PACKET_TOO_LARGE,
                b"08S01",
                format!("Got a packet bigger than 'max_allowed_packet' bytes ({e})"),
            ));
        }
        self.awaiting = true;
        if let Err(e) = self.stream.flush().await {
            return Err(self.io_error(e));
        }
        Ok(())
    }

    /// COM_RESET_CONNECTION: rolls back, drops temporary tables, locks, user variables and
    /// prepared statements, and resets session variables.
    pub async fn reset(&mut self) -> Result<(), ProxyError> {
        self.send_command(Command::COM_RESET_CONNECTION, &[])
            .await?;
        match self.read_reply().await {
            Ok(Reply::Ok(_)) => {
                // The server forgot the session state and every prepared statement.
                self.state.vars.clear();
                self.statements.clear();
                Ok(())
            }
            Ok(Reply::ResultSet { .. }) => {
                self.broken = true;
                Err(ProxyError::Internal(
                    "result set in reply to a reset".into(),
                ))
            }
            Err(e) => {
                self.broken = true;
                Err(e)
            }
        }
    }

    /// COM_INIT_DB.
    pub async fn init_db(&mut self, database: &str) -> Result<(), ProxyError> {
        self.send_command(Command::COM_INIT_DB, database.as_bytes())
            .await?;
        match self.read_reply().await? {
            Reply::Ok(_) => {
                self.state.database = Some(database.to_owned());
                Ok(())
            }
            Reply::ResultSet { .. } => {
                self.broken = true;
                Err(ProxyError::Internal(
                    "result set in reply to COM_INIT_DB".into(),
                ))
            }
        }
    }

    /// COM_QUIT: ends the session politely (the server counts no aborted client); no reply
    /// is read.
    pub async fn quit(mut self) {
        let _ = self.send_command(Command::COM_QUIT, &[]).await;
    }

    /// COM_PING, bounded by `timeout`.
    pub async fn ping(&mut self, timeout: Duration) -> Result<(), ProxyError> {
        let ping = async {
            self.send_command(Command::COM_PING, &[]).await?;
            match self.read_reply().await? {
                Reply::Ok(_) => Ok(()),
                Reply::ResultSet { .. } => {
                    Err(ProxyError::Internal("bad reply to COM_PING".into()))
                }
            }
        };
        match tokio::time::timeout(timeout, ping).await {
            Ok(r) => r,
            Err(_) => {
                self.broken = true;
                Err(ProxyError::Io("ping timed out".into()))
            }
        }
    }

    /// Sends a command whose reply is a single packet and returns that packet.
    pub async fn simple_command(
        &mut self,
        command: Command,
        body: &[u8],
    ) -> Result<BytesMut, ProxyError> {
        self.send_command(command, body).await?;
        self.read_packet().await
    }
}

/// The SSLRequest upgrade: CLIENT_SSL in the capabilities (kept for the handshake
/// response), the 32-byte SSLRequest, then the TLS handshake on the same socket. A server
/// that does not offer TLS is refused rather than used in clear text.
async fn start_tls(
    ds: &Datasource,
    mut stream: PacketStream<BackendStream>,
    handshake: &HandshakePacket<'_>,
    caps: &mut CapabilityFlags,
    connector: &tokio_rustls::TlsConnector,
    max_packet: u32,
) -> Result<PacketStream<BackendStream>, ProxyError> {
    if !handshake
        .capabilities()
        .contains(CapabilityFlags::CLIENT_SSL)
    {
        return Err(unavailable(
            ds,
            format!(
                "tls = {} but the server does not offer TLS (start it with --ssl-cert and --ssl-key)",
                ds.tls.name()
            ),
        ));
    }
    *caps |= CapabilityFlags::CLIENT_SSL;
    let name = tls::server_name(ds).map_err(|e| unavailable(ds, e))?;
    let mut buf = Vec::new();
    SslRequest::new(*caps, max_packet, UTF8MB4_GENERAL_CI).serialize(&mut buf);
    let io = |e: std::io::Error| unavailable(ds, e);
    stream.write_packet(&buf).map_err(io)?;
    stream.flush().await.map_err(io)?;
    stream
        .map_stream(|plain| plain.upgrade(connector, name))
        .await
        .map_err(|e| {
            unavailable(
                ds,
                format!("TLS handshake failed (tls = {}): {e}", ds.tls.name()),
            )
        })
}

/// The collation the proxy's backend connections use (`utf8mb4_general_ci`).
const UTF8MB4_GENERAL_CI: u8 = 45;

/// An authentication error, with what to change when the server may have refused clear
/// text: MySQL says "insecure transport" (3159), but MariaDB answers a clear-text login
/// under `require_secure_transport = ON` with a plain 1045 "Access denied".
fn auth_hint(
    ds: &Datasource,
    stream: &PacketStream<BackendStream>,
    offers_tls: bool,
    e: auth::AuthError,
) -> String {
    if stream.get_ref().is_tls() {
        return e.to_string();
    }
    match &e {
        auth::AuthError::Refused(_, m) if m.contains("insecure transport") => {
            format!(
                "{e}; set tls = \"required\" (or stricter) on datasource {}",
                ds.name
            )
        }
        auth::AuthError::Refused(1045, _) if offers_tls => format!(
            "{e}; if the server has require_secure_transport = ON, set tls = \"required\" \
             (or stricter) on datasource {}",
            ds.name
        ),
        _ => e.to_string(),
    }
}
