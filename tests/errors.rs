//! Errors reach the client as MySQL errors with a clear code, and the connection stays
//! usable: bad SQL, unknown tables and columns, backend errors, deferred statements, ids
//! that are not numbers, several statements in one query, an unreachable datasource.

mod common;

use std::time::{Duration, Instant};

use common::*;
use mysql_async::prelude::*;

#[tokio::test]
async fn bad_sql_is_a_parse_error_and_the_connection_goes_on() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    for sql in [
        "SELEC 1",
        "SELECT 1 +",
        "SELECT * FROM t_merchant WHERE",
        "UPDATE t_merchant SET",
    ] {
        let (code, state, _) = server_error(c.query_drop(sql).await);
        assert_eq!((code, state.as_str()), (1064, "42000"), "{sql}");
        assert_usable(&mut c).await;
    }
    h.stop().await;
}

/// MariaDB answers a syntax error with 1064 whatever table the statement names; the
/// proxy cannot parse these either, so they are not "valid MySQL it cannot parse yet".
#[tokio::test]
async fn bad_sql_naming_a_sharded_table_is_a_parse_error_too() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let mut direct = backend(0).await;
    exec(&mut direct, "USE orders_ref").await;
    let id = seed().channels["CN_CHANNEL"].new_format_ids[0];
    for sql in [
        "SELECT * FROM t_order WHERE order_id =".to_owned(),
        format!("SELECT * FROM t_order WHERE order_id = {id} AND AND status = 'x'"),
        "INSERT INTO t_order VALUES (".to_owned(),
    ] {
        let want = server_error(direct.query_drop(&sql).await);
        assert_eq!(want.0, 1064, "MariaDB: {sql}");
        let (code, state, msg) = server_error(c.query_drop(&sql).await);
        assert_eq!((code, state.as_str()), (1064, "42000"), "{sql}: {msg}");
        assert_usable(&mut c).await;
    }
    h.stop().await;
}

#[tokio::test]
async fn backend_errors_keep_their_code_sqlstate_and_message() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let s = seed();
    let id = s.channels["CORP_CHANNEL"].new_format_ids[2];
    let shard = expected_shard("CORP_CHANNEL", id);
    let (ds, table, _) = physical(shard);
    let mut direct = backend(ds).await;
    exec(&mut direct, "USE orders").await;
    // (through the proxy, directly) pairs that must fail the same way.
    let cases = [
        (
            "SELECT * FROM t_nope".to_owned(),
            "SELECT * FROM t_nope".to_owned(),
        ),
        (
            format!("SELECT nope FROM t_order WHERE order_id = {id}"),
            format!("SELECT nope FROM {table} WHERE order_id = {id}"),
        ),
        (
            format!("SELECT * FROM t_order WHERE order_id = {id} AND no_such_fn(1) = 1"),
            format!("SELECT * FROM {table} WHERE order_id = {id} AND no_such_fn(1) = 1"),
        ),
        // Not a client character set: refused by the proxy as MariaDB refuses it.
        ("SET NAMES UCS2".to_owned(), "SET NAMES UCS2".to_owned()),
        (
            "SET NAMES 'utf16'".to_owned(),
            "SET NAMES 'utf16'".to_owned(),
        ),
    ];
    for (through, on_backend) in cases {
        let got = server_error(c.query_drop(&through).await);
        let want = server_error(direct.query_drop(&on_backend).await);
        assert_eq!((got.0, &got.1), (want.0, &want.1), "{through}");
        if through.contains("t_nope")
            || through.contains("nope FROM")
            || through.starts_with("SET NAMES")
        {
            assert_eq!(got.2, want.2, "{through}: message");
        }
        assert_usable(&mut c).await;
    }
    // A duplicate key on a shard: 1062 / 23000, nothing changed.
    let before = physical_row(shard, id).await;
    let sql = insert_order_sql(id, "CORP_CHANNEL", "duplicate");
    let (code, state, msg) = server_error(c.query_drop(&sql).await);
    assert_eq!((code, state.as_str()), (1062, "23000"), "{msg}");
    assert!(msg.contains(&id.to_string()), "{msg}");
    assert_eq!(physical_row(shard, id).await, before);
    assert_usable(&mut c).await;
    h.stop().await;
}

#[tokio::test]
async fn deferred_statements_are_refused_with_1235_and_the_connection_goes_on() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let s = seed();
    let eu = s.channels["EU_CHANNEL"].new_format_ids[3];
    let biz = s.channels["BIZ_CHANNEL"].new_format_ids[3];
    let fresh = fresh_new_id(5);
    for sql in [
        // Writes without order ids are refused unless the user has scatter_writes.
        "UPDATE t_order SET status = 'x'".to_owned(),
        "DELETE FROM t_order WHERE status = 'none'".to_owned(),
        // What cannot be merged exactly over several shards.
        format!("SELECT GROUP_CONCAT(note) FROM t_order WHERE order_id IN ({eu}, {biz})"),
        format!("SELECT COUNT(DISTINCT status) FROM t_order WHERE order_id IN ({eu}, {biz})"),
        "SELECT status, STDDEV(amount) FROM t_order GROUP BY status".to_owned(),
        "SELECT order_id, ROW_NUMBER() OVER (ORDER BY amount) FROM t_order".to_owned(),
        format!(
            "SELECT o.order_id, m.name FROM t_order o JOIN t_merchant m ON m.merchant_id = o.user_id WHERE o.order_id = {eu}"
        ),
        format!("SELECT * FROM t_order WHERE order_id = {eu} LOCK IN SHARE MODE"),
        format!("SELECT * FROM t_order WHERE order_id = {eu} + 1"),
        format!(
            "INSERT INTO t_order {ORDER_COLUMNS} VALUES ({fresh} + 0, 'EU_CHANNEL', 'GB', 1, 1, 'x', NULL, NOW())"
        ),
        "XA START 'x'".to_owned(),
    ] {
        let (code, _, msg) = server_error(c.query_drop(&sql).await);
        assert_eq!(code, 1235, "{sql}: {msg}");
        assert!(
            msg.len() > 20,
            "{sql}: a message that says what is refused: {msg}"
        );
        assert_usable(&mut c).await;
    }
    assert_eq!(placement(fresh).await, (vec![], vec![]));
    // Same-shard ORDER BY / LIMIT and unsharded LOCK IN SHARE MODE are served.
    let sql = format!(
        "SELECT item_no FROM t_order_item WHERE order_id = {eu} ORDER BY item_no DESC LIMIT 1"
    );
    let mut r = reference().await;
    assert_same_rows(&rows(&mut c, &sql).await, &rows(&mut r, &sql).await, &sql);
    rows(
        &mut c,
        "SELECT * FROM t_merchant WHERE merchant_id = 1 LOCK IN SHARE MODE",
    )
    .await;
    h.stop().await;
}

#[tokio::test]
async fn an_order_id_that_is_not_a_number_is_refused_with_1292() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    for sql in [
        "SELECT * FROM t_order WHERE order_id = '12abc'",
        "SELECT * FROM t_order WHERE order_id = 'abc'",
        "UPDATE t_order SET status = 'x' WHERE order_id = '1e5x'",
    ] {
        assert_eq!(error_code(&mut c, sql).await, 1292, "{sql}");
        assert_usable(&mut c).await;
    }
    h.stop().await;
}

#[tokio::test]
async fn several_statements_in_one_query_run_one_by_one_and_stop_at_the_first_error() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let guard = Cleanup::default();
    let s = seed();
    let a = s.channels["EU_CHANNEL"].new_format_ids[9];
    let b = s.channels["CORP_CHANNEL"].legacy_ids[9];
    let sql = format!(
        "SELECT order_id FROM t_order WHERE order_id = {a}; SELECT order_id FROM t_order WHERE order_id = {b}; SELECT 3"
    );
    let mut result = c.query_iter(sql).await.unwrap();
    let mut sets: Vec<Vec<u64>> = Vec::new();
    while !result.is_empty() {
        sets.push(result.collect::<u64>().await.unwrap());
    }
    drop(result);
    assert_eq!(sets, vec![vec![a], vec![b], vec![3]]);

    let fresh = guard.add(fresh_new_id(2));
    let sql = format!(
        "SELECT order_id FROM t_order WHERE order_id = {a}; SELEC oops; {}",
        insert_order_sql(fresh, "GLOBAL_CHANNEL", "must not run")
    );
    let mut result = c.query_iter(sql).await.unwrap();
    let first: Vec<u64> = result.collect().await.unwrap();
    assert_eq!(first, [a]);
    let second = result.collect::<u64>().await;
    assert_eq!(server_code(second), 1064);
    drop(result);
    assert_eq!(
        placement(fresh).await,
        (vec![], vec![]),
        "statements after an error do not run"
    );
    assert_usable(&mut c).await;
    drop(guard);
    h.stop().await;
}

#[tokio::test]
async fn several_statements_without_client_multi_statements_are_refused() {
    let h = Harness::start().await;
    let mut raw = RawClient::connect(h.addr).await;
    match raw.query("SELECT 1; SELECT 2").await {
        RawReply::Err(code, _) => assert_eq!(code, 1064),
        other => panic!("expected error 1064, got {other:?}"),
    }
    match raw.query("SELECT 7").await {
        RawReply::Rows(r, _) => assert_eq!(r, [Some("7".to_owned())]),
        other => panic!("expected one row, got {other:?}"),
    }
    h.stop().await;
}

#[tokio::test]
async fn pipelined_commands_are_answered_in_order() {
    let h = Harness::start().await;
    let mut raw = RawClient::connect(h.addr).await;
    let s = seed();
    let ids = [
        s.channels["BIZ_CHANNEL"].new_format_ids[11],
        s.channels["EU_CHANNEL"].legacy_ids[11],
        s.channels["CORP_CHANNEL"].new_format_ids[11],
    ];
    for id in ids {
        raw.send_query(&format!(
            "SELECT CAST(order_id AS CHAR) FROM t_order WHERE order_id = {id}"
        ))
        .await;
    }
    raw.send_query("SELEC broken").await;
    raw.send_query("SELECT 'last'").await;
    for id in ids {
        match raw.reply().await {
            RawReply::Rows(r, _) => assert_eq!(r, [Some(id.to_string())]),
            other => panic!("expected the row of {id}, got {other:?}"),
        }
    }
    assert!(matches!(raw.reply().await, RawReply::Err(1064, _)));
    match raw.reply().await {
        RawReply::Rows(r, _) => assert_eq!(r, [Some("last".to_owned())]),
        other => panic!("expected 'last', got {other:?}"),
    }
    h.stop().await;
}

#[tokio::test]
async fn an_unreachable_datasource_fails_fast_with_1429_and_the_other_keeps_serving() {
    let mut config = config();
    config.datasources[1].address = "127.0.0.1:1".to_owned();
    config.datasources[1].connect_timeout = Duration::from_millis(500);
    config.datasources[1].checkout_timeout = Duration::from_secs(1);
    let h = Harness::start_with(config).await;
    let mut c = h.client().await;
    let mut r = reference().await;
    let s = seed();
    let cn_ds1 = *s.channels["CN_CHANNEL"]
        .new_format_ids
        .iter()
        .find(|id| expected_shard("CN_CHANNEL", **id) >= 10)
        .unwrap();
    let biz = s.channels["BIZ_CHANNEL"].legacy_ids[0];
    let eu = s.channels["EU_CHANNEL"].new_format_ids[0];
    let cn_ds0 = *s.channels["CN_CHANNEL"]
        .new_format_ids
        .iter()
        .find(|id| expected_shard("CN_CHANNEL", **id) < 10)
        .unwrap();
    for round in 0..3 {
        for id in [cn_ds1, biz] {
            let sql = format!("SELECT * FROM t_order WHERE order_id = {id}");
            let started = Instant::now();
            let (code, _, msg) = server_error(c.query_drop(&sql).await);
            assert_eq!(code, 1429, "round {round}: {sql}: {msg}");
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "took {:?}",
                started.elapsed()
            );
        }
        for id in [eu, cn_ds0] {
            let sql = format!("SELECT * FROM t_order WHERE order_id = {id}");
            assert_same_rows(&rows(&mut c, &sql).await, &rows(&mut r, &sql).await, &sql);
        }
        // Writes to ds1 fail the same way and leave nothing anywhere.
        let fresh = fresh_new_id(4);
        let sql = insert_order_sql(fresh, "CORP_CHANNEL", "unreachable");
        assert_eq!(error_code(&mut c, &sql).await, 1429, "{sql}");
        assert_eq!(placement(fresh).await, (vec![], vec![]));
    }
    // A transaction on ds0 survives a failed read on ds1.
    let guard = Cleanup::default();
    let fresh = guard.add(fresh_new_id(5));
    exec(&mut c, "BEGIN").await;
    exec(&mut c, &insert_order_sql(fresh, "EU_CHANNEL", "survives")).await;
    assert_eq!(
        error_code(
            &mut c,
            &format!("SELECT * FROM t_order WHERE order_id = {biz}")
        )
        .await,
        1429
    );
    exec(&mut c, "COMMIT").await;
    assert_eq!(
        placement(fresh).await.0,
        vec![expected_shard("EU_CHANNEL", fresh)]
    );
    // A new client is served too.
    let mut c2 = h.client().await;
    assert_usable(&mut c2).await;
    drop(guard);
    h.stop().await;
}
