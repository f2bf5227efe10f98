//! `SHOW ROUTEKEY TRANSACTIONS` (issue 27): the XA branches of ours the resolver found
//! prepared, with what it knows of their decision.

use super::session::Session;
use super::show::{unsigned_column, varchar};
use crate::error::ProxyError;
use crate::protocol::status::MoreResults;
use crate::wire::client::Client;

impl Session {
    /// `SHOW ROUTEKEY TRANSACTIONS`: one row per prepared branch the last resolver round
    /// saw: xid (gtrid), the datasource holding it, its decision datasource, seconds since
    /// this sidecar first saw it prepared, the decision read (`commit`, `abort`, NULL: not
    /// read yet, the branch is younger than `transactions.abandon_age`), the last error,
    /// (the metrics count what the resolver finished).
    pub fn show_route_transactions(
        &mut self,
        client: &mut Client,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        let charset = self.state.result_charset();
        let columns = [
            varchar("xid", 64, charset),
            varchar("datasource", 64, charset),
            varchar("decision_datasource", 64, charset),
            unsigned_column("age_seconds", 20),
            varchar("decision", 8, charset),
            varchar("last_error", 512, charset),
        ];
        let text = |s: &str| Some(s.as_bytes().to_vec());
        let list = self
            .proxy
            .coordinator
            .in_doubt
            .lock()
            .map(|l| l.clone())
            .unwrap_or_default();
        let rows: Vec<Vec<Option<Vec<u8>>>> = list
            .iter()
            .map(|d| {
                vec![
                    text(&d.xid.gtrid),
                    text(&d.datasource),
                    text(d.xid.decision()),
                    Some(d.first_seen.elapsed().as_secs().to_string().into_bytes()),
                    d.decision.as_deref().and_then(text),
                    d.error.as_deref().and_then(text),
                ]
            })
            .collect();
        client.result_set(&columns, &rows, ("", ""), self.final_status(more))
    }
}
