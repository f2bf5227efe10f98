//! `SET TRANSACTION ...` without `SESSION` or `GLOBAL` (the next transaction only), through
//! the proxy and straight to MariaDB: the same statements get the same errors and the same
//! transaction state. Whether a write went through is read on the physical shard.

mod common;

use common::*;
use mysql_async::prelude::*;

/// `(error code or 0, in transaction)` of one reply.
fn outcome(reply: &RawReply) -> (u16, bool) {
    match reply {
        RawReply::Ok(s) | RawReply::Rows(_, s) => (0, s & 0x0001 != 0),
        RawReply::Err(code, _) => (*code, false),
    }
}

/// Runs `script` through the proxy and on the default datasource's MariaDB, step by step,
/// and checks that each step has the same outcome; returns MariaDB's outcomes.
async fn same_as_mariadb(h: &Harness, script: &[&str]) -> Vec<(u16, bool)> {
    let mut proxy = RawClient::connect(h.addr).await;
    let direct_addr = format!("127.0.0.1:{}", sandbox_port(0)).parse().unwrap();
    let mut direct = RawClient::connect_as(direct_addr, "root", "", "orders_ref").await;
    let mut seen = Vec::new();
    for (i, sql) in script.iter().enumerate() {
        let want = outcome(&direct.query(sql).await);
        let got = outcome(&proxy.query(sql).await);
        // The error is compared by code; the transaction flag only after success.
        assert_eq!(
            got, want,
            "step {i}: {sql}: (error, in transaction) differ from MariaDB"
        );
        seen.push(want);
    }
    seen
}

/// The order both sides update: on the default datasource's `orders_ref` copy directly, on
/// its shard through the proxy.
fn order() -> (u64, String, String) {
    let id = seed().channels["EU_CHANNEL"].new_format_ids[23];
    let read = format!("SELECT status FROM t_order WHERE order_id = {id}");
    let write = format!("UPDATE t_order SET status = status WHERE order_id = {id}");
    (id, read, write)
}

/// With autocommit on, `SET TRANSACTION READ ONLY` refuses the next statement that writes
/// (1792), not just the next `BEGIN`; a statement on no table and a failed one leave it
/// pending, and a successful read spends it. Before the fix the proxy kept the
/// characteristics for the next `BEGIN` only, and the `UPDATE` went through.
#[tokio::test]
async fn read_only_for_the_next_transaction_refuses_the_next_autocommit_write() {
    let h = Harness::start().await;
    let (_, read, write) = order();
    let seen = same_as_mariadb(
        &h,
        &[
            "SET TRANSACTION READ ONLY",
            "SELECT 1",
            &write,
            &write,
            &read,
            &write,
            "SET TRANSACTION READ ONLY",
            "SELECT @@tx_read_only",
            &read,
            &write,
        ],
    )
    .await;
    let codes: Vec<u16> = seen.iter().map(|s| s.0).collect();
    assert_eq!(codes, [0, 0, 1792, 1792, 0, 0, 0, 0, 0, 0], "{seen:?}");
    assert!(seen.iter().all(|s| !s.1), "{seen:?}");
    h.stop().await;
}

/// With autocommit off, the characteristics apply to the transaction the next statement on
/// a table starts, and to every statement of it until it ends.
#[tokio::test]
async fn read_only_for_the_next_transaction_holds_for_the_whole_implicit_transaction() {
    let h = Harness::start().await;
    let (_, read, write) = order();
    let seen = same_as_mariadb(
        &h,
        &[
            "SET TRANSACTION READ ONLY",
            "SET autocommit = 0",
            &write,
            &read,
            &write,
            "COMMIT",
            &write,
            "ROLLBACK",
            "SET autocommit = 1",
        ],
    )
    .await;
    let want = [
        (0, false),
        (0, false),
        (1792, false),
        (0, true),
        (1792, false),
        (0, false),
        (0, true),
        (0, false),
        (0, false),
    ];
    // The flag after an error is not in the reply; only its code is compared.
    let codes: Vec<u16> = seen.iter().map(|s| s.0).collect();
    let want_codes: Vec<u16> = want.iter().map(|s| s.0).collect();
    assert_eq!(codes, want_codes, "{seen:?}");
    assert_eq!(seen, want);
    h.stop().await;
}

/// A refused write changes nothing on its shard, a prepared write is refused too, and a
/// read that reaches every datasource (scatter) spends the characteristics there, after
/// which writes go through again; other sessions never see them.
#[tokio::test]
async fn the_next_transactions_characteristics_reach_prepared_and_scatter_statements() {
    let h = Harness::start().await;
    let guard = Cleanup::default();
    let id = guard.add(fresh_new_id(5));
    let mut c = h.client().await;
    exec(&mut c, &insert_order_sql(id, "EU_CHANNEL", "one-shot")).await;

    exec(&mut c, "SET TRANSACTION READ ONLY").await;
    let r = c
        .exec_drop(
            "UPDATE t_order SET status = 'PAID' WHERE order_id = ?",
            (id,),
        )
        .await;
    assert_eq!(server_code(r), 1792, "a prepared write is refused");
    let r = c
        .query_drop(format!(
            "UPDATE t_order SET status = 'PAID' WHERE order_id = {id}"
        ))
        .await;
    assert_eq!(
        server_code(r),
        1792,
        "still pending after a failed statement"
    );
    let shard = expected_shard("EU_CHANNEL", id);
    assert_eq!(show(&physical_row(shard, id).await.unwrap()[5]), "CREATED");

    // Another session, on the same pools, is not read-only.
    let mut other = h.client().await;
    exec(
        &mut other,
        &format!("UPDATE t_order SET status = 'SHIPPED' WHERE order_id = {id}"),
    )
    .await;
    assert_eq!(show(&physical_row(shard, id).await.unwrap()[5]), "SHIPPED");

    // A read of every shard is this session's read-only transaction, on each datasource.
    let n: Vec<mysql_async::Row> = c
        .query("SELECT COUNT(*) FROM t_order WHERE status = 'SHIPPED'")
        .await
        .unwrap();
    assert_eq!(n.len(), 1);
    let in_trans: Option<u8> = c.query_first("SELECT @@in_transaction").await.unwrap();
    assert_eq!(
        in_trans,
        Some(0),
        "the statement's transaction ended with it"
    );
    exec(
        &mut c,
        &format!("UPDATE t_order SET status = 'PAID' WHERE order_id = {id}"),
    )
    .await;
    assert_eq!(show(&physical_row(shard, id).await.unwrap()[5]), "PAID");
    h.stop().await;
}

/// `SET autocommit = 1` from 0 commits the open transaction, explicit or implicit. One
/// that began with `SET TRANSACTION READ ONLY` leaves it in force on MariaDB until a
/// statement on a table succeeds; the proxy follows, and the backend connection goes back
/// to the pool without it (pools of one connection: the next session gets that one).
#[tokio::test]
async fn turning_autocommit_on_commits_the_open_transaction() {
    let mut config = config();
    for ds in &mut config.datasources {
        ds.pool_size = 1;
    }
    let h = Harness::start_with(config).await;
    let (_, read, write) = order();
    let seen = same_as_mariadb(
        &h,
        &[
            "SET autocommit = 0",
            "BEGIN",
            &write,
            "SET autocommit = 1",
            &read,
            "SET autocommit = 0",
            "SET TRANSACTION READ ONLY",
            &read,
            "SET autocommit = 1",
            &write,
            "SET autocommit = 0",
            &write,
            "SET autocommit = 1",
            "SET autocommit = 0",
            "SET TRANSACTION READ ONLY",
            "BEGIN",
            &read,
            "SET autocommit = 1",
        ],
    )
    .await;
    let want = [
        (0, false),
        (0, true),
        (0, true),
        (0, false),
        (0, false),
        (0, false),
        (0, false),
        (0, true),
        (0, false),
        (1792, false),
        (0, false),
        (1792, false),
        (0, false),
        (0, false),
        (0, false),
        (0, true),
        (0, true),
        (0, false),
    ];
    assert_eq!(seen, want);
    // The session above ended with the characteristics pending on MariaDB's side; the
    // next session, on the same backend connections, writes.
    let mut c = h.client().await;
    exec(&mut c, &write).await;
    h.stop().await;
}

/// Texts MariaDB refuses are refused when sent (1064), several `SET TRANSACTION`s add up,
/// a statement that fails after opening its table spends them (one refused before does
/// not), and a `FROM` that names no table is not a transaction. Found by an attack on the
/// first version, which stored the last text unchecked, kept the characteristics after
/// any failure and took any `FROM` for a table.
#[tokio::test]
async fn characteristics_are_checked_added_up_and_spent_as_mariadb_does() {
    let h = Harness::start().await;
    let (id, read, write) = order();
    let no_column = format!("SELECT nosuchcol FROM t_order WHERE order_id = {id}");
    let seen = same_as_mariadb(
        &h,
        &[
            "SET TRANSACTION ISOLATION LEVEL FOO",
            "SET TRANSACTION READ ONLY, READ WRITE",
            "SET TRANSACTION",
            "SET @a = 1, TRANSACTION READ ONLY",
            &read,
            "START TRANSACTION READ WRITE, READ ONLY",
            "BEGIN foo",
            &read,
            "SET TRANSACTION READ ONLY",
            "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
            &write,
            "SELECT EXTRACT(YEAR FROM NOW()) > 2000",
            "SELECT * FROM (SELECT 1 AS a) d",
            &write,
            "SELECT * FROM t_nosuch",
            &write,
            "TRUNCATE TABLE t_nosuch",
            &write,
            "SET TRANSACTION READ ONLY",
            &no_column,
            &write,
            "SET TRANSACTION READ ONLY",
            "SET autocommit = 0",
            &no_column,
            "SELECT @@in_transaction",
            &write,
            "ROLLBACK",
            "SET autocommit = 1",
            "KILL QUERY CONNECTION_ID()",
        ],
    )
    .await;
    let codes: Vec<u16> = seen.iter().map(|s| s.0).collect();
    assert_eq!(
        codes,
        [
            1064, 1064, 1064, 1064, 0, 1064, 1064, 0, 0, 0, 1792, 0, 0, 1792, 1146, 1792, 1146, 0,
            0, 1054, 0, 0, 0, 1054, 0, 1792, 0, 0, 1317
        ],
        "{seen:?}"
    );
    h.stop().await;
}

/// A `BEGIN` text MariaDB refuses after a pending `SET TRANSACTION` never reaches a pooled
/// connection: the next session, on the same connection (pools of one), is neither read
/// only nor serializable. Before the fix the BEGIN failed on the connection at the first
/// statement and the connection went back to the pool with READ ONLY pending.
#[tokio::test]
async fn a_refused_begin_leaves_nothing_pending_for_the_next_session() {
    let mut config = config();
    for ds in &mut config.datasources {
        ds.pool_size = 1;
    }
    let h = Harness::start_with(config).await;
    let (_, read, write) = order();
    let mut a = h.client().await;
    exec(&mut a, "SET TRANSACTION READ ONLY").await;
    assert_eq!(
        error_code(&mut a, "START TRANSACTION READ WRITE, READ ONLY").await,
        1064
    );
    rows(&mut a, &read).await;
    drop(a);
    let mut b = h.client().await;
    exec(&mut b, &write).await;
    h.stop().await;
}

/// Temporary-table DDL and `LOCK TABLES`, as MariaDB 10.11 treats them: `CREATE`/`DROP
/// TEMPORARY TABLE` are refused under a pending `READ ONLY` (1792) and leave it pending, a
/// write into a temporary table is allowed, and `LOCK TABLES` spends the characteristics
/// (its implicit commit). Before the fix the proxy ran the temporary-table DDL and kept the
/// characteristics pending across `LOCK TABLES`, refusing the write after it.
#[tokio::test]
async fn temporary_tables_and_lock_tables_under_pending_characteristics() {
    let h = Harness::start().await;
    let (_, read, write) = order();
    let seen = same_as_mariadb(
        &h,
        &[
            "SET TRANSACTION READ ONLY",
            "CREATE TEMPORARY TABLE tmp_next (a INT)",
            "DROP TEMPORARY TABLE IF EXISTS tmp_next",
            "CREATE TEMPORARY TABLE tmp_next (a INT) SELECT 1 AS a",
            &write,
            &read,
            "CREATE TEMPORARY TABLE tmp_next (a INT)",
            "SET TRANSACTION READ ONLY",
            "INSERT INTO tmp_next VALUES (1)",
            "DROP TEMPORARY TABLE tmp_next",
            "SET TRANSACTION READ ONLY",
            "LOCK TABLES t_order READ",
            "UNLOCK TABLES",
            &write,
        ],
    )
    .await;
    let codes: Vec<u16> = seen.iter().map(|s| s.0).collect();
    assert_eq!(
        codes,
        [0, 1792, 1792, 1792, 1792, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        "{seen:?}"
    );
    h.stop().await;
}

/// Found by the attack on the temporary-table change, each step compared with MariaDB:
/// - a pinned session with autocommit off lost a pending READ ONLY after a refused write
///   (the connection was taken to be in a transaction, so the next read did not open one
///   with the characteristics, and the write after it went through);
/// - a common table expression inside a derived table, a subquery or an executable
///   comment was taken for a table, and errors MariaDB raises while parsing (1582) spent
///   the characteristics;
/// - `SET TRANSACTION READ ONLY, ISOLATION LEVEL ...` was refused (1064);
/// - `UNLOCK TABLES` with tables locked did not spend them, and `CREATE TEMPORARY
///   SEQUENCE` was refused under them (MariaDB runs it and spends them).
#[tokio::test]
async fn characteristics_after_refusals_ctes_unlock_and_sequences_as_mariadb() {
    let h = Harness::start().await;
    let (_, read, write) = order();
    let seen = same_as_mariadb(
        &h,
        &[
            "CREATE TEMPORARY TABLE tmp_pin (a INT)",
            "SET autocommit = 0",
            "SET TRANSACTION READ ONLY",
            &write,
            &read,
            &write,
            "ROLLBACK",
            "SET autocommit = 1",
            "SET TRANSACTION READ ONLY",
            "SELECT * FROM (WITH x AS (SELECT 1 AS a) SELECT * FROM x) d",
            "SELECT (WITH x AS (SELECT 1 AS a) SELECT a FROM x)",
            "SELECT CONCAT() FROM t_order",
            &write,
            &read,
            &write,
            "SET TRANSACTION READ ONLY, ISOLATION LEVEL SERIALIZABLE",
            &write,
            &read,
            "LOCK TABLES t_order READ",
            "SET TRANSACTION READ ONLY",
            "UNLOCK TABLES",
            &write,
            "SET TRANSACTION READ ONLY",
            "CREATE TEMPORARY SEQUENCE sq_next",
            &write,
            "DROP TEMPORARY TABLE tmp_pin",
        ],
    )
    .await;
    let codes: Vec<u16> = seen.iter().map(|s| s.0).collect();
    assert_eq!(
        codes,
        [
            0, 0, 0, 1792, 0, 1792, 0, 0, 0, 0, 0, 1582, 1792, 0, 0, 0, 1792, 0, 0, 0, 0, 0, 0, 0,
            0, 0
        ],
        "{seen:?}"
    );
    h.stop().await;
}

/// Under `LOCK TABLES`, a statement that pending characteristics would apply to is refused
/// (1235, naming the way out): the transaction the proxy would open for them releases the
/// table locks on MariaDB. Before the fix the locks were released silently. The
/// characteristics stay pending, and `UNLOCK TABLES` spends them.
#[tokio::test]
async fn pending_characteristics_never_release_table_locks() {
    let h = Harness::start().await;
    let (_, read, write) = order();
    let mut c = h.client().await;
    exec(&mut c, "LOCK TABLES t_order READ").await;
    exec(&mut c, "SET TRANSACTION ISOLATION LEVEL READ COMMITTED").await;
    assert_eq!(error_code(&mut c, &read).await, 1235);
    exec(&mut c, "SELECT 1").await;
    exec(&mut c, "UNLOCK TABLES").await;
    exec(&mut c, "SET TRANSACTION READ ONLY").await;
    exec(&mut c, "LOCK TABLES t_order READ").await;
    exec(&mut c, "UNLOCK TABLES").await;
    exec(&mut c, &write).await;
    h.stop().await;
}

/// While `LOCK TABLES` holds locks, a statement that would run on a datasource where the
/// session locked no table is refused with MariaDB's 1100, as MariaDB refuses a table it
/// did not lock; on a datasource with locks MariaDB answers itself. Before the fix, `LOCK
/// TABLES` of an unsharded table (on the default datasource) let an `UPDATE` of an order on
/// the other datasource run unlocked (found by the attack on the characteristics changes).
#[tokio::test]
async fn a_datasource_without_locks_runs_nothing_under_lock_tables() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    exec(&mut c, "CREATE TABLE IF NOT EXISTS lock_probe (a INT)").await;
    exec(&mut c, "LOCK TABLES lock_probe READ").await;
    for ds in [0, 1] {
        let id = order_on(ds, 3);
        let update = format!("UPDATE t_order SET status = status WHERE order_id = {id}");
        assert_eq!(error_code(&mut c, &update).await, 1100, "order on ds{ds}");
    }
    exec(&mut c, "SELECT * FROM lock_probe").await;
    exec(&mut c, "UNLOCK TABLES").await;
    let id = order_on(1, 3);
    exec(
        &mut c,
        &format!("UPDATE t_order SET status = status WHERE order_id = {id}"),
    )
    .await;
    exec(&mut c, "DROP TABLE lock_probe").await;
    h.stop().await;
}
