//! COM_QUERY: the table of contents of statement handling. A query text is split into
//! statements (when the client negotiated several per query); each is classified from its
//! tokens and handed to its handler; the first error ends the query, as in MySQL.

use super::fence::AfterFence;
use std::future::Future;
use std::time::Duration;

use super::session::Session;
use crate::error::{
    ER_CONNECTION_KILLED, ER_EMPTY_QUERY, ER_NO_SUCH_THREAD, ER_PARSE_ERROR, ER_SP_DOES_NOT_EXIST,
    ProxyError,
};
use crate::execute::Target;
use crate::protocol::packets::OkInfo;
use crate::protocol::status::MoreResults;
use crate::sql::command::{Command, RegionArg, classify};
use crate::sql::lexer::{Lexed, Piece, lex, split_query, split_statements};
use crate::wire::client::Client;

impl Session {
    /// Runs the statements of one COM_QUERY and writes their results. Returns `Err` only
    /// when the client connection is lost.
    pub async fn query(&mut self, client: &mut Client, text: &[u8]) -> Result<(), ProxyError> {
        if memchr::memchr(b';', text).is_none() {
            // One statement at most (the usual case): lexed once, not split first.
            let lexed = lex(text, self.state.lex_mode);
            if !lexed.tokens.is_empty() {
                return self.only_statement(client, text, lexed).await;
            }
        }
        let statements = split_statements(text, self.state.lex_mode);
        if statements.is_empty() {
            if text.iter().all(u8::is_ascii_whitespace) {
                let e = ProxyError::client(ER_EMPTY_QUERY, b"42000", "Query was empty");
                return client.error(&e);
            }
            // Only comments: the server answers OK.
            return self.ok(client, MoreResults::None);
        }
        let multi = client
            .caps
            .contains(mysql_common::constants::CapabilityFlags::CLIENT_MULTI_STATEMENTS);
        if statements.len() > 1 && !multi {
            let e = ProxyError::client(
                ER_PARSE_ERROR,
                b"42000",
                "You have an error in your SQL syntax: several statements in one query need the CLIENT_MULTI_STATEMENTS option",
            );
            return client.error(&e);
        }
        let pieces: Vec<Piece> = if multi {
            split_query(text, self.state.lex_mode)
        } else {
            statements.into_iter().map(Piece::Statement).collect()
        };
        self.each_piece(client, text, pieces).await?;
        self.handle
            .set_activity(self.state.database.as_deref(), None);
        Ok(())
    }

    /// The pieces of a query of several statements, one after another, until one fails. The
    /// server reads each statement under the sql_mode in force when it comes: after one that
    /// changed how strings are read (NO_BACKSLASH_ESCAPES, ANSI_QUOTES), the rest of the
    /// query is split again. An empty statement between `;`s is a syntax error and comments
    /// after the last `;` are answered with an OK, as MariaDB answers them.
    async fn each_piece(
        &mut self,
        client: &mut Client,
        text: &[u8],
        pieces: Vec<Piece>,
    ) -> Result<(), ProxyError> {
        let mut split_under = self.state.lex_mode;
        let mut offset = 0;
        let mut pieces = std::collections::VecDeque::from(pieces);
        while let Some(piece) = pieces.pop_front() {
            let more = if pieces.is_empty() {
                MoreResults::None
            } else {
                MoreResults::Follow
            };
            let range = match piece {
                Piece::Statement(range) => range,
                Piece::TrailingComment => return self.ok(client, more),
                Piece::Empty => {
                    let e = ProxyError::client(
                        ER_PARSE_ERROR,
                        b"42000",
                        "You have an error in your SQL syntax: an empty statement between ';'",
                    );
                    self.state.record_error(&e);
                    return client.error(&e);
                }
            };
            let sql = &text[offset + range.start..offset + range.end];
            if !self.each_statement(client, sql, None, more).await? {
                break;
            }
            if self.state.lex_mode != split_under {
                split_under = self.state.lex_mode;
                // Past the statement and its `;`.
                offset += range.end;
                if text.get(offset) == Some(&b';') {
                    offset += 1;
                }
                pieces = split_query(&text[offset..], split_under).into();
            }
        }
        Ok(())
    }

    /// A query of one statement, already lexed.
    async fn only_statement(
        &mut self,
        client: &mut Client,
        sql: &[u8],
        lexed: Lexed,
    ) -> Result<(), ProxyError> {
        self.each_statement(client, sql, Some(lexed), MoreResults::None)
            .await?;
        self.handle
            .set_activity(self.state.database.as_deref(), None);
        Ok(())
    }

    /// One statement of a query and its result or error; `false` when it failed (the
    /// query's later statements do not run).
    async fn each_statement(
        &mut self,
        client: &mut Client,
        sql: &[u8],
        lexed: Option<Lexed>,
        more: MoreResults,
    ) -> Result<bool, ProxyError> {
        let started = std::time::Instant::now();
        self.handle
            .set_activity(self.state.database.as_deref(), Some(("Query", sql)));
        let mut lexed = lexed;
        let mut fences = super::fence::Fences::default();
        let result = loop {
            let version = self.rt.config.sharding.map_version;
            let written = client.stream.packets_written();
            let result = self
                .bounded_statement(client, sql, lexed.take(), more)
                .await;
            let Err(e) = &result else { break result };
            let untouched =
                written == client.stream.packets_written() && client.held_back.is_none();
            // Boxed: the wait reads the meta datasource (a large future), rarely.
            match Box::pin(self.after_fence(&mut fences, e, version, untouched)).await {
                AfterFence::Stands => break result,
                AfterFence::RunAgain => {}
                AfterFence::Replace(e) => break Err(e),
            }
        };
        self.statement_done(sql, &result, started);
        let Err(e) = result else {
            return Ok(true);
        };
        if let ProxyError::ClientGone(_) = e {
            return Err(e);
        }
        self.state.record_error(&e);
        client.error(&e)?;
        // Connections that failed are dropped now; if one held the transaction or pinned
        // state, the session is lost.
        self.txn.release_idle();
        if let Some(why) = self.txn.lost() {
            // As if the server had gone away: the client must not go on (and commit) as if
            // its transaction or session state were intact.
            tracing::warn!(connection = self.id, reason = %why, "closing the client connection");
            return Err(ProxyError::ClientGone(why.to_owned()));
        }
        Ok(false)
    }

    /// One statement, bounded by the longest `query_timeout` of the datasources (data
    /// statements are bounded per datasource inside): no command waits forever on a
    /// backend that stopped answering.
    async fn bounded_statement(
        &mut self,
        client: &mut Client,
        sql: &[u8],
        lexed: Option<Lexed>,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        self.refresh()?;
        let limit = self
            .rt
            .config
            .datasources
            .iter()
            .map(|d| d.query_timeout)
            .max()
            .unwrap_or_default();
        if limit.is_zero() {
            return self.statement(client, sql, lexed, more).await;
        }
        // Boxed: the statement's future is several KB, copied at every move otherwise.
        let result = within(limit, Box::pin(self.statement(client, sql, lexed, more))).await;
        self.after_timeout(&result);
        result
    }

    /// One statement (`lexed`: its tokens, when the query was lexed whole).
    async fn statement(
        &mut self,
        client: &mut Client,
        sql: &[u8],
        lexed: Option<Lexed>,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        let lexed = lexed.unwrap_or_else(|| lex(sql, self.state.lex_mode));
        if lexed.tokens.iter().any(|t| t.is_punct(sql, "\0")) {
            return Err(ProxyError::client(
                ER_PARSE_ERROR,
                b"42000",
                "You have an error in your SQL syntax: a NUL byte outside a string",
            ));
        }
        let shape = self
            .state
            .memo_shape(sql, &lexed, &self.rt.config.sharding.logical_database);
        if let Some(analysis) = shape
            .as_deref()
            .and_then(|s| self.checks.memo_get(s, &self.state, self.rt.generation))
        {
            // The same shape passed the scope check, the classifier and the catalog-view
            // check in this epoch: their answers would be the same (`super::memo`).
            self.state.check_name_bytes(sql, &lexed)?;
            return self
                .run_data(client, sql, &lexed, &[], analysis, more)
                .await;
        }
        self.checks.statement(&self.state, sql, &lexed)?;
        let command = classify(sql, &lexed.tokens, self.state.lex_mode);
        self.classified_statement(client, sql, &lexed, command, shape, more)
            .await
    }

    /// A checked statement, by what the classifier made of it (`shape`: its shape when the
    /// session's memo may keep it).
    async fn classified_statement(
        &mut self,
        client: &mut Client,
        sql: &[u8],
        lexed: &Lexed,
        command: Command,
        shape: Option<Vec<u8>>,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        if command == Command::Statement
            && self.in_transaction()
            && crate::sql::implicit::commits_implicitly(sql, &lexed.tokens)
        {
            // MariaDB commits the open transaction before such a statement: on every
            // datasource at once (atomically when it has XA branches), not only where the
            // statement runs.
            self.txn.end(b"COMMIT").await?;
        }
        match command {
            Command::Statement => self.data_statement(client, sql, lexed, shape, more).await,
            // Boxed: the load's state would otherwise make every statement's future larger.
            Command::LoadDataLocal => {
                Box::pin(self.load_data_local(client, sql, lexed, more)).await
            }
            Command::Begin => self.begin(client, sql, more).await,
            Command::Commit => self.finish(client, b"COMMIT", more).await,
            Command::Rollback => self.finish(client, b"ROLLBACK", more).await,
            Command::Savepoint(name) => self.savepoint(client, sql, Some(name), None, more).await,
            Command::RollbackTo(name) => {
                self.savepoint(client, sql, None, Some((name, false)), more)
                    .await
            }
            Command::ReleaseSavepoint(name) => {
                self.savepoint(client, sql, None, Some((name, true)), more)
                    .await
            }
            Command::Set(items) => {
                let limit = self.control_timeout();
                let result = within(limit, self.set(client, sql, lexed, &items, more)).await;
                self.after_timeout(&result);
                result
            }
            Command::Use(db) => {
                let limit = self.control_timeout();
                let result = within(limit, self.use_database(client, &db, more)).await;
                self.after_timeout(&result);
                result
            }
            Command::ShowDiagnostics { errors_only, count } => {
                self.show_diagnostics(client, errors_only, count, more)
            }
            Command::ShowTables {
                database,
                like,
                filtered,
                ..
            } => {
                self.show_tables(
                    client,
                    sql,
                    database.as_deref(),
                    like.as_deref(),
                    filtered,
                    more,
                )
                .await
            }
            Command::TableInfo {
                table,
                database,
                names_in_rows,
            } => {
                self.table_info(client, sql, lexed, table, database, names_in_rows, more)
                    .await
            }
            Command::Xa => Err(ProxyError::unsupported(
                "XA statements from clients: the proxy runs XA itself (a transaction that writes on several datasources commits atomically, transactions.cross_datasource = \"atomic\"); use BEGIN ... COMMIT",
            )),
            Command::LockTables(lock) => self.lock_tables(client, &lock, more).await,
            Command::UnlockTables => self.unlock_tables(client, more).await,
            Command::ShowTableStatus { database, filter } => {
                self.show_table_status(client, sql, database.as_deref(), filter, more)
                    .await
            }
            Command::ChainOrRelease => Err(ProxyError::not_yet(
                "COMMIT/ROLLBACK with AND CHAIN or RELEASE",
            )),
            Command::Kill {
                query_only,
                id,
                own,
            } => {
                let target = if own { Some(u64::from(self.id)) } else { id };
                self.kill(client, query_only, target, more).await
            }
            Command::ShowRouteStats => self.show_route_stats(client, more),
            Command::ShowSessionStatus => self.show_session_status(client, sql, more).await,
            Command::ShowDatabases { filter } => {
                self.show_databases(client, sql, filter, more).await
            }
            Command::ShowProcesslist { full } => self.show_processlist(client, full, more),
            Command::ExplainRoute { body } => {
                self.explain_route(client, sql, body, None, more).await
            }
            Command::ShowCallers => self.show_callers(client, more),
            Command::ShowRouteShards => self.show_route_shards(client, more),
            Command::ShowRoutePools => self.show_route_pools(client, more),
            Command::ShowRouteTopology => self.show_route_topology(client, more),
            Command::ShowRouteTransactions => self.show_route_transactions(client, more),
            Command::WriteToken { column } => self.write_token(client, &column, more),
            Command::NextOrderId { region, column } => match region {
                RegionArg::Missing => self.next_order_id(client, None, &column, more).await,
                RegionArg::Literal(r) => self.next_order_id(client, Some(&r), &column, more).await,
                RegionArg::Param => Err(ProxyError::client(
                    crate::error::ER_PARSE_ERROR,
                    b"42000",
                    "You have an error in your SQL syntax; a ? placeholder is for prepared statements",
                )),
            },
            Command::Refused(what) => Err(ProxyError::unsupported(what)),
            Command::Administrative(what) => Err(ProxyError::administrative(what)),
        }
    }

    /// Bound on statements that never take long on a healthy server (SET, USE): five times
    /// the longest `connect_timeout`, so a server that stopped answering is reported soon.
    fn control_timeout(&self) -> std::time::Duration {
        self.rt
            .config
            .datasources
            .iter()
            .map(|d| d.connect_timeout)
            .max()
            .unwrap_or_default()
            * 5
    }

    /// After a timed-out command: connections left mid-command are dropped.
    fn after_timeout(&mut self, result: &Result<(), ProxyError>) {
        if let Err(ProxyError::Client { code, .. }) = result {
            if *code == crate::error::ER_STATEMENT_TIMEOUT {
                self.txn.release_idle();
            }
        }
    }

    fn ok(&mut self, client: &mut Client, more: MoreResults) -> Result<(), ProxyError> {
        self.state.warnings.clear();
        client.ok(&OkInfo {
            status: self.final_status(more),
            ..Default::default()
        })
    }

    /// BEGIN / START TRANSACTION: nothing reaches a backend until a statement does; each
    /// datasource the transaction touches starts it then, with the same text.
    async fn begin(
        &mut self,
        client: &mut Client,
        sql: &[u8],
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        let lexed = crate::sql::lexer::lex(sql, self.state.lex_mode);
        // Checked here: the text is replayed later on each datasource the transaction
        // touches, where a refusal would come too late (and leave a pending `SET
        // TRANSACTION` on a pooled connection).
        let read_only = crate::sql::characteristics::check_begin(sql, &lexed.tokens)
            .map_err(super::characteristics::syntax_error)?;
        if self.in_transaction() {
            // MySQL commits the open transaction first.
            self.txn.end(b"COMMIT").await?;
        }
        self.txn.begin(sql, read_only);
        let snapshot = lexed
            .tokens
            .windows(2)
            .any(|w| w[0].is_word(sql, "consistent") && w[1].is_word(sql, "snapshot"));
        if snapshot {
            // WITH CONSISTENT SNAPSHOT: every datasource starts its snapshot now, not when
            // the transaction first reads there (a dump sees one moment on each server).
            // `XA START` takes no snapshot: such a transaction stays plain everywhere, and
            // its writes on one datasource.
            self.txn.snapshot_everywhere();
            let all = self.rt.config.datasources.len();
            for ds in 0..all {
                let ds = crate::config::DatasourceId(ds as u16);
                if let Err(e) = self.connection(Target::primary(ds)).await {
                    self.txn.end(b"ROLLBACK").await.ok();
                    return Err(e);
                }
            }
        }
        self.ok(client, more)
    }

    /// COMMIT / ROLLBACK on every connection of the transaction.
    async fn finish(
        &mut self,
        client: &mut Client,
        sql: &[u8],
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        let single = sql == b"COMMIT" && self.txn.distributed().is_none() && self.in_transaction();
        self.txn.end(sql).await?;
        if single {
            let commits = &self.proxy.coordinator.counters.commits_single;
            commits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        self.ok(client, more)
    }

    /// SAVEPOINT, ROLLBACK TO, RELEASE SAVEPOINT on every held connection; the list of
    /// savepoints is kept so datasources that join later get them too.
    async fn savepoint(
        &mut self,
        client: &mut Client,
        sql: &[u8],
        set: Option<String>,
        back_to: Option<(String, bool)>,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        if !self.in_transaction() && self.state.autocommit {
            // Outside a transaction MySQL accepts SAVEPOINT and forgets it at once.
            if let Some((name, _)) = back_to {
                return Err(ProxyError::client(
                    ER_SP_DOES_NOT_EXIST,
                    b"42000",
                    format!("SAVEPOINT {name} does not exist"),
                ));
            }
            return self.ok(client, more);
        }
        if let Some((name, _)) = &back_to {
            if !self.txn.has_savepoint(name) {
                return Err(ProxyError::client(
                    ER_SP_DOES_NOT_EXIST,
                    b"42000",
                    format!("SAVEPOINT {name} does not exist"),
                ));
            }
        }
        if !self.txn.holds_any() && !self.state.autocommit && !self.txn.explicit() {
            // autocommit=0 with no statement yet: the savepoint opens the transaction on the
            // default datasource, as the first statement would.
            let ds = self.rt.config.sharding.default_datasource;
            self.connection(Target::primary(ds)).await?;
        }
        // Connections held from before BEGIN (a pinned session's) join the transaction
        // first: a savepoint outside it would be forgotten at once.
        let (txn, wants) = self.parts();
        txn.join_held(&wants).await?;
        self.txn.on_every_held(sql).await?;
        match (set, back_to) {
            (Some(name), _) => self.txn.savepoint_set(name),
            (None, Some((name, release))) => self.txn.savepoint_back_to(&name, release),
            (None, None) => {}
        }
        self.txn.release_idle();
        self.ok(client, more)
    }

    /// KILL [CONNECTION | QUERY] id. The client's own connection closes (with MySQL's
    /// error). Another session of the same user (of any user, for a user with
    /// `process = true`; otherwise 1095): its running statement is killed on the
    /// backend thread that runs it (over a connection of its own), and for KILL CONNECTION
    /// the session closes. Ids are never forwarded to backends, where the same number names
    /// some other thread.
    pub async fn kill(
        &mut self,
        client: &mut Client,
        query_only: bool,
        id: Option<u64>,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        let unknown = || {
            ProxyError::client(
                ER_NO_SUCH_THREAD,
                b"HY000",
                format!("Unknown thread id: {}", id.unwrap_or(0)),
            )
        };
        let target_id = id.and_then(|i| u32::try_from(i).ok()).ok_or_else(unknown)?;
        if target_id == self.id {
            if query_only {
                // As MariaDB answers: the statement killed is this KILL itself.
                return Err(ProxyError::interrupted());
            }
            // As MariaDB does: an error, then the connection closes.
            client.error(&ProxyError::client(
                ER_CONNECTION_KILLED,
                b"70100",
                "Connection was killed",
            ))?;
            return Err(ProxyError::ClientGone("killed by its own KILL".into()));
        }
        // COM_PROCESS_KILL may be the first command after a reload that took `process` away.
        self.refresh()?;
        let target = self.proxy.sessions.get(target_id).ok_or_else(unknown)?;
        if !self.checks.scope().reaches_session_of(&target.user) {
            return Err(ProxyError::client(
                crate::plan::scope::ER_KILL_DENIED_ERROR,
                b"HY000",
                format!("You are not owner of thread {target_id}"),
            ));
        }
        if query_only {
            target.kill_query();
        }
        kill_running_statement(&target).await?;
        if !query_only {
            target.kill();
        }
        self.ok(client, more)
    }
}

/// Kills the statement `target` runs on a backend now, if any, over a connection of its
/// own (`KILL QUERY` of the backend thread; never a client-given thread id).
pub async fn kill_running_statement(
    target: &crate::session_registry::SessionHandle,
) -> Result<(), ProxyError> {
    if let Some(running) = target.running() {
        // The datasources as the target session knows them: a reload may have renumbered
        // or removed datasources since its statement began.
        let config = &running.config;
        let kills = running
            .threads
            .iter()
            .map(|&(ds, member, thread)| async move {
                let datasource = config.datasource(ds).clone();
                let mut conn = crate::execute::control::own_connection(
                    &datasource,
                    Target::primary(ds),
                    member,
                    config.server.max_packet_size,
                )
                .await?;
                // The statement may have ended meanwhile: the thread is then idle and KILL
                // QUERY does nothing (or the thread is gone: 1094, ignored).
                let _ = conn
                    .execute(format!("KILL QUERY {thread}").as_bytes())
                    .await;
                Ok::<(), ProxyError>(())
            });
        for result in futures_util::future::join_all(kills).await {
            result?;
        }
    }
    Ok(())
}

/// Runs `f`, or gives the statement-timeout error after `limit`.
async fn within(
    limit: Duration,
    f: impl Future<Output = Result<(), ProxyError>>,
) -> Result<(), ProxyError> {
    match tokio::time::timeout(limit, f).await {
        Ok(result) => result,
        Err(_) => Err(ProxyError::client(
            crate::error::ER_STATEMENT_TIMEOUT,
            b"70100",
            format!("Query execution was interrupted (no answer from a backend within {limit:?})"),
        )),
    }
}
