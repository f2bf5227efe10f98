//! Relaying a backend's response to the client: rows are the backend's own packets, sent
//! on as they arrive; column definitions too, with `schema`, `table` and `org_table` named
//! logically; OK and EOF packets are the proxy's, summed over the shards a statement ran on.

use mysql_common::constants::StatusFlags;

use super::conn::{BackendConn, Response, backend_error};
use crate::error::ProxyError;
use crate::frontend::client::Client;
use crate::protocol::packets::{OkInfo, is_eof, parse_eof, parse_err, rewrite_column_definition};
use crate::rewrite::ResultNames;

const MORE_RESULTS: u16 = StatusFlags::SERVER_MORE_RESULTS_EXISTS.bits();

/// Backend status flags that describe the statement rather than the session: passed on.
const STATEMENT_FLAGS: u16 = StatusFlags::SERVER_STATUS_NO_GOOD_INDEX_USED.bits()
    | StatusFlags::SERVER_STATUS_NO_INDEX_USED.bits()
    | StatusFlags::SERVER_QUERY_WAS_SLOW.bits();

/// What a statement produced over all the shards it ran on.
#[derive(Debug, Default)]
pub struct Outcome {
    /// A result set was sent (its final terminator is still to be written).
    pub result_set: bool,
    /// Columns of the result set.
    pub columns: u64,
    /// Rows relayed.
    pub rows: u64,
    /// Affected rows, summed.
    pub affected_rows: u64,
    /// The first non-zero insert id.
    pub last_insert_id: u64,
    /// Warnings, summed.
    pub warnings: u32,
    /// The OK info of a statement that ran on one shard.
    pub info: Vec<u8>,
    /// Statement-level status flags of the backends.
    pub statement_flags: u16,
    /// Backend responses relayed.
    pub responses: usize,
    /// `LAST_INSERT_ID(expr)` set this value (read back from the backend).
    pub insert_id_set: Option<u64>,
}

impl Outcome {
    fn add_ok(&mut self, ok: &OkInfo) {
        self.affected_rows += ok.affected_rows;
        if self.last_insert_id == 0 {
            self.last_insert_id = ok.last_insert_id;
        }
        self.warnings += u32::from(ok.warnings);
        self.info = if self.responses == 0 {
            ok.info.clone()
        } else {
            Vec::new()
        };
        self.statement_flags |= ok.status & STATEMENT_FLAGS;
        self.responses += 1;
    }

    /// The final OK packet of a statement that returned no rows.
    pub fn ok_packet(&self, status: u16) -> OkInfo {
        OkInfo {
            affected_rows: self.affected_rows,
            last_insert_id: self.last_insert_id,
            status: status | self.statement_flags,
            warnings: u16::try_from(self.warnings).unwrap_or(u16::MAX),
            info: self.info.clone(),
        }
    }
}

/// Relays the response to the command just sent on `conn`. The first response of a
/// statement sends the column definitions; later ones (other shards) must have the same
/// columns and send only rows. Results of a multi-result backend response (CALL) before
/// the last are terminated here with `status | MORE_RESULTS`; the last one's terminator
/// is left to the caller. A connection left with unread packets is marked broken.
pub async fn relay(
    conn: &mut BackendConn,
    client: &mut Client,
    names: Option<&ResultNames>,
    out: &mut Outcome,
    status: u16,
) -> Result<(), ProxyError> {
    let result = relay_inner(conn, client, names, out, status).await;
    if let Err(e) = &result {
        if !matches!(e, ProxyError::Backend { .. }) {
            conn.mark_broken();
        }
    }
    result
}

async fn relay_inner(
    conn: &mut BackendConn,
    client: &mut Client,
    names: Option<&ResultNames>,
    out: &mut Outcome,
    status: u16,
) -> Result<(), ProxyError> {
    loop {
        match conn.read_response().await? {
            Response::Err(e) => return Err(backend_error(e)),
            Response::Ok(ok) => {
                if ok.status & MORE_RESULTS != 0 {
                    let mut intermediate = ok.clone();
                    intermediate.status = status | MORE_RESULTS | (ok.status & STATEMENT_FLAGS);
                    client.ok(&intermediate)?;
                    continue;
                }
                out.add_ok(&ok);
                return Ok(());
            }
            Response::ResultSet(columns) => {
                if out.result_set && out.columns != columns {
                    return Err(ProxyError::Internal(format!(
                        "shards returned different column counts ({} and {columns})",
                        out.columns
                    )));
                }
                relay_columns(conn, client, names, columns, !out.result_set, status).await?;
                out.result_set = true;
                out.columns = columns;
                out.responses += 1;
                let (warnings, backend_status) = relay_rows(conn, client, out).await?;
                if backend_status & MORE_RESULTS != 0 {
                    client.rows_end(warnings, status | MORE_RESULTS)?;
                    out.result_set = false;
                    continue;
                }
                out.warnings += u32::from(warnings);
                out.statement_flags |= backend_status & STATEMENT_FLAGS;
                return Ok(());
            }
        }
    }
}

async fn relay_columns(
    conn: &mut BackendConn,
    client: &mut Client,
    names: Option<&ResultNames>,
    columns: u64,
    send: bool,
    status: u16,
) -> Result<(), ProxyError> {
    if send {
        client.columns_header(columns)?;
    }
    for _ in 0..columns {
        let def = conn.read_packet().await?;
        if send {
            match names.and_then(|n| rewrite_column_definition(&def, n)) {
                Some(renamed) => client.packet(&renamed)?,
                None => client.packet(&def)?,
            }
        }
    }
    let eof = conn.read_packet().await?;
    if !is_eof(&eof) {
        return Err(ProxyError::Internal(
            "expected EOF after column definitions".into(),
        ));
    }
    if send {
        client.columns_end(status)?;
    }
    Ok(())
}

/// Relays rows until the EOF; returns its warnings and status.
async fn relay_rows(
    conn: &mut BackendConn,
    client: &mut Client,
    out: &mut Outcome,
) -> Result<(u16, u16), ProxyError> {
    loop {
        let packet = conn.read_packet().await?;
        if is_eof(&packet) {
            let (warnings, status) = parse_eof(&packet);
            conn.observe_status(status);
            return Ok((warnings, status));
        }
        if packet.first() == Some(&0xff) {
            let e = parse_err(&packet);
            conn.observe_error(&e);
            return Err(backend_error(e));
        }
        client.packet(&packet)?;
        out.rows += 1;
        client.flush_if_full().await?;
    }
}
