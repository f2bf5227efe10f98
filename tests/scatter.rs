//! Statements without a usable order id (SPEC §5): the per-user scatter policy and the
//! `/*scatter='...'*/` hint, narrowing to one channel's shards, scatter writes kept on one
//! datasource, a failing shard failing the whole statement, `sharding.merge_row_cap`,
//! `sharding.max_fan_out`, and scatters inside a transaction (probes: tests/probe.rs).
//!
//! Rows these tests write carry user ids 910_000_000..910_000_999; reads compared with
//! `orders_ref` are restricted to seeded user ids (100..300) so other tests' rows do not
//! disturb them.

mod common;

use common::*;
use mysql_async::prelude::*;
use mysql_async::{Conn, OptsBuilder};
use routekey_proxy::config::{Config, Scatter, User};

/// Seeded rows only (the reference holds no others).
const SEEDED: &str = "user_id BETWEEN 100 AND 300";

/// The demo configuration with one more user.
fn with_user(mut config: Config, name: &str, scatter: Scatter, writes: Scatter) -> Config {
    config.users.push(User {
        scatter,
        scatter_writes: writes,
        ..User::new(name, name)
    });
    config
}

/// A client connection as `user` (password = name).
async fn client_as(h: &Harness, user: &str) -> Conn {
    let opts = OptsBuilder::from_opts(h.opts())
        .user(Some(user))
        .pass(Some(user));
    Conn::new(opts).await.expect("connect as another user")
}

/// (code, message) of a statement that must fail with a MySQL error.
async fn failure(c: &mut Conn, sql: &str) -> (u16, String) {
    let (code, _, message) = server_error(try_rows(c, sql).await);
    (code, message)
}

/// Asserts `sql` is refused with 1235 and a message containing `part`.
async fn refused(c: &mut Conn, sql: &str, part: &str) {
    let (code, message) = failure(c, sql).await;
    assert_eq!(code, 1235, "{sql}: {message}");
    assert!(message.contains(part), "{sql}: {message:?} lacks {part:?}");
}

/// The shards of EXPLAIN ROUTE's rows, in order: a row's shard, or the numbers of the
/// physical tables a combined statement lists.
async fn explained_shards(c: &mut Conn, sql: &str) -> Vec<u32> {
    rows(c, &format!("EXPLAIN ROUTE {sql}"))
        .await
        .iter()
        .flat_map(|r| match r[4] {
            mysql_async::Value::NULL => show(&r[6])
                .split(", ")
                .map(|t| t.rsplit('_').next().unwrap().parse().unwrap())
                .collect(),
            _ => vec![show(&r[4]).parse().unwrap()],
        })
        .collect()
}

/// Inserts one order through `c` for `user_id`, with `note`.
async fn put(c: &mut Conn, id: u64, channel_name: &str, user_id: u64, note: &str) {
    let region = channel(channel_name).3;
    exec(
        c,
        &format!(
            "INSERT INTO t_order {ORDER_COLUMNS} VALUES ({id}, '{channel_name}', '{region}', {user_id}, 1.00, 'CREATED', '{note}', '2026-01-02 03:04:05.000')"
        ),
    )
    .await;
}

/// The note of `id` read straight from its physical shard.
async fn physical_note(channel_name: &str, id: u64) -> Option<String> {
    physical_row(expected_shard(channel_name, id), id)
        .await
        .map(|r| show(&r[6]))
}

#[tokio::test]
async fn scatter_reads_merge_exactly_as_the_reference_table_answers() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let mut r = reference().await;
    for sql in [
        format!(
            "SELECT order_id, amount FROM t_order WHERE {SEEDED} ORDER BY amount DESC, order_id LIMIT 7 OFFSET 3"
        ),
        format!(
            "SELECT channel, COUNT(*), SUM(amount), MIN(user_id), MAX(user_id) FROM t_order WHERE {SEEDED} GROUP BY channel ORDER BY channel"
        ),
        format!("SELECT COUNT(*), SUM(amount) FROM t_order WHERE {SEEDED}"),
        format!("SELECT DISTINCT region FROM t_order WHERE {SEEDED} ORDER BY region"),
        format!(
            "SELECT region, COUNT(*) AS n FROM t_order WHERE {SEEDED} GROUP BY region HAVING n > 20 ORDER BY n DESC, region"
        ),
        "SELECT COUNT(*), SUM(qty * price) FROM t_order_item WHERE sku LIKE 'SKU-1%'".to_owned(),
    ] {
        let got = rows(&mut c, &sql).await;
        let want = rows(&mut r, &sql).await;
        assert!(!want.is_empty(), "{sql}");
        assert_same_rows(&got, &want, &sql);
    }
    h.stop().await;
}

#[tokio::test]
async fn a_user_refusing_scatter_gets_1235_unless_a_hint_allows_one_statement() {
    let config = with_user(config(), "narrow", Scatter::Refuse, Scatter::Refuse);
    let h = Harness::start_with(config).await;
    let mut n = client_as(&h, "narrow").await;
    let mut app = h.client().await;
    let mut r = reference().await;
    let count = format!("SELECT COUNT(*) FROM t_order WHERE {SEEDED}");
    let want = rows(&mut r, &count).await;
    let before = route_stats(&mut app).await;

    refused(&mut n, &count, "scatter = \"refuse\"").await;
    refused(
        &mut n,
        "SELECT * FROM t_order_item WHERE sku = 'x'",
        "/*scatter='allow'*/",
    )
    .await;
    for allowed in [
        format!("/*scatter='allow'*/ {count}"),
        format!("{count} /*scatter='allow'*/"),
        format!("SELECT /*app='x',scatter='allow'*/ COUNT(*) FROM t_order WHERE {SEEDED}"),
    ] {
        assert_same_rows(&rows(&mut n, &allowed).await, &want, &allowed);
    }
    // Reads by order id are no scatter: the refusing user still reads them.
    let id = seed().channels["BIZ_CHANNEL"].new_format_ids[5];
    let got = rows(
        &mut n,
        &format!("SELECT order_id FROM t_order WHERE order_id = {id}"),
    )
    .await;
    assert_eq!(got, vec![vec![Value::Bytes(id.to_string().into_bytes())]]);

    // The default user scatters, unless the statement says otherwise.
    assert_same_rows(&rows(&mut app, &count).await, &want, &count);
    refused(
        &mut app,
        &format!("/*scatter='refuse'*/ {count}"),
        "scatter",
    )
    .await;
    refused(
        &mut app,
        &format!("{count} /*scatter='REFUSE'*/"),
        "scatter",
    )
    .await;
    // A prepared statement keeps its hint for every execution.
    let st = app
        .prep("SELECT COUNT(*) FROM t_order WHERE user_id = ? /*scatter='refuse'*/")
        .await
        .unwrap();
    for user in [120u64, 121] {
        let r: Result<Vec<mysql_async::Row>, _> = app.exec(&st, (user,)).await;
        assert_eq!(server_code(r), 1235, "execution for user {user}");
    }
    let after = route_stats(&mut app).await;
    // Three allowed scatters by `narrow`, one by `app`; refusals are not counted.
    assert_eq!(after.get("scatters_user_narrow"), Some(&3));
    assert_eq!(
        after["scatters_user_app"] - before.get("scatters_user_app").copied().unwrap_or(0),
        1
    );
    assert_usable(&mut n).await;
    assert_usable(&mut app).await;
    h.stop().await;
}

#[tokio::test]
async fn a_malformed_or_contradicting_scatter_hint_is_an_error() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    for sql in [
        "/*scatter='maybe'*/ SELECT COUNT(*) FROM t_order",
        "/*scatter='allow'*/ SELECT COUNT(*) FROM t_order /*scatter='refuse'*/",
    ] {
        let (code, message) = failure(&mut c, sql).await;
        assert_eq!(code, 1526, "{sql}: {message}");
        assert!(message.contains("scatter hint"), "{sql}: {message}");
    }
    assert_usable(&mut c).await;
    h.stop().await;
}

#[tokio::test]
async fn a_channel_predicate_narrows_a_scatter_and_a_region_or_hint_never_does() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let mut r = reference().await;
    let all: Vec<u32> = (0..20).collect();
    let cases: [(String, Vec<u32>); 7] = [
        (
            format!("SELECT order_id FROM t_order WHERE channel = 'CN_CHANNEL' AND {SEEDED}"),
            vec![8, 9, 10, 11],
        ),
        (
            format!("SELECT order_id FROM t_order WHERE {SEEDED} AND channel = 'eu_channel'"),
            vec![0, 1, 2, 3],
        ),
        (
            format!("SELECT order_id FROM t_order WHERE region = 'CN' AND {SEEDED}"),
            all.clone(),
        ),
        (
            format!("SELECT order_id FROM t_order WHERE region IN ('HK', 'TW') AND {SEEDED}"),
            all.clone(),
        ),
        (
            format!("/*route_key='EU_CHANNEL'*/ SELECT order_id FROM t_order WHERE {SEEDED}"),
            all.clone(),
        ),
        (
            format!("/*region='GB'*/ SELECT order_id FROM t_order WHERE {SEEDED}"),
            all.clone(),
        ),
        (
            format!(
                "SELECT order_id FROM t_order WHERE (channel = 'CN_CHANNEL' OR user_id = 150) AND {SEEDED}"
            ),
            all.clone(),
        ),
    ];
    for (sql, shards) in cases {
        assert_eq!(explained_shards(&mut c, &sql).await, shards, "{sql}");
        let got = sorted_rows(&mut c, &sql).await;
        let want = sorted_rows(&mut r, &sql).await;
        assert_same_rows(&got, &want, &sql);
        assert!(!got.is_empty(), "{sql}: rows expected");
    }
    h.stop().await;
}

#[tokio::test]
async fn a_channel_and_a_region_of_another_channel_read_the_rows_they_describe() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    // A GB customer on the CORP channel: the proxy writes it (its region is data).
    let user = 910_000_060u64;
    let id = fresh_new_id(4);
    let _guard = Cleanup::new(&[id]);
    exec(
        &mut c,
        &format!(
            "INSERT INTO t_order {ORDER_COLUMNS} VALUES ({id}, 'CORP_CHANNEL', 'GB', {user}, 1.00, 'CREATED', 'gb on corp', '2026-01-02 03:04:05.000')"
        ),
    )
    .await;
    let shard = expected_shard("CORP_CHANNEL", id);
    assert_eq!(placement(id).await.0, vec![shard]);
    let want = vec![format!("{id} | GB")];
    for sql in [
        format!(
            "SELECT order_id, region FROM t_order WHERE channel = 'CORP_CHANNEL' AND region = 'GB' AND user_id = {user}"
        ),
        format!(
            "SELECT order_id, region FROM t_order WHERE order_id = {id} AND channel = 'CORP_CHANNEL' AND region = 'GB'"
        ),
    ] {
        match try_rows(&mut c, &sql).await {
            Ok(got) => assert_eq!(show_rows(&got), want, "{sql}"),
            Err(e) => panic!("{sql}\n  refused, though the proxy wrote this row: {e}"),
        }
    }
    // Two channels that cannot both hold: MySQL's answer is no row, not an error.
    let sql = format!(
        "SELECT order_id FROM t_order WHERE channel = 'CORP_CHANNEL' AND channel = 'EU_CHANNEL' AND user_id = {user}"
    );
    match try_rows(&mut c, &sql).await {
        Ok(got) => assert!(got.is_empty(), "{sql}"),
        Err(e) => panic!("{sql}\n  refused: {e}"),
    }
    h.stop().await;
}

#[tokio::test]
async fn with_refuse_a_scatter_write_in_a_transaction_stays_on_its_datasource_and_rolls_back() {
    let config = with_user(refusing(config()), "bulk", Scatter::Allow, Scatter::Allow);
    let h = Harness::start_with(config).await;
    let mut c = client_as(&h, "bulk").await;
    let user = 910_000_080u64;
    let eu = [fresh_new_id(5), fresh_new_id(5)];
    let corp = fresh_new_id(4);
    let _guard = Cleanup::new(&[eu[0], eu[1], corp]);
    put(&mut c, eu[0], "EU_CHANNEL", user, "n0").await;
    put(&mut c, eu[1], "EU_CHANNEL", user, "n0").await;
    put(&mut c, corp, "CORP_CHANNEL", user, "n0").await;
    exec(&mut c, "BEGIN").await;
    let sql =
        format!("UPDATE t_order SET note = 't' WHERE channel = 'EU_CHANNEL' AND user_id = {user}");
    c.query_drop(&sql).await.unwrap();
    assert_eq!(c.affected_rows(), 2, "{sql}");
    // The transaction's scatter read sees its own update on ds0 beside ds1's row.
    let read =
        format!("SELECT order_id, note FROM t_order WHERE user_id = {user} ORDER BY order_id");
    let mut want = [(eu[0], "t"), (eu[1], "t"), (corp, "n0")];
    want.sort();
    let want: Vec<String> = want.iter().map(|(i, n)| format!("{i} | {n}")).collect();
    assert_eq!(show_rows(&rows(&mut c, &read).await), want);
    // A second datasource's shards in the same transaction: refused, nothing changes.
    let (code, message) = failure(
        &mut c,
        &format!(
            "UPDATE t_order SET note = 't' WHERE channel = 'CORP_CHANNEL' AND user_id = {user}"
        ),
    )
    .await;
    assert_eq!(code, 1235, "{message}");
    assert!(message.contains("second datasource"), "{message}");
    assert_eq!(show_rows(&rows(&mut c, &read).await), want);
    exec(&mut c, "ROLLBACK").await;
    for (ch, id) in [
        ("EU_CHANNEL", eu[0]),
        ("EU_CHANNEL", eu[1]),
        ("CORP_CHANNEL", corp),
    ] {
        assert_eq!(physical_note(ch, id).await.as_deref(), Some("n0"), "{id}");
    }
    h.stop().await;
}

#[tokio::test]
async fn scatter_writes_are_refused_by_default_even_with_an_allow_hint() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let id = fresh_new_id(5);
    let _guard = Cleanup::new(&[id]);
    put(&mut c, id, "EU_CHANNEL", 910_000_001, "kept").await;
    for sql in [
        "UPDATE t_order SET note = 'changed' WHERE user_id = 910000001".to_owned(),
        "UPDATE t_order SET note = 'changed' WHERE channel = 'EU_CHANNEL' AND user_id = 910000001".to_owned(),
        "/*scatter='allow'*/ UPDATE t_order SET note = 'changed' WHERE channel = 'EU_CHANNEL' AND user_id = 910000001".to_owned(),
        "DELETE FROM t_order WHERE user_id = 910000001".to_owned(),
        "DELETE FROM t_order_item WHERE sku = 'nothing'".to_owned(),
    ] {
        refused(&mut c, &sql, "scatter_writes = \"refuse\"").await;
    }
    assert_eq!(
        physical_note("EU_CHANNEL", id).await.as_deref(),
        Some("kept")
    );
    assert_usable(&mut c).await;
    h.stop().await;
}

#[tokio::test]
async fn with_refuse_scatter_writes_run_only_when_their_shards_share_one_datasource() {
    let config = with_user(refusing(config()), "bulk", Scatter::Allow, Scatter::Allow);
    let h = Harness::start_with(config).await;
    let mut c = client_as(&h, "bulk").await;
    let user = 910_000_020u64;
    let eu: Vec<u64> = (0..4).map(|rem| fresh_new_id_mod(5, rem)).collect();
    let global = fresh_new_id(2);
    let cn = [fresh_new_id_on(1, 0), fresh_new_id_on(1, 1)];
    let corp = fresh_new_id(4);
    let mut all = eu.clone();
    all.extend([global, cn[0], cn[1], corp]);
    let _guard = Cleanup::new(&all);
    for &id in &eu {
        put(&mut c, id, "EU_CHANNEL", user, "n0").await;
    }
    put(&mut c, global, "GLOBAL_CHANNEL", user, "n0").await;
    put(&mut c, cn[0], "CN_CHANNEL", user, "n0").await;
    put(&mut c, cn[1], "CN_CHANNEL", user, "n0").await;
    put(&mut c, corp, "CORP_CHANNEL", user, "n0").await;

    // Shards 0-3, all on ds0: one atomic statement over four shards.
    let sql =
        format!("UPDATE t_order SET note = 'eu' WHERE channel = 'EU_CHANNEL' AND user_id = {user}");
    c.query_drop(&sql).await.unwrap();
    assert_eq!(c.affected_rows(), 4, "{sql}");
    for &id in &eu {
        assert_eq!(physical_note("EU_CHANNEL", id).await.as_deref(), Some("eu"));
    }
    assert_eq!(
        physical_note("GLOBAL_CHANNEL", global).await.as_deref(),
        Some("n0")
    );

    // Shards on both datasources, or an ORDER BY / LIMIT over several shards: refused.
    let w = format!("user_id = {user}");
    for (sql, part) in [
        (
            format!("UPDATE t_order SET note = 'x' WHERE {w}"),
            "ds0, ds1",
        ),
        (
            format!("UPDATE t_order SET note = 'x' WHERE channel = 'CN_CHANNEL' AND {w}"),
            "ds0, ds1",
        ),
        (
            format!("UPDATE t_order SET note = 'x' WHERE region = 'GB' AND {w}"),
            "ds0, ds1",
        ),
        (
            format!("DELETE FROM t_order WHERE region = 'KR' AND {w}"),
            "ds0, ds1",
        ),
        (
            format!(
                "UPDATE t_order SET note = 'x' WHERE channel = 'EU_CHANNEL' AND {w} ORDER BY order_id LIMIT 1"
            ),
            "ORDER BY or LIMIT",
        ),
        (
            format!("DELETE FROM t_order WHERE channel = 'EU_CHANNEL' AND {w} LIMIT 2"),
            "ORDER BY or LIMIT",
        ),
    ] {
        refused(&mut c, &sql, part).await;
    }
    for (ch, id, note) in [
        ("CN_CHANNEL", cn[0], "n0"),
        ("CN_CHANNEL", cn[1], "n0"),
        ("CORP_CHANNEL", corp, "n0"),
    ] {
        assert_eq!(physical_note(ch, id).await.as_deref(), Some(note), "{id}");
    }
    assert_eq!(
        physical_note("EU_CHANNEL", eu[0]).await.as_deref(),
        Some("eu")
    );

    // CORP's shards 16-19 all lie on ds1.
    let sql = format!("DELETE FROM t_order WHERE channel = 'CORP_CHANNEL' AND {w}");
    c.query_drop(&sql).await.unwrap();
    assert_eq!(c.affected_rows(), 1, "{sql}");
    assert_eq!(placement(corp).await.0, Vec::<u32>::new());
    assert_eq!(
        placement(cn[1]).await.0,
        vec![expected_shard("CN_CHANNEL", cn[1])]
    );
    assert_usable(&mut c).await;
    h.stop().await;
}

#[tokio::test]
async fn a_failing_shard_fails_the_whole_scatter_and_the_connection_stays_usable() {
    let ds1: std::net::SocketAddr = format!("127.0.0.1:{}", sandbox_port(1)).parse().unwrap();
    let link = Forwarder::start(ds1).await;
    let mut config = config();
    config.datasources[1].address = link.addr.to_string();
    config.datasources[1].connect_timeout = std::time::Duration::from_millis(500);
    config.datasources[1].checkout_timeout = std::time::Duration::from_millis(800);
    let h = Harness::start_with(config).await;
    let mut c = h.client().await;
    let mut r = reference().await;
    let shapes = [
        format!("SELECT order_id, note FROM t_order WHERE {SEEDED}"),
        format!("SELECT order_id FROM t_order WHERE {SEEDED} ORDER BY order_id LIMIT 5"),
        format!("SELECT channel, COUNT(*) FROM t_order WHERE {SEEDED} GROUP BY channel"),
        format!("SELECT COUNT(*) FROM t_order WHERE {SEEDED}"),
        format!("SELECT DISTINCT region FROM t_order WHERE {SEEDED}"),
    ];
    for sql in &shapes {
        let got = sorted_rows(&mut c, sql).await;
        assert_same_rows(&got, &sorted_rows(&mut r, sql).await, sql);
    }
    link.cut();
    for sql in &shapes {
        match try_rows(&mut c, sql).await {
            Ok(got) => panic!("{sql}\n  answered {} rows with ds1 unreachable", got.len()),
            Err(mysql_async::Error::Server(e)) => assert_ne!(e.code, 0, "{sql}"),
            Err(other) => panic!("{sql}\n  expected an error packet, got {other:?}"),
        }
        // The connection answers the next statement on ds0 alone.
        assert_usable(&mut c).await;
    }
    // A scatter that only reaches ds0's shards still answers.
    let sql = format!("SELECT COUNT(*) FROM t_order WHERE channel = 'GLOBAL_CHANNEL' AND {SEEDED}");
    assert_same_rows(&rows(&mut c, &sql).await, &rows(&mut r, &sql).await, &sql);
    h.stop().await;
}

#[tokio::test]
async fn merges_past_merge_row_cap_are_refused_and_streaming_merges_are_not() {
    let mut config = config();
    config.sharding.merge_row_cap = 5;
    let h = Harness::start_with(config).await;
    let mut c = h.client().await;
    let mut r = reference().await;
    let before = route_stats(&mut c).await["merge_row_cap_hits"];
    // Groups, DISTINCT values: held in memory.
    for sql in [
        format!("SELECT user_id, COUNT(*) FROM t_order WHERE {SEEDED} GROUP BY user_id"),
        format!(
            "SELECT region, COUNT(*) FROM t_order WHERE channel = 'EU_CHANNEL' AND {SEEDED} GROUP BY region"
        ),
        format!("SELECT DISTINCT region FROM t_order WHERE {SEEDED}"),
    ] {
        refused(&mut c, &sql, "merge_row_cap = 5").await;
        assert_usable(&mut c).await;
    }
    assert_eq!(route_stats(&mut c).await["merge_row_cap_hits"] - before, 3);
    // Within the cap, or streamed: answered.
    for sql in [
        format!(
            "SELECT channel, COUNT(*), SUM(amount) FROM t_order WHERE {SEEDED} GROUP BY channel ORDER BY channel"
        ),
        format!(
            "SELECT DISTINCT region FROM t_order WHERE channel = 'BIZ_CHANNEL' AND {SEEDED} ORDER BY region"
        ),
        format!(
            "SELECT order_id, amount FROM t_order WHERE {SEEDED} ORDER BY amount, order_id LIMIT 4 OFFSET 2"
        ),
        format!(
            "SELECT order_id, user_id FROM t_order WHERE {SEEDED} ORDER BY user_id DESC, order_id"
        ),
        format!("SELECT COUNT(*) FROM t_order WHERE {SEEDED}"),
    ] {
        let got = rows(&mut c, &sql).await;
        assert_same_rows(&got, &rows(&mut r, &sql).await, &sql);
    }
    let plain = format!("SELECT order_id FROM t_order WHERE {SEEDED}");
    let got = sorted_rows(&mut c, &plain).await;
    assert!(got.len() > 5);
    assert_same_rows(&got, &sorted_rows(&mut r, &plain).await, &plain);
    assert_eq!(route_stats(&mut c).await["merge_row_cap_hits"] - before, 3);
    // In a transaction the shards of one datasource share a connection: an ordered merge
    // holds all but one shard's rows, and the cap applies.
    let id = fresh_new_id(5);
    let _guard = Cleanup::new(&[id]);
    exec(&mut c, "BEGIN").await;
    put(&mut c, id, "EU_CHANNEL", 910_000_070, "in txn").await;
    refused(
        &mut c,
        &format!("SELECT order_id FROM t_order WHERE {SEEDED} ORDER BY order_id LIMIT 3"),
        "merge_row_cap = 5",
    )
    .await;
    // A refused SELECT leaves the transaction and the connection as they were.
    let mine = format!("SELECT note FROM t_order WHERE order_id = {id}");
    match try_rows(&mut c, &mine).await {
        Ok(got) => assert_eq!(show_rows(&got), ["in txn"]),
        Err(e) => panic!("the transaction did not survive a refused merge: {e}"),
    }
    exec(&mut c, "COMMIT").await;
    assert_eq!(
        physical_note("EU_CHANNEL", id).await.as_deref(),
        Some("in txn")
    );
    assert_usable(&mut c).await;
    h.stop().await;
}

/// Open connections of each datasource's main pool: (ds0, ds1).
fn open_connections(h: &Harness) -> (u32, u32) {
    let state = h.proxy.runtime().pools.state();
    let open = |name: &str| {
        state
            .iter()
            .filter(|(n, fr, ..)| n == name && !fr)
            .map(|s| s.2)
            .sum()
    };
    (open("ds0"), open("ds1"))
}

/// Connections a 20-shard scatter opens in a fresh proxy with `max_fan_out`, its shards
/// combined (a statement per datasource) or not.
async fn connections_of_one_scatter(max_fan_out: Option<u32>, combine: bool) -> (u32, u32) {
    let mut config = config();
    config.sharding.max_fan_out = max_fan_out;
    config.sharding.combine_shards = combine;
    let h = Harness::start_with(config).await;
    let mut c = h.client().await;
    let mut r = reference().await;
    let sql = format!(
        "SELECT order_id, amount FROM t_order WHERE {SEEDED} ORDER BY amount DESC, order_id LIMIT 30"
    );
    let got = rows(&mut c, &sql).await;
    assert_same_rows(&got, &rows(&mut r, &sql).await, &sql);
    let sql = format!(
        "SELECT region, COUNT(*) FROM t_order WHERE {SEEDED} GROUP BY region ORDER BY region"
    );
    let got = rows(&mut c, &sql).await;
    assert_same_rows(&got, &rows(&mut r, &sql).await, &sql);
    let open = open_connections(&h);
    h.stop().await;
    open
}

#[tokio::test]
async fn max_fan_out_bounds_the_backend_connections_of_one_scatter() {
    // A statement per shard, unbounded: one connection per shard (10 on each server).
    assert_eq!(connections_of_one_scatter(None, false).await, (10, 10));
    assert_eq!(connections_of_one_scatter(Some(4), false).await, (2, 2));
    assert_eq!(connections_of_one_scatter(Some(2), false).await, (1, 1));
    // Combined: a statement per datasource, and on ds0 the first shard's alone while the
    // statements' columns are described (their first run).
    assert_eq!(connections_of_one_scatter(None, true).await, (2, 1));
    assert_eq!(connections_of_one_scatter(Some(2), true).await, (1, 1));
}

#[tokio::test]
async fn a_scatter_over_more_shards_than_its_pool_opens_takes_turns_on_its_connections() {
    // ds0 holds ten shards and may open three connections: one connection per shard at
    // once would wait for the ones the scatter holds itself, until the checkout timeout.
    // (A statement per shard: combined, the scatter needs two connections there.)
    let mut config = config();
    config.sharding.combine_shards = false;
    config.datasources[0].pool_size = 3;
    config.datasources[0].checkout_timeout = std::time::Duration::from_secs(2);
    let h = Harness::start_with(config).await;
    let mut c = h.client().await;
    let mut r = reference().await;
    for sql in [
        format!(
            "SELECT order_id, amount FROM t_order WHERE {SEEDED} ORDER BY amount DESC, order_id LIMIT 30"
        ),
        format!(
            "SELECT region, COUNT(*) FROM t_order WHERE {SEEDED} GROUP BY region ORDER BY region"
        ),
    ] {
        let started = std::time::Instant::now();
        let got = rows(&mut c, &sql).await;
        assert_same_rows(&got, &rows(&mut r, &sql).await, &sql);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(2),
            "{sql}: {:?}",
            started.elapsed()
        );
    }
    assert_eq!(open_connections(&h), (3, 10));
    h.stop().await;
}

#[tokio::test]
async fn a_scatter_runs_on_the_connections_a_busy_small_pool_has_left() {
    // Two connections per datasource; another session's transaction holds one of each.
    let mut config = config();
    for ds in config.datasources.iter_mut() {
        ds.pool_size = 2;
        ds.checkout_timeout = std::time::Duration::from_secs(2);
    }
    let h = Harness::start_with(config).await;
    let s = seed();
    let mut holder = h.client().await;
    exec(&mut holder, "BEGIN").await;
    for id in [
        s.channels["EU_CHANNEL"].new_format_ids[0],
        s.channels["CORP_CHANNEL"].new_format_ids[0],
    ] {
        let _ = rows(
            &mut holder,
            &format!("SELECT order_id FROM t_order WHERE order_id = {id}"),
        )
        .await;
    }
    let mut c = h.client().await;
    let mut r = reference().await;
    let sql = format!(
        "SELECT region, COUNT(*) FROM t_order WHERE {SEEDED} GROUP BY region ORDER BY region"
    );
    let started = std::time::Instant::now();
    assert_same_rows(&rows(&mut c, &sql).await, &rows(&mut r, &sql).await, &sql);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    exec(&mut holder, "COMMIT").await;
    h.stop().await;
}

#[tokio::test]
async fn concurrent_scatters_on_one_connection_per_datasource_take_turns() {
    // Each scatter needs both datasources; taking them in any order, two scatters could
    // each hold one and wait for the other's until the checkout timeout.
    let mut config = config();
    for ds in config.datasources.iter_mut() {
        ds.pool_size = 1;
        ds.checkout_timeout = std::time::Duration::from_secs(5);
    }
    let h = Harness::start_with(config).await;
    let mut r = reference().await;
    let sql = format!("SELECT COUNT(*), SUM(amount) FROM t_order WHERE {SEEDED}");
    let want = rows(&mut r, &sql).await;
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let (opts, sql, want) = (h.opts(), sql.clone(), want.clone());
        tasks.push(tokio::spawn(async move {
            let mut c = mysql_async::Conn::new(opts).await.unwrap();
            for _ in 0..15 {
                assert_same_rows(&rows(&mut c, &sql).await, &want, &sql);
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    h.stop().await;
}

#[tokio::test]
async fn a_scatter_in_a_transaction_sees_its_own_uncommitted_rows_in_order() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let mut other = h.client().await;
    let user = 910_000_040u64;
    // Committed before: two orders on ds1.
    let corp = [fresh_new_id(4), fresh_new_id(4)];
    let eu = [fresh_new_id(5), fresh_new_id(5), fresh_new_id_on(1, 0)];
    let mut ids = corp.to_vec();
    ids.extend(eu);
    let _guard = Cleanup::new(&ids);
    put(&mut c, corp[0], "CORP_CHANNEL", user, "committed").await;
    put(&mut c, corp[1], "CORP_CHANNEL", user, "committed").await;

    exec(&mut c, "BEGIN").await;
    put(&mut c, eu[0], "EU_CHANNEL", user, "mine").await;
    put(&mut c, eu[1], "EU_CHANNEL", user, "mine").await;
    put(&mut c, eu[2], "CN_CHANNEL", user, "mine").await;
    let sql =
        format!("SELECT order_id, note FROM t_order WHERE user_id = {user} ORDER BY order_id DESC");
    let mut want: Vec<(u64, &str)> = corp.iter().map(|&i| (i, "committed")).collect();
    want.extend(eu.iter().map(|&i| (i, "mine")));
    want.sort_by_key(|w| std::cmp::Reverse(w.0));
    let want: Vec<Values> = want
        .iter()
        .map(|(i, n)| {
            vec![
                Value::Bytes(i.to_string().into_bytes()),
                Value::Bytes(n.as_bytes().to_vec()),
            ]
        })
        .collect();
    assert_same_rows(&rows(&mut c, &sql).await, &want, "inside the transaction");
    let count = format!(
        "SELECT note, COUNT(*) FROM t_order WHERE user_id = {user} GROUP BY note ORDER BY note"
    );
    let counted = rows(&mut c, &count).await;
    assert_eq!(show_rows(&counted), ["committed | 2", "mine | 3"]);
    // Nobody else sees them.
    assert_eq!(rows(&mut other, &sql).await.len(), 2);
    exec(&mut c, "ROLLBACK").await;
    assert_eq!(rows(&mut c, &sql).await.len(), 2);
    for id in eu {
        assert_eq!(placement(id).await.0, Vec::<u32>::new());
    }
    h.stop().await;
}

#[tokio::test]
async fn sql_select_limit_cuts_the_merged_answer_not_each_shards_part() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let mut r = reference().await;
    for conn in [&mut c, &mut r] {
        exec(conn, "SET SESSION sql_select_limit = 3").await;
    }
    for sql in [
        format!("SELECT order_id FROM t_order WHERE {SEEDED} ORDER BY order_id"),
        format!(
            "SELECT order_id, user_id FROM t_order WHERE {SEEDED} ORDER BY user_id DESC, order_id"
        ),
        format!(
            "SELECT note, COUNT(*) AS n FROM t_order WHERE {SEEDED} GROUP BY note ORDER BY n DESC, note"
        ),
        format!("SELECT COUNT(*), SUM(amount) FROM t_order WHERE {SEEDED}"),
        format!("SELECT DISTINCT region FROM t_order WHERE {SEEDED} ORDER BY region"),
        format!("SELECT order_id FROM t_order WHERE {SEEDED} ORDER BY order_id LIMIT 5"),
        format!("SELECT order_id FROM t_order WHERE {SEEDED} ORDER BY order_id FOR UPDATE"),
    ] {
        let got = rows(&mut c, &sql).await;
        let want = rows(&mut r, &sql).await;
        assert!(!want.is_empty(), "{sql}");
        assert_same_rows(&got, &want, &sql);
    }
    // SET STATEMENT sql_select_limit reaches every shard: refused over several shards;
    // other SET STATEMENT variables (Connector/J's query timeout) run as before.
    refused(
        &mut c,
        &format!("SET STATEMENT sql_select_limit = 2 FOR SELECT order_id FROM t_order WHERE {SEEDED} ORDER BY order_id"),
        "SET STATEMENT sql_select_limit",
    )
    .await;
    let timed = format!(
        "SET STATEMENT max_statement_time = 100 FOR SELECT order_id FROM t_order WHERE {SEEDED} ORDER BY order_id"
    );
    assert_same_rows(
        &rows(&mut c, &timed).await,
        &rows(&mut r, &timed).await,
        &timed,
    );
    // Unordered: three rows of the table, as one server would give.
    let plain = format!("SELECT order_id FROM t_order WHERE {SEEDED}");
    assert_eq!(rows(&mut c, &plain).await.len(), 3);
    // The shards get an explicit LIMIT, which the server obeys in place of the session's.
    let shard_sql: Vec<String> = c
        .query_map(format!("EXPLAIN ROUTE {plain}"), |row: mysql_async::Row| {
            row.get::<String, _>("statement").unwrap()
        })
        .await
        .unwrap();
    // Combined, every shard's select gets it inside the union, and the union itself an
    // explicit LIMIT that keeps the session's from cutting it as a whole.
    assert!(!shard_sql.is_empty());
    for sql in &shard_sql {
        let shards = sql.matches(" UNION ALL (").count() + 1;
        assert_eq!(sql.matches("LIMIT 3\n)").count(), shards, "{sql}");
        assert!(sql.ends_with(") LIMIT 18446744073709551615"), "{sql}");
    }
    // SHOW TABLE STATUS is cut as MariaDB cuts it; 0 and DEFAULT round-trip.
    exec(&mut c, "SET SESSION sql_select_limit = 1").await;
    let status: Vec<mysql_async::Row> = c.query("SHOW TABLE STATUS").await.unwrap();
    assert_eq!(status.len(), 1, "as MariaDB: SHOW TABLE STATUS is cut too");
    exec(&mut c, "SET SESSION sql_select_limit = 0").await;
    assert!(
        rows(&mut c, "SELECT COUNT(*) FROM t_order")
            .await
            .is_empty()
    );
    exec(&mut c, "SET SESSION sql_select_limit = DEFAULT").await;
    let all = rows(
        &mut c,
        &format!("SELECT COUNT(*) FROM t_order WHERE {SEEDED}"),
    )
    .await;
    let want = rows(
        &mut r,
        &format!("SELECT COUNT(*) FROM t_order WHERE {SEEDED}"),
    )
    .await;
    assert_same_rows(&all, &want, "COUNT(*) after DEFAULT");
    assert_usable(&mut c).await;
    h.stop().await;
}

#[tokio::test]
async fn found_rows_counts_the_merged_rows_of_groups_and_distinct_values() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let mut r = reference().await;
    for sql in [
        format!("SELECT SQL_CALC_FOUND_ROWS COUNT(*) FROM t_order WHERE {SEEDED}"),
        format!(
            "SELECT SQL_CALC_FOUND_ROWS channel, COUNT(*) FROM t_order WHERE {SEEDED} GROUP BY channel ORDER BY channel LIMIT 2"
        ),
        format!(
            "SELECT SQL_CALC_FOUND_ROWS region, COUNT(*) AS n FROM t_order WHERE {SEEDED} GROUP BY region HAVING n > 20 ORDER BY region LIMIT 1"
        ),
        format!(
            "SELECT SQL_CALC_FOUND_ROWS channel FROM t_order WHERE {SEEDED} GROUP BY channel LIMIT 0"
        ),
        format!(
            "SELECT SQL_CALC_FOUND_ROWS DISTINCT region FROM t_order WHERE {SEEDED} ORDER BY region LIMIT 2"
        ),
        format!("SELECT SQL_CALC_FOUND_ROWS DISTINCT status FROM t_order WHERE {SEEDED} LIMIT 1"),
        format!(
            "SELECT SQL_CALC_FOUND_ROWS order_id FROM t_order WHERE {SEEDED} ORDER BY order_id LIMIT 3"
        ),
    ] {
        let got = rows(&mut c, &sql).await;
        let want = rows(&mut r, &sql).await;
        let got_found = rows(&mut c, "SELECT FOUND_ROWS()").await;
        let want_found = rows(&mut r, "SELECT FOUND_ROWS()").await;
        if sql.contains("ORDER BY") || sql.contains("COUNT(*) FROM") {
            assert_same_rows(&got, &want, &sql);
        } else {
            assert_eq!(got.len(), want.len(), "{sql}");
        }
        assert_same_rows(
            &got_found,
            &want_found,
            &format!("FOUND_ROWS() after {sql}"),
        );
    }
    h.stop().await;
}
