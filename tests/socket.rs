//! The Unix socket listener (`server.socket`): clients of the same pod connect over it, with
//! or without the TCP listener beside it; the file gets its mode, a stale file is replaced,
//! a live one or another file is refused, and the file goes when the listener closes (drain)
//! and when the process exits.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use mysql_async::prelude::*;
use mysql_async::{Conn, OptsBuilder};
use routekey_proxy::config::UnixSocket;
use routekey_proxy::proxy::Proxy;
use routekey_proxy::server::{Listeners, SocketListener, serve};

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rk-sock-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn socket_at(path: &Path, mode: u32) -> UnixSocket {
    UnixSocket {
        path: path.to_owned(),
        mode,
    }
}

async fn socket_client(path: &Path, user: &str) -> Result<Conn, mysql_async::Error> {
    let opts = OptsBuilder::default()
        .socket(Some(path.to_str().unwrap()))
        .user(Some(user))
        .pass(Some("app"))
        .db_name(Some("orders"))
        .prefer_socket(true);
    Conn::new(opts).await
}

#[tokio::test]
async fn clients_connect_over_the_socket_alone_and_the_file_goes_with_the_drain() {
    check_sandbox().await;
    let dir = temp_dir("drain");
    let path = dir.join("mysql.sock");
    let listener = SocketListener::bind(&socket_at(&path, 0o600))
        .await
        .unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the configured mode");
    let proxy = Proxy::new(config());
    let listeners = Listeners {
        tcp: None,
        socket: Some(listener),
    };
    let p = proxy.clone();
    let task = tokio::spawn(async move { serve(listeners, p, std::future::pending()).await });

    // A routed point select, as over TCP.
    let id = fresh_new_id_on(5, 0);
    let cleanup = Cleanup::new(&[id]);
    let mut c = socket_client(&path, "app").await.unwrap();
    c.query_drop(insert_order_sql(id, "EU_CHANNEL", "over the socket"))
        .await
        .unwrap();
    let note: Option<String> = c
        .query_first(format!("SELECT note FROM t_order WHERE order_id = {id}"))
        .await
        .unwrap();
    assert_eq!(note.as_deref(), Some("over the socket"));
    assert_eq!(placement(id).await.0.len(), 1, "one shard holds it");
    // MySQL names a socket client's host `localhost`, and counts the socket as secure.
    // (This proxy's only session so far.)
    let hosts: Vec<String> = c
        .query("SELECT host FROM information_schema.PROCESSLIST")
        .await
        .unwrap();
    assert_eq!(hosts, ["localhost"]);
    let tls_user = socket_client(&path, "app_tls").await;
    assert!(
        tls_user.is_ok(),
        "a require_tls user over the socket: {tls_user:?}"
    );
    drop(c);
    drop(tls_user);

    proxy.request_drain();
    tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("drained in time")
        .unwrap()
        .unwrap();
    assert!(
        !path.exists(),
        "the socket file is removed with the listener"
    );
    drop(cleanup);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_stale_file_is_replaced_and_a_live_socket_or_another_file_refused() {
    let dir = temp_dir("stale");
    let path = dir.join("mysql.sock");
    // A socket file left by a process that died: nobody answers on it.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    let first = SocketListener::bind(&socket_at(&path, 0o660))
        .await
        .unwrap();
    // A second proxy on the same path would steal the first one's clients: refused.
    let e = SocketListener::bind(&socket_at(&path, 0o660))
        .await
        .err()
        .expect("refused while in use");
    assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse, "{e}");
    drop(first);
    assert!(!path.exists(), "removed when the listener is dropped");
    std::fs::write(&path, b"not a socket").unwrap();
    let e = SocketListener::bind(&socket_at(&path, 0o660))
        .await
        .err()
        .expect("a regular file is never removed");
    assert!(e.to_string().contains("not a socket"), "{e}");
    assert_eq!(std::fs::read(&path).unwrap(), b"not a socket");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The binary with `listen = ""`: only the socket; the `mariadb` CLI connects with
/// `--socket`; SIGTERM drains, exits 0 and leaves no file behind.
#[tokio::test]
async fn the_process_serves_only_the_socket_and_removes_it_at_exit() {
    check_sandbox().await;
    let dir = temp_dir("process");
    let path = dir.join("mysql.sock");
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config/demo.toml"))
        .unwrap()
        .replace("127.0.0.1:33061", &format!("127.0.0.1:{}", sandbox_port(0)))
        .replace("127.0.0.1:33062", &format!("127.0.0.1:{}", sandbox_port(1)))
        .replace("\".sandbox/tls/", &format!("\"{}/tls/", sandbox_dir()))
        .replacen(
            "[server]\n",
            &format!(
                "[server]\nsocket = \"{}\"\nsocket_mode = \"0666\"\n",
                path.display()
            ),
            1,
        );
    let text = text
        .lines()
        .map(|l| {
            if l.starts_with("listen = ") && !l.contains("9307") {
                "listen = \"\"".to_owned()
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let config = dir.join("routekey.toml");
    std::fs::write(&config, text).unwrap();
    let admin = free_port();
    let log = std::fs::File::create(dir.join("proxy.log")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_routekey-proxy"))
        .args(["serve", "--config"])
        .arg(&config)
        .env("ROUTEKEY_ADMIN__LISTEN", format!("127.0.0.1:{admin}"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !path.exists() {
        let log = std::fs::read_to_string(dir.join("proxy.log")).unwrap_or_default();
        assert!(child.try_wait().unwrap().is_none(), "exited: {log}");
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no socket: {log}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o666);
    let out = Command::new("mariadb")
        .args(["--no-defaults", "-uapp", "-papp", "-N", "-B", "orders"])
        .arg(format!("--socket={}", path.display()))
        .args(["-e", "SELECT COUNT(*) FROM t_order"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "mariadb --socket: {stderr}");
    let count: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert!(count > 0, "the scatter count over the socket: {count}");
    // No TCP listener: nothing answers on the demo's port through this process's config.
    let log = std::fs::read_to_string(dir.join("proxy.log")).unwrap_or_default();
    assert!(log.contains("address=None"), "{log}");

    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "did not exit");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(status.success(), "drained and exited 0: {status}");
    assert!(!path.exists(), "no socket file left behind");
    let _ = std::fs::remove_dir_all(&dir);
}
