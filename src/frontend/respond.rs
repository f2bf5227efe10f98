//! The response to a running plan, in the protocol the client speaks: the backend's own
//! packets relayed as they arrive (one step, or the OKs of a write's steps summed), or the
//! merge of several shards' results ([`super::merge`]). Column definitions name the
//! logical schema and tables. The final terminator is left to the caller, which knows
//! the session's status once the statement's connections are released.

use mysql_common::constants::StatusFlags;

use super::client::Client;
use crate::backend::Reply;
use crate::error::ProxyError;
use crate::execute::Results;
use crate::plan::Plan;
use crate::protocol::packets::OkInfo;
use crate::rewrite::ResultNames;

pub(super) const MORE_RESULTS: u16 = StatusFlags::SERVER_MORE_RESULTS_EXISTS.bits();

/// Backend status flags that describe the statement rather than the session: passed on.
pub(super) const STATEMENT_FLAGS: u16 = StatusFlags::SERVER_STATUS_NO_GOOD_INDEX_USED.bits()
    | StatusFlags::SERVER_STATUS_NO_INDEX_USED.bits()
    | StatusFlags::SERVER_QUERY_WAS_SLOW.bits();

/// Rows of at least this many bytes are passed to the client as they arrive instead of
/// read whole first: the proxy's memory for a result does not grow with its rows' size.
pub(super) const LARGE_ROW: usize = 256 * 1024;

/// What a statement produced over all its steps.
#[derive(Debug, Default)]
pub(super) struct Outcome {
    /// A result set was sent (its final terminator is still to be written).
    pub result_set: bool,
    /// Rows sent.
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
}

impl Outcome {
    fn add_ok(&mut self, ok: &OkInfo, only: bool) {
        self.affected_rows += ok.affected_rows;
        if self.last_insert_id == 0 {
            self.last_insert_id = ok.last_insert_id;
        }
        self.warnings += u32::from(ok.warnings);
        self.info = if only { ok.info.clone() } else { Vec::new() };
        self.statement_flags |= ok.status & STATEMENT_FLAGS;
    }
}

/// Writes the result of a running plan (all but its final terminator).
pub(super) async fn respond(
    client: &mut Client,
    results: &mut Results<'_, '_>,
    plan: &Plan,
    binary: bool,
    status: u16,
) -> Result<Outcome, ProxyError> {
    match &plan.merge {
        Some(spec) => super::merge::merged(client, results, plan, spec, binary, status).await,
        None => relay(client, results, plan, status).await,
    }
}

/// The column count packet and the definitions (named logically) of a result set.
pub(super) fn send_columns(
    client: &mut Client,
    defs: &[bytes::BytesMut],
    names: Option<&std::sync::Arc<ResultNames>>,
    status: u16,
) -> Result<(), ProxyError> {
    client.columns_header(defs.len() as u64)?;
    match names {
        Some(names) => client.renamed_columns(defs, names)?,
        None => {
            for def in defs {
                client.packet(def)?;
            }
        }
    }
    client.columns_end(status)
}

/// The steps' replies, one after another: a result set's rows as the backend sent them
/// (a `CALL`'s several results each terminated with MORE_RESULTS but the last), OKs summed.
async fn relay(
    client: &mut Client,
    results: &mut Results<'_, '_>,
    plan: &Plan,
    status: u16,
) -> Result<Outcome, ProxyError> {
    let mut out = Outcome::default();
    let only = plan.steps.len() == 1;
    let mut columns: Option<usize> = None;
    for step in 0..plan.steps.len() {
        let names = plan.steps[step].names.as_ref();
        loop {
            match results.reply(step).await? {
                Reply::Ok(ok) => {
                    if ok.status & MORE_RESULTS != 0 {
                        let mut intermediate = ok.clone();
                        intermediate.status = status | MORE_RESULTS | (ok.status & STATEMENT_FLAGS);
                        client.ok(&intermediate)?;
                        continue;
                    }
                    out.add_ok(&ok, only);
                    break;
                }
                Reply::ResultSet(defs) => {
                    match columns {
                        Some(n) if n != defs.len() => {
                            return Err(ProxyError::Internal(format!(
                                "shards returned different column counts ({n} and {})",
                                defs.len()
                            )));
                        }
                        Some(_) => {}
                        None => send_columns(client, &defs, names, status)?,
                    }
                    columns = Some(defs.len());
                    loop {
                        if results
                            .relay_large_row(step, LARGE_ROW, &mut client.stream)
                            .await?
                        {
                            out.rows += 1;
                            continue;
                        }
                        let Some(row) = results.next_row(step).await? else {
                            break;
                        };
                        client.packet(&row)?;
                        out.rows += 1;
                        client.flush_if_full().await?;
                    }
                    let end = results.end(step).cloned().unwrap_or_default();
                    if end.more_results() {
                        client.rows_end(end.warnings, status | MORE_RESULTS)?;
                        columns = None;
                        continue;
                    }
                    out.result_set = true;
                    out.warnings += u32::from(end.warnings);
                    out.statement_flags |= end.status & STATEMENT_FLAGS;
                    break;
                }
            }
        }
    }
    Ok(out)
}
