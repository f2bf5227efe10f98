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
    topology(&mut r, &rt);
    transactions(&mut r, proxy);
    shard_map(&mut r, proxy);
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

/// The members of clustered datasources (issue 26): up, role, lag, split brain, and the
/// reads, causal waits and retried writes their datasource counted.
fn topology(r: &mut Registry, rt: &Runtime) {
    use crate::topology::view::{Primary, Role};
    type Labels = Vec<(&'static str, String)>;
    let (up, role, split) = (
        Family::<Labels, Gauge>::default(),
        Family::<Labels, Gauge>::default(),
        Family::<Labels, Gauge>::default(),
    );
    let lag = Family::<Labels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
    let (reads, waits, retries) = (
        Family::<Labels, Counter>::default(),
        Family::<Labels, Counter>::default(),
        Family::<Labels, Counter>::default(),
    );
    for cluster in rt.topology.clusters() {
        let view = cluster.view();
        let ds = || ("datasource", cluster.name.clone());
        for (member, seen) in cluster.members.iter().zip(&view.members) {
            let labels = vec![ds(), ("member", member.address.clone())];
            up.get_or_create(&labels)
                .set(i64::from(!matches!(seen.role, Role::Down | Role::Unknown)));
            // 1 primary, 0 replica, -1 anything else (down, read-only without
            // replication, writable beside another).
            let code = match seen.role {
                Role::Primary => 1,
                Role::Replica => 0,
                _ => -1,
            };
            role.get_or_create(&labels).set(code);
            let seconds = match (seen.role, seen.lag) {
                (Role::Replica, Some(l)) => l.as_secs_f64(),
                (Role::Replica, None) => f64::INFINITY,
                _ => 0.0,
            };
            if seen.role == Role::Replica {
                lag.get_or_create(&labels).set(seconds);
            }
        }
        split
            .get_or_create(&vec![ds()])
            .set(i64::from(matches!(view.primary, Primary::SplitBrain(_))));
        let c = &cluster.counters;
        let n = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        reads
            .get_or_create(&vec![ds(), ("role", "primary".into())])
            .inc_by(n(&c.primary_reads));
        reads
            .get_or_create(&vec![ds(), ("role", "replica".into())])
            .inc_by(n(&c.replica_reads));
        waits
            .get_or_create(&vec![ds(), ("result", "caught_up".into())])
            .inc_by(n(&c.causal_caught_up));
        waits
            .get_or_create(&vec![ds(), ("result", "timed_out".into())])
            .inc_by(n(&c.causal_timed_out));
        retries
            .get_or_create(&vec![ds()])
            .inc_by(n(&c.writes_retried));
    }
    r.register(
        "member_up",
        "Whether a member of a clustered datasource answered its last probe (1) or not (0)",
        up,
    );
    r.register(
        "member_role",
        "A member's role by its last probe: 1 primary, 0 replica, -1 other (down, read-only without replication, one of several writable)",
        role,
    );
    r.register(
        "member_lag_seconds",
        "A replica's replication lag in seconds by its last probe; +Inf when replication is stopped or broken",
        lag,
    );
    r.register(
        "split_brain",
        "1 while more than one member of the datasource is writable (its writes are refused)",
        split,
    );
    r.register(
        "reads",
        "Reads on clustered datasources, by the role of the member that served them",
        reads,
    );
    r.register(
        "causal_waits",
        "Reads that waited on a replica for the session's writes (MASTER_GTID_WAIT), by result",
        waits,
    );
    r.register(
        "write_retries",
        "Statements run again after a primary refused them as read-only or could not be reached before they were sent",
        retries,
    );
}

/// Atomic commits across datasources and the resolver (issue 27).
fn transactions(r: &mut Registry, proxy: &Proxy) {
    let c = &proxy.coordinator.counters;
    let n = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let commits = Family::<Vec<(&'static str, &'static str)>, Counter>::default();
    commits
        .get_or_create(&vec![("kind", "single")])
        .inc_by(n(&c.commits_single));
    commits
        .get_or_create(&vec![("kind", "atomic")])
        .inc_by(n(&c.commits_atomic));
    r.register(
        "commits",
        "Transactions committed by COMMIT: on one datasource (single) or atomically on several (atomic: the decision committed)",
        commits,
    );
    let failed = Family::<Vec<(&'static str, &'static str)>, Counter>::default();
    failed
        .get_or_create(&vec![("result", "rolled_back")])
        .inc_by(n(&c.atomic_rolled_back));
    failed
        .get_or_create(&vec![("result", "unknown")])
        .inc_by(n(&c.atomic_unknown));
    r.register(
        "atomic_commit_failures",
        "Atomic commits that did not commit: rolled back on every datasource, or unknown (the decision commit's connection was lost and the decision could not be read back)",
        failed,
    );
    r.register(
        "xa_branches_prepared",
        "XA branches prepared by this sidecar's atomic commits",
        counter(n(&c.prepared)),
    );
    r.register(
        "xa_commit_failures",
        "XA COMMITs after the decision that failed (the branch is left to a resolver)",
        counter(n(&c.commit_failures)),
    );
    let resolved = Family::<Vec<(&'static str, &'static str)>, Counter>::default();
    resolved
        .get_or_create(&vec![("action", "commit")])
        .inc_by(n(&c.resolved_commit));
    resolved
        .get_or_create(&vec![("action", "rollback")])
        .inc_by(n(&c.resolved_rollback));
    r.register(
        "xa_resolved",
        "Abandoned XA branches this sidecar's resolver finished, by action",
        resolved,
    );
    r.register(
        "xa_resolver_rounds",
        "Resolver rounds run (XA RECOVER on every datasource's primary)",
        counter(n(&c.resolver_rounds)),
    );
    let (count, oldest) = match proxy.coordinator.in_doubt.lock() {
        Ok(list) => (
            list.len(),
            list.iter()
                .map(|d| d.first_seen.elapsed().as_secs_f64())
                .fold(0.0, f64::max),
        ),
        Err(_) => (0, 0.0),
    };
    let in_doubt = Gauge::<i64, std::sync::atomic::AtomicI64>::default();
    in_doubt.set(count as i64);
    r.register(
        "xa_in_doubt",
        "Prepared XA branches of ours the last resolver round found (being committed by a live coordinator, or abandoned)",
        in_doubt,
    );
    let age = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
    age.set(oldest);
    r.register(
        "xa_in_doubt_oldest_seconds",
        "Seconds since this sidecar's resolver first saw the oldest prepared XA branch still there (0 when none)",
        age,
    );
}

/// The shard map this sidecar follows and the fences its statements met (issue 28).
fn shard_map(r: &mut Registry, proxy: &Proxy) {
    let f = &proxy.shard_map;
    let n = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let gauge = |v: u64| {
        let g = Gauge::<i64, std::sync::atomic::AtomicI64>::default();
        g.set(i64::try_from(v).unwrap_or(i64::MAX));
        g
    };
    r.register(
        "shard_map_version",
        "The shard map version this sidecar routes by (0: the configuration's ranges, the shard map table not read yet)",
        gauge(proxy.map_version()),
    );
    r.register(
        "shard_map_newest_version",
        "The newest shard map version this sidecar read from the table",
        gauge(f.newest_read()),
    );
    r.register(
        "shard_map_read_failures",
        "Reads of the shard map table that failed",
        counter(n(&f.read_failures)),
    );
    r.register(
        "shard_map_apply_failures",
        "Shard map versions read that this sidecar could not apply (a datasource its configuration lacks)",
        counter(n(&f.apply_failures)),
    );
    let waits = Family::<Vec<(&'static str, &'static str)>, Counter>::default();
    for (i, result) in ["moved", "not_moving", "undone", "timed_out"]
        .into_iter()
        .enumerate()
    {
        waits
            .get_or_create(&vec![("result", result)])
            .inc_by(n(&f.fence_waits[i]));
    }
    r.register(
        "shard_fence_waits",
        "Statements that met a moved shard's fence (its table renamed away on the old datasource) and waited for the shard map, by result: moved (ran again under the new map), not_moving (no cut-over stood: the error stands), undone (the cut-over was undone: ran again under the same map), timed_out (shard_map.fence_wait passed: the error stands)",
        waits,
    );
}

/// Backend connections, sizes, checkout waits and connect errors per datasource and pool
/// (`main`, `found_rows`), and whether each datasource is up: what the pool alerts of
/// `docker/prometheus/alerts.yml` need.
fn pools(r: &mut Registry, rt: &Runtime) {
    let report = rt.pools.report();
    let gauges = || Family::<Vec<(&'static str, String)>, Gauge>::default();
    let counters = || Family::<Vec<(&'static str, String)>, Counter>::default();
    let (connections, size) = (gauges(), gauges());
    let (waits, timeouts, connect_errors) = (counters(), counters(), counters());
    let up = gauges();
    for p in &report {
        let mut labels = vec![
            ("datasource", p.datasource.clone()),
            ("pool", p.pool.to_owned()),
        ];
        if p.clustered {
            labels.push(("member", p.member.clone()));
        }
        let with_state = |state: &str| {
            let mut l = labels.clone();
            l.push(("state", state.to_owned()));
            l
        };
        connections
            .get_or_create(&with_state("idle"))
            .set(i64::from(p.idle));
        connections
            .get_or_create(&with_state("in_use"))
            .set(i64::from(p.open.saturating_sub(p.idle)));
        size.get_or_create(&labels).set(i64::from(p.size));
        waits.get_or_create(&labels).inc_by(p.waits);
        timeouts.get_or_create(&labels).inc_by(p.timeouts);
        connect_errors
            .get_or_create(&labels)
            .inc_by(p.connect_errors);
        if p.pool == "main" {
            // As SHOW ROUTEKEY SHARDS says it: down when the main pool has no connection
            // and its last connect attempt failed; a pool never used yet counts as up.
            let down = match rt.topology.clusters().find(|c| c.name == p.datasource) {
                // A clustered datasource is up while a primary is known.
                Some(cluster) => cluster.primary_now().is_none(),
                None => p.open == 0 && !p.last_error.is_empty(),
            };
            up.get_or_create(&vec![("datasource", p.datasource.clone())])
                .set(i64::from(!down));
        }
    }
    r.register(
        "pool_connections",
        "Backend connections per datasource and pool (main, found_rows), by state (idle, in_use)",
        connections,
    );
    r.register(
        "pool_size",
        "Connections a pool may open (the datasource's pool_size), per datasource and pool",
        size,
    );
    r.register(
        "pool_waits",
        "Checkouts that waited for a connection (timeouts included), per datasource and pool; a reloaded pool starts again at 0",
        waits,
    );
    r.register(
        "pool_checkout_timeouts",
        "Checkouts that gave up after the datasource's checkout_timeout, per datasource and pool",
        timeouts,
    );
    r.register(
        "pool_connect_errors",
        "Failed connection attempts to a datasource, per datasource and pool",
        connect_errors,
    );
    r.register(
        "datasource_up",
        "1 when the datasource is usable: one server: 0 when its main pool has no connection and its last connect attempt failed; with members: 1 while the probes know its primary (0 with no writable member, or two: a split brain)",
        up,
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
    for s in ["held", "none", "refused", "failed"] {
        lease
            .get_or_create(&vec![("state", s)])
            .set(i64::from(s == state));
    }
    r.register(
        "worker_lease",
        "The worker id lease: 1 for the current state (held; none: not taken yet or lost; refused: every worker id is leased; failed: the lease table could not be reached)",
        lease,
    );
    r.register(
        "worker_lease_refusals",
        "Times a worker id lease was refused because every worker id was leased",
        counter(issue.lease_full.load(Ordering::Relaxed)),
    );
}
