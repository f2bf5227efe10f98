//! Counters of route resolutions, by layer and by decode failure reason (SPEC §4: "every
//! resolution is counted by layer, so operators can watch the legacy share fall").

use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::metrics::histogram::Histogram;

use crate::id::DecodeFailure;

/// The layer that resolved an order id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layer {
    /// The route key bits.
    Decode,
    /// The statement's predicates or hints.
    Context,
    /// A cache of index answers: the in-process one, or the shared Redis tier behind it.
    Cache,
    /// The index table.
    Index,
    /// Nothing answered.
    Unresolved,
}

impl Layer {
    /// All layers, in order.
    pub const ALL: [Layer; 5] = [
        Layer::Decode,
        Layer::Context,
        Layer::Cache,
        Layer::Index,
        Layer::Unresolved,
    ];

    /// Stable lower-case name.
    pub fn label(self) -> &'static str {
        match self {
            Layer::Decode => "decode",
            Layer::Context => "context",
            Layer::Cache => "cache",
            Layer::Index => "index",
            Layer::Unresolved => "unresolved",
        }
    }
}

/// What an index table lookup gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LookupResult {
    /// A row: the order's channel.
    Found,
    /// No row.
    NotFound,
    /// The index table could not answer (down, timeout, unknown channel name).
    Error,
}

impl LookupResult {
    /// All results, in order.
    pub const ALL: [LookupResult; 3] = [
        LookupResult::Found,
        LookupResult::NotFound,
        LookupResult::Error,
    ];

    /// Stable lower-case name (the `result` label of `routekey_index_lookups_total`).
    pub fn label(self) -> &'static str {
        match self {
            LookupResult::Found => "found",
            LookupResult::NotFound => "not_found",
            LookupResult::Error => "error",
        }
    }
}

/// Monotonic counters; cheap to bump from any task.
#[derive(Debug)]
pub struct RouteStats {
    layers: [AtomicU64; 5],
    decode_failures: [AtomicU64; 4],
    context_conflicts: AtomicU64,
    hints_followed: AtomicU64,
    index_lookups: [AtomicU64; 3],
    index_latency: Histogram,
}

impl Default for RouteStats {
    fn default() -> Self {
        Self {
            layers: Default::default(),
            decode_failures: Default::default(),
            context_conflicts: Default::default(),
            hints_followed: Default::default(),
            index_lookups: Default::default(),
            index_latency: crate::metrics::latency_histogram(),
        }
    }
}

impl RouteStats {
    /// Counts one resolution.
    pub fn count(&self, layer: Layer) {
        self.layers[layer as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one id that did not decode.
    pub fn count_decode_failure(&self, reason: DecodeFailure) {
        let i = match reason {
            DecodeFailure::NoCode => 0,
            DecodeFailure::UnassignedCode(_) => 1,
            DecodeFailure::BeforeRouteKeySince => 2,
            DecodeFailure::InFuture => 3,
        };
        self.decode_failures[i].fetch_add(1, Ordering::Relaxed);
    }

    /// A decoded id whose statement claimed another channel (the id won).
    pub fn count_context_conflict(&self) {
        self.context_conflicts.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one index table lookup and how long it took.
    pub fn count_lookup(&self, result: LookupResult, took: std::time::Duration) {
        self.index_lookups[result as usize].fetch_add(1, Ordering::Relaxed);
        self.index_latency.observe(took.as_secs_f64());
    }

    /// Index table lookups so far with this result.
    pub fn lookups(&self, result: LookupResult) -> u64 {
        self.index_lookups[result as usize].load(Ordering::Relaxed)
    }

    /// Index lookup latencies, in seconds.
    pub fn lookup_latency(&self) -> &Histogram {
        &self.index_latency
    }

    /// A write followed a hint for an id the index does not know.
    pub fn count_hint_followed(&self) {
        self.hints_followed.fetch_add(1, Ordering::Relaxed);
    }

    /// Resolutions so far by one layer.
    pub fn layer(&self, layer: Layer) -> u64 {
        self.layers[layer as usize].load(Ordering::Relaxed)
    }

    /// Decode failures so far, by reason label: no_code, unassigned_code,
    /// before_route_key_since, timestamp_in_future.
    pub fn decode_failures(&self) -> [(&'static str, u64); 4] {
        let labels = [
            "no_code",
            "unassigned_code",
            "before_route_key_since",
            "timestamp_in_future",
        ];
        std::array::from_fn(|i| (labels[i], self.decode_failures[i].load(Ordering::Relaxed)))
    }

    /// Context conflicts so far.
    pub fn context_conflicts(&self) -> u64 {
        self.context_conflicts.load(Ordering::Relaxed)
    }

    /// Hints followed for unknown ids so far.
    pub fn hints_followed(&self) -> u64 {
        self.hints_followed.load(Ordering::Relaxed)
    }
}
