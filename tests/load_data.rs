//! `LOAD DATA LOCAL INFILE` through the proxy (issue 23), compared with the same load
//! straight into MariaDB: refused unless the user may (`load_data_local`) and the client
//! enabled local files; streamed into a table that is not sharded; into a sharded table,
//! each record on its shard (read back from the physical tables), ids issued for records
//! without one, the answer (affected rows, info, warnings) and the rows what one table
//! gives; a record that cannot be routed stops the load, naming its line, and leaves
//! nothing behind.

mod common;

use common::wire::{WireClient, WireOptions};
use common::*;
use mysql_async::prelude::*;
use std::net::SocketAddr;

const LOCAL: WireOptions = WireOptions {
    multi_statements: false,
    session_track: false,
    deprecate_eof: false,
    found_rows: false,
    interactive: false,
    local_files: true,
};

fn direct_addr() -> SocketAddr {
    format!("127.0.0.1:{}", sandbox_port(0)).parse().unwrap()
}

async fn direct(options: WireOptions) -> WireClient {
    WireClient::connect(direct_addr(), "root", "", Some("orders_ref"), options)
        .await
        .unwrap()
}

async fn through(h: &Harness, options: WireOptions) -> WireClient {
    WireClient::connect(h.addr, "app", "app", Some("orders"), options)
        .await
        .unwrap()
}

/// A table named `name` in `orders` (reached through the proxy) and in `orders_ref`,
/// created fresh and dropped with the guard.
struct Probe(&'static str);

impl Probe {
    async fn create(name: &'static str) -> Self {
        let mut ds0 = backend(0).await;
        for db in ["orders", "orders_ref"] {
            ds0.query_drop(format!(
                "CREATE OR REPLACE TABLE {db}.{name} (id INT PRIMARY KEY, label VARCHAR(40), qty INT NOT NULL DEFAULT 0, seen DATETIME NULL)"
            ))
            .await
            .unwrap();
        }
        Self(name)
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        let name = self.0;
        std::thread::spawn(move || {
            tokio::runtime::Runtime::new().unwrap().block_on(async {
                let mut ds0 = backend(0).await;
                for db in ["orders", "orders_ref"] {
                    ds0.query_drop(format!("DROP TABLE IF EXISTS {db}.{name}"))
                        .await
                        .unwrap();
                }
            })
        })
        .join()
        .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_infile_is_refused_unless_the_client_and_the_user_enable_it() {
    let _probe = Probe::create("t_load_refused").await;
    let h = Harness::start().await;
    let sql = "LOAD DATA LOCAL INFILE 'probe.tsv' INTO TABLE t_load_refused";
    // A client that did not enable local files: MariaDB's own answer.
    let mut d = direct(WireOptions::default()).await;
    let mut p = through(&h, WireOptions::default()).await;
    let want = d.load_local(sql, b"1\ta\n", 100).await;
    assert!(want[0].starts_with("ERR 4166"), "{want:?}");
    assert_eq!(p.load_local(sql, b"1\ta\n", 100).await, want);
    assert_eq!(p.value("SELECT 1").await.as_deref(), Some("1"));
    // A user without load_data_local: the same error, naming the setting.
    let mut config = common::config();
    config
        .users
        .iter_mut()
        .for_each(|u| u.load_data_local = false);
    let off = Harness::start_with(config).await;
    let mut p = through(&off, LOCAL).await;
    let refused = p.load_local(sql, b"1\ta\n", 100).await;
    assert!(
        refused[0].starts_with("ERR 4166"),
        "never asked for the file: {refused:?}"
    );
    assert!(p.last_error.contains("load_data_local"), "{}", p.last_error);
    // A file on the server's host: refused, whoever asks.
    let mut p = through(&h, LOCAL).await;
    let server_file = p
        .query("LOAD DATA INFILE '/etc/passwd' INTO TABLE t_load_refused")
        .await;
    assert!(server_file[0].starts_with("ERR 1227"), "{server_file:?}");
    assert_eq!(p.value("SELECT 1").await.as_deref(), Some("1"));
    let mut ds0 = backend(0).await;
    let n: u64 = ds0
        .query_first("SELECT COUNT(*) FROM orders.t_load_refused")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_streams_into_a_table_that_is_not_sharded_as_into_mariadb() {
    let _probe = Probe::create("t_load_plain").await;
    let h = Harness::start().await;
    // About 1.2 MB in packets of 1000 bytes, with a short row, a long one, NULLs and a
    // duplicate key (IGNORE: skipped with a warning).
    let mut file = Vec::new();
    for i in 0..40_000 {
        file.extend_from_slice(
            format!(
                "{i}\tlabel {i}\\twith tab\t{}\t2026-01-0{} 00:00:00\n",
                i % 7,
                1 + i % 9
            )
            .as_bytes(),
        );
    }
    file.extend_from_slice(b"40000\tshort\n40001\t\\N\t3\t\\N\textra\n5\tduplicate\t1\t\\N\n");
    let sql = "LOAD DATA LOCAL INFILE 'plain.tsv' IGNORE INTO TABLE t_load_plain";
    let mut d = direct(LOCAL).await;
    let mut p = through(&h, LOCAL).await;
    let want = d.load_local(sql, &file, 1000).await;
    let got = p.load_local(sql, &file, 1000).await;
    assert_eq!(got, want);
    assert!(want[1].contains("affected=40002"), "{want:?}");
    let warnings = "SHOW WARNINGS";
    assert_eq!(p.query(warnings).await, d.query(warnings).await);
    let mut ds0 = backend(0).await;
    let same: u64 = ds0
        .query_first(
            "SELECT COUNT(*) FROM orders.t_load_plain a JOIN orders_ref.t_load_plain b USING (id) \
             WHERE a.label <=> b.label AND a.qty = b.qty AND a.seen <=> b.seen",
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(same, 40_002);
    // In a transaction, rolled back with it.
    p.query("BEGIN").await;
    let again = p
        .load_local(
            "LOAD DATA LOCAL INFILE 'more.tsv' INTO TABLE t_load_plain",
            b"50000\tin a transaction\t1\t\\N\n",
            100,
        )
        .await;
    assert!(again[1].contains("affected=1"), "{again:?}");
    assert!(again[1].contains("IN_TRANS"), "{again:?}");
    p.query("ROLLBACK").await;
    let n: u64 = ds0
        .query_first("SELECT COUNT(*) FROM orders.t_load_plain WHERE id = 50000")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n, 0);
}

/// A CSV record of `t_order` (order_id, channel, region, user_id, amount, status, note,
/// created_at) with a note that needs its enclosure.
fn csv_order(id: u64, channel_name: &str, note: &str) -> String {
    let region = channel(channel_name).3;
    format!(
        "{id},{channel_name},\"{region}\",77,12.50,CREATED,\"{note}\",2026-02-03 04:05:06.789\r\n"
    )
}

/// Every column of `ids`' rows, as text, ordered by id.
async fn order_rows(c: &mut mysql_async::Conn, table: &str, ids: &[u64]) -> Vec<Values> {
    let list = ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    rows(
        c,
        &format!("SELECT * FROM {table} WHERE order_id IN ({list}) ORDER BY order_id"),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_load_each_to_their_shard_as_into_one_table() {
    let h = Harness::start().await;
    let cleanup = Cleanup::default();
    let mut ids = Vec::new();
    let mut file =
        String::from("order_id,channel,region,user_id,amount,status,note,created_at\r\n");
    let notes = [
        "plain",
        "a, comma",
        "a \"\"quoted\"\" word",
        "two\r\nlines",
        "back\\\\slash",
        "tab\\there",
    ];
    // A few hundred orders on every channel's shards, new-format ids.
    for i in 0..300 {
        let (name, code, _, _) = CHANNELS[i % CHANNELS.len()];
        let id = cleanup.add(fresh_new_id(code));
        ids.push(id);
        file.push_str(&csv_order(id, name, notes[i % notes.len()]));
    }
    // A legacy id with its channel named: routed by it, and its index row written.
    let legacy = cleanup.add(fresh_legacy_id());
    ids.push(legacy);
    file.push_str(&csv_order(legacy, "CN_CHANNEL", "legacy"));
    // A record with NULL note and too few fields (a warning, as one table gives it).
    let short = cleanup.add(fresh_new_id(5));
    ids.push(short);
    file.push_str(&format!(
        "{short},EU_CHANNEL,GB,1,2.00,PAID,\\N,2026-01-01\r\n"
    ));
    let sql = "LOAD DATA LOCAL INFILE 'orders.csv' INTO TABLE t_order CHARACTER SET utf8mb4 \
               FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"' LINES TERMINATED BY '\\r\\n' \
               IGNORE 1 LINES (order_id, channel, region, user_id, amount, status, @note, created_at) \
               SET note = CONCAT('csv:', @note)";
    let mut d = direct(LOCAL).await;
    let mut p = through(&h, LOCAL).await;
    let want = d.load_local(sql, file.as_bytes(), 777).await;
    let got = p.load_local(sql, file.as_bytes(), 777).await;
    assert_eq!(got, want, "the load's answer");
    assert!(
        want[1].contains(&format!("affected={}", ids.len())),
        "{want:?}"
    );
    assert_eq!(
        p.query("SHOW WARNINGS").await,
        d.query("SHOW WARNINGS").await
    );
    // The rows are the one table's, each on the shard its id routes to.
    let mut app = h.client().await;
    let mut reference = reference().await;
    assert_same_rows(
        &order_rows(&mut app, "t_order", &ids).await,
        &order_rows(&mut reference, "t_order", &ids).await,
        "loaded orders",
    );
    for (i, &id) in ids.iter().enumerate().take(300) {
        let name = CHANNELS[i % CHANNELS.len()].0;
        assert_eq!(shards_holding(id).await, vec![expected_shard(name, id)]);
    }
    let cn_shard = expected_shard("CN_CHANNEL", legacy);
    assert_eq!(shards_holding(legacy).await, vec![cn_shard]);
    assert_eq!(index_channel(legacy).await.as_deref(), Some("CN_CHANNEL"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_without_an_order_id_get_one_issued_per_channel() {
    let h = Harness::start().await;
    let marker = format!("issued-{}", now_ms());
    let mut file = String::new();
    for i in 0..50 {
        let (name, _, _, region) = CHANNELS[i % CHANNELS.len()];
        // Every other record names only its region.
        let channel_field = if i % 2 == 0 { name } else { "\\N" };
        file.push_str(&format!(
            "{channel_field}\t{region}\t{i}\t1.00\tNEW\t{marker}\t2026-03-04 05:06:07\n"
        ));
    }
    let mut p = through(&h, LOCAL).await;
    let got = p
        .load_local(
            "LOAD DATA LOCAL INFILE 'new.tsv' INTO TABLE t_order (channel, region, user_id, amount, status, note, created_at)",
            file.as_bytes(),
            4096,
        )
        .await;
    assert!(got[1].contains("affected=50"), "{got:?}");
    let first: u64 = p
        .value("SELECT LAST_INSERT_ID()")
        .await
        .unwrap()
        .parse()
        .unwrap();
    // Read back from every shard: each row on its id's shard, its channel the region's.
    let cleanup = Cleanup::default();
    let mut found = 0;
    for shard in 0..20 {
        let (ds, table, _) = physical(shard);
        let mut conn = backend(ds).await;
        let placed: Vec<(u64, String, String)> = conn
            .query(format!(
                "SELECT order_id, channel, region FROM {table} WHERE note = '{marker}'"
            ))
            .await
            .unwrap();
        for (id, channel_name, region) in placed {
            cleanup.add(id);
            found += 1;
            let by_region = CHANNELS.iter().find(|c| c.3 == region).unwrap().0;
            assert_eq!(expected_shard(by_region, id), shard, "order {id}");
            if channel_name.is_empty() {
                continue;
            }
            assert_eq!(channel_name, by_region);
        }
    }
    assert_eq!(found, 50);
    assert!(first > 0, "LAST_INSERT_ID() is the first id issued");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_that_cannot_be_routed_stops_the_load_and_leaves_nothing() {
    let h = Harness::start().await;
    let cleanup = Cleanup::default();
    let before = cleanup.add(fresh_new_id_on(5, 0));
    let on_ds1 = cleanup.add(fresh_new_id_on(1, 1));
    let unknown = fresh_legacy_id();
    let after = cleanup.add(fresh_new_id_on(5, 0));
    let line = |id: u64, channel_field: &str| {
        format!("{id}\t{channel_field}\tGB\t1\t1.00\tNEW\tstopped\t2026-03-04 05:06:07\n")
    };
    // Line 3: a legacy id no layer knows, naming no channel.
    let file = [
        line(before, "EU_CHANNEL"),
        line(on_ds1, "CN_CHANNEL"),
        format!("{unknown}\t\\N\t\\N\t1\t1.00\tNEW\tstopped\t2026-03-04 05:06:07\n"),
        line(after, "EU_CHANNEL"),
    ]
    .concat();
    let sql = "LOAD DATA LOCAL INFILE 'stop.tsv' INTO TABLE t_order";
    let mut p = through(&h, LOCAL).await;
    let got = p.load_local(sql, file.as_bytes(), 50).await;
    assert!(got[1].starts_with("ERR 1526"), "{got:?}");
    for id in [before, on_ds1, after] {
        assert!(shards_holding(id).await.is_empty(), "order {id} was loaded");
    }
    assert!(
        p.last_error.contains("line 3 (record 3)") && p.last_error.contains("nothing was loaded"),
        "{}",
        p.last_error
    );
    let fixed = p
        .load_local(
            "LOAD DATA LOCAL INFILE 'x' INTO TABLE t_order FIELDS TERMINATED BY ''",
            b"",
            10,
        )
        .await;
    assert!(
        fixed[0].starts_with("ERR 1235"),
        "refused before the file: {fixed:?}"
    );
    assert!(p.last_error.contains("fixed-width"), "{}", p.last_error);
    // Inside a transaction: the load is undone, the transaction goes on.
    let mut ids = Vec::new();
    p.query("BEGIN").await;
    let kept = cleanup.add(fresh_new_id_on(5, 0));
    ids.push(kept);
    let ok = p
        .load_local(sql, line(kept, "EU_CHANNEL").as_bytes(), 100)
        .await;
    assert!(ok[1].contains("affected=1"), "{ok:?}");
    let failed = p.load_local(sql, file.as_bytes(), 100).await;
    assert!(failed[1].starts_with("ERR"), "{failed:?}");
    p.query("COMMIT").await;
    assert_eq!(
        shards_holding(kept).await.len(),
        1,
        "the transaction's first load stays"
    );
    assert!(shards_holding(before).await.is_empty());
    // A second datasource in one transaction joins it (an XA branch, issue 27): loaded on
    // both, and ROLLBACK undoes both.
    p.query("BEGIN").await;
    let two = p
        .load_local(
            sql,
            [line(before, "EU_CHANNEL"), line(on_ds1, "CN_CHANNEL")]
                .concat()
                .as_bytes(),
            100,
        )
        .await;
    assert!(two[1].contains("affected=2"), "{two:?}");
    assert!(shards_holding(before).await.is_empty(), "not committed yet");
    p.query("ROLLBACK").await;
    assert!(shards_holding(before).await.is_empty());
    assert!(shards_holding(on_ds1).await.is_empty());
}

/// `KILL QUERY` of a session in the middle of a load (its file still coming, slowly)
/// stops the load as on MariaDB: 1317, nothing loaded, the session goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_load_loads_nothing() {
    let _probe = Probe::create("t_load_killed").await;
    let h = Harness::start().await;
    let cleanup = Cleanup::default();
    let ids: Vec<u64> = (0..20).map(|_| cleanup.add(fresh_new_id(5))).collect();
    let parts = |rows: Vec<String>| -> Vec<Vec<u8>> {
        rows.chunks(4).map(|c| c.concat().into_bytes()).collect()
    };
    let orders = parts(
        ids.iter()
            .map(|id| format!("{id}\tEU_CHANNEL\tGB\t1\t1.00\tNEW\tkilled\t2026-03-04 05:06:07\n"))
            .collect(),
    );
    let plain = parts((0..20).map(|i| format!("{i}\tkilled\t1\t\\N\n")).collect());
    let cases = [
        ("LOAD DATA LOCAL INFILE 'k.tsv' INTO TABLE t_order", orders),
        (
            "LOAD DATA LOCAL INFILE 'k.tsv' INTO TABLE t_load_killed",
            plain,
        ),
    ];
    for (sql, file) in cases {
        for autocommit in [true, false] {
            let mut p = through(&h, LOCAL).await;
            if !autocommit {
                p.query("SET autocommit = 0").await;
            }
            let id: u64 = p
                .value("SELECT CONNECTION_ID()")
                .await
                .unwrap()
                .parse()
                .unwrap();
            let killer = {
                let opts = h.opts();
                tokio::spawn(async move {
                    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
                    let mut c = mysql_async::Conn::new(opts).await.unwrap();
                    c.query_drop(format!("KILL QUERY {id}")).await.unwrap();
                })
            };
            let got = p
                .load_local_paced(sql, &file, std::time::Duration::from_millis(300))
                .await;
            killer.await.unwrap();
            assert!(
                got[0].starts_with("ERR 1317"),
                "{sql} (autocommit {autocommit}): {got:?}"
            );
            if !autocommit {
                p.query("COMMIT").await;
            }
            assert_eq!(p.value("SELECT 1").await.as_deref(), Some("1"));
        }
    }
    for id in &ids {
        assert!(
            shards_holding(*id).await.is_empty(),
            "order {id} was loaded"
        );
    }
    let mut ds0 = backend(0).await;
    let n: u64 = ds0
        .query_first("SELECT COUNT(*) FROM orders.t_load_killed")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n, 0);
}

/// A load that fails leaves no index row behind (they are written only once every record
/// is loaded): the corrected load then goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_load_leaves_no_index_row() {
    let h = Harness::start().await;
    let cleanup = Cleanup::default();
    let legacy = cleanup.add(fresh_legacy_id());
    let unknown = fresh_legacy_id();
    let row = |id: u64, channel_field: &str| {
        format!("{id}\t{channel_field}\t\\N\t7\t1.50\tNEW\tx\t2026-01-02 03:04:05\n")
    };
    let sql = "LOAD DATA LOCAL INFILE 'legacy.tsv' INTO TABLE t_order";
    let mut p = through(&h, LOCAL).await;
    let failed = p
        .load_local(
            sql,
            [row(legacy, "CN_CHANNEL"), row(unknown, "\\N")]
                .concat()
                .as_bytes(),
            100,
        )
        .await;
    assert!(failed[1].starts_with("ERR 1526"), "{failed:?}");
    assert_eq!(
        index_channel(legacy).await,
        None,
        "no index row of a failed load"
    );
    // The same id twice with two channels is refused too, naming the second record.
    let twice = p
        .load_local(
            sql,
            [row(legacy, "EU_CHANNEL"), row(legacy, "CN_CHANNEL")]
                .concat()
                .as_bytes(),
            100,
        )
        .await;
    assert!(twice[1].starts_with("ERR 1526"), "{twice:?}");
    assert!(p.last_error.contains("record 2"), "{}", p.last_error);
    let ok = p
        .load_local(sql, row(legacy, "EU_CHANNEL").as_bytes(), 100)
        .await;
    assert!(ok[1].contains("affected=1"), "{ok:?}");
    assert_eq!(index_channel(legacy).await.as_deref(), Some("EU_CHANNEL"));
    assert_eq!(
        shards_holding(legacy).await,
        vec![expected_shard("EU_CHANNEL", legacy)]
    );
}

/// A column the list names twice is stored from its last field, as the server stores it:
/// the record goes to that id's shard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_column_listed_twice_routes_by_its_last_field() {
    let h = Harness::start().await;
    let cleanup = Cleanup::default();
    let first = cleanup.add(fresh_new_id_on(5, 0));
    let last = cleanup.add(fresh_new_id_on(1, 1));
    let mut p = through(&h, LOCAL).await;
    let got = p
        .load_local(
            "LOAD DATA LOCAL INFILE 'twice.tsv' INTO TABLE t_order (order_id, channel, region, user_id, amount, status, note, created_at, order_id, channel)",
            format!("{first}\tEU_CHANNEL\tCN\t7\t1.50\tNEW\ttwice\t2026-01-02 03:04:05\t{last}\tCN_CHANNEL\n").as_bytes(),
            100,
        )
        .await;
    assert!(got[1].contains("affected=1"), "{got:?}");
    assert!(shards_holding(first).await.is_empty());
    assert_eq!(
        shards_holding(last).await,
        vec![expected_shard("CN_CHANNEL", last)]
    );
}

/// Warnings of a load over many shards read as one table's: in the file's row order, with
/// the file's row numbers and the logical table, a statement's warning once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warnings_of_a_load_over_shards_read_as_one_tables() {
    let h = Harness::start().await;
    let cleanup = Cleanup::default();
    let mut file = String::new();
    let mut ids = Vec::new();
    for i in 0..8 {
        let (_, code, _, region) = CHANNELS[i % CHANNELS.len()];
        let id = cleanup.add(fresh_new_id(code));
        ids.push(id);
        let amount = if i % 3 == 1 { "abc" } else { "1.25" };
        file.push_str(&format!(
            "{id}\t{region}\t7\t{amount}\tNEW\twarned\t2026-01-02 03:04:05\n"
        ));
    }
    // No `channel` in the list (it has no default: one warning for the statement), and
    // amounts that are no number (a warning each, at its row).
    let sql = "LOAD DATA LOCAL INFILE 'w.tsv' IGNORE INTO TABLE t_order (order_id, region, user_id, amount, status, note, created_at)";
    let mut d = direct(LOCAL).await;
    let mut p = through(&h, LOCAL).await;
    let want = d.load_local(sql, file.as_bytes(), 1000).await;
    let got = p.load_local(sql, file.as_bytes(), 1000).await;
    assert_eq!(got, want);
    let warnings = "SHOW WARNINGS";
    let want: Vec<_> = d
        .rows(warnings)
        .await
        .into_iter()
        .map(|r| format!("{r:?}").replace("orders_ref", "orders"))
        .collect();
    let got: Vec<_> = p
        .rows(warnings)
        .await
        .into_iter()
        .map(|r| format!("{r:?}"))
        .collect();
    assert_eq!(got, want);
    assert!(want.len() > 2, "{want:?}");
}

/// An empty file, and a load in a READ ONLY transaction, answered as one table answers
/// them: with autocommit off the empty load opens the transaction; a read-only
/// transaction refuses the load before the file is asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_file_and_a_read_only_transaction_as_on_one_table() {
    let h = Harness::start().await;
    let sql = "LOAD DATA LOCAL INFILE 'empty.tsv' INTO TABLE t_order";
    for proxied in [false, true] {
        let mut c = if proxied {
            through(&h, LOCAL).await
        } else {
            direct(LOCAL).await
        };
        let mut trace = c.load_local(sql, b"", 10).await;
        c.query("SET autocommit = 0").await;
        trace.extend(c.load_local(sql, b"", 10).await);
        trace.extend(c.query("SELECT 1").await);
        c.query("ROLLBACK").await;
        c.query("SET autocommit = 1").await;
        c.query("START TRANSACTION READ ONLY").await;
        trace.extend(c.load_local(sql, b"", 10).await);
        c.query("ROLLBACK").await;
        let traces = format!("{trace:?}");
        if proxied {
            let direct = std::mem::take(&mut *TRACE.lock().unwrap());
            assert_eq!(traces, direct);
            assert!(
                traces.contains("IN_TRANS") && traces.contains("ERR 1792"),
                "{traces}"
            );
        } else {
            *TRACE.lock().unwrap() = traces;
        }
    }
}

static TRACE: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

/// The first 64 warnings of a load over many shards, a duplicate key's warning at its
/// place, and the error of the earliest bad row, as one table gives them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_warnings_and_the_first_error_as_one_tables() {
    let h = Harness::start().await;
    let cleanup = Cleanup::default();
    let seeded = common::seed().channels["EU_CHANNEL"].new_format_ids[0];
    let record = |id: u64, amount: &str, extra: bool| {
        let (_, _, _, region) = CHANNELS[(id % 5) as usize];
        let extra = if extra { "\textra" } else { "" };
        format!("{id}\t{region}\t7\t{amount}\tNEW\tmany\t2026-01-02 03:04:05{extra}\n")
    };
    let fresh = |n: usize| -> Vec<u64> {
        (0..n)
            .map(|i| cleanup.add(fresh_new_id(CHANNELS[i % 5].1)))
            .collect()
    };
    let columns = "(order_id, region, user_id, amount, status, note, created_at)";
    // 150 bad amounts (IGNORE: warnings); a duplicate key among ten.
    let many: String = fresh(150)
        .iter()
        .map(|&id| record(id, "abc", false))
        .collect();
    let mut dup: Vec<String> = fresh(10)
        .iter()
        .map(|&id| record(id, "1.00", false))
        .collect();
    dup[2] = record(cleanup.add(fresh_new_id(2)), "abc", false);
    dup[6] = record(seeded, "1.00", false);
    // REPLACE in strict mode: a bad amount at row 2, an extra field at row 6.
    let mut strict: Vec<String> = fresh(8)
        .iter()
        .map(|&id| record(id, "1.00", false))
        .collect();
    strict[1] = record(cleanup.add(fresh_new_id(3)), "abc", false);
    strict[5] = record(cleanup.add(fresh_new_id(4)), "1.00", true);
    let cases = [
        (
            format!("LOAD DATA LOCAL INFILE 'many' IGNORE INTO TABLE t_order {columns}"),
            many,
        ),
        (
            format!("LOAD DATA LOCAL INFILE 'dup' IGNORE INTO TABLE t_order {columns}"),
            dup.concat(),
        ),
        (
            format!("LOAD DATA LOCAL INFILE 'strict' REPLACE INTO TABLE t_order {columns}"),
            strict.concat(),
        ),
    ];
    let mut d = direct(LOCAL).await;
    let mut p = through(&h, LOCAL).await;
    for (sql, file) in cases {
        let want = d.load_local(&sql, file.as_bytes(), 4096).await;
        let got = p.load_local(&sql, file.as_bytes(), 4096).await;
        assert_eq!(got, want, "{sql}");
        if want[1].starts_with("ERR") {
            assert_eq!(
                p.last_error,
                d.last_error.replace("orders_ref", "orders"),
                "{sql}"
            );
            continue;
        }
        let shown = |rows: Vec<Vec<Option<String>>>| -> Vec<String> {
            rows.iter()
                .map(|r| format!("{r:?}").replace("orders_ref", "orders"))
                .collect()
        };
        assert_eq!(
            shown(p.rows("SHOW WARNINGS").await),
            shown(d.rows("SHOW WARNINGS").await),
            "{sql}"
        );
    }
}

/// A load that fails with autocommit off, its client then gone without a ROLLBACK: the
/// transaction it opened is rolled back with the session, as MariaDB does when the
/// connection closes; no row lock stays on a pooled connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_load_with_autocommit_off_leaves_no_lock_behind() {
    let _probe = Probe::create("t_load_locks").await;
    let mut config = common::config();
    for ds in &mut config.datasources {
        ds.pool_size = 1;
    }
    let h = Harness::start_with(config).await;
    let mut ds0 = backend(0).await;
    ds0.query_drop(
        "INSERT INTO orders.t_load_locks VALUES (1, 'existing', 1, NULL), (2, 'existing', 2, NULL)",
    )
    .await
    .unwrap();
    {
        let mut p = through(&h, LOCAL).await;
        p.query("SET autocommit = 0").await;
        let failed = p
            .load_local(
                "LOAD DATA LOCAL INFILE 'f.tsv' REPLACE INTO TABLE t_load_locks",
                b"1\treplaced\t1\t\\N\n2\treplaced\t2\t\\N\n3\tbad\tabc\t\\N\n",
                100,
            )
            .await;
        assert!(failed[1].starts_with("ERR 1366"), "{failed:?}");
    }
    // The client is gone; another session of the proxy (the same pooled connection) and
    // a direct one find the rows unlocked and unchanged.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    ds0.query_drop("SET innodb_lock_wait_timeout = 1")
        .await
        .unwrap();
    ds0.query_drop("UPDATE orders.t_load_locks SET qty = qty + 10 WHERE id = 1")
        .await
        .unwrap();
    let mut app = h.client().await;
    let notes: Vec<String> = app
        .query("SELECT label FROM t_load_locks ORDER BY id")
        .await
        .unwrap();
    assert_eq!(notes, ["existing", "existing"]);
}
