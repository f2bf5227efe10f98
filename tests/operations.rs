//! Running it in production (SPEC §7): `/metrics` counts what happened, exactly; `/readyz`
//! and the drain let running statements and open transactions finish, roll back what is
//! still open at the deadline and refuse new connections; reloads under load fail nothing
//! and put the new settings in force.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::*;
use mysql_async::prelude::*;

/// The samples of one scrape, by metric name and label set (`name{a="x",b="y"}` ->
/// value); histograms give their `_count` and `_sum`.
async fn scrape(h: &Harness) -> HashMap<String, f64> {
    let text = h.metrics_text().await;
    let lines = text.lines().map(|l| Ok(l.to_owned()));
    let parsed = prometheus_parse::Scrape::parse(lines).expect("Prometheus text format");
    let mut out = HashMap::new();
    for s in parsed.samples {
        let mut labels: Vec<String> = s
            .labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{v}\""))
            .collect();
        labels.sort();
        let key = if labels.is_empty() {
            s.metric.clone()
        } else {
            format!("{}{{{}}}", s.metric, labels.join(","))
        };
        match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => {
                out.insert(key, v);
            }
            prometheus_parse::Value::Histogram(buckets) => {
                let count = buckets.last().map_or(0.0, |b| b.count);
                out.insert(format!("{key}:count"), count);
            }
            prometheus_parse::Value::Summary(_) => {}
        }
    }
    out
}

fn get(m: &HashMap<String, f64>, key: &str) -> f64 {
    m.get(key).copied().unwrap_or(0.0)
}

/// Metrics exported only for datasources with `members` (tests/topology/).
const TOPOLOGY_METRICS: [&str; 7] = [
    "routekey_member_up",
    "routekey_member_role",
    "routekey_member_lag_seconds",
    "routekey_split_brain",
    "routekey_reads_total",
    "routekey_causal_waits_total",
    "routekey_write_retries_total",
];

#[tokio::test]
async fn metrics_count_each_resolution_layer_exactly_and_parse_as_prometheus_text() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let s = seed();
    let new = s.channels["EU_CHANNEL"].new_format_ids[41];
    let legacy = s.channels["CN_CHANNEL"].legacy_ids[41];
    let context = s.channels["BIZ_CHANNEL"].legacy_ids[41];
    let before = scrape(&h).await;
    let layer = |m: &HashMap<String, f64>, l: &str| {
        get(
            m,
            &format!("routekey_route_resolutions_total{{layer=\"{l}\"}}"),
        )
    };
    for sql in [
        format!("SELECT order_id FROM t_order WHERE order_id = {new}"),
        format!("SELECT order_id FROM t_order WHERE order_id = {legacy}"),
        format!("SELECT order_id FROM t_order WHERE order_id = {legacy}"),
        format!(
            "SELECT order_id FROM t_order WHERE order_id = {context} AND channel = 'BIZ_CHANNEL'"
        ),
    ] {
        assert_eq!(rows(&mut c, &sql).await.len(), 1, "{sql}");
    }
    // One statement the backend refuses: a backend error with its code.
    assert_eq!(
        error_code(&mut c, "SELECT * FROM no_such_table").await,
        1146
    );
    let after = scrape(&h).await;
    for (l, n) in [
        ("decode", 1.0),
        ("index", 1.0),
        ("cache", 1.0),
        ("context", 1.0),
        ("unresolved", 0.0),
    ] {
        assert_eq!(layer(&after, l) - layer(&before, l), n, "layer {l}");
    }
    let lookups =
        |m: &HashMap<String, f64>| get(m, "routekey_index_lookups_total{result=\"found\"}");
    assert_eq!(lookups(&after) - lookups(&before), 1.0);
    assert_eq!(
        get(&after, "routekey_index_lookup_duration_seconds:count")
            - get(&before, "routekey_index_lookup_duration_seconds:count"),
        1.0
    );
    let selects = |m: &HashMap<String, f64>, outcome: &str| {
        get(
            m,
            &format!("routekey_statements_total{{kind=\"select\",outcome=\"{outcome}\"}}"),
        )
    };
    assert_eq!(selects(&after, "ok") - selects(&before, "ok"), 4.0);
    assert_eq!(selects(&after, "error") - selects(&before, "error"), 1.0);
    assert!(
        get(
            &after,
            "routekey_backend_errors_total{code=\"1146\",datasource=\"ds0\"}"
        ) >= 1.0
    );
    assert_eq!(get(&after, "routekey_client_connections"), 1.0);
    assert!(
        get(
            &after,
            "routekey_pool_connections{datasource=\"ds0\",pool=\"main\",state=\"idle\"}"
        ) >= 1.0
    );
    // What the pool alerts need: sizes, waits, connect errors, datasources up.
    for ds in ["ds0", "ds1"] {
        for pool in ["main", "found_rows"] {
            let labels = format!("{{datasource=\"{ds}\",pool=\"{pool}\"}}");
            assert_eq!(get(&after, &format!("routekey_pool_size{labels}")), 32.0);
            // A checkout that opens a connection counts as a wait (bb8), so waits only exist.
            assert!(after.contains_key(&format!("routekey_pool_waits_total{labels}")));
            for m in [
                "routekey_pool_checkout_timeouts_total",
                "routekey_pool_connect_errors_total",
            ] {
                assert!(after.contains_key(&format!("{m}{labels}")), "{m}{labels}");
                assert_eq!(get(&after, &format!("{m}{labels}")), 0.0, "{m}{labels}");
            }
        }
        assert_eq!(
            get(
                &after,
                &format!("routekey_datasource_up{{datasource=\"{ds}\"}}")
            ),
            1.0
        );
    }
    assert!(
        get(
            &after,
            "routekey_pool_wait_duration_seconds{datasource=\"ds0\"}:count"
        ) >= 1.0
    );
    assert_eq!(get(&after, "routekey_draining"), 0.0);
    assert_eq!(
        get(
            &after,
            &format!(
                "routekey_build_info{{version=\"{}\"}}",
                env!("CARGO_PKG_VERSION")
            )
        ),
        1.0
    );
    // Issuance: per channel, and without a region per caller.
    let id: Option<u64> = c.query_first("SELECT NEXT_ORDER_ID('GB')").await.unwrap();
    assert!(id.is_some());
    let _: Option<u64> = c.query_first("SELECT NEXT_ORDER_ID()").await.unwrap();
    let after = scrape(&h).await;
    assert_eq!(
        get(&after, "routekey_ids_issued_total{channel=\"EU_CHANNEL\"}"),
        1.0
    );
    assert_eq!(
        get(
            &after,
            "routekey_ids_issued_without_region_total{caller=\"app\"}"
        ),
        1.0
    );
    assert_eq!(get(&after, "routekey_worker_lease{state=\"held\"}"), 1.0);
    drop(c);
    h.stop().await;
}

/// A config whose drain deadline is `timeout`.
fn draining_config(timeout: Duration) -> routekey_proxy::config::Config {
    let mut config = config();
    config.server.drain_timeout = timeout;
    config
}

async fn post_quit(h: &Harness) -> u16 {
    reqwest::Client::new()
        .post(format!("http://{}/quitquitquit", h.admin))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

async fn ready_status(h: &Harness) -> u16 {
    reqwest::get(format!("http://{}/readyz", h.admin))
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn a_drain_lets_a_running_statement_and_an_open_transaction_finish() {
    let mut h = Harness::start_with(draining_config(Duration::from_secs(20))).await;
    assert_eq!(ready_status(&h).await, 200);
    let id = fresh_new_id(5);
    let _cleanup = Cleanup::new(&[id]);
    // A transaction with a write in it, a statement that runs 2 s, an idle client.
    let mut tx = h.client().await;
    exec(&mut tx, "BEGIN").await;
    exec(&mut tx, &insert_order_sql(id, "EU_CHANNEL", "drain")).await;
    let mut busy = h.client().await;
    let running = tokio::spawn(async move {
        let slept: Option<u64> = busy.query_first("SELECT SLEEP(2)").await.unwrap();
        (slept, busy)
    });
    let mut idle = h.client().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(post_quit(&h).await, 200);
    assert_eq!(ready_status(&h).await, 503, "not ready at once");
    // New connections are refused; the idle one is closed.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        tokio::net::TcpStream::connect(h.addr).await.is_err(),
        "the listener closed"
    );
    assert!(
        idle.query_drop("SELECT 1").await.is_err(),
        "idle client closed"
    );
    // The running statement finishes with its result.
    let (slept, mut busy) = running.await.unwrap();
    assert_eq!(slept, Some(0));
    assert!(
        busy.query_drop("SELECT 1").await.is_err(),
        "closed after its statement"
    );
    // The transaction goes on to its COMMIT, then its connection closes.
    let n: Option<u64> = tx
        .query_first(format!(
            "SELECT COUNT(*) FROM t_order WHERE order_id = {id}"
        ))
        .await
        .unwrap();
    assert_eq!(n, Some(1));
    exec(&mut tx, "COMMIT").await;
    assert!(
        tx.query_drop("SELECT 1").await.is_err(),
        "closed after COMMIT"
    );
    assert!(
        h.wait_stopped(Duration::from_secs(5)).await,
        "serve returned"
    );
    let (shard, _) = (expected_shard("EU_CHANNEL", id), ());
    assert!(physical_row(shard, id).await.is_some(), "the commit landed");
}

#[tokio::test]
async fn a_transaction_still_open_at_the_drain_deadline_is_rolled_back() {
    let mut h = Harness::start_with(draining_config(Duration::from_secs(2))).await;
    let id = fresh_new_id(2);
    let _cleanup = Cleanup::new(&[id]);
    let mut tx = h.client().await;
    exec(&mut tx, "BEGIN").await;
    exec(&mut tx, &insert_order_sql(id, "GLOBAL_CHANNEL", "deadline")).await;
    let started = Instant::now();
    assert_eq!(post_quit(&h).await, 200);
    assert!(
        h.wait_stopped(Duration::from_secs(10)).await,
        "serve returned"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(1900),
        "{:?}",
        started.elapsed()
    );
    assert!(
        tx.query_drop("COMMIT").await.is_err(),
        "the session was closed"
    );
    let shard = expected_shard("GLOBAL_CHANNEL", id);
    assert!(
        physical_row(shard, id).await.is_none(),
        "rolled back on the backend"
    );
}

#[tokio::test]
async fn quitquitquit_is_for_post_only() {
    let h = Harness::start().await;
    let reply = reqwest::get(format!("http://{}/quitquitquit", h.admin))
        .await
        .unwrap();
    assert_eq!(reply.status().as_u16(), 405);
    assert_eq!(ready_status(&h).await, 200, "a GET does not drain");
    h.stop().await;
}

#[tokio::test]
async fn reloads_under_load_fail_no_statement_and_put_new_settings_in_force() {
    let h = Harness::start().await;
    // The shard map table's first reading was a generation of its own.
    let first = h.proxy.runtime().generation;
    let base =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config/demo.toml")).unwrap();
    let dir = std::env::temp_dir().join(format!("routekey-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("routekey.toml");
    let ports = |text: &str| {
        text.replace("127.0.0.1:33061", &format!("127.0.0.1:{}", sandbox_port(0)))
            .replace("127.0.0.1:33062", &format!("127.0.0.1:{}", sandbox_port(1)))
    };
    // Before: region IE is unknown, so its ids carry no route key.
    let mut c = h.client().await;
    let id: Option<u64> = c.query_first("SELECT NEXT_ORDER_ID('IE')").await.unwrap();
    assert_eq!(
        routekey_proxy::id::IdLayout::default().route_key(id.unwrap()),
        0
    );
    let s = seed();
    let ids: Vec<u64> = CHANNELS
        .iter()
        .flat_map(|(name, ..)| {
            let ch = &s.channels[*name];
            ch.new_format_ids
                .iter()
                .take(3)
                .chain(ch.legacy_ids.iter().take(3))
        })
        .copied()
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut clients = Vec::new();
    for i in 0..16 {
        let (stop, ok, failed, ids) = (stop.clone(), ok.clone(), failed.clone(), ids.clone());
        let mut conn = h.client().await;
        clients.push(tokio::spawn(async move {
            let mut n = i;
            while !stop.load(Ordering::Relaxed) {
                let id = ids[n % ids.len()];
                n += 1;
                let got: Result<Option<u64>, _> = conn
                    .query_first(format!(
                        "SELECT order_id FROM t_order WHERE order_id = {id}"
                    ))
                    .await;
                match got {
                    Ok(Some(g)) if g == id => ok.fetch_add(1, Ordering::Relaxed),
                    other => {
                        eprintln!("client {i}: {other:?}");
                        failed.fetch_add(1, Ordering::Relaxed)
                    }
                };
            }
        }));
    }
    let flags: routekey_proxy::process::Flags = Arc::new(|_| Ok(()));
    for round in 0..10 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let text = if round == 4 {
            "[server]\nlisten = 'not an address'\n".to_owned()
        } else {
            // Each round a new cache size (the route cache starts over only when needed)
            // and, from round 5, the new region.
            let mut t = ports(&base);
            t = t.replace("[regions]", &format!("[regions]\n# round {round}"));
            if round >= 5 {
                t = t.replace("[regions]", "[regions]\nIE = \"EU_CHANNEL\"");
            }
            t
        };
        std::fs::write(&path, text).unwrap();
        routekey_proxy::process::reload(&h.proxy, &path, &flags, "test");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.await.unwrap();
    }
    assert_eq!(failed.load(Ordering::Relaxed), 0, "failed statements");
    assert!(
        ok.load(Ordering::Relaxed) > 100,
        "{} statements",
        ok.load(Ordering::Relaxed)
    );
    // The new region is in force for sessions that were open all along.
    let id: Option<u64> = c.query_first("SELECT NEXT_ORDER_ID('IE')").await.unwrap();
    assert_eq!(
        routekey_proxy::id::IdLayout::default().route_key(id.unwrap()),
        5
    );
    let m = scrape(&h).await;
    assert_eq!(
        get(&m, "routekey_config_reloads_total{result=\"success\"}"),
        9.0
    );
    assert_eq!(
        get(&m, "routekey_config_reloads_total{result=\"failure\"}"),
        1.0
    );
    assert_eq!(h.proxy.runtime().generation, first + 9);
    let _ = std::fs::remove_dir_all(&dir);
    drop(c);
    h.stop().await;
}

#[tokio::test]
async fn a_reload_that_changes_what_needs_a_restart_is_refused() {
    let h = Harness::start().await;
    let mut changed = config();
    changed.server.listen = Some("127.0.0.1:1".parse().unwrap());
    let e = h.proxy.reload(changed).unwrap_err();
    assert!(e.contains("server.listen") && e.contains("restart"), "{e}");
    // The meta datasource holds the worker id leases: moving it while the proxy runs would
    // let another proxy lease the same worker id on the new server.
    let mut changed = config();
    let meta = changed.index.datasource;
    changed.datasources[usize::from(meta.0)].address = "127.0.0.1:1".to_owned();
    let e = h.proxy.reload(changed).unwrap_err();
    assert!(e.contains("meta"), "{e}");
    // Unchanged since the shard map's first reading.
    assert_eq!(h.proxy.runtime().generation, 2);
    // Its pool size is not where the leases live: that reloads.
    let mut changed = config();
    changed.datasources[usize::from(meta.0)].pool_size = 4;
    assert_eq!(h.proxy.reload(changed).unwrap(), 3);
    // New cache settings: a new cache, the same counters (they never go back).
    let mut changed = config();
    changed.cache.negative_ttl += Duration::from_secs(1);
    h.proxy.reload(changed).unwrap();
    assert!(Arc::ptr_eq(
        &h.proxy.router_stats,
        h.proxy.runtime().router.stats()
    ));
    h.stop().await;
}

/// The demo configuration with EU and GLOBAL trading their shards (a changed shard map).
fn swapped_shard_map() -> routekey_proxy::config::Config {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config/demo.toml"))
        .unwrap()
        .replacen("base_shard = 0", "base_shard = X", 1)
        .replacen("base_shard = 4", "base_shard = 0", 1)
        .replacen("base_shard = X", "base_shard = 4", 1);
    let mut config = routekey_proxy::config::Config::from_toml(&text, "swapped").unwrap();
    for (i, ds) in config.datasources.iter_mut().enumerate() {
        ds.address = format!("127.0.0.1:{}", sandbox_port(i));
    }
    config
}

#[tokio::test]
async fn a_session_pinned_to_old_backend_state_ends_when_the_shard_map_changes() {
    let h = Harness::start().await;
    let mut pinned = h.client().await;
    exec(&mut pinned, "SELECT @rows := 0").await;
    let mut plain = h.client().await;
    exec(&mut plain, "SELECT 1").await;
    h.proxy.reload(swapped_shard_map()).unwrap();
    // The pinned session cannot follow the new map: it ends, and says why.
    let (code, _, message) = server_error(pinned.query_drop("SELECT 1").await);
    assert_eq!(code, 1927, "{message}");
    assert!(
        message.contains("shard map or the datasources changed"),
        "{message}"
    );
    assert!(pinned.query_drop("SELECT 1").await.is_err(), "closed");
    // Other sessions follow it: an EU id now routes to the old GLOBAL shards.
    let id = fresh_new_id(5);
    let _cleanup = Cleanup::new(&[id]);
    exec(&mut plain, &insert_order_sql(id, "EU_CHANNEL", "swapped")).await;
    let shard = 4 + (id % 4) as u32;
    assert!(physical_row(shard, id).await.is_some(), "on shard {shard}");
    drop(plain);
    h.stop().await;
}

#[tokio::test]
async fn kill_query_reaches_the_right_backend_after_a_reload_renumbers_datasources() {
    let h = Harness::start().await;
    let id = fresh_new_id_on(1, 1);
    let _cleanup = Cleanup::new(&[id]);
    let mut a = h.client().await;
    // One row on ds1, so that SLEEP runs once there.
    exec(&mut a, &insert_order_sql(id, "CN_CHANNEL", "kill")).await;
    let a_id: Option<u32> = a.query_first("SELECT CONNECTION_ID()").await.unwrap();
    let running = tokio::spawn(async move {
        let started = Instant::now();
        let r = a
            .query_drop(format!(
                "SELECT SLEEP(5) FROM t_order WHERE order_id = {id}"
            ))
            .await;
        (started.elapsed(), r)
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    // A datasource whose name sorts first: every datasource id moves up by one.
    let mut text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config/demo.toml")).unwrap();
    text.push_str("\n[datasources.aaa]\naddress = \"127.0.0.1:1\"\nuser = \"x\"\n");
    let mut config = routekey_proxy::config::Config::from_toml(&text, "more").unwrap();
    for ds in config.datasources.iter_mut() {
        for (i, port) in [(33061, sandbox_port(0)), (33062, sandbox_port(1))] {
            let _ = i;
            ds.address = ds.address.replace(&format!(":{}", i), &format!(":{port}"));
        }
    }
    assert_eq!(config.datasources[0].name, "aaa");
    h.proxy.reload(config).unwrap();
    let mut killer = h.client().await;
    exec(&mut killer, &format!("KILL QUERY {}", a_id.unwrap())).await;
    let (took, _) = running.await.unwrap();
    assert!(
        took < Duration::from_secs(3),
        "the statement was killed: {took:?}"
    );
    h.stop().await;
}

#[tokio::test]
async fn readyz_counts_a_busy_pool_as_ready() {
    let mut config = config();
    for ds in config.datasources.iter_mut() {
        ds.pool_size = 2;
    }
    let h = Harness::start_with(config).await;
    let mut busy = Vec::new();
    for _ in 0..2 {
        let mut c = h.client().await;
        busy.push(tokio::spawn(async move {
            c.query_drop("SELECT SLEEP(2)").await.unwrap();
            c
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(ready_status(&h).await, 200);
    for b in busy {
        drop(b.await.unwrap());
    }
    h.stop().await;
}

#[tokio::test]
async fn every_metric_the_dashboard_and_the_docs_use_is_exported() {
    let h = Harness::start().await;
    // Series that exist once something happened: a backend error, an id without a region,
    // a scatter.
    let mut c = h.client().await;
    assert_eq!(
        error_code(&mut c, "SELECT * FROM no_such_table").await,
        1146
    );
    let _: Option<u64> = c.query_first("SELECT NEXT_ORDER_ID()").await.unwrap();
    // A read without an order id (a scatter over every shard).
    let _: Option<u64> = c.query_first("SELECT COUNT(*) FROM t_order").await.unwrap();
    let text = h.metrics_text().await;
    let exported: std::collections::HashSet<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    let names = |path: &str| -> Vec<String> {
        let doc =
            std::fs::read_to_string(format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        let mut found = Vec::new();
        for (i, _) in doc.match_indices("routekey_") {
            let name: String = doc[i..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            let base = ["_bucket", "_count", "_sum"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .unwrap_or(&name)
                .to_owned();
            found.push(base);
        }
        found
    };
    for path in ["docker/grafana/routekey-proxy.json", "docs/operations.md"] {
        let used = names(path);
        assert!(used.len() > 10, "{path}: {used:?}");
        for name in used {
            // The Redis tier's metrics exist when a Redis tier is configured (tests/redis.rs);
            // the members' when a datasource has `members` (tests/topology/ checks them).
            if name.starts_with("routekey_cache_redis")
                || TOPOLOGY_METRICS.contains(&name.as_str())
                || name == "routekey_proxy"
                // `routekey_` and families written `routekey_member_*`.
                || name.ends_with('_')
                // The sandbox's ed25519 account, its read_only-bound account, the XA
                // decision table, the shard map and moves tables, a move's replication
                // connection and lock: not metrics.
                || name == "routekey_ed25519"
                || name == "routekey_rw"
                || name == "routekey_xa_decisions"
                || name == "routekey_shard_map"
                || name == "routekey_shard_moves"
                || name == "routekey_move"
                || name == "routekey_shards_move"
            {
                continue;
            }
            assert!(
                exported.contains(name.as_str()),
                "{path} uses {name}, not exported"
            );
        }
    }
    h.stop().await;
}

#[tokio::test]
async fn readyz_names_a_datasource_that_does_not_answer() {
    let mut config = config();
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    config.datasources[1].address = format!("127.0.0.1:{port}");
    let h = Harness::start_with(config).await;
    let started = Instant::now();
    let reply = reqwest::get(format!("http://{}/readyz", h.admin))
        .await
        .unwrap();
    assert_eq!(reply.status().as_u16(), 503);
    let body = reply.text().await.unwrap();
    assert!(
        body.contains("datasource ds1") && !body.contains("ds0"),
        "{body}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        reqwest::get(format!("http://{}/healthz", h.admin))
            .await
            .unwrap()
            .status()
            .as_u16(),
        200,
        "alive all the same"
    );
    h.stop().await;
}

#[tokio::test]
async fn show_routekey_shards_and_pools_describe_the_map_and_a_datasource_that_is_down() {
    let mut config = config();
    // ds1 on a port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    config.datasources[1].address = format!("127.0.0.1:{port}");
    let h = Harness::start_with(config.clone()).await;
    let mut c = h.client().await;
    // A statement on each datasource: ds0 answers, ds1 cannot be reached.
    let on_ds0 = fresh_new_id_on(5, 0);
    let on_ds1 = fresh_new_id_on(1, 1);
    let _: Vec<mysql_async::Row> = c
        .query(format!("SELECT * FROM t_order WHERE order_id = {on_ds0}"))
        .await
        .unwrap();
    let e = c
        .query_drop(format!("SELECT * FROM t_order WHERE order_id = {on_ds1}"))
        .await;
    assert_eq!(server_code(e), 1429);

    type ShardRow = (u32, String, String, String, String, String, u64);
    let shards: Vec<ShardRow> = c.query("SHOW ROUTEKEY SHARDS").await.unwrap();
    assert_eq!(shards.len(), config.sharding.shards.len());
    for (shard, channel_name, datasource, database, tables, pool, _map_version) in &shards {
        let s = &config.sharding.shards[*shard as usize];
        let ds = usize::from(s.datasource.0);
        assert_eq!(datasource, &config.datasources[ds].name);
        assert_eq!(database, &s.database);
        assert_eq!(tables, &s.tables.join(", "));
        let expected = CHANNELS
            .iter()
            .find(|c| (c.2..c.2 + 4).contains(shard))
            .unwrap();
        assert_eq!(channel_name, expected.0, "shard {shard}");
        if ds == 1 {
            assert!(pool.starts_with("down: "), "shard {shard}: {pool}");
        } else {
            assert!(pool.starts_with("up: "), "shard {shard}: {pool}");
        }
    }

    type PoolRow = (
        String,
        String,
        u32,
        u32,
        u32,
        u32,
        u64,
        u64,
        u64,
        String,
        String,
    );
    let pools: Vec<PoolRow> = c.query("SHOW ROUTEKEY POOLS").await.unwrap();
    let main = |name: &str| {
        pools
            .iter()
            .find(|p| p.0 == name && p.1 == "main")
            .unwrap_or_else(|| panic!("{name}: {pools:?}"))
            .clone()
    };
    let ds0 = main(&config.datasources[0].name);
    assert_eq!(ds0.2, config.datasources[0].pool_size);
    assert!(ds0.3 >= 1, "ds0 has an open connection: {ds0:?}");
    assert_eq!(ds0.5, ds0.3 - ds0.4, "in use = open - idle: {ds0:?}");
    assert_eq!(ds0.8, 0, "{ds0:?}");
    let ds1 = main(&config.datasources[1].name);
    assert_eq!(ds1.3, 0, "{ds1:?}");
    assert!(ds1.8 >= 1, "ds1 counted its connect errors: {ds1:?}");
    assert!(!ds1.9.is_empty(), "{ds1:?}");
    assert_eq!(pools.len(), 2 * config.datasources.len(), "{pools:?}");

    // The same on /metrics, for the alerts (docker/prometheus/alerts.yml).
    let m = scrape(&h).await;
    assert_eq!(get(&m, "routekey_datasource_up{datasource=\"ds0\"}"), 1.0);
    assert_eq!(get(&m, "routekey_datasource_up{datasource=\"ds1\"}"), 0.0);
    assert!(m.contains_key("routekey_datasource_up{datasource=\"ds1\"}"));
    assert!(
        get(
            &m,
            "routekey_pool_connect_errors_total{datasource=\"ds1\",pool=\"main\"}"
        ) >= 1.0
    );
    assert!(
        get(
            &m,
            "routekey_backend_errors_total{code=\"unavailable\",datasource=\"ds1\"}"
        ) >= 1.0,
        "{m:?}"
    );
    h.stop().await;
}
