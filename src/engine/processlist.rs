//! `SHOW [FULL] PROCESSLIST` and the rows of `information_schema.PROCESSLIST`: the proxy's
//! own sessions (ids that `KILL` accepts), never the backend's threads, which belong to
//! the one backend account every client shares (SPEC §8a). A user sees its own sessions;
//! a user with `process = true` sees every session.

use super::session::Session;
use super::show::{unsigned_column, varchar};
use crate::error::ProxyError;
use crate::protocol::status::MoreResults;
use crate::wire::client::Client;

/// How many characters of a statement `SHOW PROCESSLIST` (without `FULL`) shows, as in MySQL.
const INFO_CHARS: usize = 100;

/// One session as the process list shows it.
pub(super) struct ProcessRow {
    pub id: u32,
    pub user: String,
    pub host: String,
    pub db: Option<String>,
    pub command: &'static str,
    /// Seconds in its current state.
    pub time: u64,
    /// Milliseconds in its current state.
    pub time_ms: u128,
    pub info: Option<String>,
}

impl Session {
    /// The sessions this session's user may see, by connection id.
    pub(super) fn process_rows(&self) -> Vec<ProcessRow> {
        let scope = self.checks.scope();
        let mut rows: Vec<ProcessRow> = self
            .proxy
            .sessions
            .all()
            .into_iter()
            .filter(|h| scope.reaches_session_of(&h.user))
            .map(|h| {
                let a = h.activity();
                let elapsed = a.since.elapsed();
                ProcessRow {
                    id: h.id,
                    user: h.user.clone(),
                    host: h.host.clone(),
                    db: a.database,
                    command: a.command,
                    time: elapsed.as_secs(),
                    time_ms: elapsed.as_millis(),
                    info: a.info,
                }
            })
            .collect();
        rows.sort_by_key(|r| r.id);
        rows
    }

    /// `SHOW [FULL] PROCESSLIST`, with MariaDB's columns.
    pub(super) fn show_processlist(
        &mut self,
        client: &mut Client,
        full: bool,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        let charset = self.state.result_charset();
        let nullable = |mut c: crate::protocol::packets::ColumnSpec<'static>| {
            c.flags
                .remove(mysql_common::constants::ColumnFlags::NOT_NULL_FLAG);
            c
        };
        let columns = [
            unsigned_column("Id", 21),
            varchar("User", 128, charset),
            varchar("Host", 64, charset),
            nullable(varchar("db", 64, charset)),
            varchar("Command", 16, charset),
            unsigned_column("Time", 7),
            varchar("State", 64, charset),
            nullable(varchar("Info", if full { 65_535 } else { 100 }, charset)),
            varchar("Progress", 10, charset),
        ];
        let rows: Vec<Vec<Option<Vec<u8>>>> = self
            .process_rows()
            .into_iter()
            .map(|r| {
                let info = r.info.map(|i| {
                    if full {
                        i
                    } else {
                        i.chars().take(INFO_CHARS).collect()
                    }
                });
                vec![
                    Some(r.id.to_string().into_bytes()),
                    Some(r.user.into_bytes()),
                    Some(r.host.into_bytes()),
                    r.db.map(String::into_bytes),
                    Some(r.command.as_bytes().to_vec()),
                    Some(r.time.to_string().into_bytes()),
                    Some(Vec::new()),
                    info.map(String::into_bytes),
                    Some(b"0.000".to_vec()),
                ]
            })
            .collect();
        self.state.warnings.clear();
        client.result_set(&columns, &rows, ("", ""), self.final_status(more))
    }
}
