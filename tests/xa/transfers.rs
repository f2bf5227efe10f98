//! Money moves between an order on ds0 and one on ds1, in transactions through the proxy,
//! while the proxy is killed (by its failpoints and by the test) and restarted, and once
//! while ds1's MariaDB server is killed and restarted. Once a last proxy's resolver has
//! finished every branch left prepared: no money made or lost, every transfer on both
//! datasources or on neither, every acknowledged one on both, every refused one on
//! neither.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::{Conn, Opts};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::fixture::*;

const CLIENTS: usize = 16;
const ORDERS_PER_SIDE: usize = 16;
/// Every order starts with 1000.00.
const INITIAL_CENTS: i64 = 100_000;
/// The `note` of the orders of this test (and how an earlier run's are found).
const NOTE: &str = "xa-transfers";
/// A statement of a transfer's body; its COMMIT.
const STATEMENT_LIMIT: Duration = Duration::from_secs(15);
const COMMIT_LIMIT: Duration = Duration::from_secs(40);

/// How one client's transfers ended.
#[derive(Default)]
struct Tally {
    /// COMMIT answered OK.
    acked: Vec<u32>,
    /// Refused before or by COMMIT with a definite error: nothing may be committed.
    failed: Vec<u32>,
    /// The connection was lost during COMMIT, or 1180: either outcome is allowed.
    unknown: Vec<u32>,
    /// Why, counted ("body 1205", "commit io", ...).
    reasons: BTreeMap<String, u64>,
    /// The first message of each reason.
    samples: BTreeMap<String, String>,
    /// Acknowledged transfers whose decision branch was on ds0, on ds1.
    decided_on: [usize; 2],
}

impl Tally {
    fn count(&mut self, why: String, message: String) {
        *self.reasons.entry(why.clone()).or_default() += 1;
        self.samples.entry(why).or_insert(message);
    }
}

/// A transfer's marker rows as found: the debit's (order, cents), the credit's.
type Markers = (Option<(u64, i64)>, Option<(u64, i64)>);

enum Ended {
    Acked,
    /// Why, the message, and whether the connection is still usable.
    Failed(String, String, bool),
    /// Why, the message.
    Unknown(String, String),
}

fn kind(e: &mysql_async::Error) -> String {
    match e {
        mysql_async::Error::Server(s) => s.code.to_string(),
        mysql_async::Error::Io(_) => "io".to_owned(),
        mysql_async::Error::Driver(_) => "driver".to_owned(),
        other => format!("{other:?}").chars().take(40).collect(),
    }
}

fn cents_sql(cents: i64) -> String {
    format!("{}.{:02}", cents / 100, cents % 100)
}

/// One transfer on `c`: `BEGIN`, each side's UPDATE and marker INSERT, `COMMIT`.
async fn transfer(c: &mut Conn, body: &[String]) -> Ended {
    for sql in body {
        match tokio::time::timeout(STATEMENT_LIMIT, c.query_drop(sql)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                // COMMIT was never sent: nothing of it can commit.
                let why = format!("body {}", kind(&e));
                let usable = matches!(e, mysql_async::Error::Server(_))
                    && matches!(
                        tokio::time::timeout(STATEMENT_LIMIT, c.query_drop("ROLLBACK")).await,
                        Ok(Ok(()))
                    );
                return Ended::Failed(why, e.to_string(), usable);
            }
            Err(_) => return Ended::Failed("body timeout".to_owned(), sql.clone(), false),
        }
    }
    match tokio::time::timeout(COMMIT_LIMIT, c.query_drop("COMMIT")).await {
        Ok(Ok(())) => Ended::Acked,
        Ok(Err(mysql_async::Error::Server(e))) if e.code == 1180 => {
            Ended::Unknown("commit 1180".to_owned(), e.message.clone())
        }
        Ok(Err(e @ mysql_async::Error::Server(_))) => {
            Ended::Failed(format!("commit {}", kind(&e)), e.to_string(), false)
        }
        Ok(Err(e)) => Ended::Unknown(format!("commit {}", kind(&e)), e.to_string()),
        Err(_) => Ended::Unknown("commit timeout".to_owned(), "no answer".to_owned()),
    }
}

/// A connection through the proxy with a 2 s lock wait (a lock cycle across the two servers
/// is no deadlock either server sees); retried until one works, `None` once `stop` is set.
async fn connect(opts: &Opts, stop: &AtomicBool) -> Option<Conn> {
    let started = Instant::now();
    loop {
        if stop.load(Ordering::Relaxed) {
            return None;
        }
        if let Ok(Ok(mut c)) =
            tokio::time::timeout(Duration::from_secs(3), Conn::new(opts.clone())).await
        {
            let set = c.query_drop("SET SESSION innodb_lock_wait_timeout = 2");
            if let Ok(Ok(())) = tokio::time::timeout(Duration::from_secs(3), set).await {
                return Some(c);
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no proxy accepted a client for 60 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A client: transfers between a random order of each side until `stop`.
async fn client(
    opts: Opts,
    ds0: Arc<Vec<u64>>,
    ds1: Arc<Vec<u64>>,
    next: Arc<AtomicU32>,
    stop: Arc<AtomicBool>,
    seed: u64,
) -> Tally {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut tally = Tally::default();
    let mut conn: Option<Conn> = None;
    while !stop.load(Ordering::Relaxed) {
        if conn.is_none() {
            conn = connect(&opts, &stop).await;
        }
        let Some(c) = conn.as_mut() else {
            break;
        };
        let tid = next.fetch_add(1, Ordering::Relaxed);
        let a = ds0[rng.random_range(0..ds0.len())];
        let b = ds1[rng.random_range(0..ds1.len())];
        let x = cents_sql(rng.random_range(1..=5000));
        let (debit, credit) = if rng.random_bool(0.5) { (a, b) } else { (b, a) };
        let side = |id: u64, sign: char, sku: &str| {
            vec![
                format!("UPDATE t_order SET amount = amount {sign} {x} WHERE order_id = {id}"),
                format!(
                    "INSERT INTO t_order_item (order_id, item_no, sku, qty, price) VALUES ({id}, {tid}, '{sku}', 1, {x})"
                ),
            ]
        };
        let (mut first, mut second) =
            (side(debit, '-', "xa-debit"), side(credit, '+', "xa-credit"));
        // The first side is the decision branch: ds0 and ds1 take turns at random.
        let mut decision = usize::from(debit != a);
        if rng.random_bool(0.5) {
            std::mem::swap(&mut first, &mut second);
            decision = 1 - decision;
        }
        let body: Vec<String> = std::iter::once("BEGIN".to_owned())
            .chain(first)
            .chain(second)
            .collect();
        match transfer(c, &body).await {
            Ended::Acked => {
                tally.acked.push(tid);
                tally.decided_on[decision] += 1;
            }
            Ended::Failed(why, message, usable) => {
                tally.failed.push(tid);
                tally.count(why, message);
                if !usable {
                    conn = None;
                }
            }
            Ended::Unknown(why, message) => {
                tally.unknown.push(tid);
                tally.count(why, message);
                conn = None;
            }
        }
    }
    tally
}

/// The proxies of the run: one serving at any time, on the same ports, restarted at once
/// when it dies; what happened to each.
struct Fleet<'a> {
    work: &'a Workdir,
    port: u16,
    admin: u16,
    current: Option<Proc>,
    started: usize,
    killed_by_test: usize,
    /// Deaths by failpoint, by its name.
    failpoints: BTreeMap<String, usize>,
    /// Exits nobody asked for (no failpoint, no kill): each with its log's tail.
    unexpected: Vec<String>,
    logs: Vec<std::path::PathBuf>,
    /// The failpoint specs started, with how many incarnations each.
    specs: BTreeMap<String, usize>,
}

impl<'a> Fleet<'a> {
    fn new(work: &'a Workdir) -> Self {
        Self {
            work,
            port: free_port(),
            admin: free_port(),
            current: None,
            started: 0,
            killed_by_test: 0,
            failpoints: BTreeMap::new(),
            unexpected: Vec::new(),
            logs: Vec::new(),
            specs: BTreeMap::new(),
        }
    }

    async fn start(&mut self, settings: Settings) {
        assert!(self.current.is_none());
        self.started += 1;
        let name = format!("proxy-{:02}", self.started);
        if let Some(spec) = &settings.failpoints {
            *self.specs.entry(spec.clone()).or_default() += 1;
        }
        let p = Proc::start(self.work, &name, self.port, self.admin, settings).await;
        self.logs.push(p.log.clone());
        self.current = Some(p);
    }

    /// Whether the current proxy died by itself; its death is recorded.
    fn died(&mut self) -> bool {
        let Some(p) = self.current.as_mut() else {
            return false;
        };
        if !p.exited() {
            return false;
        }
        let p = self.current.take().unwrap();
        match p.failpoint_reached() {
            Some(point) => *self.failpoints.entry(point).or_default() += 1,
            None => {
                let log = p.log_text();
                let tail: Vec<&str> = log.lines().rev().take(15).collect();
                self.unexpected.push(format!(
                    "{} exited by itself ({:?}); its log ends:\n{}",
                    p.log.display(),
                    p.child.id(),
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                ));
            }
        }
        true
    }

    fn kill(&mut self) {
        if let Some(mut p) = self.current.take() {
            if p.exited() {
                self.current = Some(p);
                self.died();
                return;
            }
            p.kill();
            self.killed_by_test += 1;
        }
    }

    /// Keeps a proxy of `settings` serving for `life` (restarted at once if it dies),
    /// then SIGKILLs it.
    async fn serve_then_kill(&mut self, settings: Settings, life: Duration) {
        let until = Instant::now() + life;
        self.start(settings.clone()).await;
        while Instant::now() < until {
            if self.died() {
                self.start(settings.clone()).await;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.kill();
    }

    /// Proxies with failpoints `spec` until `deaths` of them died by one or `limit`
    /// passed; the last one, if alive, is SIGKILLed.
    async fn failpoint_phase(&mut self, spec: &str, deaths: usize, limit: Duration) {
        let until = Instant::now() + limit;
        let settings = Settings::quick().failpoints(spec);
        let mut died = 0;
        self.start(settings.clone()).await;
        while Instant::now() < until {
            if self.died() {
                died += 1;
                if died >= deaths {
                    break;
                }
                self.start(settings.clone()).await;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.kill();
    }

    /// Resolver lines over every proxy's log: (commit, abort).
    fn resolver_lines(&self) -> (u64, u64) {
        self.logs.iter().fold((0, 0), |(c, a), path| {
            let (c2, a2) = resolver_lines(&std::fs::read_to_string(path).unwrap_or_default());
            (c + c2, a + a2)
        })
    }
}

/// Deletes the orders (and their items) an earlier run of this test left, by their note.
async fn purge_earlier(tables: &[(usize, String, String)]) -> usize {
    let mut purged = 0;
    for ds in 0..2 {
        let mut conn = server(ds).await;
        for (_, orders, items) in tables.iter().filter(|(d, ..)| *d == ds) {
            let ids: Vec<u64> = conn
                .query(format!(
                    "SELECT order_id FROM {orders} WHERE note = '{NOTE}'"
                ))
                .await
                .unwrap();
            if ids.is_empty() {
                continue;
            }
            let list = ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
            conn.query_drop(format!("DELETE FROM {items} WHERE order_id IN ({list})"))
                .await
                .unwrap();
            conn.query_drop(format!("DELETE FROM {orders} WHERE order_id IN ({list})"))
                .await
                .unwrap();
            purged += ids.len();
        }
    }
    purged
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transfers_survive_proxy_and_server_kills() {
    let _guard = fresh().await;
    within(
        Duration::from_secs(200),
        transfers_survive_proxy_and_server_kills_run(),
    )
    .await;
}

async fn transfers_survive_proxy_and_server_kills_run() {
    let began = Instant::now();
    let work = Workdir::new("transfers");
    let config = work.config();
    let tables = physical_tables(&config);
    let purged = purge_earlier(&tables).await;
    let since = [
        server_now(&mut server(0).await).await,
        server_now(&mut server(1).await).await,
    ];
    let mut fleet = Fleet::new(&work);
    fleet.start(Settings::quick()).await;

    // 16 orders on ds0 (EU_CHANNEL), 16 on ds1 (BIZ_CHANNEL), 1000.00 each, made through
    // the proxy; where they landed is read from the servers.
    let ds0_ids: Vec<u64> = (0..ORDERS_PER_SIDE).map(|_| new_id(EU)).collect();
    let ds1_ids: Vec<u64> = (0..ORDERS_PER_SIDE).map(|_| new_id(BIZ)).collect();
    let all: Vec<u64> = ds0_ids.iter().chain(&ds1_ids).copied().collect();
    {
        let mut c = fleet.current.as_ref().unwrap().client().await;
        for (ids, channel, region) in [
            (&ds0_ids, "EU_CHANNEL", "GB"),
            (&ds1_ids, "BIZ_CHANNEL", "HK"),
        ] {
            for id in ids.iter() {
                c.query_drop(format!(
                    "INSERT INTO t_order (order_id, channel, region, user_id, amount, status, note, created_at) \
                     VALUES ({id}, '{channel}', '{region}', 7, {}, 'CREATED', '{NOTE}', NOW(3))",
                    cents_sql(INITIAL_CENTS)
                ))
                .await
                .unwrap();
            }
        }
    }
    let (placed, _) = read_back(&tables, &all).await;
    for (ids, ds) in [(&ds0_ids, 0), (&ds1_ids, 1)] {
        for id in ids.iter() {
            assert_eq!(
                placed.get(id),
                Some(&vec![(ds, INITIAL_CENTS)]),
                "order {id} should be on ds{ds} once"
            );
        }
    }

    // The clients.
    let stop = Arc::new(AtomicBool::new(false));
    let next = Arc::new(AtomicU32::new(1));
    let seed: u64 = rand::random();
    println!(
        "xa transfers: seed {seed}, proxy on 127.0.0.1:{}",
        fleet.port
    );
    let (a, b) = (Arc::new(ds0_ids.clone()), Arc::new(ds1_ids.clone()));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            tokio::spawn(client(
                client_opts(fleet.port),
                a.clone(),
                b.clone(),
                next.clone(),
                stop.clone(),
                seed.wrapping_add(i as u64),
            ))
        })
        .collect();

    // The faults.
    let faults_began = Instant::now();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut life = |lo: f64, hi: f64| Duration::from_secs_f64(rng.random_range(lo..hi));
    // The first proxy (the one that made the orders) serves a while and is killed.
    let first = life(2.5, 5.0);
    tokio::time::sleep(first).await;
    if !fleet.died() {
        fleet.kill();
    }
    fleet
        .failpoint_phase("after_prepare:20", 4, Duration::from_secs(6))
        .await;
    fleet
        .serve_then_kill(Settings::quick(), life(3.0, 6.0))
        .await;
    fleet
        .failpoint_phase("after_decision:20", 4, Duration::from_secs(6))
        .await;
    fleet
        .serve_then_kill(Settings::quick(), life(3.0, 6.0))
        .await;
    // With two datasources a transaction has one XA branch: no second XA COMMIT to die
    // before. Run anyway, and report whether it fired.
    fleet
        .failpoint_phase("between_xa_commits:20", 1, Duration::from_secs(4))
        .await;
    // ds1's mariadbd SIGKILLed under load, restarted on its data directory.
    let server_kill = {
        fleet.start(Settings::quick()).await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let pid = server_pid(1).await;
        let t = Instant::now();
        kill_server(1).await;
        tokio::time::sleep(Duration::from_millis(1000)).await;
        start_server(1).await;
        let down = t.elapsed();
        let until = Instant::now() + life(3.0, 5.0);
        while Instant::now() < until {
            if fleet.died() {
                fleet.start(Settings::quick()).await;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        fleet.kill();
        (pid, down)
    };
    fleet
        .serve_then_kill(Settings::quick(), life(3.0, 6.0))
        .await;
    fleet
        .failpoint_phase("after_prepare:20", 4, Duration::from_secs(6))
        .await;
    fleet
        .serve_then_kill(Settings::quick(), life(3.0, 6.0))
        .await;
    // The last one with both failpoints: the clients stop when it dies (or is killed), so
    // what it left prepared is the last proxy's to finish.
    fleet
        .start(Settings::quick().failpoints("after_prepare:20,after_decision:20"))
        .await;
    let until = Instant::now() + Duration::from_secs(6);
    while Instant::now() < until && !fleet.died() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let faults = faults_began.elapsed();
    stop.store(true, Ordering::Relaxed);
    fleet.kill();
    let mut tally = Tally::default();
    let joined = tokio::time::timeout(Duration::from_secs(120), async {
        let mut out = Vec::new();
        for c in clients {
            out.push(c.await.expect("a client task panicked"));
        }
        out
    })
    .await
    .expect("the clients stopped within 120 s");
    for t in joined {
        tally.acked.extend(t.acked);
        tally.failed.extend(t.failed);
        tally.unknown.extend(t.unknown);
        for (k, v) in t.reasons {
            *tally.reasons.entry(k).or_default() += v;
        }
        for (k, v) in t.samples {
            tally.samples.entry(k).or_insert(v);
        }
        tally.decided_on[0] += t.decided_on[0];
        tally.decided_on[1] += t.decided_on[1];
    }

    // The last proxy: abandon 3 s, a round a second. Every branch of ours gets finished.
    let left_over = prepared_on(0).await.len() + prepared_on(1).await.len();
    fleet.start(Settings::quick()).await;
    let final_proxy = fleet.current.as_ref().unwrap();
    let took = wait_no_prepared(Duration::from_secs(60)).await;
    let started = Instant::now();
    loop {
        let m = final_proxy.metrics().await;
        if m.contains("routekey_xa_in_doubt ") && metric(&m, "routekey_xa_in_doubt") == 0 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "in-doubt gauge not 0:\n{m}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut show = final_proxy.client().await;
    let listed: Vec<mysql_async::Row> = show.query("SHOW ROUTEKEY TRANSACTIONS").await.unwrap();
    drop(show);

    // What the servers hold.
    let (orders, items) = read_back(&tables, &all).await;
    let mut problems: Vec<String> = Vec::new();
    let side_of = |id: u64| usize::from(!ds0_ids.contains(&id));
    let mut total = 0i64;
    let mut expected: HashMap<u64, i64> = all.iter().map(|&id| (id, INITIAL_CENTS)).collect();
    // transfer -> (debit (order, cents), credit (order, cents))
    let mut markers: BTreeMap<u32, Markers> = BTreeMap::new();
    for (ds, order, tid, sku, cents) in &items {
        if *ds != side_of(*order) {
            problems.push(format!(
                "marker of transfer {tid} for order {order} on ds{ds}"
            ));
        }
        let m = markers.entry(*tid).or_default();
        let slot = match sku.as_str() {
            "xa-debit" => &mut m.0,
            "xa-credit" => &mut m.1,
            other => {
                problems.push(format!("unexpected item {other} of order {order}"));
                continue;
            }
        };
        if slot.replace((*order, *cents)).is_some() {
            problems.push(format!("transfer {tid} has two {sku} markers"));
        }
    }
    let mut committed: HashSet<u32> = HashSet::new();
    for (tid, m) in &markers {
        match m {
            (Some((d, dc)), Some((c, cc))) => {
                if dc != cc || side_of(*d) == side_of(*c) {
                    problems.push(format!("transfer {tid}: markers disagree {m:?}"));
                }
                *expected.get_mut(d).unwrap() -= dc;
                *expected.get_mut(c).unwrap() += cc;
                committed.insert(*tid);
            }
            half => problems.push(format!(
                "transfer {tid} committed on one side only: {half:?}"
            )),
        }
    }
    for id in &all {
        match orders.get(id).map(Vec::as_slice) {
            Some([(ds, cents)]) => {
                total += cents;
                if *ds != side_of(*id) {
                    problems.push(format!("order {id} on ds{ds}"));
                }
                if *cents != expected[id] {
                    problems.push(format!(
                        "order {id} holds {cents} cents, its markers say {}",
                        expected[id]
                    ));
                }
            }
            other => problems.push(format!("order {id}: {other:?}")),
        }
    }
    let want_total = INITIAL_CENTS * all.len() as i64;
    if total != want_total {
        problems.push(format!(
            "the orders hold {total} cents in all, not {want_total}"
        ));
    }
    let lost: Vec<u32> = tally
        .acked
        .iter()
        .copied()
        .filter(|t| !committed.contains(t))
        .collect();
    if !lost.is_empty() {
        problems.push(format!(
            "{} acknowledged transfers are not there: {:?}",
            lost.len(),
            &lost[..lost.len().min(20)]
        ));
    }
    let ghosts: Vec<u32> = tally
        .failed
        .iter()
        .copied()
        .filter(|t| committed.contains(t))
        .collect();
    if !ghosts.is_empty() {
        problems.push(format!(
            "{} transfers refused with a definite error are there: {:?}",
            ghosts.len(),
            &ghosts[..ghosts.len().min(20)]
        ));
    }
    let attempted = tally.acked.len() + tally.failed.len() + tally.unknown.len();
    let stray: Vec<&u32> = markers
        .keys()
        .filter(|t| **t as usize > attempted || **t == 0)
        .collect();
    if !stray.is_empty() {
        problems.push(format!("markers of transfers never attempted: {stray:?}"));
    }
    let unknown_committed = tally
        .unknown
        .iter()
        .filter(|t| committed.contains(t))
        .count();
    let (c0, a0) = decisions_since(0, &since[0]).await;
    let (c1, a1) = decisions_since(1, &since[1]).await;
    if (c0 + c1) as usize != committed.len() {
        problems.push(format!(
            "{} commit decisions recorded (ds0 {c0}, ds1 {c1}) for {} committed transfers",
            c0 + c1,
            committed.len()
        ));
    }
    let (resolved_commit, resolved_abort) = fleet.resolver_lines();
    let final_resolved = final_proxy.resolved().await;

    println!("xa transfers: figures");
    println!(
        "  orders: {} on ds0, {} on ds1, {} cents each; {purged} left by an earlier run purged",
        ds0_ids.len(),
        ds1_ids.len(),
        INITIAL_CENTS
    );
    println!(
        "  faults: {:.1} s; proxy incarnations {} (failpoint specs {:?})",
        faults.as_secs_f64(),
        fleet.started,
        fleet.specs
    );
    println!(
        "  proxies killed by the test {}, by a failpoint {:?} (between_xa_commits fired {} times), exited unexpectedly {}",
        fleet.killed_by_test,
        fleet.failpoints,
        fleet
            .failpoints
            .get("between_xa_commits")
            .copied()
            .unwrap_or(0),
        fleet.unexpected.len()
    );
    println!(
        "  mariadbd of ds1 (pid {}) SIGKILLed once, back after {:.1} s",
        server_kill.0,
        server_kill.1.as_secs_f64()
    );
    println!(
        "  transfers attempted {attempted}: acknowledged {}, failed {}, unknown {} ({unknown_committed} of them committed)",
        tally.acked.len(),
        tally.failed.len(),
        tally.unknown.len()
    );
    println!(
        "  committed transfers (both markers) {}; reasons {:?}",
        committed.len(),
        tally.reasons
    );
    println!(
        "  acknowledged with the decision branch on ds0 {}, on ds1 {}",
        tally.decided_on[0], tally.decided_on[1]
    );
    for (why, message) in tally
        .samples
        .iter()
        .filter(|(w, _)| w.starts_with("commit"))
    {
        println!("  {why}, e.g.: {message}");
    }
    println!(
        "  decision rows: commit {} (ds0 {c0}, ds1 {c1}), abort {} (ds0 {a0}, ds1 {a1})",
        c0 + c1,
        a0 + a1
    );
    println!(
        "  resolvers finished {} branches: committed {resolved_commit}, rolled back {resolved_abort} (the last proxy: {final_resolved:?})",
        resolved_commit + resolved_abort
    );
    println!(
        "  last proxy: {left_over} branches of ours prepared when it started, none after {:.1} s; SHOW ROUTEKEY TRANSACTIONS lists {}",
        took.as_secs_f64(),
        listed.len()
    );
    println!(
        "  total sum {total} cents (want {want_total}); test took {:.1} s",
        began.elapsed().as_secs_f64()
    );
    for u in &fleet.unexpected {
        println!("  UNEXPECTED EXIT: {u}");
    }
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert!(
        fleet.unexpected.is_empty(),
        "proxies exited by themselves:\n{}",
        fleet.unexpected.join("\n\n")
    );
    assert!(
        listed.is_empty(),
        "SHOW ROUTEKEY TRANSACTIONS still lists {} branches",
        listed.len()
    );
    assert!(
        tally.acked.len() >= 50,
        "too few transfers acknowledged to mean anything: {}",
        tally.acked.len()
    );
    assert!(
        fleet.failpoints.contains_key("after_prepare")
            && fleet.failpoints.contains_key("after_decision"),
        "the failpoints after_prepare and after_decision should both have fired: {:?}",
        fleet.failpoints
    );
}
