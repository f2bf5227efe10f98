use std::time::Duration;

use super::*;
use crate::id::IdFields;
use crate::legacy::scan::{IndexRow, ItemRows};

const NOW: u64 = 1_790_000_000_000; // 2026-09

fn demo() -> Config {
    Config::from_toml(include_str!("../../../config/demo.toml"), "demo.toml").unwrap()
}

/// A new-format id of channel `code` issued at 2026-01 with sequence `seq`.
fn new_id(c: &Config, code: u8, seq: u64) -> u64 {
    c.layout
        .compose(IdFields {
            timestamp: 1_767_225_600_000 - c.layout.epoch_ms(),
            worker: 3,
            route_key: u64::from(code),
            sequence: seq,
        })
        .unwrap()
}

/// A legacy id (2019, before every channel's route key) with sequence `seq`.
fn legacy_id(c: &Config, seq: u64) -> u64 {
    c.layout
        .compose(IdFields {
            timestamp: 1_550_000_000_000 - c.layout.epoch_ms(),
            worker: 7,
            route_key: 5,
            sequence: seq,
        })
        .unwrap()
}

fn order(shard: u32, channel: &str) -> OrderRow {
    OrderRow {
        shard,
        channel: Some(channel.to_owned()),
    }
}

fn index(channel: &str, age_secs: u64) -> Option<IndexRow> {
    Some(IndexRow {
        channel: Some(channel.to_owned()),
        age: Some(Duration::from_secs(age_secs)),
    })
}

fn kinds(c: &Config, s: &Sightings) -> Vec<(FindingKind, Option<u32>)> {
    let all = Scope::new(c, None, &[]).unwrap();
    Checker::new(c, NOW)
        .check(s, &all)
        .into_iter()
        .map(|f| (f.kind, f.shard))
        .collect()
}

fn seen(order_id: u64, orders: Vec<OrderRow>, index: Option<IndexRow>) -> Sightings {
    Sightings {
        order_id,
        orders,
        items: vec![],
        index,
    }
}

#[test]
fn rows_where_the_router_finds_them_are_clean() {
    let c = demo();
    let id = new_id(&c, 5, 4); // EU, 4 mod 4 = 0 -> shard 0
    let home = c.shard_of(ChannelId(0), id);
    assert!(kinds(&c, &seen(id, vec![order(home, "EU_CHANNEL")], None)).is_empty());
    let old = legacy_id(&c, 9);
    let cn = c.channel_by_name("CN_CHANNEL").unwrap();
    let s = seen(
        old,
        vec![order(c.shard_of(cn, old), "CN_CHANNEL")],
        index("CN_CHANNEL", 5),
    );
    assert!(kinds(&c, &s).is_empty());
}

#[test]
fn each_fault_is_one_finding() {
    let c = demo();
    let eu = ChannelId(0);
    let id = new_id(&c, 5, 6);
    let home = c.shard_of(eu, id);
    let away = if home == 0 { 1 } else { 0 };
    // A decoded id on another shard of its channel.
    assert_eq!(
        kinds(&c, &seen(id, vec![order(away, "EU_CHANNEL")], None)),
        vec![(FindingKind::WrongShard, Some(away))]
    );
    // A decoded id whose channel column says another channel, on its own shard.
    assert_eq!(
        kinds(&c, &seen(id, vec![order(home, "CN_CHANNEL")], None)),
        vec![(FindingKind::ChannelMismatch, Some(home))]
    );
    // On two shards: one duplicate, naming the extra shard.
    assert_eq!(
        kinds(
            &c,
            &seen(
                id,
                vec![order(home, "EU_CHANNEL"), order(17, "EU_CHANNEL")],
                None
            )
        ),
        vec![(FindingKind::Duplicate, Some(17))]
    );
    let old = legacy_id(&c, 10);
    let cn = c.channel_by_name("CN_CHANNEL").unwrap();
    let cn_home = c.shard_of(cn, old);
    assert_eq!(
        kinds(&c, &seen(old, vec![order(cn_home, "CN_CHANNEL")], None)),
        vec![(FindingKind::MissingIndex, Some(cn_home))]
    );
    assert_eq!(
        kinds(
            &c,
            &seen(
                old,
                vec![order(cn_home, "CN_CHANNEL")],
                index("EU_CHANNEL", 1)
            )
        ),
        vec![(FindingKind::IndexConflict, Some(cn_home))]
    );
    assert_eq!(
        kinds(
            &c,
            &seen(old, vec![order(cn_home, "CN_CHANNEL")], index("NOPE", 1))
        ),
        vec![(FindingKind::IndexConflict, Some(cn_home))]
    );
    // Index and row agree, but the channel routes the id to another shard.
    assert_eq!(
        kinds(
            &c,
            &seen(old, vec![order(0, "CN_CHANNEL")], index("CN_CHANNEL", 1))
        ),
        vec![(FindingKind::WrongShard, Some(0))]
    );
    assert_eq!(
        kinds(&c, &seen(old, vec![], index("CN_CHANNEL", 1))),
        vec![(FindingKind::DanglingIndex, Some(cn_home))]
    );
}

#[test]
fn items_sit_beside_their_order_or_are_reported() {
    let c = demo();
    let id = new_id(&c, 5, 1);
    let home = c.shard_of(ChannelId(0), id);
    let mut s = seen(id, vec![order(home, "EU_CHANNEL")], None);
    s.items = vec![
        ItemRows {
            table: 1,
            shard: home,
        },
        ItemRows {
            table: 1,
            shard: 12,
        },
    ];
    assert_eq!(kinds(&c, &s), vec![(FindingKind::ItemMisplaced, Some(12))]);
    s.orders.clear();
    s.items.truncate(1);
    assert_eq!(kinds(&c, &s), vec![(FindingKind::OrphanItem, Some(home))]);
}

#[test]
fn a_dangling_index_row_is_judged_only_by_a_scan_of_its_shard() {
    let c = demo();
    let old = legacy_id(&c, 11);
    let s = seen(old, vec![], index("CN_CHANNEL", 1));
    let eu = Scope::new(&c, Some("EU_CHANNEL"), &[]).unwrap();
    let cn = Scope::new(&c, Some("CN_CHANNEL"), &[]).unwrap();
    let checker = Checker::new(&c, NOW);
    assert!(checker.check(&s, &eu).is_empty());
    assert_eq!(checker.check(&s, &cn).len(), 1);
    // An index row naming no known channel is judged only by a scan of every shard.
    let unknown = seen(old, vec![], index("NOPE", 1));
    assert!(checker.check(&unknown, &cn).is_empty());
}

#[test]
fn backfill_writes_only_a_channel_that_matches_the_shard_holding_the_row() {
    let c = demo();
    let checker = Checker::new(&c, NOW);
    let old = legacy_id(&c, 12);
    let cn = c.channel_by_name("CN_CHANNEL").unwrap();
    let home = c.shard_of(cn, old);
    assert_eq!(
        checker.repair(&seen(old, vec![order(home, "CN_CHANNEL")], None)),
        Repair::WriteIndex(cn)
    );
    // The row says CN but sits on an EU shard: a person decides.
    assert!(matches!(
        checker.repair(&seen(old, vec![order(1, "CN_CHANNEL")], None)),
        Repair::NeedsPerson(f) if f.kind == FindingKind::MissingIndex
    ));
    assert_eq!(
        checker.repair(&seen(old, vec![], index("CN_CHANNEL", 9))),
        Repair::PruneIndex
    );
    // A decodable id never needs an index row; a duplicate is left to a person.
    let id = new_id(&c, 5, 2);
    assert_eq!(
        checker.repair(&seen(
            id,
            vec![order(c.shard_of(ChannelId(0), id), "EU_CHANNEL")],
            None
        )),
        Repair::None
    );
    let dup = seen(
        old,
        vec![order(home, "CN_CHANNEL"), order(1, "CN_CHANNEL")],
        None,
    );
    assert!(matches!(
        checker.repair(&dup),
        Repair::NeedsPerson(f) if f.kind == FindingKind::Duplicate
    ));
}

#[test]
fn an_index_row_that_still_finds_orphan_items_is_kept_and_the_items_reported() {
    let c = demo();
    let old = legacy_id(&c, 13);
    let cn = c.channel_by_name("CN_CHANNEL").unwrap();
    let home = c.shard_of(cn, old);
    let mut s = seen(old, vec![], index("CN_CHANNEL", 9000));
    s.items = vec![ItemRows {
        table: 1,
        shard: home,
    }];
    assert_eq!(kinds(&c, &s), vec![(FindingKind::OrphanItem, Some(home))]);
    assert!(matches!(
        Checker::new(&c, NOW).repair(&s),
        Repair::NeedsPerson(f) if f.kind == FindingKind::OrphanItem
    ));
}
