//! routekey-proxy: a MySQL-protocol sharding proxy that routes order-table statements by the
//! route key embedded in order ids (see `SPEC.md` in the repository's shared folder and
//! `README.md`).
//!
//! Data flows one way, and the modules say so:
//!
//! ```text
//! client socket -> frontend (MySQL protocol: handshake, command loop, one session each)
//!               -> sql      (lex, classify, parse with sqlparser: tables, order ids, hints)
//!               -> route    (order id -> channel -> shard: decode, context, cache, index)
//!               -> rewrite  (logical table -> physical table, per shard)
//!               -> backend  (per-datasource pools; run; relay the result back)
//! ```
//!
//! Beside the flow: [`id`] (the order id layout and route key decoding), [`config`] (typed,
//! validated), [`error`] (every error as a MySQL error), [`server`] (the listener: `run`,
//! the drain, configuration reloads), and around the process: [`process`] (signals, file
//! watch), [`admin`] (the HTTP port: probes, `/metrics`, order ids) and [`metrics`].

pub mod admin;
pub mod backend;
pub mod config;
pub mod error;
pub mod execute;
pub mod frontend;
pub mod id;
pub mod merge;
pub mod metrics;
pub mod plan;
pub mod process;
pub mod protocol;
pub mod rewrite;
pub mod route;
pub mod server;
pub mod sql;
pub mod tools;
