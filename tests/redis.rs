//! The shared cache tier (Redis) behind the in-process route cache, against a real
//! redis-server that each test starts: a legacy id goes to the index once and its answer to
//! Redis, where a second proxy finds it without the index; a Redis value naming an unknown
//! channel is ignored; a Redis killed mid-run fails no statement, and once it is back the
//! tier is used again.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::redis_server::RedisServer;
use common::*;
use mysql_async::prelude::*;
use routekey_proxy::config::{Config, RedisTier};
use routekey_proxy::route::Layer;
use routekey_proxy::route::shared_cache::{SharedCacheCounts, shared_key};

/// The demo configuration with `redis` as its shared tier (50 ms bound, skipped 1 s after a
/// failure).
fn config_with(redis: &RedisServer) -> Config {
    let mut c = config();
    c.cache.redis = Some(RedisTier {
        url: redis.url(),
        timeout: Duration::from_millis(50),
        retry_after: Duration::from_secs(1),
    });
    c
}

fn redis_counts(h: &Harness) -> SharedCacheCounts {
    h.proxy
        .runtime()
        .router
        .shared_cache()
        .expect("a Redis tier is configured")
        .stats()
        .snapshot()
}

fn layers(h: &Harness) -> [(&'static str, u64); 5] {
    let stats = &h.proxy.router_stats;
    Layer::ALL.map(|l| (l.label(), stats.layer(l)))
}

fn layer(h: &Harness, l: Layer) -> u64 {
    h.proxy.router_stats.layer(l)
}

fn key(h: &Harness, id: u64) -> String {
    shared_key(h.proxy.config.sharding.shard_map_version, id)
}

/// `SHOW ROUTEKEY STATS` as (counter, value) pairs.
async fn show_stats(c: &mut mysql_async::Conn) -> Vec<(String, u64)> {
    c.query("SHOW ROUTEKEY STATS").await.unwrap()
}

fn stat(rows: &[(String, u64)], name: &str) -> Option<u64> {
    rows.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
}

#[tokio::test]
async fn an_index_answer_goes_to_redis_and_a_second_proxy_reads_it_without_the_index() {
    let redis = RedisServer::start().await;
    let s = seed();
    let id = s.channels["BIZ_CHANNEL"].legacy_ids[17];
    let sql = format!("SELECT * FROM t_order WHERE order_id = {id}");
    let want = rows(&mut reference().await, &sql).await;
    assert_eq!(want.len(), 1, "seeded legacy id {id}");

    let a = Harness::start_with(config_with(&redis)).await;
    let mut ca = a.client().await;
    assert_same_rows(&rows(&mut ca, &sql).await, &want, "proxy A");
    assert_eq!(layer(&a, Layer::Index), 1, "{:?}", layers(&a));
    let counts = redis_counts(&a);
    assert_eq!(
        (counts.miss, counts.hit, counts.error),
        (1, 0, 0),
        "{counts:?}"
    );

    // The index answer is written back to Redis, for the cache's ttl (1 h in the demo).
    let k = key(&a, id);
    assert_eq!(
        redis.wait_for(&k, "BIZ_CHANNEL").await.as_deref(),
        Some("BIZ_CHANNEL"),
        "{k}"
    );
    let pttl = redis.pttl(&k).await;
    assert!(pttl > 3_500_000 && pttl <= 3_600_000, "PTTL {pttl}");
    assert_eq!(redis_counts(&a).writes, 1);

    // Proxy B: its own empty in-process cache, the same Redis; the index is not consulted.
    let b = Harness::start_with(config_with(&redis)).await;
    let mut cb = b.client().await;
    assert_same_rows(&rows(&mut cb, &sql).await, &want, "proxy B");
    assert_eq!(
        layers(&b),
        [
            ("decode", 0),
            ("context", 0),
            ("cache", 1),
            ("index", 0),
            ("unresolved", 0)
        ]
    );
    let counts = redis_counts(&b);
    assert_eq!(
        (counts.hit, counts.miss, counts.writes),
        (1, 0, 0),
        "{counts:?}"
    );
    // Again: now from B's in-process cache, Redis not asked.
    assert_same_rows(&rows(&mut cb, &sql).await, &want, "proxy B again");
    assert_eq!(layer(&b, Layer::Cache), 2);
    assert_eq!(redis_counts(&b).hit, 1);

    let shown = show_stats(&mut cb).await;
    assert_eq!(stat(&shown, "redis_hit"), Some(1), "{shown:?}");
    assert_eq!(stat(&shown, "redis_miss"), Some(0), "{shown:?}");
    assert_eq!(stat(&shown, "redis_error"), Some(0), "{shown:?}");
    assert_eq!(stat(&shown, "redis_skipped"), Some(0), "{shown:?}");
    // And on /metrics.
    let metrics = b.metrics_text().await;
    for line in [
        "routekey_cache_redis_requests_total{result=\"hit\"} 1",
        "routekey_cache_redis_requests_total{result=\"miss\"} 0",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in {metrics}");
    }
    drop((ca, cb));
    a.stop().await;
    b.stop().await;

    // Without a Redis tier the rows are not shown.
    let plain = Harness::start().await;
    let shown = show_stats(&mut plain.client().await).await;
    assert!(
        shown.iter().all(|(n, _)| !n.starts_with("redis_")),
        "{shown:?}"
    );
    plain.stop().await;
}

#[tokio::test]
async fn a_redis_value_naming_an_unknown_channel_is_ignored_and_replaced() {
    let redis = RedisServer::start().await;
    let s = seed();
    let id = s.channels["CN_CHANNEL"].legacy_ids[23];
    let sql = format!("SELECT order_id, channel, amount FROM t_order WHERE order_id = {id}");
    let want = rows(&mut reference().await, &sql).await;
    assert_eq!(want.len(), 1);

    let h = Harness::start_with(config_with(&redis)).await;
    let k = key(&h, id);
    redis.set(&k, "MARS_CHANNEL").await;
    let mut c = h.client().await;
    assert_same_rows(&rows(&mut c, &sql).await, &want, "through the proxy");
    assert_eq!(layer(&h, Layer::Index), 1, "{:?}", layers(&h));
    let counts = redis_counts(&h);
    assert_eq!((counts.hit, counts.error), (0, 1), "{counts:?}");
    // The index answer replaces the bad value.
    assert_eq!(
        redis.wait_for(&k, "CN_CHANNEL").await.as_deref(),
        Some("CN_CHANNEL")
    );
    // A reload (here with a new cache ttl: a new in-process cache) keeps the counters.
    let before = redis_counts(&h);
    let mut reloaded = config_with(&redis);
    reloaded.cache.negative_ttl += Duration::from_secs(1);
    h.proxy.reload(reloaded).unwrap();
    let after = redis_counts(&h);
    assert_eq!(
        (after.hit, after.miss, after.error, after.writes),
        (before.hit, before.miss, before.error, before.writes)
    );
    drop(c);
    h.stop().await;
}

/// Point selects of `ids` on one connection until `stop`, checking each answer against
/// `want` (order id -> channel); returns (statements, failures and wrong answers).
async fn point_selects(
    h: &Harness,
    ids: Arc<Vec<(u64, String)>>,
    offset: usize,
    stop: Arc<AtomicBool>,
) -> (u64, Vec<String>) {
    let mut c = h.client().await;
    let mut done = 0;
    let mut bad = Vec::new();
    let mut i = offset;
    while !stop.load(Ordering::Relaxed) {
        let (id, channel) = &ids[i % ids.len()];
        i += 1;
        let sql = format!("SELECT order_id, channel FROM t_order WHERE order_id = {id}");
        match c.query::<(u64, String), _>(&sql).await {
            Ok(got) if got == [(*id, channel.clone())] => {}
            Ok(got) => bad.push(format!("{sql}: got {got:?}, expected {channel}")),
            Err(e) => bad.push(format!("{sql}: {e}")),
        }
        done += 1;
    }
    (done, bad)
}

#[tokio::test]
async fn redis_killed_mid_run_fails_no_statement_and_is_used_again_once_back() {
    let mut redis = RedisServer::start().await;
    let s = seed();
    let mut ids: Vec<u64> = CHANNELS
        .iter()
        .flat_map(|(name, ..)| s.channels[*name].legacy_ids[40..48].to_vec())
        .collect();
    ids.extend(&s.legacy_ids_with_code_bits[40..48]);
    let list = ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let want: Vec<(u64, String)> = reference()
        .await
        .query(format!(
            "SELECT order_id, channel FROM t_order WHERE order_id IN ({list}) ORDER BY order_id"
        ))
        .await
        .unwrap();
    assert_eq!(want.len(), ids.len(), "every sampled legacy id is seeded");
    let want = Arc::new(want);

    // No in-process cache: every lookup of a legacy id reaches the Redis tier.
    let mut config = config_with(&redis);
    config.cache.capacity = 0;
    let h = Arc::new(Harness::start_with(config).await);
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..8)
        .map(|n| {
            let (h, want, stop) = (h.clone(), want.clone(), stop.clone());
            tokio::spawn(async move { point_selects(&h, want, n * 6, stop).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let at_kill = redis_counts(&h);
    redis.kill();
    let killed_at = Instant::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    let mut statements = 0;
    let mut failures = Vec::new();
    for client in clients {
        let (n, bad) = client.await.unwrap();
        statements += n;
        failures.extend(bad);
    }
    let after = redis_counts(&h);
    assert!(
        failures.is_empty(),
        "{} of {statements} statements failed or answered wrongly: {:#?}",
        failures.len(),
        &failures[..failures.len().min(10)]
    );
    assert!(statements >= 80, "only {statements} statements in 3 s");
    assert!(
        at_kill.hit > 0,
        "Redis answered before it was killed: {at_kill:?}"
    );
    let (errors, skipped) = (after.error - at_kill.error, after.skipped - at_kill.skipped);
    assert!(errors >= 1, "the failure is counted: {after:?}");
    assert!(
        skipped > errors,
        "after a failure Redis is skipped, not asked per statement: {errors} errors, {skipped} skipped"
    );
    assert!(
        killed_at.elapsed() < Duration::from_secs(3),
        "no statement hung on the dead Redis: the clients ended {:?} after the kill",
        killed_at.elapsed()
    );

    // Back on the same port (empty): misses are written back, then Redis answers again.
    let hits_before = after.hit;
    let redis = RedisServer::start_on(redis.port).await;
    let mut c = h.client().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut i = 0;
    while redis_counts(&h).hit == hits_before {
        assert!(
            Instant::now() < deadline,
            "Redis not used again within 10 s: {:?}",
            redis_counts(&h)
        );
        let (id, channel) = &want[i % want.len()];
        i += 1;
        let got: Vec<(u64, String)> = c
            .query(format!(
                "SELECT order_id, channel FROM t_order WHERE order_id = {id}"
            ))
            .await
            .unwrap();
        assert_eq!(got, [(*id, channel.clone())]);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop((c, redis));
    Arc::try_unwrap(h).ok().expect("clients ended").stop().await;
}
