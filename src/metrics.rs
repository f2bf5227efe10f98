//! Prometheus metrics on the admin port's `/metrics` (SPEC §7), in the Prometheus text
//! format 0.0.4, built with the `prometheus-client` crate.
//!
//! Every name starts with `routekey_`, counters end in `_total`, durations are histograms in
//! seconds (`_seconds`), and every label set is bounded: layers, reasons, statement kinds,
//! outcomes and results are fixed lists; datasources and channels come from the
//! configuration; error codes are the server's (a few hundred at most); callers without a
//! region are the top [`TOP_CALLERS`], the rest summed as `other`.
//!
//! Counters that sessions bump on the hot path live in [`Metrics`] (statements, backend
//! errors, clients) or next to what they count (route layers and index lookups in
//! [`crate::route::RouteStats`], pool waits in [`crate::backend::Pools`], ids in
//! [`crate::id::issuer::IssueStats`]); [`render`] reads them all at scrape time.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::route::{Layer, LookupResult};
use crate::server::Proxy;

/// Callers without a region exported by name; the others are summed as `other`.
pub const TOP_CALLERS: usize = 20;

/// The `Content-Type` of [`render`]'s output.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// A histogram of durations in seconds: 18 buckets from 50 µs doubling to 6.6 s.
pub fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_05, 2.0, 18))
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatementLabels {
    kind: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BackendErrorLabels {
    datasource: String,
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UserLabel {
    user: String,
}

/// Probe results, as `routekey_probes_total{result}` names them.
pub const PROBE_RESULTS: [&str; 3] = ["found", "not_found", "ambiguous"];

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// The proxy's own counters (one set per [`Proxy`]).
pub struct Metrics {
    statements: Family<StatementLabels, Counter>,
    statement_duration: HistogramFamily<KindLabel>,
    backend_errors: Family<BackendErrorLabels, Counter>,
    client_connections: Gauge,
    clients_accepted: Counter,
    config_reloads: Family<ResultLabel, Counter>,
    draining: AtomicBool,
    scatters: Family<UserLabel, Counter>,
    /// The same counts, listed by SHOW ROUTEKEY STATS (users are configured: few).
    scatters_by_user: std::sync::Mutex<std::collections::BTreeMap<String, u64>>,
    fan_out: Histogram,
    probes: Family<ResultLabel, Counter>,
    merge_cap_hits: Counter,
    /// Handles on the series of `statements` and `statement_duration`, by
    /// [`STATEMENT_KINDS`] position (and ok, error): counting takes no lock.
    by_kind: Vec<([Counter; 2], Histogram)>,
}

/// Statement kinds, as [`statement_kind`] names them, and `prepare`.
pub const STATEMENT_KINDS: [&str; 6] = ["select", "insert", "update", "delete", "other", "prepare"];

impl Default for Metrics {
    fn default() -> Self {
        let mut m = Self {
            statements: Family::default(),
            statement_duration: Family::new_with_constructor(latency_histogram),
            backend_errors: Family::default(),
            client_connections: Gauge::default(),
            clients_accepted: Counter::default(),
            config_reloads: Family::default(),
            draining: AtomicBool::new(false),
            scatters: Family::default(),
            scatters_by_user: Default::default(),
            fan_out: Histogram::new(exponential_buckets(1.0, 2.0, 8)),
            probes: Family::default(),
            merge_cap_hits: Counter::default(),
            by_kind: Vec::new(),
        };
        for result in PROBE_RESULTS {
            let _ = m.probes.get_or_create(&ResultLabel { result });
        }
        // Every known series exists from the start (at 0), so rates and dashboards see
        // them before the first event.
        for kind in STATEMENT_KINDS {
            let counter = |outcome| {
                m.statements
                    .get_or_create(&StatementLabels { kind, outcome })
                    .clone()
            };
            let counters = [counter("ok"), counter("error")];
            let histogram = m
                .statement_duration
                .get_or_create(&KindLabel { kind })
                .clone();
            m.by_kind.push((counters, histogram));
        }
        for result in ["success", "failure"] {
            let _ = m.config_reloads.get_or_create(&ResultLabel { result });
        }
        m
    }
}

/// What a statement was, for `routekey_statements_total{kind}`: `select`, `insert`
/// (`REPLACE` too), `update`, `delete`, `other`; `prepare` for COM_STMT_PREPARE.
pub fn statement_kind(sql: &[u8]) -> &'static str {
    let mut rest = sql;
    loop {
        rest = rest.trim_ascii_start();
        if let Some(after) = rest.strip_prefix(b"/*") {
            // A comment (an executable `/*!...*/` one counts as its contents' kind: rare).
            match after.windows(2).position(|w| w == b"*/") {
                Some(end) => rest = &after[end + 2..],
                None => return "other",
            }
        } else if let Some(after) = rest.strip_prefix(b"(") {
            rest = after;
        } else {
            break;
        }
    }
    let end = rest
        .iter()
        .position(|b| !b.is_ascii_alphabetic())
        .unwrap_or(rest.len());
    match rest[..end].to_ascii_lowercase().as_slice() {
        b"select" | b"with" | b"values" | b"table" => "select",
        b"insert" | b"replace" => "insert",
        b"update" => "update",
        b"delete" => "delete",
        _ => "other",
    }
}

impl Metrics {
    /// Counts one statement of `kind` (see [`statement_kind`]) that took `started.elapsed()`.
    pub fn count_statement(&self, kind: &'static str, ok: bool, started: Instant) {
        let seconds = started.elapsed().as_secs_f64();
        match STATEMENT_KINDS.iter().position(|k| *k == kind) {
            Some(i) => {
                let (counters, histogram) = &self.by_kind[i];
                counters[usize::from(!ok)].inc();
                histogram.observe(seconds);
            }
            None => {
                let outcome = if ok { "ok" } else { "error" };
                self.statements
                    .get_or_create(&StatementLabels { kind, outcome })
                    .inc();
                self.statement_duration
                    .get_or_create(&KindLabel { kind })
                    .observe(seconds);
            }
        }
    }

    /// Counts an error from a datasource: a server error code, or `unavailable` / `timeout`
    /// / `io` when there was no server answer.
    pub fn count_backend_error(&self, datasource: &str, code: &str) {
        self.backend_errors
            .get_or_create(&BackendErrorLabels {
                datasource: datasource.to_owned(),
                code: code.to_owned(),
            })
            .inc();
    }

    /// A statement without a usable order id ran on `shards` shards for `user`; a read of
    /// several shards by order ids counts its fan-out only.
    pub fn count_fan_out(&self, user: Option<&str>, shards: usize) {
        self.fan_out.observe(shards as f64);
        if let Some(user) = user {
            self.scatters
                .get_or_create(&UserLabel {
                    user: user.to_owned(),
                })
                .inc();
            *self
                .scatters_by_user
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(user.to_owned())
                .or_default() += 1;
        }
    }

    /// What probes for unresolved ids found: on exactly one shard, nowhere, on several.
    pub fn count_probes(&self, found: u64, not_found: u64, ambiguous: u64) {
        for (result, n) in PROBE_RESULTS.into_iter().zip([found, not_found, ambiguous]) {
            self.probes.get_or_create(&ResultLabel { result }).inc_by(n);
        }
    }

    /// A merge failed at `sharding.merge_row_cap`.
    pub fn count_merge_cap_hit(&self) {
        self.merge_cap_hits.inc();
    }

    /// Scatters so far by user, probes by result, merge cap hits (SHOW ROUTEKEY STATS).
    pub fn scatter_counts(&self) -> Vec<(String, u64)> {
        let mut rows: Vec<(String, u64)> = self
            .scatters_by_user
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(user, n)| (format!("scatters_user_{user}"), *n))
            .collect();
        for result in PROBE_RESULTS {
            let n = self.probes.get_or_create(&ResultLabel { result }).get();
            rows.push((format!("probes_{result}"), n));
        }
        rows.push(("merge_row_cap_hits".to_owned(), self.merge_cap_hits.get()));
        rows
    }

    /// A client connected; the returned guard counts it until dropped.
    pub fn client_connected(&self) -> ClientGuard<'_> {
        self.clients_accepted.inc();
        self.client_connections.inc();
        ClientGuard(&self.client_connections)
    }

    /// Counts a configuration reload.
    pub fn count_reload(&self, ok: bool) {
        let result = if ok { "success" } else { "failure" };
        self.config_reloads
            .get_or_create(&ResultLabel { result })
            .inc();
    }

    /// Marks the process as draining (SIGTERM or `/quitquitquit`).
    pub fn set_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Whether a drain started.
    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }
}

/// Counts one open client connection while alive.
pub struct ClientGuard<'a>(&'a Gauge);

impl Drop for ClientGuard<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

fn counter(value: u64) -> Counter {
    let c = Counter::default();
    c.inc_by(value);
    c
}

/// The exposition of every metric of `proxy`, in the Prometheus text format.
pub fn render(proxy: &Proxy) -> String {
    let mut r = Registry::with_prefix("routekey");
    let m = &proxy.metrics;
    let rt = proxy.runtime();

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
    r.register(
        "statements",
        "Client statements, by kind and outcome",
        m.statements.clone(),
    );
    r.register(
        "scatter_statements",
        "Statements without a usable order id run on every shard of a table (or of one channel), by user",
        m.scatters.clone(),
    );
    r.register(
        "statement_fan_out",
        "Shards one statement reached, for statements that reached more than one",
        m.fan_out.clone(),
    );
    r.register(
        "probes",
        "Probes of every shard for order ids nothing resolves (sharding.unresolved_reads = probe), by result",
        m.probes.clone(),
    );
    r.register(
        "merge_row_cap_hits",
        "Merges of several shards' results that failed at sharding.merge_row_cap",
        m.merge_cap_hits.clone(),
    );
    r.register_with_unit(
        "statement_duration",
        "Client statement latency, from the command's arrival to its last packet",
        Unit::Seconds,
        m.statement_duration.clone(),
    );
    r.register(
        "backend_errors",
        "Errors from datasources, by datasource and server error code",
        m.backend_errors.clone(),
    );

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

    r.register(
        "client_connections",
        "Client connections open now",
        m.client_connections.clone(),
    );
    r.register(
        "client_connections_accepted",
        "Client connections accepted",
        m.clients_accepted.clone(),
    );

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

    r.register(
        "config_reloads",
        "Configuration reloads, by result",
        m.config_reloads.clone(),
    );
    let info = Family::<Vec<(&'static str, &'static str)>, Gauge>::default();
    info.get_or_create(&vec![("version", env!("CARGO_PKG_VERSION"))])
        .set(1);
    r.register("build_info", "The running build (value 1)", info);
    let draining = Gauge::<i64>::default();
    draining.set(i64::from(m.draining()));
    r.register(
        "draining",
        "1 while the proxy drains before exiting",
        draining,
    );

    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, &r);
    out
}
