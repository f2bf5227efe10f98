//! Merging results of several shards: a SELECT scattered to several shards must answer as
//! one MariaDB table would, so the shards' result sets are combined here (k-way merge by
//! the ORDER BY keys, COUNT/SUM/MIN/MAX/AVG re-aggregated, groups, DISTINCT).
//!
//! The value layer the merge is built on: [`crate::protocol::row`] splits row packets
//! (text and binary protocol) into raw column values and builds them back, [`value`]
//! decodes raw values to compare and aggregate and encodes computed ones, and [`decimal`]
//! is exact DECIMAL arithmetic.

pub mod columns;
pub mod decimal;
pub mod expr;
pub mod group;
pub mod keys;
mod spec;
pub mod value;

pub use spec::*;
