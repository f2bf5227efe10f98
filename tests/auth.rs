//! Client authentication end to end with a real driver (mysql_async): caching_sha2_password
//! (full authentication over TLS and over TCP with the RSA key exchange, then the fast
//! path), the auth switch both ways, `password_hash` in the forms `mysql.user` stores (the
//! values computed outside the proxy: MariaDB's `PASSWORD()`, and a MySQL 8
//! `authentication_string`), and failed logins: counted on /metrics and slowed down per
//! (address, user) without holding anyone else back.

mod common;

use std::time::{Duration, Instant};

use common::*;
use mysql_async::prelude::*;
use mysql_async::{Conn, OptsBuilder, SslOpts};
use routekey_proxy::config::{AuthPlugin, Config, User, parse_hash};

/// A MySQL 8 `authentication_string` for the password `foobar` (SHOW CREATE USER's hex
/// form: its salt holds control characters).
const FOOBAR_SHA2: &str = "0x24412430303524031A69251C34295C4B35167C7F1E5A7B63091349503974624D34504B5A424679354856336868686F52485A736E4A733368786E427575516C73446469496537";

fn sha2_user(name: &str, password: &str) -> User {
    User {
        auth_plugin: AuthPlugin::CachingSha2Password,
        ..User::new(name, password)
    }
}

fn tls() -> SslOpts {
    SslOpts::default().with_root_certs(vec![
        std::path::PathBuf::from(format!("{}/tls/ca.pem", sandbox_dir())).into(),
    ])
}

fn as_user(h: &Harness, user: &str, password: &str, tls: Option<SslOpts>) -> OptsBuilder {
    OptsBuilder::from_opts(h.opts())
        .user(Some(user))
        .pass(Some(password))
        .ssl_opts(tls)
}

async fn works(opts: OptsBuilder) {
    let mut c = Conn::new(opts).await.expect("login");
    let n: Option<u64> = c.query_first("SELECT COUNT(*) FROM t_order").await.unwrap();
    assert_eq!(n, Some(1500));
    c.disconnect().await.unwrap();
}

#[tokio::test]
async fn caching_sha2_logs_in_fully_over_tls_then_by_the_fast_path_in_clear_text() {
    let mut config = config();
    config.server.rsa_private_key_file = None;
    config.users.push(sha2_user("sha2", "s3cret"));
    let h = Harness::start_with(config).await;
    // No TLS and no RSA key: the first login cannot send the password.
    let (code, ..) = server_error(Conn::new(as_user(&h, "sha2", "s3cret", None)).await);
    assert_eq!(code, 1045);
    works(as_user(&h, "sha2", "s3cret", Some(tls()))).await;
    // Learnt: the fast path needs neither.
    works(as_user(&h, "sha2", "s3cret", None)).await;
    let (code, ..) = server_error(Conn::new(as_user(&h, "sha2", "wrong", None)).await);
    assert_eq!(code, 1045);
    let (code, ..) = server_error(Conn::new(as_user(&h, "sha2", "wrong", Some(tls()))).await);
    assert_eq!(code, 1045);
    h.stop().await;
}

#[tokio::test]
async fn caching_sha2_full_authentication_uses_the_rsa_key_over_clear_text() {
    let h = Harness::start().await;
    // The demo's app_sha2 (password app), first login: the driver asks for the public
    // key and sends the password RSA-encrypted.
    works(as_user(&h, "app_sha2", "app", None)).await;
    works(as_user(&h, "app_sha2", "app", None)).await;
    let (code, _, message) = server_error(Conn::new(as_user(&h, "app_sha2", "apq", None)).await);
    assert_eq!(code, 1045, "{message}");
    h.stop().await;
}

#[tokio::test]
async fn clients_are_switched_to_the_users_plugin() {
    // mysql_async opens with mysql_native_password (the greeting's): a caching_sha2 user
    // switches it; the demo's app stays on native. Both with an empty password too.
    let mut config = config();
    config.users.push(sha2_user("sha2_empty", ""));
    config.users.push(User::new("native_empty", ""));
    let h = Harness::start_with(config).await;
    works(as_user(&h, "app_sha2", "app", Some(tls()))).await;
    works(as_user(&h, "app", "app", None)).await;
    works(as_user(&h, "sha2_empty", "", None)).await;
    works(as_user(&h, "native_empty", "", None)).await;
    let (code, ..) = server_error(Conn::new(as_user(&h, "sha2_empty", "x", Some(tls()))).await);
    assert_eq!(code, 1045);
    h.stop().await;
}

#[tokio::test]
async fn password_hashes_in_the_mysql_user_forms_log_in() {
    // MariaDB computes the native form itself.
    let mut ds0 = backend(0).await;
    let native: Option<String> = ds0.query_first("SELECT PASSWORD('secret')").await.unwrap();
    let native = native.unwrap();
    let mut config = config();
    config.users.push(User {
        credential: parse_hash(&native).unwrap(),
        ..User::new("native_hash", "")
    });
    config.users.push(User {
        credential: parse_hash(FOOBAR_SHA2).unwrap(),
        ..sha2_user("sha2_hash", "")
    });
    let h = Harness::start_with(config).await;
    works(as_user(&h, "native_hash", "secret", None)).await;
    let (code, ..) = server_error(Conn::new(as_user(&h, "native_hash", "secreT", None)).await);
    assert_eq!(code, 1045);
    works(as_user(&h, "sha2_hash", "foobar", None)).await;
    works(as_user(&h, "sha2_hash", "foobar", Some(tls()))).await;
    let (code, ..) = server_error(Conn::new(as_user(&h, "sha2_hash", "not_foobar", None)).await);
    assert_eq!(code, 1045);
    h.stop().await;
}

/// `routekey_login_failures_total` by user, from /metrics.
async fn failures(h: &Harness, user: &str) -> u64 {
    let text = h.metrics_text().await;
    let prefix = format!("routekey_login_failures_total{{user=\"{user}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map_or(0, |v| v.trim().parse().unwrap())
}

/// A wrong-password login of `user`; how long until it was refused.
async fn refused(h: &Harness, user: &str) -> Duration {
    let started = Instant::now();
    let (code, ..) = server_error(Conn::new(as_user(h, user, "wrong", None)).await);
    assert_eq!(code, 1045);
    started.elapsed()
}

#[tokio::test]
async fn failed_logins_are_counted_and_slowed_down_for_their_address_and_user_only() {
    let mut config: Config = config();
    // Shorter than the delays: the wait must not count against it.
    config.server.handshake_timeout = Duration::from_millis(1500);
    config.users.push(User::new("victim", "right"));
    let h = Harness::start_with(config).await;
    for _ in 0..5 {
        assert!(refused(&h, "victim").await < Duration::from_millis(900));
    }
    let sixth = refused(&h, "victim").await;
    assert!(
        (Duration::from_millis(900)..Duration::from_secs(3)).contains(&sixth),
        "{sixth:?}"
    );
    // The seventh waits 2 s; meanwhile another user logs in at once.
    let seventh = {
        let opts = as_user(&h, "victim", "wrong", None);
        tokio::spawn(async move {
            let started = Instant::now();
            let r = Conn::new(opts).await;
            (r.is_err(), started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    works(as_user(&h, "app", "app", None)).await;
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
    let (failed, took) = seventh.await.unwrap();
    assert!(failed);
    assert!(
        (Duration::from_millis(1900)..Duration::from_secs(5)).contains(&took),
        "{took:?}"
    );

    assert_eq!(failures(&h, "victim").await, 7);
    let before = failures(&h, "(unknown)").await;
    refused(&h, "nobody_such").await;
    assert_eq!(failures(&h, "(unknown)").await, before + 1);

    // The right password is answered after the delay too (4 s now), then forgets it all.
    let started = Instant::now();
    works(as_user(&h, "victim", "right", None)).await;
    assert!(
        started.elapsed() >= Duration::from_millis(3900),
        "{:?}",
        started.elapsed()
    );
    assert!(refused(&h, "victim").await < Duration::from_millis(900));
    h.stop().await;
}

/// A caching_sha2_password fast-path guess over a bare socket: the handshake response
/// carries a wrong 32-byte token; returns the first packet the proxy answers with and
/// how long it took, then hangs up.
async fn fast_path_guess(h: &Harness, user: &str) -> (Vec<u8>, Duration) {
    use tokio::io::AsyncWriteExt;
    let mut stream = tokio::net::TcpStream::connect(h.addr).await.unwrap();
    let (_, greeting) = read_packet(&mut stream).await;
    assert_eq!(greeting[0], 10);
    let response = handshake_response(user, &[0x5a; 32], "caching_sha2_password", None, None);
    let started = Instant::now();
    write_packet(&mut stream, 1, &response).await;
    stream.flush().await.unwrap();
    let (_, reply) = read_packet(&mut stream).await;
    (reply, started.elapsed())
}

/// Found by attacking the login: once a caching_sha2_password user's hash was cached, a
/// wrong fast-path token was answered 0x04 (and a right one 0x03) at once, before the
/// failed-login delay, and a guesser hanging up then was never counted. The delay now
/// comes before that answer, and a login abandoned after it counts as a failure.
#[tokio::test]
async fn the_caching_sha2_fast_path_answers_after_the_delay_and_a_hang_up_counts() {
    let mut config: Config = config();
    config.users.push(sha2_user("guessed", "right"));
    let h = Harness::start_with(config).await;
    // A full login (RSA exchange in clear text) puts the user's hash in the fast-path cache.
    works(as_user(&h, "guessed", "right", None)).await;
    let (reply, took) = fast_path_guess(&h, "guessed").await;
    assert_eq!(
        reply,
        [0x01, 0x04],
        "a wrong token is asked for the full password"
    );
    assert!(took < Duration::from_millis(900), "{took:?}");
    let counted = Instant::now();
    while failures(&h, "guessed").await < 1 {
        assert!(
            counted.elapsed() < Duration::from_secs(5),
            "hang-up not counted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for _ in 0..4 {
        assert!(refused(&h, "guessed").await < Duration::from_millis(900));
    }
    assert_eq!(failures(&h, "guessed").await, 5);
    // Five failures: the sixth attempt's fast-path answer waits 1 s.
    let (reply, took) = fast_path_guess(&h, "guessed").await;
    assert_eq!(reply, [0x01, 0x04]);
    assert!(
        (Duration::from_millis(900)..Duration::from_secs(3)).contains(&took),
        "{took:?}"
    );
    let counted = Instant::now();
    while failures(&h, "guessed").await < 6 {
        assert!(
            counted.elapsed() < Duration::from_secs(5),
            "hang-up not counted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    h.stop().await;
}
