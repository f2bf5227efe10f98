//! Writes to a client that reads slowly or not at all (`server.client_write_timeout`,
//! MariaDB's `net_write_timeout`): a client that stopped reading its result gives the
//! statement's backend connections back after the timeout, a slow one that keeps reading is
//! served to the end.

mod common;

use std::time::Duration;

use common::*;
use mysql_async::prelude::*;

/// A scatter whose result (about 30 MB) is far more than the sockets buffer.
const LARGE_RESULT: &str = "SELECT o.*, REPEAT('x', 20000) AS pad FROM t_order o";

fn pools_of_one(write_timeout: Duration) -> routekey_proxy::config::Config {
    let mut config = config();
    for ds in &mut config.datasources {
        ds.pool_size = 1;
    }
    config.server.client_write_timeout = write_timeout;
    config
}

/// A client that sends [`LARGE_RESULT`] and reads none of it for `pause`.
async fn stalled_client(h: &Harness, pause: Duration) -> RawClient {
    let mut stalled = RawClient::connect(h.addr).await;
    stalled.send_query(LARGE_RESULT).await;
    tokio::time::sleep(pause).await;
    stalled
}

/// The stalled session holds every datasource's only pooled connection until its writes
/// time out; then it is disconnected and another session's scatter gets them within its
/// checkout timeout. Before the write timeout, the stalled statement held them until
/// `query_timeout` (10 minutes) and the other session failed with 1429.
#[tokio::test]
async fn a_client_that_stops_reading_gives_its_connections_back_after_the_write_timeout() {
    let h = Harness::start_with(pools_of_one(Duration::from_secs(1))).await;
    // Let the stalled statement take the connections and fill the sockets.
    let mut stalled = stalled_client(&h, Duration::from_millis(500)).await;
    let mut other = h.client().await;
    let count: Option<u64> = other
        .query_first("SELECT COUNT(*) FROM t_order")
        .await
        .expect("the other session's scatter got the connections");
    assert!(count.unwrap_or(0) > 0);
    // The stalled client was disconnected: what it did not read, then the close.
    assert!(
        stalled
            .read_to_close(Duration::from_secs(10))
            .await
            .is_some(),
        "the proxy closed the stalled client's connection"
    );
    drop(other);
    h.stop().await;
}

/// A client that reads its result slowly (one 60 KB row every 10 ms, about 3 seconds for
/// the whole result, three times the write timeout, while the proxy waits on the socket
/// between reads) gets every row and its session goes on.
#[tokio::test]
async fn a_slow_client_that_keeps_reading_is_served_to_the_end() {
    let h = Harness::start_with(pools_of_one(Duration::from_secs(1))).await;
    let mut slow = RawClient::connect(h.addr).await;
    slow.send_query("SELECT o.order_id, REPEAT('x', 60000) AS pad FROM t_order o LIMIT 300")
        .await;
    let (mut eofs, mut rows) = (0, 0);
    let mut packets = 0;
    while eofs < 2 {
        let (_, payload) = read_packet(slow.socket()).await;
        assert!(!matches!(payload[..], [0xff, ..]), "an error: {payload:?}");
        packets += 1;
        if matches!(payload[..], [0xfe, ..]) && payload.len() < 9 {
            eofs += 1;
        } else if eofs == 1 {
            rows += 1;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    assert_eq!(rows, 300, "{packets} packets");
    match slow.query("SELECT 1").await {
        RawReply::Rows(first, _) => assert_eq!(first, [Some("1".to_owned())]),
        other => panic!("the session goes on: {other:?}"),
    }
    h.stop().await;
}

/// The sequence ids of the packets in `bytes`, the last one possibly cut off: each packet
/// of the result is under 64 KiB, so a longer one means bytes out of place (written twice).
fn sequence_ids(bytes: &[u8]) -> Vec<u8> {
    let mut ids = Vec::new();
    let mut pos = 0;
    while pos + 4 <= bytes.len() {
        let len = usize::from(bytes[pos])
            | usize::from(bytes[pos + 1]) << 8
            | usize::from(bytes[pos + 2]) << 16;
        assert!(
            len < 1 << 16,
            "a packet of {len} bytes after {} packets",
            ids.len()
        );
        ids.push(bytes[pos + 3]);
        pos += 4 + len;
    }
    ids
}

/// A client that starts reading again after the write timeout ran out gets what the proxy
/// wrote before it gave up, then the close: never the same bytes again. Before the fix the
/// session flushed its write buffer a second time from its start (and waited a second
/// timeout, holding its connections): the packet sequence started over mid-stream.
#[tokio::test]
async fn a_client_past_the_write_timeout_is_closed_without_repeated_bytes() {
    let h = Harness::start_with(pools_of_one(Duration::from_secs(1))).await;
    let mut late = stalled_client(&h, Duration::from_millis(1500)).await;
    let bytes = late
        .read_to_close(Duration::from_secs(10))
        .await
        .expect("the proxy closed the connection");
    let ids = sequence_ids(&bytes);
    assert!(
        ids.len() > 10,
        "some of the result arrived: {} packets",
        ids.len()
    );
    // Their sequence ids run on one by one from 1 (the reply to a COM_QUERY).
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(*id, (i + 1) as u8, "packet {i} of {}", ids.len());
    }
    h.stop().await;
}

/// `KILL` of a session whose client stopped reading ends it at once, also with the write
/// timeout off, and another session gets the connections it held. Before, the kill waited
/// for the write (without a timeout, as long as the client kept its socket open).
#[tokio::test]
async fn kill_ends_a_session_whose_client_stopped_reading() {
    let h = Harness::start_with(pools_of_one(Duration::ZERO)).await;
    let mut stalled = RawClient::connect(h.addr).await;
    let id = match stalled.query("SELECT CONNECTION_ID()").await {
        RawReply::Rows(first, _) => first[0].clone().expect("an id"),
        other => panic!("{other:?}"),
    };
    stalled.send_query(LARGE_RESULT).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut killer = RawClient::connect(h.addr).await;
    assert!(
        matches!(killer.query(&format!("KILL {id}")).await, RawReply::Ok(_)),
        "KILL answered OK"
    );
    match killer.query("SELECT COUNT(*) FROM t_order").await {
        RawReply::Rows(first, _) => assert_ne!(first[0].as_deref(), Some("0")),
        other => panic!("the stalled session's connections were given back: {other:?}"),
    }
    assert!(
        stalled
            .read_to_close(Duration::from_secs(10))
            .await
            .is_some(),
        "the killed session's connection was closed"
    );
    h.stop().await;
}
