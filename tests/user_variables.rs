//! User variables through the proxy: set by `SET`, by `SELECT ... INTO @v` or by
//! `@v := ...` on one datasource, they are the session's on every datasource, as on one
//! MariaDB server; other clients never see them.

mod common;

use common::*;
use mysql_async::prelude::*;

#[tokio::test]
async fn a_user_variable_set_by_set_is_visible_on_every_shard() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    exec(&mut c, "SET @a = 5").await;
    for ds in 0..2 {
        let id = order_on(ds, 5);
        let sql = format!("SELECT order_id, @a FROM t_order WHERE order_id = {id}");
        let got: Vec<(u64, Option<u64>)> = c.query(&sql).await.unwrap();
        assert_eq!(got, [(id, Some(5))], "{sql} (an order on ds{ds})");
    }
    h.stop().await;
}

/// `SELECT ... INTO @v` and `@v := ...` on an order of the second datasource: a later
/// statement on the default datasource (no table) and one on an order of the first see the
/// values. Before the fix `SELECT @v` gave NULL: the value stayed on the connection the
/// statement ran on.
#[tokio::test]
async fn a_user_variable_assigned_by_a_statement_on_one_datasource_is_seen_on_the_others() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    // A CORP_CHANNEL order (odd i) on the second datasource.
    let far = order_on(1, 7);
    let near = order_on(0, 7);
    exec(
        &mut c,
        &format!(
            "SELECT CAST(order_id AS CHAR), channel INTO @far_id, @far_channel FROM t_order WHERE order_id = {far}"
        ),
    )
    .await;
    let got: Option<(Option<String>, Option<String>)> =
        c.query_first("SELECT @far_id, @FAR_CHANNEL").await.unwrap();
    let want = (Some(far.to_string()), Some("CORP_CHANNEL".to_owned()));
    assert_eq!(
        got,
        Some(want),
        "SELECT @far_id, @FAR_CHANNEL on the default datasource"
    );

    let status: Option<String> = c
        .query_first(format!(
            "SELECT @far_status := status FROM t_order WHERE order_id = {far}"
        ))
        .await
        .unwrap();
    let sql = format!("SELECT @far_status, @far_id FROM t_order WHERE order_id = {near}");
    let got: Option<(Option<String>, Option<String>)> = c.query_first(&sql).await.unwrap();
    assert_eq!(got, Some((status, Some(far.to_string()))), "{sql}");

    // A prepared statement assigns too.
    c.exec_drop(
        "SELECT order_id INTO @prepared_id FROM t_order WHERE order_id = ?",
        (far,),
    )
    .await
    .unwrap();
    let got: Option<Option<u64>> = c.query_first("SELECT @prepared_id").await.unwrap();
    assert_eq!(got, Some(Some(far)));

    let mut other = h.client().await;
    let got: Option<Option<String>> = other.query_first("SELECT @far_id").await.unwrap();
    assert_eq!(got, Some(None), "another client");
    h.stop().await;
}

/// A carried string keeps its character set and collation, whatever bytes it holds: a
/// backslash or a newline, latin1, a binary collation; set by `SET` or by `INTO`. Before,
/// such a value arrived on the other datasource as a binary string (`UPPER` did nothing,
/// `CHARSET` said binary), latin1 became utf8mb4 and the collation the connection's.
/// Found by the attack helper.
#[tokio::test]
async fn a_carried_string_keeps_its_character_set_and_collation() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let far = order_on(1, 3);
    exec(
        &mut c,
        &format!(
            "SELECT 'a\\\\b', CONCAT('x', '\\n', 'y'), CONVERT('xé' USING latin1), 'Ab' COLLATE utf8mb4_bin \
             INTO @bs, @nl, @l, @cb FROM t_order WHERE order_id = {far}"
        ),
    )
    .await;
    exec(&mut c, "SET @s = 'c\\\\d'").await;
    let got: Option<(String, String, String, String, String, u8)> = c
        .query_first(
            "SELECT UPPER(@bs), CHARSET(@bs), CHARSET(@nl), CONCAT(CHARSET(@l), ' ', HEX(@l)), UPPER(@s), @cb = 'ab'",
        )
        .await
        .unwrap();
    assert_eq!(
        got,
        Some((
            "A\\B".to_owned(),
            "utf8mb4".to_owned(),
            "utf8mb4".to_owned(),
            "latin1 78E9".to_owned(),
            "C\\D".to_owned(),
            0
        ))
    );
    // A value of megabytes still reaches the other datasource (as a plain literal: hex
    // would pass max_allowed_packet there).
    exec(&mut c, "SET @big = REPEAT('x', 9000000)").await;
    let sql = format!("SELECT LENGTH(@big) FROM t_order WHERE order_id = {far}");
    let got: Option<u64> = c.query_first(&sql).await.unwrap();
    assert_eq!(got, Some(9_000_000), "{sql}");
    // And on an order of the second datasource, where `SET @s` was carried.
    let sql = format!("SELECT UPPER(@s), CHARSET(@s) FROM t_order WHERE order_id = {far}");
    let got: Option<(String, String)> = c.query_first(&sql).await.unwrap();
    assert_eq!(
        got,
        Some(("C\\D".to_owned(), "utf8mb4".to_owned())),
        "{sql}"
    );
    h.stop().await;
}
