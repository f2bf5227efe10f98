//! Session statements behave as a MySQL client expects, although a client's statements run
//! on whichever pooled backend connection is free: SET NAMES / sql_mode / time_zone follow
//! the client, SHOW WARNINGS and ROW_COUNT() answer for its previous statement, the
//! identity functions answer for the proxy session, USE switches and comes back, and SHOW /
//! DESCRIBE speak of logical tables.

mod common;

use common::*;
use mysql_async::Conn;
use mysql_async::prelude::*;

/// What MariaDB itself reports as @@sql_mode after `SET sql_mode = '<mode>'`.
async fn normalized_sql_mode(mode: &str) -> String {
    let mut direct = backend(0).await;
    exec(&mut direct, &format!("SET sql_mode = '{mode}'")).await;
    direct
        .query_first("SELECT @@sql_mode")
        .await
        .unwrap()
        .unwrap()
}

#[tokio::test]
async fn session_settings_follow_each_client_across_pooled_connections() {
    let h = Harness::start().await;
    let flags = [
        "STRICT_TRANS_TABLES",
        "NO_ZERO_DATE",
        "ERROR_FOR_DIVISION_BY_ZERO",
        "NO_ENGINE_SUBSTITUTION",
        "ONLY_FULL_GROUP_BY",
        "NO_AUTO_VALUE_ON_ZERO",
    ];
    let mut tasks = Vec::new();
    for client in 0..12usize {
        let mode: Vec<&str> = flags
            .iter()
            .enumerate()
            .filter(|(bit, _)| client & (1 << bit) != 0 || *bit == client % flags.len())
            .map(|(_, f)| *f)
            .collect();
        let mode = mode.join(",");
        let want_mode = normalized_sql_mode(&mode).await;
        let charset = if client % 2 == 0 { "latin1" } else { "utf8mb4" };
        let tz = format!("+{:02}:00", client % 12);
        let opts = h.opts();
        tasks.push(tokio::spawn(async move {
            let mut c = Conn::new(opts).await.unwrap();
            exec(&mut c, &format!("SET NAMES {charset}")).await;
            exec(&mut c, &format!("SET sql_mode = '{mode}', time_zone = '{tz}'")).await;
            let want = (want_mode.clone(), tz.clone(), charset.to_owned(), charset.to_owned());
            for i in 0..40 {
                let ds = (i + client) % 2;
                let id = order_on(ds, i * 7 + client);
                let sql = format!(
                    "SELECT order_id, @@sql_mode, @@time_zone, @@character_set_client, @@character_set_results FROM t_order WHERE order_id = {id}"
                );
                let got: Option<(u64, String, String, String, String)> = c.query_first(&sql).await.unwrap();
                let (got_id, m, t, cs, cr) = got.unwrap_or_else(|| panic!("{sql}: no row"));
                assert_eq!(got_id, id);
                assert_eq!((m, t, cs, cr), want, "client {client}, statement {i} on ds{ds}");
                if i % 5 == 0 {
                    let got: Option<(String, String, String)> = c
                        .query_first("SELECT @@sql_mode, @@time_zone, @@character_set_connection")
                        .await
                        .unwrap();
                    assert_eq!(got, Some((want.0.clone(), want.1.clone(), charset.to_owned())), "client {client}");
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    h.stop().await;
}

#[tokio::test]
async fn set_names_changes_how_text_is_encoded_for_the_client() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let guard = Cleanup::default();
    let id = guard.add(fresh_new_id_on(1, 1));
    exec(&mut c, &insert_order_sql(id, "CN_CHANNEL", "caf\u{e9}")).await;
    let sql = format!("SELECT note FROM t_order WHERE order_id = {id}");
    let utf8: Vec<Values> = rows(&mut c, &sql).await;
    assert_eq!(utf8[0][0], Value::Bytes("caf\u{e9}".as_bytes().to_vec()));
    exec(&mut c, "SET NAMES latin1").await;
    let latin1 = rows(&mut c, &sql).await;
    assert_eq!(
        latin1[0][0],
        Value::Bytes(b"caf\xe9".to_vec()),
        "latin1 bytes after SET NAMES latin1"
    );
    exec(&mut c, "SET NAMES utf8mb4").await;
    assert_eq!(rows(&mut c, &sql).await, utf8);
    drop(guard);
    h.stop().await;
}

#[tokio::test]
async fn show_warnings_answers_for_the_previous_statement() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let id = order_on(1, 3);
    let (ds, table, _) = physical(shard_of_seeded(id));
    let mut direct = backend(ds).await;
    let select = "SELECT order_id, CAST('12x' AS UNSIGNED), CAST('y' AS SIGNED) FROM {t} WHERE order_id = {id}";
    rows(
        &mut c,
        &select
            .replace("{t}", "t_order")
            .replace("{id}", &id.to_string()),
    )
    .await;
    let got = rows(&mut c, "SHOW WARNINGS").await;
    rows(
        &mut direct,
        &select
            .replace("{t}", &table)
            .replace("{id}", &id.to_string()),
    )
    .await;
    let want = rows(&mut direct, "SHOW WARNINGS").await;
    assert_eq!(want.len(), 2);
    assert_same_rows(
        &got,
        &want,
        "SHOW WARNINGS after a sharded SELECT with warnings",
    );
    let count: Option<u64> = c.query_first("SHOW COUNT(*) WARNINGS").await.unwrap();
    assert_eq!(count, Some(2), "SHOW statements do not reset the warnings");
    // A statement without warnings clears them.
    rows(
        &mut c,
        &format!("SELECT order_id FROM t_order WHERE order_id = {id}"),
    )
    .await;
    assert!(rows(&mut c, "SHOW WARNINGS").await.is_empty());
    // Unsharded statements too.
    rows(&mut c, "SELECT CAST('3z' AS SIGNED)").await;
    let got = rows(&mut c, "SHOW WARNINGS").await;
    rows(&mut direct, "SELECT CAST('3z' AS SIGNED)").await;
    assert_same_rows(
        &got,
        &rows(&mut direct, "SHOW WARNINGS").await,
        "unsharded warnings",
    );
    h.stop().await;
}

/// The shard of a seeded order (from its channel in the reference).
fn shard_of_seeded(id: u64) -> u32 {
    let s = seed();
    for (name, ch) in &s.channels {
        if ch.new_format_ids.contains(&id) || ch.legacy_ids.contains(&id) {
            return expected_shard(name, id);
        }
    }
    panic!("{id} is not seeded")
}

#[tokio::test]
async fn row_count_answers_for_the_previous_statement() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let guard = Cleanup::default();
    let id = guard.add(fresh_new_id(4));
    exec(&mut c, &insert_order_sql(id, "CORP_CHANNEL", "x")).await;
    exec(
        &mut c,
        &format!("UPDATE t_order SET note = 'y' WHERE order_id = {id}"),
    )
    .await;
    let n: Option<i64> = c.query_first("SELECT ROW_COUNT()").await.unwrap();
    assert_eq!(n, Some(1));
    let n: Option<i64> = c.query_first("SELECT ROW_COUNT()").await.unwrap();
    assert_eq!(n, Some(-1), "after a SELECT, ROW_COUNT() is -1");
    exec(
        &mut c,
        &format!("UPDATE t_order SET note = 'y' WHERE order_id = {id}"),
    )
    .await;
    let n: Option<i64> = c.query_first("SELECT ROW_COUNT()").await.unwrap();
    assert_eq!(n, Some(0), "an UPDATE that changes nothing");
    drop(guard);
    h.stop().await;
}

#[tokio::test]
async fn last_insert_id_is_the_clients_own_across_shards() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let mut other = h.client().await;
    let guard = Cleanup::default();
    let id = guard.add(fresh_new_id(3)); // ds1
    let li: Option<u64> = c.query_first("SELECT LAST_INSERT_ID()").await.unwrap();
    assert_eq!(li, Some(0));
    exec(&mut c, &insert_order_sql(id, "BIZ_CHANNEL", "x")).await;
    exec(
        &mut c,
        &format!(
            "UPDATE t_order SET user_id = LAST_INSERT_ID(user_id + 1000) WHERE order_id = {id}"
        ),
    )
    .await;
    assert_eq!(c.last_insert_id(), Some(1007), "OK packet's last insert id");
    // Statements of another client in between, and of this one on other shards.
    exec(
        &mut other,
        &format!("UPDATE t_order SET user_id = LAST_INSERT_ID(5) WHERE order_id = {id}"),
    )
    .await;
    for i in 0..6 {
        rows(
            &mut c,
            &format!(
                "SELECT * FROM t_order WHERE order_id = {}",
                order_on(i % 2, i)
            ),
        )
        .await;
    }
    let li: Option<u64> = c.query_first("SELECT LAST_INSERT_ID()").await.unwrap();
    assert_eq!(li, Some(1007));
    let li: Option<u64> = c.query_first("SELECT LAST_INSERT_ID() + 1").await.unwrap();
    assert_eq!(li, Some(1008));
    let ds0 = order_on(0, 1);
    let got: Option<(u64, u64)> = c
        .query_first(format!(
            "SELECT order_id, LAST_INSERT_ID() FROM t_order WHERE order_id = {ds0}"
        ))
        .await
        .unwrap();
    assert_eq!(
        got,
        Some((ds0, 1007)),
        "inside a statement on another shard"
    );
    let li: Option<u64> = other.query_first("SELECT LAST_INSERT_ID()").await.unwrap();
    assert_eq!(li, Some(5));
    drop(guard);
    h.stop().await;
}

#[tokio::test]
async fn last_insert_id_set_by_a_select_is_remembered() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let v: Option<u64> = c.query_first("SELECT LAST_INSERT_ID(42)").await.unwrap();
    assert_eq!(v, Some(42));
    for i in 0..4 {
        rows(
            &mut c,
            &format!(
                "SELECT * FROM t_order WHERE order_id = {}",
                order_on(i % 2, i)
            ),
        )
        .await;
    }
    let li: Option<u64> = c.query_first("SELECT LAST_INSERT_ID()").await.unwrap();
    assert_eq!(
        li,
        Some(42),
        "MariaDB: SELECT LAST_INSERT_ID(42) sets the session's value"
    );
    h.stop().await;
}

#[tokio::test]
async fn connection_id_and_database_answer_for_the_proxy_session() {
    let h = Harness::start().await;
    let mut a = h.client().await;
    let mut b = h.client().await;
    assert_ne!(a.id(), b.id());
    for c in [&mut a, &mut b] {
        let want = c.id() as u64;
        let got: Option<(u64, String)> = c
            .query_first("SELECT CONNECTION_ID(), DATABASE()")
            .await
            .unwrap();
        assert_eq!(got, Some((want, "orders".to_owned())));
        for ds in 0..2 {
            let id = order_on(ds, 4);
            let got: Option<(u64, u64, String)> = c
                .query_first(format!("SELECT order_id, CONNECTION_ID(), DATABASE() FROM t_order WHERE order_id = {id}"))
                .await
                .unwrap();
            assert_eq!(got, Some((id, want, "orders".to_owned())), "on ds{ds}");
        }
    }
    h.stop().await;
}

#[tokio::test]
async fn use_another_database_and_back() {
    // Another database is reachable only when the user is given it (SPEC §8a).
    let mut config = config();
    config.users[0].databases = vec!["orders_ref".to_owned(), "no_such_database".to_owned()];
    let h = Harness::start_with(config).await;
    let mut c = h.client().await;
    let mut r = reference().await;
    let id = order_on(1, 9);
    exec(&mut c, "USE orders_ref").await;
    let db: Option<String> = c.query_first("SELECT DATABASE()").await.unwrap();
    assert_eq!(db.as_deref(), Some("orders_ref"));
    // Here t_order is the reference's plain table, not the sharded one.
    let got = rows(&mut c, "SELECT COUNT(*), SUM(amount) FROM t_order").await;
    assert_same_rows(
        &got,
        &rows(&mut r, "SELECT COUNT(*), SUM(amount) FROM t_order").await,
        "orders_ref.t_order",
    );
    // The logical database stays reachable by its qualified name.
    let sql = format!("SELECT * FROM orders.t_order WHERE order_id = {id}");
    let want = rows(
        &mut r,
        &format!("SELECT * FROM t_order WHERE order_id = {id}"),
    )
    .await;
    assert_same_rows(&rows(&mut c, &sql).await, &want, &sql);
    assert_eq!(error_code(&mut c, "USE no_such_database").await, 1049);
    let db: Option<String> = c.query_first("SELECT DATABASE()").await.unwrap();
    assert_eq!(db.as_deref(), Some("orders_ref"));
    exec(&mut c, "USE orders").await;
    let db: Option<String> = c.query_first("SELECT DATABASE()").await.unwrap();
    assert_eq!(db.as_deref(), Some("orders"));
    let sql = format!("SELECT * FROM t_order WHERE order_id = {id}");
    assert_same_rows(&rows(&mut c, &sql).await, &want, &sql);
    // Back in the logical database, t_order is every shard's (tests beside this one only
    // add rows: at least the seeded 1500).
    let n: Option<u64> = c.query_first("SELECT COUNT(*) FROM t_order").await.unwrap();
    assert!(n.unwrap() >= 1500, "{n:?}");
    h.stop().await;
}

#[tokio::test]
async fn show_tables_lists_logical_tables_only() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let cols = columns(&mut c, "SHOW TABLES").await;
    assert_eq!(cols.len(), 1);
    assert_eq!(cols[0].0, "Tables_in_orders");
    let names: Vec<String> = c.query("SHOW TABLES").await.unwrap();
    for t in ["t_order", "t_order_item", "t_merchant"] {
        assert!(names.iter().any(|n| n == t), "{t} missing from {names:?}");
    }
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with("t_order_") && n != "t_order_item"),
        "physical tables listed: {names:?}"
    );
    let mut like: Vec<String> = c.query("SHOW TABLES LIKE 't_order%'").await.unwrap();
    like.sort();
    assert_eq!(like, ["t_order", "t_order_item"]);
    h.stop().await;
}

#[tokio::test]
async fn describe_and_show_create_table_use_the_logical_name() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    for (logical, index) in [("t_order", 1), ("t_order_item", 2)] {
        let (ds, order_t, item_t) = physical(0);
        let phys = if index == 1 { order_t } else { item_t };
        let mut direct = backend(ds).await;
        let want = rows(&mut direct, &format!("DESCRIBE {phys}")).await;
        for sql in [
            format!("DESCRIBE {logical}"),
            format!("DESC orders.{logical}"),
            format!("SHOW COLUMNS FROM {logical}"),
        ] {
            assert_same_rows(&rows(&mut c, &sql).await, &want, &sql);
        }
        let got = rows(&mut c, &format!("SHOW CREATE TABLE {logical}")).await;
        let direct_create = rows(&mut direct, &format!("SHOW CREATE TABLE {phys}")).await;
        let phys_name = phys.split('.').nth(1).unwrap();
        let want_text =
            show(&direct_create[0][1]).replace(&format!("`{phys_name}`"), &format!("`{logical}`"));
        assert_eq!(got.len(), 1);
        assert_eq!(show(&got[0][0]), logical);
        assert_eq!(show(&got[0][1]), want_text);
        assert!(!show(&got[0][1]).contains(phys_name));
    }
    h.stop().await;
}

#[tokio::test]
async fn reset_connection_really_resets_the_session() {
    let h = Harness::start().await;
    let mut fresh = h.client().await;
    let default_mode: Option<String> = fresh.query_first("SELECT @@sql_mode").await.unwrap();
    let mut c = h.client().await;
    let guard = Cleanup::default();
    let id = guard.add(fresh_new_id(5));
    exec(&mut c, &insert_order_sql(id, "EU_CHANNEL", "x")).await;
    exec(
        &mut c,
        "SET sql_mode = 'NO_ZERO_DATE', autocommit = 0, @user_var = 3",
    )
    .await;
    exec(
        &mut c,
        &format!("UPDATE t_order SET user_id = LAST_INSERT_ID(9) WHERE order_id = {id}"),
    )
    .await;
    assert_eq!(c.last_insert_id(), Some(9));
    assert!(c.reset().await.unwrap(), "COM_RESET_CONNECTION served");
    let got: Option<(String, u8, u64, Option<u64>)> = c
        .query_first("SELECT @@sql_mode, @@autocommit, LAST_INSERT_ID(), @user_var")
        .await
        .unwrap();
    assert_eq!(got, Some((default_mode.unwrap(), 1, 0, None)));
    // The reset rolled back the open transaction.
    assert_eq!(
        show(
            &physical_row(expected_shard("EU_CHANNEL", id), id)
                .await
                .unwrap()[3]
        ),
        "7"
    );
    let id = order_on(1, 2);
    let got: Option<String> = c
        .query_first(format!(
            "SELECT @@sql_mode FROM t_order WHERE order_id = {id}"
        ))
        .await
        .unwrap();
    assert_ne!(got.as_deref(), Some("NO_ZERO_DATE"));
    c.ping().await.unwrap();
    drop(guard);
    h.stop().await;
}

#[tokio::test]
async fn user_variables_and_temporary_tables_stay_with_the_client() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    exec(&mut c, "SET @a = 5, @b = 'text'").await;
    let v: Option<u64> = c.query_first("SELECT @c := 7").await.unwrap();
    assert_eq!(v, Some(7));
    exec(&mut c, "CREATE TEMPORARY TABLE tmp_session_probe (a INT)").await;
    exec(&mut c, "INSERT INTO tmp_session_probe VALUES (1), (2)").await;
    for i in 0..6 {
        rows(
            &mut c,
            &format!(
                "SELECT * FROM t_order WHERE order_id = {}",
                order_on(i % 2, i)
            ),
        )
        .await;
    }
    let got: Option<(u64, String, u64)> = c.query_first("SELECT @a, @b, @c").await.unwrap();
    assert_eq!(got, Some((5, "text".to_owned(), 7)));
    let n: Option<u64> = c
        .query_first("SELECT SUM(a) FROM tmp_session_probe")
        .await
        .unwrap();
    assert_eq!(n, Some(3));
    // Another client sees neither.
    let mut other = h.client().await;
    let got: Option<Option<u64>> = other.query_first("SELECT @a").await.unwrap();
    assert_eq!(got, Some(None));
    assert_eq!(
        error_code(&mut other, "SELECT * FROM tmp_session_probe").await,
        1146
    );
    h.stop().await;
}

#[tokio::test]
async fn warnings_of_a_statement_over_several_shards_are_all_reported() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let mut r = reference().await;
    let ids = [order_on(0, 21), order_on(1, 22), order_on(1, 23)];
    let sql = format!(
        "SELECT order_id, CAST(CONCAT(order_id, 'x') AS UNSIGNED) FROM t_order WHERE order_id IN ({}, {}, {})",
        ids[0], ids[1], ids[2]
    );
    let got = sorted_rows(&mut c, &sql).await;
    let proxy_count = c.get_warnings();
    let got_warnings = sorted_rows(&mut c, "SHOW WARNINGS").await;
    assert_same_rows(&got, &sorted_rows(&mut r, &sql).await, &sql);
    let want_warnings = sorted_rows(&mut r, "SHOW WARNINGS").await;
    assert_eq!(want_warnings.len(), 3);
    assert_eq!(proxy_count, 3, "warning count summed over the shards");
    assert_same_rows(
        &got_warnings,
        &want_warnings,
        "SHOW WARNINGS after a statement on 3 shards",
    );
    h.stop().await;
}

#[tokio::test]
async fn a_new_client_inherits_nothing_from_earlier_clients() {
    let h = Harness::start().await;
    let probe = |id: u64| {
        format!(
            "SELECT @@sql_mode, @@time_zone, @@character_set_results, @@autocommit, @@tx_isolation, @leak FROM t_order WHERE order_id = {id}"
        )
    };
    let mut before = h.client().await;
    let mut want = Vec::new();
    for ds in 0..2 {
        want.push(rows(&mut before, &probe(order_on(ds, 0))).await);
    }
    drop(before);
    // Earlier clients change everything they can, on connections of both servers.
    for round in 0..4 {
        let mut c = h.client().await;
        exec(&mut c, "SET NAMES latin1").await;
        exec(
            &mut c,
            "SET sql_mode = 'NO_ZERO_DATE', time_zone = '+05:00', autocommit = 0",
        )
        .await;
        exec(
            &mut c,
            "SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE",
        )
        .await;
        exec(&mut c, "SET @leak = 'leaked'").await;
        for i in 0..6 {
            rows(
                &mut c,
                &format!(
                    "SELECT * FROM t_order WHERE order_id = {}",
                    order_on(i % 2, i + round)
                ),
            )
            .await;
        }
        if round % 2 == 0 {
            c.disconnect().await.unwrap();
        } else {
            drop(c);
        }
    }
    for _ in 0..4 {
        let mut c = h.client().await;
        for i in 0..10 {
            let ds = i % 2;
            let got = rows(&mut c, &probe(order_on(ds, i))).await;
            assert_eq!(
                show_rows(&got),
                show_rows(&want[ds]),
                "statement {i} on ds{ds}"
            );
        }
    }
    h.stop().await;
}

/// Found by attacking the pool: `SET @@session . sql_mode = ...` (spaces around the dot,
/// which MariaDB accepts) was read as a variable named `session`; the server applied it,
/// the proxy's read-back failed, and the connection went back to the pool with another
/// sql_mode for the next user. An open HANDLER did the same. Now the spaced form is read
/// as the variable it names, a connection whose SET cannot be read back is dropped, and a
/// statement the parser cannot read (HANDLER) keeps its connection until the session ends,
/// when it is reset.
#[tokio::test]
async fn session_state_set_behind_the_proxys_back_never_reaches_another_session() {
    let h = Harness::start().await;
    let default_mode: String = {
        let mut c = h.client().await;
        c.query_first("SELECT @@sql_mode").await.unwrap().unwrap()
    };
    {
        let mut c = h.client().await;
        exec(&mut c, "SET @@session . sql_mode = 'ANSI_QUOTES'").await;
        let mode: String = c.query_first("SELECT @@sql_mode").await.unwrap().unwrap();
        assert_eq!(mode, "ANSI_QUOTES");
        // The proxy follows it: "x" is an identifier now, as on the server.
        assert!(c.query_drop("SELECT \"no_such_column\"").await.is_err());
        let e = c
            .query_drop("SET @@session . sql_log_bin = 0")
            .await
            .unwrap_err();
        assert!(e.to_string().contains("1227"), "{e}");
        let e = c.query_drop("SET /*!sql_log_bin*/ = 0").await.unwrap_err();
        assert!(e.to_string().contains("1227"), "{e}");
        // A name the server does not know fails there; nothing is kept.
        assert!(c.query_drop("SET @@session . = 1").await.is_err());
        exec(&mut c, "HANDLER t_merchant OPEN AS h_pool").await;
        c.disconnect().await.unwrap();
    }
    for _ in 0..20 {
        let mut c = h.client().await;
        let mode: String = c.query_first("SELECT @@sql_mode").await.unwrap().unwrap();
        assert_eq!(mode, default_mode);
        let e = c.query_drop("HANDLER h_pool READ FIRST").await.unwrap_err();
        assert!(e.to_string().contains("1109"), "{e}");
    }
    h.stop().await;
}

/// Found by a fifth attack on the pool: `SET STATEMENT ... FOR SET`, side effects inside a
/// tracked SET's value, a temporary sequence named like a table and the backend's
/// diagnostics of the previous statement reached later sessions of other users.
#[tokio::test]
async fn side_effects_of_one_session_stay_in_it() {
    let h = Harness::start().await;
    let (default_zone, merchant): (String, Option<u64>) = {
        let mut c = h.client().await;
        let zone: String = c.query_first("SELECT @@time_zone").await.unwrap().unwrap();
        let m: Option<u64> = c
            .query_first("SELECT COUNT(*) FROM t_merchant")
            .await
            .unwrap();
        (zone, m)
    };
    {
        let mut c = h.client().await;
        for sql in [
            "SET STATEMENT max_statement_time = 10 FOR SET time_zone = '+05:00'",
            "GET DIAGNOSTICS CONDITION 1 @m = MESSAGE_TEXT",
            "SELECT @@warning_count",
        ] {
            let e = c.query_drop(sql).await.unwrap_err();
            assert!(e.to_string().contains("1235"), "{sql}: {e}");
        }
        exec(
            &mut c,
            "SET last_insert_id = (SELECT LENGTH(@leak := 'secret')*0)",
        )
        .await;
        exec(
            &mut c,
            "SET autocommit = 1 + GET_LOCK('rk_pool_lock', 0) - 1",
        )
        .await;
        exec(&mut c, "CREATE TEMPORARY SEQUENCE t_merchant").await;
        exec(&mut c, "SELECT 1 INTO /*!@v2*/").await;
        c.disconnect().await.unwrap();
    }
    for _ in 0..10 {
        let mut c = h.client().await;
        let zone: String = c.query_first("SELECT @@time_zone").await.unwrap().unwrap();
        assert_eq!(zone, default_zone);
        let leaked: Option<Option<String>> = c.query_first("SELECT @leak").await.unwrap();
        assert_eq!(leaked, Some(None));
        let v2: Option<Option<u64>> = c.query_first("SELECT @v2").await.unwrap();
        assert_eq!(v2, Some(None));
        let lock: Option<Option<u64>> = c
            .query_first("SELECT IS_USED_LOCK('rk_pool_lock')")
            .await
            .unwrap();
        assert_eq!(lock, Some(None), "the named lock outlived its session");
        let m: Option<u64> = c
            .query_first("SELECT COUNT(*) FROM t_merchant")
            .await
            .unwrap();
        assert_eq!(m, merchant, "a temporary sequence shadows t_merchant");
    }
    h.stop().await;
}

/// A character set and its collation change together on the server: after setting one of
/// them alone, both datasources carry the pair the server has (before, the other one was
/// not read back: ds1 kept the old collation, or refused it with 1253). And
/// `SET NAMES binary` reaches the other datasource (its read-back values came back as hex
/// literals, which `SET NAMES` does not take: 1064).
#[tokio::test]
async fn a_character_set_and_its_collation_follow_the_client_to_every_datasource() {
    let h = Harness::start().await;
    let cases: [(&[&str], (&str, &str)); 3] = [
        (
            &["SET NAMES cp1251", "SET character_set_connection = utf8mb4"],
            ("utf8mb4", "utf8mb4_general_ci"),
        ),
        (
            &["SET NAMES utf8mb4", "SET collation_connection = latin1_bin"],
            ("latin1", "latin1_bin"),
        ),
        (&["SET NAMES binary"], ("binary", "binary")),
    ];
    for (sets, want) in cases {
        let mut c = h.client().await;
        for set in sets {
            exec(&mut c, set).await;
        }
        for ds in [0, 1, 0, 1] {
            let id = order_on(ds, 3);
            let sql = format!(
                "SELECT CAST(@@character_set_connection AS CHAR), CAST(@@collation_connection AS CHAR) FROM t_order WHERE order_id = {id}"
            );
            let got: Option<(Vec<u8>, Vec<u8>)> = c
                .query_first(&sql)
                .await
                .unwrap_or_else(|e| panic!("{sets:?} then ds{ds}: {e}"));
            let (cs, coll) = got.unwrap_or_else(|| panic!("{sql}: no row"));
            assert_eq!(
                (
                    String::from_utf8_lossy(&cs).into_owned(),
                    String::from_utf8_lossy(&coll).into_owned()
                ),
                (want.0.to_owned(), want.1.to_owned()),
                "{sets:?} then ds{ds}"
            );
        }
    }
    h.stop().await;
}

/// Character set names are read back as names also when the session reads results in a
/// wide character set (`SET character_set_results = utf16`): before, the names came back
/// in UTF-16 and the other datasource refused them (1115). Statements without a result set
/// are used while results are wide (the test's client cannot read column definitions in
/// UTF-16).
#[tokio::test]
async fn character_set_names_read_back_under_wide_results_reach_every_datasource() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    exec(&mut c, "SET NAMES latin1").await;
    exec(&mut c, "SET character_set_results = utf16").await;
    for ds in [0, 1, 0, 1] {
        let id = order_on(ds, 5);
        exec(
            &mut c,
            &format!("UPDATE t_order SET status = status WHERE order_id = {id}"),
        )
        .await;
    }
    exec(&mut c, "SET character_set_results = latin1").await;
    for ds in [0, 1] {
        let id = order_on(ds, 5);
        let sql = format!(
            "SELECT CONVERT(@@character_set_client USING binary), CONVERT(@@character_set_connection USING binary) FROM t_order WHERE order_id = {id}"
        );
        let got: Option<(Vec<u8>, Vec<u8>)> = c.query_first(&sql).await.unwrap();
        assert_eq!(
            got,
            Some((b"latin1".to_vec(), b"latin1".to_vec())),
            "ds{ds}"
        );
    }
    h.stop().await;
}
