//! The statement engine: one [`session::Session`] per client connection turns each protocol
//! command into its reply. [`command`] is the table of contents of the commands and
//! `query` of the statements of a `COM_QUERY`; a data statement goes through the planner
//! (`plan`) and runs through `execute`, and its reply is written through the wire's
//! [`crate::wire::client::Client`]. Every backend connection the engine uses, for a plan or
//! for its own statements (SET read-back, COM_STATISTICS, field lists, catalog copies),
//! comes through `execute`'s door with a target ([`session::Session`]'s `connection`).
//!
//! Below the frontend (which reads commands off the wire and hands them here), above the
//! state every session shares (`proxy`). It writes only to its own client.

mod catalog;
mod characteristics;
mod checks;
pub mod command;
mod explain;
mod failover;
mod fence;
mod gather;
mod ids;
mod load;
mod locks;
mod memo;
mod outcome;
mod prepared;
mod processlist;
mod query;
mod respond;
mod run;
pub mod session;
mod set;
mod show;
mod state;
mod statement;
mod statement_log;
#[cfg(test)]
mod tests;
mod topology;
mod transactions;

pub use query::kill_running_statement;
