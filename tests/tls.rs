//! TLS between clients and the proxy: the SSLRequest upgrade with a real driver
//! (mysql_async over rustls) verifying the sandbox CA, `Ssl_cipher`/`Ssl_version` per
//! session, `require_tls` users, a wrong CA refused at connect, and certificates reloaded
//! with the configuration (a bad new one keeps the old).

mod common;

use std::path::PathBuf;

use common::*;
use mysql_async::prelude::*;
use mysql_async::{Conn, OptsBuilder, SslOpts};
use routekey_proxy::config::{Config, User};

fn tls_dir() -> String {
    format!("{}/tls", sandbox_dir())
}

/// TLS options trusting `ca` (a PEM file), the server's name checked against 127.0.0.1.
fn trusting(ca: impl Into<PathBuf>) -> SslOpts {
    SslOpts::default().with_root_certs(vec![ca.into().into()])
}

fn as_user(h: &Harness, user: &str, password: &str, tls: Option<SslOpts>) -> OptsBuilder {
    OptsBuilder::from_opts(h.opts())
        .user(Some(user))
        .pass(Some(password))
        .ssl_opts(tls)
}

async fn status(c: &mut Conn, sql: &str) -> Vec<(String, String)> {
    c.query(sql).await.unwrap()
}

fn with_tls_user(mut config: Config) -> Config {
    config.users.push(User {
        require_tls: true,
        ..User::new("tls_only", "secret")
    });
    config
}

#[tokio::test]
async fn drivers_upgrade_to_tls_verifying_the_ca_and_see_their_cipher() {
    let h = Harness::start().await;
    let ca = format!("{}/ca.pem", tls_dir());
    let mut c = Conn::new(as_user(&h, "app", "app", Some(trusting(&ca))))
        .await
        .expect("TLS connection verified against the sandbox CA");
    let rows = status(&mut c, "SHOW STATUS LIKE 'Ssl_cipher'").await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].0, "Ssl_cipher");
    assert!(rows[0].1.starts_with("TLS"), "cipher suite named: {rows:?}");
    let rows = status(&mut c, "SHOW SESSION STATUS LIKE 'ssl_version'").await;
    assert!(rows[0].1.starts_with("TLSv1."), "{rows:?}");
    // Every form of SHOW STATUS answers with the client connection's Ssl_ variables.
    for sql in [
        "SHOW STATUS LIKE 'Ssl%'",
        "SHOW STATUS",
        "SHOW SESSION STATUS WHERE Variable_name LIKE '%cipher%'",
    ] {
        let rows = status(&mut c, sql).await;
        let cipher = rows.iter().find(|r| r.0 == "Ssl_cipher").expect(sql);
        assert!(cipher.1.starts_with("TLS"), "{sql}: {cipher:?}");
    }
    // The session works as in clear text, large results included (many TLS records).
    let n: Option<u64> = c.query_first("SELECT COUNT(*) FROM t_order").await.unwrap();
    assert_eq!(n, Some(1500));
    let big: Option<String> = c.query_first("SELECT REPEAT('x', 300000)").await.unwrap();
    assert_eq!(big.map(|s| s.len()), Some(300_000));

    let mut plain = h.client().await;
    let rows = status(&mut plain, "SHOW STATUS LIKE 'Ssl_cipher'").await;
    assert_eq!(rows, [("Ssl_cipher".to_owned(), String::new())]);
    h.stop().await;
}

#[tokio::test]
async fn a_wrong_ca_is_refused_at_connect() {
    let h = Harness::start().await;
    let other = format!("{}/other-ca.pem", tls_dir());
    let e = Conn::new(as_user(&h, "app", "app", Some(trusting(other))))
        .await
        .expect_err("a certificate from another CA is not trusted");
    let text = e.to_string().to_lowercase();
    assert!(
        text.contains("certificate") || text.contains("issuer"),
        "{e}"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_require_tls_user_is_refused_in_clear_text_and_accepted_over_tls() {
    let h = Harness::start_with(with_tls_user(config())).await;
    let clear = Conn::new(as_user(&h, "tls_only", "secret", None)).await;
    let (code, _, message) = server_error(clear);
    assert_eq!(code, 1045, "{message}");
    assert!(
        message.contains("Access denied for user 'tls_only'"),
        "{message}"
    );
    let ca = format!("{}/ca.pem", tls_dir());
    let mut c = Conn::new(as_user(&h, "tls_only", "secret", Some(trusting(ca))))
        .await
        .expect("over TLS");
    let one: Option<i64> = c.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
    h.stop().await;
}

#[tokio::test]
async fn without_a_certificate_ssl_is_not_offered_and_a_request_is_refused() {
    let mut config = config();
    config.server.tls = None;
    let h = Harness::start_with(config).await;
    let ca = format!("{}/ca.pem", tls_dir());
    let e = Conn::new(as_user(&h, "app", "app", Some(trusting(ca))))
        .await
        .expect_err("no TLS offered");
    // The driver refuses by itself: the greeting has no CLIENT_SSL.
    assert!(
        e.to_string().to_lowercase().contains("ssl")
            || e.to_string().to_lowercase().contains("tls"),
        "{e}"
    );
    let mut c = h.client().await;
    assert_usable(&mut c).await;
    h.stop().await;
}

/// A self-signed certificate for 127.0.0.1 made with openssl in `dir`: (cert, key).
fn self_signed(dir: &std::path::Path) -> (PathBuf, PathBuf) {
    let cert = dir.join("new.pem");
    let key = dir.join("new-key.pem");
    let out = std::process::Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .args([
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ])
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .output()
        .expect("openssl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (cert, key)
}

#[tokio::test]
async fn a_reload_puts_a_new_certificate_in_force_and_a_bad_one_keeps_the_old() {
    let h = Harness::start().await;
    let ca = format!("{}/ca.pem", tls_dir());
    let dir = std::env::temp_dir().join(format!("routekey-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = self_signed(&dir);

    // A key file that is not PEM: refused, the sandbox certificate stays in force.
    let garbage = dir.join("garbage.pem");
    std::fs::write(&garbage, "not a key").unwrap();
    let mut bad = config();
    bad.server.tls.as_mut().unwrap().key_file = garbage;
    h.proxy.reload(bad).unwrap();
    Conn::new(as_user(&h, "app", "app", Some(trusting(&ca))))
        .await
        .expect("the old certificate still served");

    let mut good = config();
    let files = good.server.tls.as_mut().unwrap();
    files.cert_file = cert.clone();
    files.key_file = key;
    h.proxy.reload(good).unwrap();
    let e = Conn::new(as_user(&h, "app", "app", Some(trusting(&ca)))).await;
    assert!(
        e.is_err(),
        "the sandbox CA no longer verifies the served certificate"
    );
    Conn::new(as_user(&h, "app", "app", Some(trusting(&cert))))
        .await
        .expect("the new certificate is served");
    let _ = std::fs::remove_dir_all(&dir);
    h.stop().await;
}

/// A TLS login trusting `ca` as `app`, on the proxy at `port`.
async fn tls_login(port: u16, ca: &std::path::Path) -> Result<Conn, mysql_async::Error> {
    let opts = OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some("app"))
        .pass(Some("app"))
        .prefer_socket(false)
        .ssl_opts(Some(trusting(ca)));
    Conn::new(opts).await
}

#[tokio::test]
async fn the_process_reloads_a_certificate_when_its_file_changes() {
    let dir = std::env::temp_dir().join(format!("routekey-tls-watch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::copy(format!("{}/server.pem", tls_dir()), &cert).unwrap();
    std::fs::copy(format!("{}/server-key.pem", tls_dir()), &key).unwrap();
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config/demo.toml"))
        .unwrap()
        .replace("127.0.0.1:33061", &format!("127.0.0.1:{}", sandbox_port(0)))
        .replace("127.0.0.1:33062", &format!("127.0.0.1:{}", sandbox_port(1)))
        .replace(
            "\".sandbox/tls/server.pem",
            &format!("\"{}", cert.display()),
        )
        .replace(
            "tls_key_file = \".sandbox/tls/server-key.pem",
            &format!("tls_key_file = \"{}", key.display()),
        )
        .replace("\".sandbox/tls/", &format!("\"{}/", tls_dir()));
    let config = dir.join("routekey.toml");
    std::fs::write(&config, text).unwrap();
    // Two different ports: two pickings in a row may get the same one back.
    let port = free_port();
    let admin = std::iter::repeat_with(free_port)
        .find(|p| *p != port)
        .unwrap();
    let log = std::fs::File::create(dir.join("proxy.log")).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_routekey-proxy"))
        .args(["serve", "--config"])
        .arg(&config)
        .env("ROUTEKEY_SERVER__LISTEN", format!("127.0.0.1:{port}"))
        .env("ROUTEKEY_ADMIN__LISTEN", format!("127.0.0.1:{admin}"))
        .env("RUST_LOG", "routekey_proxy=info")
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let ca = PathBuf::from(format!("{}/ca.pem", tls_dir()));
    let log = || std::fs::read_to_string(dir.join("proxy.log")).unwrap_or_default();
    let until = |limit: u64| std::time::Instant::now() + std::time::Duration::from_secs(limit);
    let deadline = until(20);
    while tls_login(port, &ca).await.is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "not serving TLS: {}",
            log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // The Secret is renewed: new files swapped in by rename, as a mount does.
    let (new_cert, new_key) = self_signed(&dir);
    std::fs::copy(&new_key, dir.join("key.tmp")).unwrap();
    std::fs::rename(dir.join("key.tmp"), &key).unwrap();
    std::fs::copy(&new_cert, dir.join("cert.tmp")).unwrap();
    std::fs::rename(dir.join("cert.tmp"), &cert).unwrap();
    let deadline = until(10);
    while tls_login(port, &new_cert).await.is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "not reloaded: {}",
            log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        tls_login(port, &ca).await.is_err(),
        "the old certificate is gone"
    );
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The greeting's capability flags (low and high halves) from a raw socket.
async fn greeting_caps(s: &mut tokio::net::TcpStream) -> u32 {
    use tokio::io::AsyncReadExt;
    let mut header = [0u8; 4];
    s.read_exact(&mut header).await.unwrap();
    let len = usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
    let mut hello = vec![0u8; len];
    s.read_exact(&mut hello).await.unwrap();
    let version_end = hello.iter().skip(1).position(|&b| b == 0).unwrap() + 1;
    let p = version_end + 1 + 4 + 8 + 1;
    let low = u32::from(u16::from_le_bytes([hello[p], hello[p + 1]]));
    let high = u32::from(u16::from_le_bytes([hello[p + 5], hello[p + 6]]));
    low | high << 16
}

const CLIENT_SSL: u32 = 0x800;

#[tokio::test]
async fn ssl_is_offered_only_with_a_certificate_and_a_request_without_one_gets_1043() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let h = Harness::start().await;
    let mut s = tokio::net::TcpStream::connect(h.addr).await.unwrap();
    assert_ne!(greeting_caps(&mut s).await & CLIENT_SSL, 0, "offered");
    h.stop().await;

    let mut config = config();
    config.server.tls = None;
    let h = Harness::start_with(config).await;
    let mut s = tokio::net::TcpStream::connect(h.addr).await.unwrap();
    let caps = greeting_caps(&mut s).await;
    assert_eq!(caps & CLIENT_SSL, 0, "not offered");
    // A client asking anyway: a 32-byte SSLRequest (sequence id 1).
    let mut request = vec![32, 0, 0, 1];
    request.extend_from_slice(&(caps | CLIENT_SSL).to_le_bytes());
    request.extend_from_slice(&(16u32 << 20).to_le_bytes());
    request.push(45);
    request.extend_from_slice(&[0; 23]);
    s.write_all(&request).await.unwrap();
    let mut reply = Vec::new();
    s.read_to_end(&mut reply).await.unwrap();
    assert_eq!(reply[4], 0xff, "an error packet: {reply:?}");
    assert_eq!(u16::from_le_bytes([reply[5], reply[6]]), 1043);
    let message = String::from_utf8_lossy(&reply[13..]);
    assert!(message.contains("no TLS certificate"), "{message}");
    h.stop().await;
}

/// `check-config` reads the certificate, key and RSA key as `serve` does: a file that
/// passes it starts, one naming a missing certificate fails it with the path.
#[test]
fn check_config_reads_the_tls_files() {
    let dir = std::env::temp_dir().join(format!("routekey-tls-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let demo =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config/demo.toml")).unwrap();
    let check = |text: String| {
        let config = dir.join("routekey.toml");
        std::fs::write(&config, text).unwrap();
        std::process::Command::new(env!("CARGO_BIN_EXE_routekey-proxy"))
            .arg("check-config")
            .arg(&config)
            .output()
            .unwrap()
    };
    let good = check(demo.replace("\".sandbox/tls/", &format!("\"{}/", tls_dir())));
    assert!(
        good.status.success(),
        "{}",
        String::from_utf8_lossy(&good.stderr)
    );
    let missing = dir.join("nowhere/server.pem");
    let bad = check(
        demo.replace("\".sandbox/tls/", &format!("\"{}/", tls_dir()))
            .replacen(
                &format!("{}/server.pem", tls_dir()),
                &missing.display().to_string(),
                1,
            ),
    );
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success(), "a missing certificate must fail");
    assert!(stderr.contains("server.tls_cert_file"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
