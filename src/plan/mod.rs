//! Planning a data statement: one function ([`plan`]) turns the analysis, the bound
//! values, the hints and the session's values into a [`Plan`]: how each order id routes and
//! which layer said so, the statement each shard or datasource receives, the index rows to
//! write first, whether it writes, and how its steps run ([`Execution`]: relayed, atomic, merged or a probe).
//!
//! Planning does no I/O but the index lookup behind [`crate::route::index::IndexTable`]
//! (and the cache tiers in front of it), and changes nothing: counters and cache fills are
//! carried in [`Plan::effects`] and applied when the plan runs; ids are issued before it
//! is made. Every refusal is decided here. `EXPLAIN ROUTE` shows the same plan execution
//! runs ([`explain`]).

mod build;
pub mod combine;
pub mod explain;
mod model;
mod planner;
mod scatter;
pub mod scope;
#[cfg(test)]
mod tests;

pub use build::{Refused, insert_channels, plan, refusal};
pub use model::{
    Combined, Execution, IdRoute, Inputs, Plan, PlanKind, RouteLayer, ScatterPolicy, Step, Text,
};
