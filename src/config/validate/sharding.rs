//! `[sharding]`: the binding tables, the shard map, and how statements without a single
//! order id run (scatter, probe, merge limits).

use std::collections::BTreeMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use super::super::raw::RawSharding;
use super::checker::{Checker, DatasourceLookup};
use crate::config::model::*;

/// Checks `[sharding]` against the channels and datasources.
pub(super) fn sharding(
    c: &Checker,
    raw: &RawSharding,
    channels: &[Channel],
    raw_channels: &[crate::config::raw::RawChannel],
    lookup_ds: &DatasourceLookup<'_>,
) -> Result<Sharding, ConfigError> {
    let per_channel = *raw.shards_per_channel.get_ref();
    if per_channel == 0 {
        return Err(c.at(
            &raw.shards_per_channel,
            "sharding.shards_per_channel: must be at least 1",
        ));
    }
    let tables = binding_tables(c, raw)?;
    let channel_of = channel_ranges(c, channels, raw_channels, per_channel)?;
    let shard_count = channel_of.keys().next_back().map_or(0, |s| s + 1);
    let owner = shard_owners(c, raw, shard_count, lookup_ds)?;
    let shards = shard_list(c, raw, channels, raw_channels, &channel_of, &owner, &tables)?;
    check_patterns(c, raw, shard_count, tables.len())?;
    let default_datasource = lookup_ds(&raw.default_datasource, "sharding.default_datasource")?;
    let merge_row_cap = *raw.merge_row_cap.get_ref();
    if merge_row_cap == 0 {
        return Err(c.at(
            &raw.merge_row_cap,
            "sharding.merge_row_cap: must be at least 1",
        ));
    }
    let max_fan_out = max_fan_out(c, raw, &shards)?;
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
        map_version: 0,
        unresolved_reads: raw.unresolved_reads,
        merge_row_cap,
        max_fan_out,
        combine_shards: raw.combine_shards,
    })
}

/// The binding tables, lower-cased: 1 to 255 of them, none twice.
fn binding_tables(c: &Checker, raw: &RawSharding) -> Result<Vec<String>, ConfigError> {
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
    Ok(tables)
}

/// The channel (index) of each shard a channel's range covers; ranges must not overlap.
/// Errors point at the channel's base_shard.
fn channel_ranges(
    c: &Checker,
    channels: &[Channel],
    raw_channels: &[crate::config::raw::RawChannel],
    per_channel: u32,
) -> Result<BTreeMap<u32, usize>, ConfigError> {
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
    Ok(used)
}

/// The datasource of each shard from `[[sharding.shards]]` ranges: no overlap, no shard
/// outside the channels' ranges.
fn shard_owners(
    c: &Checker,
    raw: &RawSharding,
    shard_count: u32,
    lookup_ds: &DatasourceLookup<'_>,
) -> Result<Vec<Option<DatasourceId>>, ConfigError> {
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
    Ok(owner)
}

/// Every shard with its datasource and physical names; every channel's shard must be
/// mapped (a gap between channels is never routed to).
fn shard_list(
    c: &Checker,
    raw: &RawSharding,
    channels: &[Channel],
    raw_channels: &[crate::config::raw::RawChannel],
    channel_of: &BTreeMap<u32, usize>,
    owner: &[Option<DatasourceId>],
    tables: &[String],
) -> Result<Vec<Shard>, ConfigError> {
    let mut shards = Vec::with_capacity(owner.len());
    for (shard, ds) in owner.iter().enumerate() {
        let shard = shard as u32;
        let ds = match (ds, channel_of.get(&shard)) {
            (Some(ds), _) => *ds,
            (None, Some(&i)) => {
                return Err(c.at(
                    &raw_channels[i].base_shard,
                    format!(
                        "sharding.shards: shard {shard} of {} is not mapped to a datasource",
                        channels[i].name
                    ),
                ));
            }
            (None, None) => DatasourceId(u16::MAX),
        };
        let database = expand(raw.physical_database.get_ref(), "", shard);
        let physical: Vec<String> = tables
            .iter()
            .map(|t| expand(raw.physical_table.get_ref(), t, shard))
            .collect();
        let names = crate::config::model::ResultNames {
            physical_database: database.clone(),
            logical_database: raw.logical_database.clone(),
            tables: physical
                .iter()
                .cloned()
                .zip(tables.iter().cloned())
                .collect(),
        };
        shards.push(Shard {
            datasource: ds,
            database,
            tables: physical,
            names: std::sync::Arc::new(names),
        });
    }
    Ok(shards)
}

/// The physical name patterns tell shards and tables apart.
fn check_patterns(
    c: &Checker,
    raw: &RawSharding,
    shard_count: u32,
    table_count: usize,
) -> Result<(), ConfigError> {
    let pattern_has_shard = raw.physical_database.get_ref().contains("{shard}")
        || raw.physical_table.get_ref().contains("{shard}");
    if !pattern_has_shard && shard_count > 1 {
        return Err(c.at(
            &raw.physical_table,
            "sharding.physical_table: `{shard}` must appear in physical_database or physical_table",
        ));
    }
    if !raw.physical_table.get_ref().contains("{table}") && table_count > 1 {
        return Err(c.at(
            &raw.physical_table,
            "sharding.physical_table: `{table}` must appear with more than one binding table",
        ));
    }
    Ok(())
}

/// `sharding.max_fan_out`: at least one connection to each datasource holding shards.
fn max_fan_out(
    c: &Checker,
    raw: &RawSharding,
    shards: &[Shard],
) -> Result<Option<u32>, ConfigError> {
    let Some(n) = &raw.max_fan_out else {
        return Ok(None);
    };
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
    Ok(Some(*n.get_ref()))
}

/// `{table}` and `{shard}` substituted.
fn expand(pattern: &str, table: &str, shard: u32) -> String {
    pattern
        .replace("{table}", table)
        .replace("{shard}", &shard.to_string())
}
