//! The proxy's answers about clustered datasources (issue 26): `SHOW ROUTEKEY TOPOLOGY`
//! and `SELECT ROUTEKEY_WRITE_TOKEN()`.

use std::sync::atomic::Ordering;

use super::session::Session;
use super::show::{unsigned_column, varchar};
use crate::error::ProxyError;
use crate::protocol::status::MoreResults;
use crate::wire::client::Client;

impl Session {
    /// `SHOW ROUTEKEY TOPOLOGY`: one row per member of each datasource (a datasource of
    /// one server is one row, `primary`, never probed): role, state, lag in seconds (NULL:
    /// unknown or replication stopped), GTID position, seconds since its last answer, reads
    /// and writes it served, and its last error.
    pub fn show_route_topology(
        &mut self,
        client: &mut Client,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        let charset = self.state.result_charset();
        let columns = [
            varchar("datasource", 64, charset),
            varchar("member", 255, charset),
            varchar("role", 16, charset),
            varchar("state", 16, charset),
            varchar("lag_seconds", 20, charset),
            varchar("gtid_position", 1024, charset),
            varchar("last_probe_age", 20, charset),
            unsigned_column("reads", 20),
            unsigned_column("writes", 20),
            varchar("last_error", 512, charset),
        ];
        let text = |s: &str| Some(s.as_bytes().to_vec());
        let mut rows: Vec<Vec<Option<Vec<u8>>>> = Vec::new();
        for (i, ds) in self.rt.config.datasources.iter().enumerate() {
            let id = crate::config::DatasourceId(i as u16);
            let Some(cluster) = self.rt.topology.cluster(id) else {
                rows.push(vec![
                    text(&ds.name),
                    text(&ds.address),
                    text("primary"),
                    text("unprobed"),
                    None,
                    None,
                    None,
                    Some(b"0".to_vec()),
                    Some(b"0".to_vec()),
                    text(""),
                ]);
                continue;
            };
            let view = cluster.view();
            for (m, (member, seen)) in cluster.members.iter().zip(&view.members).enumerate() {
                let state = if seen.readable {
                    "serving_reads"
                } else if matches!(seen.role, crate::topology::view::Role::Replica) {
                    "no_reads"
                } else if cluster.is_primary(m) {
                    "serving_writes"
                } else {
                    "idle"
                };
                rows.push(vec![
                    text(&ds.name),
                    text(&member.address),
                    text(seen.role.name()),
                    text(state),
                    seen.lag.map(|l| l.as_secs().to_string().into_bytes()),
                    text(&cluster.member_position(m)),
                    seen.answered_at
                        .map(|t| format!("{:.1}", t.elapsed().as_secs_f64()).into_bytes()),
                    Some(
                        member
                            .reads
                            .load(Ordering::Relaxed)
                            .to_string()
                            .into_bytes(),
                    ),
                    Some(
                        member
                            .writes
                            .load(Ordering::Relaxed)
                            .to_string()
                            .into_bytes(),
                    ),
                    text(&seen.error),
                ]);
            }
        }
        client.result_set(&columns, &rows, ("", ""), self.final_status(more))
    }

    /// EXPLAIN ROUTE's `member` for a step on datasource `name` reached with `access`
    /// (`hint`: the statement's `/*read=...*/`): the member a statement of this session
    /// would go to now, and why; `None` for a datasource of one server.
    pub(super) fn member_for(
        &self,
        name: &str,
        access: crate::execute::Access,
        hint: Option<crate::config::Reads>,
    ) -> Option<String> {
        let at = self
            .rt
            .config
            .datasources
            .iter()
            .position(|d| d.name == name)?;
        let ds = crate::config::DatasourceId(at as u16);
        let cluster = self.rt.topology.cluster(ds)?;
        let reads = hint.unwrap_or(self.user_reads.0);
        let primary = || match cluster.primary_now() {
            Some(m) => format!("{} (primary)", cluster.members[m].address),
            None => "no primary known (writes wait for one)".to_owned(),
        };
        if access == crate::execute::Access::Primary || reads == crate::config::Reads::Primary {
            return Some(primary());
        }
        let Some(required) = self
            .txn
            .replica_read(ds, self.user_reads.1, self.state.autocommit)
        else {
            return Some(format!(
                "{} (this session's reads stay on the primary now)",
                primary()
            ));
        };
        Some(match cluster.replica(&required) {
            crate::topology::ReplicaChoice::Ready(m) => {
                format!("{} (replica)", cluster.members[m].address)
            }
            crate::topology::ReplicaChoice::Behind(m) => format!(
                "{} (replica, after waiting up to {:?} for the writes the read must see; else the primary)",
                cluster.members[m].address, cluster.settings.causal_wait
            ),
            crate::topology::ReplicaChoice::None => {
                format!("{} (no replica serves reads now)", primary())
            }
        })
    }

    /// `SELECT ROUTEKEY_WRITE_TOKEN()`: the positions of the session's last committed
    /// writes on clustered datasources (empty when none), for `/*after='TOKEN'*/`.
    pub fn write_token(
        &mut self,
        client: &mut Client,
        column: &str,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        let token = crate::topology::token::encode(self.txn.causal.written(), &self.rt.config);
        self.state.warnings.clear();
        self.state.row_count = -1;
        let charset = self.state.result_charset();
        client.result_set(
            &[varchar(column, 4096, charset)],
            &[vec![Some(token.into_bytes())]],
            ("", ""),
            self.final_status(more),
        )
    }
}
