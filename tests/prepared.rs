//! Prepared statements (binary protocol) through the proxy with mysql_async: routing from
//! bound parameters at every execution, results identical to direct MariaDB, INSERT rows
//! split by shard with their parameters, NULL order ids.

mod common;

use common::*;
use mysql_async::prelude::*;
use mysql_async::{Params, Row, Value};

fn values(rows: Vec<Row>) -> Vec<Vec<Value>> {
    rows.into_iter().map(|r| r.unwrap()).collect()
}

#[tokio::test]
async fn point_reads_route_from_parameters_of_any_integer_or_string_type() {
    let h = Harness::start().await;
    let seed = seed();
    let mut c = h.client().await;
    let mut reference = reference().await;
    let sql = "SELECT * FROM t_order WHERE order_id = ?";
    for name in ["EU_CHANNEL", "CN_CHANNEL", "CORP_CHANNEL"] {
        let ch = &seed.channels[name];
        for id in [ch.new_format_ids[1], ch.legacy_ids[1]] {
            let want = values(reference.exec(sql, (id,)).await.unwrap());
            assert_eq!(want.len(), 1);
            // The same statement executed again with the id as u64, i64 and string.
            for params in [
                Params::Positional(vec![Value::UInt(id)]),
                Params::Positional(vec![Value::Int(id as i64)]),
                Params::Positional(vec![Value::Bytes(id.to_string().into_bytes())]),
            ] {
                let got = values(c.exec(sql, params).await.unwrap());
                assert_eq!(got, want, "{name} {id}");
            }
        }
    }
}

#[tokio::test]
async fn column_definitions_and_types_match_direct_with_logical_names() {
    let h = Harness::start().await;
    let id = seed().channels["BIZ_CHANNEL"].new_format_ids[2];
    let mut c = h.client().await;
    let stmt = c.prep("SELECT o.*, i.sku FROM t_order o JOIN t_order_item i ON i.order_id = o.order_id WHERE o.order_id = ?").await.unwrap();
    let columns: Vec<(String, String, String)> = stmt
        .columns()
        .iter()
        .map(|col| {
            (
                col.name_str().into_owned(),
                col.table_str().into_owned(),
                col.schema_str().into_owned(),
            )
        })
        .collect();
    assert!(
        columns
            .iter()
            .all(|(_, table, schema)| (table == "o" || table == "i") && schema == "orders"),
        "{columns:?}"
    );
    let got = values(c.exec(&stmt, (id,)).await.unwrap());
    let mut reference = reference().await;
    let want = values(
        reference
            .exec("SELECT o.*, i.sku FROM t_order o JOIN t_order_item i ON i.order_id = o.order_id WHERE o.order_id = ?", (id,))
            .await
            .unwrap(),
    );
    let (mut got, mut want) = (got, want);
    got.sort_by_key(|r| format!("{r:?}"));
    want.sort_by_key(|r| format!("{r:?}"));
    assert_eq!(got, want);
}

#[tokio::test]
async fn multi_row_insert_with_parameters_is_split_by_shard() {
    let h = Harness::start().await;
    // Four EU rows, one per shard 0-3 (all on ds0).
    let ids: Vec<u64> = (0..4).map(|r| fresh_new_id_mod(5, r)).collect();
    let cleanup = Cleanup::new(&ids);
    let mut c = h.client().await;
    let sql = "INSERT INTO t_order (order_id, channel, region, user_id, amount, status, created_at) VALUES (?, 'EU_CHANNEL', ?, 1, ?, 'CREATED', NOW(3)), (?, 'EU_CHANNEL', ?, 2, ?, 'CREATED', NOW(3)), (?, 'EU_CHANNEL', ?, 3, ?, 'CREATED', NOW(3)), (?, 'EU_CHANNEL', ?, 4, ?, 'CREATED', NOW(3))";
    let mut params = Vec::new();
    for (n, id) in ids.iter().enumerate() {
        params.push(Value::UInt(*id));
        params.push(Value::Bytes(b"GB".to_vec()));
        params.push(Value::Bytes(format!("{n}.25").into_bytes()));
    }
    c.exec_drop(sql, params).await.unwrap();
    assert_eq!(c.affected_rows(), 4);
    for (n, id) in ids.iter().enumerate() {
        assert_eq!(
            shards_holding(*id).await,
            [expected_shard("EU_CHANNEL", *id)]
        );
        let (shard_ds, table, _) = physical(expected_shard("EU_CHANNEL", *id));
        let amount: Option<String> = backend(shard_ds)
            .await
            .exec_first(
                format!("SELECT CAST(amount AS CHAR) FROM {table} WHERE order_id = ?"),
                (*id,),
            )
            .await
            .unwrap();
        assert_eq!(
            amount,
            Some(format!("{n}.25")),
            "row {n} got its own parameters"
        );
    }
    drop(cleanup);
}

#[tokio::test]
async fn null_and_impossible_ids_match_no_row_and_inserts_need_an_id() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let n: Option<u64> = c
        .exec_first(
            "SELECT COUNT(*) FROM t_order WHERE order_id = ?",
            (Value::NULL,),
        )
        .await
        .unwrap();
    assert_eq!(n, Some(0));
    let rows: Vec<Row> = c
        .exec("SELECT * FROM t_order WHERE order_id = ?", (-5i64,))
        .await
        .unwrap();
    assert!(rows.is_empty());
    c.exec_drop(
        "UPDATE t_order SET status = 'X' WHERE order_id = ?",
        (Value::NULL,),
    )
    .await
    .unwrap();
    assert_eq!(c.affected_rows(), 0);
    let r = c
        .exec_drop(
            "INSERT INTO t_order (order_id, channel, region, user_id, amount, status, created_at) VALUES (?, 'EU_CHANNEL', 'GB', 1, 1, 'X', NOW())",
            (Value::NULL,),
        )
        .await;
    assert_eq!(server_code(r), 1526);
    assert_usable(&mut c).await;
}

#[tokio::test]
async fn updates_and_deletes_by_parameter_change_only_the_right_shard() {
    let h = Harness::start().await;
    let id = fresh_new_id_on(1, 1); // CN, a shard on ds1
    let legacy = fresh_legacy_id();
    let cleanup = Cleanup::new(&[id, legacy]);
    let mut c = h.client().await;
    exec(&mut c, &insert_order_sql(id, "CN_CHANNEL", "p")).await;
    exec(&mut c, &insert_order_sql(legacy, "CN_CHANNEL", "p")).await;
    let stmt = c
        .prep("UPDATE t_order SET note = ? WHERE order_id = ?")
        .await
        .unwrap();
    for target in [id, legacy] {
        c.exec_drop(&stmt, ("changed", target)).await.unwrap();
        assert_eq!(c.affected_rows(), 1);
        let row = physical_row(expected_shard("CN_CHANNEL", target), target)
            .await
            .unwrap();
        assert!(format!("{row:?}").contains("changed"), "{row:?}");
    }
    c.exec_drop("DELETE FROM t_order WHERE order_id = ?", (legacy,))
        .await
        .unwrap();
    assert!(shards_holding(legacy).await.is_empty());
    drop(cleanup);
}

#[tokio::test]
async fn session_statements_and_unsharded_tables_work_prepared() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let name: Option<String> = c
        .exec_first("SELECT name FROM t_merchant WHERE merchant_id = ?", (1,))
        .await
        .unwrap();
    assert!(name.is_some());
    c.exec_drop("BEGIN", ()).await.unwrap();
    c.exec_drop("ROLLBACK", ()).await.unwrap();
    let r = c.exec_drop("SHOW TABLES", ()).await;
    assert_eq!(server_code(r), 1295);
    assert_usable(&mut c).await;
}

#[tokio::test]
async fn long_data_is_sent_ahead_of_the_execution_on_the_shard_and_reset_clears_it() {
    let h = Harness::start().await;
    let id = fresh_new_id_on(3, 1); // BIZ, ds1
    let cleanup = Cleanup::new(&[id]);
    let mut c = h.client().await;
    exec(&mut c, &insert_order_sql(id, "BIZ_CHANNEL", "before")).await;
    let mut raw = RawClient::connect(h.addr).await;
    // COM_STMT_PREPARE: OK, two parameter definitions, EOF.
    let prepared = raw
        .command(0x16, b"UPDATE t_order SET note = ? WHERE order_id = ?")
        .await;
    assert_eq!(prepared[0][0], 0x00, "{prepared:?}");
    let definitions = raw.read_until_eof().await;
    assert_eq!(definitions.len(), 3, "two parameter definitions and EOF");
    let stmt = prepared[0][1..5].to_vec();
    // The note arrives as long data, in two pieces.
    for chunk in [&b"long "[..], b"data"] {
        let mut body = stmt.clone();
        body.extend_from_slice(&0u16.to_le_bytes());
        body.extend_from_slice(chunk);
        raw.send(0x18, &body).await;
    }
    let execute = |with_note: Option<&[u8]>| {
        let mut body = stmt.clone();
        body.push(0); // no cursor
        body.extend_from_slice(&1u32.to_le_bytes());
        body.push(0); // null bitmap
        body.push(1); // types follow
        body.extend_from_slice(&[253, 0, 8, 0x80]); // VAR_STRING, LONGLONG UNSIGNED
        if let Some(note) = with_note {
            body.push(note.len() as u8);
            body.extend_from_slice(note);
        }
        body.extend_from_slice(&id.to_le_bytes());
        body
    };
    let reply = raw.command(0x17, &execute(None)).await;
    assert_eq!(reply[0][0], 0x00, "{reply:?}");
    // t_order's note is its seventh column.
    let note = |row: Option<Vec<Value>>| row.map(|r| r[6].clone());
    let shard = expected_shard("BIZ_CHANNEL", id);
    assert_eq!(
        note(physical_row(shard, id).await),
        Some(Value::Bytes(b"long data".to_vec()))
    );
    // Long data went with that execution; after COM_STMT_RESET the value comes inline.
    let reset = raw.command(0x1a, &stmt).await;
    assert_eq!(reset[0][0], 0x00);
    let reply = raw.command(0x17, &execute(Some(b"inline"))).await;
    assert_eq!(reply[0][0], 0x00, "{reply:?}");
    assert_eq!(
        note(physical_row(shard, id).await),
        Some(Value::Bytes(b"inline".to_vec()))
    );
    drop(cleanup);
}
