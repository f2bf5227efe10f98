//! The exposition of every metric of a [`Proxy`] in the Prometheus text format 0.0.4, read
//! at scrape time from the counters that live next to what they count ([`crate::metrics`]
//! holds the names' rules and the hot-path counters).

use std::sync::atomic::Ordering;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use crate::metrics::TOP_CALLERS;
use crate::proxy::{Proxy, Runtime};
use crate::route::{Layer, LookupResult};

fn counter(value: u64) -> Counter {
    let c = Counter::default();
    c.inc_by(value);
    c
}

/// The exposition of every metric of `proxy`, in the Prometheus text format.
pub fn render(proxy: &Proxy) -> String {
    let mut r = Registry::with_prefix("routekey");
    proxy.metrics.register(&mut r);
    let rt = proxy.runtime();
    routes(&mut r, &rt);
    pools(&mut r, &rt);
    issuance(&mut r, proxy, &rt);

    let info = Family::<Vec<(&'static str, &'static str)>, Gauge>::default();
    info.get_or_create(&vec![("version", env!("CARGO_PKG_VERSION"))])
        .set(1);
    r.register("build_info", "The running build (value 1)", info);

    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, &r);
    out
}

/// Route resolutions, decode failures, index lookups and the shared cache tier.
fn routes(r: &mut Registry, rt: &Runtime) {
    let stats = rt.router.stats();
    let layers = Family::<Vec<(&'static str, &'static str)>, Counter>::default();
    for layer in Layer::ALL {
        layers
            .get_or_create(&vec![("layer", layer.label())])
            .inc_by(stats.layer(layer));
    }
    r.register(
        "route_resolutions",
        "Order ids resolved to a channel, by the layer that answered (decode and context need no lookup)",
        layers,
    );
    let failures = Family::<Vec<(&'static str, &'static str)>, Counter>::default();
    for (reason, n) in stats.decode_failures() {
        let reason = if reason == "timestamp_in_future" {
            "in_future"
        } else {
            reason
        };
        failures.get_or_create(&vec![("reason", reason)]).inc_by(n);
    }
    r.register(
        "decode_failures",
        "Order ids whose route key did not decode, by reason",
        failures,
    );
    r.register(
        "context_conflicts",
        "Decoded ids whose statement named another channel (the id won)",
        counter(stats.context_conflicts()),
    );
    let lookups = Family::<Vec<(&'static str, &'static str)>, Counter>::default();
    for result in LookupResult::ALL {
        lookups
            .get_or_create(&vec![("result", result.label())])
            .inc_by(stats.lookups(result));
    }
    r.register("index_lookups", "Index table lookups, by result", lookups);
    r.register_with_unit(
        "index_lookup_duration",
        "Index table lookup latency",
        Unit::Seconds,
        stats.lookup_latency().clone(),
    );

    if let Some(shared) = rt.router.shared_cache() {
        let counts = shared.stats().snapshot();
        let redis = Family::<Vec<(&'static str, &'static str)>, Counter>::default();
        for (result, n) in [
            ("hit", counts.hit),
            ("miss", counts.miss),
            ("error", counts.error),
            ("skipped", counts.skipped),
        ] {
            redis.get_or_create(&vec![("result", result)]).inc_by(n);
        }
        r.register(
            "cache_redis_requests",
            "Shared cache tier (Redis) lookups and failed writes, by result; skipped: Redis was failing and is left alone for cache.redis_retry_after",
            redis,
        );
        r.register(
            "cache_redis_writes",
            "Answers written to the shared cache tier",
            counter(counts.writes),
        );
    }
}

/// Backend connections per datasource and pool checkout waits.
fn pools(r: &mut Registry, rt: &Runtime) {
    let pools = Family::<Vec<(&'static str, String)>, Gauge>::default();
    let mut totals: Vec<(String, i64, i64)> = Vec::new();
    for (name, _, open, idle) in rt.pools.state() {
        match totals.iter_mut().find(|t| t.0 == name) {
            Some(t) => {
                t.1 += i64::from(open);
                t.2 += i64::from(idle);
            }
            None => totals.push((name, i64::from(open), i64::from(idle))),
        }
    }
    for (name, open, idle) in totals {
        pools
            .get_or_create(&vec![
                ("datasource", name.clone()),
                ("state", "idle".into()),
            ])
            .set(idle);
        pools
            .get_or_create(&vec![("datasource", name), ("state", "in_use".into())])
            .set(open - idle);
    }
    r.register(
        "pool_connections",
        "Backend connections per datasource, by state",
        pools,
    );
    r.register_with_unit(
        "pool_wait_duration",
        "Time a statement waited for a pooled backend connection",
        Unit::Seconds,
        rt.pools.waits().clone(),
    );
}

/// Order ids issued, callers without a region, clock step-backs and the worker id lease.
fn issuance(r: &mut Registry, proxy: &Proxy, rt: &Runtime) {
    let issue = proxy.issuer.stats();
    let per_channel = Family::<Vec<(&'static str, String)>, Counter>::default();
    for channel in &rt.config.channels {
        per_channel
            .get_or_create(&vec![("channel", channel.name.clone())])
            .inc_by(issue.per_channel[usize::from(channel.code)].load(Ordering::Relaxed));
    }
    r.register(
        "ids_issued",
        "Order ids issued for a region's channel",
        per_channel,
    );
    let callers = Family::<Vec<(&'static str, String)>, Counter>::default();
    let all = issue.top_callers(usize::MAX);
    let mut other = 0;
    for (i, (caller, n)) in all.into_iter().enumerate() {
        if i < TOP_CALLERS && caller != "other" {
            callers.get_or_create(&vec![("caller", caller)]).inc_by(n);
        } else {
            other += n;
        }
    }
    if other > 0 {
        callers
            .get_or_create(&vec![("caller", "other".to_owned())])
            .inc_by(other);
    }
    r.register(
        "ids_issued_without_region",
        "Order ids issued with route key 0 (no or unknown region), by caller: MySQL user and program_name, or http and User-Agent",
        callers,
    );
    let step_backs = Family::<Vec<(&'static str, &'static str)>, Counter>::default();
    step_backs
        .get_or_create(&vec![("result", "waited")])
        .inc_by(issue.clock_waits.load(Ordering::Relaxed));
    step_backs
        .get_or_create(&vec![("result", "refused")])
        .inc_by(issue.clock_refusals.load(Ordering::Relaxed));
    r.register(
        "id_clock_step_backs",
        "Times the clock was behind the last issued id: waited out (within tolerance) or refused",
        step_backs,
    );
    let lease = Family::<Vec<(&'static str, &'static str)>, Gauge>::default();
    let state = proxy.issuer.lease_state();
    for s in ["held", "none", "refused"] {
        lease
            .get_or_create(&vec![("state", s)])
            .set(i64::from(s == state));
    }
    r.register(
        "worker_lease",
        "The worker id lease: 1 for the current state (held, none: not taken yet or lost, refused: every worker id is leased)",
        lease,
    );
    r.register(
        "worker_lease_refusals",
        "Times a worker id lease was refused because every worker id was leased",
        counter(issue.lease_full.load(Ordering::Relaxed)),
    );
}
