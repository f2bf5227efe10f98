//! Writes land on exactly the right shard and nowhere else: each check reads the physical
//! tables directly. Decoy rows with the same order id on wrong shards (put there directly)
//! show that an UPDATE or DELETE touched only the right one.

mod common;

use common::*;
use mysql_async::Conn;
use mysql_async::prelude::*;

/// `status` and `note` of the physical `t_order` row of `id` on `shard`.
async fn status_note(shard: u32, id: u64) -> Option<(String, String)> {
    physical_row(shard, id)
        .await
        .map(|r| (show(&r[5]), show(&r[6])))
}

/// A shard of another channel than `channel_name`, and another shard of the same channel.
fn decoy_shards(channel_name: &str, id: u64) -> [u32; 2] {
    let right = expected_shard(channel_name, id);
    let base = channel(channel_name).2;
    let same_channel = base + (right - base + 1) % 4;
    // Channels are aligned groups of four shards: 7 further is always another channel.
    let other_channel = (right + 7) % 20;
    [same_channel, other_channel]
}

async fn run(c: &mut Conn, sql: &str) -> u64 {
    exec(c, sql).await;
    c.affected_rows()
}

#[tokio::test]
async fn insert_update_delete_of_new_ids_touch_exactly_their_shard() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let guard = Cleanup::default();
    for (name, code, ..) in CHANNELS {
        let id = guard.add(fresh_new_id(code));
        let shard = expected_shard(name, id);
        assert_eq!(
            run(&mut c, &insert_order_sql(id, name, "new order")).await,
            1
        );
        let items = format!(
            "INSERT INTO t_order_item (order_id, item_no, sku, qty, price) VALUES ({id}, 1, 'SKU-A', 1, 1.00), ({id}, 2, 'SKU-B', 2, 2.00)"
        );
        assert_eq!(run(&mut c, &items).await, 2);
        assert_eq!(
            placement(id).await,
            (vec![shard], vec![shard]),
            "{name} {id}"
        );
        assert_eq!(
            status_note(shard, id).await,
            Some(("CREATED".into(), "new order".into()))
        );

        // Decoys with the same id elsewhere must not be touched by UPDATE or DELETE.
        let decoys = decoy_shards(name, id);
        for d in decoys {
            insert_physical(d, id, name, "decoy").await;
        }
        let sql =
            format!("UPDATE t_order SET status = 'PAID', note = 'updated' WHERE order_id = {id}");
        assert_eq!(run(&mut c, &sql).await, 1, "{sql}");
        assert_eq!(
            status_note(shard, id).await,
            Some(("PAID".into(), "updated".into()))
        );
        let sql = format!("UPDATE t_order_item SET qty = qty + 10 WHERE order_id = {id}");
        assert_eq!(run(&mut c, &sql).await, 2, "{sql}");
        for d in decoys {
            assert_eq!(
                status_note(d, id).await,
                Some(("CREATED".into(), "decoy".into())),
                "{name}: decoy on shard {d} changed"
            );
        }
        assert_eq!(
            run(
                &mut c,
                &format!("DELETE FROM t_order_item WHERE order_id = {id}")
            )
            .await,
            2
        );
        assert_eq!(
            run(
                &mut c,
                &format!("DELETE FROM t_order WHERE order_id = {id}")
            )
            .await,
            1
        );
        let mut left = decoys.to_vec();
        left.sort();
        assert_eq!(
            placement(id).await,
            (left, vec![]),
            "{name}: only the decoys remain"
        );
    }
    drop(guard);
    h.stop().await;
}

#[tokio::test]
async fn multi_row_insert_over_shards_of_one_server_is_split_by_shard() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let guard = Cleanup::default();
    // ds0: EU shards 0-3 and CN shards 8-9.
    let mut rows_ds0: Vec<(u64, &str)> = (0..4)
        .map(|rem| (guard.add(fresh_new_id_mod(5, rem)), "EU_CHANNEL"))
        .collect();
    rows_ds0.push((guard.add(fresh_new_id_mod(1, 1)), "CN_CHANNEL"));
    // ds1: CN shards 10-11, BIZ, CORP.
    let rows_ds1: Vec<(u64, &str)> = vec![
        (guard.add(fresh_new_id_mod(1, 2)), "CN_CHANNEL"),
        (guard.add(fresh_new_id_mod(1, 3)), "CN_CHANNEL"),
        (guard.add(fresh_new_id(3)), "BIZ_CHANNEL"),
        (guard.add(fresh_new_id(4)), "CORP_CHANNEL"),
    ];
    for set in [&rows_ds0, &rows_ds1] {
        let tuples: Vec<String> = set
            .iter()
            .map(|(id, ch)| order_tuple(*id, ch, "multi"))
            .collect();
        let sql = format!(
            "INSERT INTO t_order {ORDER_COLUMNS} VALUES {}",
            tuples.join(", ")
        );
        assert_eq!(
            run(&mut c, &sql).await,
            set.len() as u64,
            "affected rows summed over shards"
        );
        for (id, ch) in set.iter() {
            assert_eq!(
                placement(*id).await.0,
                vec![expected_shard(ch, *id)],
                "{ch} {id}"
            );
        }
    }
    // An UPDATE over several shards of one server is one statement on that server.
    let list = rows_ds0
        .iter()
        .map(|(id, _)| id.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let sql = format!("UPDATE t_order SET status = 'PAID' WHERE order_id IN ({list})");
    assert_eq!(run(&mut c, &sql).await, rows_ds0.len() as u64);
    for (id, ch) in &rows_ds0 {
        assert_eq!(
            status_note(expected_shard(ch, *id), *id).await.unwrap().0,
            "PAID"
        );
    }
    let sql = format!("DELETE FROM t_order WHERE order_id IN ({list})");
    assert_eq!(run(&mut c, &sql).await, rows_ds0.len() as u64);
    for (id, _) in &rows_ds0 {
        assert_eq!(placement(*id).await.0, Vec::<u32>::new());
    }
    drop(guard);
    h.stop().await;
}

#[tokio::test]
async fn with_refuse_writes_spanning_both_servers_are_refused_and_change_nothing() {
    let h = Harness::start_with(refusing(config())).await;
    let mut c = h.client().await;
    let guard = Cleanup::default();
    let eu = guard.add(fresh_new_id(5));
    let biz = guard.add(fresh_new_id(3));
    let cn_ds0 = guard.add(fresh_new_id_mod(1, 0));
    let cn_ds1 = guard.add(fresh_new_id_mod(1, 2));
    for pair in [
        [(eu, "EU_CHANNEL"), (biz, "BIZ_CHANNEL")],
        [(cn_ds0, "CN_CHANNEL"), (cn_ds1, "CN_CHANNEL")],
    ] {
        let sql = format!(
            "INSERT INTO t_order {ORDER_COLUMNS} VALUES {}, {}",
            order_tuple(pair[0].0, pair[0].1, "x"),
            order_tuple(pair[1].0, pair[1].1, "x")
        );
        assert_eq!(error_code(&mut c, &sql).await, 1235, "{sql}");
        for (id, _) in pair {
            assert_eq!(
                placement(id).await,
                (vec![], vec![]),
                "refused insert left {id} behind"
            );
        }
    }
    // UPDATE / DELETE with an IN list over both servers: refused, nothing changed.
    exec(&mut c, &insert_order_sql(eu, "EU_CHANNEL", "x")).await;
    exec(&mut c, &insert_order_sql(biz, "BIZ_CHANNEL", "x")).await;
    let sql = format!("UPDATE t_order SET status = 'PAID' WHERE order_id IN ({eu}, {biz})");
    assert_eq!(error_code(&mut c, &sql).await, 1235, "{sql}");
    let sql = format!("DELETE FROM t_order WHERE order_id IN ({eu}, {biz})");
    assert_eq!(error_code(&mut c, &sql).await, 1235, "{sql}");
    assert_eq!(
        status_note(expected_shard("EU_CHANNEL", eu), eu)
            .await
            .unwrap()
            .0,
        "CREATED"
    );
    assert_eq!(
        status_note(expected_shard("BIZ_CHANNEL", biz), biz)
            .await
            .unwrap()
            .0,
        "CREATED"
    );
    assert_usable(&mut c).await;
    drop(guard);
    h.stop().await;
}

#[tokio::test]
async fn legacy_insert_writes_an_index_row_and_later_writes_follow_it() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let guard = Cleanup::default();
    // Bits 17-14 say CORP (4); the order belongs to GLOBAL.
    let id = guard.add(fresh_legacy_id_with_code(4));
    let shard = expected_shard("GLOBAL_CHANNEL", id);
    assert_eq!(
        run(&mut c, &insert_order_sql(id, "GLOBAL_CHANNEL", "legacy")).await,
        1
    );
    assert_eq!(index_channel(id).await.as_deref(), Some("GLOBAL_CHANNEL"));
    assert_eq!(placement(id).await.0, vec![shard]);
    let lookalike_shard = expected_shard("CORP_CHANNEL", id);
    insert_physical(lookalike_shard, id, "CORP_CHANNEL", "decoy").await;

    let got: Option<String> = c
        .query_first(format!("SELECT note FROM t_order WHERE order_id = {id}"))
        .await
        .unwrap();
    assert_eq!(got.as_deref(), Some("legacy"));
    let sql = format!("UPDATE t_order SET status = 'SHIPPED' WHERE order_id = {id}");
    assert_eq!(run(&mut c, &sql).await, 1);
    assert_eq!(status_note(shard, id).await.unwrap().0, "SHIPPED");
    assert_eq!(status_note(lookalike_shard, id).await.unwrap().0, "CREATED");
    assert_eq!(
        run(
            &mut c,
            &format!("DELETE FROM t_order WHERE order_id = {id}")
        )
        .await,
        1
    );
    assert_eq!(placement(id).await.0, vec![lookalike_shard]);

    // A region without a channel name routes a legacy insert too (JP -> GLOBAL).
    let id2 = guard.add(fresh_legacy_id());
    let sql = format!(
        "INSERT INTO t_order {ORDER_COLUMNS} VALUES ({id2}, 'web', 'JP', 1, 1.00, 'CREATED', NULL, NOW(3))"
    );
    assert_eq!(run(&mut c, &sql).await, 1);
    assert_eq!(index_channel(id2).await.as_deref(), Some("GLOBAL_CHANNEL"));
    assert_eq!(
        placement(id2).await.0,
        vec![expected_shard("GLOBAL_CHANNEL", id2)]
    );
    drop(guard);
    h.stop().await;
}

#[tokio::test]
async fn legacy_insert_whose_index_row_names_another_channel_is_refused() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let guard = Cleanup::default();
    let id = guard.add(fresh_legacy_id());
    let mut meta = backend(0).await;
    exec(
        &mut meta,
        &format!(
            "INSERT INTO order_meta.t_order_index (order_id, channel) VALUES ({id}, 'CN_CHANNEL')"
        ),
    )
    .await;
    let sql = insert_order_sql(id, "EU_CHANNEL", "wrong channel");
    assert_eq!(error_code(&mut c, &sql).await, 1526, "{sql}");
    assert_eq!(placement(id).await, (vec![], vec![]));
    assert_eq!(index_channel(id).await.as_deref(), Some("CN_CHANNEL"));
    // A row that names no known channel or region cannot be placed either.
    let id2 = guard.add(fresh_legacy_id());
    let sql = format!(
        "INSERT INTO t_order {ORDER_COLUMNS} VALUES ({id2}, 'NO_SUCH', 'XX', 1, 1.00, 'CREATED', NULL, NOW(3))"
    );
    assert_eq!(error_code(&mut c, &sql).await, 1526, "{sql}");
    assert_eq!(placement(id2).await, (vec![], vec![]));
    assert_eq!(index_channel(id2).await, None);
    assert_usable(&mut c).await;
    drop(guard);
    h.stop().await;
}

#[tokio::test]
async fn update_or_delete_of_a_legacy_id_missing_from_the_index_is_refused() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let guard = Cleanup::default();
    // The order exists on its shard but has no index row (a lookalike: bits say EU).
    let id = guard.add(fresh_legacy_id_with_code(5));
    let shard = expected_shard("BIZ_CHANNEL", id);
    insert_physical(shard, id, "BIZ_CHANNEL", "unindexed").await;
    insert_physical(expected_shard("EU_CHANNEL", id), id, "EU_CHANNEL", "decoy").await;
    for sql in [
        format!("UPDATE t_order SET status = 'PAID' WHERE order_id = {id}"),
        format!("UPDATE t_order_item SET qty = 0 WHERE order_id = {id}"),
        format!("DELETE FROM t_order WHERE order_id = {id}"),
    ] {
        assert_eq!(error_code(&mut c, &sql).await, 1526, "{sql}");
    }
    assert_eq!(
        status_note(shard, id).await,
        Some(("CREATED".into(), "unindexed".into()))
    );
    assert_eq!(
        status_note(expected_shard("EU_CHANNEL", id), id).await,
        Some(("CREATED".into(), "decoy".into()))
    );
    assert_eq!(
        index_channel(id).await,
        None,
        "a refused write adds no index row"
    );
    assert_usable(&mut c).await;
    drop(guard);
    h.stop().await;
}

#[tokio::test]
async fn a_hint_routes_writes_of_a_legacy_id_the_index_does_not_know() {
    let h = Harness::start().await;
    let stats = h.proxy.router_stats.clone();
    let mut c = h.client().await;
    let guard = Cleanup::default();
    let id = guard.add(fresh_legacy_id_with_code(2));
    let shard = expected_shard("BIZ_CHANNEL", id);
    let decoy = expected_shard("GLOBAL_CHANNEL", id);
    insert_physical(shard, id, "BIZ_CHANNEL", "unindexed").await;
    insert_physical(decoy, id, "GLOBAL_CHANNEL", "decoy").await;
    let followed = stats.hints_followed();
    for sql in [
        format!(
            "/*route_key='BIZ_CHANNEL'*/ UPDATE t_order SET status = 'PAID' WHERE order_id = {id}"
        ),
        format!("UPDATE t_order SET note = 'hinted' WHERE order_id = {id} /*region='HK'*/"),
    ] {
        assert_eq!(run(&mut c, &sql).await, 1, "{sql}");
    }
    assert_eq!(
        status_note(shard, id).await,
        Some(("PAID".into(), "hinted".into()))
    );
    assert_eq!(
        status_note(decoy, id).await,
        Some(("CREATED".into(), "decoy".into()))
    );
    assert_eq!(stats.hints_followed(), followed + 2);
    let sql = format!("DELETE /*route_key='BIZ_CHANNEL'*/ FROM t_order WHERE order_id = {id}");
    assert_eq!(run(&mut c, &sql).await, 1, "{sql}");
    assert_eq!(placement(id).await.0, vec![decoy]);
    drop(guard);
    h.stop().await;
}

#[tokio::test]
async fn a_hint_contradicting_the_index_is_refused_for_writes() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let guard = Cleanup::default();
    let id = guard.add(fresh_legacy_id());
    exec(&mut c, &insert_order_sql(id, "CORP_CHANNEL", "indexed")).await;
    let shard = expected_shard("CORP_CHANNEL", id);
    let wrong = expected_shard("EU_CHANNEL", id);
    insert_physical(wrong, id, "EU_CHANNEL", "decoy").await;
    for sql in [
        format!(
            "/*route_key='EU_CHANNEL'*/ UPDATE t_order SET status = 'PAID' WHERE order_id = {id}"
        ),
        format!(
            "UPDATE t_order SET status = 'PAID' WHERE order_id = {id} AND channel = 'EU_CHANNEL'"
        ),
        format!("DELETE FROM t_order WHERE order_id = {id} /*region='GB'*/"),
    ] {
        assert_eq!(error_code(&mut c, &sql).await, 1526, "{sql}");
    }
    assert_eq!(status_note(shard, id).await.unwrap().0, "CREATED");
    assert_eq!(status_note(wrong, id).await.unwrap().0, "CREATED");
    // The right hint is accepted.
    let sql = format!(
        "/*route_key='CORP_CHANNEL'*/ UPDATE t_order SET status = 'PAID' WHERE order_id = {id}"
    );
    assert_eq!(run(&mut c, &sql).await, 1);
    assert_eq!(status_note(shard, id).await.unwrap().0, "PAID");
    drop(guard);
    h.stop().await;
}

#[tokio::test]
async fn an_update_may_not_move_an_order_to_another_shard() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let guard = Cleanup::default();
    let id = guard.add(fresh_new_id(2));
    let other = fresh_new_id(2);
    exec(&mut c, &insert_order_sql(id, "GLOBAL_CHANNEL", "stay")).await;
    for sql in [
        format!("UPDATE t_order SET order_id = {other} WHERE order_id = {id}"),
        format!("UPDATE t_order SET channel = 'EU_CHANNEL' WHERE order_id = {id}"),
    ] {
        assert_eq!(error_code(&mut c, &sql).await, 1235, "{sql}");
    }
    // Setting them to the values they already have is fine; the region is the order's
    // data, any region (SPEC §4).
    for sql in [
        format!("UPDATE t_order SET order_id = {id}, note = 'same id' WHERE order_id = {id}"),
        format!("UPDATE t_order SET region = 'GB' WHERE order_id = {id}"),
        format!("UPDATE t_order SET region = 'JP' WHERE order_id = {id}"),
    ] {
        exec(&mut c, &sql).await;
    }
    let shard = expected_shard("GLOBAL_CHANNEL", id);
    assert_eq!(placement(id).await.0, vec![shard]);
    let row = physical_row(shard, id).await.unwrap();
    assert_eq!(
        (show(&row[1]), show(&row[2]), show(&row[6])),
        ("GLOBAL_CHANNEL".into(), "JP".into(), "same id".into())
    );
    drop(guard);
    h.stop().await;
}

/// An id carrying route key `code` but minted at `unix_ms` (outside its channel's window
/// when before `route_key_since` or in the future): it must be treated as legacy.
fn id_minted_at(code: u8, unix_ms: u64) -> u64 {
    use routekey_proxy::id::{IdFields, IdLayout, SNOWFLAKE_EPOCH_MS};
    // The sequence is taken from a fresh legacy id: unique in this process.
    let unique = fresh_legacy_id();
    IdLayout::default()
        .compose(IdFields {
            timestamp: unix_ms - SNOWFLAKE_EPOCH_MS + (unique % 1000),
            worker: u64::from(std::process::id()) % 32,
            route_key: u64::from(code),
            sequence: unique % 16384,
        })
        .unwrap()
}

#[tokio::test]
async fn ids_outside_their_channels_decode_window_are_placed_as_legacy() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let guard = Cleanup::default();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let cases = [
        // CORP code, minted 2025-03-01, before CORP's route_key_since (2025-06-01).
        (id_minted_at(4, 1_740_787_200_000), "BIZ_CHANNEL"),
        // EU code, minted an hour from now (beyond the clock-skew allowance).
        (id_minted_at(5, now + 3_600_000), "CN_CHANNEL"),
    ];
    for (id, owner) in cases {
        guard.add(id);
        exec(&mut c, &insert_order_sql(id, owner, "window")).await;
        let shard = expected_shard(owner, id);
        assert_eq!(placement(id).await.0, vec![shard], "{id} of {owner}");
        assert_eq!(
            index_channel(id).await.as_deref(),
            Some(owner),
            "{id} gets an index row"
        );
        let sql = format!("UPDATE t_order SET status = 'PAID' WHERE order_id = {id}");
        exec(&mut c, &sql).await;
        assert_eq!(c.affected_rows(), 1, "{sql}");
        assert_eq!(status_note(shard, id).await.unwrap().0, "PAID");
    }
    drop(guard);
    h.stop().await;
}

#[tokio::test]
async fn a_multi_row_insert_over_several_shards_is_all_or_nothing() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let guard = Cleanup::default();
    // EU shards 0-3 (ds0); the last row's id already exists.
    let ids: Vec<u64> = (0..4)
        .map(|rem| guard.add(fresh_new_id_mod(5, rem)))
        .collect();
    exec(&mut c, &insert_order_sql(ids[3], "EU_CHANNEL", "exists")).await;
    let tuples: Vec<String> = ids
        .iter()
        .map(|id| order_tuple(*id, "EU_CHANNEL", "batch"))
        .collect();
    let sql = format!(
        "INSERT INTO t_order {ORDER_COLUMNS} VALUES {}",
        tuples.join(", ")
    );
    assert_eq!(error_code(&mut c, &sql).await, 1062, "{sql}");
    for id in &ids[..3] {
        assert_eq!(
            placement(*id).await.0,
            Vec::<u32>::new(),
            "autocommit: a failed INSERT leaves none of its rows ({id})"
        );
    }
    // Inside a transaction the failed statement is undone, the earlier one kept.
    let earlier = guard.add(fresh_new_id(5));
    exec(&mut c, "BEGIN").await;
    exec(&mut c, &insert_order_sql(earlier, "EU_CHANNEL", "earlier")).await;
    assert_eq!(error_code(&mut c, &sql).await, 1062, "{sql}");
    exec(&mut c, "COMMIT").await;
    assert_eq!(
        placement(earlier).await.0,
        vec![expected_shard("EU_CHANNEL", earlier)]
    );
    for id in &ids[..3] {
        assert_eq!(
            placement(*id).await.0,
            Vec::<u32>::new(),
            "in a transaction: the failed INSERT's rows were committed ({id})"
        );
    }
    drop(guard);
    h.stop().await;
}

#[tokio::test]
async fn an_insert_whose_channel_contradicts_its_id_is_refused() {
    let h = Harness::start().await;
    let id = fresh_new_id(5); // EU
    let cleanup = Cleanup::new(&[id]);
    let mut c = h.client().await;
    for (channel, region) in [("BIZ_CHANNEL", "GB"), ("BIZ_CHANNEL", "HK")] {
        let sql = format!(
            "INSERT INTO t_order {ORDER_COLUMNS} VALUES ({id}, '{channel}', '{region}', 7, 1, 'NEW', 'x', NOW())"
        );
        let (code, _, message) = server_error(c.query_drop(&sql).await);
        assert_eq!(code, 1526, "{sql}: {message}");
        assert!(
            message.contains("names another channel") || message.contains("conflicting"),
            "{message}"
        );
        let r = c
            .exec_drop(
                format!(
                    "INSERT INTO t_order {ORDER_COLUMNS} VALUES (?, ?, ?, 7, 1, 'NEW', 'x', NOW())"
                ),
                (id, channel, region),
            )
            .await;
        assert_eq!(server_code(r), 1526, "prepared {channel} {region}");
    }
    assert!(shards_holding(id).await.is_empty());
    // Agreeing values are taken.
    exec(&mut c, &insert_order_sql(id, "EU_CHANNEL", "ok")).await;
    assert_eq!(
        shards_holding(id).await,
        vec![expected_shard("EU_CHANNEL", id)]
    );
    drop(cleanup);
}

#[tokio::test]
async fn a_region_of_another_channel_is_the_orders_data() {
    // A UK customer buying on the GLOBAL site: a GLOBAL id, channel GLOBAL, region GB.
    let h = Harness::start().await;
    let mut c = h.client().await;
    let guard = Cleanup::default();
    let id = guard.add(fresh_new_id(2));
    exec(
        &mut c,
        &format!(
            "INSERT INTO t_order {ORDER_COLUMNS} VALUES ({id}, 'GLOBAL_CHANNEL', 'GB', 7, 1, 'NEW', 'uk on global', NOW())"
        ),
    )
    .await;
    // Prepared, a second order: region only, its id decodes to GLOBAL.
    let other = guard.add(fresh_new_id(2));
    c.exec_drop(
        format!("INSERT INTO t_order {ORDER_COLUMNS} VALUES (?, ?, ?, 7, 1, 'NEW', 'x', NOW())"),
        (other, "GLOBAL_CHANNEL", "FR"),
    )
    .await
    .unwrap();
    for order in [id, other] {
        let shard = expected_shard("GLOBAL_CHANNEL", order);
        assert_eq!(shards_holding(order).await, vec![shard]);
    }
    let row = physical_row(expected_shard("GLOBAL_CHANNEL", id), id)
        .await
        .unwrap();
    assert_eq!(
        (show(&row[1]), show(&row[2])),
        ("GLOBAL_CHANNEL".into(), "GB".into())
    );
    // A legacy order of that customer: the index table knows its channel, and a `region`
    // predicate of a write is the row's data, not a route that contradicts the index.
    let legacy = guard.add(fresh_legacy_id());
    exec(
        &mut c,
        &format!(
            "INSERT INTO t_order {ORDER_COLUMNS} VALUES ({legacy}, 'GLOBAL_CHANNEL', 'GB', 7, 1, 'NEW', 'legacy uk', NOW())"
        ),
    )
    .await;
    assert_eq!(
        index_channel(legacy).await.as_deref(),
        Some("GLOBAL_CHANNEL")
    );
    let shard = expected_shard("GLOBAL_CHANNEL", legacy);
    assert_eq!(shards_holding(legacy).await, vec![shard]);
    let update =
        format!("UPDATE t_order SET note = 'updated' WHERE order_id = {legacy} AND region = 'GB'");
    assert_eq!(run(&mut c, &update).await, 1, "{update}");
    assert_eq!(
        show(&physical_row(shard, legacy).await.unwrap()[6]),
        "updated"
    );
    // A region hint is a route, and still refused when the index says otherwise.
    let hinted = format!("/*region='GB'*/ UPDATE t_order SET note = 'x' WHERE order_id = {legacy}");
    assert_eq!(error_code(&mut c, &hinted).await, 1526);
    let delete = format!("DELETE FROM t_order WHERE order_id = {legacy} AND region = 'GB'");
    assert_eq!(run(&mut c, &delete).await, 1, "{delete}");
    assert_eq!(shards_holding(legacy).await, Vec::<u32>::new());
    // A channel the proxy cannot read leaves the region alone to decide: refused, nothing
    // written, no index row.
    for channel in [
        "CONCAT('GLOBAL_', 'CHANNEL')",
        "'GLOBAL_CHANNEL' COLLATE utf8mb4_bin",
    ] {
        let unread = guard.add(fresh_legacy_id());
        let sql = format!(
            "INSERT INTO t_order {ORDER_COLUMNS} VALUES ({unread}, {channel}, 'GB', 7, 1, 'NEW', 'x', NOW())"
        );
        assert_eq!(error_code(&mut c, &sql).await, 1526, "{sql}");
        assert_eq!(shards_holding(unread).await, Vec::<u32>::new(), "{sql}");
        assert_eq!(index_channel(unread).await, None, "{sql}");
    }
    drop(guard);
    h.stop().await;
}
