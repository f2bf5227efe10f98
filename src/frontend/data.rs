//! Data statements: analyse (or reuse the analysis of the same shape), route, rewrite per
//! shard, run on the shards' datasources, relay.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use mysql_common::constants::{Command, StatusFlags};

use super::client::Client;
use super::session::{Diagnostic, Session};
use crate::backend::relay::{Outcome, relay};
use crate::config::DatasourceId;
use crate::error::ProxyError;
use crate::protocol::packets::OkInfo;
use crate::rewrite::{ResultNames, Statement as Rewrite, quote_ident};
use crate::route::value::StatementValues;
use crate::route::{Route, RoutePlan};
use crate::sql::analyze::{
    AnalyzeContext, analyze, sharded_table_tokens, token_mentions_sharded_table,
};
use crate::sql::hints::route_hints;
use crate::sql::lexer::{Lexed, TokenKind};
use crate::sql::shape::shape_key;
use crate::sql::{Analysis, Refusal, Target, Verb};

/// One backend statement of a client statement.
pub struct Piece {
    /// Where it runs.
    pub datasource: DatasourceId,
    /// The statement text: sent as COM_QUERY, or prepared on the backend connection.
    pub sql: Vec<u8>,
    /// How result columns are renamed (sharded statements).
    pub names: Option<ResultNames>,
    /// Text or binary protocol.
    pub send: Send,
}

/// How a piece reaches its backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Send {
    /// COM_QUERY with the text.
    Query,
    /// COM_STMT_EXECUTE of the text prepared on the connection, with these parameters of
    /// the client's execution (indices, in order), those in `nulled` sent as NULL.
    Execute {
        /// Parameters sent.
        params: Vec<usize>,
        /// Parameters sent as NULL (an unresolved read's order ids).
        nulled: Vec<usize>,
    },
}

/// The parameters of a prepared statement's execution.
pub struct Binding<'a> {
    /// The client's COM_STMT_EXECUTE payload (values are ranges of it).
    pub payload: &'a [u8],
    /// The parameters.
    pub params: &'a [crate::protocol::binary::BoundParam],
    /// Their values as the router reads them.
    pub values: &'a [crate::route::value::ParamValue],
    /// Long data per parameter (COM_STMT_SEND_LONG_DATA).
    pub long_data: &'a [Option<super::prepared::LongData>],
}

/// A data statement's text: what is routed, and a prefix sent ahead of it to every shard
/// (`SET STATEMENT ... FOR `).
pub struct StatementText<'a> {
    /// The statement that is analysed and rewritten.
    pub sql: &'a [u8],
    /// Its tokens.
    pub lexed: &'a Lexed,
    /// Bytes sent before it, unchanged.
    pub prefix: &'a [u8],
}

/// Where the statement of `SET STATEMENT ... FOR <statement>` starts.
fn set_statement_body(sql: &[u8], lexed: &Lexed) -> Option<usize> {
    let tokens = &lexed.tokens;
    if !(tokens.first()?.is_word(sql, "set") && tokens.get(1)?.is_word(sql, "statement")) {
        return None;
    }
    let mut depth = 0i32;
    for (i, t) in tokens.iter().enumerate() {
        if t.is_punct(sql, "(") {
            depth += 1;
        } else if t.is_punct(sql, ")") {
            depth -= 1;
        } else if depth == 0 && t.is_word(sql, "for") {
            return tokens.get(i + 1).map(|t| t.range.start);
        }
    }
    None
}

/// A prepared INSERT's execution with the ids the proxy issued for its rows appended as
/// parameters (BIGINT UNSIGNED, numbered after the client's: row n is parameter
/// `client params + n`), so every execution binds its ids to the same backend statement.
fn bind_issued_ids(
    b: &Binding<'_>,
    ids: &[u64],
) -> (
    Vec<u8>,
    Vec<crate::protocol::binary::BoundParam>,
    Vec<Option<super::prepared::LongData>>,
) {
    let mut payload = b.payload.to_vec();
    let mut params = b.params.to_vec();
    for id in ids {
        let start = payload.len();
        payload.extend_from_slice(&id.to_le_bytes());
        params.push(crate::protocol::binary::BoundParam {
            null: false,
            kind: (8, crate::protocol::binary::UNSIGNED),
            value: start..payload.len(),
            long_data: false,
        });
    }
    let mut long_data = b.long_data.to_vec();
    long_data.resize(params.len(), None);
    (payload, params, long_data)
}

/// Session values a statement changes on its backend connection that its OK packet does
/// not carry: read back right after it runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Extras {
    /// `SQL_CALC_FOUND_ROWS`: `FOUND_ROWS()` comes from the server.
    pub calc_found_rows: bool,
    /// `LAST_INSERT_ID(expr)`.
    pub sets_insert_id: bool,
    /// The first id the proxy issued for an INSERT without the shard key: the statement's
    /// last insert id (OK packet, `LAST_INSERT_ID()`), as for an AUTO_INCREMENT column.
    pub issued_id: Option<u64>,
}

/// Marks a session's statement as running on a backend thread while it lives.
struct Running<'a>(&'a crate::frontend::registry::SessionHandle);

impl<'a> Running<'a> {
    fn new(
        handle: &'a crate::frontend::registry::SessionHandle,
        config: &Arc<crate::config::Config>,
        datasource: DatasourceId,
        thread: u32,
    ) -> Self {
        handle.set_running(Some(crate::frontend::registry::Running {
            config: config.clone(),
            datasource,
            thread,
        }));
        Self(handle)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.set_running(None);
    }
}

/// Keywords of statements that only read.
const READ_VERBS: [&str; 7] = [
    "select", "show", "describe", "desc", "explain", "help", "do",
];

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Session {
    /// Runs a data statement and writes its result.
    pub async fn data_statement(
        &mut self,
        client: &mut Client,
        sql: &[u8],
        lexed: &Lexed,
        more: bool,
    ) -> Result<(), ProxyError> {
        let hints = route_hints(sql, &lexed.comments).map_err(ProxyError::unroutable)?;
        // SET STATEMENT var = value FOR <statement> (Connector/J's query timeout): the
        // statement is routed and rewritten; the prefix goes with it to each shard.
        let (prefix, sql, inner_lexed) = match set_statement_body(sql, lexed) {
            Some(start) => {
                let (prefix, inner) = sql.split_at(start);
                (
                    prefix,
                    inner,
                    Some(crate::sql::lexer::lex(inner, self.lex_mode)),
                )
            }
            None => (&[][..], sql, None),
        };
        let lexed = inner_lexed.as_ref().unwrap_or(lexed);
        let analysis = self.analysis(sql, lexed)?;
        if let Target::Refused(Refusal::Unparsed(message)) = &analysis.target {
            return Err(self.validate_unparsed(sql, lexed, message).await);
        }
        let text = StatementText { sql, lexed, prefix };
        self.run_data(client, &text, &analysis, &hints, None, more)
            .await
    }

    /// Routes, rewrites and runs an analysed data statement, as text or (with a binding) as
    /// a prepared statement's execution.
    #[allow(clippy::too_many_arguments)]
    pub async fn run_data(
        &mut self,
        client: &mut Client,
        text: &StatementText<'_>,
        analysis: &Analysis,
        hints: &crate::sql::hints::RouteHints,
        binding: Option<&Binding<'_>>,
        more: bool,
    ) -> Result<(), ProxyError> {
        let (sql, lexed) = (text.sql, text.lexed);
        let mut values = StatementValues {
            sql,
            tokens: &lexed.tokens,
            mode: self.lex_mode,
            params: binding.map_or(&[], |b| b.values),
            last_insert_id: self.last_insert_id,
            generated: &[],
        };
        let generated = self.issue_for_insert(analysis, &values, hints).await?;
        values.generated = &generated;
        let plan = self
            .rt
            .router
            .route(analysis, &values, hints, now_ms())
            .await?;
        if analysis.verb == Verb::Ddl && self.in_transaction() {
            // DDL commits the open transaction first, as MySQL does.
            self.end_transaction(b"COMMIT").await?;
        }
        if plan.route == Route::NoRows {
            return self.no_rows(client, more);
        }
        let mut pieces = self.pieces(sql, lexed, analysis, &plan, binding.is_some(), &generated);
        if !text.prefix.is_empty() {
            for piece in &mut pieces {
                piece.sql.splice(0..0, text.prefix.iter().copied());
            }
        }
        let write = is_write(analysis, sql, lexed);
        // Refused writes leave no index rows behind.
        self.check_pieces(&pieces, write)?;
        for (id, channel) in &plan.index_writes {
            self.rt.router.write_index(*id, *channel).await?;
        }
        if analysis.pins {
            self.pinned = true;
        }
        let extras = Extras {
            calc_found_rows: lexed
                .tokens
                .iter()
                .any(|t| t.is_word(sql, "sql_calc_found_rows")),
            // LAST_INSERT_ID(expr) sets the session's value, even in a SELECT.
            sets_insert_id: lexed.tokens.windows(3).any(|w| {
                w[0].is_word(sql, "last_insert_id")
                    && w[1].is_punct(sql, "(")
                    && !w[2].is_punct(sql, ")")
            }),
            issued_id: generated.first().copied(),
        };
        match binding {
            Some(b) if !generated.is_empty() => {
                let (payload, params, long_data) = bind_issued_ids(b, &generated);
                let extended = Binding {
                    payload: &payload,
                    params: &params,
                    values: b.values,
                    long_data: &long_data,
                };
                self.run(client, &pieces, write, extras, Some(&extended), more)
                    .await
            }
            _ => {
                self.run(client, &pieces, write, extras, binding, more)
                    .await
            }
        }
    }

    /// The statement's analysis: kept by shape, or made now.
    pub(super) fn analysis(&self, sql: &[u8], lexed: &Lexed) -> Result<Arc<Analysis>, ProxyError> {
        let db_is_logical = self.in_logical_database();
        let key = shape_key(sql, lexed, self.lex_mode, db_is_logical);
        if let Some(a) = self.rt.analyses.get(&key) {
            return Ok(a);
        }
        let cx = AnalyzeContext {
            config: &self.rt.config,
            db_is_logical,
            decoding: self.decoding,
            pipes_as_concat: self.lex_mode.pipes_as_concat,
        };
        match analyze(sql, lexed, cx) {
            Ok(analyzed) => {
                let analysis = Arc::new(analyzed.analysis);
                if analyzed.cacheable {
                    self.rt.analyses.insert(key, analysis.clone());
                }
                Ok(analysis)
            }
            Err(parse_error) => {
                if token_mentions_sharded_table(sql, &lexed.tokens, cx) {
                    return Ok(Arc::new(Analysis {
                        verb: Verb::Other,
                        target: Target::Refused(Refusal::Unparsed(parse_error)),
                        session_fns: Vec::new(),
                        pins: false,
                    }));
                }
                // Valid MySQL the parser does not know passes through to the default
                // datasource; invalid SQL gets the server's own error there.
                Ok(Arc::new(Analysis {
                    verb: Verb::Other,
                    target: Target::Unsharded,
                    session_fns: Vec::new(),
                    pins: lexed.tokens.iter().any(|t| t.is_punct(sql, ":=")),
                }))
            }
        }
    }

    /// A statement the parser cannot read names a sharded table: the first shard's server
    /// prepares it (with physical names) without running it. A syntax error there is the
    /// client's answer, as MySQL would give it; valid MySQL is refused as not yet routable.
    pub(super) async fn validate_unparsed(
        &mut self,
        sql: &[u8],
        lexed: &Lexed,
        message: &str,
    ) -> ProxyError {
        let config = self.rt.config.clone();
        let cx = AnalyzeContext {
            config: &config,
            db_is_logical: self.in_logical_database(),
            decoding: self.decoding,
            pipes_as_concat: self.lex_mode.pipes_as_concat,
        };
        let shard = &config.sharding.shards[self.rt.router.first_shard() as usize];
        let mut rewritten = Vec::with_capacity(sql.len() + 32);
        let mut at = 0;
        for (span, table) in sharded_table_tokens(sql, &lexed.tokens, cx) {
            let start = lexed.tokens[span.first as usize].range.start;
            let end = lexed.tokens[span.last as usize].range.end;
            rewritten.extend_from_slice(&sql[at..start]);
            let physical = &shard.tables[usize::from(table.0)];
            rewritten.extend_from_slice(
                format!("{}.{}", quote_ident(&shard.database), quote_ident(physical)).as_bytes(),
            );
            at = end;
        }
        rewritten.extend_from_slice(&sql[at..]);
        let checked = match self.connection(shard.datasource).await {
            Ok(conn) => conn.prepare_check(&rewritten).await,
            Err(e) => Err(e),
        };
        self.release_idle();
        match checked {
            Err(e) => e,
            Ok(()) => ProxyError::not_yet(format!(
                "statements on sharded tables that its SQL parser cannot read (parser: {message})"
            )),
        }
    }

    fn pieces(
        &self,
        sql: &[u8],
        lexed: &Lexed,
        analysis: &Analysis,
        plan: &RoutePlan,
        binary: bool,
        generated: &[u64],
    ) -> Vec<Piece> {
        let config = &self.rt.config;
        let st = Rewrite {
            sql,
            tokens: &lexed.tokens,
        };
        let mut values = self.session_values();
        values.generated_ids = generated.to_vec();
        values.generated_as_params = binary;
        // Placeholders by token, in order: parameter i is the i-th `?`.
        let placeholders: Vec<usize> = lexed
            .tokens
            .iter()
            .enumerate()
            .filter(|(_, t)| t.kind == crate::sql::lexer::TokenKind::Placeholder)
            .map(|(i, _)| i)
            .collect();
        let all_params = || (0..placeholders.len()).collect::<Vec<_>>();
        let send = |params: Vec<usize>, nulled: Vec<usize>| {
            if binary {
                Send::Execute { params, nulled }
            } else {
                Send::Query
            }
        };
        let Target::Sharded(sharded) = &analysis.target else {
            return vec![Piece {
                datasource: config.sharding.default_datasource,
                sql: st.unsharded(analysis, &values).into_owned(),
                names: None,
                send: send(all_params(), Vec::new()),
            }];
        };
        // The parameters an INSERT piece keeps: those outside the rows, and those of its rows;
        // with the ids the proxy issued for rows without the shard key (bound as parameters
        // numbered after the client's, see `Session::bind_issued_ids`) at their rows' starts.
        let issued_at = |row: usize| -> Option<u32> {
            match (sharded.key_insert?, binary && !generated.is_empty()) {
                (crate::sql::KeyInsert::ColumnList { .. }, true) => {
                    Some(sharded.rows.get(row)?.span.first)
                }
                (crate::sql::KeyInsert::Assignments { after }, true) => Some(after),
                _ => None,
            }
        };
        let params_of_rows = |rows: &[usize]| -> Vec<usize> {
            let all_rows: Vec<usize>;
            let rows = if rows.is_empty() {
                all_rows = (0..sharded.rows.len()).collect();
                &all_rows[..]
            } else {
                rows
            };
            let in_piece = |tok: u32| match sharded.values_span {
                Some(span) if (span.first..=span.last).contains(&tok) => rows.iter().any(|&r| {
                    let row = sharded.rows[r].span;
                    (row.first..=row.last).contains(&tok)
                }),
                _ => true,
            };
            let mut ordered: Vec<(u32, usize)> = placeholders
                .iter()
                .enumerate()
                .filter(|(_, tok)| in_piece(**tok as u32))
                .map(|(i, tok)| (*tok as u32, i))
                .collect();
            ordered.extend(
                rows.iter()
                    .filter_map(|&r| Some((issued_at(r)?, placeholders.len() + r))),
            );
            ordered.sort_unstable();
            ordered.into_iter().map(|(_, i)| i).collect()
        };
        let key_params: Vec<usize> = sharded
            .key_values
            .iter()
            .filter_map(|v| match v {
                crate::sql::ValueSlot::Param(i) => Some(*i as usize),
                _ => None,
            })
            .collect();
        let one = |shard: u32, rows: &[usize], null_keys: bool| {
            let s = &config.sharding.shards[shard as usize];
            Piece {
                datasource: s.datasource,
                sql: st.for_shard(analysis, sharded, s, rows, null_keys, &values),
                names: Some(ResultNames::for_shard(config, s)),
                send: send(
                    params_of_rows(rows),
                    if null_keys {
                        key_params.clone()
                    } else {
                        Vec::new()
                    },
                ),
            }
        };
        match &plan.route {
            Route::Shards(targets) => targets
                .iter()
                .map(|t| one(t.shard, &t.rows, false))
                .collect(),
            Route::Empty { shard } => vec![one(*shard, &[], true)],
            Route::Unsharded | Route::NoRows => Vec::new(),
        }
    }

    /// A write that matches no row: MySQL's OK (no info: the server has none for an
    /// impossible WHERE either), without touching a backend.
    fn no_rows(&mut self, client: &mut Client, more: bool) -> Result<(), ProxyError> {
        self.row_count = 0;
        self.warnings.clear();
        client.ok(&OkInfo {
            status: self.final_status(more),
            ..Default::default()
        })
    }

    /// Status flags of a statement's final packet.
    pub fn final_status(&self, more: bool) -> u16 {
        let mut status = self.status();
        if more {
            status |= StatusFlags::SERVER_MORE_RESULTS_EXISTS.bits();
        }
        status
    }

    /// Refuses a write whose pieces lie on more than one datasource, or that the session's
    /// transaction cannot take (see `check_write`).
    fn check_pieces(&self, pieces: &[Piece], write: bool) -> Result<(), ProxyError> {
        if !write {
            return Ok(());
        }
        let ds = pieces[0].datasource;
        if pieces.iter().any(|p| p.datasource != ds) {
            return Err(ProxyError::not_yet(
                "a write whose rows lie on more than one datasource (atomic cross-datasource writes need XA); split it by datasource",
            ));
        }
        self.check_write(ds)
    }

    /// Runs the pieces of one statement and writes the result. Writes must stay on one
    /// datasource; several pieces of a write run as one backend transaction (or under a
    /// savepoint inside the client's transaction), so the statement is atomic.
    pub async fn run(
        &mut self,
        client: &mut Client,
        pieces: &[Piece],
        write: bool,
        extras: Extras,
        binding: Option<&Binding<'_>>,
        more: bool,
    ) -> Result<(), ProxyError> {
        self.check_pieces(pieces, write)?;
        let wrap = write && pieces.len() > 1;
        let savepoint = wrap && (self.in_transaction() || !self.autocommit);
        self.warnings.clear();
        if extras.calc_found_rows {
            self.found_rows = 0;
        }
        let mut out = Outcome::default();
        let status = self.status();
        let mut result = Ok(());
        for (i, piece) in pieces.iter().enumerate() {
            let ds = self.rt.config.datasource(piece.datasource);
            let (limit, name) = (ds.query_timeout, ds.name.clone());
            let step = self.run_piece(
                client,
                piece,
                &mut out,
                status,
                wrap && i == 0,
                savepoint,
                extras,
                binding,
            );
            result = if limit.is_zero() {
                step.await
            } else {
                match tokio::time::timeout(limit, step).await {
                    Ok(r) => r,
                    Err(_) => Err(ProxyError::client(
                        crate::error::ER_STATEMENT_TIMEOUT,
                        b"70100",
                        format!(
                            "Query execution was interrupted (routekey-proxy query_timeout of {limit:?} exceeded on datasource {name}; its connection was closed)"
                        ),
                    )),
                }
            };
            if let Err(e) = &result {
                if let Some(code) = backend_error_code(e) {
                    self.proxy.metrics.count_backend_error(&name, &code);
                }
                break;
            }
        }
        if wrap {
            let ds = pieces[0].datasource;
            let end: &[u8] = match (&result, savepoint) {
                (Ok(()), true) => b"RELEASE SAVEPOINT routekey_statement",
                (Ok(()), false) => b"COMMIT",
                (Err(_), true) => b"ROLLBACK TO SAVEPOINT routekey_statement",
                (Err(_), false) => b"ROLLBACK",
            };
            if let Some(conn) = self.held.get_mut(&ds) {
                if let Err(e) = conn.execute(end).await {
                    result = result.and(Err(e));
                }
            }
        }
        if let Err(e) = result {
            self.record_error(&e);
            let ran: Vec<DatasourceId> = pieces.iter().map(|p| p.datasource).collect();
            self.after_failed_statement(&ran);
            self.release_idle();
            return Err(e);
        }
        if write {
            self.record_write(pieces[0].datasource);
        }
        if let Some(id) = extras.issued_id {
            out.last_insert_id = id;
            self.set_last_insert_id(id);
        } else if let Some(id) = out.insert_id_set {
            self.set_last_insert_id(id);
        } else if out.last_insert_id != 0 {
            self.set_last_insert_id(out.last_insert_id);
        }
        if out.result_set {
            self.row_count = -1;
            if !extras.calc_found_rows {
                self.found_rows = out.rows;
            }
        } else {
            self.row_count = i64::try_from(out.affected_rows).unwrap_or(i64::MAX);
        }
        self.release_idle();
        let status = self.final_status(more);
        if out.result_set {
            client.rows_end(
                u16::try_from(out.warnings).unwrap_or(u16::MAX),
                status | out.statement_flags,
            )
        } else {
            client.ok(&out.ok_packet(status))
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn run_piece(
        &mut self,
        client: &mut Client,
        piece: &Piece,
        out: &mut Outcome,
        status: u16,
        begin: bool,
        savepoint: bool,
        extras: Extras,
        binding: Option<&Binding<'_>>,
    ) -> Result<(), ProxyError> {
        let handle = self.handle.clone();
        let config = self.rt.config.clone();
        let conn = self.connection(piece.datasource).await?;
        // KILL QUERY from another connection reaches this backend thread.
        let _running = Running::new(&handle, &config, piece.datasource, conn.thread_id());
        if begin {
            conn.execute(if savepoint {
                b"SAVEPOINT routekey_statement"
            } else {
                b"BEGIN"
            })
            .await?;
        }
        match (&piece.send, binding) {
            (Send::Execute { params, nulled }, Some(b)) => {
                let statement = conn.prepare_cached(&piece.sql).await?.statement;
                let bound: Vec<&crate::protocol::binary::BoundParam> =
                    params.iter().map(|&i| &b.params[i]).collect();
                // Long data goes ahead of the execution, numbered as the backend sees it.
                for (n, &i) in params.iter().enumerate() {
                    if let (Some(data), false) = (&b.long_data[i], nulled.contains(&i)) {
                        for chunk in &data.chunks {
                            let mut body = Vec::with_capacity(chunk.len() + 6);
                            body.extend_from_slice(&statement.id.to_le_bytes());
                            body.extend_from_slice(&(n as u16).to_le_bytes());
                            body.extend_from_slice(chunk);
                            conn.send_no_reply(Command::COM_STMT_SEND_LONG_DATA, &body)
                                .await?;
                        }
                    }
                }
                let is_nulled = |p: &crate::protocol::binary::BoundParam| {
                    nulled.iter().any(|&i| std::ptr::eq(&b.params[i], p))
                };
                let payload = crate::protocol::binary::build_execute(
                    statement.id,
                    b.payload,
                    &bound,
                    &is_nulled,
                );
                conn.send_raw_command(&payload).await?;
            }
            _ => conn.send_command(Command::COM_QUERY, &piece.sql).await?,
        }
        let warnings_before = out.warnings;
        let insert_id_before = out.last_insert_id;
        relay(conn, client, piece.names.as_ref(), out, status).await?;
        if out.last_insert_id != insert_id_before {
            // This connection's LAST_INSERT_ID changed: remember it as applied state.
            conn.state.vars.insert(
                "last_insert_id".to_owned(),
                out.last_insert_id.to_string().into_bytes(),
            );
        }
        if out.warnings > warnings_before {
            let (_, rows) = conn.query_rows(b"SHOW WARNINGS").await?;
            let diagnostics: Vec<Diagnostic> = rows
                .into_iter()
                .map(|r| {
                    let mut it = r.into_iter().map(Option::unwrap_or_default);
                    Diagnostic {
                        level: it.next().unwrap_or_default(),
                        code: it.next().unwrap_or_default(),
                        message: it.next().unwrap_or_default(),
                    }
                })
                .collect();
            self.warnings.extend(diagnostics);
        }
        if extras.calc_found_rows {
            let conn = self.connection(piece.datasource).await?;
            self.found_rows += scalar(conn, b"SELECT FOUND_ROWS()").await?;
        }
        if extras.sets_insert_id {
            let conn = self.connection(piece.datasource).await?;
            let id = scalar(conn, b"SELECT LAST_INSERT_ID()").await?;
            conn.state
                .vars
                .insert("last_insert_id".to_owned(), id.to_string().into_bytes());
            out.insert_id_set = Some(id);
        }
        Ok(())
    }

    /// After an error, `SHOW WARNINGS` lists it.
    pub fn record_error(&mut self, e: &ProxyError) {
        let (code, _, message) = e.to_packet_parts();
        self.warnings = vec![Diagnostic {
            level: b"Error".to_vec(),
            code: code.to_string().into_bytes(),
            message,
        }];
    }
}

/// The `code` label of `routekey_backend_errors_total` for an error met running a piece on
/// a datasource; `None` for the proxy's own refusals.
fn backend_error_code(e: &ProxyError) -> Option<String> {
    match e {
        ProxyError::Backend { code, .. } => Some(code.to_string()),
        ProxyError::Client { code, .. } if *code == crate::error::ER_STATEMENT_TIMEOUT => {
            Some("timeout".to_owned())
        }
        ProxyError::Unavailable(_) => Some("unavailable".to_owned()),
        ProxyError::Io(_) => Some("io".to_owned()),
        _ => None,
    }
}

/// The one unsigned number a query returns.
async fn scalar(conn: &mut crate::backend::BackendConn, sql: &[u8]) -> Result<u64, ProxyError> {
    let (_, rows) = conn.query_rows(sql).await?;
    Ok(rows
        .first()
        .and_then(|r| r.first().cloned().flatten())
        .and_then(|v| String::from_utf8_lossy(&v).parse().ok())
        .unwrap_or(0))
}

/// Whether a statement may change data: the datasource rule applies to writes only.
fn is_write(analysis: &Analysis, sql: &[u8], lexed: &Lexed) -> bool {
    match analysis.verb {
        Verb::Select => false,
        Verb::Insert | Verb::Update | Verb::Delete | Verb::Ddl => true,
        Verb::Other => !lexed
            .tokens
            .iter()
            .find(|t| t.kind != TokenKind::ExecCommentOpen && !t.is_punct(sql, "("))
            .is_some_and(|t| READ_VERBS.iter().any(|v| t.is_word(sql, v))),
    }
}
