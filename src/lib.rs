//! routekey-proxy: a MySQL-protocol sharding proxy that routes order-table statements by the
//! route key embedded in order ids (see `SPEC.md` in the repository's shared folder and
//! `README.md`).
//!
//! Data flows one way, and the modules say so (no module imports one that imports it):
//!
//! ```text
//! client socket -> frontend (MySQL protocol: handshake, command loop, one session each)
//!               -> sql      (lex, classify, parse with sqlparser: tables, order ids, hints)
//!               -> plan     (pure: each id's route and layer, each shard's statement, the merge)
//!                  route    (order id -> channel -> shard: decode, context, cache, index)
//!                  rewrite  (logical table -> physical table, per shard)
//!               -> execute  (runs a plan's steps on backend connections; applies effects)
//!               -> backend  (per-datasource pools; replies read by one reader, never relayed)
//!               <- frontend (merge: k-way order, groups, aggregates; answers the client)
//! ```
//!
//! Beside the flow: [`id`] (the order id layout and route key decoding), [`config`] (typed,
//! validated), [`error`] (every error as a MySQL error), [`merge`] (exact values and the
//! merge of several shards' rows), [`proxy`] (the state sessions share, reloads),
//! [`server`] (the listener and the drain), [`sessions`] (the session registry), and around
//! the process: [`process`] (signals, file watch), [`admin`] (the HTTP port: probes,
//! `/metrics`, order ids) and [`metrics`] (counters every layer may bump). Off the data path:
//! [`legacy`] (`verify` and `index backfill`, the tools for legacy ids) and [`tools`] (the
//! other operator commands).

pub mod access;
pub mod admin;
pub mod backend;
pub mod config;
pub mod crypto;
pub mod error;
pub mod execute;
pub mod frontend;
pub mod id;
pub mod issuance;
pub mod legacy;
pub mod merge;
pub mod metrics;
pub mod plan;
pub mod process;
pub mod protocol;
pub mod proxy;
pub mod rewrite;
pub mod route;
pub mod server;
pub mod sessions;
pub mod sql;
pub mod tools;
