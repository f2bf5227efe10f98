//! The admin port's bearer token (issue 11): on a loopback listener `POST /v1/order-ids`
//! is open; on any other address it asks every caller for the token of
//! `admin.token_file` (401 without, 403 wrong), re-read at a reload; the probes and
//! `/metrics` stay open, `/quitquitquit` stays loopback-only; a listener off loopback
//! without a readable, non-empty token file refuses to start.

mod common;

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::*;
use routekey_proxy::config::Config;
use routekey_proxy::process::{Flags, reload};

/// The demo configuration's text for the sandbox, with `admin` as its `[admin]` table.
fn demo_text(admin: &str) -> String {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config/demo.toml"))
        .unwrap()
        .replace("127.0.0.1:33061", &format!("127.0.0.1:{}", sandbox_port(0)))
        .replace("127.0.0.1:33062", &format!("127.0.0.1:{}", sandbox_port(1)));
    assert!(
        !text.contains("[admin]"),
        "demo.toml has no [admin] table yet"
    );
    format!("{text}\n[admin]\n{admin}\n")
}

/// A fresh folder for one test's files.
fn folder(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("routekey-admin-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes the configuration (with the token file `token`) into `dir`; returns its path.
fn write_config(dir: &Path, listen: &str, token: Option<&str>) -> PathBuf {
    let token_file = dir.join("admin-token");
    if let Some(token) = token {
        std::fs::write(&token_file, format!("{token}\n")).unwrap();
    }
    let admin = format!(
        "listen = \"{listen}\"\ntoken_file = \"{}\"",
        token_file.display()
    );
    let path = dir.join("routekey.toml");
    std::fs::write(&path, demo_text(&admin)).unwrap();
    path
}

/// This machine's address on its default route (not loopback): what another pod would
/// call. Sends nothing (a UDP socket only picks its route at `connect`).
fn machine_ip() -> IpAddr {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    socket
        .connect("192.0.2.255:9")
        .or_else(|_| socket.connect("8.8.8.8:53"))
        .expect("a route to a non-loopback address (the test needs a network interface)");
    let ip = socket.local_addr().unwrap().ip();
    assert!(!ip.is_loopback() && !ip.is_unspecified(), "{ip}");
    ip
}

/// `POST /v1/order-ids` at `admin` (port of the listener, called on `host`) with the
/// `Authorization` header `auth`: the status and the `WWW-Authenticate` header.
async fn order_ids(host: IpAddr, admin: SocketAddr, auth: Option<&str>) -> (u16, Option<String>) {
    let mut request = reqwest::Client::new()
        .post(format!(
            "http://{}/v1/order-ids",
            SocketAddr::new(host, admin.port())
        ))
        .json(&serde_json::json!({"region": "GB", "count": 2}));
    if let Some(auth) = auth {
        request = request.header("authorization", auth);
    }
    let reply = request.send().await.unwrap();
    let challenge = reply
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned());
    let status = reply.status().as_u16();
    if status == 200 {
        let body: serde_json::Value = reply.json().await.unwrap();
        assert_eq!(body["ids"].as_array().map(Vec::len), Some(2), "{body}");
    }
    (status, challenge)
}

const LOCAL: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

#[tokio::test]
async fn a_loopback_listener_issues_ids_without_a_token() {
    let h = Harness::start().await;
    assert_eq!(order_ids(LOCAL, h.admin, None).await, (200, None));
    // A token nobody configured is not checked either.
    assert_eq!(order_ids(LOCAL, h.admin, Some("Bearer x")).await.0, 200);
    h.stop().await;
}

#[tokio::test]
async fn a_listener_off_loopback_asks_every_caller_for_the_token() {
    let dir = folder("open");
    let path = write_config(&dir, "0.0.0.0:9307", Some("s3cret-token"));
    let config = Config::load(&path).unwrap();
    let h = Harness::start_with_admin(config, "0.0.0.0:0").await;
    for host in [machine_ip(), LOCAL] {
        let (status, challenge) = order_ids(host, h.admin, None).await;
        assert_eq!(status, 401, "no token, from {host}");
        assert!(
            challenge
                .as_deref()
                .is_some_and(|c| c.starts_with("Bearer")),
            "{challenge:?}"
        );
        assert_eq!(
            order_ids(host, h.admin, Some("Basic czNjcmV0")).await.0,
            401
        );
        assert_eq!(order_ids(host, h.admin, Some("Bearer wrong")).await.0, 403);
        assert_eq!(
            order_ids(host, h.admin, Some("Bearer s3cret-tok")).await.0,
            403
        );
        assert_eq!(
            order_ids(host, h.admin, Some("Bearer s3cret-token")).await,
            (200, None),
            "from {host}"
        );
        assert_eq!(
            order_ids(host, h.admin, Some("bearer s3cret-token"))
                .await
                .0,
            200
        );
    }
    // Probes and metrics stay open; /quitquitquit stays for loopback callers.
    let other = SocketAddr::new(machine_ip(), h.admin.port());
    for probe in ["healthz", "readyz", "metrics"] {
        let reply = reqwest::get(format!("http://{other}/{probe}"))
            .await
            .unwrap();
        assert_eq!(reply.status(), 200, "/{probe}");
    }
    let quit = reqwest::Client::new()
        .post(format!("http://{other}/quitquitquit"))
        .header("authorization", "Bearer s3cret-token")
        .send()
        .await
        .unwrap();
    assert_eq!(quit.status(), 403);
    assert!(!h.proxy.metrics.draining());
    h.stop().await;
}

#[tokio::test]
async fn the_token_is_read_again_at_a_reload() {
    let dir = folder("reload");
    let path = write_config(&dir, "0.0.0.0:9307", Some("first"));
    let config = Config::load(&path).unwrap();
    let h = Harness::start_with_admin(config, "0.0.0.0:0").await;
    assert_eq!(order_ids(LOCAL, h.admin, Some("Bearer first")).await.0, 200);
    std::fs::write(dir.join("admin-token"), "second\n").unwrap();
    let flags: Flags = std::sync::Arc::new(|_: &mut Config| Ok(()));
    let generation = h.proxy.generation();
    reload(&h.proxy, &path, &flags, "test");
    assert!(h.proxy.generation() > generation, "reloaded");
    assert_eq!(order_ids(LOCAL, h.admin, Some("Bearer first")).await.0, 403);
    assert_eq!(
        order_ids(LOCAL, h.admin, Some("Bearer second")).await.0,
        200
    );
    // An emptied token file does not validate: the running token stays in force.
    std::fs::write(dir.join("admin-token"), "\n").unwrap();
    reload(&h.proxy, &path, &flags, "test");
    assert_eq!(
        order_ids(LOCAL, h.admin, Some("Bearer second")).await.0,
        200
    );
    h.stop().await;
}

#[test]
fn a_listener_off_loopback_needs_a_readable_non_empty_token_file() {
    let dir = folder("config");
    let load = |admin: &str| Config::from_toml(&demo_text(admin), "t.toml").map(|_| ());
    let missing = dir.join("no-such-token");
    let e = load(&format!(
        "listen = \"0.0.0.0:9307\"\ntoken_file = \"{}\"",
        missing.display()
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("admin.token_file: cannot read"), "{e}");
    let e = load("listen = \"10.1.2.3:9307\"").unwrap_err().to_string();
    assert!(
        e.contains("not a loopback address: admin.token_file is required"),
        "{e}"
    );
    let empty = dir.join("empty-token");
    std::fs::write(&empty, " \n").unwrap();
    let e = load(&format!(
        "listen = \"[::]:9307\"\ntoken_file = \"{}\"",
        empty.display()
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("is empty"), "{e}");
    // Loopback needs no token file; IPv4-mapped loopback is loopback.
    load("listen = \"127.0.0.1:9307\"").unwrap();
    load("listen = \"[::1]:9307\"").unwrap();
    load("listen = \"[::ffff:127.0.0.1]:9307\"").unwrap();
}

/// The binary's exit status and standard error for `args`, with `config`; a binary still
/// running after 20 s (it started serving) is killed and counts as a success.
fn run(args: &[&str], config: &Path) -> (bool, String) {
    let dir = config.parent().unwrap();
    let log = dir.join(format!(
        "stderr-{}.log",
        args.join("-").replace(['/', ':'], "_")
    ));
    let mut child = Command::new(env!("CARGO_BIN_EXE_routekey-proxy"))
        .args(args)
        .arg("--config")
        .arg(config)
        .args(["--listen", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let success = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.success();
        }
        if started.elapsed() > std::time::Duration::from_secs(20) {
            child.kill().unwrap();
            child.wait().unwrap();
            break true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    (success, std::fs::read_to_string(&log).unwrap())
}

#[test]
fn a_missing_token_file_refuses_startup_and_check_config() {
    let dir = folder("startup");
    // The file names a token file that is not there.
    let path = write_config(&dir, "0.0.0.0:0", None);
    for args in [&["serve"][..], &["check-config"][..]] {
        let (ok, stderr) = run(args, &path);
        assert!(!ok, "{args:?} must fail: {stderr}");
        assert!(stderr.contains("admin.token_file: cannot read"), "{stderr}");
    }
    // A loopback file moved off loopback by the command line needs the token file too.
    let loopback = dir.join("loopback.toml");
    std::fs::write(&loopback, demo_text("listen = \"127.0.0.1:0\"")).unwrap();
    let (ok, stderr) = run(&["serve", "--admin-listen", "0.0.0.0:0"], &loopback);
    assert!(!ok, "{stderr}");
    assert!(stderr.contains("admin.token_file is required"), "{stderr}");
}
