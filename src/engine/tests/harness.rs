//! The engine tests' client: a session on two in-process datasources, driven one protocol
//! command at a time as the frontend's loop drives it, and the client's end of the socket
//! read back into [`Answer`]s.
use std::collections::HashMap;
use std::sync::Arc;

use mysql_common::constants::{CapabilityFlags, Command, StatusFlags};
use mysql_common::io::ParseBuf;
use mysql_common::packets::{Column, ComStmtExecuteRequestBuilder};
use mysql_common::proto::MySerialize;
use mysql_common::row::RowDeserializer;
use mysql_common::value::Value;
use tokio::net::{TcpListener, TcpStream};

use super::super::command::{Next, protocol_command};
use super::super::session::Session;
use crate::backend::memory::MemoryServer;
use crate::config::Config;
use crate::id::{IdFields, IdLayout};
use crate::protocol::PacketStream;
use crate::proxy::Proxy;
use crate::wire::client::Client;
use crate::wire::stream::{ClientStream, Transport};

/// The handshake collation: utf8mb4_general_ci.
pub(super) const COLLATION: u8 = 45;

/// What the client read back for one command.
#[derive(Debug, PartialEq)]
pub(super) enum Answer {
    Ok {
        affected: u64,
        status: u16,
    },
    Error {
        code: u16,
        message: String,
    },
    Rows {
        /// Each column's name and its `table` as the client sees it.
        columns: Vec<String>,
        tables: Vec<String>,
        rows: Vec<Vec<Value>>,
        status: u16,
    },
    /// A prepared statement's id, parameter and column counts.
    Prepared {
        id: u32,
        params: u16,
        columns: u16,
    },
}

/// A session on two in-process datasources and the client end of its connection.
pub(super) struct Harness {
    pub(super) ds0: MemoryServer,
    pub(super) ds1: MemoryServer,
    pub(super) session: Session,
    pub(super) client: Client,
    /// The client's side of the socket.
    pub(super) peer: PacketStream<TcpStream>,
}

impl Harness {
    pub(super) async fn start() -> Self {
        Self::start_with(|toml| toml).await
    }

    /// [`Harness::start`] with the demo's configuration as `edit` changes it.
    pub(super) async fn start_with(edit: impl FnOnce(String) -> String) -> Self {
        let (ds0, ds1) = (MemoryServer::start().await, MemoryServer::start().await);
        let toml = edit(
            include_str!("../../../config/demo.toml")
                .replace("127.0.0.1:33061", &ds0.address())
                .replace("127.0.0.1:33062", &ds1.address()),
        );
        let config = Config::from_toml(&toml, "demo.toml").expect("demo configuration");
        let proxy = Proxy::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let connect = TcpStream::connect(listener.local_addr().unwrap());
        let (peer, accepted) = tokio::join!(connect, listener.accept());
        let caps = CapabilityFlags::CLIENT_PROTOCOL_41
            | CapabilityFlags::CLIENT_SECURE_CONNECTION
            | CapabilityFlags::CLIENT_TRANSACTIONS
            | CapabilityFlags::CLIENT_MULTI_RESULTS
            | CapabilityFlags::CLIENT_PS_MULTI_RESULTS
            | CapabilityFlags::CLIENT_LONG_FLAG
            | CapabilityFlags::CLIENT_PLUGIN_AUTH;
        let client = Client {
            stream: PacketStream::new(
                ClientStream::new(Transport::Tcp(accepted.unwrap().0)),
                16 << 20,
            ),
            caps,
            renamed: Default::default(),
            held_back: None,
        };
        let mut session = Session::new(
            proxy,
            1,
            "app".to_owned(),
            "localhost".to_owned(),
            caps,
            COLLATION,
            HashMap::new(),
        );
        session.select_database("orders").await.expect("USE orders");
        Self {
            ds0,
            ds1,
            session,
            client,
            peer: PacketStream::new(peer.unwrap(), 16 << 20),
        }
    }

    /// Sends one protocol command (its code, then `body`) and reads the answer.
    pub(super) async fn command(&mut self, code: Command, body: &[u8]) -> Answer {
        let mut packet = vec![code as u8];
        packet.extend_from_slice(body);
        self.client.stream.reset_seq();
        let next = protocol_command(&mut self.session, &mut self.client, &packet, COLLATION)
            .await
            .expect("the client is there");
        assert_eq!(next, Next::Continue);
        self.client.flush().await.expect("flush");
        self.peer.reset_seq();
        self.read_answer(code).await
    }

    pub(super) async fn query(&mut self, sql: &str) -> Answer {
        self.command(Command::COM_QUERY, sql.as_bytes()).await
    }

    pub(super) async fn prepare(&mut self, sql: &str) -> Answer {
        self.command(Command::COM_STMT_PREPARE, sql.as_bytes())
            .await
    }

    pub(super) async fn execute(&mut self, id: u32, params: &[Value]) -> Answer {
        let request = ComStmtExecuteRequestBuilder::new(id).build(params).0;
        let mut body = Vec::new();
        request.serialize(&mut body);
        self.command(Command::COM_STMT_EXECUTE, &body[1..]).await
    }

    /// The next packet the client gets; a test fails (rather than hangs) when the
    /// engine sends fewer packets than the protocol promises.
    pub(super) async fn packet(&mut self) -> Vec<u8> {
        let read = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            self.peer.expect_packet(),
        );
        read.await
            .expect("a packet within 10 s")
            .expect("a packet")
            .to_vec()
    }

    /// The answer to command `code`: a result set is binary after COM_STMT_EXECUTE, and
    /// an 0x00 packet after COM_STMT_PREPARE is its statement's OK, an OK otherwise.
    pub(super) async fn read_answer(&mut self, code: Command) -> Answer {
        let binary = code == Command::COM_STMT_EXECUTE;
        let first = self.packet().await;
        match first[0] {
            0x00 if code != Command::COM_STMT_PREPARE => {
                let mut buf = ParseBuf(&first[1..]);
                let affected = lenenc(&mut buf);
                let _insert_id = lenenc(&mut buf);
                Answer::Ok {
                    affected,
                    status: u16::from_le_bytes([buf.0[0], buf.0[1]]),
                }
            }
            0x00 => {
                // COM_STMT_PREPARE's OK: id, columns, parameters, then their definitions.
                let id = u32::from_le_bytes(first[1..5].try_into().unwrap());
                let columns = u16::from_le_bytes([first[5], first[6]]);
                let params = u16::from_le_bytes([first[7], first[8]]);
                for count in [params, columns] {
                    if count > 0 {
                        for _ in 0..count {
                            self.packet().await;
                        }
                        self.packet().await; // EOF
                    }
                }
                Answer::Prepared {
                    id,
                    params,
                    columns,
                }
            }
            0xFF => Answer::Error {
                code: u16::from_le_bytes([first[1], first[2]]),
                message: String::from_utf8_lossy(&first[9..]).into_owned(),
            },
            _ => self.result_set(&first, binary).await,
        }
    }

    async fn result_set(&mut self, first: &[u8], binary: bool) -> Answer {
        let count = lenenc(&mut ParseBuf(first)) as usize;
        let mut columns = Vec::new();
        for _ in 0..count {
            let def = self.packet().await;
            let column: Column = ParseBuf(&def).parse(()).expect("a column definition");
            columns.push(column);
        }
        assert_eq!(self.packet().await[0], 0xFE, "EOF after the columns");
        let shared: Arc<[Column]> = columns.clone().into();
        let mut rows = Vec::new();
        loop {
            let p = self.packet().await;
            if p[0] == 0xFF {
                // An error ends the result set in place of a row (as MySQL fails a
                // statement whose rows were being sent).
                return Answer::Error {
                    code: u16::from_le_bytes([p[1], p[2]]),
                    message: String::from_utf8_lossy(&p[9..]).into_owned(),
                };
            }
            if p[0] == 0xFE && p.len() < 9 {
                return Answer::Rows {
                    columns: columns.iter().map(|c| c.name_str().into_owned()).collect(),
                    tables: columns.iter().map(|c| c.table_str().into_owned()).collect(),
                    rows,
                    status: u16::from_le_bytes([p[3], p[4]]),
                };
            }
            let row = if binary {
                let row: RowDeserializer<
                    mysql_common::value::ServerSide,
                    mysql_common::proto::Binary,
                > = ParseBuf(&p).parse(shared.clone()).expect("a binary row");
                mysql_common::row::Row::from(row).unwrap()
            } else {
                let mut buf = ParseBuf(&p);
                (0..count)
                    .map(|_| {
                        if buf.0.first() == Some(&0xFB) {
                            buf.skip(1);
                            Value::NULL
                        } else {
                            let n = lenenc(&mut buf) as usize;
                            Value::Bytes(buf.eat(n).to_vec())
                        }
                    })
                    .collect()
            };
            rows.push(row);
        }
    }
}

fn lenenc(buf: &mut ParseBuf<'_>) -> u64 {
    let first = buf.eat_u8();
    match first {
        0xFC => u64::from(buf.eat_u16_le()),
        0xFD => u64::from(buf.eat_u24_le()),
        0xFE => buf.eat_u64_le(),
        n => u64::from(n),
    }
}

/// A route-key order id of channel `code` (EU_CHANNEL is 5: shards 0-3 on ds0) minted a
/// day before late 2026, with sequence `seq`: its shard is the channel's base shard plus
/// `id mod 4`.
pub(super) fn order_id(code: u64, seq: u64) -> u64 {
    IdLayout::default()
        .compose(IdFields {
            timestamp: 1_795_000_000_000 - 86_400_000 - crate::id::SNOWFLAKE_EPOCH_MS,
            worker: 3,
            route_key: code,
            sequence: seq,
        })
        .unwrap()
}

pub(super) const IN_TRANS: u16 = StatusFlags::SERVER_STATUS_IN_TRANS.bits();
