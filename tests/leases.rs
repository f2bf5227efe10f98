//! Worker id leases and the generator's clock (SPEC §6, §9.5), against the lease table on
//! the sandbox's meta datasource: the 33rd generator refused, a takeover only after the
//! holder stopped, release and restart, a clock stepping back, and uniqueness across four
//! proxy processes with 32 SQL and HTTP clients.

mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use common::*;
use mysql_async::prelude::*;
use routekey_proxy::id::IdLayout;
use routekey_proxy::issuance::{Clock, IssueFailure, Issuer, SystemClock};

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
    // The one worker id row, created and settled before the test starts.
    Issuer::new(Arc::new(base.clone()), Arc::new(SystemClock))
        .prepare()
        .await;
    tokio::time::sleep(Duration::from_millis(1300)).await;
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
    // The last renewal came at most a third of the lease time before the cut; the takeover
    // waits for the expiry plus a fifth of it.
    assert!(
        b_first.0 - cut_at >= Duration::from_millis(1000 - 334 + 200),
        "not before the lease ran out: {:?}",
        b_first.0 - cut_at
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

/// A clock whose next `stale` readings are 50 ms old: what a task sees when it was
/// descheduled between reading the clock and asking the generator, while others went on.
struct StaleOnceClock(std::sync::atomic::AtomicU32);

impl Clock for StaleOnceClock {
    fn now_ms(&self) -> u64 {
        let stale = self
            .0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if stale { now_ms() - 50 } else { now_ms() }
    }
}

#[tokio::test]
async fn a_stale_clock_reading_is_read_again_not_refused() {
    let config = Arc::new(lease_config("stale"));
    drop_lease_table(&config).await;
    let clock = Arc::new(StaleOnceClock(Default::default()));
    let issuer = Issuer::new(config.clone(), clock.clone());
    let eu = config.channel_by_name("EU_CHANNEL");
    let mut ids = issuer.issue(eu, &caller(), 10).await.unwrap();
    // The issue loop's first reading 50 ms behind the last id (tolerance 5 ms; the first
    // stale reading goes to the lease check), then fresh ones.
    clock.0.store(2, Ordering::SeqCst);
    ids.extend(issuer.issue(eu, &caller(), 10).await.unwrap());
    assert_eq!(issuer.stats().clock_refusals.load(Ordering::Relaxed), 0);
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    // Readings that stay behind are refused.
    clock.0.store(100, Ordering::SeqCst);
    let e = issuer.issue(eu, &caller(), 1).await.unwrap_err();
    assert!(e.to_string().contains("clock went back"), "{e}");
    issuer.release().await;
    drop_lease_table(&config).await;
}

/// A proxy process started from the built binary, stopped (SIGTERM) when dropped.
struct ProxyProcess {
    child: std::process::Child,
    mysql: std::net::SocketAddr,
    admin: std::net::SocketAddr,
}

impl ProxyProcess {
    async fn start(config_path: &std::path::Path, log: &std::path::Path) -> Self {
        // Two different ports: two pickings in a row may get the same one back.
        let mysql = free_port();
        let admin = std::iter::repeat_with(free_port)
            .find(|p| *p != mysql)
            .unwrap();
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
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config/demo.toml"))
            .unwrap()
            .replace("\".sandbox/tls/", &format!("\"{}/tls/", sandbox_dir()));
    for ds in 0..2 {
        text = text.replace(
            &format!("127.0.0.1:{}", 33061 + ds),
            &format!("127.0.0.1:{}", sandbox_port(ds as usize)),
        );
    }
    let lease = format!(
        "lease_table = \"{}\"\nlease_ttl = \"2s\"\n",
        config.issuance.lease_table
    );
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
                        for id in reply["ids"]
                            .as_array()
                            .unwrap_or_else(|| panic!("no ids: {reply}"))
                        {
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

#[tokio::test]
async fn a_lost_lease_table_stops_its_holders_before_anyone_reuses_their_worker_ids() {
    let config = Arc::new(lease_config("lost"));
    drop_lease_table(&config).await;
    let a = Issuer::new(config.clone(), Arc::new(SystemClock));
    let mut a_ids = a.issue(None, &caller(), 10).await.unwrap();
    assert_eq!(a.worker(), Some(0));
    // The table is lost (dropped, a restore from before it existed) while A issues.
    drop_lease_table(&config).await;
    let lost_at = Instant::now();
    let a_task = tokio::spawn(async move {
        let mut last_ok = Instant::now();
        loop {
            let called = Instant::now();
            match a.issue(None, &caller(), 50).await {
                // A call that waited for rows to settle took a new lease: the old one ended
                // with the previous call.
                Ok(mut ids) if called.elapsed() > Duration::from_millis(1000) => {
                    a_ids.append(&mut ids);
                    return (last_ok, a_ids);
                }
                Ok(mut ids) => {
                    last_ok = Instant::now();
                    a_ids.append(&mut ids);
                }
                Err(IssueFailure::LeaseLost) => return (last_ok, a_ids),
                Err(e) => panic!("{e}"),
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    });
    // B creates the table again: the new rows are not leased before a lease time passed.
    let b = Issuer::new(config.clone(), Arc::new(SystemClock));
    let b_ids = b.issue(None, &caller(), 1000).await.unwrap();
    let b_at = Instant::now();
    let (a_last_ok, a_ids) = a_task.await.unwrap();
    assert!(
        a_last_ok < b_at,
        "A issued until {:?}, B from {:?}",
        a_last_ok - lost_at,
        b_at - lost_at
    );
    assert!(
        a_last_ok - lost_at < Duration::from_millis(2000 / 3 + 500),
        "A stopped at its next renewal"
    );
    let all: HashSet<u64> = a_ids.iter().chain(&b_ids).copied().collect();
    assert_eq!(all.len(), a_ids.len() + b_ids.len(), "duplicate ids");
    b.release().await;
    drop_lease_table(&config).await;
}

#[tokio::test]
async fn an_acquirer_stalled_with_a_row_locked_blocks_neither_holders_nor_other_acquirers() {
    let config = Arc::new(lease_config("stall"));
    drop_lease_table(&config).await;
    let a = Issuer::new(config.clone(), Arc::new(SystemClock));
    a.issue(None, &caller(), 1).await.unwrap();
    assert_eq!(a.worker(), Some(0));
    // A stalled acquirer: it locked worker id 1's row and went quiet.
    let mut stalled = backend(0).await;
    exec(&mut stalled, "BEGIN").await;
    exec(
        &mut stalled,
        &format!(
            "SELECT * FROM {}.{} WHERE worker_id = 1 FOR UPDATE",
            config.index.database, config.issuance.lease_table
        ),
    )
    .await;
    // Another proxy takes the next worker id at once.
    let started = Instant::now();
    let b = Issuer::new(config.clone(), Arc::new(SystemClock));
    b.issue(None, &caller(), 1).await.unwrap();
    assert_eq!(b.worker(), Some(2));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // A keeps renewing and issuing well past its lease time.
    tokio::time::sleep(Duration::from_millis(5000)).await;
    a.issue(None, &caller(), 1).await.unwrap();
    assert_eq!(a.worker(), Some(0));
    exec(&mut stalled, "ROLLBACK").await;
    a.release().await;
    b.release().await;
    drop_lease_table(&config).await;
}
