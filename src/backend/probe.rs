//! The probe of one member of a clustered datasource (issue 26; `crate::topology` decides
//! from the answers): on a connection of its own (kept between rounds, opened again after
//! a failure), `@@read_only` and `@@gtid_current_pos`, then `SHOW SLAVE STATUS`, within
//! `topology.probe_timeout`.

use std::time::Duration;

use super::conn::BackendConn;
use crate::config::{Datasource, DatasourceId};
use crate::error::ProxyError;

/// What a member answered a probe.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeAnswer {
    /// `@@read_only`.
    pub read_only: bool,
    /// `@@gtid_current_pos`, as the server writes it.
    pub gtid_current_pos: String,
    /// `SHOW SLAVE STATUS`, when replication is configured on it.
    pub replication: Option<ReplicationStatus>,
}

/// A replica's replication state (`SHOW SLAVE STATUS`).
#[derive(Debug, Clone, PartialEq)]
pub struct ReplicationStatus {
    /// `Slave_IO_Running = Yes`.
    pub io_running: bool,
    /// `Slave_SQL_Running = Yes`.
    pub sql_running: bool,
    /// `Seconds_Behind_Master` (`None`: NULL).
    pub seconds_behind: Option<u64>,
    /// `Last_SQL_Error` or `Last_IO_Error`, when one is set.
    pub last_error: String,
}

/// One member's prober: its datasource as that member is reached, and its connection.
pub struct MemberProbe {
    datasource: Datasource,
    id: DatasourceId,
    max_packet: usize,
    conn: Option<BackendConn>,
}

impl MemberProbe {
    /// A prober of `member` of `datasource` (no connection opens until the first probe).
    pub fn new(
        datasource: &Datasource,
        id: DatasourceId,
        member: usize,
        max_packet: usize,
    ) -> Self {
        Self {
            datasource: datasource.member(member),
            id,
            max_packet,
            conn: None,
        }
    }

    /// Probes the member once, within `timeout`; `Err` says why it did not answer. A
    /// failure closes the connection: the next probe opens another.
    pub async fn probe(&mut self, timeout: Duration) -> Result<ProbeAnswer, String> {
        match tokio::time::timeout(timeout, self.ask()).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) => {
                self.conn = None;
                Err(e.to_string())
            }
            Err(_) => {
                self.conn = None;
                Err(format!("no answer within {timeout:?}"))
            }
        }
    }

    async fn ask(&mut self) -> Result<ProbeAnswer, ProxyError> {
        if self.conn.is_none() {
            let mut ds = self.datasource.clone();
            // The probe needs no database; one missing on this member must not fail it.
            ds.database = None;
            self.conn = Some(BackendConn::connect(&ds, self.id, false, self.max_packet).await?);
        }
        let conn = self.conn.as_mut().expect("opened above");
        let (_, rows) = conn
            .query_rows(b"SELECT @@global.read_only, @@global.gtid_current_pos")
            .await?;
        let row = rows
            .first()
            .ok_or_else(|| ProxyError::Io("empty probe answer".into()))?;
        let text = |i: usize| {
            row.get(i)
                .cloned()
                .flatten()
                .map(|v| String::from_utf8_lossy(&v).into_owned())
                .unwrap_or_default()
        };
        let read_only = text(0) != "0";
        let gtid_current_pos = text(1);
        let (columns, rows) = conn.query_rows(b"SHOW SLAVE STATUS").await?;
        let replication = rows.first().map(|row| {
            let field = |name: &str| {
                columns
                    .iter()
                    .position(|c| c.name.eq_ignore_ascii_case(name.as_bytes()))
                    .and_then(|i| row.get(i).cloned().flatten())
                    .map(|v| String::from_utf8_lossy(&v).into_owned())
            };
            let last_error = [field("Last_SQL_Error"), field("Last_IO_Error")]
                .into_iter()
                .flatten()
                .find(|e| !e.is_empty())
                .unwrap_or_default();
            ReplicationStatus {
                io_running: field("Slave_IO_Running").as_deref() == Some("Yes"),
                sql_running: field("Slave_SQL_Running").as_deref() == Some("Yes"),
                seconds_behind: field("Seconds_Behind_Master").and_then(|s| s.parse().ok()),
                last_error,
            }
        });
        Ok(ProbeAnswer {
            read_only,
            gtid_current_pos,
            replication,
        })
    }
}
