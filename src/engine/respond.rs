//! The response to a running plan, in the protocol the client speaks: the backend's own
//! packets relayed as they arrive (one step, or the OKs of a write's steps summed), or the
//! merge of several shards' results ([`super::gather`]). Column definitions name the
//! logical schema and tables. The final terminator is left to the caller, which knows
//! the session's status once the statement's connections are released.

use super::outcome::Outcome;
use crate::backend::Reply;
use crate::error::ProxyError;
use crate::execute::Results;
use crate::merge::columns::ColumnCache;
use crate::plan::Plan;
use crate::protocol::status;
use crate::wire::client::Client;

/// Rows of at least this many bytes are passed to the client as they arrive instead of
/// read whole first: the proxy's memory for a result does not grow with its rows' size.
pub(super) const LARGE_ROW: usize = 256 * 1024;

/// Writes the result of a running plan (all but its final terminator); `columns` keeps
/// the descriptions of combined reads.
pub(super) async fn respond(
    client: &mut Client,
    results: &mut Results<'_, '_>,
    plan: &Plan,
    binary: bool,
    status: u16,
    columns: &ColumnCache,
) -> Result<Outcome, ProxyError> {
    match plan.execution.merge() {
        Some(spec) => {
            super::gather::merged(client, results, plan, spec, binary, status, columns).await
        }
        None => relay(client, results, plan, status).await,
    }
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
                        None => client.send_columns(
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
