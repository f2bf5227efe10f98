//! The statement engine: one [`session::Session`] per client connection turns each protocol
//! command into its reply. [`command`] is the table of contents of the commands and
//! [`query`] of the statements of a `COM_QUERY`; a data statement goes through the planner
//! (`plan`) and runs through `execute`, the door of every backend access, and its reply is
//! written through the wire's [`crate::wire::client::Client`].
//!
//! Below the frontend (which reads commands off the wire and hands them here), above the
//! state every session shares (`proxy`). It writes only to its own client.

mod catalog;
mod characteristics;
pub mod command;
mod explain;
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
pub mod session;
mod set;
mod show;
mod state;
mod statement;
mod statement_log;
#[cfg(test)]
mod tests;

pub use query::kill_running_statement;
