//! The resolvers: two proxies finding the same abandoned branches decide and finish each
//! exactly once; a branch prepared (and a decision recorded) on a server that is SIGKILLed
//! survives its restart and is finished by the next proxy's resolver.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;

use crate::fixture::*;

/// Branches prepared by hand for the two resolvers.
const BRANCHES: usize = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_resolvers_decide_each_branch_once() {
    let _guard = fresh().await;
    within(
        Duration::from_secs(60),
        two_resolvers_decide_each_branch_once_run(),
    )
    .await;
}

async fn two_resolvers_decide_each_branch_once_run() {
    let began = Instant::now();
    let work = Workdir::new("two-resolvers");
    let config = work.config();
    let mut ds0 = server(0).await;
    create_decision_table(&config, &mut ds0).await;
    let mut ds1 = server(1).await;
    ds1.query_drop("CREATE DATABASE IF NOT EXISTS routekey_xa_test")
        .await
        .unwrap();
    ds1.query_drop(
        "CREATE TABLE IF NOT EXISTS routekey_xa_test.branches (gtrid VARCHAR(64) NOT NULL PRIMARY KEY, i INT NOT NULL) ENGINE=InnoDB",
    )
    .await
    .unwrap();
    // BRANCHES branches of ours prepared on ds1, their decision datasource ds0 (the bqual,
    // here in its short form without the branch's datasource number, which resolvers read too);
    // every even one with a commit record there, the odd ones with none.
    let nonce = format!("{:08x}", rand::random::<u32>());
    let gtrids: Vec<String> = (0..BRANCHES)
        .map(|i| format!("rk:test:{nonce}:{i}"))
        .collect();
    for (i, gtrid) in gtrids.iter().enumerate() {
        let mut c = server(1).await;
        let xid = format!("'{gtrid}','ds0',{FORMAT_ID}");
        for sql in [
            format!("XA START {xid}"),
            format!("INSERT INTO routekey_xa_test.branches (gtrid, i) VALUES ('{gtrid}', {i})"),
            format!("XA END {xid}"),
            format!("XA PREPARE {xid}"),
        ] {
            c.query_drop(sql).await.unwrap();
        }
        // A prepared branch is another connection's to finish once its own is closed.
        c.disconnect().await.unwrap();
        if i % 2 == 0 {
            ds0.query_drop(format!(
                "INSERT INTO {DECISIONS} (xid, decision, coordinator, decided_at) VALUES ('{gtrid}', 'commit', 'xa-test', NOW(6))"
            ))
            .await
            .unwrap();
        }
    }
    let listed: BTreeSet<String> = prepared_on(1)
        .await
        .into_iter()
        .filter(|(_, b)| b == "ds0")
        .map(|(g, _)| g)
        .collect();
    assert_eq!(
        listed,
        gtrids.iter().cloned().collect(),
        "XA RECOVER on ds1 lists the prepared branches"
    );
    drop(ds1);

    // Two proxies at once, each deciding a branch it has seen prepared for 2 s.
    let settings = Settings {
        failpoints: None,
        abandon_age: "2s",
        resolve_interval: "500ms",
    };
    let (pa, pb) = tokio::join!(
        Proc::start(
            &work,
            "resolver-a",
            free_port(),
            free_port(),
            settings.clone()
        ),
        Proc::start(
            &work,
            "resolver-b",
            free_port(),
            free_port(),
            settings.clone()
        ),
    );
    let took = wait_no_prepared(Duration::from_secs(30)).await;
    // The counters follow the XA COMMIT/ROLLBACK by a moment: wait for N, then watch that
    // more rounds add nothing.
    let started = Instant::now();
    let (mut ra, mut rb) = (pa.resolved().await, pb.resolved().await);
    while ra.0 + ra.1 + rb.0 + rb.1 < BRANCHES as u64 && started.elapsed() < Duration::from_secs(5)
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
        (ra, rb) = (pa.resolved().await, pb.resolved().await);
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (ra, rb) = (pa.resolved().await, pb.resolved().await);
    let lines = [
        resolver_lines(&pa.log_text()),
        resolver_lines(&pb.log_text()),
    ];
    let mut ds0 = server(0).await;
    let decided: Vec<(String, String, String)> = ds0
        .query(format!(
            "SELECT CAST(xid AS CHAR), CAST(decision AS CHAR), coordinator FROM {DECISIONS} WHERE xid LIKE 'rk:test:{nonce}:%'"
        ))
        .await
        .unwrap();
    let mut ds1 = server(1).await;
    let elsewhere: u64 = ds1
        .query_first(format!(
            "SELECT COUNT(*) FROM {DECISIONS} WHERE xid LIKE 'rk:test:{nonce}:%'"
        ))
        .await
        .unwrap()
        .unwrap();
    let visible: BTreeSet<String> = ds1
        .query::<String, _>(format!(
            "SELECT gtrid FROM routekey_xa_test.branches WHERE gtrid LIKE 'rk:test:{nonce}:%'"
        ))
        .await
        .unwrap()
        .into_iter()
        .collect();

    println!("xa two resolvers: figures");
    println!(
        "  {BRANCHES} branches prepared on ds1, {} with a commit record on ds0; none left after {:.1} s",
        BRANCHES / 2,
        took.as_secs_f64()
    );
    println!(
        "  proxy a resolved (commit, rollback) {ra:?} (log lines {:?}), proxy b {rb:?} (log lines {:?}); test took {:.1} s",
        lines[0],
        lines[1],
        began.elapsed().as_secs_f64()
    );
    assert_eq!(
        decided.len(),
        BRANCHES,
        "one decision row per xid: {decided:?}"
    );
    assert_eq!(
        elsewhere, 0,
        "decisions live on the bqual's datasource (ds0) only"
    );
    for (i, gtrid) in gtrids.iter().enumerate() {
        let rows: Vec<_> = decided.iter().filter(|(x, ..)| x == gtrid).collect();
        assert_eq!(rows.len(), 1, "{gtrid}: {rows:?}");
        let (_, decision, coordinator) = rows[0];
        if i % 2 == 0 {
            assert_eq!(
                (decision.as_str(), coordinator.as_str()),
                ("commit", "xa-test"),
                "{gtrid}: its commit record stays"
            );
            assert!(
                visible.contains(gtrid),
                "{gtrid} was committed: its row is there"
            );
        } else {
            assert_eq!(
                decision, "abort",
                "{gtrid}: no record, so an abort is recorded"
            );
            assert!(
                !visible.contains(gtrid),
                "{gtrid} was rolled back: its row is not there"
            );
        }
    }
    assert_eq!(
        (ra.0 + rb.0, ra.1 + rb.1),
        (BRANCHES as u64 / 2, BRANCHES as u64 / 2),
        "each branch finished exactly once over both proxies: a {ra:?}, b {rb:?}"
    );
    assert_eq!(
        (lines[0].0 + lines[1].0, lines[0].1 + lines[1].1),
        (BRANCHES as u64 / 2, BRANCHES as u64 / 2),
        "one resolver log line per branch"
    );
}

/// Waits up to 10 s for `p` to exit; the failpoint it reached.
async fn died_at(p: &mut Proc) -> Option<String> {
    let started = Instant::now();
    while !p.exited() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the proxy is still running:\n{}",
            p.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    p.failpoint_reached()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_keeps_prepared_branches_until_resolved() {
    let _guard = fresh().await;
    within(
        Duration::from_secs(90),
        a_killed_server_keeps_prepared_branches_until_resolved_run(),
    )
    .await;
}

async fn a_killed_server_keeps_prepared_branches_until_resolved_run() {
    let began = Instant::now();
    let work = Workdir::new("killed-server");
    let config = work.config();
    let tables = physical_tables(&config);
    // Two different ports: two pickings in a row may get the same one back.
    let port = free_port();
    let admin = std::iter::repeat_with(free_port)
        .find(|p| *p != port)
        .unwrap();
    let eu = [new_id(EU), new_id(EU)];
    let biz = [new_id(BIZ), new_id(BIZ)];
    let all = [eu[0], eu[1], biz[0], biz[1]];
    // Proxies that die after recording the decision, before any XA COMMIT (their
    // resolvers wait 30 s: they never act here).
    let dying = Settings {
        failpoints: Some("after_decision".to_owned()),
        abandon_age: "30s",
        resolve_interval: "1s",
    };
    let mut p1 = Proc::start(&work, "dies-1", port, admin, dying.clone()).await;
    {
        let mut c = p1.client().await;
        for (id, channel, region) in [
            (eu[0], "EU_CHANNEL", "GB"),
            (eu[1], "EU_CHANNEL", "GB"),
            (biz[0], "BIZ_CHANNEL", "HK"),
            (biz[1], "BIZ_CHANNEL", "HK"),
        ] {
            // One datasource each, autocommit: no atomic commit, no failpoint.
            c.query_drop(format!(
                "INSERT INTO t_order (order_id, channel, region, user_id, amount, status, note, created_at) \
                 VALUES ({id}, '{channel}', '{region}', 7, 1000.00, 'CREATED', 'xa-killed-server', NOW(3))"
            ))
            .await
            .unwrap();
        }
    }
    // Transfer 1: ds0 first (the decision branch), ds1 an XA branch.
    let t1 = transfer_through(p1.opts(), 1, eu[0], biz[0], true).await;
    assert!(t1.is_err(), "the proxy died during COMMIT: {t1:?}");
    assert_eq!(died_at(&mut p1).await.as_deref(), Some("after_decision"));
    // Transfer 2: ds1 first (the decision branch), ds0 an XA branch.
    let mut p2 = Proc::start(&work, "dies-2", port, admin, dying.clone()).await;
    let t2 = transfer_through(p2.opts(), 2, biz[1], eu[1], true).await;
    assert!(t2.is_err(), "the proxy died during COMMIT: {t2:?}");
    assert_eq!(died_at(&mut p2).await.as_deref(), Some("after_decision"));

    let on1 = prepared_on(1).await;
    let on0 = prepared_on(0).await;
    assert_eq!(on1.len(), 1, "transfer 1's branch prepared on ds1: {on1:?}");
    assert_eq!(on0.len(), 1, "transfer 2's branch prepared on ds0: {on0:?}");
    // bqual: the branch's datasource number, then the decision datasource.
    assert_eq!(on1[0].1, "1:ds0", "transfer 1 decided on ds0");
    assert_eq!(on0[0].1, "0:ds1", "transfer 2 decided on ds1");
    let record = |gtrid: &str| {
        format!("SELECT CAST(decision AS CHAR) FROM {DECISIONS} WHERE xid = '{gtrid}'")
    };
    let d1: Option<String> = server(0)
        .await
        .query_first(record(&on1[0].0))
        .await
        .unwrap();
    let d2: Option<String> = server(1)
        .await
        .query_first(record(&on0[0].0))
        .await
        .unwrap();
    assert_eq!(
        d1.as_deref(),
        Some("commit"),
        "transfer 1's decision on ds0"
    );
    assert_eq!(
        d2.as_deref(),
        Some("commit"),
        "transfer 2's decision on ds1"
    );

    // ds1's mariadbd SIGKILLed: it holds transfer 1's prepared branch and transfer 2's
    // committed decision; both must survive crash recovery.
    let pid = server_pid(1).await;
    kill_server(1).await;
    let restart = Instant::now();
    start_server(1).await;
    let back = restart.elapsed();
    let after: Vec<_> = prepared_on(1).await;
    assert_eq!(after, on1, "the prepared branch survives the crash");
    let d2: Option<String> = server(1)
        .await
        .query_first(record(&on0[0].0))
        .await
        .unwrap();
    assert_eq!(
        d2.as_deref(),
        Some("commit"),
        "the decision survives the crash"
    );
    let (before, _) = read_back(&tables, &all).await;
    assert_eq!(
        before[&biz[0]],
        vec![(1, 100_000)],
        "a prepared branch's change is not visible before XA COMMIT"
    );

    // A normal proxy: its resolver commits both branches (their commit records).
    let p3 = Proc::start(&work, "resolver", port, admin, Settings::quick()).await;
    let took = wait_no_prepared(Duration::from_secs(30)).await;
    let (orders, items) = read_back(&tables, &all).await;
    let started = Instant::now();
    let mut resolved = p3.resolved().await;
    while resolved.0 < 2 && started.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        resolved = p3.resolved().await;
    }
    let lines = resolver_lines(&p3.log_text());
    println!("xa killed server: figures");
    println!(
        "  2 transfers left decided but not XA-committed by proxies killed at after_decision; mariadbd of ds1 (pid {pid}) SIGKILLed, back after {:.1} s",
        back.as_secs_f64()
    );
    println!(
        "  the next proxy's resolver finished them in {:.1} s: resolved (commit, rollback) {resolved:?}, log lines {lines:?}; test took {:.1} s",
        took.as_secs_f64(),
        began.elapsed().as_secs_f64()
    );
    assert_eq!(
        orders[&eu[0]],
        vec![(0, 99_000)],
        "transfer 1 debited on ds0"
    );
    assert_eq!(
        orders[&biz[0]],
        vec![(1, 101_000)],
        "transfer 1 credited on ds1"
    );
    assert_eq!(
        orders[&biz[1]],
        vec![(1, 99_000)],
        "transfer 2 debited on ds1"
    );
    assert_eq!(
        orders[&eu[1]],
        vec![(0, 101_000)],
        "transfer 2 credited on ds0"
    );
    let mut markers: Vec<(usize, u64, u32, String)> = items
        .into_iter()
        .map(|(ds, o, t, s, _)| (ds, o, t, s))
        .collect();
    markers.sort();
    let mut want = vec![
        (0, eu[0], 1, "xa-debit".to_owned()),
        (1, biz[0], 1, "xa-credit".to_owned()),
        (1, biz[1], 2, "xa-debit".to_owned()),
        (0, eu[1], 2, "xa-credit".to_owned()),
    ];
    want.sort();
    assert_eq!(markers, want, "both transfers' markers on both sides");
    assert_eq!(resolved, (2, 0), "the resolver committed both branches");
    assert_eq!(lines, (2, 0));
}
