//! `LOAD DATA LOCAL INFILE` (opt-in per user: `load_data_local`): the client's file loaded
//! into a table the user reaches.
//!
//! - A table that is not sharded (the logical database's own tables, a database the user
//!   may reach): the statement goes to the default datasource, and the file is streamed
//!   from the client to the server packet by packet, never held whole.
//! - A sharded table: the file is cut into records as the server cuts them
//!   ([`crate::sql::load_data::rows`]); each record is routed as an INSERT's row would be
//!   ([`sharded`]) and joins its shard's batch; a batch that reaches [`sharded::BATCH_BYTES`]
//!   is loaded into its shard with the client's own statement (its table replaced), so the
//!   server converts the values exactly as it would in one table. Memory stays within the
//!   batches whatever the file's size.
//!
//! The load is one statement: outside a transaction every datasource it reaches loads in
//! a transaction of its own, committed at the end (rolled back on any error, so a failed
//! load leaves nothing behind; only a `COMMIT` failing on one datasource after another
//! committed could leave part, and the error says which); inside the client's transaction
//! it runs under a savepoint on each datasource, rolled back to on error, and, as every
//! write of a transaction, on one datasource only. A record that cannot be routed stops
//! the load with an error naming its line.
//!
//! `LOAD DATA INFILE` (a file on the server's host) stays refused
//! ([`crate::sql::command`]).

mod sharded;

use mysql_common::constants::CapabilityFlags;

use super::session::Session;
use crate::backend::FileRequest;
use crate::error::{ER_LOAD_INFILE_CAPABILITY_DISABLED, ER_PARSE_ERROR, ProxyError};
use crate::execute::Target;
use crate::protocol::packets::OkInfo;
use crate::protocol::status::MoreResults;
use crate::sql::lexer::Lexed;
use crate::sql::load_data::{self, LoadData};
use crate::wire::client::Client;

/// MariaDB's message for [`ER_LOAD_INFILE_CAPABILITY_DISABLED`].
const CAPABILITY_DISABLED: &str = "The used command is not allowed because the MariaDB server or client has disabled the local infile capability";

impl Session {
    /// Tells other sessions which backend threads run this session's load now (its held
    /// connections), so that `KILL [QUERY]` interrupts it there; `false` clears it.
    pub(super) fn load_running(&self, running: bool) {
        let threads = running.then(|| crate::session_registry::Running {
            config: self.rt.config.clone(),
            threads: self.txn.held_threads(),
        });
        self.handle.set_running(threads);
    }

    /// `KILL QUERY` of this session came while it loads: 1317; `KILL`: the connection
    /// ends at once, as MariaDB ends it.
    pub(super) fn load_killed(&self) -> Result<(), ProxyError> {
        if self.handle.killed() {
            return Err(ProxyError::ClientGone(
                "killed in the middle of LOAD DATA".into(),
            ));
        }
        if self.handle.query_killed() {
            return Err(ProxyError::interrupted());
        }
        Ok(())
    }

    /// `LOAD DATA LOCAL INFILE`: checked (the client's capability, the user's
    /// `load_data_local`, the statement, the table's scope), then loaded into the table.
    pub(super) async fn load_data_local(
        &mut self,
        client: &mut Client,
        sql: &[u8],
        lexed: &Lexed,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        if !client.caps.contains(CapabilityFlags::CLIENT_LOCAL_FILES) {
            return Err(ProxyError::client(
                ER_LOAD_INFILE_CAPABILITY_DISABLED,
                b"HY000",
                CAPABILITY_DISABLED,
            ));
        }
        let allowed = self
            .rt
            .config
            .user(&self.user)
            .is_some_and(|u| u.load_data_local);
        if !allowed {
            return Err(ProxyError::client(
                ER_LOAD_INFILE_CAPABILITY_DISABLED,
                b"HY000",
                format!(
                    "{CAPABILITY_DISABLED} (routekey-proxy: load_data_local is off for user '{}')",
                    self.user
                ),
            ));
        }
        let load = load_data::parse(sql, &lexed.tokens, self.state.lex_mode).map_err(|m| {
            ProxyError::client(
                ER_PARSE_ERROR,
                b"42000",
                format!("You have an error in your SQL syntax: {m}"),
            )
        })?;
        let database = load
            .database
            .clone()
            .or_else(|| self.state.database.clone())
            .ok_or_else(|| {
                ProxyError::client(
                    crate::error::ER_NO_DB_ERROR,
                    b"3D000",
                    "No database selected",
                )
            })?;
        self.checks
            .scope()
            .check_table("INSERT", &database, &load.table)?;
        let config = self.rt.config.clone();
        let logical = database.eq_ignore_ascii_case(&config.sharding.logical_database);
        if logical {
            if let Some(table) = config.binding_table(&load.table) {
                return self
                    .load_sharded(client, sql, lexed, &load, table, more)
                    .await;
            }
        }
        let ds = config.sharding.default_datasource;
        // A table of the logical database lives in the default datasource's database.
        let statement = match &config.datasource(ds).database {
            Some(db) if logical => {
                let physical = format!(
                    "{}.{}",
                    crate::sql::quote_ident(db),
                    crate::sql::quote_ident(&load.table)
                );
                load.with_table(sql, &physical)
            }
            _ => sql.to_vec(),
        };
        self.load_through(client, &load, ds, &statement, more).await
    }

    /// A table that is not sharded: the statement on `ds`, the client's file streamed to it.
    async fn load_through(
        &mut self,
        client: &mut Client,
        load: &LoadData,
        ds: crate::config::DatasourceId,
        statement: &[u8],
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        self.state.warnings.clear();
        self.connection(Target::primary(ds)).await?;
        // A KILL QUERY reaches the backend's statement, which stops, reads the rest of the
        // file and answers 1317, as MariaDB does.
        self.load_running(true);
        let loaded = self.stream_through(client, load, ds, statement).await;
        self.load_running(false);
        let ok = match loaded {
            Ok(ok) => ok,
            Err(e) => {
                // The failed statement opened (or stays in) the transaction with autocommit
                // off: the connection must not go back to the pool inside it.
                self.txn
                    .after_failed_statement(&[ds], self.state.autocommit);
                self.txn.release_idle();
                return Err(e);
            }
        };
        if ok.affected_rows > 0 {
            self.record_write(ds);
            self.txn.record_changed_rows();
        }
        if ok.last_insert_id != 0 {
            self.state.set_last_insert_id(ok.last_insert_id);
        }
        self.state.row_count = i64::try_from(ok.affected_rows).unwrap_or(i64::MAX);
        self.txn.settle().await;
        self.txn.release_idle();
        let status = crate::protocol::status::relayed(
            self.final_status(more),
            ok.status & super::outcome::KEPT_FLAGS,
        );
        client.ok(&OkInfo {
            status,
            session_state: Vec::new(),
            ..ok
        })
    }

    /// The statement on `ds`'s held connection and the client's file streamed to it; the
    /// server's answer (its diagnostics kept for `SHOW WARNINGS`).
    async fn stream_through(
        &mut self,
        client: &mut Client,
        load: &LoadData,
        ds: crate::config::DatasourceId,
        statement: &[u8],
    ) -> Result<OkInfo, ProxyError> {
        let handle = self.handle.clone();
        let conn = self.connection(Target::primary(ds)).await?;
        let ok = match conn.load_local(statement).await {
            Err(e) => return Err(e),
            Ok(FileRequest::Answered(ok)) => ok,
            Ok(FileRequest::Asked) => {
                ask_for_file(client, load).await?;
                let mut failed = None;
                loop {
                    if handle.killed() {
                        // The backend's LOAD is cut off with its connection (rolled back).
                        return Err(ProxyError::ClientGone(
                            "killed in the middle of LOAD DATA".into(),
                        ));
                    }
                    let packet = next_file_packet(client).await?;
                    if packet.is_empty() {
                        break;
                    }
                    if failed.is_none() {
                        if let Err(e) = conn.send_file_data(&packet).await {
                            failed = Some(e);
                        }
                    }
                }
                let ok = match failed {
                    Some(e) => Err(e),
                    None => conn.finish_file().await,
                };
                let diagnostics = match &ok {
                    Ok(ok) if ok.warnings > 0 => conn.diagnostics().await.unwrap_or_default(),
                    _ => Vec::new(),
                };
                self.state.warnings = diagnostics;
                ok?
            }
        };
        Ok(ok)
    }
}

/// Asks the client for the file the statement names (0xFB and its name, as the server
/// would ask).
async fn ask_for_file(client: &mut Client, load: &LoadData) -> Result<(), ProxyError> {
    let mut request = Vec::with_capacity(1 + load.file_name.len());
    request.push(0xfb);
    request.extend_from_slice(&load.file_name);
    client.packet(&request)?;
    client.flush().await
}

/// The next packet of the client's file (empty: its end).
async fn next_file_packet(client: &mut Client) -> Result<bytes::BytesMut, ProxyError> {
    match client.stream.read_packet().await {
        Ok(Some(packet)) => Ok(packet),
        Ok(None) => Err(ProxyError::ClientGone(
            "the client closed the connection while sending a LOAD DATA file".into(),
        )),
        Err(e) => Err(ProxyError::ClientGone(e.to_string())),
    }
}

/// Reads the rest of the client's file and drops it: after an error the client still sends
/// the whole file, and reads the answer only after it.
async fn drain_file(client: &mut Client) -> Result<(), ProxyError> {
    while !next_file_packet(client).await?.is_empty() {}
    Ok(())
}
