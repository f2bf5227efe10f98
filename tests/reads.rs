//! Reads through the proxy return exactly what the unsharded reference database returns:
//! point selects of new-format and legacy ids of every channel, IN lists over several
//! shards, joins of the binding tables, and the many spellings of the same statement.

mod common;

use common::*;
use mysql_async::Conn;
use mysql_async::prelude::*;

/// Every `step`-th id of `ids`, at most `n` of them.
fn sample(ids: &[u64], n: usize) -> Vec<u64> {
    let step = (ids.len() / n).max(1);
    ids.iter().step_by(step).take(n).copied().collect()
}

/// A sample of seeded ids: new-format and legacy of every channel, and legacy ids whose
/// bits look like an assigned code.
fn sampled_ids() -> Vec<(String, u64)> {
    let s = seed();
    let mut out = Vec::new();
    for (name, ch) in &s.channels {
        for id in sample(&ch.new_format_ids, 12) {
            out.push((format!("{name} new"), id));
        }
        for id in sample(&ch.legacy_ids, 12) {
            out.push((format!("{name} legacy"), id));
        }
    }
    for id in sample(&s.legacy_ids_with_code_bits, 40) {
        out.push(("legacy with code bits".to_owned(), id));
    }
    out
}

/// Runs `sql` through the proxy and on the reference; the rows must be identical.
async fn same_as_reference(proxy: &mut Conn, reference: &mut Conn, sql: &str) -> Vec<Values> {
    let got = rows(proxy, sql).await;
    let want = rows(reference, sql).await;
    assert_same_rows(
        &got,
        &want,
        &format!("{sql}\n  through the proxy != on orders_ref"),
    );
    got
}

/// Same, for answers combined from several shards (order not defined).
async fn same_set_as_reference(proxy: &mut Conn, reference: &mut Conn, sql: &str) -> Vec<Values> {
    let got = sorted_rows(proxy, sql).await;
    let want = sorted_rows(reference, sql).await;
    assert_same_rows(
        &got,
        &want,
        &format!("{sql}\n  through the proxy != on orders_ref"),
    );
    got
}

#[tokio::test]
async fn point_select_returns_the_reference_row_for_every_kind_of_id() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let mut r = reference().await;
    for (kind, id) in sampled_ids() {
        let sql = format!("SELECT * FROM t_order WHERE order_id = {id}");
        let got = same_as_reference(&mut c, &mut r, &sql).await;
        assert_eq!(got.len(), 1, "{kind} id {id}: expected exactly one row");
        let sql = format!("SELECT * FROM t_order_item WHERE order_id = {id} ORDER BY item_no");
        same_as_reference(&mut c, &mut r, &sql).await;
    }
    h.stop().await;
}

#[tokio::test]
async fn point_select_reports_the_reference_column_names_and_types() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let mut r = reference().await;
    let s = seed();
    let id = s.channels["CORP_CHANNEL"].new_format_ids[3];
    for sql in [
        format!("SELECT * FROM t_order WHERE order_id = {id}"),
        format!("SELECT * FROM t_order_item WHERE order_id = {id}"),
        format!(
            "SELECT o.order_id, amount, i.price FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id WHERE o.order_id = {id}"
        ),
    ] {
        assert_eq!(
            columns(&mut c, &sql).await,
            columns(&mut r, &sql).await,
            "{sql}"
        );
    }
    h.stop().await;
}

#[tokio::test]
async fn in_list_over_shards_of_both_servers_returns_every_row() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let mut r = reference().await;
    let s = seed();
    let mut ids = Vec::new();
    for name in [
        "EU_CHANNEL",
        "GLOBAL_CHANNEL",
        "CN_CHANNEL",
        "BIZ_CHANNEL",
        "CORP_CHANNEL",
    ] {
        ids.extend(s.channels[name].new_format_ids.iter().take(3));
        ids.extend(s.channels[name].legacy_ids.iter().take(2));
    }
    ids.extend(s.legacy_ids_with_code_bits.iter().take(5));
    ids.sort();
    ids.dedup();
    let unknown = fresh_legacy_id();
    let list = ids
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!("SELECT * FROM t_order WHERE order_id IN ({list}, {unknown})");
    let got = same_set_as_reference(&mut c, &mut r, &sql).await;
    assert_eq!(got.len(), ids.len());
    let sql = format!(
        "SELECT order_id, item_no, sku, qty, price FROM t_order_item WHERE order_id IN ({list})"
    );
    same_set_as_reference(&mut c, &mut r, &sql).await;
    // Quoted ids in the list route the same.
    let quoted = ids
        .iter()
        .map(|i| format!("'{i}'"))
        .collect::<Vec<_>>()
        .join(",");
    let sql = format!("SELECT order_id, status FROM t_order WHERE order_id IN ({quoted})");
    same_set_as_reference(&mut c, &mut r, &sql).await;
    h.stop().await;
}

#[tokio::test]
async fn joins_of_order_and_items_on_order_id_match_the_reference() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let mut r = reference().await;
    let s = seed();
    let new = s.channels["BIZ_CHANNEL"].new_format_ids[5];
    let legacy = s.channels["CN_CHANNEL"].legacy_ids[7];
    let lookalike = s.legacy_ids_with_code_bits[3];
    for id in [new, legacy, lookalike] {
        for sql in [
            format!(
                "SELECT o.order_id, o.status, i.item_no, i.sku, i.qty FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id WHERE o.order_id = {id}"
            ),
            format!(
                "SELECT o.order_id, i.item_no, i.price FROM t_order AS o INNER JOIN t_order_item AS i ON i.order_id = o.order_id WHERE i.order_id = {id}"
            ),
            format!(
                "SELECT t_order.amount, t_order_item.price FROM t_order, t_order_item WHERE t_order.order_id = t_order_item.order_id AND t_order.order_id = {id}"
            ),
            format!(
                "SELECT o.order_id, i.sku FROM t_order o LEFT JOIN t_order_item i ON o.order_id = i.order_id WHERE o.order_id = {id}"
            ),
        ] {
            let got = same_set_as_reference(&mut c, &mut r, &sql).await;
            assert!(!got.is_empty(), "{sql}: the seeded order has items");
        }
    }
    let sql = format!(
        "SELECT o.order_id, o.channel, i.item_no, i.qty FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id WHERE o.order_id IN ({new}, {legacy}, {lookalike})"
    );
    same_set_as_reference(&mut c, &mut r, &sql).await;
    h.stop().await;
}

#[tokio::test]
async fn aliases_backquotes_qualified_names_comments_and_case_route_the_same() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let mut r = reference().await;
    let s = seed();
    for id in [
        s.channels["GLOBAL_CHANNEL"].new_format_ids[1],
        s.channels["CORP_CHANNEL"].legacy_ids[4],
    ] {
        let want = rows(
            &mut r,
            &format!("SELECT * FROM t_order WHERE order_id = {id}"),
        )
        .await;
        assert_eq!(want.len(), 1);
        let spellings = [
            format!("SELECT * FROM t_order AS o WHERE o.order_id = {id}"),
            format!("SELECT o.* FROM t_order o WHERE o.order_id = {id}"),
            format!("SELECT * FROM `t_order` WHERE `order_id` = {id}"),
            format!("SELECT `t_order`.* FROM `t_order` WHERE `t_order`.`order_id` = {id}"),
            format!("SELECT * FROM orders.t_order WHERE order_id = {id}"),
            format!("SELECT * FROM `orders`.`t_order` WHERE orders.t_order.order_id = {id}"),
            format!("/* leading comment */ SELECT * FROM t_order WHERE order_id = {id}"),
            format!(
                "SELECT /* inside */ * FROM t_order /* t_order_item */ WHERE order_id = {id} -- trailing"
            ),
            format!("SELECT * FROM t_order WHERE order_id = {id} # hash comment"),
            format!("select * from t_order where order_id = {id}"),
            format!("SeLeCt * FrOm t_order WhErE ORDER_ID = {id}"),
            format!("SELECT * FROM t_order WHERE order_id = '{id}'"),
            format!("SELECT * FROM t_order WHERE {id} = order_id"),
            format!("SELECT * FROM t_order WHERE (order_id = {id})"),
            format!("SELECT * FROM t_order WHERE order_id = {id} AND amount >= 0"),
            format!("SELECT * FROM t_order WHERE status <> 'nope' AND order_id IN ({id})"),
            format!("SELECT * FROM t_order\n  WHERE\torder_id = {id};"),
        ];
        for sql in spellings {
            let got = try_rows(&mut c, &sql)
                .await
                .unwrap_or_else(|e| panic!("{sql}\n  failed: {e}"));
            assert_eq!(got, want, "{sql}");
        }
    }
    h.stop().await;
}

#[tokio::test]
async fn unknown_ids_read_as_rows_that_do_not_exist_aggregates_included() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let mut r = reference().await;
    let unknown_legacy = fresh_legacy_id();
    let unknown_new = fresh_new_id(3);
    let top_bit = u64::MAX - 12345;
    for id in [unknown_legacy, unknown_new, top_bit] {
        let sql = format!("SELECT * FROM t_order WHERE order_id = {id}");
        assert!(
            same_as_reference(&mut c, &mut r, &sql).await.is_empty(),
            "{sql}"
        );
        for sql in [
            format!("SELECT COUNT(*) FROM t_order WHERE order_id = {id}"),
            format!(
                "SELECT COUNT(*), SUM(amount), MAX(created_at) FROM t_order WHERE order_id = '{id}'"
            ),
            format!("SELECT COUNT(*) FROM t_order_item WHERE order_id = {id}"),
        ] {
            let got = same_as_reference(&mut c, &mut r, &sql).await;
            assert_eq!(got.len(), 1, "{sql}: an aggregate answers one row");
            assert_eq!(got[0][0], Value::Bytes(b"0".to_vec()), "{sql}");
        }
    }
    h.stop().await;
}

#[tokio::test]
async fn negative_and_null_ids_match_no_row() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let mut r = reference().await;
    for sql in [
        "SELECT * FROM t_order WHERE order_id = -5",
        "SELECT * FROM t_order WHERE order_id = '-5'",
        "SELECT COUNT(*) FROM t_order WHERE order_id = -1",
        "SELECT * FROM t_order WHERE order_id = NULL",
        "SELECT * FROM t_order WHERE order_id IN (-3, -4)",
    ] {
        same_as_reference(&mut c, &mut r, sql).await;
    }
    assert!(
        rows(&mut c, "SELECT * FROM t_order WHERE order_id = -5")
            .await
            .is_empty()
    );
    h.stop().await;
}

#[tokio::test]
async fn an_id_only_on_one_side_of_or_reads_every_shard_not_one() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let mut r = reference().await;
    let s = seed();
    let id = s.channels["EU_CHANNEL"].new_format_ids[2];
    let other = s.channels["CN_CHANNEL"].new_format_ids[2];
    // No usable order id: the statement runs on every shard, never on the id's alone.
    for sql in [
        format!("SELECT * FROM t_order WHERE order_id = {id} OR order_id = {other}"),
        format!("SELECT * FROM t_order WHERE order_id = {id} OR status = 'x'"),
        "SELECT * FROM t_order WHERE order_id = 1 OR status = 'x'".to_owned(),
        format!("SELECT * FROM t_order WHERE NOT (order_id <> {id})"),
        format!(
            "SELECT order_id FROM t_order WHERE order_id >= {id} AND order_id < {id} + 1000000"
        ),
    ] {
        let got = same_set_as_reference(&mut c, &mut r, &sql).await;
        assert!(
            !got.is_empty() || sql.contains("= 1 OR"),
            "{sql}: rows expected"
        );
    }
    h.stop().await;
}

#[tokio::test]
async fn unsharded_tables_pass_through_to_the_default_datasource() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let mut direct = backend(0).await;
    let sql = "SELECT * FROM t_merchant ORDER BY merchant_id";
    let got = rows(&mut c, sql).await;
    let want = rows(
        &mut direct,
        "SELECT * FROM orders.t_merchant ORDER BY merchant_id",
    )
    .await;
    assert_eq!(got, want);
    assert!(!got.is_empty());
    let got = rows(
        &mut c,
        "SELECT COUNT(*), MIN(name) FROM orders.t_merchant WHERE country <> 'XX'",
    )
    .await;
    let want = rows(
        &mut direct,
        "SELECT COUNT(*), MIN(name) FROM orders.t_merchant WHERE country <> 'XX'",
    )
    .await;
    assert_eq!(got, want);
    h.stop().await;
}

#[tokio::test]
async fn every_legacy_id_whose_bits_look_like_a_code_reads_its_own_row() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let mut r = reference().await;
    let s = seed();
    assert!(!s.legacy_ids_with_code_bits.is_empty());
    for id in &s.legacy_ids_with_code_bits {
        let sql = format!("SELECT * FROM t_order WHERE order_id = {id}");
        let got = same_as_reference(&mut c, &mut r, &sql).await;
        assert_eq!(got.len(), 1, "{sql}");
    }
    h.stop().await;
}

#[tokio::test]
async fn numeric_spellings_of_an_id_route_like_the_number() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let mut r = reference().await;
    let s = seed();
    for id in [
        s.channels["EU_CHANNEL"].new_format_ids[7],
        s.channels["CORP_CHANNEL"].new_format_ids[7],
        s.channels["BIZ_CHANNEL"].legacy_ids[7],
    ] {
        for value in [
            format!("{id}.0"),
            format!("{id}.00"),
            format!("+{id}"),
            format!("'0{id}'"),
            format!("' {id}'"),
            format!("'{id}.0'"),
            format!("_utf8mb4'{id}'"),
            format!("{id}.5"),
            "18446744073709551616".to_owned(),
            "-0".to_owned(),
        ] {
            let sql = format!("SELECT * FROM t_order WHERE order_id = {value}");
            same_as_reference(&mut c, &mut r, &sql).await;
        }
        let sql = format!("SELECT * FROM t_order WHERE order_id = {id}.0");
        assert_eq!(rows(&mut c, &sql).await.len(), 1, "{sql}");
    }
    h.stop().await;
}

/// The column definitions of a query's result, every field but the names rendered.
async fn column_defs(c: &mut Conn, sql: &str) -> Vec<[String; 9]> {
    let result = c.query_iter(sql).await.unwrap();
    let defs = result
        .columns_ref()
        .iter()
        .map(|col| {
            [
                col.schema_str().into_owned(),
                col.table_str().into_owned(),
                col.org_table_str().into_owned(),
                col.name_str().into_owned(),
                col.org_name_str().into_owned(),
                format!("{:?}", col.column_type()),
                format!("{:?}", col.flags()),
                format!("{}/{}", col.character_set(), col.column_length()),
                col.decimals().to_string(),
            ]
        })
        .collect();
    result.drop_result().await.unwrap();
    defs
}

#[tokio::test]
async fn column_definitions_are_the_shards_with_logical_schema_and_table_names() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let s = seed();
    let id = s.channels["CN_CHANNEL"].new_format_ids[12];
    let shard = expected_shard("CN_CHANNEL", id);
    let (ds, t, ti) = physical(shard);
    let mut direct = backend(ds).await;
    let cases = [
        (
            format!("SELECT * FROM t_order WHERE order_id = {id}"),
            format!("SELECT * FROM {t} WHERE order_id = {id}"),
            vec![("t_order", "t_order")],
        ),
        (
            format!(
                "SELECT o.order_id, o.amount, o.note FROM t_order AS o WHERE o.order_id = {id}"
            ),
            format!("SELECT o.order_id, o.amount, o.note FROM {t} AS o WHERE o.order_id = {id}"),
            vec![("o", "t_order")],
        ),
        (
            format!(
                "SELECT o.order_id, i.price, i.sku FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id WHERE o.order_id = {id}"
            ),
            format!(
                "SELECT o.order_id, i.price, i.sku FROM {t} o JOIN {ti} i ON o.order_id = i.order_id WHERE o.order_id = {id}"
            ),
            vec![
                ("o", "t_order"),
                ("i", "t_order_item"),
                ("i", "t_order_item"),
            ],
        ),
    ];
    for (through, on_shard, names) in cases {
        let got = column_defs(&mut c, &through).await;
        let want = column_defs(&mut direct, &on_shard).await;
        assert_eq!(got.len(), want.len(), "{through}");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let (table, org_table) = names[i.min(names.len() - 1)];
            assert_eq!(g[0], "orders", "{through}: column {i} schema");
            assert_eq!(
                (g[1].as_str(), g[2].as_str()),
                (table, org_table),
                "{through}: column {i} table, org_table"
            );
            assert_eq!(
                g[3..],
                w[3..],
                "{through}: column {i}: name, type, flags, charset, decimals as on the shard"
            );
        }
    }
    h.stop().await;
}
