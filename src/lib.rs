//! routekey-proxy: a MySQL-protocol sharding proxy that routes order-table statements by the
//! route key embedded in order ids (see `SPEC.md` in the repository's shared folder and
//! `README.md`).
//!
//! The modules are layers. A module imports only modules of lower layers, and no file
//! imports one that imports it (`tests/architecture.rs` reads the `use` lines and paths of
//! every file and fails otherwise; `docs/architecture.md` draws the same table and follows
//! one statement through it):
//!
//! ```text
//! 12 process                    signals, the configuration file watch
//! 11 server admin tools         the listener and drain; the HTTP port; operator commands
//! 10 frontend                   a client connection from accept to close: handshake, then
//!                               the command loop, which hands each command to the engine
//!  9 engine                     the sessions: their state, each command to its reply
//!  8 proxy                      the state sessions share (configuration, pools, router, issuer)
//!  7 execute moves              runs a plan's steps on backend connections, applies effects;
//!                               `shards move`: copy, catch up, verify, cut over
//!  6 plan issuance legacy       the pure planner; order id issuance; verify and backfill;
//!    topology                   the members of clustered datasources: primary, replicas
//!  5 backend route rewrite wire per-datasource pools and the one reply reader; order id ->
//!                               channel -> shard; logical -> physical SQL; the client
//!                               connection's stream, handshake and reply encoding
//!  4 sql                        lex, classify, parse (sqlparser): tables, order ids, hints
//!  3 merge                      exact values and the merge of several shards' rows
//!  2 protocol access            packets, rows, binary values, status words; client logins
//!    session_registry           and TLS; the sessions by connection id (KILL)
//!  1 config                     typed, validated configuration
//!  0 error metrics crypto id    leaves: errors as MySQL errors, counters, the TLS provider,
//!                               the order id layout and its decoding
//! ```
//!
//! A statement flows down from the client socket (frontend) into the engine, through sql,
//! plan (with route and rewrite), execute and backend; its reply comes back up to the
//! engine, which writes it to its client through the wire's `Client` (the wire knows no
//! session, plan or backend: `tests/architecture.rs` checks that too).

pub mod access;
pub mod admin;
pub mod backend;
pub mod config;
pub mod crypto;
pub mod engine;
pub mod error;
pub mod execute;
pub mod frontend;
pub mod id;
pub mod issuance;
pub mod legacy;
pub mod merge;
pub mod metrics;
pub mod moves;
pub mod plan;
pub mod process;
pub mod protocol;
pub mod proxy;
pub mod rewrite;
pub mod route;
pub mod server;
pub mod session_registry;
pub mod sql;
pub mod tools;
pub mod topology;
pub mod wire;
