//! An in-process backend for unit tests: a MySQL server that speaks the real protocol on a
//! loopback socket (greeting, `mysql_native_password`, text and binary result sets, OK and
//! ERR packets with status flags, prepared statements), answering each statement from a
//! script the test gives it and recording every command it received.
//!
//! It lets the engine be tested without MariaDB: the proxy's own code (pools, the reply
//! reader, the engine) runs unchanged against it, and the replies are MySQL's own packets,
//! built with `mysql_common` where it serializes them. It knows no SQL: a statement that no
//! script entry answers gets an ERR naming it, so a test never passes on a reply nobody
//! wrote. Built in, as any server: `BEGIN`/`START TRANSACTION`, `COMMIT`, `ROLLBACK` (they
//! move the in-transaction status flag), a `SET` (OK), `COM_PING`, `COM_INIT_DB`,
//! `COM_RESET_CONNECTION`, `COM_STMT_CLOSE` and `COM_STMT_RESET`.

use std::sync::{Arc, Mutex};

use mysql_common::constants::{CapabilityFlags, ColumnType, Command, StatusFlags};
use mysql_common::packets::{
    Column, ErrPacket, HandshakePacket, NullBitmap, ServerError, SqlState,
};
use mysql_common::proto::MySerialize;
use mysql_common::value::{ServerSide, Value};
use tokio::net::{TcpListener, TcpStream};

use crate::protocol::PacketStream;

/// What a statement gets back.
#[derive(Debug, Clone)]
pub enum Reply {
    /// An OK packet.
    Ok {
        /// Affected rows.
        affected: u64,
        /// The last insert id.
        insert_id: u64,
    },
    /// A result set: column names and types, then the rows (`None` is NULL). A text
    /// statement gets text rows; an executed prepared statement, binary rows of the same
    /// values (each parsed as its column's type).
    Rows {
        /// The columns, by name and type.
        columns: Vec<(String, ColumnType)>,
        /// The rows, each a value per column, as the text protocol writes them.
        rows: Vec<Vec<Option<String>>>,
    },
    /// An ERR packet.
    Error {
        /// The error number.
        code: u16,
        /// The SQL state.
        state: [u8; 5],
        /// The message.
        message: String,
    },
}

impl Reply {
    /// An OK without rows.
    pub fn ok() -> Self {
        Reply::Ok {
            affected: 0,
            insert_id: 0,
        }
    }

    /// A result set of text columns (`VAR_STRING`).
    pub fn rows(columns: &[&str], rows: &[&[Option<&str>]]) -> Self {
        Reply::Rows {
            columns: columns
                .iter()
                .map(|c| ((*c).to_owned(), ColumnType::MYSQL_TYPE_VAR_STRING))
                .collect(),
            rows: rows
                .iter()
                .map(|r| r.iter().map(|v| v.map(str::to_owned)).collect())
                .collect(),
        }
    }
}

/// The script: the reply to each statement text (compared exactly), and what it received.
#[derive(Debug, Default)]
struct Script {
    replies: Vec<(String, Reply)>,
    /// Each command, with the connection (its thread id) that received it.
    received: Vec<(u32, String)>,
}

/// A running in-process server. Dropping it stops accepting; connections already open
/// run until their client closes them.
pub struct MemoryServer {
    address: std::net::SocketAddr,
    script: Arc<Mutex<Script>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for MemoryServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl MemoryServer {
    /// Starts a server on `127.0.0.1` at a port of the system's choosing.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let address = listener.local_addr().expect("local address");
        let script = Arc::new(Mutex::new(Script::default()));
        let shared = script.clone();
        let accept = tokio::spawn(async move {
            let mut next_id = 1;
            while let Ok((tcp, _)) = listener.accept().await {
                tokio::spawn(serve(tcp, next_id, shared.clone()));
                next_id += 1;
            }
        });
        Self {
            address,
            script,
            accept,
        }
    }

    /// `host:port`, for a datasource's `address`.
    pub fn address(&self) -> String {
        self.address.to_string()
    }

    /// Answers `statement` (its exact text; as a prepared statement too) with `reply`,
    /// in place of any reply given it before.
    pub fn answer(&self, statement: &str, reply: Reply) {
        let mut script = self.script.lock().expect("script");
        script.replies.retain(|(s, _)| s != statement);
        script.replies.push((statement.to_owned(), reply));
    }

    /// What it received so far, in order: each statement's text; `PREPARE <text>`,
    /// `EXECUTE <text>` for a prepared statement; `COM_INIT_DB <db>`, `COM_RESET_CONNECTION`.
    pub fn received(&self) -> Vec<String> {
        self.received_by_connection()
            .into_iter()
            .map(|(_, s)| s)
            .collect()
    }

    /// As [`MemoryServer::received`], each with the thread id of the connection that
    /// received it.
    pub fn received_by_connection(&self) -> Vec<(u32, String)> {
        self.script.lock().expect("script").received.clone()
    }

    /// What it received that is not a connection's housekeeping (`SET`, `COM_*`): the
    /// statements an engine test checks.
    pub fn statements(&self) -> Vec<String> {
        self.received()
            .into_iter()
            .filter(|s| !s.starts_with("SET ") && !s.starts_with("COM_"))
            .collect()
    }
}

/// One connection's state: its status flags and its prepared statements.
struct Connection {
    stream: PacketStream<TcpStream>,
    id: u32,
    in_transaction: bool,
    autocommit: bool,
    prepared: Vec<(u32, String)>,
    script: Arc<Mutex<Script>>,
}

const CAPABILITIES: CapabilityFlags = CapabilityFlags::from_bits_truncate(
    CapabilityFlags::CLIENT_LONG_PASSWORD.bits()
        | CapabilityFlags::CLIENT_LONG_FLAG.bits()
        | CapabilityFlags::CLIENT_CONNECT_WITH_DB.bits()
        | CapabilityFlags::CLIENT_PROTOCOL_41.bits()
        | CapabilityFlags::CLIENT_TRANSACTIONS.bits()
        | CapabilityFlags::CLIENT_SECURE_CONNECTION.bits()
        | CapabilityFlags::CLIENT_MULTI_RESULTS.bits()
        | CapabilityFlags::CLIENT_PS_MULTI_RESULTS.bits()
        | CapabilityFlags::CLIENT_PLUGIN_AUTH.bits()
        | CapabilityFlags::CLIENT_FOUND_ROWS.bits(),
);

async fn serve(tcp: TcpStream, id: u32, script: Arc<Mutex<Script>>) {
    let _ = tcp.set_nodelay(true);
    let mut conn = Connection {
        stream: PacketStream::new(tcp, 16 << 20),
        id,
        in_transaction: false,
        autocommit: true,
        prepared: Vec::new(),
        script,
    };
    if conn.handshake(id).await.is_err() {
        return;
    }
    loop {
        // Each command starts a new sequence.
        conn.stream.reset_seq();
        match conn.stream.read_packet().await {
            Ok(Some(packet)) if conn.command(&packet).await.is_ok() => {}
            _ => return,
        }
    }
}

impl Connection {
    async fn handshake(&mut self, id: u32) -> std::io::Result<()> {
        let greeting = HandshakePacket::new(
            10,
            &b"10.11.0-MariaDB-memory"[..],
            id,
            *b"abcdefgh",
            Some(&b"ijklmnopqrst"[..]),
            CAPABILITIES,
            45,
            StatusFlags::SERVER_STATUS_AUTOCOMMIT,
            Some(&b"mysql_native_password"[..]),
        );
        let mut buf = Vec::new();
        greeting.serialize(&mut buf);
        self.stream.write_packet(&buf)?;
        self.stream.flush().await?;
        // Any login is accepted: the proxy's authentication is tested against MariaDB.
        self.stream.expect_packet().await?;
        self.ok(0, 0)?;
        self.stream.flush().await
    }

    fn status(&self) -> u16 {
        let mut status = 0;
        if self.autocommit {
            status |= StatusFlags::SERVER_STATUS_AUTOCOMMIT.bits();
        }
        if self.in_transaction {
            status |= StatusFlags::SERVER_STATUS_IN_TRANS.bits();
        }
        status
    }

    fn ok(&mut self, affected: u64, insert_id: u64) -> std::io::Result<()> {
        let mut p = vec![0x00];
        put_lenenc(&mut p, affected);
        put_lenenc(&mut p, insert_id);
        p.extend_from_slice(&self.status().to_le_bytes());
        p.extend_from_slice(&0u16.to_le_bytes());
        self.stream.write_packet(&p)
    }

    fn eof(&mut self) -> std::io::Result<()> {
        let mut p = vec![0xFE, 0, 0];
        p.extend_from_slice(&self.status().to_le_bytes());
        self.stream.write_packet(&p)
    }

    fn error(&mut self, code: u16, state: [u8; 5], message: &str) -> std::io::Result<()> {
        let error = ServerError::new(code, Some(SqlState::new(state)), message.as_bytes());
        let mut p = Vec::new();
        ErrPacket::Error(error).serialize(&mut p);
        self.stream.write_packet(&p)
    }

    fn record(&self, what: String) {
        let id = self.id;
        self.script
            .lock()
            .expect("script")
            .received
            .push((id, what));
    }

    fn scripted(&self, statement: &str) -> Option<Reply> {
        let script = self.script.lock().expect("script");
        script
            .replies
            .iter()
            .find(|(s, _)| s == statement)
            .map(|(_, r)| r.clone())
    }

    async fn command(&mut self, packet: &[u8]) -> std::io::Result<()> {
        let (&code, body) = packet.split_first().unwrap_or((&0, &[]));
        let text = String::from_utf8_lossy(body).into_owned();
        match code {
            c if c == Command::COM_QUIT as u8 => return Err(std::io::ErrorKind::Other.into()),
            c if c == Command::COM_PING as u8 => self.ok(0, 0)?,
            c if c == Command::COM_INIT_DB as u8 => {
                self.record(format!("COM_INIT_DB {text}"));
                self.ok(0, 0)?;
            }
            c if c == Command::COM_RESET_CONNECTION as u8 => {
                self.record("COM_RESET_CONNECTION".to_owned());
                self.in_transaction = false;
                self.autocommit = true;
                self.prepared.clear();
                self.ok(0, 0)?;
            }
            c if c == Command::COM_QUERY as u8 => {
                self.record(text.clone());
                self.query(&text)?;
            }
            c if c == Command::COM_STMT_PREPARE as u8 => {
                self.record(format!("PREPARE {text}"));
                self.prepare(text)?;
            }
            c if c == Command::COM_STMT_EXECUTE as u8 => self.execute(body)?,
            c if c == Command::COM_STMT_CLOSE as u8 => {
                let id = body
                    .get(..4)
                    .map(|b| u32::from_le_bytes(b.try_into().unwrap()));
                self.prepared.retain(|(p, _)| Some(*p) != id);
                return Ok(());
            }
            c if c == Command::COM_STMT_RESET as u8 => self.ok(0, 0)?,
            _ => self.error(1047, *b"08S01", "Unknown command")?,
        }
        self.stream.flush().await
    }

    fn query(&mut self, text: &str) -> std::io::Result<()> {
        if let Some(reply) = self.scripted(text) {
            return self.reply(&reply, false);
        }
        let upper = text.trim().to_ascii_uppercase();
        match upper.as_str() {
            "BEGIN" | "START TRANSACTION" => self.in_transaction = true,
            "COMMIT" | "ROLLBACK" => self.in_transaction = false,
            _ if upper.starts_with("START TRANSACTION") => self.in_transaction = true,
            _ if upper.starts_with("SET ") => {
                if upper.contains("AUTOCOMMIT = 0") || upper.contains("AUTOCOMMIT=0") {
                    self.autocommit = false;
                } else if upper.contains("AUTOCOMMIT = 1") || upper.contains("AUTOCOMMIT=1") {
                    self.autocommit = true;
                }
            }
            _ => {
                let message = format!("memory backend: no reply scripted for `{text}`");
                return self.error(1064, *b"42000", &message);
            }
        }
        self.ok(0, 0)
    }

    fn reply(&mut self, reply: &Reply, binary: bool) -> std::io::Result<()> {
        match reply {
            Reply::Ok {
                affected,
                insert_id,
            } => self.ok(*affected, *insert_id),
            Reply::Error {
                code,
                state,
                message,
            } => self.error(*code, *state, message),
            Reply::Rows { columns, rows } => {
                let mut count = Vec::new();
                put_lenenc(&mut count, columns.len() as u64);
                self.stream.write_packet(&count)?;
                self.columns(columns)?;
                for row in rows {
                    let payload = if binary {
                        binary_row(columns, row)
                    } else {
                        text_row(row)
                    };
                    self.stream.write_packet(&payload)?;
                }
                self.eof()
            }
        }
    }

    fn columns(&mut self, columns: &[(String, ColumnType)]) -> std::io::Result<()> {
        for (name, column_type) in columns {
            let column = Column::new(*column_type)
                .with_name(name.as_bytes())
                .with_schema(b"orders")
                .with_character_set(if is_text(*column_type) { 45 } else { 63 });
            let mut p = Vec::new();
            column.serialize(&mut p);
            self.stream.write_packet(&p)?;
        }
        self.eof()
    }

    fn prepare(&mut self, text: String) -> std::io::Result<()> {
        let columns = match self.scripted(&text) {
            Some(Reply::Rows { columns, .. }) => columns,
            Some(Reply::Error {
                code,
                state,
                message,
            }) => return self.error(code, state, &message),
            Some(Reply::Ok { .. }) => Vec::new(),
            None => {
                let message = format!("memory backend: no reply scripted for `{text}`");
                return self.error(1064, *b"42000", &message);
            }
        };
        let params = text.matches('?').count();
        let id = self.prepared.last().map_or(1, |(id, _)| id + 1);
        self.prepared.push((id, text));
        let mut p = vec![0x00];
        p.extend_from_slice(&id.to_le_bytes());
        p.extend_from_slice(&(columns.len() as u16).to_le_bytes());
        p.extend_from_slice(&(params as u16).to_le_bytes());
        p.extend_from_slice(&[0, 0, 0]);
        self.stream.write_packet(&p)?;
        if params > 0 {
            let params: Vec<_> = (0..params)
                .map(|_| ("?".to_owned(), ColumnType::MYSQL_TYPE_VAR_STRING))
                .collect();
            self.columns(&params)?;
        }
        if !columns.is_empty() {
            self.columns(&columns)?;
        }
        Ok(())
    }

    fn execute(&mut self, body: &[u8]) -> std::io::Result<()> {
        let id = body
            .get(..4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()));
        let Some((_, text)) = self.prepared.iter().find(|(p, _)| Some(*p) == id).cloned() else {
            return self.error(1243, *b"HY000", "Unknown prepared statement handler");
        };
        self.record(format!("EXECUTE {text}"));
        match self.scripted(&text) {
            Some(reply) => self.reply(&reply, true),
            None => self.error(1064, *b"42000", "memory backend: no reply scripted"),
        }
    }
}

fn is_text(t: ColumnType) -> bool {
    matches!(
        t,
        ColumnType::MYSQL_TYPE_VAR_STRING
            | ColumnType::MYSQL_TYPE_STRING
            | ColumnType::MYSQL_TYPE_VARCHAR
            | ColumnType::MYSQL_TYPE_BLOB
    )
}

fn put_lenenc(out: &mut Vec<u8>, n: u64) {
    match n {
        0..=250 => out.push(n as u8),
        251..=0xFFFF => {
            out.push(0xFC);
            out.extend_from_slice(&(n as u16).to_le_bytes());
        }
        0x1_0000..=0xFF_FFFF => {
            out.push(0xFD);
            out.extend_from_slice(&(n as u32).to_le_bytes()[..3]);
        }
        _ => {
            out.push(0xFE);
            out.extend_from_slice(&n.to_le_bytes());
        }
    }
}

fn text_row(row: &[Option<String>]) -> Vec<u8> {
    let mut p = Vec::new();
    for value in row {
        match value {
            None => p.push(0xFB),
            Some(v) => {
                put_lenenc(&mut p, v.len() as u64);
                p.extend_from_slice(v.as_bytes());
            }
        }
    }
    p
}

/// A binary row: each value as its column's type reads it (`LONGLONG` and `DOUBLE` parsed
/// from the text, the string types as bytes; no other type is scripted).
fn binary_row(columns: &[(String, ColumnType)], row: &[Option<String>]) -> Vec<u8> {
    let mut bitmap = NullBitmap::<ServerSide>::new(columns.len());
    let mut values = Vec::new();
    for (i, ((_, column_type), value)) in columns.iter().zip(row).enumerate() {
        let Some(v) = value else {
            bitmap.set(i, true);
            continue;
        };
        let value = match column_type {
            ColumnType::MYSQL_TYPE_LONGLONG => Value::Int(v.parse().expect("an integer")),
            ColumnType::MYSQL_TYPE_DOUBLE => Value::Double(v.parse().expect("a double")),
            t if is_text(*t) => Value::Bytes(v.as_bytes().to_vec()),
            t => panic!("memory backend: no binary encoding for {t:?}"),
        };
        value.serialize(&mut values);
    }
    let mut p = vec![0x00];
    p.extend_from_slice(bitmap.as_ref());
    p.extend_from_slice(&values);
    p
}
