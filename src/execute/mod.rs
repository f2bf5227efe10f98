//! Running a plan: its steps go to backend connections — the session's held ones inside a
//! transaction or pinned session, else fresh ones from the pools, one per shard so the
//! shards work in parallel (bounded by `sharding.max_fan_out`) — and their replies are
//! read back as values ([`Results`]), never written to a client here.
//!
//! - [`control`]: the proxy's own accesses outside a session (readiness, KILL, defaults).
//! - [`target`]: where each backend access goes (the door every access passes).
//! - [`transaction`]: the connections a session holds, its transaction and pins.
//! - [`results`]: sending steps and reading their replies, lane by lane.
//! - [`effects`]: what a plan changes besides its statements: route counters and cache
//!   fills, index rows written before an insert.

pub mod branches;
pub mod causal;
pub mod commit;
pub mod control;
pub mod effects;
pub mod members;
pub mod resolver;
pub mod results;
pub mod target;
pub mod transaction;
pub mod xa;

pub use results::{Binding, Results, StepEnd};
pub use target::{Access, Target};
pub use transaction::{Transaction, Wants};
