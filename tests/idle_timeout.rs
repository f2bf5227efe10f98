//! The idle timeout of a client session (issue 23): a client silent between commands for
//! longer than its session's `wait_timeout` (`interactive_timeout` at the start of an
//! interactive client's session; `idle_transaction_timeout` and its read-only and write
//! variants inside a transaction) is disconnected as MariaDB disconnects it, and what the
//! session held is released: its transaction rolled back, its row locks gone. Each case
//! runs against MariaDB directly too, and both must behave alike.

mod common;

use common::wire::{Closed, WireClient, WireOptions};
use common::*;
use mysql_async::prelude::*;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The tests change the servers' global variables: one at a time.
static SERVERS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn direct_addr() -> SocketAddr {
    format!("127.0.0.1:{}", sandbox_port(0)).parse().unwrap()
}

async fn direct(options: WireOptions) -> WireClient {
    WireClient::connect(direct_addr(), "root", "", Some("orders_ref"), options)
        .await
        .unwrap()
}

async fn through(h: &Harness, options: WireOptions) -> WireClient {
    WireClient::connect(h.addr, "app", "app", Some("orders"), options)
        .await
        .unwrap()
}

/// A session through the proxy, or straight to MariaDB.
async fn session(h: &Harness, proxied: bool, options: WireOptions) -> WireClient {
    if proxied {
        through(h, options).await
    } else {
        direct(options).await
    }
}

/// How a connection left silent ends: after how long, and how (MariaDB sends no error
/// packet and resets the connection, so drivers report the server gone at their next
/// command). Panics when it is still open after `within`.
async fn silent_end(c: &mut WireClient, within: Duration) -> (Duration, Closed) {
    let started = Instant::now();
    let end = c
        .closed_within(within)
        .await
        .unwrap_or_else(|| panic!("still open after {within:?} of silence"));
    (started.elapsed(), end)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_client_is_disconnected_after_its_wait_timeout() {
    let _servers = SERVERS.lock().await;
    let h = Harness::start().await;
    let mut ends = Vec::new();
    for mut c in [
        direct(WireOptions::default()).await,
        through(&h, WireOptions::default()).await,
    ] {
        c.query("SET wait_timeout = 2").await;
        assert_eq!(c.value("SELECT @@wait_timeout").await.as_deref(), Some("2"));
        ends.push(silent_end(&mut c, Duration::from_secs(10)).await);
    }
    let (direct_end, proxy_end) = (ends[0], ends[1]);
    assert_eq!(
        proxy_end.1, direct_end.1,
        "what the client reads before the close"
    );
    assert!(
        proxy_end.0 >= Duration::from_millis(1900) && proxy_end.0 < Duration::from_secs(4),
        "closed after {:?} (MariaDB: {:?})",
        proxy_end.0,
        direct_end.0
    );
    let metrics = h.metrics_text().await;
    assert!(
        metrics.contains("routekey_client_idle_timeouts_total 1"),
        "{metrics}"
    );
    // A client that speaks in time is not cut: each command starts the wait again.
    let mut c = through(&h, WireOptions::default()).await;
    c.query("SET wait_timeout = 2").await;
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(900)).await;
        assert_eq!(c.value("SELECT 1").await.as_deref(), Some("1"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_cut_for_idling_in_a_transaction_rolls_it_back() {
    let _servers = SERVERS.lock().await;
    let h = Harness::start().await;
    let a = fresh_new_id_on(5, 0);
    let _cleanup = Cleanup::new(&[a]);
    let mut app = h.client().await;
    app.query_drop(insert_order_sql(a, "EU_CHANNEL", "before"))
        .await
        .unwrap();
    let mut c = through(&h, WireOptions::default()).await;
    c.query("SET wait_timeout = 2").await;
    c.query("BEGIN").await;
    let updated = c
        .query(&format!(
            "UPDATE t_order SET note = 'uncommitted' WHERE order_id = {a}"
        ))
        .await;
    assert!(updated[0].starts_with("OK affected=1"), "{updated:?}");
    silent_end(&mut c, Duration::from_secs(10)).await;
    // Rolled back, and its row lock is gone: another session updates the row at once.
    app.query_drop("SET innodb_lock_wait_timeout = 1")
        .await
        .unwrap();
    let started = Instant::now();
    app.query_drop(format!(
        "UPDATE t_order SET note = 'after' WHERE order_id = {a}"
    ))
    .await
    .unwrap();
    assert!(started.elapsed() < Duration::from_millis(900));
    let shard = shards_holding(a).await[0];
    let row = physical_row(shard, a).await.unwrap();
    assert_eq!(show(&row[6]), "after");
}

/// The servers' global variable `name` set to `value` for the life of a test.
struct Global {
    name: &'static str,
    before: Vec<String>,
}

impl Global {
    async fn set(name: &'static str, value: u64) -> Self {
        let mut before = Vec::new();
        for ds in 0..2 {
            let mut c = backend(ds).await;
            let old: String = c
                .query_first(format!("SELECT CAST(@@global.{name} AS CHAR)"))
                .await
                .unwrap()
                .unwrap();
            c.query_drop(format!("SET GLOBAL {name} = {value}"))
                .await
                .unwrap();
            before.push(old);
        }
        Self { name, before }
    }
}

impl Drop for Global {
    fn drop(&mut self) {
        let before = std::mem::take(&mut self.before);
        let name = self.name;
        std::thread::spawn(move || {
            tokio::runtime::Runtime::new().unwrap().block_on(async {
                for (ds, value) in before.iter().enumerate() {
                    let mut c = backend(ds).await;
                    c.query_drop(format!("SET GLOBAL {name} = {value}"))
                        .await
                        .unwrap();
                }
            })
        })
        .join()
        .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interactive_client_starts_with_interactive_timeout() {
    let _servers = SERVERS.lock().await;
    let _global = Global::set("interactive_timeout", 2).await;
    let h = Harness::start().await;
    let interactive = WireOptions {
        interactive: true,
        ..Default::default()
    };
    for proxied in [false, true] {
        let mut c = session(&h, proxied, interactive).await;
        assert_eq!(c.value("SELECT @@wait_timeout").await.as_deref(), Some("2"));
        let (after, _) = silent_end(&mut c, Duration::from_secs(10)).await;
        assert!(after < Duration::from_secs(4), "closed after {after:?}");
    }
    // A client that is not interactive keeps wait_timeout.
    for proxied in [false, true] {
        let mut c = session(&h, proxied, WireOptions::default()).await;
        assert_eq!(
            c.value("SELECT @@wait_timeout").await.as_deref(),
            Some("28800")
        );
        assert_eq!(c.closed_within(Duration::from_secs(3)).await, None);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_transaction_timeouts_apply_inside_a_transaction_only() {
    let _servers = SERVERS.lock().await;
    let h = Harness::start().await;
    let a = common::seed().channels["EU_CHANNEL"].new_format_ids[0];
    let reads = format!("SELECT note FROM t_order WHERE order_id = {a}");
    for proxied in [false, true] {
        let mut c = session(&h, proxied, WireOptions::default()).await;
        c.query("SET idle_transaction_timeout = 2").await;
        // Outside a transaction: wait_timeout (8 hours) applies.
        assert_eq!(c.closed_within(Duration::from_secs(3)).await, None);
        c.query("BEGIN").await;
        c.query(&reads).await;
        let (after, _) = silent_end(&mut c, Duration::from_secs(10)).await;
        assert!(after < Duration::from_secs(4), "closed after {after:?}");
    }
    // idle_write_transaction_timeout applies once the transaction changed a row; one that
    // only read, or wrote what was there, keeps idle_transaction_timeout (off here). The
    // change is rolled back with the session.
    for proxied in [false, true] {
        let mut c = session(&h, proxied, WireOptions::default()).await;
        c.query("SET idle_write_transaction_timeout = 2").await;
        c.query("BEGIN").await;
        c.query(&reads).await;
        c.query(&format!(
            "UPDATE t_order SET note = note WHERE order_id = {a}"
        ))
        .await;
        assert_eq!(c.closed_within(Duration::from_secs(3)).await, None);
        c.query(&format!(
            "UPDATE t_order SET note = CONCAT(note, '!') WHERE order_id = {a}"
        ))
        .await;
        let (after, _) = silent_end(&mut c, Duration::from_secs(10)).await;
        assert!(after < Duration::from_secs(4), "closed after {after:?}");
    }
    let mut app = h.client().await;
    let note: Option<String> = app
        .query_first(format!("SELECT note FROM t_order WHERE order_id = {a}"))
        .await
        .unwrap();
    assert!(!note.unwrap_or_default().ends_with('!'), "rolled back");
}
