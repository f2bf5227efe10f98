//! Routing: from an analysed statement and its values to the shards it runs on (SPEC §3-4).
//!
//! Each order id is resolved in layers; the first that answers wins:
//! 1. decode the route key ([`crate::id::RouteKeyDecoder`]);
//! 2. the statement's context (channel/region predicates, sqlcommenter hints);
//! 3. the index table, through its in-process cache ([`index`]) and, when configured, the
//!    shared Redis tier behind it ([`shared_cache`]).
//!
//! A write whose id does not decode consults the index even when context is given; a hint
//! that contradicts the index is refused. Unresolved reads return MySQL's empty answer;
//! unresolved writes are refused. The router does no I/O but through [`index::IndexTable`]
//! and the optional [`shared_cache::SharedCache`].

pub mod index;
pub mod shared_cache;
pub mod stats;
pub mod value;

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::{ChannelId, Config};
use crate::error::{ER_TRUNCATED_WRONG_VALUE, ProxyError};
use crate::id::RouteKeyDecoder;
use crate::sql::hints::RouteHints;
use crate::sql::{
    Analysis, ContextKind, ContextSlot, Refusal, ShardedPlan, Target, ValueSlot, Verb,
};
use index::{IndexTable, RouteCache};
use shared_cache::{SharedCache, SharedLookup};
pub use stats::{Layer, LookupResult, RouteStats};
use value::{KeyValue, StatementValues};

/// Where a statement runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// The default datasource, statement unchanged.
    Unsharded,
    /// These shards, in order.
    Shards(Vec<ShardTarget>),
    /// No order id of the statement can be found: a read runs on `shard` with its order
    /// id values replaced by NULL, which gives exactly MySQL's answer for a row that does
    /// not exist (one row of zeros and NULLs for an aggregate).
    Empty {
        /// The table's first shard (for column definitions).
        shard: u32,
    },
    /// A write whose order ids match no row (NULL, negative): nothing runs, 0 rows.
    NoRows,
}

/// One shard a statement runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardTarget {
    /// Shard number.
    pub shard: u32,
    /// For an INSERT split by shard: indices of the rows that go to this shard.
    pub rows: Vec<usize>,
}

/// The outcome of routing one statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutePlan {
    /// Where it runs.
    pub route: Route,
    /// Index rows the proxy writes before the shard write: inserted orders whose id does
    /// not decode (SPEC §5).
    pub index_writes: Vec<(u64, ChannelId)>,
}

/// How one order id was resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resolution {
    Channel(ChannelId, Layer),
    Unresolved,
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
        let decoder = RouteKeyDecoder::for_config(&config);
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
        let decoder = RouteKeyDecoder::for_config(&config);
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

    /// Routes a statement. `now_ms` is the current Unix time in ms (decode window).
    pub async fn route(
        &self,
        analysis: &Analysis,
        values: &StatementValues<'_>,
        hints: &RouteHints,
        now_ms: u64,
    ) -> Result<RoutePlan, ProxyError> {
        let plan = match &analysis.target {
            Target::Unsharded => {
                return Ok(RoutePlan {
                    route: Route::Unsharded,
                    index_writes: Vec::new(),
                });
            }
            Target::Refused(Refusal::NotYet(what)) => return Err(ProxyError::not_yet(what)),
            Target::Refused(Refusal::Unsupported(what)) => {
                return Err(ProxyError::unsupported(what));
            }
            Target::Refused(Refusal::Unparsed(message)) => {
                return Err(ProxyError::not_yet(format!(
                    "statements on sharded tables that its SQL parser cannot read (parser: {message})"
                )));
            }
            Target::Sharded(plan) => plan,
        };
        if analysis.verb == Verb::Insert {
            return self.route_insert(plan, values, hints, now_ms).await;
        }
        let write = analysis.verb != Verb::Select;
        let context = self.context(&plan.context, hints, values)?;
        if plan.key_values.is_empty() {
            return Err(ProxyError::not_yet(format!(
                "statements on sharded tables without `{key} = value` or `{key} IN (...)` in the WHERE clause (scatter to every shard comes later)",
                key = self.config.sharding.shard_key
            )));
        }
        let mut ids = Vec::with_capacity(plan.key_values.len());
        for slot in &plan.key_values {
            match values.key(*slot) {
                KeyValue::Id(id) => ids.push(id),
                KeyValue::NoMatch => {}
                KeyValue::Invalid(m) => {
                    return Err(ProxyError::client(ER_TRUNCATED_WRONG_VALUE, b"22007", m));
                }
                KeyValue::Expression => {
                    return Err(ProxyError::not_yet(format!(
                        "routing by an expression on {}: give literal values",
                        self.config.sharding.shard_key
                    )));
                }
            }
        }
        let mut shards = BTreeMap::new();
        let mut channels = Vec::new();
        for &id in &ids {
            match self.resolve(id, write, context, now_ms).await? {
                Resolution::Channel(channel, _) => {
                    shards.insert(self.config.shard_of(channel, id), ());
                    channels.push(channel);
                }
                Resolution::Unresolved if write => {
                    return Err(ProxyError::unroutable(format!(
                        "cannot route this write: {key} {id} does not carry a route key and the index table has no row for it; name its channel with a `{ch}` predicate or a /*route_key='...'*/ hint",
                        key = self.config.sharding.shard_key,
                        ch = self.config.sharding.channel_column,
                    )));
                }
                Resolution::Unresolved => {}
            }
        }
        if shards.is_empty() {
            let route = if write {
                Route::NoRows
            } else {
                Route::Empty {
                    shard: self.first_shard(),
                }
            };
            return Ok(RoutePlan {
                route,
                index_writes: Vec::new(),
            });
        }
        if shards.len() > 1 && plan.needs_merge {
            return Err(ProxyError::not_yet(
                "ORDER BY, LIMIT, GROUP BY, DISTINCT or aggregates over order ids on several shards (cross-shard merging comes later)",
            ));
        }
        if analysis.verb == Verb::Update {
            self.check_update(plan, values, &ids, &channels)?;
        }
        Ok(RoutePlan {
            route: Route::Shards(
                shards
                    .into_keys()
                    .map(|shard| ShardTarget {
                        shard,
                        rows: Vec::new(),
                    })
                    .collect(),
            ),
            index_writes: Vec::new(),
        })
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

    /// An UPDATE may not move an order: `order_id` only to its own value, the channel or
    /// region only to values of the same channel.
    fn check_update(
        &self,
        plan: &ShardedPlan,
        values: &StatementValues<'_>,
        ids: &[u64],
        channels: &[ChannelId],
    ) -> Result<(), ProxyError> {
        let key = &self.config.sharding.shard_key;
        if let Some(slot) = plan.sets_key {
            let unchanged = ids.len() == 1 && values.key(slot) == KeyValue::Id(ids[0]);
            if !unchanged {
                return Err(ProxyError::unsupported(format!(
                    "changing {key}: an order keeps its id (it decides the shard)"
                )));
            }
        }
        for slot in &plan.sets_context {
            let target = self.claim(slot, values);
            if target.is_none() || channels.iter().any(|c| Some(*c) != target) {
                return Err(ProxyError::unsupported(format!(
                    "setting the {} column to a value of another channel: the order would sit on the wrong shard",
                    match slot.kind {
                        ContextKind::Channel => &self.config.sharding.channel_column,
                        ContextKind::Region => &self.config.sharding.region_column,
                    }
                )));
            }
        }
        Ok(())
    }

    /// The channel each row of an INSERT names through its channel/region column or the
    /// statement's hints (`None` for a row that names none): where the proxy issues the ids
    /// of an INSERT without the shard key (SPEC §6).
    pub fn insert_channels(
        &self,
        plan: &ShardedPlan,
        values: &StatementValues<'_>,
        hints: &RouteHints,
    ) -> Result<Vec<Option<ChannelId>>, ProxyError> {
        plan.rows
            .iter()
            .map(|row| self.context(&Self::row_context(row), hints, values))
            .collect()
    }

    fn row_context(row: &crate::sql::InsertRow) -> Vec<ContextSlot> {
        let mut slots: Vec<ContextSlot> = Vec::with_capacity(2);
        slots.extend(row.channel.map(|value| ContextSlot {
            kind: ContextKind::Channel,
            value,
        }));
        slots.extend(row.region.map(|value| ContextSlot {
            kind: ContextKind::Region,
            value,
        }));
        slots
    }

    async fn route_insert(
        &self,
        plan: &ShardedPlan,
        values: &StatementValues<'_>,
        hints: &RouteHints,
        now_ms: u64,
    ) -> Result<RoutePlan, ProxyError> {
        let key = &self.config.sharding.shard_key;
        let mut by_shard: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        let mut index_writes = Vec::new();
        for (i, row) in plan.rows.iter().enumerate() {
            let Some(slot) = row.order_id else {
                return Err(ProxyError::not_yet(format!(
                    "INSERT into a sharded table without {key}: leave the column out of an INSERT into the orders table to have the proxy issue one"
                )));
            };
            let id = match values.key(slot) {
                KeyValue::Id(id) => id,
                KeyValue::NoMatch => {
                    return Err(ProxyError::unroutable(format!(
                        "cannot route this INSERT: row {} has no usable {key} (NULL or negative); leave the column out to have the proxy issue one",
                        i + 1
                    )));
                }
                KeyValue::Invalid(m) => {
                    return Err(ProxyError::client(ER_TRUNCATED_WRONG_VALUE, b"22007", m));
                }
                KeyValue::Expression => {
                    return Err(ProxyError::not_yet(format!(
                        "INSERT with an expression as {key}: give a literal value"
                    )));
                }
            };
            let context = self.context(&Self::row_context(row), hints, values)?;
            if let (ValueSlot::Generated(_), Some(channel)) = (slot, context) {
                // An id the proxy just issued for this row's channel: a route-key id decodes;
                // a legacy-format one (channel not switched on yet) gets its index row.
                if self.decoder.decode(id, now_ms).is_ok() {
                    self.stats.count(Layer::Decode);
                } else {
                    self.stats.count(Layer::Context);
                    index_writes.push((id, channel));
                }
                by_shard
                    .entry(self.config.shard_of(channel, id))
                    .or_default()
                    .push(i);
                continue;
            }
            match self.resolve(id, true, context, now_ms).await? {
                Resolution::Channel(channel, layer) => {
                    // The row's own channel/region values must agree with its id: the
                    // row would sit on its id's shard with another channel's values (an
                    // UPDATE to that state is refused the same way).
                    if let Some(slot) = Self::row_context(row)
                        .iter()
                        .find(|s| self.claim(s, values).is_some_and(|c| c != channel))
                    {
                        return Err(ProxyError::unroutable(format!(
                            "row {} of this INSERT: {key} {id} belongs to {} but its {} value '{}' names another channel; refusing the insert",
                            i + 1,
                            self.config.channel(channel).name,
                            match slot.kind {
                                ContextKind::Channel => &self.config.sharding.channel_column,
                                ContextKind::Region => &self.config.sharding.region_column,
                            },
                            values.text(slot.value).unwrap_or_default(),
                        )));
                    }
                    if layer == Layer::Context {
                        index_writes.push((id, channel));
                    }
                    by_shard
                        .entry(self.config.shard_of(channel, id))
                        .or_default()
                        .push(i);
                }
                Resolution::Unresolved => {
                    return Err(ProxyError::unroutable(format!(
                        "cannot route this INSERT: {key} {id} does not carry a route key, the index table has no row for it, and the row names no known channel or region"
                    )));
                }
            }
        }
        Ok(RoutePlan {
            route: Route::Shards(
                by_shard
                    .into_iter()
                    .map(|(shard, rows)| ShardTarget { shard, rows })
                    .collect(),
            ),
            index_writes,
        })
    }

    /// The channel a context value claims; `None` for values that name no configured
    /// channel or region (such a predicate is data, not a route).
    fn claim(&self, slot: &ContextSlot, values: &StatementValues<'_>) -> Option<ChannelId> {
        let text = values.text(slot.value)?;
        match slot.kind {
            ContextKind::Channel => self.config.channel_by_name(&text),
            ContextKind::Region => self.config.channel_by_region(&text),
        }
    }

    /// The statement's route context: predicates and hints must agree.
    fn context(
        &self,
        slots: &[ContextSlot],
        hints: &RouteHints,
        values: &StatementValues<'_>,
    ) -> Result<Option<ChannelId>, ProxyError> {
        let mut claims: Vec<(ChannelId, String)> = Vec::new();
        if let Some(name) = &hints.route_key {
            let channel = self.config.channel_by_name(name).ok_or_else(|| {
                ProxyError::unroutable(format!("route hint names an unknown channel '{name}'"))
            })?;
            claims.push((channel, format!("route_key='{name}'")));
        }
        if let Some(region) = &hints.region {
            let channel = self.config.channel_by_region(region).ok_or_else(|| {
                ProxyError::unroutable(format!("route hint names an unknown region '{region}'"))
            })?;
            claims.push((channel, format!("region='{region}'")));
        }
        for slot in slots {
            if let Some(channel) = self.claim(slot, values) {
                claims.push((channel, values.text(slot.value).unwrap_or_default()));
            }
        }
        let Some((first, first_text)) = claims.first() else {
            return Ok(None);
        };
        if let Some((_, other)) = claims.iter().find(|(c, _)| c != first) {
            return Err(ProxyError::unroutable(format!(
                "conflicting route context: '{first_text}' and '{other}' name different channels"
            )));
        }
        Ok(Some(*first))
    }

    /// Resolves one order id through the layers.
    async fn resolve(
        &self,
        id: u64,
        write: bool,
        context: Option<ChannelId>,
        now_ms: u64,
    ) -> Result<Resolution, ProxyError> {
        match self.decoder.decode(id, now_ms) {
            Ok(channel) => {
                if context.is_some_and(|c| c != channel) {
                    self.stats.count_context_conflict();
                }
                self.stats.count(Layer::Decode);
                return Ok(Resolution::Channel(channel, Layer::Decode));
            }
            Err(reason) => self.stats.count_decode_failure(reason),
        }
        if !write {
            if let Some(channel) = context {
                self.stats.count(Layer::Context);
                return Ok(Resolution::Channel(channel, Layer::Context));
            }
        }
        let (indexed, layer) = self.cache.get_or_load(id, self.load(id)).await?;
        let resolution = match (indexed, context) {
            (Some(indexed), Some(claimed)) if indexed != claimed => {
                return Err(ProxyError::unroutable(format!(
                    "the route context names {} but the index table says order {id} belongs to {}; refusing the write",
                    self.config.channel(claimed).name,
                    self.config.channel(indexed).name
                )));
            }
            (Some(indexed), _) => Resolution::Channel(indexed, layer),
            (None, Some(claimed)) => {
                self.stats.count_hint_followed();
                Resolution::Channel(claimed, Layer::Context)
            }
            (None, None) => Resolution::Unresolved,
        };
        self.stats.count(match resolution {
            Resolution::Channel(_, layer) => layer,
            Resolution::Unresolved => Layer::Unresolved,
        });
        Ok(resolution)
    }

    /// An answer the in-process cache does not hold: from the shared tier ([`Layer::Cache`]),
    /// else from the index table ([`Layer::Index`]), whose found channel is then written
    /// back to the shared tier.
    async fn load(&self, id: u64) -> Result<(Option<ChannelId>, Layer), index::IndexError> {
        if let Some(shared) = &self.shared {
            if let SharedLookup::Hit(channel) = shared.get(id).await {
                return Ok((Some(channel), Layer::Cache));
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
        self.stats.count_lookup(result, started.elapsed());
        let indexed = looked_up?;
        if let (Some(shared), Some(channel)) = (&self.shared, indexed) {
            shared.put(id, channel);
        }
        Ok((indexed, Layer::Index))
    }

    /// Writes the index row of an inserted order whose id does not decode, before the
    /// shard write (SPEC §5). Refuses when the index names another channel.
    pub async fn write_index(&self, id: u64, channel: ChannelId) -> Result<(), ProxyError> {
        let name = &self.config.channel(channel).name;
        let stored = self.index.insert(id, name).await?;
        match self.config.channel_by_name(&stored) {
            Some(c) if c == channel => {
                self.cache.remember(id, channel).await;
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

#[cfg(test)]
mod tests;
