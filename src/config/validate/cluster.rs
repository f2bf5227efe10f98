//! Datasources with several servers (issue 26): `members`, and `[topology]`.

use std::time::Duration;

use super::checker::Checker;
use crate::config::model::{ConfigError, ShardMapConfig, TopologySettings, Transactions};
use crate::config::raw::{RawConfig, RawDatasource};

/// A datasource's servers: `address` alone, or `members` (one of the two; each `host:port`,
/// no server twice, at most 64).
pub(super) fn members(
    c: &Checker,
    name: &str,
    ds: &RawDatasource,
) -> Result<Vec<String>, ConfigError> {
    let host_port = |address: &str| {
        address
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok())
    };
    match (&ds.address, &ds.members) {
        (Some(address), None) => {
            if !host_port(address.get_ref()) {
                return Err(c.at(
                    address,
                    format!(
                        "datasources.{name}.address: `{}` is not host:port",
                        address.get_ref()
                    ),
                ));
            }
            Ok(vec![address.get_ref().clone()])
        }
        (None, Some(members)) => {
            let list = members.get_ref();
            if list.is_empty() || list.len() > 64 {
                return Err(c.at(
                    members,
                    format!("datasources.{name}.members: one to 64 servers, host:port each"),
                ));
            }
            for (i, m) in list.iter().enumerate() {
                if !host_port(m) {
                    return Err(c.at(
                        members,
                        format!("datasources.{name}.members: `{m}` is not host:port"),
                    ));
                }
                if list[..i].contains(m) {
                    return Err(c.at(
                        members,
                        format!("datasources.{name}.members: `{m}` is listed twice"),
                    ));
                }
            }
            Ok(list.clone())
        }
        (Some(address), Some(_)) => Err(c.at(
            address,
            format!(
                "datasources.{name}: give `address` (one server) or `members` (a primary and its replicas), not both"
            ),
        )),
        (None, None) => Err(c.err(
            None,
            format!("datasources.{name}: `address` (one server) or `members` (a primary and its replicas) is required"),
        )),
    }
}

/// `[topology]`: every duration positive; a probe's bound no longer than its interval.
pub(super) fn topology(c: &Checker, raw: &RawConfig) -> Result<TopologySettings, ConfigError> {
    let t = &raw.topology;
    for (key, value) in [
        ("probe_interval", t.probe_interval),
        ("probe_timeout", t.probe_timeout),
        ("max_replica_lag", t.max_replica_lag),
    ] {
        if value.is_zero() {
            return Err(c.err(None, format!("topology.{key}: must be more than 0s")));
        }
    }
    Ok(TopologySettings {
        probe_interval: t.probe_interval,
        probe_timeout: t
            .probe_timeout
            .min(t.probe_interval.max(Duration::from_millis(100))),
        failover_wait: t.failover_wait,
        max_replica_lag: t.max_replica_lag,
        causal_wait: t.causal_wait,
    })
}

/// `[transactions]`: positive durations, a retention well beyond the abandon age (a
/// decision must outlive every branch that may still ask for it), names MariaDB accepts.
/// `[shard_map]`: table names of 1 to 64 characters, two different ones; a poll interval and
/// a fence wait above 0.
pub(super) fn shard_map(c: &Checker, raw: &RawConfig) -> Result<ShardMapConfig, ConfigError> {
    let m = &raw.shard_map;
    for (key, value) in [
        ("poll_interval", m.poll_interval),
        ("fence_wait", m.fence_wait),
    ] {
        if value.is_zero() {
            return Err(c.err(None, format!("shard_map.{key}: must be more than 0s")));
        }
    }
    for (key, name) in [("table", &m.table), ("moves_table", &m.moves_table)] {
        if name.is_empty() || name.len() > 64 {
            return Err(c.err(None, format!("shard_map.{key}: 1 to 64 characters")));
        }
    }
    if m.table.eq_ignore_ascii_case(&m.moves_table)
        || m.table.eq_ignore_ascii_case(&raw.index.table)
        || m.moves_table.eq_ignore_ascii_case(&raw.index.table)
    {
        return Err(c.err(
            None,
            "shard_map.table, shard_map.moves_table and index.table must be three different tables",
        ));
    }
    Ok(ShardMapConfig {
        table: m.table.clone(),
        moves_table: m.moves_table.clone(),
        poll_interval: m.poll_interval,
        fence_wait: m.fence_wait,
    })
}

pub(super) fn transactions(c: &Checker, raw: &RawConfig) -> Result<Transactions, ConfigError> {
    let t = &raw.transactions;
    for (key, value) in [
        ("abandon_age", t.abandon_age),
        ("resolve_interval", t.resolve_interval),
    ] {
        if value.is_zero() {
            return Err(c.err(None, format!("transactions.{key}: must be more than 0s")));
        }
    }
    if t.decision_retention < t.abandon_age * 10 {
        return Err(c.err(
            None,
            "transactions.decision_retention: must be at least ten times abandon_age (a decision is kept while a branch may still ask for it)",
        ));
    }
    for (key, name) in [
        ("database", &t.database),
        ("decision_table", &t.decision_table),
    ] {
        if name.is_empty() || name.len() > 64 {
            return Err(c.err(None, format!("transactions.{key}: 1 to 64 characters")));
        }
    }
    Ok(Transactions {
        cross_datasource: t.cross_datasource,
        abandon_age: t.abandon_age,
        resolve_interval: t.resolve_interval,
        decision_retention: t.decision_retention,
        database: t.database.clone(),
        decision_table: t.decision_table.clone(),
    })
}
