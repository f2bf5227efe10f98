//! What must hold when backends misbehave or clients push: a transaction whose backend
//! connection dies is never committed in part, dead pooled connections are discarded,
//! statements and handshakes are bounded in time, the service account is not the
//! client's to administer, and statements too large to parse do not bring the proxy down.

mod common;

use std::time::{Duration, Instant};

use common::*;
use mysql_async::prelude::*;

#[tokio::test]
async fn a_transaction_whose_backend_connection_dies_is_not_committed_in_part() {
    let h = Harness::start().await;
    let (a, b) = (fresh_new_id_on(4, 1), fresh_new_id_on(4, 1)); // CORP, on ds1
    let cleanup = Cleanup::new(&[a, b]);
    let mut c = h.client().await;
    exec(&mut c, &insert_order_sql(a, "CORP_CHANNEL", "a")).await;
    exec(&mut c, &insert_order_sql(b, "CORP_CHANNEL", "b")).await;

    exec(&mut c, "BEGIN").await;
    exec(
        &mut c,
        &format!("UPDATE t_order SET status = 'MIDA' WHERE order_id = {a}"),
    )
    .await;
    // The backend thread holding the transaction, as the backend names it.
    let thread: u64 = c
        .query_first(format!(
            "SELECT @@pseudo_thread_id FROM t_order WHERE order_id = {a}"
        ))
        .await
        .unwrap()
        .unwrap();
    backend(1)
        .await
        .query_drop(format!("KILL {thread}"))
        .await
        .unwrap();

    // The next statement fails and the client connection is closed: nothing after it can
    // be committed as if the transaction were whole.
    let r = c
        .query_drop(format!(
            "UPDATE t_order SET status = 'MIDB' WHERE order_id = {b}"
        ))
        .await;
    assert!(r.is_err(), "the statement on the dead connection fails");
    let after = c.query_drop("COMMIT").await;
    assert!(
        after.is_err(),
        "the session is closed, COMMIT cannot succeed: {after:?}"
    );
    let statuses = rows(
        &mut backend(1).await,
        &format!(
            "SELECT status FROM {} WHERE order_id = {a} UNION ALL SELECT status FROM {} WHERE order_id = {b}",
            physical(expected_shard("CORP_CHANNEL", a)).1,
            physical(expected_shard("CORP_CHANNEL", b)).1
        ),
    )
    .await;
    assert_eq!(show_rows(&statuses), ["CREATED", "CREATED"]);
    drop(cleanup);
}

#[tokio::test]
async fn pooled_connections_closed_by_the_server_are_discarded_not_handed_out() {
    let mut config = config();
    config.datasources[1].pool_size = 2;
    let h = Harness::start_with(config).await;
    let id = seed().channels["CORP_CHANNEL"].new_format_ids[0];
    let sql = format!("SELECT order_id FROM t_order WHERE order_id = {id}");
    {
        // A client leaves its connections to ds1 with a one-second wait_timeout.
        let mut a = h.client().await;
        exec(&mut a, "SET SESSION wait_timeout = 1").await;
        let (mut a1, mut a2) = (h.client().await, h.client().await);
        exec(&mut a1, "SET SESSION wait_timeout = 1").await;
        exec(&mut a2, "SET SESSION wait_timeout = 1").await;
        let (r1, r2) = tokio::join!(a1.query_drop(&sql), a2.query_drop(&sql));
        r1.unwrap();
        r2.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(2500)).await; // the server closes them
    let mut b = h.client().await;
    for _ in 0..4 {
        let got: Option<u64> = b
            .query_first(&sql)
            .await
            .expect("a live connection is used");
        assert_eq!(got, Some(id));
    }
}

#[tokio::test]
async fn administration_and_the_proxys_own_databases_are_refused() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    for sql in [
        "SET PASSWORD = PASSWORD('x')",
        "GRANT SELECT ON *.* TO 'x'@'%'",
        "DROP DATABASE order_shards",
        "CREATE USER 'x'@'%'",
        "FLUSH TABLES WITH READ LOCK",
        "SELECT * FROM t_merchant INTO OUTFILE '/tmp/routekey-outfile'",
    ] {
        assert_eq!(error_code(&mut c, sql).await, 1227, "{sql}");
    }
    for sql in ["USE order_shards", "SHOW TABLES FROM order_shards"] {
        assert_eq!(error_code(&mut c, sql).await, 1044, "{sql}");
    }
    for sql in [
        "SELECT * FROM order_shards.t_order_0 LIMIT 1",
        "SELECT * FROM `order_meta`.`t_order_index` LIMIT 1",
        "SELECT user, password FROM mysql.user",
        // Any database the user is not given, not only the proxy's own (SPEC §8a).
        "SELECT COUNT(*) FROM orders_ref.t_order",
    ] {
        assert_eq!(error_code(&mut c, sql).await, 1142, "{sql}");
    }
    assert_usable(&mut c).await;
}

#[tokio::test]
async fn last_insert_id_variables_do_not_leak_between_clients() {
    let mut config = config();
    config.datasources[0].pool_size = 1; // both clients use the same backend connection
    let h = Harness::start_with(config).await;
    {
        let mut a = h.client().await;
        let v: Option<u64> = a.query_first("SELECT LAST_INSERT_ID(77)").await.unwrap();
        assert_eq!(v, Some(77));
        let v: Option<(u64, u64)> = a
            .query_first("SELECT @@last_insert_id, @@identity")
            .await
            .unwrap();
        assert_eq!(v, Some((77, 77)));
    }
    let mut b = h.client().await;
    let v: Option<(u64, u64, u64)> = b
        .query_first("SELECT @@last_insert_id, @@identity, LAST_INSERT_ID()")
        .await
        .unwrap();
    assert_eq!(v, Some((0, 0, 0)));
}

#[tokio::test]
async fn statements_over_the_query_timeout_are_interrupted() {
    let mut config = config();
    config.datasources[0].query_timeout = Duration::from_millis(800);
    let h = Harness::start_with(config).await;
    let mut c = h.client().await;
    let started = Instant::now();
    let r = c.query_drop("SELECT SLEEP(5)").await;
    let (code, state, _) = server_error(r);
    assert_eq!((code, state.as_str()), (1969, "70100"));
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_usable(&mut c).await;
}

/// A query timeout that fires while a long row is on its way leaves the client holding part
/// of a packet: the proxy closes the connection rather than write an error packet the client
/// would read as row bytes.
#[tokio::test]
async fn a_timeout_in_the_middle_of_a_long_row_closes_the_connection_without_an_error_inside_it() {
    let mut config = config();
    config.datasources[0].query_timeout = Duration::from_millis(800);
    let h = Harness::start_with(config).await;
    let mut raw = RawClient::connect(h.addr).await;
    // A 12 MB row: more than the socket buffers hold while the client does not read.
    raw.send_query("SELECT REPEAT('x', 6000000), REPEAT('y', 6000000)")
        .await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let bytes = raw
        .read_to_close(Duration::from_secs(10))
        .await
        .expect("the proxy closed the connection");
    // Walk the packets: every complete one is the result's (none is an ERR), and the last
    // is cut short.
    let mut at = 0;
    let mut complete = Vec::new();
    while at + 4 <= bytes.len() {
        let len = usize::from(bytes[at])
            | usize::from(bytes[at + 1]) << 8
            | usize::from(bytes[at + 2]) << 16;
        if at + 4 + len > bytes.len() {
            break;
        }
        complete.push(bytes[at + 4]);
        at += 4 + len;
    }
    assert!(
        at < bytes.len(),
        "the row was cut off ({} bytes)",
        bytes.len()
    );
    assert!(
        complete.len() >= 3,
        "column count, definitions, EOF: {complete:?}"
    );
    assert!(!complete.contains(&0xff), "no ERR packet: {complete:?}");
}

#[tokio::test]
async fn a_client_that_never_finishes_its_handshake_is_dropped() {
    use tokio::io::AsyncReadExt;
    let mut config = config();
    config.server.handshake_timeout = Duration::from_millis(300);
    let h = Harness::start_with(config).await;
    let mut s = tokio::net::TcpStream::connect(h.addr).await.unwrap();
    let mut buf = vec![0u8; 1024];
    let n = s.read(&mut buf).await.unwrap();
    assert!(n > 0, "the greeting arrives");
    let closed = tokio::time::timeout(Duration::from_secs(3), async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the proxy closed the silent connection");
}

#[tokio::test]
async fn statements_too_long_to_parse_do_not_bring_the_proxy_down() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    // Unsharded: not parsed, passed through; the server answers.
    let chain = " AND 1".repeat(100_000);
    let v: Option<i64> = c.query_first(format!("SELECT 1{chain}")).await.unwrap();
    assert_eq!(v, Some(1));
    // On a sharded table: refused (the shard's server accepts it, the proxy cannot route it).
    let id = seed().channels["EU_CHANNEL"].new_format_ids[0];
    let code = error_code(
        &mut c,
        &format!(
            "SELECT COUNT(*) FROM t_order WHERE order_id = {id}{}",
            " AND 1".repeat(40_000)
        ),
    )
    .await;
    assert_eq!(code, 1235);
    assert_usable(&mut c).await;
    // A new client is served too: the process is alive.
    assert_usable(&mut h.client().await).await;
}

#[tokio::test]
async fn versioned_comments_the_server_skips_are_not_read_as_filters() {
    let h = Harness::start().await;
    let id = seed().channels["EU_CHANNEL"].new_format_ids[0];
    let mut c = h.client().await;
    // MariaDB skips MySQL 5.7+ and future versions: these statements have no usable
    // order id and must not run on one shard as if filtered.
    for sql in [
        format!("SELECT COUNT(*) FROM t_order WHERE 1=1 /*!80000 AND order_id = {id} */"),
        format!("DELETE FROM t_order WHERE 1=1 /*!999999 AND order_id = {id} */"),
        format!("UPDATE t_order SET note = 'x' WHERE 1=1 /*M!110000 AND order_id = {id} */"),
    ] {
        assert_eq!(error_code(&mut c, &sql).await, 1235, "{sql}");
    }
    // Versions the server runs are read as SQL.
    let n: Option<u64> = c
        .query_first(format!(
            "SELECT COUNT(*) FROM t_order WHERE 1=1 /*!50000 AND order_id = {id} */"
        ))
        .await
        .unwrap();
    assert_eq!(n, Some(1));
}

#[tokio::test]
async fn administration_hidden_in_comments_lists_and_dynamic_sql_is_refused() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    for sql in [
        "/*!50000 GRANT ALL ON *.* TO routekey_qa IDENTIFIED BY 'x' */",
        "/*!CREATE USER routekey_qa*/",
        "CREATE OR REPLACE USER routekey_qa",
        "SET STATEMENT max_statement_time=100 FOR CREATE USER routekey_qa",
        "SET NAMES utf8mb4, PASSWORD FOR root@localhost = PASSWORD('y')",
        "CREATE PROCEDURE routekey_qa() CREATE USER routekey_qa",
        "BACKUP STAGE START",
        "SELECT LOAD_FILE('/etc/hostname')",
    ] {
        assert_eq!(error_code(&mut c, sql).await, 1227, "{sql}");
    }
    for sql in [
        "PREPARE s FROM 'CREATE USER routekey_qa'",
        "EXECUTE IMMEDIATE 'SELECT 1'",
    ] {
        assert_eq!(error_code(&mut c, sql).await, 1235, "{sql}");
    }
    assert_eq!(
        error_code(&mut c, "SELECT COUNT(*) FROM /*!order_shards*/.t_order_0").await,
        1142
    );
    let users: Option<u64> = backend(0)
        .await
        .query_first("SELECT COUNT(*) FROM mysql.user WHERE user = 'routekey_qa'")
        .await
        .unwrap();
    assert_eq!(users, Some(0));
    // A query of comments only is answered as the server does: OK.
    c.query_drop("-- nothing here").await.unwrap();
    c.query_drop("/* nor here */").await.unwrap();
    assert_usable(&mut c).await;
}

#[tokio::test]
async fn a_pooled_connection_killed_right_after_use_is_not_handed_out() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    for _ in 0..5 {
        // The backend connection that served the last statement, killed by a DBA.
        let thread: u64 = c
            .query_first("SELECT @@pseudo_thread_id")
            .await
            .unwrap()
            .unwrap();
        backend(0)
            .await
            .query_drop(format!("KILL {thread}"))
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let v: Option<u64> = c
            .query_first("SELECT 1")
            .await
            .expect("a live connection is used");
        assert_eq!(v, Some(1));
    }
}
