//! Resolving order ids to channels (SPEC §3-4): the layers, the statement's route
//! context, and what the proxy learns on the way.
//!
//! Each order id is resolved in layers; the first that answers wins:
//! 1. decode the route key ([`crate::id::RouteKeyDecoder`]);
//! 2. the statement's context (channel/region predicates, sqlcommenter hints);
//! 3. the index table, through its in-process cache ([`index`]) and, when configured, the
//!    shared Redis tier behind it ([`shared_cache`]).
//!
//! A write whose id does not decode consults the index even when context is given; a hint
//! that contradicts the index is refused. Resolving does no I/O but through
//! [`index::IndexTable`] and the optional [`shared_cache::SharedCache`], and changes
//! nothing: counters and cache fills are collected in [`Effects`] and applied by
//! [`Router::apply`] when the statement runs. Statements are planned in [`crate::plan`].

pub mod effects;
pub mod index;
pub mod shard_map;
pub mod shared_cache;
pub mod stats;
pub mod value;

use std::sync::Arc;

use crate::config::{ChannelId, Config};
use crate::error::ProxyError;
use crate::id::{DecodeFailure, RouteKeyDecoder};
use crate::sql::hints::RouteHints;
use crate::sql::{ContextKind, ContextSlot, ValueSlot};
pub use effects::Effects;
use index::{CachedRoute, IndexTable, RouteCache};
use shared_cache::{SharedCache, SharedLookup};
pub use stats::{Layer, LookupResult, RouteStats};
use value::StatementValues;

/// The channel a statement's (or an INSERT row's) hints and predicates name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteContext {
    /// The channel.
    pub channel: ChannelId,
    /// Only `region` values name it (no `channel` value, no hint): on a write the region
    /// is the order's data (a UK customer buys on GLOBAL_CHANNEL), so the index table's
    /// answer for a legacy id wins over it; it decides only for an id nothing else knows.
    pub region_only: bool,
}

/// How one order id was resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolved {
    /// Its channel; `None` when nothing resolves it.
    pub channel: Option<ChannelId>,
    /// The layer that answered ([`Layer::Unresolved`] when none did).
    pub layer: Layer,
    /// Why the route key did not decode, when it did not.
    pub decode_failure: Option<DecodeFailure>,
    /// A probe of every shard found it nowhere a moment ago (`cache.negative_ttl`): a read
    /// answers "no such row" without probing again.
    pub known_nowhere: bool,
}

/// Routes statements under one configuration.
pub struct Router<I> {
    config: Arc<Config>,
    decoder: RouteKeyDecoder,
    cache: RouteCache,
    shared: Option<SharedCache>,
    index: I,
    stats: Arc<RouteStats>,
}

impl<I: IndexTable> Router<I> {
    /// A router for `config`, reading the index through `index`.
    pub fn new(config: Arc<Config>, index: I) -> Self {
        let decoder = config.route_key_decoder();
        Self {
            cache: RouteCache::new(&config),
            shared: SharedCache::new(config.clone()),
            config,
            decoder,
            index,
            stats: Arc::new(RouteStats::default()),
        }
    }

    /// This router counting into `previous`'s counters (kept across reloads): route
    /// resolutions and the shared tier's.
    pub fn counting_into(mut self, previous: &Self) -> Self {
        self.stats = previous.stats.clone();
        if let (Some(shared), Some(old)) = (&self.shared, &previous.shared) {
            self.shared = SharedCache::counting_into(shared.config(), old.shared_stats());
        }
        self
    }

    /// The router of a reloaded configuration: it keeps this router's counters and its
    /// cache of index answers, whose keys carry the shard map version, so a changed shard
    /// map starts from an empty cache.
    pub fn succeed(&self, config: Arc<Config>, index: I) -> Self {
        let decoder = config.route_key_decoder();
        Self {
            cache: self.cache.for_config(&config),
            shared: match &self.shared {
                Some(previous) => {
                    SharedCache::counting_into(config.clone(), previous.shared_stats())
                }
                None => SharedCache::new(config.clone()),
            },
            config,
            decoder,
            index,
            stats: self.stats.clone(),
        }
    }

    /// The configuration routed under.
    pub fn config(&self) -> &Arc<Config> {
        &self.config
    }

    /// Counters of resolutions by layer.
    pub fn stats(&self) -> &Arc<RouteStats> {
        &self.stats
    }

    /// The decoder (the `decode` command and tests use it).
    pub fn decoder(&self) -> &RouteKeyDecoder {
        &self.decoder
    }

    /// The index table.
    pub fn index(&self) -> &I {
        &self.index
    }

    /// The shared cache tier (Redis), when `cache.redis_url` configures one.
    pub fn shared_cache(&self) -> Option<&SharedCache> {
        self.shared.as_ref()
    }

    /// The lowest shard of any channel: where unresolved reads get their empty answer.
    pub fn first_shard(&self) -> u32 {
        self.config
            .channels
            .iter()
            .map(|c| c.base_shard)
            .min()
            .unwrap_or(0)
    }

    /// The channel a context value claims; `None` for values that name no configured
    /// channel or region (such a predicate is data, not a route).
    pub fn claim(&self, slot: &ContextSlot, values: &StatementValues<'_>) -> Option<ChannelId> {
        let text = values.text(slot.value)?;
        match slot.kind {
            ContextKind::Channel => self.config.channel_by_name(&text),
            ContextKind::Region => self.config.channel_by_region(&text),
        }
    }

    /// The statement's (or an INSERT row's) route context: hints and predicates must
    /// agree. A `region` value is data (a customer of one region buys on another
    /// channel's site) once a `channel` value or a channel hint names the channel: only
    /// channels must then agree (a region hint stays a claim). On a read, predicates naming
    /// different channels (or regions) select no row, as MySQL answers them: the
    /// statement gets no context (it runs where its ids or a scatter lead, and the
    /// server returns the empty answer); a hint that contradicts a predicate is refused.
    ///
    /// # Errors
    /// 1526 for a hint naming an unknown channel or region, for claims that name
    /// different channels (on reads: unless only predicates disagree), and on writes for
    /// a `channel` value given as an expression.
    pub fn context(
        &self,
        slots: &[ContextSlot],
        hints: &RouteHints,
        values: &StatementValues<'_>,
        write: bool,
    ) -> Result<Option<ChannelId>, ProxyError> {
        Ok(self
            .route_context(slots, hints, values, write)?
            .map(|c| c.channel))
    }

    /// [`Router::context`] with where the channel came from (see [`RouteContext`]).
    ///
    /// # Errors
    /// As [`Router::context`].
    pub fn route_context(
        &self,
        slots: &[ContextSlot],
        hints: &RouteHints,
        values: &StatementValues<'_>,
        write: bool,
    ) -> Result<Option<RouteContext>, ProxyError> {
        struct Claim {
            channel: ChannelId,
            text: String,
            kind: ContextKind,
            hint: bool,
        }
        let mut claims: Vec<Claim> = Vec::new();
        if let Some(name) = &hints.route_key {
            let channel = self.config.channel_by_name(name).ok_or_else(|| {
                ProxyError::unroutable(format!("route hint names an unknown channel '{name}'"))
            })?;
            claims.push(Claim {
                channel,
                text: format!("route_key='{name}'"),
                kind: ContextKind::Channel,
                hint: true,
            });
        }
        if let Some(region) = &hints.region {
            let channel = self.config.channel_by_region(region).ok_or_else(|| {
                ProxyError::unroutable(format!("route hint names an unknown region '{region}'"))
            })?;
            claims.push(Claim {
                channel,
                text: format!("region='{region}'"),
                kind: ContextKind::Region,
                hint: true,
            });
        }
        for slot in slots {
            if write && slot.kind == ContextKind::Channel && slot.value == ValueSlot::Expression {
                // Its region alone would decide, and the row's own channel may say otherwise.
                return Err(ProxyError::unroutable(format!(
                    "the `{}` value of this write is an expression the proxy does not evaluate; give it as a literal or a parameter",
                    self.config.sharding.channel_column
                )));
            }
            if let Some(channel) = self.claim(slot, values) {
                claims.push(Claim {
                    channel,
                    text: values.text(slot.value).unwrap_or_default(),
                    kind: slot.kind,
                    hint: false,
                });
            }
        }
        if claims.iter().any(|c| c.kind == ContextKind::Channel) {
            claims.retain(|c| c.kind == ContextKind::Channel || c.hint);
        }
        let Some(first) = claims.first() else {
            return Ok(None);
        };
        let Some(other) = claims.iter().find(|c| c.channel != first.channel) else {
            return Ok(Some(RouteContext {
                channel: first.channel,
                region_only: claims
                    .iter()
                    .all(|c| c.kind == ContextKind::Region && !c.hint),
            }));
        };
        if !write && claims.iter().all(|c| !c.hint) {
            return Ok(None);
        }
        Err(ProxyError::unroutable(format!(
            "conflicting route context: '{}' and '{}' name different channels",
            first.text, other.text
        )))
    }

    /// Resolves one order id through the layers; what it counts and learns goes to `fx`.
    /// A write whose id does not decode asks the index even when `context` names a
    /// channel, and is refused when the index names another one, unless only a region
    /// named it (the index then wins: the region is the order's data).
    pub async fn resolve(
        &self,
        id: u64,
        write: bool,
        context: Option<RouteContext>,
        now_ms: u64,
        fx: &mut Effects,
    ) -> Result<Resolved, ProxyError> {
        let decode_failure = match self.decoder.decode(id, now_ms) {
            Ok(channel) => {
                if context.is_some_and(|c| c.channel != channel) {
                    fx.context_conflicts += 1;
                }
                fx.layers.push(Layer::Decode);
                return Ok(Resolved {
                    channel: Some(channel),
                    layer: Layer::Decode,
                    decode_failure: None,
                    known_nowhere: false,
                });
            }
            Err(reason) => {
                fx.decode_failures.push(reason);
                reason
            }
        };
        let resolved = |channel, layer| Resolved {
            channel,
            layer,
            decode_failure: Some(decode_failure),
            known_nowhere: false,
        };
        if !write {
            if let Some(RouteContext { channel, .. }) = context {
                fx.layers.push(Layer::Context);
                return Ok(resolved(Some(channel), Layer::Context));
            }
        }
        let (known, layer) = self.lookup(id, fx).await?;
        let result = match (known, context) {
            (CachedRoute::Channel(indexed), Some(claimed))
                if write && indexed != claimed.channel && !claimed.region_only =>
            {
                // The index answered (and counts so); the statement is refused.
                fx.layers.push(layer);
                return Err(ProxyError::unroutable(format!(
                    "the route context names {} but the index table says order {id} belongs to {}; refusing the write",
                    self.config.channel(claimed.channel).name,
                    self.config.channel(indexed).name
                )));
            }
            (CachedRoute::Channel(indexed), _) => resolved(Some(indexed), layer),
            (_, Some(claimed)) => {
                fx.hints_followed += 1;
                resolved(Some(claimed.channel), Layer::Context)
            }
            (CachedRoute::Nowhere, None) => Resolved {
                known_nowhere: true,
                ..resolved(None, Layer::Unresolved)
            },
            (CachedRoute::NotIndexed, None) => resolved(None, Layer::Unresolved),
        };
        fx.layers.push(result.layer);
        Ok(result)
    }

    /// What the caches or the index table know of `id`, and the layer that answered:
    /// the in-process cache, else the shared tier ([`Layer::Cache`]), else the index table
    /// ([`Layer::Index`]). Nothing is written: the answers go to `fx`.
    async fn lookup(&self, id: u64, fx: &mut Effects) -> Result<(CachedRoute, Layer), ProxyError> {
        if let Some(known) = self.cache.peek(id) {
            return Ok((known, Layer::Cache));
        }
        if let Some(shared) = &self.shared {
            let (lookup, outcome) = shared.get(id).await;
            fx.shared_lookups.push(outcome);
            if let SharedLookup::Hit(channel) = lookup {
                fx.cache_fills.push((id, CachedRoute::Channel(channel)));
                return Ok((CachedRoute::Channel(channel), Layer::Cache));
            }
        }
        let started = std::time::Instant::now();
        let looked_up = self.index.lookup(id).await.and_then(|row| match row {
            None => Ok(None),
            Some(name) => self.config.channel_by_name(&name).map(Some).ok_or_else(|| {
                index::IndexError(format!(
                    "the index row of {id} names an unknown channel '{name}'"
                ))
            }),
        });
        let result = match &looked_up {
            Ok(Some(_)) => LookupResult::Found,
            Ok(None) => LookupResult::NotFound,
            Err(_) => LookupResult::Error,
        };
        fx.lookups.push((result, started.elapsed()));
        let known = match looked_up? {
            Some(channel) => {
                fx.shared_puts.push((id, channel));
                CachedRoute::Channel(channel)
            }
            None => CachedRoute::NotIndexed,
        };
        fx.cache_fills.push((id, known));
        Ok((known, Layer::Index))
    }

    /// Applies what a statement's planning collected: counters, cache fills, writes to
    /// the shared tier. Called when the statement runs (never for EXPLAIN ROUTE).
    pub async fn apply(&self, fx: &Effects) {
        for layer in &fx.layers {
            self.stats.count(*layer);
        }
        for reason in &fx.decode_failures {
            self.stats.count_decode_failure(*reason);
        }
        for _ in 0..fx.context_conflicts {
            self.stats.count_context_conflict();
        }
        for _ in 0..fx.hints_followed {
            self.stats.count_hint_followed();
        }
        for (result, took) in &fx.lookups {
            self.stats.count_lookup(*result, *took);
        }
        for (id, known) in &fx.cache_fills {
            self.cache.fill(*id, *known);
        }
        if let Some(shared) = &self.shared {
            for outcome in &fx.shared_lookups {
                shared.record(*outcome);
            }
            for (id, channel) in &fx.shared_puts {
                shared.put(*id, *channel);
            }
        }
    }

    /// What a probe of every shard learnt of an id (SPEC §4.4, `unresolved_reads =
    /// "probe"`): found on exactly one shard, its channel is cached, in-process and in the
    /// shared tier, never in the index table; found nowhere, a negative entry.
    pub async fn learn_from_probe(&self, id: u64, channel: Option<ChannelId>) {
        match channel {
            Some(channel) => {
                self.cache.fill(id, CachedRoute::Channel(channel));
                if let Some(shared) = &self.shared {
                    shared.put(id, channel);
                }
            }
            None => self.cache.fill(id, CachedRoute::Nowhere),
        }
    }

    /// Writes the index row of an inserted order whose id does not decode, before the
    /// shard write (SPEC §5). Refuses when the index names another channel.
    pub async fn write_index(&self, id: u64, channel: ChannelId) -> Result<(), ProxyError> {
        let name = &self.config.channel(channel).name;
        let stored = self.index.insert(id, name).await?;
        match self.config.channel_by_name(&stored) {
            Some(c) if c == channel => {
                self.cache.fill(id, CachedRoute::Channel(channel));
                if let Some(shared) = &self.shared {
                    shared.put(id, channel);
                }
                Ok(())
            }
            _ => Err(ProxyError::unroutable(format!(
                "the index table already maps order {id} to {stored}, not {name}; refusing the insert"
            ))),
        }
    }
}
