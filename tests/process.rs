//! The `routekey-proxy` binary as an orchestrator runs it: listen addresses from
//! `ROUTEKEY_..__..` environment overrides, SIGHUP and file changes reload the configuration,
//! SIGTERM drains and exits 0, a second signal exits at once.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use mysql_async::prelude::*;
use mysql_async::{Conn, OptsBuilder};

struct Proc {
    child: Child,
    port: u16,
    admin: u16,
    dir: PathBuf,
    config: PathBuf,
}

fn demo_text() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config/demo.toml"))
        .unwrap()
        .replace("127.0.0.1:33061", &format!("127.0.0.1:{}", sandbox_port(0)))
        .replace("127.0.0.1:33062", &format!("127.0.0.1:{}", sandbox_port(1)))
        .replace("\".sandbox/tls/", &format!("\"{}/tls/", sandbox_dir()))
}

impl Proc {
    async fn start(tag: &str) -> Self {
        Self::start_logging(tag, "routekey_proxy=info").await
    }

    /// Starts the binary with `RUST_LOG=filter`.
    async fn start_logging(tag: &str, filter: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("routekey-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("routekey.toml");
        std::fs::write(&config, demo_text()).unwrap();
        // Two different ports: two pickings in a row may get the same one back.
        let port = free_port();
        let admin = std::iter::repeat_with(free_port)
            .find(|p| *p != port)
            .unwrap();
        let log = std::fs::File::create(dir.join("proxy.log")).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_routekey-proxy"))
            .args(["serve", "--config"])
            .arg(&config)
            .env("ROUTEKEY_SERVER__LISTEN", format!("127.0.0.1:{port}"))
            .env("ROUTEKEY_ADMIN__LISTEN", format!("127.0.0.1:{admin}"))
            .env("RUST_LOG", filter)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let p = Self {
            child,
            port,
            admin,
            dir,
            config,
        };
        let started = Instant::now();
        while !p.ready().await {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "not ready: {}",
                p.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        p
    }

    async fn ready(&self) -> bool {
        match reqwest::get(format!("http://127.0.0.1:{}/readyz", self.admin)).await {
            Ok(r) => r.status().is_success(),
            Err(_) => false,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("proxy.log")).unwrap_or_default()
    }

    async fn client(&self) -> Conn {
        let opts = OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(self.port)
            .user(Some("app"))
            .pass(Some("app"))
            .db_name(Some("orders"))
            .prefer_socket(false);
        Conn::new(opts).await.unwrap()
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([format!("-{name}"), self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// The exit status, waiting up to `limit`.
    async fn exit_code(&mut self, limit: Duration) -> Option<i32> {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            if started.elapsed() > limit {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn route_key_of_next_id(c: &mut Conn, region: &str) -> u8 {
    let id: Option<u64> = c
        .query_first(format!("SELECT NEXT_ORDER_ID('{region}')"))
        .await
        .unwrap();
    routekey_proxy::id::IdLayout::default().route_key(id.unwrap())
}

#[tokio::test]
async fn sighup_and_file_changes_reload_and_sigterm_drains_and_exits_0() {
    check_sandbox().await;
    let mut p = Proc::start("reload").await;
    let mut c = p.client().await;
    assert_eq!(route_key_of_next_id(&mut c, "IE").await, 0);
    // SIGHUP: the file is read again.
    std::fs::write(
        &p.config,
        demo_text().replace("[regions]", "[regions]\nIE = \"EU_CHANNEL\""),
    )
    .unwrap();
    p.signal("HUP");
    let started = Instant::now();
    while route_key_of_next_id(&mut c, "IE").await != 5 {
        assert!(started.elapsed() < Duration::from_secs(5), "{}", p.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A file that does not validate changes nothing.
    std::fs::write(&p.config, "[server]\nlisten = 'nowhere'\n").unwrap();
    p.signal("HUP");
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(route_key_of_next_id(&mut c, "IE").await, 5);
    // The directory is watched: replacing the file (as a ConfigMap update does) reloads it.
    let next = p.dir.join("routekey.toml.new");
    std::fs::write(&next, demo_text()).unwrap();
    std::fs::rename(&next, &p.config).unwrap();
    let started = Instant::now();
    while route_key_of_next_id(&mut c, "IE").await != 0 {
        assert!(started.elapsed() < Duration::from_secs(5), "{}", p.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let metrics = reqwest::get(format!("http://127.0.0.1:{}/metrics", p.admin))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // The invalid file was refused (by SIGHUP, and by the watch that saw it too).
    let failures = metrics
        .lines()
        .find_map(|l| l.strip_prefix("routekey_config_reloads_total{result=\"failure\"} "))
        .and_then(|v| v.parse::<u64>().ok());
    assert!(failures.is_some_and(|n| n >= 1), "{metrics}");
    drop(c);
    // SIGTERM: drains (nothing open) and exits 0.
    p.signal("TERM");
    assert_eq!(
        p.exit_code(Duration::from_secs(10)).await,
        Some(0),
        "{}",
        p.log()
    );
    assert!(p.log().contains("drained"), "{}", p.log());
}

#[tokio::test]
async fn a_second_signal_exits_without_waiting_for_the_drain() {
    check_sandbox().await;
    let mut p = Proc::start("twice").await;
    let mut c = p.client().await;
    // An open transaction would hold the drain for its 30 s deadline.
    c.query_drop("BEGIN").await.unwrap();
    c.query_drop("SELECT * FROM t_merchant LIMIT 1")
        .await
        .unwrap();
    p.signal("TERM");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(p.exit_code(Duration::ZERO).await, None, "still draining");
    let started = Instant::now();
    p.signal("TERM");
    assert_eq!(p.exit_code(Duration::from_secs(5)).await, Some(143));
    assert!(started.elapsed() < Duration::from_secs(3));
}

/// A refused login is logged with its user, address and reason, never with the password:
/// `app_sha2`'s full authentication over clear text hands the proxy the password itself
/// (RSA-encrypted), so a careless log line could carry it.
#[tokio::test]
async fn a_refused_login_is_logged_without_the_password() {
    let p = Proc::start_logging("login-log", "routekey_proxy=trace").await;
    let secret = "not-the-password-5f3a9c";
    let opts = OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(p.port)
        .user(Some("app_sha2"))
        .pass(Some(secret))
        .db_name(Some("orders"))
        .prefer_socket(false);
    match Conn::new(opts).await {
        Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1045, "{e}"),
        other => panic!("expected 1045, got {other:?}"),
    }
    let started = Instant::now();
    while !p.log().contains("login refused") {
        assert!(started.elapsed() < Duration::from_secs(10), "{}", p.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let log = p.log();
    let line = log.lines().find(|l| l.contains("login refused")).unwrap();
    assert!(line.contains("app_sha2"), "{line}");
    assert!(!log.contains(secret), "the password is in the log:\n{log}");
}
