//! The backend side: connections the proxy drives itself on mysql_common ([`conn`]),
//! pooled per datasource with bb8 ([`pool`]), and the relay of their results to clients
//! ([`relay`]).

pub mod conn;
pub mod pool;
pub mod relay;

pub use conn::{AppliedState, BackendConn, Response};
pub use pool::{PooledConn, Pools};
