//! Transactions across datasources (issue 27), against the sandbox's two MariaDB servers:
//! a transfer between an order on ds0 and one on ds1 commits on both or on neither; the
//! decision record and `XA RECOVER` are read on the servers; a transaction on one
//! datasource sends exactly what it sent before (the servers' general log); a deadlock or
//! lock wait timeout in one branch rolls back every branch; a scatter write over both
//! datasources is all or nothing. The proxy killed at the protocol's steps, a server
//! killed, and racing resolvers are in `tests/xa/`.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::*;
use mysql_async::prelude::*;
use mysql_async::{Conn, OptsBuilder};
use routekey_proxy::config::{Config, Scatter, User};

/// The amount of order `id` of `channel_name`, read on its physical shard.
async fn amount(channel_name: &str, id: u64) -> Option<String> {
    physical_row(expected_shard(channel_name, id), id)
        .await
        .map(|r| show(&r[4]))
}

/// The note of order `id` of `channel_name`, read on its physical shard.
async fn note(channel_name: &str, id: u64) -> Option<String> {
    physical_row(expected_shard(channel_name, id), id)
        .await
        .map(|r| show(&r[6]))
}

/// The gtrids of this proxy's xids that `XA RECOVER` lists on sandbox server `ds`.
async fn prepared_of(h: &Harness, ds: usize) -> Vec<String> {
    let prefix = format!("rk:{}:", h.proxy.coordinator.sidecar());
    let mut conn = backend(ds).await;
    let listed: Vec<(u32, usize, usize, Vec<u8>)> = conn.query("XA RECOVER").await.unwrap();
    listed
        .into_iter()
        .filter(|(format, ..)| *format == 29291)
        .map(|(_, g, _, data)| String::from_utf8_lossy(&data[..g]).into_owned())
        .filter(|g| g.starts_with(&prefix))
        .collect()
}

/// This proxy's decision records on sandbox server `ds`: (gtrid, decision).
async fn decisions_of(h: &Harness, ds: usize) -> Vec<(String, String)> {
    let mut conn = backend(ds).await;
    conn.query(format!(
        "SELECT CAST(xid AS CHAR), CAST(decision AS CHAR) FROM routekey.routekey_xa_decisions WHERE xid LIKE 'rk:{}:%' ORDER BY decided_at",
        h.proxy.coordinator.sidecar()
    ))
    .await
    .unwrap_or_default()
}

/// Does the client's session report an open transaction?
async fn in_trans(c: &mut Conn) -> bool {
    let v: Option<u8> = c.query_first("SELECT @@in_transaction").await.unwrap();
    v == Some(1)
}

/// EXPLAIN ROUTE's `branch` for `sql` (one row).
async fn branch(c: &mut Conn, sql: &str) -> String {
    let r = rows(c, &format!("EXPLAIN ROUTE {sql}")).await;
    assert_eq!(r.len(), 1, "{sql}");
    show(&r[0][9])
}

fn transfer(id: u64, delta: &str) -> String {
    format!("UPDATE t_order SET amount = amount + ({delta}) WHERE order_id = {id}")
}

#[tokio::test]
async fn a_transfer_across_datasources_commits_on_both_or_on_neither() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let guard = Cleanup::default();
    let eu = guard.add(fresh_new_id_on(5, 0));
    let biz = guard.add(fresh_new_id(3));
    assert_eq!(datasource_of(expected_shard("BIZ_CHANNEL", biz)), 1);
    exec(&mut c, &insert_order_sql(eu, "EU_CHANNEL", "t")).await;
    exec(&mut c, &insert_order_sql(biz, "BIZ_CHANNEL", "t")).await;

    // Outside a transaction a statement on one datasource has no branch.
    assert_eq!(branch(&mut c, &transfer(eu, "-1")).await, "NULL");
    exec(&mut c, "BEGIN").await;
    assert_eq!(branch(&mut c, &transfer(eu, "-1")).await, "plain");
    exec(&mut c, &transfer(eu, "-10")).await;
    assert_eq!(branch(&mut c, &transfer(biz, "10")).await, "new xa");
    exec(&mut c, &transfer(biz, "10")).await;
    assert_eq!(branch(&mut c, &transfer(eu, "-1")).await, "decision");
    assert_eq!(branch(&mut c, &transfer(biz, "1")).await, "xa");
    // Nothing is visible before COMMIT, on either server.
    assert_eq!(amount("EU_CHANNEL", eu).await.as_deref(), Some("12.34"));
    assert_eq!(amount("BIZ_CHANNEL", biz).await.as_deref(), Some("12.34"));
    exec(&mut c, "COMMIT").await;
    assert!(!in_trans(&mut c).await);
    assert_eq!(amount("EU_CHANNEL", eu).await.as_deref(), Some("2.34"));
    assert_eq!(amount("BIZ_CHANNEL", biz).await.as_deref(), Some("22.34"));
    // The decision: one commit record on the decision datasource (ds0, written first).
    let on_ds0 = decisions_of(&h, 0).await;
    assert_eq!(on_ds0.len(), 1, "{on_ds0:?}");
    assert_eq!(on_ds0[0].1, "commit");
    assert!(prepared_of(&h, 1).await.is_empty());

    // ROLLBACK undoes both.
    exec(&mut c, "BEGIN").await;
    exec(&mut c, &transfer(eu, "-5")).await;
    exec(&mut c, &transfer(biz, "5")).await;
    exec(&mut c, "ROLLBACK").await;
    assert_eq!(amount("EU_CHANNEL", eu).await.as_deref(), Some("2.34"));
    assert_eq!(amount("BIZ_CHANNEL", biz).await.as_deref(), Some("22.34"));

    // ds1 first: ds1 decides, ds0 is the XA branch.
    exec(&mut c, "BEGIN").await;
    exec(&mut c, &transfer(biz, "-2")).await;
    exec(&mut c, &transfer(eu, "2")).await;
    exec(&mut c, "COMMIT").await;
    assert_eq!(amount("EU_CHANNEL", eu).await.as_deref(), Some("4.34"));
    assert_eq!(amount("BIZ_CHANNEL", biz).await.as_deref(), Some("20.34"));
    let on_ds1 = decisions_of(&h, 1).await;
    assert_eq!(on_ds1.len(), 1, "{on_ds1:?}");
    assert!(prepared_of(&h, 0).await.is_empty());
    let counters = &h.proxy.coordinator.counters;
    assert_eq!(counters.commits_atomic.load(Ordering::Relaxed), 2);
    assert_eq!(counters.prepared.load(Ordering::Relaxed), 2);
    assert!(
        h.metrics_text()
            .await
            .contains("routekey_commits_total{kind=\"atomic\"} 2")
    );

    // Prepared statements (binary protocol) join the same branches.
    exec(&mut c, "BEGIN").await;
    let update = "UPDATE t_order SET amount = amount + ? WHERE order_id = ?";
    c.exec_drop(update, (-3, biz)).await.unwrap();
    c.exec_drop(update, (3, eu)).await.unwrap();
    exec(&mut c, "COMMIT").await;
    assert_eq!(amount("EU_CHANNEL", eu).await.as_deref(), Some("7.34"));
    assert_eq!(amount("BIZ_CHANNEL", biz).await.as_deref(), Some("17.34"));
    let decided = decisions_of(&h, 0).await.len() + decisions_of(&h, 1).await.len();
    assert_eq!(decided, 3);

    // A savepoint spans both branches: ROLLBACK TO undoes the XA branch's write, the
    // commit keeps the decision branch's.
    exec(&mut c, "BEGIN").await;
    exec(&mut c, &transfer(eu, "-1")).await;
    exec(&mut c, "SAVEPOINT s1").await;
    exec(&mut c, &transfer(biz, "1")).await;
    exec(&mut c, &transfer(eu, "-1")).await;
    exec(&mut c, "ROLLBACK TO SAVEPOINT s1").await;
    exec(&mut c, "COMMIT").await;
    assert_eq!(amount("EU_CHANNEL", eu).await.as_deref(), Some("6.34"));
    assert_eq!(amount("BIZ_CHANNEL", biz).await.as_deref(), Some("17.34"));
    assert_eq!(counters.commits_atomic.load(Ordering::Relaxed), 4);

    // A READ ONLY transaction never starts an XA branch.
    exec(&mut c, "START TRANSACTION READ ONLY").await;
    rows(
        &mut c,
        &format!("SELECT amount FROM t_order WHERE order_id = {eu}"),
    )
    .await;
    rows(
        &mut c,
        &format!("SELECT amount FROM t_order WHERE order_id = {biz}"),
    )
    .await;
    let read = format!("SELECT amount FROM t_order WHERE order_id = {biz}");
    assert_eq!(branch(&mut c, &read).await, "plain", "no XA when read-only");
    exec(&mut c, "COMMIT").await;
    assert_eq!(counters.prepared.load(Ordering::Relaxed), 4);
    drop(guard);
    h.stop().await;
}

#[tokio::test]
async fn autocommit_off_joins_the_second_datasource_as_an_xa_branch() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let guard = Cleanup::default();
    let eu = guard.add(fresh_new_id_on(5, 0));
    let biz = guard.add(fresh_new_id(3));
    exec(&mut c, &insert_order_sql(eu, "EU_CHANNEL", "t")).await;
    exec(&mut c, &insert_order_sql(biz, "BIZ_CHANNEL", "t")).await;
    exec(&mut c, "SET autocommit = 0").await;
    exec(&mut c, &transfer(eu, "-1")).await;
    exec(&mut c, &transfer(biz, "1")).await;
    exec(&mut c, "COMMIT").await;
    assert_eq!(amount("EU_CHANNEL", eu).await.as_deref(), Some("11.34"));
    assert_eq!(amount("BIZ_CHANNEL", biz).await.as_deref(), Some("13.34"));
    // The next implicit transaction, rolled back on both.
    exec(&mut c, &transfer(biz, "1")).await;
    exec(&mut c, &transfer(eu, "-1")).await;
    exec(&mut c, "ROLLBACK").await;
    exec(&mut c, "SET autocommit = 1").await;
    assert_eq!(amount("EU_CHANNEL", eu).await.as_deref(), Some("11.34"));
    assert_eq!(amount("BIZ_CHANNEL", biz).await.as_deref(), Some("13.34"));
    assert_eq!(decisions_of(&h, 0).await.len(), 1);
    assert!(prepared_of(&h, 1).await.is_empty());
    drop(guard);
    h.stop().await;
}

#[tokio::test]
async fn a_consistent_snapshot_transaction_stays_plain_and_writes_on_one_datasource() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let guard = Cleanup::default();
    let eu = guard.add(fresh_new_id_on(5, 0));
    let biz = guard.add(fresh_new_id(3));
    exec(&mut c, &insert_order_sql(eu, "EU_CHANNEL", "t")).await;
    exec(&mut c, &insert_order_sql(biz, "BIZ_CHANNEL", "t")).await;
    // XA START takes no snapshot: the snapshot on each datasource needs a plain one.
    exec(&mut c, "START TRANSACTION WITH CONSISTENT SNAPSHOT").await;
    exec(&mut c, &transfer(eu, "-1")).await;
    let (code, _, message) = server_error(try_rows(&mut c, &transfer(biz, "1")).await);
    assert_eq!(code, 1235, "{message}");
    assert!(message.contains("CONSISTENT SNAPSHOT"), "{message}");
    exec(&mut c, "COMMIT").await;
    assert_eq!(amount("EU_CHANNEL", eu).await.as_deref(), Some("11.34"));
    assert_eq!(amount("BIZ_CHANNEL", biz).await.as_deref(), Some("12.34"));
    assert_eq!(
        h.proxy
            .coordinator
            .counters
            .prepared
            .load(Ordering::Relaxed),
        0
    );
    drop(guard);
    h.stop().await;
}

/// The statements server `ds` logged for the session thread that ran the statement
/// containing `marker`, from the `BEGIN` before it to the `COMMIT` after it.
async fn logged_transaction(ds: usize, marker: &str) -> Vec<String> {
    let mut conn = backend(ds).await;
    let thread: Option<u64> = conn
        .query_first(format!(
            "SELECT thread_id FROM mysql.general_log WHERE argument LIKE '%{marker}%' AND argument NOT LIKE '%general_log%' LIMIT 1"
        ))
        .await
        .unwrap();
    let Some(thread) = thread else {
        return Vec::new();
    };
    let all: Vec<String> = conn
        .query(format!(
            "SELECT CAST(argument AS CHAR) FROM mysql.general_log WHERE thread_id = {thread} AND command_type = 'Query' ORDER BY event_time"
        ))
        .await
        .unwrap();
    let at = all.iter().position(|s| s.contains(marker)).unwrap();
    let start = all[..at]
        .iter()
        .rposition(|s| s.eq_ignore_ascii_case("BEGIN") || s.starts_with("XA START"))
        .unwrap_or(at);
    let end = all[at..]
        .iter()
        .position(|s| s.eq_ignore_ascii_case("COMMIT") || s.starts_with("XA COMMIT"))
        .map_or(all.len(), |i| at + i + 1);
    all[start..end].to_vec()
}

#[tokio::test]
async fn a_transaction_on_one_datasource_sends_exactly_what_it_sent_before() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let guard = Cleanup::default();
    let eu = guard.add(fresh_new_id_on(5, 0));
    let eu2 = guard.add(fresh_new_id_on(5, 0));
    let biz = guard.add(fresh_new_id(3));
    for (id, ch) in [
        (eu, "EU_CHANNEL"),
        (eu2, "EU_CHANNEL"),
        (biz, "BIZ_CHANNEL"),
    ] {
        exec(&mut c, &insert_order_sql(id, ch, "t")).await;
    }
    let mut servers = [backend(0).await, backend(1).await];
    for s in &mut servers {
        exec(s, "SET GLOBAL log_output = 'TABLE'").await;
        exec(s, "SET GLOBAL general_log = 1").await;
    }
    let marker = format!("single-{}", now_ms());
    exec(&mut c, "BEGIN").await;
    exec(
        &mut c,
        &format!("UPDATE t_order SET note = '{marker}' WHERE order_id = {eu}"),
    )
    .await;
    exec(&mut c, &transfer(eu2, "1")).await;
    exec(&mut c, "COMMIT").await;
    // The same across both datasources, to show what the log check sees.
    let across = format!("across-{}", now_ms());
    exec(&mut c, "BEGIN").await;
    exec(
        &mut c,
        &format!("UPDATE t_order SET note = '{across}' WHERE order_id = {eu}"),
    )
    .await;
    exec(&mut c, &transfer(biz, "1")).await;
    exec(&mut c, "COMMIT").await;
    let single = logged_transaction(0, &marker).await;
    let cross = logged_transaction(0, &across).await;
    for s in &mut servers {
        exec(s, "SET GLOBAL general_log = 0").await;
    }
    assert_eq!(single.len(), 4, "{single:#?}");
    assert_eq!(single[0], "BEGIN");
    assert!(
        single[1].starts_with("UPDATE") && single[1].contains(&marker),
        "{single:#?}"
    );
    assert!(
        single[2].starts_with("UPDATE") && single[2].contains(&eu2.to_string()),
        "{single:#?}"
    );
    assert_eq!(single[3], "COMMIT");
    // Across datasources the decision branch also records the decision.
    assert_eq!(cross.len(), 4, "{cross:#?}");
    assert!(
        cross[2].starts_with("INSERT INTO `routekey`.`routekey_xa_decisions`"),
        "{cross:#?}"
    );
    drop(guard);
    h.stop().await;
}

/// Runs `sql` on `c`, returning the server's error code (0 for success).
async fn code_of(c: &mut Conn, sql: &str) -> u16 {
    match c.query_drop(sql).await {
        Ok(()) => 0,
        Err(mysql_async::Error::Server(e)) => e.code,
        Err(e) => panic!("{sql}: {e}"),
    }
}

#[tokio::test]
async fn a_deadlock_in_one_branch_rolls_back_every_branch() {
    let h = Harness::start().await;
    let guard = Cleanup::default();
    let a = [
        guard.add(fresh_new_id_on(5, 0)),
        guard.add(fresh_new_id_on(5, 0)),
    ];
    let x = guard.add(fresh_new_id(3));
    let y = guard.add(fresh_new_id(3));
    let mut c = h.client().await;
    for (id, ch) in [
        (a[0], "EU_CHANNEL"),
        (a[1], "EU_CHANNEL"),
        (x, "BIZ_CHANNEL"),
        (y, "BIZ_CHANNEL"),
    ] {
        exec(&mut c, &insert_order_sql(id, ch, "t")).await;
    }
    let mut s1 = h.client().await;
    let mut s2 = h.client().await;
    // Both start on ds0 (their decision branches) and hold a row each on ds1 (XA).
    exec(&mut s1, "BEGIN").await;
    exec(&mut s1, &transfer(a[0], "-1")).await;
    exec(&mut s1, &transfer(x, "1")).await;
    exec(&mut s2, "BEGIN").await;
    exec(&mut s2, &transfer(a[1], "-1")).await;
    exec(&mut s2, &transfer(y, "1")).await;
    let first = tokio::spawn(async move {
        let code = code_of(&mut s1, &transfer(y, "1")).await;
        (code, s1)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = code_of(&mut s2, &transfer(x, "1")).await;
    let (first, s1) = first.await.unwrap();
    let codes = [first, second];
    assert!(codes.contains(&1213) && codes.contains(&0), "{codes:?}");
    let (mut victim, mut winner, victim_row) = if first == 1213 {
        (s1, s2, a[0])
    } else {
        (s2, s1, a[1])
    };
    assert!(
        !in_trans(&mut victim).await,
        "the victim's transaction ended"
    );
    exec(&mut winner, "COMMIT").await;
    assert_eq!(
        amount("EU_CHANNEL", victim_row).await.as_deref(),
        Some("12.34"),
        "the victim's ds0 branch rolled back"
    );
    let winner_row = if victim_row == a[0] { a[1] } else { a[0] };
    assert_eq!(
        amount("EU_CHANNEL", winner_row).await.as_deref(),
        Some("11.34")
    );
    // x and y: the winner's two increments, none of the victim's.
    let sum = |v: Option<String>| v.unwrap().parse::<f64>().unwrap();
    let total = sum(amount("BIZ_CHANNEL", x).await) + sum(amount("BIZ_CHANNEL", y).await);
    assert!((total - 26.68).abs() < 1e-6, "{total}");
    assert!(prepared_of(&h, 0).await.is_empty() && prepared_of(&h, 1).await.is_empty());
    // The victim's session goes on.
    exec(&mut victim, "BEGIN").await;
    exec(&mut victim, &transfer(victim_row, "-1")).await;
    exec(&mut victim, &transfer(x, "1")).await;
    exec(&mut victim, "COMMIT").await;
    drop(guard);
    h.stop().await;
}

/// A connection straight to sandbox server `ds` holding row `id` of `channel_name` with
/// `SELECT ... FOR UPDATE` in an open transaction.
async fn lock_row(channel_name: &str, id: u64) -> Conn {
    let (ds, t, _) = physical(expected_shard(channel_name, id));
    let mut conn = backend(ds).await;
    exec(&mut conn, "BEGIN").await;
    exec(
        &mut conn,
        &format!("SELECT * FROM {t} WHERE order_id = {id} FOR UPDATE"),
    )
    .await;
    conn
}

#[tokio::test]
async fn a_lock_wait_timeout_in_one_branch_rolls_back_every_branch() {
    let h = Harness::start().await;
    let guard = Cleanup::default();
    let eu = guard.add(fresh_new_id_on(5, 0));
    let biz = guard.add(fresh_new_id(3));
    let mut c = h.client().await;
    exec(&mut c, &insert_order_sql(eu, "EU_CHANNEL", "t")).await;
    exec(&mut c, &insert_order_sql(biz, "BIZ_CHANNEL", "t")).await;
    let mut holder = lock_row("BIZ_CHANNEL", biz).await;
    exec(&mut c, "SET SESSION innodb_lock_wait_timeout = 1").await;
    exec(&mut c, "BEGIN").await;
    exec(&mut c, &transfer(eu, "-3")).await;
    assert_eq!(code_of(&mut c, &transfer(biz, "3")).await, 1205);
    assert!(!in_trans(&mut c).await, "the transaction ended");
    // COMMIT now has nothing to commit.
    exec(&mut c, "COMMIT").await;
    exec(&mut holder, "ROLLBACK").await;
    assert_eq!(amount("EU_CHANNEL", eu).await.as_deref(), Some("12.34"));
    assert_eq!(amount("BIZ_CHANNEL", biz).await.as_deref(), Some("12.34"));
    assert!(prepared_of(&h, 1).await.is_empty());
    assert!(decisions_of(&h, 0).await.is_empty());
    drop(guard);
    h.stop().await;
}

/// The demo configuration with user `bulk`, whose writes may scatter.
fn with_bulk(mut config: Config) -> Config {
    config.users.push(User {
        scatter: Scatter::Allow,
        scatter_writes: Scatter::Allow,
        ..User::new("bulk", "bulk")
    });
    config
}

#[tokio::test]
async fn a_scatter_write_across_both_datasources_is_all_or_nothing() {
    let h = Harness::start_with(with_bulk(config())).await;
    let opts = OptsBuilder::from_opts(h.opts())
        .user(Some("bulk"))
        .pass(Some("bulk"));
    let mut c = Conn::new(opts).await.unwrap();
    let guard = Cleanup::default();
    let user = 927_000_000 + now_ms() % 1_000_000;
    let orders = [
        ("EU_CHANNEL", guard.add(fresh_new_id_on(5, 0))),
        ("EU_CHANNEL", guard.add(fresh_new_id_on(5, 0))),
        ("BIZ_CHANNEL", guard.add(fresh_new_id(3))),
        ("CORP_CHANNEL", guard.add(fresh_new_id(4))),
    ];
    for (ch, id) in orders {
        let region = channel(ch).3;
        exec(
            &mut c,
            &format!(
                "INSERT INTO t_order (order_id, channel, region, user_id, amount, status, note, created_at) \
                 VALUES ({id}, '{ch}', '{region}', {user}, 1.00, 'CREATED', 'n0', NOW())"
            ),
        )
        .await;
    }
    let sql = format!("UPDATE t_order SET note = 'all' WHERE user_id = {user}");
    let explained = rows(&mut c, &format!("EXPLAIN ROUTE {sql}")).await;
    let branches: Vec<String> = explained.iter().map(|r| show(&r[9])).collect();
    assert!(branches.contains(&"decision".to_owned()), "{branches:?}");
    assert!(branches.contains(&"new xa".to_owned()), "{branches:?}");
    // ds1 fails half-way (a row held by another transaction): nothing changes anywhere.
    let mut holder = lock_row("CORP_CHANNEL", orders[3].1).await;
    exec(&mut c, "SET SESSION innodb_lock_wait_timeout = 1").await;
    assert_eq!(code_of(&mut c, &sql).await, 1205);
    assert!(!in_trans(&mut c).await);
    exec(&mut holder, "ROLLBACK").await;
    for (ch, id) in orders {
        assert_eq!(note(ch, id).await.as_deref(), Some("n0"), "{ch} {id}");
    }
    // Unhindered: every row on both datasources, atomically.
    c.query_drop(&sql).await.unwrap();
    assert_eq!(c.affected_rows(), 4);
    for (ch, id) in orders {
        assert_eq!(note(ch, id).await.as_deref(), Some("all"), "{ch} {id}");
    }
    assert_eq!(decisions_of(&h, 0).await.len(), 1);
    assert!(prepared_of(&h, 1).await.is_empty());
    // A multi-row INSERT across both: a duplicate on ds1 leaves ds0 without its row.
    let (eu, biz) = (guard.add(fresh_new_id_on(5, 0)), guard.add(fresh_new_id(3)));
    insert_physical(
        expected_shard("BIZ_CHANNEL", biz),
        biz,
        "BIZ_CHANNEL",
        "dup",
    )
    .await;
    let insert = format!(
        "INSERT INTO t_order {ORDER_COLUMNS} VALUES {}, {}",
        order_tuple(eu, "EU_CHANNEL", "pair"),
        order_tuple(biz, "BIZ_CHANNEL", "pair")
    );
    assert_eq!(code_of(&mut c, &insert).await, 1062);
    assert_eq!(note("EU_CHANNEL", eu).await, None, "ds0's row rolled back");
    assert_eq!(note("BIZ_CHANNEL", biz).await.as_deref(), Some("dup"));
    drop(guard);
    h.stop().await;
}

/// Shapes an attack on the feature found half-applied or refused, each now atomic.
#[tokio::test]
async fn implicit_commits_pinned_sessions_and_odd_sessions_stay_atomic() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let guard = Cleanup::default();
    let eu = guard.add(fresh_new_id_on(5, 0));
    let biz = guard.add(fresh_new_id(3));
    exec(&mut c, &insert_order_sql(eu, "EU_CHANNEL", "t")).await;
    exec(&mut c, &insert_order_sql(biz, "BIZ_CHANNEL", "t")).await;
    let counters = &h.proxy.coordinator.counters;

    // A statement MariaDB commits before (here ANALYZE TABLE of an unsharded table, which
    // runs on ds0 only) commits both branches first; the ROLLBACK after it has nothing.
    exec(&mut c, "BEGIN").await;
    exec(&mut c, &transfer(eu, "-1")).await;
    exec(&mut c, &transfer(biz, "1")).await;
    exec(&mut c, "ANALYZE TABLE t_merchant").await;
    exec(&mut c, "ROLLBACK").await;
    assert_eq!(amount("EU_CHANNEL", eu).await.as_deref(), Some("11.34"));
    assert_eq!(amount("BIZ_CHANNEL", biz).await.as_deref(), Some("13.34"));
    assert_eq!(counters.commits_atomic.load(Ordering::Relaxed), 1);

    // A UCS-2 connection character set: the decision key is still the gtrid's bytes.
    exec(&mut c, "SET SESSION character_set_connection = ucs2").await;
    exec(&mut c, "BEGIN").await;
    exec(&mut c, &transfer(eu, "-1")).await;
    exec(&mut c, &transfer(biz, "1")).await;
    exec(&mut c, "COMMIT").await;
    exec(&mut c, "SET SESSION character_set_connection = utf8mb4").await;
    assert_eq!(decisions_of(&h, 0).await.len(), 2, "keys readable in ASCII");

    // A pinned connection (a temporary table on ds0) joins an autocommit-off transaction
    // as an XA branch when ds1 holds it first.
    exec(&mut c, "CREATE TEMPORARY TABLE tmp_ids (id BIGINT)").await;
    exec(&mut c, "SET autocommit = 0").await;
    exec(&mut c, &transfer(biz, "-5")).await;
    exec(&mut c, &transfer(eu, "5")).await;
    exec(&mut c, "COMMIT").await;
    exec(&mut c, "SET autocommit = 1").await;
    assert_eq!(amount("EU_CHANNEL", eu).await.as_deref(), Some("15.34"));
    assert_eq!(amount("BIZ_CHANNEL", biz).await.as_deref(), Some("9.34"));
    assert_eq!(counters.commits_atomic.load(Ordering::Relaxed), 3);
    assert_eq!(decisions_of(&h, 1).await.len(), 1, "ds1 decided");

    // LOCK TABLES with autocommit off (MySQL's documented pattern): no XA branch, which
    // MariaDB would refuse; a write on a second datasource under the locks is refused.
    exec(&mut c, "SET autocommit = 0").await;
    exec(&mut c, "LOCK TABLES t_order WRITE").await;
    exec(&mut c, &transfer(eu, "-1")).await;
    let (code, _, message) = server_error(try_rows(&mut c, &transfer(biz, "1")).await);
    assert_eq!(code, 1235, "{message}");
    assert!(message.contains("LOCK TABLES"), "{message}");
    exec(&mut c, "COMMIT").await;
    exec(&mut c, "UNLOCK TABLES").await;
    exec(&mut c, "SET autocommit = 1").await;
    assert_eq!(amount("EU_CHANNEL", eu).await.as_deref(), Some("14.34"));

    // A read-only session reads both datasources without XA.
    let prepared = counters.prepared.load(Ordering::Relaxed);
    exec(&mut c, "SET SESSION TRANSACTION READ ONLY").await;
    exec(&mut c, "BEGIN").await;
    rows(
        &mut c,
        &format!("SELECT amount FROM t_order WHERE order_id = {eu}"),
    )
    .await;
    rows(
        &mut c,
        &format!("SELECT amount FROM t_order WHERE order_id = {biz}"),
    )
    .await;
    exec(&mut c, "COMMIT").await;
    exec(&mut c, "SET SESSION TRANSACTION READ WRITE").await;
    assert_eq!(counters.prepared.load(Ordering::Relaxed), prepared);
    assert!(prepared_of(&h, 0).await.is_empty() && prepared_of(&h, 1).await.is_empty());
    drop(guard);
    h.stop().await;
}
