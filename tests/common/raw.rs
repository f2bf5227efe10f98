//! Raw protocol helpers: a bare MySQL client on a socket and a TCP link a test can cut.

#![allow(dead_code)]

use super::*;

/// A bare MySQL client on a socket, for what mysql_async cannot do: connect without
/// CLIENT_MULTI_STATEMENTS, send commands without waiting for replies.
pub struct RawClient {
    stream: tokio::net::TcpStream,
}

/// A reply, as far as the tests need it.
#[derive(Debug)]
pub enum RawReply {
    /// OK packet: its status flags.
    Ok(u16),
    /// Error packet: code and message.
    Err(u16, String),
    /// A result set: the rows' first column and the status flags of the closing EOF.
    Rows(Vec<Option<String>>, u16),
}

impl RawClient {
    /// Connects as app/app to database `orders`, protocol 4.1 with classic EOF packets and
    /// no CLIENT_MULTI_STATEMENTS.
    pub async fn connect(addr: SocketAddr) -> Self {
        Self::connect_as(addr, "app", "app", "orders").await
    }

    /// Connects as `user` to `db` (same protocol options).
    pub async fn connect_as(addr: SocketAddr, user: &str, password: &str, db: &str) -> Self {
        use tokio::io::AsyncWriteExt;
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (_, hello) = read_packet(&mut stream).await;
        assert_eq!(hello[0], 10, "protocol version 10 handshake");
        let nonce = greeting_nonce(&hello);
        let scramble = if password.is_empty() {
            Vec::new()
        } else {
            mysql_common::scramble::scramble_native(&nonce, password.as_bytes())
                .unwrap()
                .to_vec()
        };
        let resp = handshake_response(user, &scramble, "mysql_native_password", Some(db), None);
        write_packet(&mut stream, 1, &resp).await;
        stream.flush().await.unwrap();
        let (_, reply) = read_packet(&mut stream).await;
        assert_eq!(
            reply[0],
            0,
            "handshake answered with OK: {:?}",
            String::from_utf8_lossy(&reply)
        );
        Self { stream }
    }

    /// The socket, for tests that read at their own pace.
    pub fn socket(&mut self) -> &mut tokio::net::TcpStream {
        &mut self.stream
    }

    /// Reads raw bytes until the proxy closes the connection; `None` if it is still open
    /// after `within`.
    pub async fn read_to_close(&mut self, within: std::time::Duration) -> Option<Vec<u8>> {
        use tokio::io::AsyncReadExt;
        let mut all = Vec::new();
        tokio::time::timeout(within, async {
            let mut buf = vec![0u8; 1 << 16];
            loop {
                match self.stream.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => all.extend_from_slice(&buf[..n]),
                }
            }
        })
        .await
        .ok()?;
        Some(all)
    }

    /// Sends COM_QUERY without reading the reply.
    pub async fn send_query(&mut self, sql: &str) {
        let mut payload = vec![3u8];
        payload.extend_from_slice(sql.as_bytes());
        write_packet(&mut self.stream, 0, &payload).await;
    }

    /// Reads one reply (a whole result set for a query that returns rows).
    pub async fn reply(&mut self) -> RawReply {
        let (_, first) = read_packet(&mut self.stream).await;
        match first[0] {
            0x00 => {
                let mut p = 1;
                for _ in 0..2 {
                    // affected rows, last insert id (length-encoded integers)
                    p += match first[p] {
                        0xFC => 3,
                        0xFD => 4,
                        0xFE => 9,
                        _ => 1,
                    };
                }
                RawReply::Ok(u16::from_le_bytes([first[p], first[p + 1]]))
            }
            0xFF => RawReply::Err(
                u16::from_le_bytes([first[1], first[2]]),
                String::from_utf8_lossy(&first[9..]).into_owned(),
            ),
            _ => {
                // Column definitions up to EOF, then rows up to EOF.
                loop {
                    let (_, p) = read_packet(&mut self.stream).await;
                    if p[0] == 0xFE && p.len() < 9 {
                        break;
                    }
                }
                let mut out = Vec::new();
                loop {
                    let (_, p) = read_packet(&mut self.stream).await;
                    if p[0] == 0xFE && p.len() < 9 {
                        return RawReply::Rows(out, u16::from_le_bytes([p[3], p[4]]));
                    }
                    if p[0] == 0xFB {
                        out.push(None);
                    } else {
                        let n = p[0] as usize; // short values only
                        out.push(Some(String::from_utf8_lossy(&p[1..1 + n]).into_owned()));
                    }
                }
            }
        }
    }

    /// Reads packets up to an EOF or ERR packet (included).
    pub async fn read_until_eof(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        loop {
            let (_, p) = read_packet(&mut self.stream).await;
            let end = p[0] == 0xFF || (p[0] == 0xFE && p.len() < 9);
            out.push(p);
            if end {
                return out;
            }
        }
    }

    /// Sends a command without reading a reply (COM_STMT_SEND_LONG_DATA, COM_STMT_CLOSE).
    pub async fn send(&mut self, code: u8, body: &[u8]) {
        let mut payload = vec![code];
        payload.extend_from_slice(body);
        write_packet(&mut self.stream, 0, &payload).await;
    }

    /// Sends any command and reads packets until an EOF or ERR packet (included).
    pub async fn command(&mut self, code: u8, body: &[u8]) -> Vec<Vec<u8>> {
        let mut payload = vec![code];
        payload.extend_from_slice(body);
        write_packet(&mut self.stream, 0, &payload).await;
        let mut out = Vec::new();
        loop {
            let (_, p) = read_packet(&mut self.stream).await;
            let end =
                p[0] == 0xFF || (p[0] == 0xFE && p.len() < 9) || (out.is_empty() && p[0] == 0);
            out.push(p);
            if end {
                return out;
            }
        }
    }

    /// Reads one packet's payload.
    pub async fn read_packet(&mut self) -> Vec<u8> {
        read_packet(&mut self.stream).await.1
    }

    /// Sends COM_QUERY and reads its reply.
    pub async fn query(&mut self, sql: &str) -> RawReply {
        self.send_query(sql).await;
        self.reply().await
    }
}

/// The 20-byte scramble of a protocol-10 greeting.
pub fn greeting_nonce(greeting: &[u8]) -> Vec<u8> {
    let mut p = 1 + greeting[1..].iter().position(|&b| b == 0).unwrap() + 1 + 4;
    let mut nonce = greeting[p..p + 8].to_vec();
    p += 8 + 1 + 2 + 1 + 2 + 2; // auth-1, filler, caps low, charset, status, caps high
    let auth_len = greeting[p] as usize;
    p += 1 + 10;
    let rest = auth_len.saturating_sub(8).max(13) - 1;
    nonce.extend_from_slice(&greeting[p..p + rest]);
    nonce
}

/// A HandshakeResponse41 (utf8mb4, 16 MiB max packet): `user`, the proof `token` of
/// `plugin`, the database to connect to, and raw connection attributes (their bytes after
/// the length prefix), when given.
pub fn handshake_response(
    user: &str,
    token: &[u8],
    plugin: &str,
    db: Option<&str>,
    attributes: Option<&[u8]>,
) -> Vec<u8> {
    use mysql_common::constants::CapabilityFlags as F;
    let mut caps = F::CLIENT_PROTOCOL_41
        | F::CLIENT_SECURE_CONNECTION
        | F::CLIENT_PLUGIN_AUTH
        | F::CLIENT_LONG_PASSWORD
        | F::CLIENT_TRANSACTIONS;
    if db.is_some() {
        caps |= F::CLIENT_CONNECT_WITH_DB;
    }
    if attributes.is_some() {
        caps |= F::CLIENT_CONNECT_ATTRS;
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
    resp.extend_from_slice(plugin.as_bytes());
    resp.push(0);
    if let Some(attributes) = attributes {
        resp.push(0xfd);
        resp.extend_from_slice(&(attributes.len() as u32).to_le_bytes()[..3]);
        resp.extend_from_slice(attributes);
    }
    resp
}

/// Reads one packet: its sequence id and payload (within 10 s).
pub async fn read_packet(s: &mut tokio::net::TcpStream) -> (u8, Vec<u8>) {
    use tokio::io::AsyncReadExt;
    let mut head = [0u8; 4];
    tokio::time::timeout(std::time::Duration::from_secs(10), s.read_exact(&mut head))
        .await
        .expect("reply within 10 s")
        .unwrap();
    let len = usize::from(head[0]) | usize::from(head[1]) << 8 | usize::from(head[2]) << 16;
    let mut body = vec![0; len];
    s.read_exact(&mut body).await.unwrap();
    (head[3], body)
}

/// Writes one packet with sequence id `seq`.
pub async fn write_packet(s: &mut tokio::net::TcpStream, seq: u8, payload: &[u8]) {
    use tokio::io::AsyncWriteExt;
    let len = payload.len() as u32;
    let mut buf = len.to_le_bytes()[..3].to_vec();
    buf.push(seq);
    buf.extend_from_slice(payload);
    s.write_all(&buf).await.unwrap();
}

/// A TCP link to `upstream` that a test can cut (a network partition): every connection
/// through it and its listener end at once.
pub struct Forwarder {
    /// Where clients connect.
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Forwarder {
    /// Starts forwarding.
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let mut links = tokio::task::JoinSet::new();
            while let Ok((mut client, _)) = listener.accept().await {
                links.spawn(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        });
        Self { addr, task }
    }

    /// Cuts the link: open connections and the listener close.
    pub fn cut(&self) {
        self.task.abort();
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.task.abort();
    }
}
