//! An in-process backend for unit tests: a MySQL server that speaks the real protocol on a
//! loopback socket (greeting, `mysql_native_password`, text and binary result sets, OK and
//! ERR packets with status flags, session tracking's OK layout, prepared statements with
//! their bound values), answering each statement from a script the test gives it and
//! recording every command it received.
//!
//! It lets the engine be tested without MariaDB: the proxy's own code (pools, the reply
//! reader, the engine) runs unchanged against it. The packets follow the protocol as
//! MariaDB writes them, built here byte by byte or with `mysql_common` (its greeting, ERR
//! and binary values; not its column definition, whose serializer writes the length before
//! the character set) and never with the proxy's own encoders, so a bug there cannot hide
//! itself.
//!
//! It knows no SQL: a statement no script entry answers gets an ERR naming it. Built in,
//! as a server does them: the transaction statements (`BEGIN`, `START TRANSACTION [READ
//! ONLY]`, `COMMIT [WORK]`, `ROLLBACK [WORK]`, savepoints) and `autocommit` move the status
//! flags (under `autocommit = 0` any other statement opens a transaction); any other `SET`
//! is accepted (tests read what was set from [`MemoryServer::received`]); `COM_PING`,
//! `COM_INIT_DB`, `COM_RESET_CONNECTION`, `COM_STMT_CLOSE`, `COM_STMT_RESET` and
//! `COM_STMT_SEND_LONG_DATA` (no reply, as the protocol says).

use std::sync::{Arc, Mutex};

use mysql_common::constants::{CapabilityFlags, ColumnFlags, ColumnType, Command, StatusFlags};
use mysql_common::io::ParseBuf;
use mysql_common::packets::{ErrPacket, HandshakePacket, NullBitmap, ServerError, SqlState};
use mysql_common::proto::MySerialize;
use mysql_common::value::{BinValue, ServerSide, Value, ValueDeserializer};
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
        /// The table the columns come from, as `database.table` (the `schema`, `table`
        /// and `org_table` of their definitions); empty for computed columns.
        table: String,
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
            table: String::new(),
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
    read_only: bool,
    autocommit: bool,
    /// The client asked for CLIENT_SESSION_TRACK: OKs carry the info string.
    session_track: bool,
    /// Prepared statements: id, text, the parameter types last bound.
    prepared: Vec<Prepared>,
    /// The id the next prepared statement gets (never reused on a connection).
    next_statement: u32,
    script: Arc<Mutex<Script>>,
}

struct Prepared {
    id: u32,
    text: String,
    params: usize,
    types: Vec<(ColumnType, ColumnFlags)>,
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
        | CapabilityFlags::CLIENT_SESSION_TRACK.bits()
        | CapabilityFlags::CLIENT_FOUND_ROWS.bits(),
);

async fn serve(tcp: TcpStream, id: u32, script: Arc<Mutex<Script>>) {
    let _ = tcp.set_nodelay(true);
    let mut conn = Connection {
        stream: PacketStream::new(tcp, 16 << 20),
        id,
        in_transaction: false,
        read_only: false,
        autocommit: true,
        session_track: false,
        prepared: Vec::new(),
        next_statement: 1,
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
        let response = self.stream.expect_packet().await?;
        let caps = response
            .get(..4)
            .map_or(0, |b| u32::from_le_bytes(b.try_into().expect("4 bytes")));
        self.session_track = CapabilityFlags::from_bits_truncate(caps)
            .contains(CapabilityFlags::CLIENT_SESSION_TRACK);
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
            if self.read_only {
                status |= StatusFlags::SERVER_STATUS_IN_TRANS_READONLY.bits();
            }
        }
        status
    }

    fn ok(&mut self, affected: u64, insert_id: u64) -> std::io::Result<()> {
        let mut p = vec![0x00];
        put_lenenc(&mut p, affected);
        put_lenenc(&mut p, insert_id);
        p.extend_from_slice(&self.status().to_le_bytes());
        p.extend_from_slice(&0u16.to_le_bytes());
        if self.session_track {
            // The info string, empty; no session state changes are reported.
            p.push(0);
        }
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
                self.read_only = false;
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
                let id = statement_id(body);
                self.prepared.retain(|p| Some(p.id) != id);
                return Ok(());
            }
            c if c == Command::COM_STMT_SEND_LONG_DATA as u8 => {
                self.record(format!("COM_STMT_SEND_LONG_DATA {:?}", statement_id(body)));
                return Ok(());
            }
            c if c == Command::COM_STMT_RESET as u8 => {
                self.record(format!("COM_STMT_RESET {:?}", statement_id(body)));
                self.ok(0, 0)?;
            }
            _ => self.error(1047, *b"08S01", "Unknown command")?,
        }
        self.stream.flush().await
    }

    fn query(&mut self, text: &str) -> std::io::Result<()> {
        if let Some(reply) = self.scripted(text) {
            if !matches!(reply, Reply::Error { .. }) {
                self.statement_ran();
            }
            return self.reply(&reply, false);
        }
        let upper = text.trim().to_ascii_uppercase();
        let words: Vec<&str> = upper.split_whitespace().collect();
        match words.as_slice() {
            ["BEGIN"] | ["BEGIN", "WORK"] | ["START", "TRANSACTION", ..] => {
                self.in_transaction = true;
                self.read_only = upper.contains("READ ONLY");
            }
            ["COMMIT"] | ["COMMIT", "WORK"] | ["ROLLBACK"] | ["ROLLBACK", "WORK"] => {
                self.in_transaction = false;
                self.read_only = false;
            }
            ["SAVEPOINT", _] | ["RELEASE", "SAVEPOINT", _] | ["ROLLBACK", "TO", ..] => {}
            ["SET", ..] => {
                let compact: String = upper.chars().filter(|c| !c.is_whitespace()).collect();
                if compact.contains("AUTOCOMMIT=0") || compact.contains("AUTOCOMMIT=OFF") {
                    self.autocommit = false;
                } else if compact.contains("AUTOCOMMIT=1") || compact.contains("AUTOCOMMIT=ON") {
                    // Turning autocommit on commits the open transaction.
                    self.autocommit = true;
                    self.in_transaction = false;
                }
            }
            _ => {
                let message = format!("memory backend: no reply scripted for `{text}`");
                return self.error(1064, *b"42000", &message);
            }
        }
        self.ok(0, 0)
    }

    /// A statement other than the transaction statements ran: under `autocommit = 0` it
    /// opens a transaction, as on a server.
    fn statement_ran(&mut self) {
        if !self.autocommit {
            self.in_transaction = true;
        }
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
            Reply::Rows {
                table,
                columns,
                rows,
            } => {
                let mut count = Vec::new();
                put_lenenc(&mut count, columns.len() as u64);
                self.stream.write_packet(&count)?;
                self.columns(table, columns)?;
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

    /// Column definitions (Protocol::ColumnDefinition41), then EOF.
    fn columns(&mut self, table: &str, columns: &[(String, ColumnType)]) -> std::io::Result<()> {
        for (name, column_type) in columns {
            let (charset, length, decimals): (u16, u32, u8) = match column_type {
                ColumnType::MYSQL_TYPE_LONGLONG => (63, 20, 0),
                ColumnType::MYSQL_TYPE_DOUBLE => (63, 22, 31),
                _ => (45, 1020, 0),
            };
            let (schema, table) = table.split_once('.').unwrap_or(("", ""));
            let org_name = if table.is_empty() { "" } else { name.as_str() };
            let mut p = Vec::new();
            for field in ["def", schema, table, table, name, org_name] {
                put_lenenc(&mut p, field.len() as u64);
                p.extend_from_slice(field.as_bytes());
            }
            p.push(0x0C);
            p.extend_from_slice(&charset.to_le_bytes());
            p.extend_from_slice(&length.to_le_bytes());
            p.push(*column_type as u8);
            p.extend_from_slice(&0u16.to_le_bytes());
            p.push(decimals);
            p.extend_from_slice(&[0, 0]);
            self.stream.write_packet(&p)?;
        }
        self.eof()
    }

    fn prepare(&mut self, text: String) -> std::io::Result<()> {
        let (table, columns) = match self.scripted(&text) {
            Some(Reply::Rows { table, columns, .. }) => (table, columns),
            Some(Reply::Error {
                code,
                state,
                message,
            }) => return self.error(code, state, &message),
            Some(Reply::Ok { .. }) => (String::new(), Vec::new()),
            None => {
                let message = format!("memory backend: no reply scripted for `{text}`");
                return self.error(1064, *b"42000", &message);
            }
        };
        let params = text.matches('?').count();
        let id = self.next_statement;
        self.next_statement += 1;
        self.prepared.push(Prepared {
            id,
            text,
            params,
            types: Vec::new(),
        });
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
            self.columns("", &params)?;
        }
        if !columns.is_empty() {
            self.columns(&table, &columns)?;
        }
        Ok(())
    }

    /// COM_STMT_EXECUTE: recorded as `EXECUTE <text> <values>` (the bound values as SQL
    /// literals), then the statement's scripted reply in the binary protocol.
    fn execute(&mut self, body: &[u8]) -> std::io::Result<()> {
        let id = statement_id(body);
        let Some(at) = self.prepared.iter().position(|p| Some(p.id) == id) else {
            return self.error(1243, *b"HY000", "Unknown prepared statement handler");
        };
        let values = match bound_values(&mut self.prepared[at], body) {
            Ok(values) => values,
            Err(e) => return self.error(1210, *b"HY000", &format!("memory backend: {e}")),
        };
        let text = self.prepared[at].text.clone();
        let shown: Vec<String> = values.iter().map(|v| v.as_sql(false)).collect();
        self.record(format!("EXECUTE {text} [{}]", shown.join(", ")));
        match self.scripted(&text) {
            Some(reply) => {
                if !matches!(reply, Reply::Error { .. }) {
                    self.statement_ran();
                }
                self.reply(&reply, true)
            }
            None => self.error(1064, *b"42000", "memory backend: no reply scripted"),
        }
    }
}

fn statement_id(body: &[u8]) -> Option<u32> {
    body.get(..4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
}

/// The values a COM_STMT_EXECUTE binds (`body` after the command byte: id, flags,
/// iteration count, NULL bitmap, new-params-bound flag, types, values), decoded with
/// `mysql_common`; the types are the statement's last bound ones when the packet sends
/// none.
fn bound_values(statement: &mut Prepared, body: &[u8]) -> Result<Vec<Value>, String> {
    let n = statement.params;
    if n == 0 {
        return Ok(Vec::new());
    }
    let mut buf = ParseBuf(body.get(9..).ok_or("a short COM_STMT_EXECUTE")?);
    let bitmap_len = n.div_ceil(8);
    if buf.0.len() < bitmap_len + 1 {
        return Err("a short COM_STMT_EXECUTE".into());
    }
    let bitmap = buf.eat(bitmap_len).to_vec();
    if buf.eat_u8() == 1 {
        if buf.0.len() < 2 * n {
            return Err("a short COM_STMT_EXECUTE".into());
        }
        statement.types = (0..n)
            .map(|_| {
                let t = ColumnType::try_from(buf.eat_u8()).unwrap_or(ColumnType::MYSQL_TYPE_NULL);
                let unsigned = buf.eat_u8() & 0x80 != 0;
                let flags = if unsigned {
                    ColumnFlags::UNSIGNED_FLAG
                } else {
                    ColumnFlags::empty()
                };
                (t, flags)
            })
            .collect();
    }
    if statement.types.len() != n {
        return Err("no parameter types bound".into());
    }
    let mut values = Vec::with_capacity(n);
    for (i, ctx) in statement.types.iter().enumerate() {
        if bitmap[i / 8] & (1 << (i % 8)) != 0 {
            values.push(Value::NULL);
            continue;
        }
        let value: ValueDeserializer<BinValue> = buf.parse(*ctx).map_err(|e| e.to_string())?;
        values.push(value.0);
    }
    Ok(values)
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
