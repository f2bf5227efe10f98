//! The proxy serves a client end to end: a decoded read, a legacy read through the index,
//! and an insert placed on the right physical shard.

mod common;

use common::*;
use mysql_async::prelude::*;

#[tokio::test]
async fn reads_and_writes_reach_the_right_shard() {
    let h = Harness::start().await;
    let seed = seed();
    let mut c = h.client().await;
    let eu = &seed.channels["EU_CHANNEL"];
    let id = eu.new_format_ids[0];
    let got: Option<(u64, String)> = c
        .query_first(format!(
            "SELECT order_id, channel FROM t_order WHERE order_id = {id}"
        ))
        .await
        .unwrap();
    assert_eq!(got, Some((id, "EU_CHANNEL".to_owned())));
    let legacy = eu.legacy_ids[0];
    let got: Option<u64> = c
        .query_first(format!(
            "SELECT order_id FROM t_order WHERE order_id = '{legacy}'"
        ))
        .await
        .unwrap();
    assert_eq!(got, Some(legacy));

    let new = fresh_new_id(1); // CN_CHANNEL, shards 8-11 over both servers
    c.query_drop(format!(
        "INSERT INTO t_order (order_id, channel, region, user_id, amount, status, created_at) VALUES ({new}, 'CN_CHANNEL', 'CN', 1, 1.00, 'CREATED', NOW(3))"
    ))
    .await
    .unwrap();
    assert_eq!(shards_holding(new).await, [8 + (new % 4) as u32]);
    c.query_drop(format!("DELETE FROM t_order WHERE order_id = {new}"))
        .await
        .unwrap();
    assert!(shards_holding(new).await.is_empty());
    drop(c);
    h.stop().await;
}
