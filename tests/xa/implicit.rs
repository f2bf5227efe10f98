//! A transaction with XA branches ended by something other than `COMMIT`: `autocommit = 0`
//! then `COMMIT`, a `BEGIN` inside it, `LOCK TABLES` (MariaDB commits the open
//! transaction first), and `SET autocommit = 1` from 0 must each commit atomically: both
//! datasources or neither, with one commit decision. A lock wait timeout in a branch ends
//! it (rolled back everywhere): the replies must say so.

use std::time::{Duration, Instant};

use mysql_async::Conn;
use mysql_async::prelude::*;

use crate::fixture::*;

/// Two orders of their own (ds0, ds1) at 1000.00 through the proxy `p`.
async fn two_orders(p: &Proc, note: &str) -> (u64, u64) {
    let (eu, biz) = (new_id(EU), new_id(BIZ));
    let mut c = p.client().await;
    for (id, channel, region) in [(eu, "EU_CHANNEL", "GB"), (biz, "BIZ_CHANNEL", "HK")] {
        c.query_drop(format!(
            "INSERT INTO t_order (order_id, channel, region, user_id, amount, status, note, created_at) \
             VALUES ({id}, '{channel}', '{region}', 7, 1000.00, 'CREATED', '{note}', NOW(3))"
        ))
        .await
        .unwrap();
    }
    (eu, biz)
}

/// The two orders' amounts in cents, read on their servers.
async fn cents(tables: &[(usize, String, String)], eu: u64, biz: u64) -> (i64, i64) {
    let (orders, _) = read_back(tables, &[eu, biz]).await;
    (orders[&eu][0].1, orders[&biz][0].1)
}

/// Commit decisions recorded on both servers since `since` (each server's clock).
async fn commits_since(since: &[String; 2]) -> u64 {
    decisions_since(0, &since[0]).await.0 + decisions_since(1, &since[1]).await.0
}

async fn now_on_both() -> [String; 2] {
    [
        server_now(&mut server(0).await).await,
        server_now(&mut server(1).await).await,
    ]
}

/// Moves 1.00 from `eu` to `biz` on `c` (no BEGIN, no COMMIT).
async fn move_one(c: &mut Conn, eu: u64, biz: u64) {
    c.query_drop(format!(
        "UPDATE t_order SET amount = amount - 1 WHERE order_id = {eu}"
    ))
    .await
    .unwrap();
    c.query_drop(format!(
        "UPDATE t_order SET amount = amount + 1 WHERE order_id = {biz}"
    ))
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn implicit_commits_of_a_distributed_transaction_are_atomic() {
    let _guard = fresh().await;
    within(
        Duration::from_secs(60),
        implicit_commits_of_a_distributed_transaction_are_atomic_run(),
    )
    .await;
}

async fn implicit_commits_of_a_distributed_transaction_are_atomic_run() {
    let began = Instant::now();
    let work = Workdir::new("implicit");
    let tables = physical_tables(&work.config());
    let p = Proc::start(&work, "proxy", free_port(), free_port(), Settings::quick()).await;
    let (eu, biz) = two_orders(&p, "xa-implicit").await;
    let mut c = p.client().await;
    let mut moved = 0;
    for (what, before, after) in [
        (
            "autocommit = 0, then COMMIT",
            "SET autocommit = 0",
            "COMMIT",
        ),
        ("a BEGIN inside the transaction", "BEGIN", "BEGIN"),
        (
            "LOCK TABLES inside the transaction",
            "BEGIN",
            "LOCK TABLES t_merchant READ",
        ),
    ] {
        let since = now_on_both().await;
        c.query_drop(before).await.unwrap();
        move_one(&mut c, eu, biz).await;
        c.query_drop(after).await.unwrap();
        moved += 100;
        assert_eq!(
            cents(&tables, eu, biz).await,
            (100_000 - moved, 100_000 + moved),
            "{what}: both sides committed"
        );
        assert_eq!(
            commits_since(&since).await,
            1,
            "{what}: one commit decision"
        );
        assert_eq!(prepared_on(0).await.len() + prepared_on(1).await.len(), 0);
        for reset in ["ROLLBACK", "UNLOCK TABLES", "SET autocommit = 1"] {
            c.query_drop(reset).await.unwrap();
        }
    }
    println!(
        "xa implicit commits: COMMIT with autocommit 0, BEGIN and LOCK TABLES each committed on both datasources with one decision; test took {:.1} s",
        began.elapsed().as_secs_f64()
    );
}

/// `SET autocommit = 1` with an open transaction commits it (MariaDB's rule): with XA
/// branches, by the atomic protocol before the SET reaches any connection. (Found by this
/// test: the SET went to every held connection, the decision branch's plain transaction
/// committed alone and the XA branch refused it with 1399 and rolled back.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_autocommit_1_commits_a_distributed_transaction_atomically() {
    let _guard = fresh().await;
    within(
        Duration::from_secs(60),
        set_autocommit_1_commits_a_distributed_transaction_atomically_run(),
    )
    .await;
}

async fn set_autocommit_1_commits_a_distributed_transaction_atomically_run() {
    let work = Workdir::new("autocommit");
    let tables = physical_tables(&work.config());
    let p = Proc::start(&work, "proxy", free_port(), free_port(), Settings::quick()).await;
    let (eu, biz) = two_orders(&p, "xa-autocommit").await;
    let mut c = p.client().await;
    c.query_drop("SET autocommit = 0").await.unwrap();
    // ds0 first: the decision branch; ds1 an XA branch.
    move_one(&mut c, eu, biz).await;
    let set = c.query_drop("SET autocommit = 1").await;
    drop(c);
    let got = cents(&tables, eu, biz).await;
    assert!(
        got == (100_000, 100_000) || got == (99_900, 100_100),
        "SET autocommit = 1 ({set:?}) left half a transaction committed: {got:?}"
    );
    assert!(set.is_ok(), "MariaDB commits the transaction: {set:?}");
    assert_eq!(got, (99_900, 100_100), "both sides committed");
}

/// A lock wait timeout (1205) in a branch of a transaction with XA branches rolls back
/// every branch and ends the transaction (docs/decisions/0004, unlike one MariaDB server,
/// where only the statement rolls back): the replies stop saying `IN_TRANS`,
/// `@@in_transaction` is 0, and nothing of it is committed or left prepared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_branch_timing_out_rolls_back_every_branch() {
    let _guard = fresh().await;
    within(
        Duration::from_secs(60),
        a_branch_timing_out_rolls_back_every_branch_run(),
    )
    .await;
}

async fn a_branch_timing_out_rolls_back_every_branch_run() {
    use crate::common::wire::{WireClient, WireOptions};
    let work = Workdir::new("timeout");
    let tables = physical_tables(&work.config());
    let p = Proc::start(&work, "proxy", free_port(), free_port(), Settings::quick()).await;
    let (eu, biz) = two_orders(&p, "xa-timeout").await;
    // Another session holds ds1's row.
    let mut locker = p.client().await;
    locker.query_drop("BEGIN").await.unwrap();
    locker
        .query_drop(format!(
            "UPDATE t_order SET note = 'locked' WHERE order_id = {biz}"
        ))
        .await
        .unwrap();
    let addr = format!("127.0.0.1:{}", p.port).parse().unwrap();
    let mut w = WireClient::connect(addr, "app", "app", Some("orders"), WireOptions::default())
        .await
        .unwrap();
    w.query("SET SESSION innodb_lock_wait_timeout = 1").await;
    w.query("BEGIN").await;
    let debit = w
        .query(&format!(
            "UPDATE t_order SET amount = amount - 1 WHERE order_id = {eu}"
        ))
        .await;
    assert!(debit[0].contains("IN_TRANS"), "{debit:?}");
    let timed_out = w
        .query(&format!(
            "UPDATE t_order SET amount = amount + 1 WHERE order_id = {biz}"
        ))
        .await;
    assert!(timed_out[0].starts_with("ERR 1205"), "{timed_out:?}");
    locker.query_drop("ROLLBACK").await.unwrap();
    let after = w.query("SELECT 1").await;
    assert!(
        after.iter().all(|l| !l.contains("IN_TRANS"))
            && after.iter().any(|l| l.contains("AUTOCOMMIT")),
        "no transaction is open any more: {after:?}"
    );
    assert_eq!(
        w.value("SELECT @@in_transaction").await.as_deref(),
        Some("0")
    );
    assert_eq!(
        cents(&tables, eu, biz).await,
        (100_000, 100_000),
        "the debit on ds0 was rolled back with the branch that timed out"
    );
    assert_eq!(prepared_on(0).await.len() + prepared_on(1).await.len(), 0);
    println!(
        "xa lock wait timeout in a branch: {timed_out:?}, then {after:?}: every branch rolled back"
    );
}
