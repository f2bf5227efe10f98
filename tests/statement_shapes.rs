//! Statements of the same shape with other literals, hints or context route by their own
//! values (the analysis is reused across literals); the rewrite changes table names only,
//! never literals, aliases or other bytes; the write forms MySQL applications use (aliases,
//! joined UPDATE of binding tables, REPLACE, ON DUPLICATE KEY UPDATE, INSERT ... SET) land
//! on the right shard.

mod common;

use common::*;
use mysql_async::Conn;
use mysql_async::prelude::*;

async fn note_of(c: &mut Conn, sql: &str) -> Vec<String> {
    c.query::<String, _>(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}\n  failed: {e}"))
}

#[tokio::test]
async fn hints_and_channel_literals_are_never_reused_from_a_statement_of_the_same_shape() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let guard = Cleanup::default();
    // An unindexed legacy order on its BIZ shard, and a row with the same id on an EU shard.
    let id = guard.add(fresh_legacy_id());
    insert_physical(expected_shard("BIZ_CHANNEL", id), id, "BIZ_CHANNEL", "biz").await;
    insert_physical(expected_shard("EU_CHANNEL", id), id, "EU_CHANNEL", "eu").await;
    for _ in 0..3 {
        for (sql, want) in [
            (
                format!(
                    "/*route_key='BIZ_CHANNEL'*/ SELECT note FROM t_order WHERE order_id = {id}"
                ),
                vec!["biz"],
            ),
            (
                format!(
                    "/*route_key='EU_CHANNEL'*/ SELECT note FROM t_order WHERE order_id = {id}"
                ),
                vec!["eu"],
            ),
            (
                format!("SELECT note FROM t_order WHERE order_id = {id}"),
                vec![],
            ),
            (
                format!(
                    "SELECT note FROM t_order WHERE order_id = {id} AND channel = 'BIZ_CHANNEL'"
                ),
                vec!["biz"],
            ),
            (
                format!(
                    "SELECT note FROM t_order WHERE order_id = {id} AND channel = 'EU_CHANNEL'"
                ),
                vec!["eu"],
            ),
            (
                format!(
                    "SELECT note FROM t_order WHERE order_id = {id} AND channel = 'CN_CHANNEL'"
                ),
                vec![],
            ),
            (
                format!("SELECT note FROM t_order WHERE order_id = {id} /*region='HK'*/"),
                vec!["biz"],
            ),
            (
                format!("SELECT note FROM t_order WHERE order_id = {id} /*region='GB'*/"),
                vec!["eu"],
            ),
        ] {
            assert_eq!(note_of(&mut c, &sql).await, want, "{sql}");
        }
    }
    // A write's hint applies to that statement only.
    let hinted =
        format!("/*route_key='BIZ_CHANNEL'*/ UPDATE t_order SET note = 'w1' WHERE order_id = {id}");
    exec(&mut c, &hinted).await;
    let plain = format!("UPDATE t_order SET note = 'w2' WHERE order_id = {id}");
    assert_eq!(error_code(&mut c, &plain).await, 1526, "{plain}");
    let row = physical_row(expected_shard("BIZ_CHANNEL", id), id)
        .await
        .unwrap();
    assert_eq!(show(&row[6]), "w1");
    drop(guard);
    h.stop().await;
}

#[tokio::test]
async fn same_shape_reads_alternating_ids_of_every_kind_each_get_their_own_row() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let mut r = reference().await;
    let s = seed();
    let mut ids = Vec::new();
    for i in 0..10 {
        for (name, ..) in CHANNELS {
            ids.push(s.channels[name].new_format_ids[60 + i]);
            ids.push(s.channels[name].legacy_ids[60 + i]);
        }
        ids.push(fresh_legacy_id());
    }
    for (i, id) in ids.iter().enumerate() {
        let sql = if i % 2 == 0 {
            format!("SELECT order_id, amount, status FROM t_order WHERE order_id = {id}")
        } else {
            format!("SELECT order_id, amount, status FROM t_order WHERE order_id = '{id}'")
        };
        assert_same_rows(&rows(&mut c, &sql).await, &rows(&mut r, &sql).await, &sql);
    }
    h.stop().await;
}

#[tokio::test]
async fn table_names_inside_literals_and_aliases_are_not_rewritten() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let mut r = reference().await;
    let id = seed().channels["GLOBAL_CHANNEL"].new_format_ids[8];
    for sql in [
        format!(
            "SELECT order_id AS t_order, 't_order' AS t_order_item, 'orders.t_order_item' AS x FROM t_order WHERE order_id = {id}"
        ),
        format!(
            "SELECT note FROM t_order WHERE order_id = {id} AND status <> 'FROM t_order WHERE order_id = 1'"
        ),
        format!(
            "SELECT `t_order`.order_id, CONCAT('t_order', '_', 3) FROM `t_order` WHERE `t_order`.order_id = {id}"
        ),
        format!(
            "SELECT t_order_item.sku FROM t_order_item WHERE t_order_item.order_id = {id} AND sku <> 't_order_item'"
        ),
    ] {
        assert_eq!(
            columns(&mut c, &sql).await,
            columns(&mut r, &sql).await,
            "{sql}: column names"
        );
        assert_same_rows(&rows(&mut c, &sql).await, &rows(&mut r, &sql).await, &sql);
    }
    h.stop().await;
}

#[tokio::test]
async fn literal_bytes_reach_the_shard_unchanged() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let mut direct0 = backend(0).await;
    let guard = Cleanup::default();
    for literal in [
        "'t_order t_order_item orders.t_order `t_order`'",
        "'it\\'s a \\\\ backslash, a \"quote\" and ''doubled'''",
        "'caf\u{e9} \u{1F600} \u{4E2D}\u{6587}'",
        "_utf8mb4'\u{1F680} rocket'",
        "CONCAT('a', _binary'\\0b', 'c')",
        "'/* not a comment */ -- nor this'",
    ] {
        let id = guard.add(fresh_new_id_on(1, 1));
        let sql = format!(
            "INSERT INTO t_order {ORDER_COLUMNS} VALUES ({id}, 'CN_CHANNEL', 'CN', 1, 1.00, 'CREATED', {literal}, NOW(3))"
        );
        exec(&mut c, &sql).await;
        let want: Vec<Values> = rows(&mut direct0, &format!("SELECT {literal}")).await;
        let row = physical_row(expected_shard("CN_CHANNEL", id), id)
            .await
            .unwrap();
        assert_eq!(row[6], want[0][0], "{literal}: stored note");
        let got = rows(
            &mut c,
            &format!("SELECT note FROM t_order WHERE order_id = {id}"),
        )
        .await;
        assert_eq!(got[0][0], want[0][0], "{literal}: read back");
    }
    drop(guard);
    h.stop().await;
}

#[tokio::test]
async fn write_forms_applications_use_land_on_the_right_shard() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let guard = Cleanup::default();
    let id = guard.add(fresh_new_id(4));
    let shard = expected_shard("CORP_CHANNEL", id);
    let status = |row: Values| show(&row[5]);
    exec(&mut c, &format!(
        "INSERT INTO t_order SET order_id = {id}, channel = 'CORP_CHANNEL', region = 'KR', user_id = 1, amount = 2.50, status = 'SET', created_at = NOW(3)"
    )).await;
    assert_eq!(placement(id).await.0, vec![shard]);
    exec(&mut c, &format!(
        "INSERT INTO t_order_item (order_id, item_no, sku, qty, price) VALUES ({id}, 1, 'A', 1, 1.00), ({id}, 2, 'B', 1, 1.00)"
    )).await;
    let cases = [
        (
            format!("UPDATE t_order o SET o.status = 'ALIAS' WHERE o.order_id = {id}"),
            1,
            "ALIAS",
        ),
        (
            format!("UPDATE `orders`.`t_order` SET status = 'QUAL' WHERE `order_id` = '{id}'"),
            1,
            "QUAL",
        ),
        (
            format!(
                "UPDATE t_order o JOIN t_order_item i ON o.order_id = i.order_id SET i.qty = 9, o.status = 'JOIN' WHERE o.order_id = {id}"
            ),
            3,
            "JOIN",
        ),
        (
            format!(
                "INSERT INTO t_order (order_id, channel, region, user_id, amount, status, created_at) VALUES ({id}, 'CORP_CHANNEL', 'KR', 1, 1, 'X', NOW()) ON DUPLICATE KEY UPDATE status = 'UPSERT'"
            ),
            2,
            "UPSERT",
        ),
        (
            format!(
                "REPLACE INTO t_order (order_id, channel, region, user_id, amount, status, created_at) VALUES ({id}, 'CORP_CHANNEL', 'MY', 1, 1, 'REPLACED', NOW())"
            ),
            2,
            "REPLACED",
        ),
        (
            format!(
                "UPDATE t_order SET status = 'LIMIT' WHERE order_id = {id} ORDER BY order_id LIMIT 1"
            ),
            1,
            "LIMIT",
        ),
    ];
    for (sql, affected, want) in cases {
        exec(&mut c, &sql).await;
        assert_eq!(c.affected_rows(), affected, "{sql}");
        assert_eq!(placement(id).await.0, vec![shard], "{sql}");
        assert_eq!(
            status(physical_row(shard, id).await.unwrap()),
            want,
            "{sql}"
        );
    }
    let (ds, _, ti) = physical(shard);
    let mut direct = backend(ds).await;
    let qty: Vec<u32> = direct
        .query(format!("SELECT qty FROM {ti} WHERE order_id = {id}"))
        .await
        .unwrap();
    assert_eq!(qty, [9, 9]);
    exec(
        &mut c,
        &format!("DELETE FROM t_order_item WHERE order_id = {id} LIMIT 1"),
    )
    .await;
    assert_eq!(c.affected_rows(), 1);
    exec(
        &mut c,
        &format!("DELETE o FROM t_order o WHERE o.order_id = {id}"),
    )
    .await;
    assert_eq!(c.affected_rows(), 1);
    assert_eq!(placement(id).await, (vec![], vec![shard]));

    // REPLACE of a legacy id is an insert: it gets its index row.
    let legacy = guard.add(fresh_legacy_id());
    exec(
        &mut c,
        &format!(
            "REPLACE INTO t_order {ORDER_COLUMNS} VALUES {}",
            order_tuple(legacy, "BIZ_CHANNEL", "replace")
        ),
    )
    .await;
    assert_eq!(index_channel(legacy).await.as_deref(), Some("BIZ_CHANNEL"));
    assert_eq!(
        placement(legacy).await.0,
        vec![expected_shard("BIZ_CHANNEL", legacy)]
    );
    drop(guard);
    h.stop().await;
}
