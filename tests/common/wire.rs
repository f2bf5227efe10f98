//! A bare MySQL client that records every field of every reply that carries a status word
//! (OK, the EOF after column definitions, the end of a result set, the prepare reply): the
//! status flags, warning count, affected rows, insert id, info and session-state data. The
//! status differential (`tests/status_differential.rs`) runs one script against MariaDB
//! directly and through the proxy and compares the two traces line by line.

#![allow(dead_code)]

use std::net::SocketAddr;

use mysql_common::constants::CapabilityFlags as F;

use super::raw::{greeting_nonce, read_packet, write_packet};

/// What the client negotiates beyond the protocol-4.1 basics.
#[derive(Debug, Clone, Copy, Default)]
pub struct WireOptions {
    /// CLIENT_MULTI_STATEMENTS (and MULTI_RESULTS).
    pub multi_statements: bool,
    /// CLIENT_SESSION_TRACK.
    pub session_track: bool,
    /// CLIENT_DEPRECATE_EOF.
    pub deprecate_eof: bool,
    /// CLIENT_FOUND_ROWS.
    pub found_rows: bool,
    /// CLIENT_INTERACTIVE.
    pub interactive: bool,
    /// CLIENT_LOCAL_FILES.
    pub local_files: bool,
}

/// How the server ended a connection ([`WireClient::closed_within`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed {
    /// The error packet it sent first, if any.
    pub error: Option<u16>,
    /// It reset the connection (the client's next command fails at once) rather than
    /// closed it.
    pub reset: bool,
}

/// A parameter of a prepared-statement execution.
#[derive(Debug, Clone)]
pub enum Param {
    /// A signed BIGINT.
    Int(i64),
    /// A string (VAR_STRING).
    Str(String),
    /// NULL.
    Null,
}

/// A prepared statement as the prepare reply described it.
#[derive(Debug, Clone, Copy)]
pub struct Prepared {
    /// Its id (connection-local: never compared).
    pub id: u32,
    /// Parameters.
    pub params: u16,
    /// Result columns.
    pub columns: u16,
}

/// A bare client on a socket.
pub struct WireClient {
    stream: tokio::net::TcpStream,
    options: WireOptions,
    /// The greeting's status flags.
    pub greeting_status: u16,
    /// The message of the last error packet read.
    pub last_error: String,
    /// The handshake's OK (its status word), as a trace line.
    pub welcome: String,
}

/// SERVER_STATUS_* names, lowest bit first (MariaDB's `mysql_com.h`).
const STATUS_NAMES: [&str; 16] = [
    "IN_TRANS",
    "AUTOCOMMIT",
    "0x4",
    "MORE_RESULTS",
    "NO_GOOD_INDEX",
    "NO_INDEX",
    "CURSOR_EXISTS",
    "LAST_ROW_SENT",
    "DB_DROPPED",
    "NO_BACKSLASH_ESCAPES",
    "METADATA_CHANGED",
    "WAS_SLOW",
    "PS_OUT_PARAMS",
    "IN_TRANS_READONLY",
    "SESSION_STATE_CHANGED",
    "ANSI_QUOTES",
];

/// A status word by its flags' names (`AUTOCOMMIT|IN_TRANS`), `-` when none is set.
pub fn status_names(status: u16) -> String {
    let names: Vec<&str> = (0..16)
        .filter(|bit| status & (1 << bit) != 0)
        .map(|bit| STATUS_NAMES[bit])
        .collect();
    if names.is_empty() {
        "-".to_owned()
    } else {
        names.join("|")
    }
}

fn lenenc(p: &[u8], at: &mut usize) -> u64 {
    let first = p[*at];
    *at += 1;
    let take = |at: &mut usize, n: usize| {
        let mut v = 0u64;
        for i in 0..n {
            v |= u64::from(p[*at + i]) << (8 * i);
        }
        *at += n;
        v
    };
    match first {
        0xFC => take(at, 2),
        0xFD => take(at, 3),
        0xFE => take(at, 8),
        b => u64::from(b),
    }
}

fn lenenc_bytes<'a>(p: &'a [u8], at: &mut usize) -> &'a [u8] {
    let n = lenenc(p, at) as usize;
    let s = &p[*at..*at + n];
    *at += n;
    s
}

/// The session-state data of an OK packet, one entry per change (or its bytes, when it
/// does not read as entries).
fn session_state(data: &[u8]) -> String {
    std::panic::catch_unwind(|| {
        let mut at = 0;
        let mut out = Vec::new();
        while at < data.len() {
            let kind = data[at];
            at += 1;
            let entry = lenenc_bytes(data, &mut at);
            let mut e = 0;
            let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
            out.push(match kind {
                0 => {
                    let name = text(lenenc_bytes(entry, &mut e));
                    let value = text(lenenc_bytes(entry, &mut e));
                    format!("var {name}={value}")
                }
                1 => format!("schema {}", text(lenenc_bytes(entry, &mut e))),
                2 => format!("state {}", text(entry)),
                4 => format!("characteristics {}", text(lenenc_bytes(entry, &mut e))),
                5 => format!("trx_state {}", text(lenenc_bytes(entry, &mut e))),
                k => format!("type{k} {:?}", text(entry)),
            });
        }
        out.join("; ")
    })
    .unwrap_or_else(|_| format!("unreadable {data:?}"))
}

impl WireClient {
    /// Connects to `addr` as `user` (mysql_native_password; an empty password sends an
    /// empty proof) to `db`.
    pub async fn connect(
        addr: SocketAddr,
        user: &str,
        password: &str,
        db: Option<&str>,
        options: WireOptions,
    ) -> Result<Self, (u16, String)> {
        use tokio::io::AsyncWriteExt;
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.set_nodelay(true).unwrap();
        let (_, hello) = read_packet(&mut stream).await;
        assert_eq!(hello[0], 10, "protocol version 10 handshake");
        let nonce = greeting_nonce(&hello);
        // Version, NUL, thread id, scramble part 1, filler, capabilities, collation.
        let at = 1 + hello[1..].iter().position(|&b| b == 0).unwrap() + 1 + 4 + 8 + 1 + 2 + 1;
        let greeting_status = u16::from_le_bytes([hello[at], hello[at + 1]]);
        let proof = |nonce: &[u8]| {
            if password.is_empty() {
                Vec::new()
            } else {
                mysql_common::scramble::scramble_native(nonce, password.as_bytes())
                    .unwrap()
                    .to_vec()
            }
        };
        let resp = response(user, &proof(&nonce), db, options);
        write_packet(&mut stream, 1, &resp).await;
        stream.flush().await.unwrap();
        let (seq, mut reply) = read_packet(&mut stream).await;
        if reply[0] == 0xFE {
            // Auth switch to mysql_native_password with a new nonce.
            let at = 1 + reply[1..].iter().position(|&b| b == 0).unwrap() + 1;
            let nonce: Vec<u8> = reply[at..]
                .iter()
                .copied()
                .take_while(|&b| b != 0)
                .collect();
            write_packet(&mut stream, seq.wrapping_add(1), &proof(&nonce)).await;
            stream.flush().await.unwrap();
            reply = read_packet(&mut stream).await.1;
        }
        let mut client = Self {
            stream,
            options,
            greeting_status,
            last_error: String::new(),
            welcome: String::new(),
        };
        match reply[0] {
            0x00 => {
                client.welcome = client.ok_line("OK", &reply);
                Ok(client)
            }
            0xFF => Err((
                u16::from_le_bytes([reply[1], reply[2]]),
                String::from_utf8_lossy(&reply[9..]).into_owned(),
            )),
            b => panic!("unexpected handshake reply {b:#x}"),
        }
    }

    /// The socket, for tests that read or wait at their own pace.
    pub fn socket(&mut self) -> &mut tokio::net::TcpStream {
        &mut self.stream
    }

    async fn send(&mut self, payload: &[u8]) {
        use tokio::io::AsyncWriteExt;
        write_packet(&mut self.stream, 0, payload).await;
        self.stream.flush().await.unwrap();
    }

    async fn packet(&mut self) -> Vec<u8> {
        read_packet(&mut self.stream).await.1
    }

    fn ok_line(&self, what: &str, p: &[u8]) -> String {
        let mut at = 1;
        let affected = lenenc(p, &mut at);
        let insert_id = lenenc(p, &mut at);
        let status = u16::from_le_bytes([p[at], p[at + 1]]);
        let warnings = u16::from_le_bytes([p[at + 2], p[at + 3]]);
        at += 4;
        let (info, state) = if self.options.session_track {
            let info = if at < p.len() {
                lenenc_bytes(p, &mut at).to_vec()
            } else {
                Vec::new()
            };
            let state = if status & 0x4000 != 0 && at < p.len() {
                session_state(lenenc_bytes(p, &mut at))
            } else {
                String::new()
            };
            (info, state)
        } else {
            (p[at..].to_vec(), String::new())
        };
        let mut line = format!(
            "{what} affected={affected} insert_id={insert_id} status={} warnings={warnings}",
            status_names(status)
        );
        if !info.is_empty() {
            line.push_str(&format!(" info={:?}", String::from_utf8_lossy(&info)));
        }
        if !state.is_empty() {
            line.push_str(&format!(" state=[{state}]"));
        }
        line
    }

    fn eof_line(&self, what: &str, p: &[u8]) -> String {
        if p[0] == 0xFE && p.len() >= 7 && self.options.deprecate_eof {
            return self.ok_line(what, p);
        }
        let warnings = u16::from_le_bytes([p[1], p[2]]);
        let status = u16::from_le_bytes([p[3], p[4]]);
        format!("{what} status={} warnings={warnings}", status_names(status))
    }

    fn is_end(&self, p: &[u8]) -> bool {
        p[0] == 0xFE && (p.len() < 9 || self.options.deprecate_eof && p.len() < 0xFF_FFFF)
    }

    fn err_line(&mut self, p: &[u8]) -> String {
        self.last_error = String::from_utf8_lossy(&p[9..]).into_owned();
        format!(
            "ERR {} {}",
            u16::from_le_bytes([p[1], p[2]]),
            String::from_utf8_lossy(&p[3..9])
        )
    }

    /// Reads the replies of one command (every result of a multi-result reply) as trace
    /// lines.
    async fn replies(&mut self, trace: &mut Vec<String>) {
        loop {
            let first = self.packet().await;
            let more = match first[0] {
                0x00 => {
                    let line = self.ok_line("OK", &first);
                    trace.push(line);
                    ok_status(&first) & 0x0008 != 0
                }
                0xFF => {
                    trace.push(self.err_line(&first));
                    false
                }
                0xFB => {
                    trace.push("LOCAL INFILE request (no file sent)".to_owned());
                    // An empty file.
                    write_packet(&mut self.stream, 2, &[]).await;
                    continue;
                }
                _ => self.result_set(&first, trace).await,
            };
            if !more {
                return;
            }
        }
    }

    /// A result set after its column-count packet; true when more results follow.
    async fn result_set(&mut self, first: &[u8], trace: &mut Vec<String>) -> bool {
        let mut at = 0;
        let columns = lenenc(first, &mut at);
        for _ in 0..columns {
            self.packet().await;
        }
        if !self.options.deprecate_eof {
            let eof = self.packet().await;
            let line = self.eof_line(&format!("COLUMNS {columns}"), &eof);
            trace.push(line);
            if end_status(&eof, false) & 0x0040 != 0 {
                // A cursor is open: the rows come with COM_STMT_FETCH.
                return false;
            }
        } else {
            trace.push(format!("COLUMNS {columns}"));
        }
        let mut rows = 0u64;
        loop {
            let p = self.packet().await;
            if p[0] == 0xFF {
                trace.push(format!("ROWS {rows} then {}", self.err_line(&p)));
                return false;
            }
            if self.is_end(&p) {
                let line = self.eof_line(&format!("ROWS {rows}"), &p);
                trace.push(line);
                return end_status(&p, self.options.deprecate_eof) & 0x0008 != 0;
            }
            rows += 1;
        }
    }

    /// COM_QUERY; one trace line per status-carrying packet.
    pub async fn query(&mut self, sql: &str) -> Vec<String> {
        let mut payload = vec![0x03];
        payload.extend_from_slice(sql.as_bytes());
        self.send(&payload).await;
        let mut trace = Vec::new();
        self.replies(&mut trace).await;
        trace
    }

    /// COM_QUERY of a one-row query: its first value as text (`None` for NULL); panics on
    /// anything but a result set.
    pub async fn value(&mut self, sql: &str) -> Option<String> {
        self.rows(sql)
            .await
            .into_iter()
            .next()?
            .into_iter()
            .next()?
    }

    /// COM_QUERY of a query: every row, each value as text (`None` for NULL); panics on
    /// anything but a result set.
    pub async fn rows(&mut self, sql: &str) -> Vec<Vec<Option<String>>> {
        let mut payload = vec![0x03];
        payload.extend_from_slice(sql.as_bytes());
        self.send(&payload).await;
        let first = self.packet().await;
        assert!(
            first[0] != 0xFF && first[0] != 0x00,
            "{sql}: {}",
            String::from_utf8_lossy(&first)
        );
        let mut at = 0;
        let columns = lenenc(&first, &mut at);
        for _ in 0..columns {
            self.packet().await;
        }
        if !self.options.deprecate_eof {
            self.packet().await;
        }
        let mut out = Vec::new();
        loop {
            let p = self.packet().await;
            if self.is_end(&p) {
                return out;
            }
            let mut at = 0;
            let mut row = Vec::new();
            for _ in 0..columns {
                if p[at] == 0xFB {
                    at += 1;
                    row.push(None);
                } else {
                    row.push(Some(
                        String::from_utf8_lossy(lenenc_bytes(&p, &mut at)).into_owned(),
                    ));
                }
            }
            out.push(row);
        }
    }

    /// COM_QUERY of a `LOAD DATA LOCAL INFILE`: answers the file request with `contents`
    /// in packets of at most `chunk` bytes.
    pub async fn load_local(&mut self, sql: &str, contents: &[u8], chunk: usize) -> Vec<String> {
        use tokio::io::AsyncWriteExt;
        let mut payload = vec![0x03];
        payload.extend_from_slice(sql.as_bytes());
        self.send(&payload).await;
        let mut trace = Vec::new();
        let (seq, first) = read_packet(&mut self.stream).await;
        if first[0] != 0xFB {
            // Refused (or answered) without asking for the file.
            match first[0] {
                0xFF => trace.push(self.err_line(&first)),
                0x00 => trace.push(self.ok_line("OK", &first)),
                b => trace.push(format!("unexpected {b:#x}")),
            }
            return trace;
        }
        trace.push(format!(
            "LOCAL INFILE request {}",
            String::from_utf8_lossy(&first[1..])
        ));
        let mut seq = seq.wrapping_add(1);
        for part in contents.chunks(chunk.max(1)) {
            write_packet(&mut self.stream, seq, part).await;
            seq = seq.wrapping_add(1);
        }
        write_packet(&mut self.stream, seq, &[]).await;
        self.stream.flush().await.unwrap();
        self.replies(&mut trace).await;
        trace
    }

    /// As [`WireClient::load_local`], the file sent in `parts` with `pause` before each
    /// (a client that reads its file slowly).
    pub async fn load_local_paced(
        &mut self,
        sql: &str,
        parts: &[Vec<u8>],
        pause: std::time::Duration,
    ) -> Vec<String> {
        use tokio::io::AsyncWriteExt;
        let mut payload = vec![0x03];
        payload.extend_from_slice(sql.as_bytes());
        self.send(&payload).await;
        let (seq, first) = read_packet(&mut self.stream).await;
        if first[0] != 0xFB {
            return vec![self.err_line(&first)];
        }
        let mut seq = seq.wrapping_add(1);
        for part in parts {
            tokio::time::sleep(pause).await;
            write_packet(&mut self.stream, seq, part).await;
            self.stream.flush().await.unwrap();
            seq = seq.wrapping_add(1);
        }
        write_packet(&mut self.stream, seq, &[]).await;
        self.stream.flush().await.unwrap();
        let mut trace = Vec::new();
        self.replies(&mut trace).await;
        trace
    }

    /// A command without an argument that answers OK (COM_PING, COM_RESET_CONNECTION...).
    pub async fn simple(&mut self, code: u8, body: &[u8]) -> Vec<String> {
        let mut payload = vec![code];
        payload.extend_from_slice(body);
        self.send(&payload).await;
        let mut trace = Vec::new();
        self.replies(&mut trace).await;
        trace
    }

    /// COM_SET_OPTION (its reply is an EOF packet).
    pub async fn set_option(&mut self, option: u16) -> Vec<String> {
        let mut payload = vec![0x1B];
        payload.extend_from_slice(&option.to_le_bytes());
        self.send(&payload).await;
        let p = self.packet().await;
        vec![if p[0] == 0xFF {
            self.err_line(&p)
        } else {
            self.eof_line("SET_OPTION", &p)
        }]
    }

    /// COM_STMT_PREPARE: the statement and its trace lines.
    pub async fn prepare(&mut self, sql: &str) -> (Option<Prepared>, Vec<String>) {
        let mut payload = vec![0x16];
        payload.extend_from_slice(sql.as_bytes());
        self.send(&payload).await;
        let p = self.packet().await;
        if p[0] == 0xFF {
            return (None, vec![self.err_line(&p)]);
        }
        let id = u32::from_le_bytes([p[1], p[2], p[3], p[4]]);
        let columns = u16::from_le_bytes([p[5], p[6]]);
        let params = u16::from_le_bytes([p[7], p[8]]);
        let warnings = u16::from_le_bytes([p[10], p[11]]);
        let mut trace = vec![format!(
            "PREPARED params={params} columns={columns} warnings={warnings}"
        )];
        for (n, what) in [(params, "PARAMS"), (columns, "COLUMNS")] {
            if n == 0 {
                continue;
            }
            for _ in 0..n {
                self.packet().await;
            }
            if !self.options.deprecate_eof {
                let eof = self.packet().await;
                trace.push(self.eof_line(&format!("{what} {n}"), &eof));
            }
        }
        (
            Some(Prepared {
                id,
                params,
                columns,
            }),
            trace,
        )
    }

    /// COM_STMT_EXECUTE with `params` (types sent), `cursor` for CURSOR_TYPE_READ_ONLY.
    pub async fn execute(&mut self, stmt: Prepared, params: &[Param], cursor: bool) -> Vec<String> {
        let mut payload = vec![0x17];
        payload.extend_from_slice(&stmt.id.to_le_bytes());
        payload.push(u8::from(cursor));
        payload.extend_from_slice(&1u32.to_le_bytes());
        if stmt.params > 0 {
            let mut bitmap = vec![0u8; params.len().div_ceil(8)];
            for (i, p) in params.iter().enumerate() {
                if matches!(p, Param::Null) {
                    bitmap[i / 8] |= 1 << (i % 8);
                }
            }
            payload.extend_from_slice(&bitmap);
            payload.push(1);
            for p in params {
                let t: u16 = match p {
                    Param::Int(_) => 8,
                    Param::Str(_) => 253,
                    Param::Null => 6,
                };
                payload.extend_from_slice(&t.to_le_bytes());
            }
            for p in params {
                match p {
                    Param::Int(v) => payload.extend_from_slice(&v.to_le_bytes()),
                    Param::Str(s) => {
                        assert!(s.len() < 251);
                        payload.push(s.len() as u8);
                        payload.extend_from_slice(s.as_bytes());
                    }
                    Param::Null => {}
                }
            }
        }
        self.send(&payload).await;
        let mut trace = Vec::new();
        self.replies(&mut trace).await;
        trace
    }

    /// COM_STMT_FETCH of `rows` rows.
    pub async fn fetch(&mut self, stmt: Prepared, rows: u32) -> Vec<String> {
        let mut payload = vec![0x1C];
        payload.extend_from_slice(&stmt.id.to_le_bytes());
        payload.extend_from_slice(&rows.to_le_bytes());
        self.send(&payload).await;
        let mut trace = Vec::new();
        let mut n = 0u64;
        loop {
            let p = self.packet().await;
            if p[0] == 0xFF {
                trace.push(self.err_line(&p));
                return trace;
            }
            if self.is_end(&p) {
                trace.push(self.eof_line(&format!("FETCHED {n}"), &p));
                return trace;
            }
            n += 1;
        }
    }

    /// COM_STMT_RESET.
    pub async fn reset_statement(&mut self, stmt: Prepared) -> Vec<String> {
        self.simple(0x1A, &stmt.id.to_le_bytes()).await
    }

    /// COM_STMT_CLOSE (no reply).
    pub async fn close_statement(&mut self, stmt: Prepared) {
        let mut payload = vec![0x19];
        payload.extend_from_slice(&stmt.id.to_le_bytes());
        self.send(&payload).await;
    }

    /// Waits up to `within` for the server to end the connection: the error packet it
    /// sent first, if any, and whether it reset the connection rather than closed it
    /// (`None`: still open).
    pub async fn closed_within(&mut self, within: std::time::Duration) -> Option<Closed> {
        use tokio::io::AsyncReadExt;
        let mut all = Vec::new();
        let closed = tokio::time::timeout(within, async {
            let mut buf = vec![0u8; 1 << 12];
            loop {
                match self.stream.read(&mut buf).await {
                    Ok(0) => return false,
                    Err(e) => return e.kind() == std::io::ErrorKind::ConnectionReset,
                    Ok(n) => all.extend_from_slice(&buf[..n]),
                }
            }
        })
        .await;
        let reset = closed.ok()?;
        Some(Closed {
            error: (all.len() >= 7 && all[4] == 0xFF).then(|| u16::from_le_bytes([all[5], all[6]])),
            reset,
        })
    }
}

fn ok_status(p: &[u8]) -> u16 {
    let mut at = 1;
    lenenc(p, &mut at);
    lenenc(p, &mut at);
    u16::from_le_bytes([p[at], p[at + 1]])
}

fn end_status(p: &[u8], deprecate_eof: bool) -> u16 {
    if deprecate_eof && p.len() >= 7 {
        ok_status(p)
    } else {
        u16::from_le_bytes([p[3], p[4]])
    }
}

fn response(user: &str, token: &[u8], db: Option<&str>, options: WireOptions) -> Vec<u8> {
    let mut caps = F::CLIENT_PROTOCOL_41
        | F::CLIENT_SECURE_CONNECTION
        | F::CLIENT_PLUGIN_AUTH
        | F::CLIENT_LONG_PASSWORD
        | F::CLIENT_TRANSACTIONS
        | F::CLIENT_PS_MULTI_RESULTS
        | F::CLIENT_MULTI_RESULTS;
    let flags = [
        (options.multi_statements, F::CLIENT_MULTI_STATEMENTS),
        (options.session_track, F::CLIENT_SESSION_TRACK),
        (options.deprecate_eof, F::CLIENT_DEPRECATE_EOF),
        (options.found_rows, F::CLIENT_FOUND_ROWS),
        (options.interactive, F::CLIENT_INTERACTIVE),
        (options.local_files, F::CLIENT_LOCAL_FILES),
        (db.is_some(), F::CLIENT_CONNECT_WITH_DB),
    ];
    for (on, flag) in flags {
        if on {
            caps |= flag;
        }
    }
    let mut resp = Vec::new();
    resp.extend_from_slice(&caps.bits().to_le_bytes());
    resp.extend_from_slice(&(16u32 << 20).to_le_bytes());
    resp.push(45); // utf8mb4_general_ci
    resp.extend_from_slice(&[0; 23]);
    resp.extend_from_slice(user.as_bytes());
    resp.push(0);
    resp.push(token.len() as u8);
    resp.extend_from_slice(token);
    if let Some(db) = db {
        resp.extend_from_slice(db.as_bytes());
        resp.push(0);
    }
    resp.extend_from_slice(b"mysql_native_password\0");
    resp
}
