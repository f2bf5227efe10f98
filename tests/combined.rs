//! A scatter costs one statement per datasource (`sharding.combine_shards`, SPEC §5),
//! counted where it is received: each sandbox server's general log, filtered by a comment
//! the test puts in its statements. The first run of a statement shape also describes its
//! columns (the first shard's statement alone); later runs send one statement to each
//! datasource. Statements a UNION would change still run per shard. Answers are checked
//! against the unsharded reference `orders_ref`.

mod common;

use common::*;
use mysql_async::prelude::*;
use mysql_async::{Conn, Row};

/// Turns a server's general log on (into `mysql.general_log`) for the test's life.
struct GeneralLog {
    servers: Vec<Conn>,
}

impl GeneralLog {
    async fn on() -> Self {
        let mut servers = Vec::new();
        for ds in 0..2 {
            let mut c = backend(ds).await;
            c.query_drop("SET GLOBAL log_output = 'TABLE', general_log = 1")
                .await
                .unwrap();
            servers.push(c);
        }
        Self { servers }
    }

    /// The statements each server received whose text holds `marker` (one per
    /// COM_QUERY, COM_STMT_PREPARE or COM_STMT_EXECUTE).
    async fn received(&mut self, marker: &str) -> [Vec<String>; 2] {
        let mut out = [Vec::new(), Vec::new()];
        for (ds, c) in self.servers.iter_mut().enumerate() {
            let rows: Vec<(String, String)> = c
                .exec(
                    "SELECT command_type, CONVERT(argument USING utf8mb4) FROM mysql.general_log \
                     WHERE argument LIKE ? AND argument NOT LIKE '%general_log%' \
                     ",
                    (format!("%{marker}%"),),
                )
                .await
                .unwrap();
            out[ds] = rows
                .into_iter()
                .filter(|(kind, _)| kind == "Query" || kind == "Execute")
                .map(|(_, sql)| sql)
                .collect();
        }
        out
    }

    async fn off(mut self) {
        for c in &mut self.servers {
            c.query_drop("SET GLOBAL general_log = 0").await.unwrap();
            c.query_drop("TRUNCATE TABLE mysql.general_log")
                .await
                .unwrap();
        }
    }
}

/// Rows of a text query, sorted.
async fn answer(c: &mut Conn, sql: &str) -> Vec<Values> {
    sorted_rows(c, sql).await
}

/// A proxy that runs a statement per shard (`combine_shards = false`): what the combined
/// plan must answer (the scatter differential test compares both with `orders_ref`).
async fn per_shard() -> Harness {
    let mut config = config();
    config.sharding.combine_shards = false;
    Harness::start_with(config).await
}

#[tokio::test]
async fn a_scatter_costs_one_statement_per_datasource_once_its_columns_are_known() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let alone = per_shard().await;
    let mut r = alone.client().await;
    let mut log = GeneralLog::on().await;
    // The statements of issue 25: a count, a dashboard's GROUP BY, an order history page.
    let cases = [
        ("count", "SELECT COUNT(*) FROM t_order WHERE user_id > {v}"),
        (
            "group",
            "SELECT channel, COUNT(*), SUM(amount), MIN(created_at) FROM t_order WHERE user_id > {v} GROUP BY channel",
        ),
        (
            "top",
            "SELECT order_id, amount, created_at FROM t_order WHERE user_id > {v} ORDER BY created_at DESC, order_id LIMIT 10",
        ),
    ];
    let mut figures = Vec::new();
    for (name, template) in cases {
        // The same statement twice, then another value twice: a value is part of the
        // statement whose columns are described (a WHERE the optimizer finds impossible
        // changes column flags).
        for (run, value) in [(1, 3), (2, 3), (3, 5), (4, 5)] {
            let describing = run % 2 == 1;
            let marker = format!("rk-combined-{name}-{run}-{}", std::process::id());
            let logical = template.replace("{v}", &value.to_string());
            let sql = format!("SELECT /* {marker} */ {}", &logical["SELECT ".len()..]);
            assert_eq!(
                answer(&mut c, &sql).await,
                answer(&mut r, &logical).await,
                "{sql}"
            );
            assert!(!answer(&mut r, &logical).await.is_empty(), "{logical}");
            let [ds0, ds1] = log.received(&marker).await;
            figures.push(format!(
                "{name} run {run}: ds0 {}, ds1 {}",
                ds0.len(),
                ds1.len()
            ));
            if describing {
                // Described as it runs: the first shard alone (its columns are the
                // answer's), its datasource's other shards in one statement.
                assert_eq!((ds0.len(), ds1.len()), (2, 1), "{sql}\n{ds0:#?}\n{ds1:#?}");
                let alone: Vec<_> = ds0.iter().filter(|s| !s.contains("UNION ALL")).collect();
                assert_eq!(alone.len(), 1, "{ds0:#?}");
                assert!(alone[0].contains("`t_order_0`"), "{ds0:#?}");
            } else {
                // The columns are held.
                assert_eq!((ds0.len(), ds1.len()), (1, 1), "{sql}\n{ds0:#?}\n{ds1:#?}");
            }
            for (ds, received) in [(0, &ds0), (1, &ds1)] {
                let last = received.iter().find(|s| s.contains("UNION ALL")).unwrap();
                let shards = if ds == 0 { 0..10 } else { 10..20 };
                let expected = if describing && ds == 0 { 9 } else { 10 };
                assert_eq!(
                    last.matches(") UNION ALL (").count() + 1,
                    expected,
                    "{last}"
                );
                for n in shards.skip(if describing && ds == 0 { 1 } else { 0 }) {
                    assert!(last.contains(&format!("`t_order_{n}`")), "{last}");
                }
            }
        }
    }
    println!("statements received per datasource: {}", figures.join("; "));
    // Declined: an ordered read without LIMIT streams each shard's rows apart.
    let marker = format!("rk-combined-declined-{}", std::process::id());
    let sql = format!(
        "SELECT /* {marker} */ order_id FROM t_order WHERE user_id > 3 ORDER BY created_at, order_id"
    );
    let got: Vec<Row> = c.query(&sql).await.unwrap();
    assert!(!got.is_empty());
    let [ds0, ds1] = log.received(&marker).await;
    assert_eq!((ds0.len(), ds1.len()), (10, 10));
    // Prepared: one execution per datasource once described.
    let marker = format!("rk-combined-prepared-{}", std::process::id());
    let sql = format!("SELECT /* {marker} */ COUNT(*) FROM t_order WHERE user_id > ?");
    let statement = c.prep(&sql).await.unwrap();
    let want: u64 = r
        .query_first("SELECT COUNT(*) FROM t_order WHERE user_id > 3")
        .await
        .unwrap()
        .unwrap();
    for _ in 0..2 {
        let n: u64 = c.exec_first(&statement, (3,)).await.unwrap().unwrap();
        assert_eq!(n, want);
    }
    let [ds0, ds1] = log.received(&marker).await;
    assert_eq!((ds0.len(), ds1.len()), (3, 2), "{ds0:#?}\n{ds1:#?}");
    log.off().await;
    h.stop().await;
    alone.stop().await;
}

#[tokio::test]
async fn explain_route_shows_one_row_per_statement_sent() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let sql = "SELECT channel, COUNT(*) FROM t_order WHERE user_id > 11 GROUP BY channel";
    let explain = async |c: &mut Conn| {
        let rows: Vec<Row> = c.query(format!("EXPLAIN ROUTE {sql}")).await.unwrap();
        rows.into_iter()
            .map(|mut r| {
                let layer: String = r.take("layer").unwrap();
                let shard: Option<u32> = r.take("shard").unwrap();
                let ds: String = r.take("datasource").unwrap();
                let tables: String = r.take("physical_table").unwrap();
                (layer, shard, ds, tables.split(", ").count())
            })
            .collect::<Vec<_>>()
    };
    let scatter = |shard, ds: &str, tables| ("scatter".to_owned(), shard, ds.to_owned(), tables);
    // Not yet described: the first shard alone, then a statement per datasource.
    assert_eq!(
        explain(&mut c).await,
        [
            scatter(Some(0), "ds0", 1),
            scatter(None, "ds0", 9),
            scatter(None, "ds1", 10)
        ]
    );
    let _: Vec<Row> = c.query(sql).await.unwrap();
    assert_eq!(
        explain(&mut c).await,
        [scatter(None, "ds0", 10), scatter(None, "ds1", 10)]
    );
    h.stop().await;
}

#[tokio::test]
async fn inside_a_transaction_a_combined_scatter_sees_the_transactions_own_rows() {
    // In a transaction the statements run one after another on the session's connection
    // to each datasource (the first shard's alone and the union share it).
    let h = Harness::start().await;
    let mut c = h.client().await;
    let alone = per_shard().await;
    let mut r = alone.client().await;
    let user = 900_001_777u64;
    let count = format!("SELECT COUNT(*), SUM(amount) FROM t_order WHERE user_id = {user}");
    let top = format!(
        "SELECT order_id, amount FROM t_order WHERE user_id = {user} ORDER BY amount DESC, order_id LIMIT 3"
    );
    c.query_drop("BEGIN").await.unwrap();
    // Channels whose shards are all on ds0 (EU 0-3, GLOBAL 4-7; a transaction writes to
    // one datasource).
    for (n, channel) in [
        "EU_CHANNEL",
        "GLOBAL_CHANNEL",
        "GLOBAL_CHANNEL",
        "EU_CHANNEL",
    ]
    .iter()
    .enumerate()
    {
        c.query_drop(format!(
            "INSERT INTO t_order (channel, region, user_id, amount, status, created_at) \
             VALUES ('{channel}', 'GB', {user}, {}.50, 'NEW', NOW())",
            n + 1
        ))
        .await
        .unwrap();
    }
    for _ in 0..2 {
        let got = answer(&mut c, &count).await;
        assert_eq!(show_rows(&got), ["4 | 12.00"]);
        let got = rows(&mut c, &top).await;
        assert_eq!(got.len(), 3);
        assert_eq!(show(&got[0][1]), "4.50");
        assert_eq!(show(&got[2][1]), "2.50");
    }
    c.query_drop("ROLLBACK").await.unwrap();
    assert_eq!(answer(&mut c, &count).await, answer(&mut r, &count).await);
    assert_eq!(show_rows(&answer(&mut c, &count).await), ["0 | NULL"]);
    h.stop().await;
    alone.stop().await;
}

/// Column definitions as the client sees them, without schema and table names.
async fn definitions(c: &mut Conn, sql: &str) -> Vec<String> {
    let result = c.query_iter(sql).await.unwrap();
    let defs = result
        .columns_ref()
        .iter()
        .map(|c| {
            format!(
                "{} {:?} {:?} decimals={} length={}",
                c.name_str(),
                c.column_type(),
                c.flags(),
                c.decimals(),
                c.column_length()
            )
        })
        .collect();
    result.drop_result().await.unwrap();
    defs
}

#[tokio::test]
async fn a_value_that_changes_how_columns_are_described_is_described_again() {
    // MariaDB describes `COUNT(*)` and `MAX(...)` of a grouped read otherwise when it finds
    // the WHERE impossible (no temporary table: BINARY_FLAG, no NO_DEFAULT_VALUE), while
    // the union's own definitions stay the same: the kept description of one must never
    // answer for the other, in either order.
    let h = Harness::start().await;
    let alone = per_shard().await;
    let grouped = |w: &str| {
        format!(
            "SELECT status, COUNT(*) AS g1, MAX(user_id) AS m1 FROM t_order WHERE {w} GROUP BY status"
        )
    };
    for order in [["1 = 0", "1 = 1"], ["2 = 2", "2 = 0"]] {
        let mut c = h.client().await;
        let mut r = alone.client().await;
        for _ in 0..2 {
            for w in order {
                let sql = grouped(w);
                assert_eq!(
                    definitions(&mut c, &sql).await,
                    definitions(&mut r, &sql).await,
                    "{sql}"
                );
            }
        }
    }
    // The same through the session's LAST_INSERT_ID, which `@@identity` reads.
    let identity = grouped("@@identity = 0");
    for set in [false, true] {
        let mut c = h.client().await;
        let mut r = alone.client().await;
        if set {
            c.query_drop("SELECT LAST_INSERT_ID(5)").await.unwrap();
            r.query_drop("SELECT LAST_INSERT_ID(5)").await.unwrap();
        }
        assert_eq!(
            definitions(&mut c, &identity).await,
            definitions(&mut r, &identity).await,
            "{identity} (LAST_INSERT_ID set: {set})"
        );
    }
    let impossible = definitions(&mut h.client().await, &grouped("1 = 0")).await;
    let possible = definitions(&mut h.client().await, &grouped("1 = 1")).await;
    assert_ne!(
        impossible, possible,
        "the server describes them alike: the test proves nothing"
    );
    h.stop().await;
    alone.stop().await;
}
