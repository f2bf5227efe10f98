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

/// Runs `setup` and then the prepared `sql` on `c`, returning the rows as text.
async fn prepared_after(c: &mut mysql_async::Conn, setup: &[&str], sql: &str) -> Vec<Vec<Value>> {
    for s in setup {
        c.query_drop(*s).await.unwrap();
    }
    let stmt = c.prep(sql).await.unwrap();
    let rows = values(c.exec(&stmt, (1,)).await.unwrap());
    c.close(stmt).await.unwrap();
    rows
}

#[tokio::test]
async fn a_backend_connection_keeps_statements_of_other_databases_sql_modes_and_charsets_apart() {
    // One backend connection per datasource, so every session below reuses the one the
    // previous session prepared its statements on.
    let mut config = config();
    for ds in &mut config.datasources {
        ds.pool_size = 1;
    }
    // The user is given the other database (SPEC §8a).
    config.users[0].databases = vec!["orders_ref".to_owned()];
    let h = Harness::start_with(config).await;
    let mut setup = backend(0).await;
    for (db, v) in [("orders", "in-orders"), ("orders_ref", "in-ref")] {
        exec(
            &mut setup,
            &format!("CREATE OR REPLACE TABLE {db}.rk_ps_probe (v VARCHAR(20))"),
        )
        .await;
        exec(
            &mut setup,
            &format!("INSERT INTO {db}.rk_ps_probe VALUES ('{v}')"),
        )
        .await;
    }
    let cases: [(&str, &[&str], &str); 4] = [
        ("orders", &[], "SELECT v, \"v\", ? FROM rk_ps_probe"),
        ("orders_ref", &[], "SELECT v, \"v\", ? FROM rk_ps_probe"),
        (
            "orders",
            &["SET sql_mode = 'ANSI_QUOTES'"],
            "SELECT v, \"v\", ? FROM rk_ps_probe",
        ),
        (
            "orders",
            &["SET NAMES latin1"],
            "SELECT HEX(CONVERT('\u{e9}' USING utf8mb4)), ? FROM rk_ps_probe",
        ),
    ];
    // Warm the backend's cache with the default-state statements first.
    for (db, setup_sql, sql) in cases.iter().cycle().take(8) {
        let mut c = mysql_async::Conn::new(
            mysql_async::OptsBuilder::from_opts(h.opts()).db_name(Some(*db)),
        )
        .await
        .unwrap();
        let got = prepared_after(&mut c, setup_sql, sql).await;
        let mut direct = mysql_async::Conn::new(
            mysql_async::OptsBuilder::default()
                .ip_or_hostname("127.0.0.1")
                .tcp_port(sandbox_port(0))
                .user(Some("root"))
                .db_name(Some(*db))
                .prefer_socket(false),
        )
        .await
        .unwrap();
        let want = prepared_after(&mut direct, setup_sql, sql).await;
        assert_eq!(got, want, "{db} {setup_sql:?} {sql}");
        c.disconnect().await.unwrap();
    }
    for db in ["orders", "orders_ref"] {
        exec(&mut setup, &format!("DROP TABLE {db}.rk_ps_probe")).await;
    }
}

#[tokio::test]
async fn long_data_goes_to_the_backend_in_its_chunks_and_too_much_is_refused_without_losing_the_session()
 {
    let h = Harness::start().await;
    let id = fresh_new_id_on(5, 0); // EU, ds0
    let cleanup = Cleanup::new(&[id]);
    let mut c = h.client().await;
    exec(&mut c, &insert_order_sql(id, "EU_CHANNEL", "before")).await;
    let mut direct = backend(0).await;
    let max: u64 = direct
        .query_first("SELECT @@max_allowed_packet")
        .await
        .unwrap()
        .unwrap();
    let mut raw = RawClient::connect(h.addr).await;
    assert!(matches!(raw.query("BEGIN").await, RawReply::Ok(_)));
    let prepared = raw
        .command(0x16, b"SELECT LENGTH(?) FROM t_order WHERE order_id = ?")
        .await;
    assert_eq!(prepared[0][0], 0x00, "{prepared:?}");
    raw.read_until_eof().await; // parameter definitions
    raw.read_until_eof().await; // column definition
    let stmt = prepared[0][1..5].to_vec();
    let long_bodies = |total: u64| {
        let mut left = total;
        let mut bodies = Vec::new();
        while left > 0 {
            let n = left.min(4 << 20) as usize;
            let mut body = stmt.clone();
            body.extend_from_slice(&0u16.to_le_bytes());
            body.resize(body.len() + n, b'x');
            bodies.push(body);
            left -= n as u64;
        }
        bodies
    };
    let execute = {
        let mut body = stmt.clone();
        body.push(0);
        body.extend_from_slice(&1u32.to_le_bytes());
        body.push(0);
        body.push(1);
        body.extend_from_slice(&[252, 0, 8, 0x80]); // BLOB (long data), LONGLONG UNSIGNED
        body.extend_from_slice(&id.to_le_bytes());
        body
    };
    // Exactly max_allowed_packet in 4 MiB chunks: the server takes it (one packet of that
    // size it would not).
    for body in long_bodies(max) {
        raw.send(0x18, &body).await;
    }
    let reply = raw.command(0x17, &execute).await;
    assert_eq!(reply.len(), 3, "column count, definition, EOF: {reply:?}");
    assert_eq!(reply[0][0], 0x01, "a one-column result set: {reply:?}");
    let rows = raw.read_until_eof().await;
    assert_eq!(rows.len(), 2, "one row and EOF: {rows:?}");
    // Binary row: header, NULL bitmap, the length as a little-endian integer.
    let mut length = [0u8; 8];
    length[..rows[0].len() - 2].copy_from_slice(&rows[0][2..]);
    assert_eq!(u64::from_le_bytes(length), max);
    // More than the proxy buffers (64 MiB): refused at execution, the transaction and
    // the connection stay.
    for body in long_bodies((64 << 20) + 1) {
        raw.send(0x18, &body).await;
    }
    let reply = raw.command(0x17, &execute).await;
    assert_eq!(
        reply[0][0],
        0xff,
        "an error: {:?}",
        &reply[0][..reply[0].len().min(80)]
    );
    assert_eq!(u16::from_le_bytes([reply[0][1], reply[0][2]]), 1105);
    match raw.query("SELECT @@in_transaction").await {
        RawReply::Rows(v, _) => assert_eq!(v, vec![Some("1".to_owned())]),
        other => panic!("{other:?}"),
    }
    assert!(matches!(raw.query("ROLLBACK").await, RawReply::Ok(_)));
    drop(cleanup);
}

#[tokio::test]
async fn more_prepared_statements_than_max_prepared_stmt_count_are_refused_with_1461() {
    let h = Harness::start().await;
    let mut raw = RawClient::connect(h.addr).await;
    for n in 0..16_382 {
        raw.send(0x16, b"SET @a = 1").await;
        let reply = raw.read_packet().await;
        assert_eq!(reply[0], 0x00, "prepare {n}");
    }
    let reply = raw.command(0x16, b"SET @a = 1").await;
    assert_eq!(reply[0][0], 0xff);
    assert_eq!(u16::from_le_bytes([reply[0][1], reply[0][2]]), 1461);
    assert!(matches!(raw.query("DO 1").await, RawReply::Ok(_)));
}

/// Found by attacking the prepared path: a statement prepared in `orders` on a table named
/// `TABLES` and executed after `USE information_schema` ran on the backend's own catalog
/// view (every database on the server; `PROCESSLIST` showed other clients' statements),
/// since the check for the views the proxy answers itself ran at prepare time only.
#[tokio::test]
async fn a_prepared_statement_is_checked_for_answered_views_under_the_database_of_its_execution() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    exec(&mut c, "DROP TABLE IF EXISTS `TABLES`").await;
    exec(
        &mut c,
        "CREATE TABLE `TABLES` (TABLE_SCHEMA VARCHAR(64), TABLE_NAME VARCHAR(64))",
    )
    .await;
    let stmt = c
        .prep("SELECT TABLE_SCHEMA, TABLE_NAME FROM TABLES WHERE 1 = ?")
        .await
        .unwrap();
    let rows: Vec<(String, String)> = c.exec(&stmt, (1,)).await.unwrap();
    assert!(rows.is_empty());
    exec(&mut c, "DROP TABLE `TABLES`").await;
    exec(&mut c, "USE information_schema").await;
    match c.exec::<(String, String), _, _>(&stmt, (1,)).await {
        Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1235, "{e}"),
        other => panic!(
            "expected 1235, got {} rows or {other:?}",
            other.as_ref().map_or(0, Vec::len)
        ),
    }
    h.stop().await;
}
