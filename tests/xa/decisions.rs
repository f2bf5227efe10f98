//! A COMMIT whose decision is not taken as the coordinator meant: an abort recorded first
//! (as a resolver records it), and the decision commit's connection lost in flight (its
//! server SIGKILLed while `BACKUP STAGE BLOCK_COMMIT` holds that COMMIT), with the server
//! back within the coordinator's 10 s of reading the decision back, and not. The client is
//! never told OK for any of them, and nothing of them is committed anywhere.

use std::time::{Duration, Instant};

use mysql_async::prelude::*;

use crate::fixture::*;

/// The server's error code of a COMMIT's result, and its message.
fn code(r: &Result<(), mysql_async::Error>) -> (Option<u16>, String) {
    match r {
        Err(mysql_async::Error::Server(e)) => (Some(e.code), e.message.clone()),
        Err(e) => (None, e.to_string()),
        Ok(()) => (None, "OK".to_owned()),
    }
}

/// Holds every COMMIT on dsN (`BACKUP STAGE BLOCK_COMMIT`) while the returned connection
/// lives.
async fn block_commits(ds: usize) -> mysql_async::Conn {
    let mut c = server(ds).await;
    for stage in ["START", "FLUSH", "BLOCK_DDL", "BLOCK_COMMIT"] {
        c.query_drop(format!("BACKUP STAGE {stage}")).await.unwrap();
    }
    c
}

/// Waits (up to 10 s) until a `COMMIT` waits for the backup lock on dsN.
async fn commit_waiting(ds: usize) {
    let started = Instant::now();
    let mut c = server(ds).await;
    loop {
        let n: Option<u64> = c
            .query_first(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = 'COMMIT' AND STATE LIKE '%backup lock%'",
            )
            .await
            .unwrap();
        if n.unwrap_or(0) > 0 {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no COMMIT waits on ds{ds}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The decision dsN holds for `gtrid`.
async fn decision(ds: usize, gtrid: &str) -> Option<String> {
    server(ds)
        .await
        .query_first(format!(
            "SELECT CAST(decision AS CHAR) FROM {DECISIONS} WHERE xid = '{gtrid}'"
        ))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_or_preempted_decisions_are_never_acknowledged() {
    let _guard = fresh().await;
    within(
        Duration::from_secs(90),
        lost_or_preempted_decisions_are_never_acknowledged_run(),
    )
    .await;
}

async fn lost_or_preempted_decisions_are_never_acknowledged_run() {
    let began = Instant::now();
    let work = Workdir::new("decisions");
    let tables = physical_tables(&work.config());
    let p = Proc::start(
        &work,
        "coordinator",
        free_port(),
        free_port(),
        Settings::quick(),
    )
    .await;
    let eu = new_id(EU);
    let biz = new_id(BIZ);
    {
        let mut c = p.client().await;
        for (id, channel, region) in [(eu, "EU_CHANNEL", "GB"), (biz, "BIZ_CHANNEL", "HK")] {
            c.query_drop(format!(
                "INSERT INTO t_order (order_id, channel, region, user_id, amount, status, note, created_at) \
                 VALUES ({id}, '{channel}', '{region}', 7, 1000.00, 'CREATED', 'xa-decisions', NOW(3))"
            ))
            .await
            .unwrap();
        }
    }
    // A first transfer (ds0 decides) commits: its record names this proxy's gtrids.
    transfer_through(p.opts(), 1, eu, biz, true).await.unwrap();
    let (sidecar, first): (String, String) = server(0)
        .await
        .query_first(format!(
            "SELECT coordinator, CAST(xid AS CHAR) FROM {DECISIONS} ORDER BY decided_at DESC LIMIT 1"
        ))
        .await
        .unwrap()
        .unwrap();
    let seq: u64 = first.rsplit(':').next().unwrap().parse().unwrap();
    let gtrid = |n: u64| format!("rk:{sidecar}:{n}");
    assert_eq!(first, gtrid(seq));
    let mut expected = vec![(0usize, eu, 1u32), (1, biz, 1)];
    let amounts = || async {
        let (orders, items) = read_back(&tables, &[eu, biz]).await;
        let mut markers: Vec<(usize, u64, u32)> =
            items.into_iter().map(|(ds, o, t, ..)| (ds, o, t)).collect();
        markers.sort();
        (orders[&eu].clone(), orders[&biz].clone(), markers)
    };
    expected.sort();
    assert_eq!(
        amounts().await,
        (vec![(0, 99_000)], vec![(1, 101_000)], expected.clone())
    );

    // 1. An abort recorded first for the next xid (as a resolver records one): the commit
    //    record fails on the key, everything rolls back, 1402.
    let preempted = gtrid(seq + 1);
    server(0)
        .await
        .query_drop(format!(
            "INSERT INTO {DECISIONS} (xid, decision, coordinator, decided_at) VALUES ('{preempted}', 'abort', 'xa-test', NOW(6))"
        ))
        .await
        .unwrap();
    let r1 = transfer_through(p.opts(), 2, eu, biz, true).await;
    let (c1, m1) = code(&r1);
    assert_eq!(c1, Some(1402), "an abort recorded first: {m1}");
    assert!(m1.contains(&preempted), "the message names the xid: {m1}");
    assert_eq!(
        amounts().await,
        (vec![(0, 99_000)], vec![(1, 101_000)], expected.clone()),
        "nothing of the preempted transfer committed"
    );
    assert_eq!(prepared_on(1).await, vec![], "its branch was rolled back");

    // 2. The decision commit held on ds0, ds0 SIGKILLed and started again at once: the
    //    coordinator reads the decision back, records abort (the commit never happened),
    //    rolls back, 1402.
    let lost_soon = gtrid(seq + 2);
    let holder = block_commits(0).await;
    let task = tokio::spawn(transfer_through(p.opts(), 3, eu, biz, true));
    commit_waiting(0).await;
    assert_eq!(
        prepared_on(1).await,
        vec![(lost_soon.clone(), "1:ds0".to_owned())],
        "the branch is prepared while the decision commit waits"
    );
    kill_server(0).await;
    drop(holder);
    let restart = Instant::now();
    start_server(0).await;
    let back_soon = restart.elapsed();
    let r2 = tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("COMMIT answered within 30 s")
        .unwrap();
    let (c2, m2) = code(&r2);
    assert_eq!(c2, Some(1402), "the decision read back is abort: {m2}");
    assert_eq!(decision(0, &lost_soon).await.as_deref(), Some("abort"));
    let took2 = wait_no_prepared(Duration::from_secs(20)).await;
    assert_eq!(
        amounts().await,
        (vec![(0, 99_000)], vec![(1, 101_000)], expected.clone()),
        "nothing of transfer 3 committed"
    );

    // 3. The same with ds0 down for longer than the coordinator reads: 1180 (unknown),
    //    naming the xid; once ds0 is back the resolver records abort and rolls back.
    let lost_long = gtrid(seq + 3);
    let holder = block_commits(0).await;
    let task = tokio::spawn(transfer_through(p.opts(), 4, eu, biz, true));
    commit_waiting(0).await;
    kill_server(0).await;
    drop(holder);
    let down = Instant::now();
    let r3 = tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("COMMIT answered within 30 s")
        .unwrap();
    let told_after = down.elapsed();
    let (c3, m3) = code(&r3);
    assert_eq!(c3, Some(1180), "the decision cannot be read: {m3}");
    assert!(m3.contains(&lost_long), "the message names the xid: {m3}");
    assert_eq!(
        prepared_on(1).await,
        vec![(lost_long.clone(), "1:ds0".to_owned())],
        "the branch waits for a resolver"
    );
    start_server(0).await;
    let took3 = wait_no_prepared(Duration::from_secs(30)).await;
    assert_eq!(decision(0, &lost_long).await.as_deref(), Some("abort"));
    assert_eq!(
        amounts().await,
        (vec![(0, 99_000)], vec![(1, 101_000)], expected.clone()),
        "nothing of transfer 4 committed"
    );
    let started = Instant::now();
    let mut resolved = p.resolved().await;
    while resolved.1 < 1 && started.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        resolved = p.resolved().await;
    }
    let lines = resolver_lines(&p.log_text());
    // And the proxy still commits atomically.
    transfer_through(p.opts(), 5, biz, eu, true).await.unwrap();
    expected.extend([(0, eu, 5), (1, biz, 5)]);
    expected.sort();
    assert_eq!(
        amounts().await,
        (vec![(0, 100_000)], vec![(1, 100_000)], expected),
        "transfer 5 (ds1 decides) committed on both"
    );
    println!("xa decisions: figures");
    println!("  an abort recorded first: COMMIT answered {c1:?}");
    println!(
        "  decision commit lost, ds0 back after {:.1} s: COMMIT answered {c2:?}, branch gone {:.1} s later",
        back_soon.as_secs_f64(),
        took2.as_secs_f64()
    );
    println!(
        "  decision commit lost, ds0 down: COMMIT answered {c3:?} after {:.1} s; the resolver rolled the branch back {:.1} s after ds0 was started (resolved {resolved:?}, log lines {lines:?}); test took {:.1} s",
        told_after.as_secs_f64(),
        took3.as_secs_f64(),
        began.elapsed().as_secs_f64()
    );
    assert!(
        resolved.1 >= 1,
        "the resolver rolled transfer 4's branch back"
    );
}
