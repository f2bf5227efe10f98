//! Protocol commands besides COM_QUERY: COM_FIELD_LIST for logical and unsharded tables,
//! COM_PING, and commands the proxy does not serve (a proper error, never a blind OK).

mod common;

use common::*;

/// The `(schema, table, org_table, name)` of a column definition packet.
fn names(def: &[u8]) -> (String, String, String, String) {
    let mut pos = 0;
    let mut field = || {
        let n = def[pos] as usize;
        let v = String::from_utf8_lossy(&def[pos + 1..pos + 1 + n]).into_owned();
        pos += 1 + n;
        v
    };
    let _catalog = field();
    (field(), field(), field(), field())
}

#[tokio::test]
async fn field_list_of_a_logical_table_comes_from_its_first_shard_under_logical_names() {
    let h = Harness::start().await;
    let mut raw = RawClient::connect(h.addr).await;
    let packets = raw.command(0x04, b"t_order\0").await;
    let (last, defs) = packets.split_last().unwrap();
    assert!(last[0] == 0xFE && last.len() < 9, "ends with EOF: {last:?}");
    let got: Vec<_> = defs.iter().map(|d| names(d)).collect();
    // The physical table's columns, in order, as the shard itself lists them.
    let (ds, table, _) = physical(0);
    let mut direct = backend(ds).await;
    let want = columns(&mut direct, &format!("SELECT * FROM {table} LIMIT 0")).await;
    assert_eq!(got.len(), want.len());
    for ((schema, table, org_table, name), (want_name, _)) in got.iter().zip(&want) {
        assert_eq!(
            (schema.as_str(), table.as_str(), org_table.as_str()),
            ("orders", "t_order", "t_order")
        );
        assert_eq!(name, want_name);
    }
    // An unsharded table passes through; an unknown one is the server's error.
    let packets = raw.command(0x04, b"t_merchant\0").await;
    assert!(packets.len() > 1 && names(&packets[0]).1 == "t_merchant");
    let packets = raw.command(0x04, b"no_such_table\0").await;
    assert_eq!(packets.last().unwrap()[0], 0xFF);
    assert!(matches!(raw.query("SELECT 1").await, RawReply::Rows(..)));
}

#[tokio::test]
async fn ping_and_unknown_commands() {
    let h = Harness::start().await;
    let mut raw = RawClient::connect(h.addr).await;
    let packets = raw.command(0x0e, b"").await; // COM_PING
    assert_eq!(packets[0][0], 0x00);
    for code in [0x11u8, 0x12, 0x1d, 0x99] {
        // COM_CHANGE_USER, COM_BINLOG_DUMP, COM_DAEMON, junk
        let packets = raw.command(code, b"x").await;
        let err = &packets[0];
        assert_eq!(err[0], 0xFF, "command {code:#x} refused");
        assert_eq!(
            u16::from_le_bytes([err[1], err[2]]),
            1047,
            "command {code:#x}"
        );
    }
    assert!(matches!(raw.query("SELECT 1").await, RawReply::Rows(..)));
}

#[tokio::test]
async fn kill_of_its_own_connection_closes_it_with_an_error_and_others_are_never_forwarded() {
    let h = Harness::start().await;
    let mut raw = RawClient::connect(h.addr).await;
    match raw.query("KILL 4242").await {
        RawReply::Err(code, _) => assert_eq!(code, 1094),
        other => panic!("{other:?}"),
    }
    match raw.query("KILL CONNECTION_ID()").await {
        RawReply::Err(code, _) => assert_eq!(code, 1927),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn kill_query_of_another_session_stops_its_statement_on_the_right_backend_thread() {
    use mysql_async::prelude::*;
    use std::time::{Duration, Instant};
    let mut config = config();
    config
        .users
        .push(routekey_proxy::config::User::new("other", "other"));
    let h = Harness::start_with(config).await;
    let mut a = h.client().await;
    let a_id = a.id();
    let mut b = h.client().await;
    let started = Instant::now();
    let sleeper = tokio::spawn(async move {
        let r: Result<Option<i64>, _> = a.query_first("SELECT SLEEP(10)").await;
        (r, a)
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    b.query_drop(format!("KILL QUERY {a_id}")).await.unwrap();
    let (r, mut a) = sleeper.await.unwrap();
    // MariaDB ends an interrupted SLEEP with the value 1, or error 1317.
    match r {
        Ok(v) => assert_eq!(v, Some(1)),
        Err(e) => assert_eq!(server_code::<()>(Err(e)), 1317),
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_usable(&mut a).await;

    // Another user may not kill it; KILL CONNECTION by its own user closes it.
    let mut other = mysql_async::Conn::new(
        mysql_async::OptsBuilder::from_opts(h.opts())
            .user(Some("other"))
            .pass(Some("other")),
    )
    .await
    .unwrap();
    assert_eq!(error_code(&mut other, &format!("KILL {a_id}")).await, 1095);
    b.query_drop(format!("KILL CONNECTION {a_id}"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        a.query_drop("SELECT 1").await.is_err(),
        "the killed connection is closed"
    );
}

/// KILL QUERY of a statement that waits for a pooled connection (every connection of its
/// datasource is held by another session's transaction) stops the wait with 1317 at once,
/// and the session goes on; KILL CONNECTION of such a session closes it at once. Before,
/// the statement waited out `checkout_timeout` and KILL QUERY changed nothing.
#[tokio::test]
async fn kill_stops_a_statement_waiting_for_a_pooled_connection() {
    use mysql_async::prelude::*;
    use std::time::{Duration, Instant};
    let mut config = config();
    for ds in &mut config.datasources {
        ds.pool_size = 1;
        ds.checkout_timeout = Duration::from_secs(30);
    }
    let h = Harness::start_with(config).await;
    let id = order_on(0, 3);
    let read = format!("SELECT status FROM t_order WHERE order_id = {id}");
    // Connected first: a login reads from ds0 too.
    let mut holder = h.client().await;
    let mut killer = h.client().await;
    let waiters = [h.client().await, h.client().await];
    // The only connection to ds0, held by a transaction.
    exec(&mut holder, "BEGIN").await;
    rows(&mut holder, &read).await;

    for (query_only, mut waiter) in [true, false].into_iter().zip(waiters) {
        let waiter_id = waiter.id();
        let started = Instant::now();
        let waiting = read.clone();
        let task = tokio::spawn(async move {
            let r = waiter.query_drop(&waiting).await;
            (r, waiter)
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        let kind = if query_only { "QUERY" } else { "CONNECTION" };
        exec(&mut killer, &format!("KILL {kind} {waiter_id}")).await;
        let (r, mut waiter) = tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("the waiting statement ends")
            .unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "KILL {kind}: {:?}",
            started.elapsed()
        );
        if query_only {
            assert_eq!(server_code(r), 1317, "KILL QUERY");
            // The next statement is not interrupted (it waits for the connection, which
            // the holder gives back).
            let next = tokio::spawn(async move {
                let r: Result<Option<String>, _> = waiter.query_first("SELECT 1").await;
                r
            });
            tokio::time::sleep(Duration::from_millis(300)).await;
            exec(&mut holder, "COMMIT").await;
            assert_eq!(next.await.unwrap().unwrap().as_deref(), Some("1"));
            exec(&mut holder, "BEGIN").await;
            rows(&mut holder, &read).await;
        } else {
            assert!(r.is_err(), "KILL CONNECTION");
            assert!(waiter.query_drop("SELECT 1").await.is_err(), "closed");
        }
    }
    exec(&mut holder, "COMMIT").await;
    h.stop().await;
}

/// Rows of megabytes are passed on as they arrive (not read whole first): whole, in order,
/// in both protocols, including one row of exactly one full chunk (an empty chunk ends it) and
/// one of two chunks; the session goes on in step after them.
#[tokio::test]
async fn rows_of_megabytes_pass_whole_in_text_and_binary_protocol() {
    use mysql_async::prelude::*;
    let h = Harness::start().await;
    let opts = mysql_async::OptsBuilder::from_opts(h.opts()).max_allowed_packet(Some(64 << 20));
    let mut c = mysql_async::Conn::new(opts).await.unwrap();
    // 16777211 bytes and a 4-byte length: a row packet of exactly 0xFFFFFF bytes.
    let text = "SELECT 1, REPEAT('a', 300000), '' UNION ALL SELECT 2, REPEAT('b', 16777211), '' \
                UNION ALL SELECT 3, REPEAT('c', 9000000), REPEAT('d', 9000000) \
                UNION ALL SELECT 4, 'small', 'row'";
    let rows: Vec<(u32, String, String)> = c.query(text).await.unwrap();
    let shapes: Vec<_> = rows
        .iter()
        .map(|(n, a, b)| (*n, a.len(), b.len()))
        .collect();
    assert_eq!(
        shapes,
        [
            (1, 300_000, 0),
            (2, 16_777_211, 0),
            (3, 9_000_000, 9_000_000),
            (4, 5, 3)
        ]
    );
    assert!(rows[1].1.bytes().all(|b| b == b'b'));
    assert!(rows[2].1.bytes().all(|b| b == b'c') && rows[2].2.bytes().all(|b| b == b'd'));
    let binary: Vec<(u32, String)> = c
        .exec(
            "SELECT 1, REPEAT(?, 300000) UNION ALL SELECT 2, REPEAT(?, 16777000)",
            ("x", "y"),
        )
        .await
        .unwrap();
    assert_eq!(binary.len(), 2);
    assert_eq!(
        (binary[0].1.len(), binary[1].1.len()),
        (300_000, 16_777_000)
    );
    let n: Option<u32> = c.query_first("SELECT 41 + 1").await.unwrap();
    assert_eq!(n, Some(42));
}

/// A handshake response as app/app with connection attributes: one attribute whose value
/// is `attribute_bytes` long. Returns the proxy's answer (first byte 0x00 OK), or `None`
/// when it closed the connection instead.
async fn login_with_attributes(addr: std::net::SocketAddr, attribute_bytes: usize) -> Option<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (_, greeting) = read_packet(&mut stream).await;
    let scramble =
        mysql_common::scramble::scramble_native(&greeting_nonce(&greeting), b"app").unwrap();
    let mut attributes = vec![1, b'k', 0xfd];
    attributes.extend_from_slice(&(attribute_bytes as u32).to_le_bytes()[..3]);
    attributes.resize(attributes.len() + attribute_bytes, b'v');
    let response = handshake_response(
        "app",
        &scramble,
        "mysql_native_password",
        None,
        Some(&attributes),
    );
    write_packet(&mut stream, 1, &response).await;
    stream.flush().await.unwrap();
    let mut head = [0u8; 5];
    match tokio::time::timeout(
        std::time::Duration::from_secs(10),
        stream.read_exact(&mut head),
    )
    .await
    {
        Ok(Ok(_)) => Some(head[4]),
        Ok(Err(_)) => None,
        Err(_) => panic!("neither answered nor closed within 10 s"),
    }
}

/// Before authentication a client may send 128 KiB at most (64 KiB of connection
/// attributes, as MySQL allows, fit): an unauthenticated client cannot make the proxy hold
/// `server.max_packet_size` (64 MiB) per connection, as it could once.
#[tokio::test]
async fn a_handshake_packet_is_limited_before_authentication() {
    let h = Harness::start().await;
    assert_eq!(login_with_attributes(h.addr, 64 * 1024).await, Some(0x00));
    assert_eq!(login_with_attributes(h.addr, 200 * 1024).await, None);
    // After authentication the configured limit holds again: a 1 MiB statement runs.
    let mut c = h.client().await;
    let long = format!("SELECT LENGTH('{}')", "x".repeat(1 << 20));
    let n: Option<u64> = mysql_async::prelude::Queryable::query_first(&mut c, long)
        .await
        .unwrap();
    assert_eq!(n, Some(1 << 20));
    h.stop().await;
}

/// `server.max_connections`: one client more is answered 1040 in place of the greeting
/// (mysql_async reports the server's error), counted on /metrics; a freed slot serves
/// again.
#[tokio::test]
async fn clients_over_max_connections_are_answered_too_many_connections() {
    let mut config = config();
    config.server.max_connections = 2;
    let h = Harness::start_with(config).await;
    let first = h.client().await;
    let _second = h.client().await;
    match mysql_async::Conn::new(h.opts()).await {
        Err(mysql_async::Error::Server(e)) => {
            assert_eq!((e.code, e.message.as_str()), (1040, "Too many connections"));
        }
        other => panic!("expected 1040, got {other:?}"),
    }
    assert!(
        h.metrics_text()
            .await
            .contains("routekey_client_connections_refused_total 1"),
    );
    first.disconnect().await.unwrap();
    let started = std::time::Instant::now();
    loop {
        match mysql_async::Conn::new(h.opts()).await {
            Ok(c) => break c.disconnect().await.unwrap(),
            Err(e) => assert!(
                started.elapsed() < std::time::Duration::from_secs(5),
                "the freed slot serves no one: {e}"
            ),
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    h.stop().await;
}
