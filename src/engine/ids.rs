//! Order ids through the MySQL port: `SELECT NEXT_ORDER_ID('GB')` and the DBA's list of
//! callers that ask without a region (SPEC §6).

use mysql_common::constants::{ColumnFlags, ColumnType};

use super::session::Session;
use crate::config::ChannelId;
use crate::error::{ER_UNKNOWN_ERROR, ProxyError};
use crate::issuance::{Caller, IssueFailure};
use crate::protocol::packets::ColumnSpec;
use crate::protocol::status::MoreResults;
use crate::route::value::StatementValues;
use crate::sql::hints::RouteHints;
use crate::sql::{Analysis, Placement};
use crate::wire::client::Client;

/// The result column of `NEXT_ORDER_ID()`: BIGINT UNSIGNED NOT NULL.
pub fn id_column(name: &str) -> ColumnSpec<'_> {
    ColumnSpec {
        name,
        column_type: ColumnType::MYSQL_TYPE_LONGLONG,
        flags: ColumnFlags::NOT_NULL_FLAG
            | ColumnFlags::UNSIGNED_FLAG
            | ColumnFlags::BINARY_FLAG
            | ColumnFlags::NUM_FLAG,
        charset: 63,
        length: 20,
        decimals: 0,
    }
}

/// An issuance failure as the client's error.
pub fn issue_error(e: IssueFailure) -> ProxyError {
    ProxyError::client(ER_UNKNOWN_ERROR, b"HY000", e.to_string())
}

impl Session {
    /// The channel a region code names; `None` for a missing or unknown region (route key 0).
    pub fn channel_of_region(&self, region: Option<&str>) -> Option<ChannelId> {
        region.and_then(|r| self.rt.config.channel_by_region(r))
    }

    /// Issues `count` ids for `channel`, counted against this session's caller identity.
    pub async fn issue_ids(
        &mut self,
        channel: Option<ChannelId>,
        count: usize,
    ) -> Result<Vec<u64>, ProxyError> {
        let program = self.attributes.get("program_name").cloned();
        let caller = Caller {
            user: &self.user,
            program: program.as_deref(),
        };
        self.proxy
            .issuer
            .issue(channel, &caller, count)
            .await
            .map_err(issue_error)
    }

    /// The ids of an INSERT that names no shard key, one per row, each issued for the
    /// channel its row names (channel/region column or hint); empty for other statements.
    /// A row that names no known channel is refused: its order could not be placed.
    pub async fn issue_for_insert(
        &mut self,
        analysis: &Analysis,
        values: &StatementValues<'_>,
        hints: &RouteHints,
    ) -> Result<Vec<u64>, ProxyError> {
        let Placement::Sharded(plan) = &analysis.placement else {
            return Ok(Vec::new());
        };
        if plan.key_insert.is_none() {
            return Ok(Vec::new());
        }
        let channels = crate::plan::insert_channels(&self.rt.router, plan, values, hints)?;
        let config = &self.rt.config;
        let mut wanted: Vec<(ChannelId, usize)> = Vec::new();
        for (row, channel) in channels.iter().enumerate() {
            let Some(channel) = channel else {
                return Err(ProxyError::unroutable(format!(
                    "cannot issue an order id for row {} of this INSERT: it names no known {} or {} (give one, or a /*region='..'*/ hint, or an {} value)",
                    row + 1,
                    config.sharding.channel_column,
                    config.sharding.region_column,
                    config.sharding.shard_key,
                )));
            };
            match wanted.iter_mut().find(|(c, _)| c == channel) {
                Some((_, n)) => *n += 1,
                None => wanted.push((*channel, 1)),
            }
        }
        // One request per channel; each row takes its channel's next id, in row order.
        let mut issued = Vec::with_capacity(wanted.len());
        for (channel, n) in wanted {
            issued.push((channel, self.issue_ids(Some(channel), n).await?.into_iter()));
        }
        Ok(channels
            .iter()
            .map(|c| {
                issued
                    .iter_mut()
                    .find(|(ch, _)| Some(*ch) == *c)
                    .and_then(|(_, ids)| ids.next())
                    .unwrap_or_default()
            })
            .collect())
    }

    /// `SELECT NEXT_ORDER_ID(['region'])`: one BIGINT UNSIGNED row.
    pub async fn next_order_id(
        &mut self,
        client: &mut Client,
        region: Option<&str>,
        column: &str,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        let channel = self.channel_of_region(region);
        let id = self.issue_ids(channel, 1).await?[0];
        self.state.warnings.clear();
        self.state.row_count = -1;
        let status = self.final_status(more);
        client.result_set(
            &[id_column(column)],
            &[vec![Some(id.to_string().into_bytes())]],
            ("", ""),
            status,
        )
    }

    /// A prepared `SELECT NEXT_ORDER_ID(...)` executed: the same row in the binary protocol.
    pub async fn next_order_id_binary(
        &mut self,
        client: &mut Client,
        region: Option<&str>,
        column: &str,
    ) -> Result<(), ProxyError> {
        let channel = self.channel_of_region(region);
        let id = self.issue_ids(channel, 1).await?[0];
        self.state.warnings.clear();
        self.state.row_count = -1;
        let status = self.final_status(MoreResults::None);
        client.binary_result_set(
            &[id_column(column)],
            &[vec![Some(id.to_string().into_bytes())]],
            status,
        )
    }

    /// `SHOW ROUTEKEY CALLERS`: callers that asked for ids without a region, most first
    /// (MySQL user and `program_name`, or `http/` and the User-Agent).
    pub fn show_callers(
        &mut self,
        client: &mut Client,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        let callers = self.proxy.issuer.stats().top_callers(100);
        self.name_count_result(client, ("Caller", 256), "Ids_without_region", callers, more)
    }
}
