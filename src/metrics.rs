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
//! [`crate::issuance::IssueStats`]); [`crate::admin::exposition::render`] reads them all
//! at scrape time. This module imports nothing of the crate: every layer may count.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

/// Callers without a region exported by name; the others are summed as `other`.
pub const TOP_CALLERS: usize = 20;

/// The `Content-Type` of the exposition ([`crate::admin::exposition::render`]).
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
struct PlanLabel {
    plan: &'static str,
}

/// How a read merged from several shards was asked, as `routekey_merged_reads_total`
/// labels it: one statement per shard; one per datasource (`sharding.combine_shards`),
/// its columns held from an earlier run; the same, its columns described as it ran.
pub const MERGED_READ_PLANS: [&str; 3] = ["per_shard", "combined", "describing"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UserLabel {
    user: String,
}

/// The `user` label of failed logins with a user name the configuration does not have.
pub const UNKNOWN_USER: &str = "(unknown)";

/// Probe results, as `routekey_probes_total{result}` names them.
pub const PROBE_RESULTS: [&str; 3] = ["found", "not_found", "ambiguous"];

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// The proxy's own counters (one set per [`crate::proxy::Proxy`]).
pub struct Metrics {
    statements: Family<StatementLabels, Counter>,
    statement_duration: HistogramFamily<KindLabel>,
    backend_errors: Family<BackendErrorLabels, Counter>,
    client_connections: Gauge,
    clients_accepted: Counter,
    clients_refused: Counter,
    clients_idle_timed_out: Counter,
    config_reloads: Family<ResultLabel, Counter>,
    draining: AtomicBool,
    scatters: Family<UserLabel, Counter>,
    login_failures: Family<UserLabel, Counter>,
    /// The same counts, listed by SHOW ROUTEKEY STATS (users are configured: few).
    scatters_by_user: std::sync::Mutex<std::collections::BTreeMap<String, u64>>,
    fan_out: Histogram,
    probes: Family<ResultLabel, Counter>,
    merge_cap_hits: Counter,
    merged_reads: Family<PlanLabel, Counter>,
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
            clients_refused: Counter::default(),
            clients_idle_timed_out: Counter::default(),
            config_reloads: Family::default(),
            draining: AtomicBool::new(false),
            scatters: Family::default(),
            login_failures: Family::default(),
            scatters_by_user: Default::default(),
            fan_out: Histogram::new(exponential_buckets(1.0, 2.0, 8)),
            probes: Family::default(),
            merge_cap_hits: Counter::default(),
            merged_reads: Family::default(),
            by_kind: Vec::new(),
        };
        for plan in MERGED_READ_PLANS {
            let _ = m.merged_reads.get_or_create(&PlanLabel { plan });
        }
        for result in PROBE_RESULTS {
            let _ = m.probes.get_or_create(&ResultLabel { result });
        }
        // Failed logins of unknown users exist at 0, so an alert on their rate has a series.
        let _ = m.login_failures.get_or_create(&UserLabel {
            user: UNKNOWN_USER.to_owned(),
        });
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
    let word = &rest[..end];
    // Compared without lower-casing a copy (this runs for every statement).
    let is = |keyword: &[u8]| word.eq_ignore_ascii_case(keyword);
    if is(b"select") || is(b"with") || is(b"values") || is(b"table") {
        "select"
    } else if is(b"insert") || is(b"replace") {
        "insert"
    } else if is(b"update") {
        "update"
    } else if is(b"delete") {
        "delete"
    } else {
        "other"
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

    /// A read merged from several shards ran as `plan` (one of [`MERGED_READ_PLANS`]).
    pub fn count_merged_read(&self, plan: &'static str) {
        self.merged_reads.get_or_create(&PlanLabel { plan }).inc();
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
        for plan in MERGED_READ_PLANS {
            let n = self.merged_reads.get_or_create(&PlanLabel { plan }).get();
            rows.push((format!("merged_reads_{plan}"), n));
        }
        rows
    }

    /// A client connected; the returned guard counts it until dropped.
    pub fn client_connected(&self) -> ClientGuard<'_> {
        self.clients_accepted.inc();
        self.client_connections.inc();
        ClientGuard(&self.client_connections)
    }

    /// Counts a client connection refused at `server.max_connections`.
    pub fn count_connection_refused(&self) {
        self.clients_refused.inc();
    }

    /// Counts a client connection ended for idling longer than its session's
    /// `wait_timeout` (MariaDB's `Aborted_clients` counts these with other aborts).
    pub fn count_idle_timeout(&self) {
        self.clients_idle_timed_out.inc();
    }

    /// Counts a failed client login. `user` is a configured user's name, or `None` for a
    /// name no user has (all such counted under `(unknown)`, so made-up names cannot grow
    /// the label set).
    pub fn count_login_failure(&self, user: Option<&str>) {
        let user = user.unwrap_or(UNKNOWN_USER).to_owned();
        self.login_failures.get_or_create(&UserLabel { user }).inc();
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

impl Metrics {
    /// Registers the families and gauges of these counters in `r` (the exposition of
    /// [`crate::admin::exposition::render`]); the series are shared, not copied.
    pub fn register(&self, r: &mut Registry) {
        r.register(
            "statements",
            "Client statements, by kind and outcome",
            self.statements.clone(),
        );
        r.register(
            "scatter_statements",
            "Statements without a usable order id run on every shard of a table (or of one channel), by user",
            self.scatters.clone(),
        );
        r.register(
            "login_failures",
            "Client logins refused (wrong password, unknown user, plugin or TLS requirement not met), by user; user names no account has are counted as (unknown)",
            self.login_failures.clone(),
        );
        r.register(
            "statement_fan_out",
            "Shards one statement reached, for statements that reached more than one",
            self.fan_out.clone(),
        );
        r.register(
            "probes",
            "Probes of every shard for order ids nothing resolves (sharding.unresolved_reads = probe), by result",
            self.probes.clone(),
        );
        r.register(
            "merge_row_cap_hits",
            "Merges of several shards' results that failed at sharding.merge_row_cap",
            self.merge_cap_hits.clone(),
        );
        r.register(
            "merged_reads",
            "Reads merged from several shards, by plan: per_shard (a statement per shard), combined (a statement per datasource, sharding.combine_shards), describing (combined, its columns described as it ran)",
            self.merged_reads.clone(),
        );
        r.register_with_unit(
            "statement_duration",
            "Client statement latency, from the command's arrival to its last packet",
            Unit::Seconds,
            self.statement_duration.clone(),
        );
        r.register(
            "backend_errors",
            "Errors from datasources, by datasource and server error code",
            self.backend_errors.clone(),
        );
        r.register(
            "client_connections",
            "Client connections open now",
            self.client_connections.clone(),
        );
        r.register(
            "client_connections_accepted",
            "Client connections accepted",
            self.clients_accepted.clone(),
        );
        r.register(
            "client_connections_refused",
            "Client connections refused because server.max_connections were open",
            self.clients_refused.clone(),
        );
        r.register(
            "client_idle_timeouts",
            "Client connections closed for idling longer than the session's wait_timeout",
            self.clients_idle_timed_out.clone(),
        );
        r.register(
            "config_reloads",
            "Configuration reloads, by result",
            self.config_reloads.clone(),
        );
        let draining = Gauge::<i64>::default();
        draining.set(i64::from(self.draining()));
        r.register(
            "draining",
            "1 while the proxy drains before exiting",
            draining,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::statement_kind;

    #[test]
    fn a_statement_kind_is_its_first_word_in_any_case_after_comments_and_parentheses() {
        assert_eq!(statement_kind(b"SELECT 1"), "select");
        assert_eq!(statement_kind(b"  sElEcT * FROM t_order"), "select");
        assert_eq!(
            statement_kind(b"/* app */ (select 1) union (select 2)"),
            "select"
        );
        assert_eq!(
            statement_kind(b"WITH x AS (SELECT 1) SELECT * FROM x"),
            "select"
        );
        assert_eq!(statement_kind(b"values (1)"), "select");
        assert_eq!(statement_kind(b"Replace INTO t VALUES (1)"), "insert");
        assert_eq!(statement_kind(b"insert into t values (1)"), "insert");
        assert_eq!(statement_kind(b"UPDATE t SET a = 1"), "update");
        assert_eq!(statement_kind(b"delete from t"), "delete");
        assert_eq!(statement_kind(b"SELECTX 1"), "other");
        assert_eq!(statement_kind(b"SET @a = 1"), "other");
        assert_eq!(statement_kind(b"/* never closed"), "other");
        assert_eq!(statement_kind(b""), "other");
    }
}
