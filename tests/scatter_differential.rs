//! Differential test of scatter-gather reads (SPEC §5) against the unsharded reference
//! database `orders_ref`.
//!
//! The test writes its own ~200 orders (user ids 900000000..=900000999, so other tests'
//! rows never enter its answers) through the proxy and, identically, straight into
//! `orders_ref`. It then generates some 575 SELECTs without a usable order id (plain
//! columns and `*`, predicates, channel narrowing, ORDER BY over selected, unselected,
//! aliased, positional and computed keys, LIMIT/OFFSET, aggregates, GROUP BY, HAVING,
//! DISTINCT, joins of the binding tables, IN lists over several shards, empty answers)
//! and runs each through the proxy and on `orders_ref`, over the text protocol and over
//! the binary protocol (prepared, some with `?` parameters). Each pair must agree on:
//! - the column definitions (name, type, flags, decimals, length, character set);
//! - the rows as raw values: the same multiset; with ORDER BY the same sequence of order
//!   keys (text keys compared by collation weight, so that tied rows may come in any
//!   order); where LIMIT cuts a tie, only the tied rows at the edges may differ; where the
//!   order is total, the same sequence;
//! - where MySQL itself may answer any member of a set of collation-equal texts (a group's
//!   key, MIN/MAX of text, DISTINCT), text values compare by collation weight.
//!
//! Statements the proxy cannot merge exactly must be refused with error 1235 and the
//! expected reason; an unexpected refusal or a missing one is a failure. Every failure is
//! collected and the test fails once at the end with the count and the first ones.

mod common;

use std::collections::HashMap;

use common::*;
use mysql_async::consts::ColumnType;
use mysql_async::prelude::*;
use mysql_async::{Column, Conn, Params};

const LO: u64 = 900_000_000;
const HI: u64 = 900_000_999;
/// Every statement is restricted to the test's own rows by this predicate.
const R: &str = "user_id BETWEEN 900000000 AND 900000999";
/// The join of the binding tables over the test's rows.
const J: &str = "FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id \
                 WHERE o.user_id BETWEEN 900000000 AND 900000999";

// ---------------------------------------------------------------------------------------
// The dataset.
// ---------------------------------------------------------------------------------------

/// xorshift64*: a small deterministic PRNG.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[(self.next() % xs.len() as u64) as usize]
    }
}

const REGIONS: [&str; 10] = ["GB", "gb", "FR", "US", "JP", "CN", "HK", "KR", "MY", "DE"];
const AMOUNTS: [&str; 10] = [
    "0.00", "1.50", "10.00", "12.34", "12.34", "99.99", "100.00", "250.50", "1000.00", "-5.25",
];
#[rustfmt::skip]
const STATUSES: [&str; 8] =
    ["CREATED", "PAID", "paid", "Paid ", "SHIPPED", "shipped", "CANCELLED", "cancelled "];
#[rustfmt::skip]
const NOTES: [Option<&str>; 15] = [
    None, None, Some(""), Some("a"), Some("A"), Some("a "), Some("é"), Some("e"), Some("E"),
    Some("zeta"), Some("Zeta"), Some("ä"), Some("b"), Some("Résumé"), Some("resume"),
];
#[rustfmt::skip]
const TIMES: [&str; 7] = [
    "2026-01-02 03:04:05.678", "2026-01-02 03:04:05.678", "2026-01-02 03:04:05.000",
    "2025-12-31 23:59:59.999", "2026-02-10 10:00:00.000", "2026-02-10 10:00:00.001",
    "2024-06-01 00:00:00.000",
];
const SKUS: [&str; 6] = ["SKU-A", "sku-a", "SKU-B", "SKU-É", "sku-e", "SKU-C "];
const PRICES: [&str; 6] = ["1.00", "2.50", "2.50", "9.99", "100.00", "0.01"];

/// One order and its items, as SQL value tuples.
struct Entry {
    id: u64,
    order: String,
    items: Vec<String>,
}

/// 200 orders of every channel with ties, NULLs and collation-equal texts; fresh ids.
fn dataset() -> Vec<Entry> {
    let mut rng = Rng(0x005e_ed0f_d1ff);
    (0..200)
        .map(|_| {
            let (channel, code, _, _) = rng.pick(&CHANNELS);
            let id = fresh_new_id(code);
            let note = rng
                .pick(&NOTES)
                .map_or("NULL".to_owned(), |n| format!("'{n}'"));
            let order = format!(
                "({id}, '{channel}', '{}', {}, {}, '{}', {note}, '{}')",
                rng.pick(&REGIONS),
                LO + (rng.next() % 40) * 25,
                rng.pick(&AMOUNTS),
                rng.pick(&STATUSES),
                rng.pick(&TIMES),
            );
            let items = (1..=rng.next() % 4)
                .map(|no| {
                    let qty = (rng.next() % 7) as i64 - 1;
                    let (sku, price) = (rng.pick(&SKUS), rng.pick(&PRICES));
                    format!("({id}, {no}, '{sku}', {qty}, {price})")
                })
                .collect();
            Entry { id, order, items }
        })
        .collect()
}

const ITEM_COLUMNS: &str = "(order_id, item_no, sku, qty, price)";

/// Deletes the test's range from every physical shard and from `orders_ref`.
async fn reset() {
    let shards = config().sharding.shards.len() as u32;
    let mut tables: Vec<(usize, String, String)> = (0..shards).map(physical).collect();
    tables.push((
        0,
        "orders_ref.t_order".to_owned(),
        "orders_ref.t_order_item".to_owned(),
    ));
    for (ds, t, ti) in tables {
        let mut c = backend(ds).await;
        let items =
            format!("DELETE FROM {ti} WHERE order_id IN (SELECT order_id FROM {t} WHERE {R})");
        exec(&mut c, &items).await;
        exec(&mut c, &format!("DELETE FROM {t} WHERE {R}")).await;
    }
}

/// Inserts every order and its items through the proxy, one order at a time, and the same
/// rows straight into `orders_ref`.
async fn load(proxy: &mut Conn, reference: &mut Conn, data: &[Entry]) {
    let insert = |table: &str, cols: &str, rows: &[&String]| {
        let rows: Vec<&str> = rows.iter().map(|r| r.as_str()).collect();
        format!("INSERT INTO {table} {cols} VALUES {}", rows.join(", "))
    };
    for e in data {
        exec(proxy, &insert("t_order", ORDER_COLUMNS, &[&e.order])).await;
        let items: Vec<&String> = e.items.iter().collect();
        if !items.is_empty() {
            exec(proxy, &insert("t_order_item", ITEM_COLUMNS, &items)).await;
        }
    }
    let orders: Vec<&String> = data.iter().map(|e| &e.order).collect();
    let items: Vec<&String> = data.iter().flat_map(|e| &e.items).collect();
    exec(reference, &insert("t_order", ORDER_COLUMNS, &orders)).await;
    exec(reference, &insert("t_order_item", ITEM_COLUMNS, &items)).await;
}

// ---------------------------------------------------------------------------------------
// The statements.
// ---------------------------------------------------------------------------------------

/// How the rows of a statement are compared.
#[derive(Clone)]
enum Check {
    /// Same multiset (no ORDER BY).
    Set,
    /// Same sequence (the ORDER BY is total).
    Exact,
    /// The ORDER BY keys are these visible columns.
    Keys(Vec<usize>),
    /// The ORDER BY keys are not visible: `witness` (run on `orders_ref`) returns, per
    /// row, the visible columns `ids` (which identify it) and then its keys.
    Hidden { witness: String, ids: Vec<usize> },
}

struct Stmt {
    sql: String,
    check: Check,
    /// Text values compare by collation weight (MySQL may answer any equal text).
    fold: bool,
    /// The proxy must refuse it with 1235 and a message containing this.
    refuse: Option<&'static str>,
}

/// A statement from its check, written `[fold] set|exact|keys N...|by EXPRS|refuse WHY`:
/// `fold` when MySQL may answer any of collation-equal texts; `keys`: the visible ORDER
/// BY key columns; `by`: the unselected keys of t_order rows identified by order_id
/// (`pred` narrows their witness); `refuse`: a part of the expected reason of a 1235.
fn stmt(check: &'static str, sql: String, pred: &str) -> Stmt {
    let fold = check.starts_with("fold ");
    let check = check.trim_start_matches("fold ");
    let (word, rest) = check.split_once(' ').unwrap_or((check, ""));
    let (check, refuse) = match word {
        "set" => (Check::Set, None),
        "exact" => (Check::Exact, None),
        "keys" => (
            Check::Keys(rest.split(' ').map(|k| k.parse().unwrap()).collect()),
            None,
        ),
        "by" => {
            let witness = format!("SELECT order_id, {rest} FROM t_order WHERE {R}{pred}");
            (
                Check::Hidden {
                    witness,
                    ids: vec![0],
                },
                None,
            )
        }
        "refuse" => (Check::Set, Some(rest)),
        other => panic!("unknown check {other} for {sql}"),
    };
    Stmt {
        sql,
        check,
        fold,
        refuse,
    }
}

#[rustfmt::skip]
const PREDS: [&str; 8] = [
    "", " AND channel = 'EU_CHANNEL'", " AND channel = 'CORP_CHANNEL' AND amount >= 10",
    " AND amount > 50", " AND note IS NULL", " AND status = 'paid'",
    " AND region IN ('GB', 'KR') AND note IS NOT NULL", " AND amount < -100",
];

#[rustfmt::skip]
const LISTS: [&str; 6] = [
    "*", "order_id, channel, amount", "order_id, note, created_at", "status, note",
    "amount * 2 AS dbl, LOWER(status) ls, CONCAT(region, '-', status)",
    "region, user_id, created_at",
];

#[rustfmt::skip]
const LIMITS: [&str; 6] = [
    "", " LIMIT 5", " LIMIT 3, 7", " LIMIT 10 OFFSET 195", " LIMIT 5 OFFSET 1000", " LIMIT 0",
];

/// ORDER BY of `SELECT order_id, status, amount, note, created_at`, and its check.
#[rustfmt::skip]
const ORDERS: [(&str, &str); 16] = [
    ("amount", "keys 2"), ("amount DESC", "keys 2"), ("status", "keys 1"),
    ("status DESC, amount", "keys 1 2"), ("note", "keys 3"), ("note DESC, created_at", "keys 3 4"),
    ("created_at, order_id", "exact"), ("created_at DESC", "keys 4"), ("2 DESC", "keys 1"),
    ("3, 1", "exact"), ("amount * 2 DESC, order_id", "exact"),
    ("CONCAT(status, note)", "by CONCAT(status, note)"), ("LOWER(note) DESC", "by LOWER(note)"),
    ("region", "by region"), ("user_id DESC, order_id DESC", "exact"),
    ("channel, created_at DESC", "by channel, created_at"),
];

/// Aggregates without GROUP BY.
#[rustfmt::skip]
const AGGS: [&str; 15] = [
    "COUNT(*)", "COUNT(note)", "SUM(amount)", "MIN(amount), MAX(amount)", "AVG(amount)",
    "MIN(created_at), MAX(created_at)", "MIN(status), MAX(note)", "AVG(user_id), SUM(user_id)",
    "COUNT(*), SUM(amount), AVG(amount), MIN(note), MAX(created_at)", "AVG(amount * 2)",
    "SUM(amount) - MIN(amount) AS spread", "COUNT(*) + 1", "AVG(created_at)",
    "MAX(LOWER(note))", "SUM(amount) * 2 + COUNT(*)",
];

/// Generated statements: select lists under predicates; ORDER BYs under LIMITs on all
/// shards and on one channel's; aggregates over all rows, one channel's and none.
fn generated() -> Vec<Stmt> {
    let mut v = Vec::new();
    for list in LISTS {
        for pred in PREDS {
            v.push(stmt(
                "set",
                format!("SELECT {list} FROM t_order WHERE {R}{pred}"),
                pred,
            ));
        }
    }
    for pred in ["", " AND channel = 'BIZ_CHANNEL'"] {
        for (order, check) in ORDERS {
            for limit in LIMITS {
                let sql = format!(
                    "SELECT order_id, status, amount, note, created_at FROM t_order \
                     WHERE {R}{pred} ORDER BY {order}{limit}"
                );
                v.push(stmt(check, sql, pred));
            }
        }
    }
    for (order, check) in [("amt DESC", "keys 1"), ("st, amt", "keys 2 1")] {
        for limit in LIMITS {
            let sql = format!(
                "SELECT order_id, amount AS amt, status st, note FROM t_order \
                 WHERE {R} ORDER BY {order}{limit}"
            );
            v.push(stmt(check, sql, ""));
        }
    }
    for agg in AGGS {
        for pred in [
            "",
            " AND channel = 'GLOBAL_CHANNEL'",
            " AND note IS NULL",
            " AND amount < -100",
        ] {
            v.push(stmt(
                "fold set",
                format!("SELECT {agg} FROM t_order WHERE {R}{pred}"),
                pred,
            ));
        }
    }
    v
}

/// GROUP BY: (select list whose column 1 is the aggregate `x`, GROUP BY, the group key
/// expressions, their visible columns).
#[rustfmt::skip]
const GROUPS: [(&str, &str, &str, &[usize]); 9] = [
    ("status, COUNT(*) AS x", "status", "status", &[0]),
    ("channel, SUM(amount) AS x, AVG(amount), COUNT(*)", "channel", "channel", &[0]),
    ("region, MAX(created_at) AS x, channel", "region, channel", "region, channel", &[0, 2]),
    ("amount * 2 AS a2, COUNT(*) AS x", "amount * 2", "amount * 2", &[0]),
    ("user_id, MAX(amount) AS x, MIN(note)", "user_id", "user_id", &[0]),
    ("LOWER(status) AS s, COUNT(note) AS x", "LOWER(status)", "LOWER(status)", &[0]),
    ("channel, AVG(user_id) AS x", "1", "channel", &[0]),
    ("note, COUNT(*) AS x", "note", "note", &[0]),
    ("DATE(created_at) AS d, SUM(amount) AS x", "DATE(created_at)", "DATE(created_at)", &[0]),
];

/// Grouped rows: every grouping with HAVING, ORDER BY (of a visible and an unselected
/// aggregate) and LIMIT, on all shards, one channel's, and no rows.
fn grouped() -> Vec<Stmt> {
    let mut v = Vec::new();
    for pred in ["", " AND channel = 'BIZ_CHANNEL'", " AND amount < -100"] {
        for (list, group, exprs, ids) in GROUPS {
            let tails = [
                ("", "fold set"),
                (" HAVING x > 2", "fold set"),
                (" HAVING COUNT(*) >= 2 ORDER BY x DESC", "fold keys 1"),
                (" ORDER BY x DESC, 1 LIMIT 3", "fold keys 1 0"),
                (" ORDER BY 1 DESC LIMIT 2, 3", "fold keys 0"),
            ];
            let from = format!("FROM t_order WHERE {R}{pred}");
            for (tail, check) in tails {
                let mut s = stmt(
                    check,
                    format!("SELECT {list} {from} GROUP BY {group}{tail}"),
                    pred,
                );
                // The merge does not compare a DATETIME with a number (over no rows
                // there is nothing to compare, and the answer is empty).
                if list.contains("created_at) AS x")
                    && tail.contains("x > 2")
                    && !pred.contains("-100")
                {
                    s.refuse = Some("comparing date and time with integer");
                }
                v.push(s);
            }
            let witness = format!("SELECT {exprs}, MAX(amount) {from} GROUP BY {exprs}");
            let sql = format!("SELECT {list} {from} GROUP BY {group} ORDER BY MAX(amount) DESC");
            let check = Check::Hidden {
                witness,
                ids: ids.to_vec(),
            };
            v.push(Stmt {
                check,
                ..stmt("fold set", sql, pred)
            });
        }
    }
    v
}

/// Hand-written statements, one a line: `check | SQL` (the check as [`stmt`] reads it).
/// `{t}` is `FROM t_order WHERE` the range, `{J}` the join over the range, `{rows}` a
/// select of t_order rows and `{w}` `WHERE order_id IN` ids of many shards.
const TABLE: &str = "
fold set         | SELECT DISTINCT status {t}
fold set         | SELECT DISTINCT channel, region {t}
keys 0           | SELECT DISTINCT amount {t} ORDER BY amount DESC LIMIT 3
fold keys 0      | SELECT DISTINCT note {t} ORDER BY note
fold keys 0      | SELECT DISTINCT LOWER(note) AS n {t} ORDER BY n DESC LIMIT 4
keys 0           | SELECT DISTINCT created_at {t} AND channel = 'EU_CHANNEL' ORDER BY 1 LIMIT 2, 2
fold keys 0 1    | SELECT DISTINCT user_id, status {t} ORDER BY user_id, status
fold keys 0      | SELECT DISTINCT status {t} ORDER BY status DESC LIMIT 2
set              | SELECT o.order_id, i.item_no, i.sku, i.qty, i.price {J}
exact            | SELECT o.order_id, i.item_no, i.sku, i.price {J} ORDER BY i.price DESC, o.order_id, i.item_no LIMIT 8
keys 2           | SELECT o.channel, COUNT(*) AS n, SUM(i.qty * i.price) AS v {J} GROUP BY o.channel ORDER BY v DESC
fold set         | SELECT i.sku, SUM(i.qty), MIN(i.price), MAX(o.created_at) {J} GROUP BY i.sku
exact            | SELECT o.order_id, COUNT(*) AS n {J} GROUP BY o.order_id HAVING n > 1 ORDER BY n DESC, o.order_id LIMIT 5
fold set         | SELECT o.status, AVG(i.price), SUM(i.qty) {J} AND o.channel = 'EU_CHANNEL' GROUP BY o.status
keys 1           | SELECT i.order_id, i.sku {J} ORDER BY i.sku DESC LIMIT 7
fold keys 2 0 1  | SELECT o.region, i.sku, COUNT(*) {J} GROUP BY o.region, i.sku ORDER BY 3 DESC, 1, 2
fold set         | SELECT COUNT(*), SUM(i.qty), AVG(i.qty), MIN(i.sku) {J}
set              | SELECT COUNT(*), SUM(i.price), AVG(i.price) {J} AND i.qty > 1000
set              | SELECT * {J} AND o.channel = 'CN_CHANNEL'
exact            | SELECT o.*, i.sku {J} ORDER BY i.sku, o.order_id, i.item_no LIMIT 20
fold set         | SELECT i.qty > 2 AS big, COUNT(*), SUM(i.price) {J} GROUP BY i.qty > 2
exact            | SELECT order_id, status, amount FROM t_order {w} ORDER BY amount DESC, order_id
keys 1           | SELECT order_id, status, amount FROM t_order {w} ORDER BY status LIMIT 4
keys 7           | SELECT * FROM t_order {w} ORDER BY created_at DESC LIMIT 2, 5
fold set         | SELECT COUNT(*), SUM(amount), AVG(amount), MAX(note) FROM t_order {w}
fold keys 0      | SELECT channel, COUNT(*) FROM t_order {w} GROUP BY channel ORDER BY 1
exact            | SELECT * FROM t_order_item {w} ORDER BY price, order_id, item_no
exact            | SELECT order_id, SUM(qty * price) AS v FROM t_order_item {w} GROUP BY order_id ORDER BY v DESC, order_id
fold set         | SELECT DISTINCT sku FROM t_order_item {w}
set              | SELECT COUNT(*) AS n {t} HAVING n > 1000
set              | SELECT COUNT(*) AS n {t} HAVING n > 1
set              | SELECT MAX(amount) AS m {t} AND amount < -100 HAVING m IS NULL
set              | SELECT COUNT(*) {t} ORDER BY 1 LIMIT 1, 1
set              | SELECT COUNT(*), SUM(amount) {t} LIMIT 0
exact            | {rows} ORDER BY 3 DESC, 1
exact            | {rows} ORDER BY 2 DESC, 1
fold set         | SELECT channel, region, COUNT(*) {t} GROUP BY 1
fold set         | SELECT channel, region, COUNT(*) {t} GROUP BY 2
fold set         | SELECT channel, COUNT(*) AS n {t} GROUP BY channel HAVING n > 30
fold set         | SELECT channel, COUNT(*) AS n {t} GROUP BY channel HAVING n > 50
fold set         | SELECT status, COUNT(*) {t} GROUP BY status LIMIT 0
fold set         | SELECT status, COUNT(*) {t} GROUP BY status ORDER BY NULL
fold set         | SELECT COUNT(*) AS n {t} GROUP BY status ORDER BY status
keys 0 1         | SELECT COUNT(*) AS n, SUM(amount) {t} GROUP BY channel ORDER BY COUNT(*) DESC, SUM(amount)
exact            | SELECT order_id, amount AS status {t} ORDER BY status DESC, order_id
fold keys 1      | SELECT channel, MAX(amount) - MIN(amount) AS s, COUNT(note) * 2 {t} GROUP BY channel ORDER BY s DESC
fold set         | SELECT status, IFNULL(MAX(note), 0) {t} GROUP BY status
exact            | {rows} ORDER BY note COLLATE utf8mb4_bin, order_id
by WEIGHT_STRING(note COLLATE utf8mb4_bin) | {rows} ORDER BY note COLLATE utf8mb4_bin DESC LIMIT 9
by BINARY note   | {rows} ORDER BY BINARY note LIMIT 2, 9
exact            | {rows} ORDER BY amount / 3, order_id
by -amount       | {rows} ORDER BY -amount LIMIT 6
by CAST(amount AS CHAR) | {rows} ORDER BY CAST(amount AS CHAR) LIMIT 4, 8
by amount * 1e0  | {rows} ORDER BY amount * 1e0 DESC LIMIT 7
by LENGTH(note), note | {rows} ORDER BY LENGTH(note), note LIMIT 11
by note IS NULL, note | {rows} ORDER BY note IS NULL, note DESC
by IF(amount > 50, 0, 1), status | {rows} ORDER BY IF(amount > 50, 0, 1), status LIMIT 6
exact            | {rows} AND order_id > 0 ORDER BY order_id DESC LIMIT 5
exact            | {rows} AND order_id NOT IN (1, 2, 3) ORDER BY amount, order_id LIMIT 3 OFFSET 150
keys 0 1         | SELECT region, channel {t} ORDER BY region DESC, channel
set              | SELECT COUNT(*) {t} AND channel = 'NO_SUCH_CHANNEL'
fold set         | SELECT COUNT(*), SUM(amount), MAX(note) {t} AND channel = 'EU_CHANNEL'
fold set         | SELECT COUNT(*), SUM(amount), MAX(note) {t} AND channel = 'CN_CHANNEL'
set              | SELECT COUNT(*) {t} AND channel = 'eu_channel'
set              | SELECT COUNT(*) {t} AND channel = 'EU_CHANNEL '
set              | SELECT COUNT(*) {t} AND channel IN ('EU_CHANNEL', 'CN_CHANNEL')
set              | SELECT COUNT(*) {t} AND (channel = 'EU_CHANNEL' OR channel = 'CN_CHANNEL')
set              | SELECT COUNT(*) {t} AND channel <> 'EU_CHANNEL'
set              | SELECT COUNT(*) {t} AND region = 'GB'
set              | SELECT COUNT(*) {t} AND region = 'KR'
fold set         | SELECT region, COUNT(*) {t} AND region = 'gb' GROUP BY region
exact            | {rows} ORDER BY amount, order_id LIMIT 5
exact            | {rows} ORDER BY amount, order_id LIMIT 9
exact            | {rows} ORDER BY amount, order_id LIMIT 2, 5
exact            | {rows} ORDER BY amount, order_id LIMIT 4, 3
set              | SELECT COUNT(*) + 1, SUM(amount) * 2 {t}
set              | SELECT COUNT(*) + 7, SUM(amount) * 3 {t}
fold set         | SELECT channel, COUNT(*) AS n {t} GROUP BY channel HAVING n IN (30, 40, 41)
fold keys 1      | SELECT channel, COUNT(*) + 1 AS n {t} GROUP BY channel ORDER BY n DESC
fold keys 1      | SELECT channel, COUNT(*) + 100 AS n {t} GROUP BY channel ORDER BY n DESC
exact            | {rows} ORDER BY amount * 2, order_id DESC
exact            | {rows} ORDER BY amount * -1, order_id DESC
fold set         | SELECT channel, SUM(amount) {t} GROUP BY channel HAVING SUM(amount)
fold set         | SELECT channel, AVG(amount) a {t} GROUP BY channel HAVING a
fold set         | SELECT channel, COUNT(*) {t} GROUP BY channel HAVING -COUNT(*)
fold set         | SELECT channel, MAX(amount * 1e0) AS m {t} GROUP BY channel HAVING m
fold set         | SELECT channel, COUNT(*) {t} GROUP BY channel HAVING COUNT(*) - COUNT(*)
refuse DISTINCT  | SELECT COUNT(DISTINCT status) {t}
refuse DISTINCT  | SELECT channel, SUM(DISTINCT amount) {t} GROUP BY channel
refuse DISTINCT  | SELECT o.order_id, COUNT(DISTINCT i.sku) {J} GROUP BY o.order_id
refuse GROUP_CONCAT | SELECT GROUP_CONCAT(note) {t}
refuse STD       | SELECT STD(amount) {t}
refuse DISTINCT * | SELECT DISTINCT * {t}
refuse DISTINCT with GROUP BY | SELECT DISTINCT status, COUNT(*) {t} GROUP BY status
refuse ROLLUP    | SELECT status, COUNT(*) {t} GROUP BY status WITH ROLLUP
refuse does not select | SELECT DISTINCT status {t} ORDER BY created_at
refuse alias     | SELECT order_id, amount a {t} ORDER BY a * 2
refuse both a select alias and a column | SELECT LEFT(status, 1) AS status, COUNT(*) {t} GROUP BY status
refuse inside or after `*` | SELECT * {t} ORDER BY 2
refuse `*`       | SELECT * {t} ORDER BY 1
refuse `*`       | SELECT * {t} ORDER BY 2
refuse `*`       | SELECT *, COUNT(*) {t}
refuse literal   | SELECT status, COUNT(*) {t} GROUP BY status HAVING status = 'paid'
refuse AVG() inside HAVING | SELECT channel, AVG(amount) a {t} GROUP BY channel HAVING AVG(amount) > 50
refuse operator / | SELECT channel, SUM(amount) / COUNT(*) {t} GROUP BY channel
refuse operator / | SELECT SUM(i.price * i.qty) / SUM(i.qty) {J}
refuse window    | SELECT order_id, ROW_NUMBER() OVER (ORDER BY amount) {t}
set              | SELECT MAX(user_id) - 900000975, MIN(user_id) - 900000000 {t}
fold keys 1      | SELECT channel, MAX(user_id) - 900000000 AS d {t} GROUP BY channel ORDER BY d DESC
refuse an executable comment | {rows} ORDER BY order_id /*!DESC*/ LIMIT 2
refuse an executable comment | {rows} /*!LIMIT 1*/
set              | SELECT /*!40001 SQL_NO_CACHE */ COUNT(*), SUM(amount) {t}
set              | SELECT IF(COUNT(*) > 1, MIN(created_at), NULL) {t}
fold set         | SELECT status, IF(COUNT(*) > 2, MAX(created_at), MIN(created_at)) {t} GROUP BY status
fold set         | SELECT channel, COALESCE(MAX(amount * 1e0), 0) {t} GROUP BY channel
set              | SELECT IF(COUNT(*) > 1, MAX(amount * 1e0), 1), COALESCE(MIN(amount / 3e0), 0) {t}
fold set         | SELECT channel, IFNULL(MAX(TIMEDIFF(created_at, '2020-01-01')), 0) {t} GROUP BY channel
";

/// The statements of [`TABLE`].
fn table(data: &[Entry]) -> Vec<Stmt> {
    let ids: Vec<String> = data.iter().step_by(15).map(|e| e.id.to_string()).collect();
    let expand = |s: &str| {
        s.replace("{rows}", "SELECT order_id, status, amount, note {t}")
            .replace("{t}", &format!("FROM t_order WHERE {R}"))
            .replace("{J}", J)
            .replace("{w}", &format!("WHERE order_id IN ({})", ids.join(", ")))
    };
    let lines = TABLE.lines().filter(|l| !l.trim().is_empty());
    lines
        .map(|line| {
            let (check, sql) = line.split_once('|').expect("check | SQL");
            stmt(check.trim(), expand(sql.trim()), "")
        })
        .collect()
}

fn statements(data: &[Entry]) -> Vec<Stmt> {
    let mut v = generated();
    v.extend(grouped());
    v.extend(table(data));
    v
}

/// The binary-protocol form of statement `i`: for some statements the range, a channel
/// and a trailing LIMIT count become `?` parameters.
fn prepared_form(sql: &str, i: usize) -> (String, Vec<Value>) {
    let mut subs: Vec<(usize, usize, &str, Vec<Value>)> = Vec::new();
    if let Some(p) = sql.find(R).filter(|_| i % 3 == 0) {
        let range = vec![LO.into(), HI.into()];
        subs.push((p, R.len(), "user_id BETWEEN ? AND ?", range));
    }
    let quote = "channel = '";
    if let Some(p) = sql.find(quote).filter(|_| i % 2 == 0) {
        let start = p + quote.len();
        let end = start + sql[start..].find('\'').expect("closing quote");
        subs.push((p, end + 1 - p, "channel = ?", vec![sql[start..end].into()]));
    }
    if let Some(p) = sql.rfind(" LIMIT ").filter(|_| i % 5 == 0) {
        if let Ok(n) = sql[p + 7..].parse::<u64>() {
            subs.push((p, sql.len() - p, " LIMIT ?", vec![n.into()]));
        }
    }
    subs.sort_by_key(|s| s.0);
    let (mut out, mut params, mut at) = (String::new(), Vec::new(), 0);
    for (p, len, with, values) in subs {
        out.push_str(&sql[at..p]);
        out.push_str(with);
        params.extend(values);
        at = p + len;
    }
    out.push_str(&sql[at..]);
    (out, params)
}

// ---------------------------------------------------------------------------------------
// Running and judging.
// ---------------------------------------------------------------------------------------

/// What a statement answered.
struct Answer {
    cols: Vec<Column>,
    rows: Vec<Values>,
}

/// Runs `sql` as text (`params` None) or prepared.
async fn run(
    c: &mut Conn,
    sql: &str,
    params: Option<&[Value]>,
) -> Result<Answer, mysql_async::Error> {
    let (cols, rows): (Vec<Column>, Vec<mysql_async::Row>) = match params {
        None => {
            let mut r = c.query_iter(sql).await?;
            let cols = r.columns_ref().to_vec();
            (cols, r.collect().await?)
        }
        Some(p) => {
            let mut r = c.exec_iter(sql, Params::from(p.to_vec())).await?;
            let cols = r.columns_ref().to_vec();
            (cols, r.collect().await?)
        }
    };
    let rows = rows.into_iter().map(|r| r.unwrap()).collect();
    Ok(Answer { cols, rows })
}

/// A column definition as the client sees it, without schema and table names.
fn coldef(c: &Column) -> String {
    format!(
        "{} {:?} flags={:?} decimals={} length={} charset={}",
        c.name_str(),
        c.column_type(),
        c.flags(),
        c.decimals(),
        c.column_length(),
        c.character_set()
    )
}

fn is_text(c: &Column) -> bool {
    use ColumnType::*;
    c.character_set() != 63
        && matches!(
            c.column_type(),
            MYSQL_TYPE_VARCHAR | MYSQL_TYPE_VAR_STRING | MYSQL_TYPE_STRING | MYSQL_TYPE_BLOB
        )
}

/// Every column index of `row`.
fn all(row: &[Value]) -> Vec<usize> {
    (0..row.len()).collect()
}

/// Unselected ORDER BY keys by the identifying columns of a row.
type Witness = HashMap<String, Values>;

fn show_row(r: &[Value]) -> String {
    r.iter().map(show).collect::<Vec<_>>().join(" | ")
}

/// Compares answers, with collation weights from the reference server.
struct Judge {
    conn: Conn,
    weights: HashMap<Vec<u8>, Value>,
}

impl Judge {
    async fn new() -> Self {
        Self {
            conn: backend(0).await,
            weights: HashMap::new(),
        }
    }

    /// The utf8mb4_general_ci weight of a text (PAD SPACE: trailing spaces do not count).
    async fn weight(&mut self, v: &Value) -> Value {
        let Value::Bytes(b) = v else {
            return v.clone();
        };
        let trimmed = b.trim_ascii_end().to_vec();
        if let Some(w) = self.weights.get(&trimmed) {
            return w.clone();
        }
        let sql = "SELECT HEX(WEIGHT_STRING(CONVERT(? USING utf8mb4) COLLATE utf8mb4_general_ci))";
        let w: Option<String> = self.conn.exec_first(sql, (trimmed.clone(),)).await.unwrap();
        let w = Value::Bytes(format!("weight:{}", w.unwrap_or_default()).into_bytes());
        self.weights.insert(trimmed, w.clone());
        w
    }

    /// Columns `idx` of `row`, texts as their weights.
    async fn fold(&mut self, cols: &[Column], row: &[Value], idx: &[usize]) -> Values {
        let mut out = Vec::new();
        for &i in idx {
            let text = is_text(&cols[i]);
            out.push(if text {
                self.weight(&row[i]).await
            } else {
                row[i].clone()
            });
        }
        out
    }

    /// The witness of unselected order keys: ids (folded) -> keys (folded).
    async fn witness(&mut self, sql: &str, ids: usize, binary: bool) -> HashMap<String, Values> {
        let mut r = reference().await;
        let a = run(&mut r, sql, binary.then_some(&[][..])).await;
        let a = a.unwrap_or_else(|e| panic!("{sql}: {e}"));
        let mut map = HashMap::new();
        for row in &a.rows {
            let row = self.fold(&a.cols, row, &all(row)).await;
            map.insert(show_row(&row[..ids]), row[ids..].to_vec());
        }
        map
    }

    /// The ORDER BY keys of each row, when they can be known.
    async fn order_keys(
        &mut self,
        stmt: &Stmt,
        a: &Answer,
        witness: &Witness,
    ) -> Result<Vec<Values>, String> {
        let mut out = Vec::new();
        for row in &a.rows {
            match &stmt.check {
                Check::Keys(k) => out.push(self.fold(&a.cols, row, k).await),
                Check::Hidden { ids, .. } => {
                    let id = show_row(&self.fold(&a.cols, row, ids).await);
                    let key = witness.get(&id);
                    let why = || format!("row {} has no order key in the witness", show_row(row));
                    out.push(key.ok_or_else(why)?.clone());
                }
                Check::Set | Check::Exact => {}
            }
        }
        Ok(out)
    }

    /// Ok when `got` is an answer MySQL could have given where `want` is what it gave.
    async fn compare(
        &mut self,
        stmt: &Stmt,
        got: &Answer,
        want: &Answer,
        witness: &Witness,
    ) -> Result<(), String> {
        let defs = |a: &Answer| {
            a.cols
                .iter()
                .map(|c| vec![Value::from(coldef(c))])
                .collect()
        };
        let (g, w): (Vec<Values>, Vec<Values>) = (defs(got), defs(want));
        same_sequence(&g, &w, "column definition")?;
        let (mut gr, mut wr) = (Vec::new(), Vec::new());
        for (src, dst) in [(&got.rows, &mut gr), (&want.rows, &mut wr)] {
            for row in src {
                let all = all(row);
                let folded = if stmt.fold { &all[..] } else { &[] };
                let mut row = row.clone();
                for (i, v) in folded.iter().zip(self.fold(&want.cols, &row, folded).await) {
                    row[*i] = v;
                }
                dst.push(row);
            }
        }
        if gr.len() != wr.len() {
            let (n, m) = (gr.len(), wr.len());
            return Err(format!(
                "got {n} rows, expected {m}\n{}",
                set_diff(&gr, &wr)
            ));
        }
        match stmt.check {
            Check::Set => same_multiset(&gr, &wr),
            Check::Exact => same_sequence(&gr, &wr, "row"),
            Check::Keys(_) | Check::Hidden { .. } => {
                let gk = self.order_keys(stmt, got, witness).await?;
                let wk = self.order_keys(stmt, want, witness).await?;
                same_sequence(&gk, &wk, "order key")?;
                if !stmt.sql.contains(" LIMIT ") || gk.is_empty() {
                    return same_multiset(&gr, &wr);
                }
                // LIMIT may cut the ties of the first and last keys: other rows must match.
                let edge = |k: &Values| *k == wk[0] || *k == wk[wk.len() - 1];
                let inner = |rows: &[Values], ks: &[Values]| -> Vec<Values> {
                    rows.iter()
                        .zip(ks)
                        .filter(|(_, k)| !edge(k))
                        .map(|(r, _)| r.clone())
                        .collect()
                };
                same_multiset(&inner(&gr, &gk), &inner(&wr, &wk))
            }
        }
    }
}

fn same_sequence(got: &[Values], want: &[Values], what: &str) -> Result<(), String> {
    match (0..got.len().max(want.len())).find(|&i| got.get(i) != want.get(i)) {
        None => Ok(()),
        Some(i) => Err(format!(
            "{what} {i} differs: got [{}], expected [{}]",
            got.get(i).map_or("none".into(), |r| show_row(r)),
            want.get(i).map_or("none".into(), |r| show_row(r)),
        )),
    }
}

fn sorted(rows: &[Values]) -> Vec<String> {
    let mut v: Vec<String> = rows.iter().map(|r| format!("{r:?}")).collect();
    v.sort();
    v
}

/// The rows only one side has (at most three of each).
fn set_diff(got: &[Values], want: &[Values]) -> String {
    let mut count: HashMap<String, i64> = HashMap::new();
    for (rows, n) in [(got, 1), (want, -1)] {
        for r in sorted(rows) {
            *count.entry(r).or_default() += n;
        }
    }
    let only = |sign: i64| -> Vec<&String> {
        let mut v: Vec<&String> = count
            .iter()
            .filter(|(_, n)| n.signum() == sign)
            .map(|(r, _)| r)
            .collect();
        v.sort();
        v.into_iter().take(3).collect()
    };
    format!(
        "  only through the proxy: {:?}\n  only on orders_ref: {:?}",
        only(1),
        only(-1)
    )
}

fn same_multiset(got: &[Values], want: &[Values]) -> Result<(), String> {
    match sorted(got) == sorted(want) {
        true => Ok(()),
        false => Err(format!("rows differ\n{}", set_diff(got, want))),
    }
}

/// The tallies of a run.
#[derive(Default)]
struct Tally {
    passed: usize,
    refused: usize,
    failures: Vec<String>,
}

/// Runs one statement in one protocol through the proxy and on the reference, and judges.
async fn one(
    judge: &mut Judge,
    conns: (&mut Conn, &mut Conn),
    stmt: &Stmt,
    form: (&str, Option<&[Value]>),
    witness: &Witness,
) -> Result<bool, String> {
    let (proxy, reference) = conns;
    let (sql, params) = form;
    let got = run(proxy, sql, params).await;
    if let Some(why) = stmt.refuse {
        return match got {
            Err(mysql_async::Error::Server(e)) if e.code == 1235 && e.message.contains(why) => {
                Ok(false)
            }
            Err(e) => Err(format!("expected a refusal (1235, \"{why}\"), got {e}")),
            Ok(a) => Err(format!(
                "expected a refusal (1235, \"{why}\"), got {} rows",
                a.rows.len()
            )),
        };
    }
    let want = run(reference, sql, params).await;
    match (got, want) {
        (Ok(g), Ok(w)) => judge.compare(stmt, &g, &w, witness).await.map(|_| true),
        (Err(e), Ok(_)) => Err(format!("refused or failed through the proxy: {e}")),
        (Ok(_), Err(e)) => Err(format!(
            "answered through the proxy, fails on orders_ref: {e}"
        )),
        (Err(g), Err(w)) => Err(format!("fails on both: proxy {g}; orders_ref {w}")),
    }
}

/// Runs every statement in both protocols through `proxy` `passes` times and judges each
/// answer against the reference.
async fn differential(
    proxy: &mut Conn,
    refc: &mut Conn,
    stmts: &[Stmt],
    passes: usize,
    plan: &str,
) -> Tally {
    let mut judge = Judge::new().await;
    let mut tally = Tally::default();
    for (i, stmt) in stmts.iter().enumerate() {
        let (prep, params) = prepared_form(&stmt.sql, i);
        for (proto, sql, params) in [
            ("text", &stmt.sql, None),
            ("binary", &prep, Some(&params[..])),
        ] {
            let witness = match &stmt.check {
                Check::Hidden { witness, ids } => {
                    judge.witness(witness, ids.len(), params.is_some()).await
                }
                _ => HashMap::new(),
            };
            for pass in 1..=passes {
                let conns = (&mut *proxy, &mut *refc);
                match one(&mut judge, conns, stmt, (sql, params), &witness).await {
                    Ok(true) => tally.passed += 1,
                    Ok(false) => tally.refused += 1,
                    Err(diff) => tally.failures.push(format!(
                        "[{plan}, {proto}, run {pass}] {sql} {params:?}\n  {diff}"
                    )),
                }
            }
        }
    }
    tally
}

/// The statements run twice with the combined plan (a datasource's shards in one
/// statement: the first run describes the columns, the second uses them as held) and once
/// with a statement per shard (`sharding.combine_shards = false`).
#[tokio::test]
async fn scatter_reads_answer_as_the_reference_does() {
    let h = Harness::start().await;
    let mut per_shard_config = config();
    per_shard_config.sharding.combine_shards = false;
    let h_per_shard = Harness::start_with(per_shard_config).await;
    let mut proxy = h.client().await;
    let mut per_shard = h_per_shard.client().await;
    let mut refc = reference().await;
    let data = dataset();
    reset().await;
    load(&mut proxy, &mut refc, &data).await;
    let stmts = statements(&data);
    assert!(stmts.len() >= 300, "only {} statements", stmts.len());
    let before = route_stats(&mut proxy).await;
    let combined = differential(&mut proxy, &mut refc, &stmts, 2, "combined").await;
    let after = route_stats(&mut proxy).await;
    let by_plan = |plan: &str| {
        let key = format!("merged_reads_{plan}");
        after[&key] - before[&key]
    };
    let (described, held, declined) = (
        by_plan("describing"),
        by_plan("combined"),
        by_plan("per_shard"),
    );
    let alone = differential(&mut per_shard, &mut refc, &stmts, 1, "per shard").await;
    let per_shard_reads = route_stats(&mut per_shard).await;
    reset().await;
    h.stop().await;
    h_per_shard.stop().await;
    let mut failures = combined.failures;
    failures.extend(alone.failures);
    println!(
        "scatter differential: {} statements per protocol; combined (twice): {} passed, {} refused as expected; \
         merged reads: {described} described as they ran, {held} with their columns held, {declined} per shard; \
         per shard: {} passed, {} refused as expected ({} merged reads combined); {} failed",
        stmts.len(),
        combined.passed,
        combined.refused,
        alone.passed,
        alone.refused,
        per_shard_reads["merged_reads_combined"] + per_shard_reads["merged_reads_describing"],
        failures.len()
    );
    for f in &failures {
        eprintln!("FAILED {f}\n");
    }
    assert!(
        failures.is_empty(),
        "{} of {} runs failed; the first ones:\n\n{}",
        failures.len(),
        6 * stmts.len(),
        failures[..failures.len().min(10)].join("\n\n")
    );
    // Both plans ran: most merged reads combine, and the second run of each uses the
    // columns the first described; some are declined (their constructs are listed in the
    // planner) and run per shard.
    assert!(
        held > 200 && described > 200 && declined > 20,
        "{described} {held} {declined}"
    );
    assert_eq!(
        per_shard_reads["merged_reads_combined"] + per_shard_reads["merged_reads_describing"],
        0
    );
}
