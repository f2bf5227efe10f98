//! The response to a running plan, in the protocol the client speaks: the backend's own
//! packets relayed as they arrive (one step, or the OKs of a write's steps summed), or the
//! merge of several shards' results ([`super::merge`]). Column definitions name the
//! logical schema and tables. The final terminator is left to the caller, which knows
//! the session's status once the statement's connections are released.

use super::client::Client;
use crate::backend::Reply;
use crate::config::ResultNames;
use crate::error::ProxyError;
use crate::execute::Results;
use crate::plan::Plan;
use crate::protocol::packets::OkInfo;
use crate::protocol::status;

/// The flags of a backend's final packet a statement's final packet keeps: the
/// statement's index use ([`status::relayed`]).
pub(super) const KEPT_FLAGS: u16 = status::STATEMENT;

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
    /// The OK info: one shard's, or the sum of several shards' that read alike.
    pub info: Vec<u8>,
    /// The session-state changes of a statement that ran on one backend (its final OK's).
    pub session_state: Vec<u8>,
    /// The backends' final status flags the final packet keeps ([`KEPT_FLAGS`]).
    pub backend_flags: u16,
    /// A backend answered (else the final packet is the session's alone).
    pub from_backend: bool,
}

impl Outcome {
    fn add_ok(&mut self, ok: &OkInfo, first: bool) {
        self.affected_rows += ok.affected_rows;
        if self.last_insert_id == 0 {
            self.last_insert_id = ok.last_insert_id;
        }
        self.warnings += u32::from(ok.warnings);
        self.info = if first {
            ok.info.clone()
        } else {
            crate::protocol::packets::sum_infos(&self.info, &ok.info)
        };
        // Several backends' changes are not one session's: none is passed on then.
        self.session_state = if first {
            ok.session_state.clone()
        } else {
            Vec::new()
        };
        self.add_end(ok.status);
    }

    /// Keeps what a backend's final packet says of the statement.
    pub(super) fn add_end(&mut self, backend_status: u16) {
        self.backend_flags |= backend_status & KEPT_FLAGS;
        self.from_backend = true;
    }

    /// The status flags of the statement's final packet, `session` being the session's
    /// own after it ran.
    pub(super) fn final_status(&self, session: u16) -> u16 {
        if self.from_backend {
            status::relayed(session, self.backend_flags)
        } else {
            session
        }
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

/// The column count packet and the definitions (named logically) of a result set;
/// `status`: the flags of the EOF that ends them.
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
    let mut columns: Option<usize> = None;
    for step in 0..plan.steps.len() {
        let names = plan.steps[step].names.as_ref();
        loop {
            match results.reply(step).await? {
                Reply::Ok(ok) => {
                    if ok.status & status::MORE_RESULTS_EXISTS != 0 {
                        let mut intermediate = ok.clone();
                        intermediate.status = status::relayed(status, ok.status);
                        client.ok(&intermediate)?;
                        continue;
                    }
                    out.add_ok(&ok, step == 0);
                    break;
                }
                Reply::ResultSet {
                    columns: defs,
                    status: columns_status,
                } => {
                    match columns {
                        Some(n) if n != defs.len() => {
                            return Err(ProxyError::Internal(format!(
                                "shards returned different column counts ({n} and {})",
                                defs.len()
                            )));
                        }
                        Some(_) => {}
                        None => send_columns(
                            client,
                            &defs,
                            names,
                            status::relayed(status, columns_status),
                        )?,
                    }
                    columns = Some(defs.len());
                    loop {
                        if !client.holding_back()
                            && results
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
                        client.rows_end(end.warnings, status::relayed(status, end.status))?;
                        columns = None;
                        continue;
                    }
                    out.result_set = true;
                    out.warnings += u32::from(end.warnings);
                    out.add_end(end.status);
                    break;
                }
            }
        }
    }
    Ok(out)
}
