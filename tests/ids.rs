//! Issuing order ids (SPEC §6) through a running proxy: `SELECT NEXT_ORDER_ID(...)` (text and
//! prepared), INSERT without `order_id`, `POST /v1/order-ids`, the counters and callers.

mod common;

use std::collections::HashMap;

use common::*;
use mysql_async::prelude::*;
use routekey_proxy::id::IdLayout;

#[tokio::test]
async fn next_order_id_returns_one_bigint_unsigned_of_the_regions_channel_in_text_and_prepared() {
    let h = Harness::start().await;
    let config = h.proxy.config.clone();
    let eu = config.channel_by_name("EU_CHANNEL");
    let cn = config.channel_by_name("CN_CHANNEL");
    let opts = mysql_async::OptsBuilder::from_opts(h.opts()).connect_attributes(HashMap::from([(
        "program_name".to_owned(),
        "checkout-service".to_owned(),
    )]));
    let mut c = mysql_async::Conn::new(opts).await.unwrap();
    // Text protocol: the column is BIGINT UNSIGNED NOT NULL, named as written.
    let result = c
        .query_iter("SELECT NEXT_ORDER_ID('GB')")
        .await
        .unwrap()
        .collect_and_drop::<mysql_async::Row>()
        .await
        .unwrap();
    assert_eq!(result.len(), 1);
    let column = &result[0].columns_ref()[0];
    assert_eq!(column.name_str(), "NEXT_ORDER_ID('GB')");
    assert_eq!(
        column.column_type(),
        mysql_async::consts::ColumnType::MYSQL_TYPE_LONGLONG
    );
    assert!(
        column
            .flags()
            .contains(mysql_async::consts::ColumnFlags::UNSIGNED_FLAG)
    );
    let text_id: u64 = result[0].get(0).unwrap();
    assert_eq!(decoded(&config, text_id), eu);
    let aliased: Option<(u64,)> = c
        .query_first("select next_order_id('cn') AS id")
        .await
        .unwrap();
    assert_eq!(decoded(&config, aliased.unwrap().0), cn);
    // Prepared, with the region inline and as a parameter.
    let inline: Option<u64> = c
        .exec_first("SELECT NEXT_ORDER_ID('FR')", ())
        .await
        .unwrap();
    assert_eq!(decoded(&config, inline.unwrap()), eu);
    let mut last = 0;
    for region in ["GB", "CN", "GB"] {
        let id: Option<u64> = c
            .exec_first("SELECT NEXT_ORDER_ID(?)", (region,))
            .await
            .unwrap();
        let id = id.unwrap();
        assert_eq!(decoded(&config, id), config.channel_by_region(region));
        assert_ne!(id, last);
        last = id;
    }
    // No region, or one the configuration does not know: route key 0, counted against the
    // caller (MySQL user and program_name).
    let before = h.proxy.issuer.stats().top_callers(10);
    for sql in ["SELECT NEXT_ORDER_ID()", "SELECT NEXT_ORDER_ID('XX')"] {
        let id: Option<u64> = c.query_first(sql).await.unwrap();
        let id = id.unwrap();
        assert_eq!(IdLayout::default().route_key(id), 0, "{sql}");
        assert_eq!(decoded(&config, id), None);
    }
    let callers: Vec<(String, u64)> = c.query("SHOW ROUTEKEY CALLERS").await.unwrap();
    let count = |list: &[(String, u64)]| {
        list.iter()
            .find(|(k, _)| k == "app/checkout-service")
            .map_or(0, |(_, n)| *n)
    };
    assert_eq!(count(&callers), count(&before) + 2, "{callers:?}");
    // Any other use of the function is the proxy's to refuse (no backend knows it).
    for sql in [
        "SELECT NEXT_ORDER_ID('GB'), 1",
        "INSERT INTO t_order (order_id, channel) VALUES (NEXT_ORDER_ID('GB'), 'EU_CHANNEL')",
    ] {
        assert_eq!(server_code(c.query_drop(sql).await), 1235, "{sql}");
    }
    let stats: HashMap<String, u64> = c
        .query::<(String, u64), _>("SHOW ROUTEKEY STATS")
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(stats["ids_issued_EU_CHANNEL"], 4, "{stats:?}");
    assert_eq!(stats["ids_issued_CN_CHANNEL"], 2, "{stats:?}");
    assert_eq!(stats["ids_issued_without_region"], 2, "{stats:?}");
    h.stop().await;
}

#[tokio::test]
async fn an_insert_without_order_id_gets_one_id_per_row_on_its_channels_shards() {
    let h = Harness::start().await;
    let config = h.proxy.config.clone();
    let cleanup = Cleanup::default();
    let mut c = h.client().await;
    let note = format!("autoid-{}-{}", std::process::id(), now_ms());
    // Four EU rows (ds0, shards 0-3) by channel or region, as text.
    c.query_drop(format!(
        "INSERT INTO t_order (channel, region, user_id, amount, status, note, created_at) VALUES \
         ('EU_CHANNEL', 'GB', 1, 1, 'NEW', '{note}', NOW()), ('EU_CHANNEL', 'FR', 2, 2, 'NEW', '{note}', NOW()), \
         ('EU_CHANNEL', 'DE', 3, 3, 'NEW', '{note}', NOW()), ('EU_CHANNEL', 'ES', 4, 4, 'NEW', '{note}', NOW())"
    ))
    .await
    .unwrap();
    let first = c
        .last_insert_id()
        .expect("the OK packet carries the first id");
    assert_eq!(c.affected_rows(), 4);
    let seen: Option<(u64, u64)> = c
        .query_first("SELECT LAST_INSERT_ID(), @@last_insert_id")
        .await
        .unwrap();
    assert_eq!(seen, Some((first, first)));
    // INSERT ... SET, and a prepared INSERT with parameters (GLOBAL: shards 4-7, ds0).
    c.query_drop(format!(
        "INSERT INTO t_order SET channel = 'GLOBAL_CHANNEL', region = 'US', user_id = 5, amount = 5, status = 'NEW', note = '{note}', created_at = NOW()"
    ))
    .await
    .unwrap();
    let set_id = c.last_insert_id().unwrap();
    let stmt = "INSERT INTO t_order (region, channel, user_id, amount, status, note, created_at) VALUES (?, ?, ?, 6, 'NEW', ?, NOW())";
    c.exec_drop(stmt, ("JP", "GLOBAL_CHANNEL", 6, &note))
        .await
        .unwrap();
    let prepared_id = c.last_insert_id().unwrap();
    let again: Option<u64> = c.exec_first("SELECT LAST_INSERT_ID()", ()).await.unwrap();
    assert_eq!(again, Some(prepared_id));
    // Every row is on the shard its id routes to, and reads back through the proxy.
    let mut found = Vec::new();
    for shard in 0..8u32 {
        let (ds, table, _) = physical(shard);
        let mut b = backend(ds).await;
        let rows: Vec<(u64, String)> = b
            .exec(
                format!("SELECT order_id, channel FROM {table} WHERE note = ?"),
                (&note,),
            )
            .await
            .unwrap();
        for (id, channel) in rows {
            cleanup.add(id);
            assert_eq!(decoded(&config, id), config.channel_by_name(&channel));
            assert_eq!(expected_shard(&channel, id), shard, "{id} on shard {shard}");
            found.push(id);
        }
    }
    found.sort_unstable();
    assert_eq!(found.len(), 6, "{found:?}");
    for id in [first, set_id, prepared_id] {
        assert!(found.contains(&id), "{id} in {found:?}");
        let n: Option<u64> = c
            .query_first(format!(
                "SELECT COUNT(*) FROM t_order WHERE order_id = {id}"
            ))
            .await
            .unwrap();
        assert_eq!(n, Some(1));
    }
    h.stop().await;
    drop(cleanup);
}

#[tokio::test]
async fn a_channel_not_switched_on_gets_classic_ids_with_index_rows() {
    let mut config = config();
    let eu = config.channel_by_name("EU_CHANNEL").unwrap();
    // Canary: only EU issues route-key ids.
    for (i, on) in config.issuance.route_key_channels.iter_mut().enumerate() {
        *on = i == usize::from(eu.0);
    }
    let h = Harness::start_with(config).await;
    let config = h.proxy.config.clone();
    let cleanup = Cleanup::default();
    let mut c = h.client().await;
    let global: Option<u64> = c.query_first("SELECT NEXT_ORDER_ID('US')").await.unwrap();
    let global = global.unwrap();
    assert_eq!(
        decoded(&config, global),
        None,
        "a classic id does not decode"
    );
    let gb: Option<u64> = c.query_first("SELECT NEXT_ORDER_ID('GB')").await.unwrap();
    assert_eq!(decoded(&config, gb.unwrap()), Some(eu));
    c.query_drop(
        "INSERT INTO t_order (channel, region, user_id, amount, status, created_at) VALUES ('GLOBAL_CHANNEL', 'SG', 9, 9, 'NEW', NOW())",
    )
    .await
    .unwrap();
    let id = cleanup.add(c.last_insert_id().unwrap());
    assert_eq!(decoded(&config, id), None);
    assert_eq!(index_channel(id).await.as_deref(), Some("GLOBAL_CHANNEL"));
    assert_eq!(
        shards_holding(id).await,
        vec![expected_shard("GLOBAL_CHANNEL", id)]
    );
    let status: Option<String> = c
        .query_first(format!("SELECT status FROM t_order WHERE order_id = {id}"))
        .await
        .unwrap();
    assert_eq!(status.as_deref(), Some("NEW"));
    h.stop().await;
    drop(cleanup);
}

#[tokio::test]
async fn an_insert_without_order_id_and_without_a_known_channel_is_refused_and_writes_nothing() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let note = format!("nochannel-{}-{}", std::process::id(), now_ms());
    for sql in [
        format!(
            "INSERT INTO t_order (user_id, amount, status, note, created_at) VALUES (1, 1, 'NEW', '{note}', NOW())"
        ),
        format!(
            "INSERT INTO t_order (channel, region, user_id, amount, status, note, created_at) VALUES ('NOPE', 'XX', 1, 1, 'NEW', '{note}', NOW())"
        ),
        // The second row names no channel: nothing is written, not even the first.
        format!(
            "INSERT INTO t_order (channel, region, user_id, amount, status, note, created_at) VALUES ('EU_CHANNEL', 'GB', 1, 1, 'NEW', '{note}', NOW()), ('', '', 1, 1, 'NEW', '{note}', NOW())"
        ),
    ] {
        let (code, _, message) = server_error(c.query_drop(&sql).await);
        assert_eq!(code, 1526, "{sql}: {message}");
        assert!(message.contains("names no known channel"), "{message}");
    }
    for shard in 0..20u32 {
        let (ds, table, _) = physical(shard);
        let n: Option<u64> = backend(ds)
            .await
            .exec_first(
                format!("SELECT COUNT(*) FROM {table} WHERE note = ?"),
                (&note,),
            )
            .await
            .unwrap();
        assert_eq!(n, Some(0), "shard {shard}");
    }
    // Items belong to an existing order: no id is issued for them.
    let (code, _, message) = server_error(
        c.query_drop(
            "INSERT /*region='GB'*/ INTO t_order_item (item_no, sku, qty, price) VALUES (1, 'x', 1, 1)",
        )
        .await,
    );
    assert_eq!(code, 1235, "{message}");
    assert!(
        message.contains("names the order it belongs to"),
        "{message}"
    );
    assert_usable(&mut c).await;
    h.stop().await;
}

#[tokio::test]
async fn http_issues_ids_as_strings_and_counts_callers_without_a_region() {
    let h = Harness::start().await;
    let config = h.proxy.config.clone();
    let http = reqwest::Client::new();
    let url = format!("http://{}/v1/order-ids", h.admin);
    let reply = http
        .post(&url)
        .json(&serde_json::json!({"region": "GB", "count": 5}))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
    let body: serde_json::Value = reply.json().await.unwrap();
    assert_eq!(body["channel"], "EU_CHANNEL");
    assert_eq!(body["route_key"], 5);
    let ids: Vec<u64> = body["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().expect("ids are strings").parse().unwrap())
        .collect();
    assert_eq!(ids.len(), 5);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    assert!(
        ids.iter()
            .all(|id| decoded(&config, *id) == config.channel_by_name("EU_CHANNEL"))
    );
    // No region (an empty body, any content type): route key 0, counted by User-Agent.
    for _ in 0..3 {
        let reply = http
            .post(&url)
            .header("user-agent", "billing-batch/2.1")
            .header("content-type", "application/x-www-form-urlencoded")
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), 200);
        let body: serde_json::Value = reply.json().await.unwrap();
        assert_eq!(body["channel"], serde_json::Value::Null);
        assert_eq!(body["route_key"], 0);
    }
    let mut c = h.client().await;
    let callers: Vec<(String, u64)> = c.query("SHOW ROUTEKEY CALLERS").await.unwrap();
    assert!(
        callers.contains(&("http/billing-batch/2.1".to_owned(), 3)),
        "{callers:?}"
    );
    // Bad requests: 400 with a message, nothing issued.
    for body in [
        r#"{"region": "GB", "count": 0}"#,
        r#"{"region": "GB", "count": 10001}"#,
        r#"{"region": "GB", "count": -1}"#,
        r#"{"region": 5}"#,
        r#"{"regoin": "GB"}"#,
        r#"["GB", 3]"#,
        "not json",
    ] {
        let reply = http.post(&url).body(body).send().await.unwrap();
        assert_eq!(reply.status(), 400, "{body}");
        let e: serde_json::Value = reply.json().await.unwrap();
        assert!(e["error"].is_string(), "{body}: {e}");
    }
    for probe in ["healthz", "readyz"] {
        let reply = http
            .get(format!("http://{}/{probe}", h.admin))
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), 200, "{probe}");
    }
    h.stop().await;
}

#[tokio::test]
async fn prepared_inserts_without_order_id_bind_the_issued_ids_to_one_backend_statement() {
    let h = Harness::start().await;
    let config = h.proxy.config.clone();
    let cleanup = Cleanup::default();
    let mut c = h.client().await;
    let note = format!("prepared-autoid-{}-{}", std::process::id(), now_ms());
    let mut ds0 = backend(0).await;
    let prepared_count = |rows: Vec<(String, u64)>| rows[0].1;
    let before = prepared_count(
        ds0.query("SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'")
            .await
            .unwrap(),
    );
    let two_rows = "INSERT INTO t_order (channel, region, user_id, amount, status, note, created_at) \
                    VALUES (?, ?, ?, 1, 'NEW', ?, NOW()), (?, ?, ?, 2, 'NEW', ?, NOW())";
    let set_form = "INSERT INTO t_order SET channel = ?, region = ?, user_id = ?, amount = 3, status = 'NEW', note = ?, created_at = NOW()";
    let mut first_ids = Vec::new();
    for n in 0..150u64 {
        c.exec_drop(
            two_rows,
            (
                "EU_CHANNEL",
                "GB",
                1000 + n,
                &note,
                "GLOBAL_CHANNEL",
                "US",
                2000 + n,
                &note,
            ),
        )
        .await
        .unwrap();
        first_ids.push(c.last_insert_id().unwrap());
        c.exec_drop(set_form, ("EU_CHANNEL", "DE", 3000 + n, &note))
            .await
            .unwrap();
        first_ids.push(c.last_insert_id().unwrap());
    }
    let after = prepared_count(
        ds0.query("SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'")
            .await
            .unwrap(),
    );
    // A statement per shard combination, not one per execution (which would keep 128).
    assert!(
        after < before + 48,
        "prepared statements on ds0 went from {before} to {after}"
    );
    // Every row has its own parameters, its own id of its channel, on that id's shard.
    let mut rows = Vec::new();
    for shard in 0..8u32 {
        let (ds, table, _) = physical(shard);
        let found: Vec<(u64, String, u64, String)> = backend(ds)
            .await
            .exec(
                format!("SELECT order_id, channel, user_id, CAST(amount AS CHAR) FROM {table} WHERE note = ?"),
                (&note,),
            )
            .await
            .unwrap();
        for (id, channel, user, amount) in found {
            cleanup.add(id);
            assert_eq!(expected_shard(&channel, id), shard);
            assert_eq!(decoded(&config, id), config.channel_by_name(&channel));
            let want = match amount.as_str() {
                "1.00" => ("EU_CHANNEL", 1000..1150),
                "2.00" => ("GLOBAL_CHANNEL", 2000..2150),
                _ => ("EU_CHANNEL", 3000..3150),
            };
            assert_eq!(channel, want.0, "{id} amount {amount}");
            assert!(
                want.1.contains(&user),
                "{id}: user {user} with amount {amount}"
            );
            rows.push(id);
        }
    }
    assert_eq!(rows.len(), 450);
    assert!(first_ids.iter().all(|id| rows.contains(id)));
    let unique: std::collections::HashSet<u64> = rows.iter().copied().collect();
    assert_eq!(unique.len(), rows.len());
    h.stop().await;
    drop(cleanup);
}

#[tokio::test]
async fn an_http_id_request_may_wait_for_new_lease_rows_to_settle() {
    // Lease rows created now are usable a lease time and its grace later (7.2 s here): the
    // first request waits for them rather than timing out.
    let mut config = lease_config("settle_http");
    config.issuance.lease_ttl = std::time::Duration::from_secs(6);
    drop_lease_table(&config).await;
    let h = Harness::start_with(config.clone()).await;
    let started = std::time::Instant::now();
    let reply = reqwest::Client::new()
        .post(format!("http://{}/v1/order-ids", h.admin))
        .body(r#"{"region": "GB"}"#)
        .send()
        .await
        .unwrap();
    let status = reply.status().as_u16();
    let body: serde_json::Value = reply.json().await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["ids"].as_array().map(Vec::len), Some(1), "{body}");
    assert!(
        started.elapsed() > std::time::Duration::from_secs(5),
        "waited for the rows to settle: {:?}",
        started.elapsed()
    );
    h.stop().await;
    drop_lease_table(&config).await;
}
