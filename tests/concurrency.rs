//! Sixteen clients at once, each inserting, reading, updating and deleting its own fresh
//! orders (new-format and legacy, every channel) for a few seconds: no errors, every read
//! sees the client's own writes, and afterwards every order sits on its one right shard.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::*;
use mysql_async::Conn;
use mysql_async::prelude::*;

const CLIENTS: usize = 16;
const RUN_FOR: Duration = Duration::from_secs(4);

/// What a client expects of one of its orders at the end.
#[derive(Debug, Clone)]
struct Expected {
    channel: &'static str,
    legacy: bool,
    /// `None` once deleted.
    status: Option<String>,
}

async fn one_client(
    opts: mysql_async::Opts,
    client: usize,
    guard: std::sync::Arc<Cleanup>,
) -> HashMap<u64, Expected> {
    let mut c = Conn::new(opts).await.unwrap();
    let mut r = reference().await;
    let s = seed();
    let mut mine: HashMap<u64, Expected> = HashMap::new();
    let started = Instant::now();
    let mut step = 0usize;
    while started.elapsed() < RUN_FOR {
        step += 1;
        let (name, code, ..) = CHANNELS[(client + step) % CHANNELS.len()];
        let legacy = step % 3 == 0;
        let id = guard.add(if legacy {
            fresh_legacy_id()
        } else {
            fresh_new_id(code)
        });
        let ctx = format!("client {client} step {step} {name} {id}");
        c.query_drop(insert_order_sql(id, name, &format!("c{client}")))
            .await
            .unwrap_or_else(|e| panic!("{ctx}: insert: {e}"));
        c.query_drop(format!(
            "INSERT INTO t_order_item (order_id, item_no, sku, qty, price) VALUES ({id}, 1, 'S', 1, 1.00), ({id}, 2, 'T', 2, 2.00)"
        ))
        .await
        .unwrap_or_else(|e| panic!("{ctx}: insert items: {e}"));
        mine.insert(
            id,
            Expected {
                channel: name,
                legacy,
                status: Some("CREATED".into()),
            },
        );

        let status = format!("S{step}");
        c.query_drop(format!(
            "UPDATE t_order SET status = '{status}' WHERE order_id = {id}"
        ))
        .await
        .unwrap_or_else(|e| panic!("{ctx}: update: {e}"));
        assert_eq!(c.affected_rows(), 1, "{ctx}: update");
        let got: Option<(String, String)> = c
            .query_first(format!(
                "SELECT status, note FROM t_order WHERE order_id = '{id}'"
            ))
            .await
            .unwrap_or_else(|e| panic!("{ctx}: read: {e}"));
        assert_eq!(
            got,
            Some((status.clone(), format!("c{client}"))),
            "{ctx}: read own write"
        );
        let n: Option<u64> = c
            .query_first(format!(
                "SELECT COUNT(*) FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id WHERE o.order_id = {id}"
            ))
            .await
            .unwrap_or_else(|e| panic!("{ctx}: join: {e}"));
        assert_eq!(n, Some(2), "{ctx}: join");
        mine.get_mut(&id).unwrap().status = Some(status);

        if step % 4 == 0 {
            c.query_drop(format!("DELETE FROM t_order_item WHERE order_id = {id}"))
                .await
                .unwrap_or_else(|e| panic!("{ctx}: delete items: {e}"));
            c.query_drop(format!("DELETE FROM t_order WHERE order_id = {id}"))
                .await
                .unwrap_or_else(|e| panic!("{ctx}: delete: {e}"));
            assert_eq!(c.affected_rows(), 1, "{ctx}: delete");
            mine.get_mut(&id).unwrap().status = None;
        }
        // A seeded order read, compared with the reference.
        let ch = &s.channels[name];
        let seeded = if legacy {
            ch.legacy_ids[step % ch.legacy_ids.len()]
        } else {
            ch.new_format_ids[step % ch.new_format_ids.len()]
        };
        let sql = format!("SELECT * FROM t_order WHERE order_id = {seeded}");
        let got = try_rows(&mut c, &sql)
            .await
            .unwrap_or_else(|e| panic!("{ctx}: {sql}: {e}"));
        assert_same_rows(&got, &rows(&mut r, &sql).await, &format!("{ctx}: {sql}"));
    }
    c.disconnect().await.unwrap();
    mine
}

/// For every id: the shards whose `t_order` holds it (with its status) and the shards
/// whose `t_order_item` holds it, read directly with one query per table.
async fn locate(ids: &[u64]) -> (HashMap<u64, Vec<(u32, String)>>, HashMap<u64, Vec<u32>>) {
    let list = ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let mut orders: HashMap<u64, Vec<(u32, String)>> = HashMap::new();
    let mut items: HashMap<u64, Vec<u32>> = HashMap::new();
    for shard in 0..20u32 {
        let (ds, t, ti) = physical(shard);
        let mut conn = backend(ds).await;
        let found: Vec<(u64, String)> = conn
            .query(format!(
                "SELECT order_id, status FROM {t} WHERE order_id IN ({list})"
            ))
            .await
            .unwrap();
        for (id, status) in found {
            orders.entry(id).or_default().push((shard, status));
        }
        let found: Vec<u64> = conn
            .query(format!(
                "SELECT DISTINCT order_id FROM {ti} WHERE order_id IN ({list})"
            ))
            .await
            .unwrap();
        for id in found {
            items.entry(id).or_default().push(shard);
        }
    }
    (orders, items)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_clients_mixing_reads_and_writes_leave_every_row_on_its_shard() {
    let h = Harness::start().await;
    let guard = std::sync::Arc::new(Cleanup::default());
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|client| tokio::spawn(one_client(h.opts(), client, guard.clone())))
        .collect();
    let mut all: HashMap<u64, Expected> = HashMap::new();
    let mut failures = Vec::new();
    for t in tasks {
        match t.await {
            Ok(mine) => all.extend(mine),
            Err(e) => failures.push(e.to_string()),
        }
    }
    let ids: Vec<u64> = all.keys().copied().collect();
    assert!(failures.is_empty(), "clients failed: {failures:#?}");
    assert!(
        all.len() >= CLIENTS * 5,
        "only {} orders written",
        all.len()
    );

    let (orders, items) = locate(&ids).await;
    let mut index = backend(0).await;
    let list = ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let indexed: HashMap<u64, String> = index
        .query::<(u64, String), _>(format!(
            "SELECT order_id, channel FROM order_meta.t_order_index WHERE order_id IN ({list})"
        ))
        .await
        .unwrap()
        .into_iter()
        .collect();
    for (id, want) in &all {
        let shard = expected_shard(want.channel, *id);
        let got_orders = orders.get(id).cloned().unwrap_or_default();
        let got_items = items.get(id).cloned().unwrap_or_default();
        match &want.status {
            Some(status) => {
                assert_eq!(got_orders, [(shard, status.clone())], "{want:?} {id}");
                assert_eq!(got_items, [shard], "{want:?} {id}: items");
            }
            None => {
                assert!(
                    got_orders.is_empty() && got_items.is_empty(),
                    "{want:?} {id} deleted: {got_orders:?}"
                );
            }
        }
        if want.legacy {
            assert_eq!(
                indexed.get(id).map(String::as_str),
                Some(want.channel),
                "index row of {id}"
            );
        } else {
            assert_eq!(indexed.get(id), None, "new-format {id} got an index row");
        }
    }
    h.stop().await;
}
