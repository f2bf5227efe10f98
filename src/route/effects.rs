//! What resolving a statement's order ids learnt and counted, kept aside while it is
//! planned and applied when it runs ([`super::Router::apply`]): so a plan can be shown
//! (EXPLAIN ROUTE) without changing a counter or a cache.

use std::time::Duration;

use super::index::CachedRoute;
use super::shared_cache::SharedOutcome;
use super::stats::{Layer, LookupResult};
use crate::config::ChannelId;
use crate::id::DecodeFailure;

/// Counters to bump and caches to fill once a planned statement runs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Effects {
    /// One resolution per order id, by the layer that answered.
    pub layers: Vec<Layer>,
    /// Ids that did not decode, by reason.
    pub decode_failures: Vec<DecodeFailure>,
    /// Decoded ids whose statement claimed another channel (the id won).
    pub context_conflicts: u32,
    /// Writes that followed a hint for an id the index does not know.
    pub hints_followed: u32,
    /// Index table lookups: result and how long each took.
    pub lookups: Vec<(LookupResult, Duration)>,
    /// Lookups in the shared (Redis) tier.
    pub shared_lookups: Vec<SharedOutcome>,
    /// What the in-process cache learns.
    pub cache_fills: Vec<(u64, CachedRoute)>,
    /// Found channels written back to the shared tier.
    pub shared_puts: Vec<(u64, ChannelId)>,
}

impl Effects {
    /// Nothing to apply.
    pub fn is_empty(&self) -> bool {
        *self == Effects::default()
    }
}
