//! The optional shared cache tier (Redis) between the in-process route cache and the index
//! table (SPEC §4.3): proxies share the index answers any one of them looked up.
//!
//! Only found channels are stored — a "not in the index" answer may be outdated as soon as
//! the order is inserted, and the in-process cache keeps those briefly — under
//! `routekey:v{shard_map_version}:{order_id}`, so a changed shard map never reads old
//! answers. Redis is a cache, never a dependency: every call is bounded by
//! `cache.redis_timeout`, and after a failure the tier is skipped for
//! `cache.redis_retry_after`, so a dead Redis costs no time per statement and no client ever
//! sees its errors.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::OnceCell;

use crate::config::{ChannelId, Config, RedisTier};

/// Writes back in flight at most; more are dropped (the tier is only a cache).
const MAX_WRITES_IN_FLIGHT: usize = 256;

/// The Redis key of `order_id`'s answer under shard map `shard_map_version`.
pub fn shared_key(shard_map_version: u64, order_id: u64) -> String {
    format!("routekey:v{shard_map_version}:{order_id}")
}

/// What the shared tier knows about one order id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SharedLookup {
    /// Redis names this channel.
    Hit(ChannelId),
    /// Redis has no usable answer: no key, or a channel this configuration does not know
    /// (never trusted).
    Miss,
    /// Redis was not asked (skipped after a recent failure) or failed now.
    Unavailable,
}

/// What one lookup was, for the tier's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SharedOutcome {
    /// A known channel.
    Hit,
    /// No key.
    Miss,
    /// The call failed, timed out, or named an unknown channel.
    Error,
    /// Not sent: the tier is skipped after a recent failure.
    Skipped,
}

/// Counters of the shared tier; cheap to bump from any task.
#[derive(Debug, Default)]
pub struct SharedCacheStats {
    hit: AtomicU64,
    miss: AtomicU64,
    error: AtomicU64,
    skipped: AtomicU64,
    writes: AtomicU64,
}

/// The counters of [`SharedCacheStats`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SharedCacheCounts {
    /// Lookups Redis answered with a known channel.
    pub hit: u64,
    /// Lookups Redis had no key for.
    pub miss: u64,
    /// Calls (lookups and writes) that failed or timed out, and values naming a channel the
    /// configuration does not know.
    pub error: u64,
    /// Lookups not sent because the tier is skipped after a failure.
    pub skipped: u64,
    /// Answers written to Redis.
    pub writes: u64,
}

impl SharedCacheStats {
    /// The counters now.
    pub fn snapshot(&self) -> SharedCacheCounts {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        SharedCacheCounts {
            hit: load(&self.hit),
            miss: load(&self.miss),
            error: load(&self.error),
            skipped: load(&self.skipped),
            writes: load(&self.writes),
        }
    }

    fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// The shared tier of one proxy: a Redis connection (opened on first use, so the proxy starts
/// while Redis is down), the skip window and the counters. Cheap to clone.
#[derive(Clone)]
pub struct SharedCache {
    inner: Arc<Inner>,
}

struct Inner {
    tier: RedisTier,
    config: Arc<Config>,
    manager: OnceCell<ConnectionManager>,
    started: Instant,
    /// While `started.elapsed()` in ms is below this, the tier is skipped.
    skip_until_ms: AtomicU64,
    /// The last call failed (for logging the change only).
    down: AtomicBool,
    writes_in_flight: AtomicUsize,
    stats: Arc<SharedCacheStats>,
}

impl SharedCache {
    /// The tier `config.cache.redis` describes; `None` when none is configured. Opens no
    /// connection.
    pub fn new(config: Arc<Config>) -> Option<Self> {
        Self::counting_into(config, Arc::default())
    }

    /// [`SharedCache::new`] for a reloaded configuration, counting into the previous tier's
    /// counters (they never go back).
    pub fn counting_into(config: Arc<Config>, stats: Arc<SharedCacheStats>) -> Option<Self> {
        let tier = config.cache.redis.clone()?;
        Some(Self {
            inner: Arc::new(Inner {
                tier,
                config,
                manager: OnceCell::new(),
                started: Instant::now(),
                skip_until_ms: AtomicU64::new(0),
                down: AtomicBool::new(false),
                writes_in_flight: AtomicUsize::new(0),
                stats,
            }),
        })
    }

    /// Its counters.
    pub fn stats(&self) -> &SharedCacheStats {
        &self.inner.stats
    }

    /// The configuration it was built for.
    pub fn config(&self) -> Arc<Config> {
        self.inner.config.clone()
    }

    /// Its counters, to share with the tier of a reloaded configuration.
    pub fn shared_stats(&self) -> Arc<SharedCacheStats> {
        self.inner.stats.clone()
    }

    /// The channel Redis holds for `order_id`, and what the lookup was for the counters
    /// (counted by [`SharedCache::record`] when the statement runs, so a plan shown by
    /// EXPLAIN ROUTE counts nothing). Never waits longer than `cache.redis_timeout`; answers
    /// [`SharedLookup::Unavailable`] at once while the tier is skipped.
    pub async fn get(&self, order_id: u64) -> (SharedLookup, SharedOutcome) {
        let inner = &self.inner;
        if inner.skipping() {
            return (SharedLookup::Unavailable, SharedOutcome::Skipped);
        }
        let mut get = redis::cmd("GET");
        get.arg(inner.key(order_id));
        match inner.call::<Option<String>>(&get).await {
            Ok(Some(name)) => match inner.config.channel_by_name(&name) {
                Some(channel) => (SharedLookup::Hit(channel), SharedOutcome::Hit),
                None => {
                    tracing::warn!(
                        channel = %name,
                        "the Redis route cache names a channel this configuration does not know; ignored"
                    );
                    (SharedLookup::Miss, SharedOutcome::Error)
                }
            },
            Ok(None) => (SharedLookup::Miss, SharedOutcome::Miss),
            Err(e) => {
                inner.failed(&e);
                (SharedLookup::Unavailable, SharedOutcome::Error)
            }
        }
    }

    /// Counts a lookup [`SharedCache::get`] made.
    pub fn record(&self, outcome: SharedOutcome) {
        let stats = &self.inner.stats;
        SharedCacheStats::bump(match outcome {
            SharedOutcome::Hit => &stats.hit,
            SharedOutcome::Miss => &stats.miss,
            SharedOutcome::Error => &stats.error,
            SharedOutcome::Skipped => &stats.skipped,
        });
    }

    /// Writes `order_id -> channel` to Redis, kept for `cache.ttl`. Returns at once: the write
    /// runs on its own task, bounded by `cache.redis_timeout`; it is dropped while the tier
    /// is skipped or when too many writes are in flight.
    pub fn put(&self, order_id: u64, channel: ChannelId) {
        let inner = &self.inner;
        if inner.skipping() {
            return;
        }
        if inner.writes_in_flight.fetch_add(1, Ordering::Relaxed) >= MAX_WRITES_IN_FLIGHT {
            inner.writes_in_flight.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        let inner = self.inner.clone();
        tokio::spawn(async move {
            let ttl_ms = u64::try_from(inner.config.cache.ttl.as_millis())
                .unwrap_or(u64::MAX)
                .max(1);
            let mut set = redis::cmd("SET");
            set.arg(inner.key(order_id))
                .arg(&inner.config.channel(channel).name)
                .arg("PX")
                .arg(ttl_ms);
            match inner.call::<()>(&set).await {
                Ok(()) => SharedCacheStats::bump(&inner.stats.writes),
                Err(e) => {
                    SharedCacheStats::bump(&inner.stats.error);
                    inner.failed(&e);
                }
            }
            inner.writes_in_flight.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

impl Inner {
    fn key(&self, order_id: u64) -> String {
        shared_key(self.config.sharding.shard_map_version, order_id)
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn skipping(&self) -> bool {
        self.now_ms() < self.skip_until_ms.load(Ordering::Relaxed)
    }

    /// One command on the shared connection, within `timeout`.
    async fn call<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T, String> {
        let work = async {
            let mut conn = self.connection().await?;
            cmd.query_async::<T>(&mut conn).await
        };
        match tokio::time::timeout(self.tier.timeout, work).await {
            Ok(Ok(value)) => {
                if self.down.swap(false, Ordering::Relaxed) {
                    tracing::info!("the Redis route cache answers again");
                }
                Ok(value)
            }
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no answer within {:?}", self.tier.timeout)),
        }
    }

    /// The connection manager, made on first use. It connects lazily and reconnects after a
    /// failure on the next call; a failed connect is one error (no retries of its own: the
    /// skip window paces the attempts).
    async fn connection(&self) -> redis::RedisResult<ConnectionManager> {
        self.manager
            .get_or_try_init(|| async {
                let client = redis::Client::open(self.tier.url.as_str())?;
                let options = ConnectionManagerConfig::new().set_number_of_retries(0);
                ConnectionManager::new_lazy_with_config(client, options)
            })
            .await
            .cloned()
    }

    /// Skips the tier for `retry_after` after a failed call.
    fn failed(&self, error: &str) {
        let retry_after_ms = u64::try_from(self.tier.retry_after.as_millis()).unwrap_or(u64::MAX);
        self.skip_until_ms.store(
            self.now_ms().saturating_add(retry_after_ms),
            Ordering::Relaxed,
        );
        if !self.down.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                error,
                retry_after = ?self.tier.retry_after,
                "the Redis route cache failed; skipped (the index table answers) and tried again later"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn config(url: &str, retry_after: Duration) -> Arc<Config> {
        let mut config =
            Config::from_toml(include_str!("../../config/demo.toml"), "demo.toml").unwrap();
        config.cache.redis = Some(RedisTier {
            url: url.to_owned(),
            timeout: Duration::from_millis(200),
            retry_after,
        });
        Arc::new(config)
    }

    /// A local port nothing listens on.
    fn closed_port() -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    }

    #[test]
    fn no_tier_without_a_url() {
        let config = Config::from_toml(include_str!("../../config/demo.toml"), "d").unwrap();
        assert!(SharedCache::new(Arc::new(config)).is_none());
    }

    #[test]
    fn keys_carry_the_shard_map_version() {
        assert_eq!(shared_key(7, 42), "routekey:v7:42");
        let c = config("redis://127.0.0.1:1", Duration::from_secs(1));
        let shared = SharedCache::new(c.clone()).unwrap();
        assert_eq!(
            shared.inner.key(42),
            format!("routekey:v{}:42", c.sharding.shard_map_version)
        );
    }

    /// A lookup counted as a statement's would be.
    async fn counted(shared: &SharedCache, id: u64) -> SharedLookup {
        let (lookup, outcome) = shared.get(id).await;
        shared.record(outcome);
        lookup
    }

    #[tokio::test]
    async fn a_redis_that_is_down_is_one_error_then_skipped_until_retry_after() {
        let url = format!("redis://127.0.0.1:{}", closed_port());
        let shared = SharedCache::new(config(&url, Duration::from_millis(300))).unwrap();
        assert_eq!(counted(&shared, 1).await, SharedLookup::Unavailable);
        let counts = shared.stats().snapshot();
        assert_eq!((counts.error, counts.skipped), (1, 0), "{counts:?}");
        let started = Instant::now();
        for id in 2..100 {
            assert_eq!(counted(&shared, id).await, SharedLookup::Unavailable);
        }
        shared.put(3, ChannelId(0)); // dropped while skipped
        assert!(
            started.elapsed() < Duration::from_millis(100),
            "skips cost no time"
        );
        let counts = shared.stats().snapshot();
        assert_eq!((counts.error, counts.skipped), (1, 98), "{counts:?}");
        tokio::time::sleep(Duration::from_millis(350)).await;
        assert_eq!(counted(&shared, 1).await, SharedLookup::Unavailable);
        let counts = shared.stats().snapshot();
        assert_eq!(
            (counts.error, counts.writes),
            (2, 0),
            "tried again: {counts:?}"
        );
    }

    #[tokio::test]
    async fn a_redis_that_does_not_answer_is_bounded_by_the_timeout() {
        // A listener that accepts and never answers.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        let url = format!("redis://127.0.0.1:{port}");
        let shared = SharedCache::new(config(&url, Duration::from_secs(5))).unwrap();
        let started = Instant::now();
        assert_eq!(counted(&shared, 1).await, SharedLookup::Unavailable);
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(190) && waited < Duration::from_millis(1000),
            "{waited:?}"
        );
        assert_eq!(shared.stats().snapshot().error, 1);
        accepted.abort();
    }
}
