//! Transactions through the proxy: autocommit=0, BEGIN ... COMMIT/ROLLBACK, the
//! one-datasource rule for writes, savepoints over datasources, and clients that vanish
//! mid-transaction. Every check of what is committed reads the physical tables directly.

mod common;

use std::time::Duration;

use common::*;
use mysql_async::Conn;
use mysql_async::prelude::*;

/// Committed `status` of order `id` of `channel_name`, read directly on its shard.
async fn committed_status(channel_name: &str, id: u64) -> Option<String> {
    physical_row(expected_shard(channel_name, id), id)
        .await
        .map(|r| show(&r[5]))
}

/// Does the client's session report an open transaction (SERVER_STATUS_IN_TRANS)?
async fn in_trans(c: &mut Conn) -> bool {
    // The status flags of the last OK packet are not public in mysql_async; ask the proxy
    // session through a statement instead (@@in_transaction is MariaDB's session view).
    let v: Option<u8> = c.query_first("SELECT @@in_transaction").await.unwrap();
    v == Some(1)
}

#[tokio::test]
async fn autocommit_off_keeps_writes_private_until_commit_and_rollback_discards_them() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let guard = Cleanup::default();
    let id = guard.add(fresh_new_id(5));
    exec(&mut c, "SET autocommit=0").await;
    exec(&mut c, &insert_order_sql(id, "EU_CHANNEL", "txn")).await;
    // Another session sees nothing yet; this one sees its own row.
    assert_eq!(committed_status("EU_CHANNEL", id).await, None);
    let own: Option<String> = c
        .query_first(format!("SELECT status FROM t_order WHERE order_id = {id}"))
        .await
        .unwrap();
    assert_eq!(own.as_deref(), Some("CREATED"));
    exec(&mut c, "COMMIT").await;
    assert_eq!(
        committed_status("EU_CHANNEL", id).await.as_deref(),
        Some("CREATED")
    );

    exec(
        &mut c,
        &format!("UPDATE t_order SET status = 'PAID' WHERE order_id = {id}"),
    )
    .await;
    assert_eq!(
        committed_status("EU_CHANNEL", id).await.as_deref(),
        Some("CREATED")
    );
    exec(&mut c, "ROLLBACK").await;
    assert_eq!(
        committed_status("EU_CHANNEL", id).await.as_deref(),
        Some("CREATED")
    );
    let own: Option<String> = c
        .query_first(format!("SELECT status FROM t_order WHERE order_id = {id}"))
        .await
        .unwrap();
    assert_eq!(
        own.as_deref(),
        Some("CREATED"),
        "the rolled-back update is gone"
    );

    exec(
        &mut c,
        &format!("UPDATE t_order SET status = 'SHIPPED' WHERE order_id = {id}"),
    )
    .await;
    // SET autocommit=1 commits the open transaction, as in MySQL.
    exec(&mut c, "SET autocommit=1").await;
    assert_eq!(
        committed_status("EU_CHANNEL", id).await.as_deref(),
        Some("SHIPPED")
    );
    exec(
        &mut c,
        &format!("UPDATE t_order SET status = 'DONE' WHERE order_id = {id}"),
    )
    .await;
    assert_eq!(
        committed_status("EU_CHANNEL", id).await.as_deref(),
        Some("DONE")
    );
    drop(guard);
    h.stop().await;
}

#[tokio::test]
async fn begin_then_rollback_leaves_nothing_on_any_shard() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let guard = Cleanup::default();
    let a = guard.add(fresh_new_id_on(1, 1));
    let b = guard.add(fresh_new_id(3));
    let legacy = guard.add(fresh_legacy_id());
    exec(&mut c, "BEGIN").await;
    exec(&mut c, &insert_order_sql(a, "CN_CHANNEL", "rolled back")).await;
    exec(&mut c, &insert_order_sql(b, "BIZ_CHANNEL", "rolled back")).await;
    exec(
        &mut c,
        &insert_order_sql(legacy, "CORP_CHANNEL", "rolled back"),
    )
    .await;
    assert!(in_trans(&mut c).await);
    exec(&mut c, "ROLLBACK").await;
    for id in [a, b, legacy] {
        assert_eq!(placement(id).await, (vec![], vec![]), "{id} left behind");
    }
    // The index row of the legacy order was committed outside the transaction (SPEC §5);
    // it only reads as "not found".
    assert_eq!(index_channel(legacy).await.as_deref(), Some("CORP_CHANNEL"));
    assert!(
        rows(
            &mut c,
            &format!("SELECT * FROM t_order WHERE order_id = {legacy}")
        )
        .await
        .is_empty()
    );

    exec(&mut c, "START TRANSACTION").await;
    exec(&mut c, &insert_order_sql(a, "CN_CHANNEL", "committed")).await;
    exec(&mut c, &insert_order_sql(b, "BIZ_CHANNEL", "committed")).await;
    exec(&mut c, "COMMIT").await;
    assert_eq!(
        committed_status("CN_CHANNEL", a).await.as_deref(),
        Some("CREATED")
    );
    assert_eq!(
        committed_status("BIZ_CHANNEL", b).await.as_deref(),
        Some("CREATED")
    );
    drop(guard);
    h.stop().await;
}

#[tokio::test]
async fn with_refuse_a_write_to_a_second_datasource_is_refused_and_the_transaction_stays_intact() {
    let h = Harness::start_with(refusing(config())).await;
    let mut c = h.client().await;
    let guard = Cleanup::default();
    let eu = guard.add(fresh_new_id(5)); // ds0
    let eu2 = guard.add(fresh_new_id(5)); // ds0
    let biz = guard.add(fresh_new_id(3)); // ds1
    let s = seed();
    exec(&mut c, "BEGIN").await;
    exec(&mut c, &insert_order_sql(eu, "EU_CHANNEL", "first")).await;
    // Reads may touch the other datasource.
    let read_id = s.channels["CORP_CHANNEL"].new_format_ids[0];
    assert_eq!(
        rows(
            &mut c,
            &format!("SELECT * FROM t_order WHERE order_id = {read_id}")
        )
        .await
        .len(),
        1
    );
    let sql = insert_order_sql(biz, "BIZ_CHANNEL", "second ds");
    assert_eq!(error_code(&mut c, &sql).await, 1235, "{sql}");
    let sql = format!("UPDATE t_order SET note = 'x' WHERE order_id = {read_id}");
    assert_eq!(error_code(&mut c, &sql).await, 1235, "{sql}");
    // Still in the transaction, the first write pending and visible to the session.
    assert!(in_trans(&mut c).await);
    assert_eq!(committed_status("EU_CHANNEL", eu).await, None);
    exec(&mut c, &insert_order_sql(eu2, "EU_CHANNEL", "third")).await;
    exec(&mut c, "COMMIT").await;
    assert_eq!(
        committed_status("EU_CHANNEL", eu).await.as_deref(),
        Some("CREATED")
    );
    assert_eq!(
        committed_status("EU_CHANNEL", eu2).await.as_deref(),
        Some("CREATED")
    );
    assert_eq!(placement(biz).await, (vec![], vec![]));
    // After the transaction the other datasource takes writes again.
    exec(&mut c, &insert_order_sql(biz, "BIZ_CHANNEL", "after")).await;
    assert_eq!(
        committed_status("BIZ_CHANNEL", biz).await.as_deref(),
        Some("CREATED")
    );
    drop(guard);
    h.stop().await;
}

#[tokio::test]
async fn savepoints_reach_a_datasource_that_joins_the_transaction_later() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let guard = Cleanup::default();
    let s = seed();
    let eu_read = s.channels["EU_CHANNEL"].new_format_ids[1];
    let a = guard.add(fresh_new_id(3)); // ds1
    let b = guard.add(fresh_new_id(4)); // ds1
    let d = guard.add(fresh_new_id(4)); // ds1
    exec(&mut c, "BEGIN").await;
    rows(
        &mut c,
        &format!("SELECT * FROM t_order WHERE order_id = {eu_read}"),
    )
    .await; // ds0 joins
    exec(&mut c, "SAVEPOINT s1").await;
    exec(&mut c, &insert_order_sql(a, "BIZ_CHANNEL", "after s1")).await; // ds1 joins: s1 replayed
    exec(&mut c, "SAVEPOINT s2").await;
    exec(&mut c, &insert_order_sql(b, "CORP_CHANNEL", "after s2")).await;
    exec(&mut c, "ROLLBACK TO SAVEPOINT s2").await;
    assert!(
        rows(
            &mut c,
            &format!("SELECT * FROM t_order WHERE order_id = {b}")
        )
        .await
        .is_empty()
    );
    assert_eq!(
        rows(
            &mut c,
            &format!("SELECT * FROM t_order WHERE order_id = {a}")
        )
        .await
        .len(),
        1
    );
    exec(&mut c, "ROLLBACK TO s1").await;
    assert!(
        rows(
            &mut c,
            &format!("SELECT * FROM t_order WHERE order_id = {a}")
        )
        .await
        .is_empty()
    );
    exec(&mut c, &insert_order_sql(d, "CORP_CHANNEL", "kept")).await;
    exec(&mut c, "RELEASE SAVEPOINT s1").await;
    assert_eq!(error_code(&mut c, "ROLLBACK TO s1").await, 1305);
    exec(&mut c, "COMMIT").await;
    assert_eq!(committed_status("BIZ_CHANNEL", a).await, None);
    assert_eq!(committed_status("CORP_CHANNEL", b).await, None);
    assert_eq!(
        committed_status("CORP_CHANNEL", d).await.as_deref(),
        Some("CREATED")
    );
    drop(guard);
    h.stop().await;
}

/// A client opens a transaction, updates `id` and vanishes (`quit`: COM_QUIT, else the
/// socket just closes). Nothing of it may stay: no commit, no lock.
async fn vanish_mid_transaction(quit: bool) {
    let h = Harness::start().await;
    let guard = Cleanup::default();
    let id = guard.add(fresh_new_id_on(1, 1));
    let mut setup = h.client().await;
    exec(&mut setup, &insert_order_sql(id, "CN_CHANNEL", "before")).await;

    let mut c = h.client().await;
    exec(&mut c, "BEGIN").await;
    exec(
        &mut c,
        &format!("UPDATE t_order SET status = 'LOST', note = 'lost' WHERE order_id = {id}"),
    )
    .await;
    if quit {
        c.disconnect().await.unwrap();
    } else {
        drop(c);
    }

    let mut other = h.client().await;
    let update = format!("UPDATE t_order SET note = 'second client' WHERE order_id = {id}");
    tokio::time::timeout(Duration::from_secs(10), other.query_drop(update))
        .await
        .expect("the row is still locked by the vanished client's transaction")
        .unwrap();
    let row = physical_row(expected_shard("CN_CHANNEL", id), id)
        .await
        .unwrap();
    assert_eq!(
        (show(&row[5]), show(&row[6])),
        ("CREATED".into(), "second client".into())
    );
    drop(guard);
    h.stop().await;
}

#[tokio::test]
async fn a_client_that_quits_mid_transaction_leaves_nothing_committed_and_no_lock() {
    vanish_mid_transaction(true).await;
}

#[tokio::test]
async fn a_client_whose_socket_closes_mid_transaction_leaves_nothing_committed_and_no_lock() {
    vanish_mid_transaction(false).await;
}

#[tokio::test]
async fn a_failed_statement_inside_a_transaction_keeps_the_earlier_writes() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let guard = Cleanup::default();
    let id = guard.add(fresh_new_id(2));
    exec(&mut c, "SET autocommit = 0").await;
    exec(&mut c, &insert_order_sql(id, "GLOBAL_CHANNEL", "kept")).await;
    // Duplicate key: the backend's error, the transaction goes on.
    let (code, state, _) = server_error(
        c.query_drop(insert_order_sql(id, "GLOBAL_CHANNEL", "dup"))
            .await,
    );
    assert_eq!((code, state.as_str()), (1062, "23000"));
    assert_eq!(
        error_code(&mut c, "SELECT nope FROM t_order WHERE order_id = 1").await,
        1054
    );
    exec(&mut c, "COMMIT").await;
    let row = physical_row(expected_shard("GLOBAL_CHANNEL", id), id)
        .await
        .unwrap();
    assert_eq!(show(&row[6]), "kept");
    exec(&mut c, "SET autocommit = 1").await;
    drop(guard);
    h.stop().await;
}

/// IN_TRANS and AUTOCOMMIT of a reply.
fn txn_flags(reply: &RawReply) -> (bool, bool) {
    let status = match reply {
        RawReply::Ok(s) | RawReply::Rows(_, s) => *s,
        RawReply::Err(code, msg) => panic!("error {code}: {msg}"),
    };
    (status & 0x0001 != 0, status & 0x0002 != 0)
}

#[tokio::test]
async fn status_flags_report_the_clients_transaction_as_mariadb_does() {
    let h = Harness::start().await;
    let s = seed();
    let id = s.channels["BIZ_CHANNEL"].new_format_ids[17];
    let read = format!("SELECT CAST(order_id AS CHAR) FROM t_order WHERE order_id = {id}");
    // A no-op UPDATE: it opens a transaction but changes nothing.
    let write = format!("UPDATE t_order SET status = status WHERE order_id = {id}");
    let script = [
        "SET autocommit=0",
        &read,
        "COMMIT",
        &write,
        "ROLLBACK",
        "SET autocommit=1",
        &read,
        &write,
        "BEGIN",
        &read,
        "COMMIT",
        "START TRANSACTION",
        &write,
        "ROLLBACK",
    ];
    let mut proxy = RawClient::connect(h.addr).await;
    let direct_addr = format!("127.0.0.1:{}", sandbox_port(0)).parse().unwrap();
    let mut direct = RawClient::connect_as(direct_addr, "root", "", "orders_ref").await;
    let mut seen = Vec::new();
    for (i, sql) in script.iter().enumerate() {
        let got = txn_flags(&proxy.query(sql).await);
        let want = txn_flags(&direct.query(sql).await);
        assert_eq!(
            got, want,
            "step {i}: {sql}: (in transaction, autocommit) differ from MariaDB"
        );
        seen.push(want);
    }
    assert!(
        seen.contains(&(true, false))
            && seen.contains(&(false, true))
            && seen.contains(&(true, true)),
        "{seen:?}"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_failed_write_with_autocommit_off_is_rolled_back_with_its_transaction() {
    let h = Harness::start().await;
    let id = seed().channels["EU_CHANNEL"].new_format_ids[5];
    let mut c = h.client().await;
    exec(&mut c, "SET autocommit = 0").await;
    // A duplicate key: the statement fails, but its transaction (and its lock on the key)
    // stays open on the server until the client ends it.
    let r = c
        .query_drop(insert_order_sql(id, "EU_CHANNEL", "dup"))
        .await;
    assert_eq!(server_code(r), 1062);
    let in_trans: Option<u64> = c.query_first("SELECT @@in_transaction").await.unwrap();
    assert_eq!(in_trans, Some(1), "the client sees its transaction");
    exec(&mut c, "ROLLBACK").await;
    // Nothing is left holding the row.
    let (ds, table, _) = physical(expected_shard("EU_CHANNEL", id));
    let mut direct = backend(ds).await;
    direct
        .query_drop("SET SESSION innodb_lock_wait_timeout = 2")
        .await
        .unwrap();
    direct
        .query_drop(format!(
            "UPDATE {table} SET status = status WHERE order_id = {id}"
        ))
        .await
        .expect("no lock left behind");
}

/// A session pinned before `BEGIN` (state the proxy cannot carry keeps its connections)
/// still runs the transaction on them: `ROLLBACK` undoes its writes, savepoints work, and
/// `COMMIT` keeps them. Before the fix, held connections never got `BEGIN`, so every write
/// committed at once and `ROLLBACK` undid nothing.
#[tokio::test]
async fn a_transaction_on_connections_pinned_before_begin_rolls_back() {
    let h = Harness::start().await;
    let guard = Cleanup::default();
    for pin in [
        "CREATE TEMPORARY TABLE pin_tmp (x INT)",
        "SELECT GET_LOCK('routekey_pin_test', 5)",
        "LOCK TABLES t_order READ",
    ] {
        let mut c = h.client().await;
        let eu = guard.add(fresh_new_id(5)); // ds0
        let biz = guard.add(fresh_new_id(3)); // ds1
        exec(&mut c, &insert_order_sql(eu, "EU_CHANNEL", "pin")).await;
        exec(&mut c, &insert_order_sql(biz, "BIZ_CHANNEL", "pin")).await;
        exec(&mut c, pin).await;
        if pin.starts_with("LOCK") {
            exec(&mut c, "UNLOCK TABLES").await;
        }
        // Both datasources' connections are held now.
        for id in [eu, biz] {
            rows(
                &mut c,
                &format!("SELECT * FROM t_order WHERE order_id = {id}"),
            )
            .await;
        }

        exec(&mut c, "BEGIN").await;
        exec(
            &mut c,
            &format!("UPDATE t_order SET status = 'PAID' WHERE order_id = {eu}"),
        )
        .await;
        assert!(in_trans(&mut c).await, "{pin}");
        assert_eq!(
            committed_status("EU_CHANNEL", eu).await.as_deref(),
            Some("CREATED"),
            "{pin}: nothing committed before COMMIT"
        );
        exec(&mut c, "ROLLBACK").await;
        assert_eq!(
            committed_status("EU_CHANNEL", eu).await.as_deref(),
            Some("CREATED"),
            "{pin}: ROLLBACK undid the update"
        );

        exec(&mut c, "BEGIN").await;
        exec(&mut c, "SAVEPOINT s1").await;
        exec(
            &mut c,
            &format!("UPDATE t_order SET status = 'PAID' WHERE order_id = {biz}"),
        )
        .await;
        exec(&mut c, "ROLLBACK TO SAVEPOINT s1").await;
        exec(
            &mut c,
            &format!("UPDATE t_order SET status = 'SHIPPED' WHERE order_id = {biz}"),
        )
        .await;
        assert_eq!(
            committed_status("BIZ_CHANNEL", biz).await.as_deref(),
            Some("CREATED"),
            "{pin}"
        );
        exec(&mut c, "COMMIT").await;
        assert_eq!(
            committed_status("BIZ_CHANNEL", biz).await.as_deref(),
            Some("SHIPPED"),
            "{pin}: COMMIT kept what followed the savepoint"
        );

        // Outside a transaction again, writes commit at once.
        exec(
            &mut c,
            &format!("UPDATE t_order SET status = 'DONE' WHERE order_id = {eu}"),
        )
        .await;
        assert_eq!(
            committed_status("EU_CHANNEL", eu).await.as_deref(),
            Some("DONE"),
            "{pin}"
        );
        if pin.contains("GET_LOCK") {
            exec(&mut c, "SELECT RELEASE_LOCK('routekey_pin_test')").await;
        }
    }
    drop(guard);
    h.stop().await;
}

/// `DROP TEMPORARY TABLE` inside a transaction does not commit it (MySQL: the TEMPORARY
/// keyword means no implicit commit); before, the proxy took it for DDL and committed the
/// open transaction first (found by an attack on the pinned-session fix).
#[tokio::test]
async fn dropping_a_temporary_table_inside_a_transaction_commits_nothing() {
    let h = Harness::start().await;
    let guard = Cleanup::default();
    let mut c = h.client().await;
    let eu = guard.add(fresh_new_id(5));
    exec(&mut c, &insert_order_sql(eu, "EU_CHANNEL", "tmp")).await;
    exec(&mut c, "CREATE TEMPORARY TABLE drop_tmp (x INT)").await;
    exec(&mut c, "BEGIN").await;
    exec(
        &mut c,
        &format!("UPDATE t_order SET status = 'PAID' WHERE order_id = {eu}"),
    )
    .await;
    exec(&mut c, "DROP TEMPORARY TABLE drop_tmp").await;
    assert!(in_trans(&mut c).await, "the transaction is still open");
    assert_eq!(
        committed_status("EU_CHANNEL", eu).await.as_deref(),
        Some("CREATED")
    );
    exec(&mut c, "ROLLBACK").await;
    assert_eq!(
        committed_status("EU_CHANNEL", eu).await.as_deref(),
        Some("CREATED")
    );
    assert_eq!(error_code(&mut c, "SELECT * FROM drop_tmp").await, 1146);
    drop(guard);
    h.stop().await;
}

/// A connection a pinned session holds on a datasource the transaction never used takes no
/// part in its COMMIT: when its backend thread was killed, COMMIT still answers OK for the
/// writes it committed (before, it got the COMMIT first, failed with 1429, and the writer
/// committed behind that error).
#[tokio::test]
async fn commit_ignores_a_held_connection_the_transaction_never_used() {
    let h = Harness::start().await;
    let guard = Cleanup::default();
    let mut c = h.client().await;
    let eu = guard.add(fresh_new_id(5)); // ds0
    let biz = guard.add(fresh_new_id(3)); // ds1
    exec(&mut c, &insert_order_sql(eu, "EU_CHANNEL", "commit")).await;
    exec(&mut c, &insert_order_sql(biz, "BIZ_CHANNEL", "commit")).await;
    exec(&mut c, "CREATE TEMPORARY TABLE commit_pin (x INT)").await;
    let ds1_thread: u64 = c
        .query_first(format!(
            "SELECT @@pseudo_thread_id FROM t_order WHERE order_id = {biz}"
        ))
        .await
        .unwrap()
        .unwrap();
    exec(&mut c, "BEGIN").await;
    exec(
        &mut c,
        &format!("UPDATE t_order SET status = 'PAID' WHERE order_id = {eu}"),
    )
    .await;
    backend(1)
        .await
        .query_drop(format!("KILL {ds1_thread}"))
        .await
        .unwrap();
    exec(&mut c, "COMMIT").await;
    assert_eq!(
        committed_status("EU_CHANNEL", eu).await.as_deref(),
        Some("PAID")
    );
    drop(guard);
    h.stop().await;
}
