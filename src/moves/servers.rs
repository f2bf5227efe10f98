//! The servers a move talks to: each datasource's primary (for a datasource with
//! `members`, the one writable member), the source's binary log position, and the
//! replication connection the target follows the source with.

use std::time::Duration;

use mysql_async::prelude::Queryable;

use crate::config::Datasource;
use crate::route::index::control_conn_opts;

/// The name of the target's replication connection (MariaDB multi-source replication):
/// one move runs at a time, so one name serves.
pub const CONNECTION: &str = "routekey_move";

/// A connection to `ds`'s primary, and that member's `host:port`.
///
/// # Errors
/// No member answers within `timeout`, or not exactly one of them is writable.
pub async fn primary(
    ds: &Datasource,
    timeout: Duration,
) -> Result<(mysql_async::Conn, String), String> {
    let mut writable = Vec::new();
    let mut errors = Vec::new();
    for m in 0..ds.member_count() {
        let member = ds.member(m);
        let opts = control_conn_opts(&member).db_name(None::<String>);
        let conn = tokio::time::timeout(timeout, async {
            let mut conn = mysql_async::Conn::new(opts).await?;
            let ro: Option<u8> = conn.query_first("SELECT @@read_only").await?;
            Ok::<_, mysql_async::Error>((conn, ro.unwrap_or(1)))
        })
        .await;
        match conn {
            Ok(Ok((conn, 0))) => writable.push((conn, member.address.clone())),
            Ok(Ok(_)) => {}
            Ok(Err(e)) => errors.push(format!("{}: {e}", member.address)),
            Err(_) => errors.push(format!("{}: no answer within {timeout:?}", member.address)),
        }
    }
    match writable.len() {
        1 => Ok(writable.pop().expect("one")),
        0 => Err(format!(
            "datasource {}: no writable member{}",
            ds.name,
            if errors.is_empty() {
                String::new()
            } else {
                format!(" ({})", errors.join("; "))
            }
        )),
        n => Err(format!(
            "datasource {}: {n} writable members (split brain); fix that first",
            ds.name
        )),
    }
}

/// A quoted SQL string literal, backslashes and quotes escaped (the move's own connections
/// never set NO_BACKSLASH_ESCAPES).
pub fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "''"))
}

/// The server's `@@server_id` and `@@gtid_domain_id`.
pub async fn ids(conn: &mut mysql_async::Conn) -> Result<(u32, u32), String> {
    conn.query_first::<(u32, u32), _>("SELECT @@server_id, @@gtid_domain_id")
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "no @@server_id".to_owned())
}

/// A place in a server's binary log: the file and the byte offset in it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct BinlogPos {
    /// The file (`mariadb-bin.000003`: the same base name, a growing number).
    pub file: String,
    /// The offset.
    pub pos: u64,
}

impl std::fmt::Display for BinlogPos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.pos)
    }
}

/// The end of the server's binary log now (`SHOW MASTER STATUS`).
pub async fn master_status(conn: &mut mysql_async::Conn) -> Result<BinlogPos, String> {
    let row: Option<mysql_async::Row> = conn
        .query_first("SHOW MASTER STATUS")
        .await
        .map_err(|e| e.to_string())?;
    let row = row.ok_or("the source has no binary log (log_bin is off); a move needs it")?;
    let file: String = row.get(0).ok_or("SHOW MASTER STATUS: no File")?;
    let pos: u64 = row.get(1).ok_or("SHOW MASTER STATUS: no Position")?;
    Ok(BinlogPos { file, pos })
}

/// Whether the target's move connection has executed the source's binary log up to `pos`
/// within `wait` (`MASTER_POS_WAIT` on the connection; a stopped connection answers from
/// `SHOW SLAVE STATUS` at once).
pub async fn has_applied(
    target: &mut mysql_async::Conn,
    pos: &BinlogPos,
    wait: Duration,
) -> Result<bool, String> {
    let st = replica_status(target).await?;
    if !st.sql_running {
        return Ok(st.executed.as_ref().is_some_and(|e| e >= pos));
    }
    let r: Option<Option<i64>> = target
        .exec_first(
            "SELECT MASTER_POS_WAIT(?, ?, ?, ?)",
            (&pos.file, pos.pos, wait.as_secs_f64(), CONNECTION),
        )
        .await
        .map_err(|e| format!("MASTER_POS_WAIT on the target: {e}"))?;
    Ok(matches!(r, Some(Some(n)) if n >= 0))
}

/// `SHOW SLAVE '<CONNECTION>' STATUS` reduced to what a move watches.
#[derive(Debug, Default)]
pub struct ReplicaStatus {
    /// The connection exists.
    pub exists: bool,
    /// `Slave_IO_Running` is `Yes`.
    pub io_running: bool,
    /// `Slave_SQL_Running` is `Yes`.
    pub sql_running: bool,
    /// The last IO or SQL error, when one is set.
    pub error: Option<String>,
    /// `Seconds_Behind_Master`.
    pub behind: Option<u64>,
    /// How far its SQL thread executed the source's binary log
    /// (`Relay_Master_Log_File`, `Exec_Master_Log_Pos`).
    pub executed: Option<BinlogPos>,
}

/// The target's move connection's state.
pub async fn replica_status(target: &mut mysql_async::Conn) -> Result<ReplicaStatus, String> {
    let rows: Vec<mysql_async::Row> = target
        .query("SHOW ALL SLAVES STATUS")
        .await
        .map_err(|e| e.to_string())?;
    for row in rows {
        let text = |name: &str| -> String {
            row.get_opt::<Option<String>, _>(name)
                .and_then(Result::ok)
                .flatten()
                .unwrap_or_default()
        };
        if text("Connection_name") != CONNECTION {
            continue;
        }
        let error = [text("Last_SQL_Error"), text("Last_IO_Error")]
            .into_iter()
            .find(|e| !e.is_empty());
        return Ok(ReplicaStatus {
            exists: true,
            io_running: text("Slave_IO_Running") == "Yes",
            sql_running: text("Slave_SQL_Running") == "Yes",
            error,
            behind: text("Seconds_Behind_Master").parse().ok(),
            executed: text("Exec_Master_Log_Pos")
                .parse()
                .ok()
                .map(|pos| BinlogPos {
                    file: text("Relay_Master_Log_File"),
                    pos,
                }),
        });
    }
    Ok(ReplicaStatus::default())
}

/// Stops and forgets the target's move connection (nothing when there is none).
pub async fn forget_replication(target: &mut mysql_async::Conn) -> Result<(), String> {
    if !replica_status(target).await?.exists {
        return Ok(());
    }
    target
        .query_drop(format!(
            "STOP SLAVE '{CONNECTION}'; RESET SLAVE '{CONNECTION}' ALL"
        ))
        .await
        .map_err(|e| format!("removing the target's replication connection: {e}"))
}

/// Starts the target's move connection (when it is not running).
pub async fn start_replication(target: &mut mysql_async::Conn) -> Result<(), String> {
    let st = replica_status(target).await?;
    if st.io_running && st.sql_running {
        return Ok(());
    }
    target
        .query_drop(format!("START SLAVE '{CONNECTION}'"))
        .await
        .map_err(|e| format!("starting the target's replication: {e}"))
}

/// Stops the target's move connection.
pub async fn stop_replication(target: &mut mysql_async::Conn) -> Result<(), String> {
    target
        .query_drop(format!("STOP SLAVE '{CONNECTION}'"))
        .await
        .map_err(|e| format!("stopping the target's replication: {e}"))
}

/// Prepared XA branches on the server (any format: a branch prepared before a rename
/// commits into the renamed table, so a cut-over waits for none).
pub async fn prepared_xa(conn: &mut mysql_async::Conn) -> Result<usize, String> {
    let rows: Vec<mysql_async::Row> = conn
        .query("XA RECOVER")
        .await
        .map_err(|e| format!("XA RECOVER: {e}"))?;
    Ok(rows.len())
}

/// The snapshot the connection's `START TRANSACTION WITH CONSISTENT SNAPSHOT` saw, as a
/// place in the binary log (MariaDB's `binlog_snapshot_file`/`_position` status) and as a
/// GTID position (`BINLOG_GTID_POS`, for people).
pub async fn snapshot_position(
    conn: &mut mysql_async::Conn,
) -> Result<(BinlogPos, String), String> {
    let rows: Vec<(String, String)> = conn
        .query("SHOW STATUS LIKE 'binlog_snapshot_%'")
        .await
        .map_err(|e| e.to_string())?;
    let get = |name: &str| {
        rows.iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
            .ok_or_else(|| format!("no {name} status: is the source's binary log on?"))
    };
    let (file, position) = (
        get("Binlog_snapshot_file")?,
        get("Binlog_snapshot_position")?,
    );
    if file.is_empty() {
        return Err("the source has no binary log (log_bin is off); a move needs it".to_owned());
    }
    let pos: u64 = position
        .parse()
        .map_err(|_| format!("binlog_snapshot_position `{position}`"))?;
    let gtid: Option<Option<String>> = conn
        .exec_first("SELECT BINLOG_GTID_POS(?, ?)", (&file, pos))
        .await
        .map_err(|e| e.to_string())?;
    Ok((BinlogPos { file, pos }, gtid.flatten().unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binlog_positions_order_by_file_then_offset() {
        let at = |file: &str, pos| BinlogPos {
            file: file.into(),
            pos,
        };
        assert!(at("mariadb-bin.000002", 4) > at("mariadb-bin.000001", 900_000));
        assert!(at("mariadb-bin.000010", 4) > at("mariadb-bin.000009", 4));
        assert!(at("mariadb-bin.000001", 500) > at("mariadb-bin.000001", 499));
        assert_eq!(
            at("mariadb-bin.000001", 4).to_string(),
            "mariadb-bin.000001:4"
        );
    }

    #[test]
    fn literals_escape_quotes_and_backslashes() {
        assert_eq!(literal("it's"), "'it''s'");
        assert_eq!(literal("a\\'b"), "'a\\\\''b'");
    }
}
