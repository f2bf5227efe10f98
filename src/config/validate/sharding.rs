//! `[sharding]`: the binding tables, the shard map, and how statements without a single
//! order id run (scatter, probe, merge limits).

use std::collections::BTreeMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use super::super::raw::RawSharding;
use super::{Checker, DatasourceLookup};
use crate::config::*;

/// Checks `[sharding]` against the channels and datasources.
pub(super) fn sharding(
    c: &Checker,
    raw: &RawSharding,
    channels: &[Channel],
    raw_channels: &[super::raw::RawChannel],
    lookup_ds: &DatasourceLookup<'_>,
) -> Result<Sharding, ConfigError> {
    let per_channel = *raw.shards_per_channel.get_ref();
    if per_channel == 0 {
        return Err(c.at(
            &raw.shards_per_channel,
            "sharding.shards_per_channel: must be at least 1",
        ));
    }
    let tables: Vec<String> = raw
        .binding_tables
        .get_ref()
        .iter()
        .map(|t| t.to_ascii_lowercase())
        .collect();
    if tables.is_empty() || tables.len() > 255 {
        return Err(c.at(
            &raw.binding_tables,
            "sharding.binding_tables: between 1 and 255 tables",
        ));
    }
    for (i, t) in tables.iter().enumerate() {
        if tables[..i].contains(t) {
            return Err(c.at(
                &raw.binding_tables,
                format!("sharding.binding_tables: `{t}` listed twice"),
            ));
        }
    }

    // Channel ranges must not overlap. Errors point at the channel's base_shard.
    let mut used: BTreeMap<u32, usize> = BTreeMap::new();
    for (i, ch) in channels.iter().enumerate() {
        let base = &raw_channels[i].base_shard;
        let end = ch.base_shard.checked_add(per_channel).ok_or_else(|| {
            c.at(
                base,
                format!("channels[{i}].base_shard: {} is too large", ch.base_shard),
            )
        })?;
        for shard in ch.base_shard..end {
            if let Some(other) = used.insert(shard, i) {
                return Err(c.at(
                    base,
                    format!(
                        "channels[{i}].base_shard: shard {shard} belongs to both {} and {} (base_shard + shards_per_channel ranges overlap)",
                        channels[other].name, ch.name
                    ),
                ));
            }
        }
    }
    let shard_count = used.keys().next_back().map_or(0, |s| s + 1);

    // Shard ranges: no overlap, every channel shard mapped.
    let mut owner: Vec<Option<DatasourceId>> = vec![None; shard_count as usize];
    for (i, range) in raw.shards.iter().enumerate() {
        let key = format!("sharding.shards[{i}]");
        let (first, last) = (*range.first.get_ref(), *range.last.get_ref());
        if first > last {
            return Err(c.at(
                &range.first,
                format!("{key}: first {first} is after last {last}"),
            ));
        }
        let ds = lookup_ds(&range.datasource, &format!("{key}.datasource"))?;
        for shard in first..=last {
            if shard >= shard_count {
                return Err(c.at(
                    &range.last,
                    format!("{key}: shard {shard} belongs to no channel"),
                ));
            }
            let slot = &mut owner[shard as usize];
            if slot.is_some() {
                return Err(c.at(
                    &range.first,
                    format!("{key}: shard {shard} is mapped twice (overlapping ranges)"),
                ));
            }
            *slot = Some(ds);
        }
    }
    let mut shards = Vec::with_capacity(shard_count as usize);
    for (shard, ds) in owner.iter().enumerate() {
        let shard = shard as u32;
        let ds = match ds {
            Some(ds) => *ds,
            None if used.contains_key(&shard) => {
                let i = used[&shard];
                return Err(c.at(
                    &raw_channels[i].base_shard,
                    format!(
                        "sharding.shards: shard {shard} of {} is not mapped to a datasource",
                        channels[i].name
                    ),
                ));
            }
            None => DatasourceId(u16::MAX), // a gap between channels: never routed to
        };
        let database = expand(raw.physical_database.get_ref(), "", shard);
        let physical = tables
            .iter()
            .map(|t| expand(raw.physical_table.get_ref(), t, shard))
            .collect();
        shards.push(Shard {
            datasource: ds,
            database,
            tables: physical,
        });
    }
    let pattern_has_shard = raw.physical_database.get_ref().contains("{shard}")
        || raw.physical_table.get_ref().contains("{shard}");
    if !pattern_has_shard && shard_count > 1 {
        return Err(c.at(
            &raw.physical_table,
            "sharding.physical_table: `{shard}` must appear in physical_database or physical_table",
        ));
    }
    if !raw.physical_table.get_ref().contains("{table}") && tables.len() > 1 {
        return Err(c.at(
            &raw.physical_table,
            "sharding.physical_table: `{table}` must appear with more than one binding table",
        ));
    }
    let default_datasource = lookup_ds(&raw.default_datasource, "sharding.default_datasource")?;

    let merge_row_cap = *raw.merge_row_cap.get_ref();
    if merge_row_cap == 0 {
        return Err(c.at(
            &raw.merge_row_cap,
            "sharding.merge_row_cap: must be at least 1",
        ));
    }
    let max_fan_out = match &raw.max_fan_out {
        None => None,
        Some(n) => {
            let mut holding: Vec<DatasourceId> = shards.iter().map(|s| s.datasource).collect();
            holding.sort();
            holding.dedup();
            if (*n.get_ref() as usize) < holding.len().max(1) {
                return Err(c.at(
                    n,
                    format!(
                        "sharding.max_fan_out: at least the number of datasources holding shards ({}): a statement needs one connection to each",
                        holding.len()
                    ),
                ));
            }
            Some(*n.get_ref())
        }
    };

    let mut hasher = DefaultHasher::new();
    (per_channel, &shards, channels).hash(&mut hasher);
    Ok(Sharding {
        logical_database: raw.logical_database.clone(),
        default_datasource,
        shards_per_channel: per_channel,
        binding_tables: tables,
        shard_key: raw.shard_key.to_ascii_lowercase(),
        channel_column: raw.channel_column.to_ascii_lowercase(),
        region_column: raw.region_column.to_ascii_lowercase(),
        shards,
        shard_map_version: hasher.finish(),
        unresolved_reads: raw.unresolved_reads,
        merge_row_cap,
        max_fan_out,
    })
}

/// `{table}` and `{shard}` substituted.
fn expand(pattern: &str, table: &str, shard: u32) -> String {
    pattern
        .replace("{table}", table)
        .replace("{shard}", &shard.to_string())
}
