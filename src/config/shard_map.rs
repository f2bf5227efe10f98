//! One version of the shard map: the datasource of every shard, by name, as the shard map
//! table in the meta datasource holds it (docs/operations.md, "Moving shards"). The
//! configuration's `[[sharding.shards]]` are version 1; `shards move` publishes the next
//! ones, and every proxy applies the newest it has read to a copy of its configuration.

use super::{Config, DatasourceId};

/// Where every shard lives in one version of the map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardMap {
    /// The version (1 = the configuration's ranges as first seeded; each move adds one).
    pub version: u64,
    /// The datasource name of each shard, indexed by shard number.
    pub datasources: Vec<String>,
}

impl ShardMap {
    /// The map `config`'s `[[sharding.shards]]` give, as `version`.
    pub fn of_config(config: &Config, version: u64) -> Self {
        Self {
            version,
            datasources: config
                .sharding
                .shards
                .iter()
                .map(|s| config.datasource(s.datasource).name.clone())
                .collect(),
        }
    }

    /// The table's text form: one datasource name per shard, shard 0 first, comma-separated.
    pub fn encode(&self) -> String {
        self.datasources.join(",")
    }

    /// Reads the table's text form.
    ///
    /// # Errors
    /// An empty name.
    pub fn decode(version: u64, text: &str) -> Result<Self, String> {
        let datasources: Vec<String> = text.split(',').map(|n| n.trim().to_owned()).collect();
        if datasources.iter().any(String::is_empty) {
            return Err(format!(
                "shard map version {version}: an empty datasource name in `{text}`"
            ));
        }
        Ok(Self {
            version,
            datasources,
        })
    }

    /// Inclusive shard ranges on one datasource each, in shard order: `(first, last, name)`.
    pub fn ranges(&self) -> Vec<(u32, u32, &str)> {
        let mut out: Vec<(u32, u32, &str)> = Vec::new();
        for (shard, name) in self.datasources.iter().enumerate() {
            let shard = shard as u32;
            match out.last_mut() {
                Some((_, last, n)) if *n == name.as_str() && *last + 1 == shard => *last = shard,
                _ => out.push((shard, shard, name)),
            }
        }
        out
    }

    /// `ranges` written as `0-9 ds0, 10-19 ds1`.
    pub fn describe(&self) -> String {
        self.ranges()
            .iter()
            .map(|(a, b, n)| {
                if a == b {
                    format!("{a} {n}")
                } else {
                    format!("{a}-{b} {n}")
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `config` with this map's datasources in place of its own, and its `map_version`.
    ///
    /// # Errors
    /// The map has another number of shards than the configuration's channels make, names a
    /// datasource the configuration does not define (the new datasource must be in every
    /// proxy's configuration before a move publishes it), or holds shards on more
    /// datasources than `sharding.max_fan_out` allows.
    pub fn apply(&self, config: &Config) -> Result<Config, String> {
        let shards = &config.sharding.shards;
        if self.datasources.len() != shards.len() {
            return Err(format!(
                "shard map version {} has {} shards, the configuration {}",
                self.version,
                self.datasources.len(),
                shards.len()
            ));
        }
        let mut next = config.clone();
        let mut holding: Vec<DatasourceId> = Vec::new();
        for (shard, name) in next.sharding.shards.iter_mut().zip(&self.datasources) {
            let id = config
                .datasources
                .iter()
                .position(|d| d.name == *name)
                .ok_or_else(|| {
                    format!(
                        "shard map version {} names datasource `{name}`, which this proxy's configuration does not define (add it to every proxy before moving shards there)",
                        self.version
                    )
                })?;
            shard.datasource = DatasourceId(id as u16);
            if !holding.contains(&shard.datasource) {
                holding.push(shard.datasource);
            }
        }
        if let Some(n) = config.sharding.max_fan_out
            && (n as usize) < holding.len()
        {
            return Err(format!(
                "shard map version {} puts shards on {} datasources, more than sharding.max_fan_out ({n})",
                self.version,
                holding.len()
            ));
        }
        next.sharding.map_version = self.version;
        Ok(next)
    }
}

/// The shard numbers `first-last` (or one number) names.
///
/// # Errors
/// Not a number or a range of numbers, or a range whose end comes before its start.
pub fn parse_shard_range(text: &str) -> Result<std::ops::RangeInclusive<u32>, String> {
    let bad = || format!("`{text}` is not a shard or a range of shards like 8-11");
    let (a, b) = match text.trim().split_once('-') {
        Some((a, b)) => (a.trim(), b.trim()),
        None => (text.trim(), text.trim()),
    };
    let (a, b): (u32, u32) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
    if b < a {
        return Err(bad());
    }
    Ok(a..=b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        Config::from_toml(
            &std::fs::read_to_string(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/example.toml"),
            )
            .unwrap()
            .replace(
                "[datasources.ds1]",
                "[datasources.ds2]\naddress = \"127.0.0.1:33063\"\nuser = \"root\"\n\n[datasources.ds1]",
            ),
            "example",
        )
        .unwrap()
    }

    #[test]
    fn the_configuration_is_version_one_and_round_trips() {
        let c = config();
        let map = ShardMap::of_config(&c, 1);
        assert_eq!(map.describe(), "0-9 ds0, 10-19 ds1");
        let back = ShardMap::decode(1, &map.encode()).unwrap();
        assert_eq!(back, map);
        let applied = back.apply(&c).unwrap();
        assert_eq!(applied.sharding.map_version, 1);
        assert_eq!(applied.sharding.shards, c.sharding.shards);
    }

    #[test]
    fn a_move_changes_only_the_moved_shards() {
        let c = config();
        let mut map = ShardMap::of_config(&c, 2);
        for s in 12..=15 {
            map.datasources[s] = "ds2".into();
        }
        assert_eq!(map.describe(), "0-9 ds0, 10-11 ds1, 12-15 ds2, 16-19 ds1");
        let applied = map.apply(&c).unwrap();
        let ds2 = DatasourceId(c.datasources.iter().position(|d| d.name == "ds2").unwrap() as u16);
        for (s, shard) in applied.sharding.shards.iter().enumerate() {
            assert_eq!(shard.datasource == ds2, (12..=15).contains(&s), "shard {s}");
            assert_eq!(shard.tables, c.sharding.shards[s].tables);
        }
    }

    #[test]
    fn unknown_datasources_and_other_shard_counts_are_refused() {
        let c = config();
        let mut map = ShardMap::of_config(&c, 2);
        map.datasources[3] = "ds9".into();
        assert!(map.apply(&c).unwrap_err().contains("`ds9`"));
        map.datasources.pop();
        assert!(map.apply(&c).unwrap_err().contains("19 shards"));
        assert!(ShardMap::decode(3, "ds0,,ds1").is_err());
    }

    #[test]
    fn shard_ranges_parse() {
        assert_eq!(parse_shard_range("8-11").unwrap(), 8..=11);
        assert_eq!(parse_shard_range(" 7 ").unwrap(), 7..=7);
        assert!(parse_shard_range("11-8").is_err());
        assert!(parse_shard_range("a-b").is_err());
    }
}
