//! The backend side: connections the proxy drives itself on mysql_common ([`conn`]), the
//! one reader of their replies ([`reader`], [`reply`]), the session variables they carry ([`vars`]), the
//! statements prepared on them ([`statements`]),
//! pooled per datasource with bb8 ([`pool`]), over plain TCP or TLS ([`tls`]), logged in
//! with the backend account's plugin ([`auth`]); the probes of clustered datasources'
//! members ([`probe`]). Nothing here writes to a client.
//! For unit tests, `memory` is a scripted in-process server that speaks the protocol.

pub mod apply;
pub mod auth;
pub mod conn;
#[cfg(test)]
pub mod memory;
pub mod pool;
pub mod probe;
pub mod reader;
pub mod reply;
pub mod statements;
pub mod tls;
pub mod vars;

pub use conn::{BackendConn, Diagnostic};
pub use pool::{PooledConn, Pools};
pub use reply::{FileRequest, Reply, ResultEnd};
pub use vars::AppliedState;
