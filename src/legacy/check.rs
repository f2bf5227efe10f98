//! The routing rules applied to one order id's sightings (pure; no I/O).
//!
//! The rules are the router's own (SPEC §3-4): an id that decodes (route key assigned, its
//! timestamp inside the channel's window) belongs on `shard_of(decoded channel, id)` with that
//! channel in its `channel` column; any other id is found only through the index table, so
//! its index row must name the row's channel and that channel must route to the shard
//! holding it. Each fault yields one finding, so a planted fault is reported once.

use serde::Serialize;

use super::Scope;
use super::scan::{OrderRow, Sightings};
use crate::config::{ChannelId, Config};
use crate::id::RouteKeyDecoder;

/// What is wrong with an order id (the `kind` of a report line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// A legacy row without an index row: the proxy cannot find it by its id.
    MissingIndex,
    /// An index row whose order no shard holds (a failed insert, data moved by hand).
    DanglingIndex,
    /// An index row naming another channel than the row's `channel` column (or no channel
    /// the configuration knows).
    IndexConflict,
    /// A row on another shard than its id routes to.
    WrongShard,
    /// A decoded id whose `channel` column names another channel.
    ChannelMismatch,
    /// An order id with rows on more than one shard.
    Duplicate,
    /// A binding-table row on another shard than its order.
    ItemMisplaced,
    /// A binding-table row whose order exists nowhere.
    OrphanItem,
}

impl FindingKind {
    /// Every kind, in report order.
    pub const ALL: [FindingKind; 8] = [
        Self::MissingIndex,
        Self::DanglingIndex,
        Self::IndexConflict,
        Self::WrongShard,
        Self::ChannelMismatch,
        Self::Duplicate,
        Self::ItemMisplaced,
        Self::OrphanItem,
    ];

    /// The name used in reports (`missing_index`, ...).
    pub fn label(self) -> &'static str {
        match self {
            Self::MissingIndex => "missing_index",
            Self::DanglingIndex => "dangling_index",
            Self::IndexConflict => "index_conflict",
            Self::WrongShard => "wrong_shard",
            Self::ChannelMismatch => "channel_mismatch",
            Self::Duplicate => "duplicate",
            Self::ItemMisplaced => "item_misplaced",
            Self::OrphanItem => "orphan_item",
        }
    }

    /// What repairs it: `index backfill` for the first two kinds (when their detail says
    /// so), a person for the rest.
    pub fn repair(self) -> &'static str {
        match self {
            Self::MissingIndex => "index backfill (when the row's channel matches its shard)",
            Self::DanglingIndex => "index backfill --prune-dangling (once older than --min-age)",
            _ => "a person: move, fix or delete the rows by hand",
        }
    }
}

/// One thing wrong with one order id, on one table and shard (a report line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// What is wrong.
    pub kind: FindingKind,
    /// The logical table (or the index table, `database.table`).
    pub table: String,
    /// The shard holding the row in question; for a dangling index row, the shard its
    /// channel routes to (`None` when it names no known channel).
    pub shard: Option<u32>,
    /// The order id; a JSON string in reports (ids above 2^53 do not survive a JSON
    /// number in many readers).
    #[serde(serialize_with = "as_decimal_string")]
    pub order_id: u64,
    /// Why, in words: the channels and shards involved.
    pub detail: String,
}

impl Finding {
    /// Whether `other` is the same fault (detail aside: an age moves on).
    pub fn same_fault(&self, other: &Finding) -> bool {
        (self.kind, &self.table, self.shard, self.order_id)
            == (other.kind, &other.table, other.shard, other.order_id)
    }
}

/// What `index backfill` may do for one order id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repair {
    /// Nothing to do.
    None,
    /// Write the index row `order_id -> channel`.
    WriteIndex(ChannelId),
    /// Delete the index row: no shard holds the order.
    PruneIndex,
    /// A missing index row a machine must not write (the finding says why).
    NeedsPerson(Finding),
}

/// The rules of one configuration at one moment.
pub struct Checker<'a> {
    config: &'a Config,
    decoder: RouteKeyDecoder,
    /// A fixed "now" (tests), or `None`: the clock, read at each decode.
    now_unix_ms: Option<u64>,
}

/// How an id is routed, if it is.
#[derive(Debug, Clone, Copy)]
enum Route {
    Decoded(ChannelId),
    Indexed(ChannelId),
    Unknown,
}

impl<'a> Checker<'a> {
    /// The rules of `config` at a fixed moment: `now_unix_ms` bounds the decode window as
    /// the router's clock does.
    pub fn new(config: &'a Config, now_unix_ms: u64) -> Self {
        Self {
            config,
            decoder: config.route_key_decoder(),
            now_unix_ms: Some(now_unix_ms),
        }
    }

    /// The rules of `config` with the clock read at each decode, as the router does: an id
    /// issued while a run goes on decodes.
    pub fn live(config: &'a Config) -> Self {
        Self {
            config,
            decoder: config.route_key_decoder(),
            now_unix_ms: None,
        }
    }

    fn decodes(&self, id: u64) -> Option<ChannelId> {
        let now = self.now_unix_ms.unwrap_or_else(now_unix_ms);
        self.decoder.decode(id, now).ok()
    }

    fn route(&self, s: &Sightings) -> Route {
        if let Some(ch) = self.decodes(s.order_id) {
            return Route::Decoded(ch);
        }
        match s.index.as_ref().and_then(|i| i.channel.as_deref()) {
            Some(name) => self
                .config
                .channel_by_name(name)
                .map_or(Route::Unknown, Route::Indexed),
            None => Route::Unknown,
        }
    }

    fn routed_shard(&self, route: Route, id: u64) -> Option<u32> {
        match route {
            Route::Decoded(ch) | Route::Indexed(ch) => Some(self.config.shard_of(ch, id)),
            Route::Unknown => None,
        }
    }

    fn name(&self, ch: ChannelId) -> &str {
        &self.config.channel(ch).name
    }

    fn finding(&self, kind: FindingKind, table: usize, shard: Option<u32>, id: u64) -> Finding {
        Finding {
            kind,
            table: self.config.sharding.binding_tables[table].clone(),
            shard,
            order_id: id,
            detail: String::new(),
        }
    }

    fn index_table(&self) -> String {
        format!("{}.{}", self.config.index.database, self.config.index.table)
    }

    /// Everything wrong with one id, as far as the shards in `scope` show it.
    pub fn check(&self, s: &Sightings, scope: &Scope) -> Vec<Finding> {
        let route = self.route(s);
        let mut out = match s.orders.as_slice() {
            // An index row beside items whose order is gone still finds those items: the
            // items are the finding (orphans), not the index row.
            [] if !s.items.is_empty() => Vec::new(),
            [] => self.dangling(s, route, scope).into_iter().collect(),
            [row] => self.order_row(s, row, route),
            rows => vec![self.duplicate(s, rows, route)],
        };
        for item in &s.items {
            let kind = if s.orders.is_empty() {
                FindingKind::OrphanItem
            } else if s.orders.iter().all(|o| o.shard != item.shard) {
                FindingKind::ItemMisplaced
            } else {
                continue;
            };
            let mut f = self.finding(kind, item.table, Some(item.shard), s.order_id);
            f.detail = match kind {
                FindingKind::OrphanItem => format!(
                    "rows on shard {} belong to an order no shard holds",
                    item.shard
                ),
                _ => format!(
                    "rows on shard {}, their order is on shard {}",
                    item.shard,
                    shard_list(&s.orders)
                ),
            };
            out.push(f);
        }
        out
    }

    fn order_row(&self, s: &Sightings, row: &OrderRow, route: Route) -> Vec<Finding> {
        let id = s.order_id;
        let column = row.channel.as_deref().unwrap_or("NULL");
        let mut out = Vec::new();
        let index = s.index.as_ref();
        match (route, index) {
            (Route::Decoded(ch), _) => {
                if self.config.channel_by_name(column) != Some(ch) {
                    let mut f = self.finding(FindingKind::ChannelMismatch, 0, Some(row.shard), id);
                    f.detail = format!(
                        "its id carries {}, its channel column says {column}",
                        self.name(ch)
                    );
                    out.push(f);
                }
                // The router never reads it, but an index row must not contradict its order.
                if let Some(ix) = index
                    && !same_channel(self.config, ix.channel.as_deref(), Some(column))
                {
                    out.push(self.index_conflict(id, row, ix.channel.as_deref()));
                }
            }
            (_, None) => return vec![self.missing_index(id, row)],
            (Route::Unknown, Some(ix)) => {
                return vec![self.index_conflict(id, row, ix.channel.as_deref())];
            }
            (Route::Indexed(_), Some(ix)) => {
                if !same_channel(self.config, ix.channel.as_deref(), Some(column)) {
                    return vec![self.index_conflict(id, row, ix.channel.as_deref())];
                }
            }
        }
        if let Some(want) = self.routed_shard(route, id)
            && want != row.shard
        {
            let mut f = self.finding(FindingKind::WrongShard, 0, Some(row.shard), id);
            let by = match route {
                Route::Decoded(_) => "its id",
                _ => "its index row",
            };
            f.detail = format!("on shard {}, {by} routes it to shard {want}", row.shard);
            out.push(f);
        }
        out
    }

    fn missing_index(&self, id: u64, row: &OrderRow) -> Finding {
        let mut f = self.finding(FindingKind::MissingIndex, 0, Some(row.shard), id);
        f.detail = match self.backfill_channel(id, row) {
            Ok(ch) => format!(
                "legacy id without index row; backfill can write {}",
                self.name(ch)
            ),
            Err(why) => format!("legacy id without index row; not backfillable: {why}"),
        };
        f
    }

    fn index_conflict(&self, id: u64, row: &OrderRow, indexed: Option<&str>) -> Finding {
        let mut f = self.finding(FindingKind::IndexConflict, 0, Some(row.shard), id);
        f.detail = format!(
            "the index names {}, the row on shard {} says {}",
            indexed.unwrap_or("NULL"),
            row.shard,
            row.channel.as_deref().unwrap_or("NULL")
        );
        f
    }

    fn duplicate(&self, s: &Sightings, rows: &[OrderRow], route: Route) -> Finding {
        let want = self.routed_shard(route, s.order_id);
        let extra = rows
            .iter()
            .map(|r| r.shard)
            .find(|shard| Some(*shard) != want);
        let mut f = self.finding(FindingKind::Duplicate, 0, extra, s.order_id);
        f.detail = format!(
            "rows on shards {}; its route is {}",
            shard_list(rows),
            want.map_or_else(|| "unknown".to_owned(), |w| format!("shard {w}"))
        );
        f
    }

    fn dangling(&self, s: &Sightings, route: Route, scope: &Scope) -> Option<Finding> {
        let ix = s.index.as_ref()?;
        let shard = self.routed_shard(route, s.order_id);
        let in_scope = match shard {
            Some(n) => scope.contains(n),
            None => scope.is_everything(self.config),
        };
        if !in_scope {
            return None;
        }
        let age = ix.age.map_or_else(
            || "age unknown (no index.created_at_column)".to_owned(),
            |a| format!("written {} ago", humantime::format_duration(round_secs(a))),
        );
        Some(Finding {
            kind: FindingKind::DanglingIndex,
            table: self.index_table(),
            shard,
            order_id: s.order_id,
            detail: format!(
                "index row names {}, no shard holds the order; {age}",
                ix.channel.as_deref().unwrap_or("NULL")
            ),
        })
    }

    /// The channel `index backfill` may write for a legacy row without index row: its own
    /// `channel` column, only when that channel's shard for the id is the one holding it.
    ///
    /// # Errors
    /// Why a person must decide instead (unknown channel, row on another channel's shard).
    pub fn backfill_channel(&self, id: u64, row: &OrderRow) -> Result<ChannelId, String> {
        let column = row.channel.as_deref().unwrap_or("NULL");
        let Some(ch) = self.config.channel_by_name(column) else {
            return Err(format!("its channel column names no channel ({column})"));
        };
        let want = self.config.shard_of(ch, id);
        if want != row.shard {
            return Err(format!(
                "its channel column says {}, which routes it to shard {want}, but it is on shard {}",
                self.name(ch),
                row.shard
            ));
        }
        Ok(ch)
    }

    /// What `index backfill` may do for one id's sightings. Only a view of every shard
    /// decides a write or a prune; a narrowed scan's view only proposes one.
    pub fn repair(&self, s: &Sightings) -> Repair {
        let decodes = self.decodes(s.order_id).is_some();
        match (s.orders.as_slice(), &s.index) {
            ([], Some(_)) if s.items.is_empty() => Repair::PruneIndex,
            // The index row still finds the orphan items: kept, and reported.
            ([], Some(_)) => match self
                .check(s, &Scope::everything(self.config))
                .into_iter()
                .next()
            {
                Some(orphan) => Repair::NeedsPerson(orphan),
                None => Repair::None,
            },
            ([row], None) if !decodes => match self.backfill_channel(s.order_id, row) {
                Ok(ch) => Repair::WriteIndex(ch),
                Err(_) => Repair::NeedsPerson(self.missing_index(s.order_id, row)),
            },
            ([_, _, ..], _) => {
                let route = self.route(s);
                Repair::NeedsPerson(self.duplicate(s, &s.orders, route))
            }
            _ => Repair::None,
        }
    }
}

fn as_decimal_string<S: serde::Serializer>(id: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(id)
}

/// The current time in Unix milliseconds (the decode window's "now").
pub(crate) fn now_unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn same_channel(config: &Config, a: Option<&str>, b: Option<&str>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => match (config.channel_by_name(a), config.channel_by_name(b)) {
            (Some(x), Some(y)) => x == y,
            _ => a.eq_ignore_ascii_case(b),
        },
        _ => false,
    }
}

fn shard_list(rows: &[OrderRow]) -> String {
    rows.iter()
        .map(|r| r.shard.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn round_secs(d: std::time::Duration) -> std::time::Duration {
    std::time::Duration::from_secs(d.as_secs())
}

#[cfg(test)]
mod tests;
