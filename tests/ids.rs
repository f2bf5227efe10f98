//! Issuing order ids (SPEC §6) through a running proxy: `SELECT NEXT_ORDER_ID(...)` (text and
//! prepared), INSERT without `order_id`, `POST /v1/order-ids`; worker id leases on the meta
//! datasource (the 33rd generator refused, takeover only after the holder stopped, release
//! and restart); the clock stepping back; uniqueness across proxy processes.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::*;
use mysql_async::prelude::*;
use routekey_proxy::config::{ChannelId, Config};
use routekey_proxy::id::IdLayout;
use routekey_proxy::id::issuer::{Caller, Clock, IssueFailure, Issuer, SystemClock};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The demo configuration with a lease table of its own (tests that count worker ids).
fn lease_config(tag: &str) -> Config {
    let mut c = config();
    c.issuance.lease_table = format!("rk_lease_{tag}_{}", std::process::id());
    c
}

/// Drops a test's lease table.
async fn drop_lease_table(c: &Config) {
    let mut conn = backend(0).await;
    exec(
        &mut conn,
        &format!(
            "DROP TABLE IF EXISTS {}.{}",
            c.index.database, c.issuance.lease_table
        ),
    )
    .await;
}

/// Rows of a lease table that were ever leased: (worker id, holder, expired,
/// issued_until_ms).
async fn lease_rows(c: &Config) -> Vec<(u64, String, u8, u64)> {
    let mut conn = backend(0).await;
    conn.query(format!(
        "SELECT worker_id, holder, expires_at < NOW(3), issued_until_ms FROM {}.{} WHERE holder <> '' ORDER BY worker_id",
        c.index.database, c.issuance.lease_table
    ))
    .await
    .unwrap()
}

fn caller() -> Caller<'static> {
    Caller {
        user: "test",
        program: Some("ids.rs"),
    }
}

/// The channel an id decodes to (route-key ids only).
fn decoded(c: &Config, id: u64) -> Option<ChannelId> {
    routekey_proxy::id::RouteKeyDecoder::for_config(c)
        .decode(id, now_ms())
        .ok()
}

#[tokio::test]
async fn next_order_id_returns_one_bigint_unsigned_of_the_regions_channel_in_text_and_prepared() {
    let h = Harness::start().await;
    let config = h.proxy.config.clone();
    let eu = config.channel_by_name("EU_CHANNEL");
    let cn = config.channel_by_name("CN_CHANNEL");
    let opts = mysql_async::OptsBuilder::from_opts(h.opts()).connect_attributes(HashMap::from([(
        "program_name".to_owned(),
        "checkout-service".to_owned(),
    )]));
    let mut c = mysql_async::Conn::new(opts).await.unwrap();
    // Text protocol: the column is BIGINT UNSIGNED NOT NULL, named as written.
    let result = c
        .query_iter("SELECT NEXT_ORDER_ID('GB')")
        .await
        .unwrap()
        .collect_and_drop::<mysql_async::Row>()
        .await
        .unwrap();
    assert_eq!(result.len(), 1);
    let column = &result[0].columns_ref()[0];
    assert_eq!(column.name_str(), "NEXT_ORDER_ID('GB')");
    assert_eq!(
        column.column_type(),
        mysql_async::consts::ColumnType::MYSQL_TYPE_LONGLONG
    );
    assert!(
        column
            .flags()
            .contains(mysql_async::consts::ColumnFlags::UNSIGNED_FLAG)
    );
    let text_id: u64 = result[0].get(0).unwrap();
    assert_eq!(decoded(&config, text_id), eu);
    let aliased: Option<(u64,)> = c
        .query_first("select next_order_id('cn') AS id")
        .await
        .unwrap();
    assert_eq!(decoded(&config, aliased.unwrap().0), cn);
    // Prepared, with the region inline and as a parameter.
    let inline: Option<u64> = c
        .exec_first("SELECT NEXT_ORDER_ID('FR')", ())
        .await
        .unwrap();
    assert_eq!(decoded(&config, inline.unwrap()), eu);
    let mut last = 0;
    for region in ["GB", "CN", "GB"] {
        let id: Option<u64> = c
            .exec_first("SELECT NEXT_ORDER_ID(?)", (region,))
            .await
            .unwrap();
        let id = id.unwrap();
        assert_eq!(decoded(&config, id), config.channel_by_region(region));
        assert_ne!(id, last);
        last = id;
    }
    // No region, or one the configuration does not know: route key 0, counted against the
    // caller (MySQL user and program_name).
    let before = h.proxy.issuer.stats().top_callers(10);
    for sql in ["SELECT NEXT_ORDER_ID()", "SELECT NEXT_ORDER_ID('XX')"] {
        let id: Option<u64> = c.query_first(sql).await.unwrap();
        let id = id.unwrap();
        assert_eq!(IdLayout::default().route_key(id), 0, "{sql}");
        assert_eq!(decoded(&config, id), None);
    }
    let callers: Vec<(String, u64)> = c.query("SHOW ROUTEKEY CALLERS").await.unwrap();
    let count = |list: &[(String, u64)]| {
        list.iter()
            .find(|(k, _)| k == "app/checkout-service")
            .map_or(0, |(_, n)| *n)
    };
    assert_eq!(count(&callers), count(&before) + 2, "{callers:?}");
    let stats: HashMap<String, u64> = c
        .query::<(String, u64), _>("SHOW ROUTEKEY STATS")
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(stats["ids_issued_EU_CHANNEL"], 4, "{stats:?}");
    assert_eq!(stats["ids_issued_CN_CHANNEL"], 2, "{stats:?}");
    assert_eq!(stats["ids_issued_without_region"], 2, "{stats:?}");
    h.stop().await;
}

#[tokio::test]
async fn an_insert_without_order_id_gets_one_id_per_row_on_its_channels_shards() {
    let h = Harness::start().await;
    let config = h.proxy.config.clone();
    let cleanup = Cleanup::default();
    let mut c = h.client().await;
    let note = format!("autoid-{}-{}", std::process::id(), now_ms());
    // Four EU rows (ds0, shards 0-3) by channel or region, as text.
    c.query_drop(format!(
        "INSERT INTO t_order (channel, region, user_id, amount, status, note, created_at) VALUES \
         ('EU_CHANNEL', 'GB', 1, 1, 'NEW', '{note}', NOW()), ('EU_CHANNEL', 'FR', 2, 2, 'NEW', '{note}', NOW()), \
         ('EU_CHANNEL', 'DE', 3, 3, 'NEW', '{note}', NOW()), ('EU_CHANNEL', 'ES', 4, 4, 'NEW', '{note}', NOW())"
    ))
    .await
    .unwrap();
    let first = c
        .last_insert_id()
        .expect("the OK packet carries the first id");
    assert_eq!(c.affected_rows(), 4);
    let seen: Option<(u64, u64)> = c
        .query_first("SELECT LAST_INSERT_ID(), @@last_insert_id")
        .await
        .unwrap();
    assert_eq!(seen, Some((first, first)));
    // INSERT ... SET, and a prepared INSERT with parameters (GLOBAL: shards 4-7, ds0).
    c.query_drop(format!(
        "INSERT INTO t_order SET channel = 'GLOBAL_CHANNEL', region = 'US', user_id = 5, amount = 5, status = 'NEW', note = '{note}', created_at = NOW()"
    ))
    .await
    .unwrap();
    let set_id = c.last_insert_id().unwrap();
    let stmt = "INSERT INTO t_order (region, channel, user_id, amount, status, note, created_at) VALUES (?, ?, ?, 6, 'NEW', ?, NOW())";
    c.exec_drop(stmt, ("JP", "GLOBAL_CHANNEL", 6, &note))
        .await
        .unwrap();
    let prepared_id = c.last_insert_id().unwrap();
    let again: Option<u64> = c.exec_first("SELECT LAST_INSERT_ID()", ()).await.unwrap();
    assert_eq!(again, Some(prepared_id));
    // Every row is on the shard its id routes to, and reads back through the proxy.
    let mut found = Vec::new();
    for shard in 0..8u32 {
        let (ds, table, _) = physical(shard);
        let mut b = backend(ds).await;
        let rows: Vec<(u64, String)> = b
            .exec(
                format!("SELECT order_id, channel FROM {table} WHERE note = ?"),
                (&note,),
            )
            .await
            .unwrap();
        for (id, channel) in rows {
            cleanup.add(id);
            assert_eq!(decoded(&config, id), config.channel_by_name(&channel));
            assert_eq!(expected_shard(&channel, id), shard, "{id} on shard {shard}");
            found.push(id);
        }
    }
    found.sort_unstable();
    assert_eq!(found.len(), 6, "{found:?}");
    for id in [first, set_id, prepared_id] {
        assert!(found.contains(&id), "{id} in {found:?}");
        let n: Option<u64> = c
            .query_first(format!(
                "SELECT COUNT(*) FROM t_order WHERE order_id = {id}"
            ))
            .await
            .unwrap();
        assert_eq!(n, Some(1));
    }
    h.stop().await;
    drop(cleanup);
}

#[tokio::test]
async fn a_channel_not_switched_on_gets_classic_ids_with_index_rows() {
    let mut config = config();
    let eu = config.channel_by_name("EU_CHANNEL").unwrap();
    // Canary: only EU issues route-key ids.
    for (i, on) in config.issuance.route_key_channels.iter_mut().enumerate() {
        *on = i == usize::from(eu.0);
    }
    let h = Harness::start_with(config).await;
    let config = h.proxy.config.clone();
    let cleanup = Cleanup::default();
    let mut c = h.client().await;
    let global: Option<u64> = c.query_first("SELECT NEXT_ORDER_ID('US')").await.unwrap();
    let global = global.unwrap();
    assert_eq!(
        decoded(&config, global),
        None,
        "a classic id does not decode"
    );
    let gb: Option<u64> = c.query_first("SELECT NEXT_ORDER_ID('GB')").await.unwrap();
    assert_eq!(decoded(&config, gb.unwrap()), Some(eu));
    c.query_drop(
        "INSERT INTO t_order (channel, region, user_id, amount, status, created_at) VALUES ('GLOBAL_CHANNEL', 'SG', 9, 9, 'NEW', NOW())",
    )
    .await
    .unwrap();
    let id = cleanup.add(c.last_insert_id().unwrap());
    assert_eq!(decoded(&config, id), None);
    assert_eq!(index_channel(id).await.as_deref(), Some("GLOBAL_CHANNEL"));
    assert_eq!(
        shards_holding(id).await,
        vec![expected_shard("GLOBAL_CHANNEL", id)]
    );
    let status: Option<String> = c
        .query_first(format!("SELECT status FROM t_order WHERE order_id = {id}"))
        .await
        .unwrap();
    assert_eq!(status.as_deref(), Some("NEW"));
    h.stop().await;
    drop(cleanup);
}

#[tokio::test]
async fn an_insert_without_order_id_and_without_a_known_channel_is_refused_and_writes_nothing() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let note = format!("nochannel-{}-{}", std::process::id(), now_ms());
    for sql in [
        format!(
            "INSERT INTO t_order (user_id, amount, status, note, created_at) VALUES (1, 1, 'NEW', '{note}', NOW())"
        ),
        format!(
            "INSERT INTO t_order (channel, region, user_id, amount, status, note, created_at) VALUES ('NOPE', 'XX', 1, 1, 'NEW', '{note}', NOW())"
        ),
        // The second row names no channel: nothing is written, not even the first.
        format!(
            "INSERT INTO t_order (channel, region, user_id, amount, status, note, created_at) VALUES ('EU_CHANNEL', 'GB', 1, 1, 'NEW', '{note}', NOW()), ('', '', 1, 1, 'NEW', '{note}', NOW())"
        ),
    ] {
        let (code, _, message) = server_error(c.query_drop(&sql).await);
        assert_eq!(code, 1526, "{sql}: {message}");
        assert!(message.contains("names no known channel"), "{message}");
    }
    for shard in 0..20u32 {
        let (ds, table, _) = physical(shard);
        let n: Option<u64> = backend(ds)
            .await
            .exec_first(
                format!("SELECT COUNT(*) FROM {table} WHERE note = ?"),
                (&note,),
            )
            .await
            .unwrap();
        assert_eq!(n, Some(0), "shard {shard}");
    }
    assert_usable(&mut c).await;
    h.stop().await;
}

#[tokio::test]
async fn http_issues_ids_as_strings_and_counts_callers_without_a_region() {
    let h = Harness::start().await;
    let config = h.proxy.config.clone();
    let http = reqwest::Client::new();
    let url = format!("http://{}/v1/order-ids", h.admin);
    let reply = http
        .post(&url)
        .json(&serde_json::json!({"region": "GB", "count": 5}))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
    let body: serde_json::Value = reply.json().await.unwrap();
    assert_eq!(body["channel"], "EU_CHANNEL");
    assert_eq!(body["route_key"], 5);
    let ids: Vec<u64> = body["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().expect("ids are strings").parse().unwrap())
        .collect();
    assert_eq!(ids.len(), 5);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    assert!(
        ids.iter()
            .all(|id| decoded(&config, *id) == config.channel_by_name("EU_CHANNEL"))
    );
    // No region (an empty body, any content type): route key 0, counted by User-Agent.
    for _ in 0..3 {
        let reply = http
            .post(&url)
            .header("user-agent", "billing-batch/2.1")
            .header("content-type", "application/x-www-form-urlencoded")
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), 200);
        let body: serde_json::Value = reply.json().await.unwrap();
        assert_eq!(body["channel"], serde_json::Value::Null);
        assert_eq!(body["route_key"], 0);
    }
    let mut c = h.client().await;
    let callers: Vec<(String, u64)> = c.query("SHOW ROUTEKEY CALLERS").await.unwrap();
    assert!(
        callers.contains(&("http/billing-batch/2.1".to_owned(), 3)),
        "{callers:?}"
    );
    // Bad requests: 400 with a message, nothing issued.
    for body in [
        r#"{"region": "GB", "count": 0}"#,
        r#"{"region": "GB", "count": 10001}"#,
        r#"{"region": "GB", "count": -1}"#,
        r#"{"region": 5}"#,
        r#"{"regoin": "GB"}"#,
        "not json",
    ] {
        let reply = http.post(&url).body(body).send().await.unwrap();
        assert_eq!(reply.status(), 400, "{body}");
        let e: serde_json::Value = reply.json().await.unwrap();
        assert!(e["error"].is_string(), "{body}: {e}");
    }
    for probe in ["healthz", "readyz"] {
        let reply = http
            .get(format!("http://{}/{probe}", h.admin))
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), 200, "{probe}");
    }
    h.stop().await;
}

#[tokio::test]
async fn the_33rd_generator_is_refused_while_the_proxy_keeps_serving_queries() {
    let config = lease_config("full");
    drop_lease_table(&config).await;
    let config = Arc::new(config);
    let mut issuers = Vec::new();
    let mut workers = HashSet::new();
    for _ in 0..32 {
        let issuer = Issuer::new(config.clone(), Arc::new(SystemClock));
        issuer.issue(None, &caller(), 1).await.unwrap();
        workers.insert(issuer.worker().unwrap());
        issuers.push(issuer);
    }
    assert_eq!(workers.len(), 32);
    let h = Harness::start_with((*config).clone()).await;
    let mut c = h.client().await;
    let (code, _, message) = server_error(c.query_drop("SELECT NEXT_ORDER_ID('GB')").await);
    assert_eq!(code, 1105);
    assert!(message.contains("no free worker id"), "{message}");
    assert_eq!(h.proxy.issuer.stats().lease_full.load(Ordering::Relaxed), 1);
    let http = reqwest::Client::new();
    let reply = http
        .post(format!("http://{}/v1/order-ids", h.admin))
        .body(r#"{"region":"GB"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 503);
    // Queries are served all the same.
    assert_usable(&mut c).await;
    // One generator gives its lease back: the proxy takes that worker id (after the short
    // pause it keeps between failed attempts).
    let gone = issuers.pop().unwrap();
    let freed = gone.worker().unwrap();
    gone.release().await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let id: Option<u64> = c.query_first("SELECT NEXT_ORDER_ID('GB')").await.unwrap();
    assert!(id.is_some());
    assert_eq!(h.proxy.issuer.worker(), Some(freed));
    for issuer in issuers {
        issuer.release().await;
    }
    h.stop().await;
    drop_lease_table(&config).await;
}

#[tokio::test]
async fn an_expired_lease_is_taken_over_only_after_its_holder_stopped_issuing() {
    // One worker id (worker field of 0 bits), so the second generator needs the first's.
    let mut base = lease_config("takeover");
    base.layout = IdLayout::new(41, 0, 4, 19, base.layout.epoch_ms()).unwrap();
    base.issuance.lease_ttl = Duration::from_secs(1);
    drop_lease_table(&base).await;
    // The first generator reaches the meta datasource through a link the test cuts.
    let link = Forwarder::start(format!("127.0.0.1:{}", sandbox_port(0)).parse().unwrap()).await;
    let mut cut_off = base.clone();
    cut_off.datasources[0].address = link.addr.to_string();
    let a = Issuer::new(Arc::new(cut_off), Arc::new(SystemClock));
    let b = Issuer::new(Arc::new(base.clone()), Arc::new(SystemClock));
    let mut a_ids = a.issue(None, &caller(), 10).await.unwrap();
    assert!(matches!(
        b.issue(None, &caller(), 1).await,
        Err(IssueFailure::Lease(_))
    ));
    // A keeps renewing while the link is up: B stays refused well past one lease time.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    a_ids.extend(a.issue(None, &caller(), 10).await.unwrap());
    link.cut();
    let cut_at = Instant::now();
    // A issues until its own deadline and then stops; B tries every 50 ms.
    let a_task = tokio::spawn(async move {
        let mut last_ok = Instant::now();
        let mut ids = Vec::new();
        loop {
            match a.issue(None, &caller(), 1).await {
                Ok(mut id) => {
                    last_ok = Instant::now();
                    ids.append(&mut id);
                }
                Err(IssueFailure::LeaseLost | IssueFailure::Lease(_)) => return (last_ok, ids),
                Err(e) => panic!("{e}"),
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    let b_first = loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        match b.issue(None, &caller(), 1).await {
            Ok(ids) => break (Instant::now(), ids[0]),
            Err(IssueFailure::Lease(_)) => {
                assert!(
                    cut_at.elapsed() < Duration::from_secs(10),
                    "B never took over"
                );
            }
            Err(e) => panic!("{e}"),
        }
    };
    let (a_last_ok, more) = a_task.await.unwrap();
    a_ids.extend(more);
    assert!(
        a_last_ok < b_first.0,
        "A issued until {:?} after the cut, B took over at {:?}",
        a_last_ok - cut_at,
        b_first.0 - cut_at
    );
    assert!(
        b_first.0 - cut_at >= Duration::from_secs(1),
        "not before the lease time"
    );
    // Same worker id, and B's ids come after everything A issued.
    assert_eq!(b.worker(), Some(0));
    let a_max = *a_ids.iter().max().unwrap();
    assert!(b_first.1 > a_max, "{} after {a_max}", b_first.1);
    let more_b = b.issue(None, &caller(), 1000).await.unwrap();
    let all: HashSet<u64> = a_ids
        .iter()
        .chain(&more_b)
        .chain([&b_first.1])
        .copied()
        .collect();
    assert_eq!(all.len(), a_ids.len() + more_b.len() + 1);
    b.release().await;
    drop_lease_table(&base).await;
}

#[tokio::test]
async fn a_released_worker_id_is_reused_after_its_last_id_and_not_by_a_clock_behind_it() {
    let config = Arc::new(lease_config("release"));
    drop_lease_table(&config).await;
    let first = Issuer::new(config.clone(), Arc::new(SystemClock));
    let ids = first.issue(None, &caller(), 100).await.unwrap();
    assert_eq!(first.worker(), Some(0));
    first.release().await;
    let rows = lease_rows(&config).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].2, 1, "released: expired");
    // The release lowered the bound to the last timestamp really issued.
    let last_ms = IdLayout::default().unix_ms(*ids.iter().max().unwrap());
    assert_eq!(rows[0].3, last_ms);
    // A generator whose clock is a minute behind leaves worker 0 alone...
    let behind = Issuer::new(config.clone(), Arc::new(OffsetClock::new(-60_000)));
    behind.issue(None, &caller(), 1).await.unwrap();
    assert_eq!(behind.worker(), Some(1));
    // ... one with a good clock takes it back and starts after the last id.
    let next = Issuer::new(config.clone(), Arc::new(SystemClock));
    let id = next.issue(None, &caller(), 1).await.unwrap()[0];
    assert_eq!(next.worker(), Some(0));
    assert!(id > *ids.iter().max().unwrap());
    behind.release().await;
    next.release().await;
    // After release nothing more is issued by that service.
    assert!(matches!(
        next.issue(None, &caller(), 1).await,
        Err(IssueFailure::ShuttingDown)
    ));
    drop_lease_table(&config).await;
}

/// The system clock shifted by an adjustable offset.
struct OffsetClock(AtomicI64);

impl OffsetClock {
    fn new(offset_ms: i64) -> Self {
        Self(AtomicI64::new(offset_ms))
    }
}

impl Clock for OffsetClock {
    fn now_ms(&self) -> u64 {
        now_ms().saturating_add_signed(self.0.load(Ordering::SeqCst))
    }
}

#[tokio::test]
async fn the_clock_stepping_back_is_waited_out_within_tolerance_and_refused_beyond() {
    let config = Arc::new(lease_config("clock"));
    drop_lease_table(&config).await;
    let clock = Arc::new(OffsetClock::new(0));
    let issuer = Issuer::new(config.clone(), clock.clone());
    let eu = config.channel_by_name("EU_CHANNEL");
    let mut ids = issuer.issue(eu, &caller(), 200).await.unwrap();
    // 3 ms back (tolerance 5 ms): waited out.
    clock.0.store(-3, Ordering::SeqCst);
    let started = Instant::now();
    ids.extend(issuer.issue(eu, &caller(), 200).await.unwrap());
    assert!(started.elapsed() < Duration::from_millis(500));
    // A second back: refused, with the reason, and counted.
    clock.0.store(-1000, Ordering::SeqCst);
    let e = issuer.issue(eu, &caller(), 1).await.unwrap_err();
    assert!(matches!(e, IssueFailure::Clock(_)), "{e}");
    assert!(e.to_string().contains("clock went back"), "{e}");
    assert_eq!(issuer.stats().clock_refusals.load(Ordering::Relaxed), 1);
    // The clock catches up: ids resume, every one new and in order.
    clock.0.store(0, Ordering::SeqCst);
    ids.extend(issuer.issue(eu, &caller(), 200).await.unwrap());
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    issuer.release().await;
    drop_lease_table(&config).await;
}

/// A proxy process started from the built binary, stopped (SIGTERM) when dropped.
struct ProxyProcess {
    child: std::process::Child,
    mysql: std::net::SocketAddr,
    admin: std::net::SocketAddr,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl ProxyProcess {
    async fn start(config_path: &std::path::Path, log: &std::path::Path) -> Self {
        let (mysql, admin) = (free_port(), free_port());
        let log = std::fs::File::create(log).unwrap();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_routekey-proxy"))
            .arg("--config")
            .arg(config_path)
            .args(["--listen", &format!("127.0.0.1:{mysql}")])
            .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let p = Self {
            child,
            mysql: format!("127.0.0.1:{mysql}").parse().unwrap(),
            admin: format!("127.0.0.1:{admin}").parse().unwrap(),
        };
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(p.admin).await.is_ok()
                && tokio::net::TcpStream::connect(p.mysql).await.is_ok()
            {
                return p;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("proxy process did not start listening");
    }

    /// SIGTERM, and the exit status within 10 s.
    fn terminate(&mut self) -> Option<std::process::ExitStatus> {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        for _ in 0..200 {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for ProxyProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ids_from_four_proxy_processes_and_32_clients_are_unique_and_carry_their_channel() {
    let config = lease_config("fleet");
    drop_lease_table(&config).await;
    // The demo configuration with the sandbox's ports and this test's lease table.
    let dir = std::env::temp_dir().join(format!("rk-fleet-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config/demo.toml")).unwrap();
    for ds in 0..2 {
        text = text.replace(
            &format!("127.0.0.1:{}", 33061 + ds),
            &format!("127.0.0.1:{}", sandbox_port(ds as usize)),
        );
    }
    let lease = format!("lease_table = \"{}\"\n", config.issuance.lease_table);
    text = if text.contains("\n[issuance]\n") {
        text.replace("\n[issuance]\n", &format!("\n[issuance]\n{lease}"))
    } else {
        format!("{text}\n[issuance]\n{lease}")
    };
    let path = dir.join("proxy.toml");
    std::fs::write(&path, text).unwrap();
    let mut proxies = Vec::new();
    for i in 0..4 {
        proxies.push(ProxyProcess::start(&path, &dir.join(format!("proxy-{i}.log"))).await);
    }
    let regions: [Option<&str>; 7] = [
        Some("GB"),
        Some("US"),
        Some("CN"),
        Some("HK"),
        Some("KR"),
        Some("XX"),
        None,
    ];
    let deadline = Instant::now() + Duration::from_secs(4);
    let mut clients = tokio::task::JoinSet::new();
    for (p, proxy) in proxies.iter().enumerate() {
        for k in 0..8 {
            let (mysql, admin) = (proxy.mysql, proxy.admin);
            clients.spawn(async move {
                let mut got: Vec<(u64, Option<&'static str>)> = Vec::new();
                let mut n = p + k;
                if k % 2 == 0 {
                    // SQL clients: text and prepared.
                    let opts = mysql_async::OptsBuilder::default()
                        .ip_or_hostname(mysql.ip().to_string())
                        .tcp_port(mysql.port())
                        .user(Some("app"))
                        .pass(Some("app"))
                        .db_name(Some("orders"))
                        .prefer_socket(false);
                    let mut c = mysql_async::Conn::new(opts).await.unwrap();
                    while Instant::now() < deadline {
                        let region = regions[n % regions.len()];
                        n += 1;
                        let id: Option<u64> = match (region, n % 2) {
                            (Some(r), 0) => c.exec_first("SELECT NEXT_ORDER_ID(?)", (r,)).await,
                            (Some(r), _) => {
                                c.query_first(format!("SELECT NEXT_ORDER_ID('{r}')")).await
                            }
                            (None, _) => c.query_first("SELECT NEXT_ORDER_ID()").await,
                        }
                        .unwrap();
                        got.push((id.unwrap(), region));
                    }
                } else {
                    // HTTP clients, 20 ids a request.
                    let http = reqwest::Client::new();
                    let url = format!("http://{admin}/v1/order-ids");
                    while Instant::now() < deadline {
                        let region = regions[n % regions.len()];
                        n += 1;
                        let body = match region {
                            Some(r) => serde_json::json!({"region": r, "count": 20}),
                            None => serde_json::json!({"count": 20}),
                        };
                        let reply: serde_json::Value = http
                            .post(&url)
                            .json(&body)
                            .send()
                            .await
                            .unwrap()
                            .json()
                            .await
                            .unwrap();
                        for id in reply["ids"].as_array().expect("ids") {
                            got.push((id.as_str().unwrap().parse().unwrap(), region));
                        }
                    }
                }
                got
            });
        }
    }
    let mut all = Vec::new();
    while let Some(r) = clients.join_next().await {
        all.extend(r.unwrap());
    }
    let layout = config.layout;
    let unique: HashSet<u64> = all.iter().map(|(id, _)| *id).collect();
    assert_eq!(unique.len(), all.len(), "duplicate ids among {}", all.len());
    let mut workers = HashSet::new();
    for (id, region) in &all {
        workers.insert(layout.fields(*id).worker);
        let want = region.and_then(|r| config.channel_by_region(r));
        match want {
            Some(ch) => assert_eq!(decoded(&config, *id), Some(ch), "{id} for {region:?}"),
            None => assert_eq!(layout.route_key(*id), 0, "{id} for {region:?}"),
        }
    }
    assert_eq!(
        workers.len(),
        4,
        "four processes, four worker ids: {workers:?}"
    );
    println!(
        "{} ids from 4 processes and 32 clients in 4 s, no duplicates",
        all.len()
    );
    // SIGTERM: each process gives its lease back.
    for p in &mut proxies {
        let status = p.terminate().expect("the proxy exits on SIGTERM");
        assert!(status.success(), "{status}");
    }
    let rows = lease_rows(&config).await;
    assert_eq!(rows.len(), 4);
    assert!(rows.iter().all(|r| r.2 == 1), "released: {rows:?}");
    drop_lease_table(&config).await;
    let _ = std::fs::remove_dir_all(&dir);
}
