//! The order id format: its bit layout (SPEC §2) and decoding the route key (SPEC §4.1).

pub mod decode;
pub mod generator;
pub mod layout;

pub use decode::{ChannelId, DecodeFailure, RouteKeyDecoder};
pub use layout::{IdFields, IdLayout, LayoutError, SNOWFLAKE_EPOCH_MS};
