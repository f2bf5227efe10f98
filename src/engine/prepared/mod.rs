//! Prepared statements (COM_STMT_PREPARE, EXECUTE, SEND_LONG_DATA, RESET, CLOSE).
//!
//! PREPARE analyses the statement once, as text statements are analysed, and answers with
//! the proxy's own statement id and the parameter and column definitions the table's first
//! shard gives (under logical names). EXECUTE routes from the bound parameters every time,
//! then runs the shard's statement prepared on the backend connection that serves it: each
//! connection keeps the statements it prepared, and prepares again after it was reset or
//! replaced. Rows are the backend's binary-protocol packets, relayed.

use super::fence::AfterFence;
use mysql_common::constants::Command as ProtocolCommand;

pub(super) mod registry;

use registry::Kind;
pub use registry::{LONG_DATA_LIMIT, MAX_PREPARED_STATEMENTS, PreparedStatement};

use crate::config::ResultNames;
use crate::engine::session::Session;
use crate::error::{
    ER_MAX_PREPARED_STMT_COUNT_REACHED, ER_STMT_HAS_NO_OPEN_CURSOR, ER_UNKNOWN_ERROR,
    ER_UNKNOWN_STMT_HANDLER, ER_UNSUPPORTED_PS, ER_WRONG_ARGUMENTS, ProxyError,
};
use crate::execute::Binding;
use crate::execute::Target;
use crate::protocol::binary::{self, LongData, param_value};
use crate::protocol::packets::{
    ColumnSpec, column_definition, eof_packet, rewrite_column_definition,
};
use crate::protocol::status::MoreResults;
use crate::rewrite::{KeyEdits, Statement as Rewrite};
use crate::sql::command::{Command, RegionArg, classify};
use crate::sql::hints::route_hints;
use crate::sql::lexer::{Lexed, TokenKind, lex};
use crate::sql::{Placement, Refusal};
use crate::wire::client::Client;

fn unknown(id: u32, command: &str) -> ProxyError {
    ProxyError::client(
        ER_UNKNOWN_STMT_HANDLER,
        b"HY000",
        format!("Unknown prepared statement handler ({id}) given to {command}"),
    )
}

/// The definition of a parameter the proxy answers itself (any value).
fn any_param() -> ColumnSpec<'static> {
    ColumnSpec {
        name: "?",
        column_type: mysql_common::constants::ColumnType::MYSQL_TYPE_VAR_STRING,
        flags: mysql_common::constants::ColumnFlags::BINARY_FLAG,
        charset: 63,
        length: 0,
        decimals: 0,
    }
}

impl Session {
    /// COM_STMT_PREPARE.
    pub async fn prepare_statement(
        &mut self,
        client: &mut Client,
        sql: &[u8],
    ) -> Result<(), ProxyError> {
        self.refresh()?;
        if self.statements.by_id.len() >= MAX_PREPARED_STATEMENTS {
            return Err(ProxyError::client(
                ER_MAX_PREPARED_STMT_COUNT_REACHED,
                b"42000",
                format!(
                    "Can't create more than max_prepared_stmt_count statements (current value: {MAX_PREPARED_STATEMENTS})"
                ),
            ));
        }
        let lexed = lex(sql, self.state.lex_mode);
        let params = lexed
            .tokens
            .iter()
            .filter(|t| t.kind == TokenKind::Placeholder)
            .count();
        self.checks.statement(&self.state, sql, &lexed)?;
        match classify(sql, &lexed.tokens, self.state.lex_mode) {
            Command::Statement => self.refuse_answered_views(sql, &lexed)?,
            Command::Administrative(what) => return Err(ProxyError::administrative(what)),
            Command::Begin
            | Command::Commit
            | Command::Rollback
            | Command::Savepoint(_)
            | Command::RollbackTo(_)
            | Command::ReleaseSavepoint(_)
            | Command::Set(_)
            | Command::Use(_)
                if params == 0 =>
            {
                let id = self.register(sql, lexed, Kind::Session, 0);
                return self.answer_prepare(client, id, 0, &[], &[], 0, None);
            }
            Command::ExplainRoute { body } => {
                crate::engine::explain::explained(sql, body, self)?;
                let param_def = bytes::BytesMut::from(&column_definition(&any_param(), "", "")[..]);
                let param_defs = vec![param_def; params];
                let column_defs: Vec<bytes::BytesMut> = self
                    .explain_columns()
                    .iter()
                    .map(|c| bytes::BytesMut::from(&column_definition(c, "", "")[..]))
                    .collect();
                let id = self.register(sql, lexed, Kind::Explain { body }, params);
                let columns = column_defs.len();
                return self.answer_prepare(
                    client,
                    id,
                    columns,
                    &param_defs,
                    &column_defs,
                    0,
                    None,
                );
            }
            Command::NextOrderId { region, column } => {
                let params = usize::from(region == RegionArg::Param);
                let column_def = bytes::BytesMut::from(
                    &column_definition(&crate::engine::ids::id_column(&column), "", "")[..],
                );
                let param_def = bytes::BytesMut::from(&column_definition(&any_param(), "", "")[..]);
                let id = self.register(sql, lexed, Kind::NextOrderId { region, column }, params);
                let param_defs = if params == 1 {
                    vec![param_def]
                } else {
                    Vec::new()
                };
                return self.answer_prepare(client, id, 1, &param_defs, &[column_def], 0, None);
            }
            _ => {
                return Err(ProxyError::client(
                    ER_UNSUPPORTED_PS,
                    b"HY000",
                    "This command is not supported in the prepared statement protocol yet",
                ));
            }
        }
        let analysis = self.analysis(sql, &lexed)?;
        if let Placement::Refused(r) = &analysis.placement {
            return Err(match r {
                Refusal::Unparsed(message) => self.validate_unparsed(sql, &lexed, message).await,
                other => crate::plan::refusal(other),
            });
        }
        let hints = route_hints(sql, &lexed.comments).map_err(ProxyError::unroutable)?;
        // The definitions come from the statement as the table's first shard (or the default
        // datasource) prepares it.
        let config = self.rt.config.clone();
        let st = Rewrite {
            sql,
            tokens: &lexed.tokens,
        };
        let values = self.session_values();
        let (ds, text, names) = match &analysis.placement {
            Placement::Sharded(plan) => {
                let shard = &config.sharding.shards[self.rt.router.first_shard() as usize];
                let keys = KeyEdits {
                    shard_key: &config.sharding.shard_key,
                    ..Default::default()
                };
                (
                    shard.datasource,
                    st.for_shard(&analysis, plan, shard, &[], &keys, &values)
                        .sql,
                    Some(shard.names.clone()),
                )
            }
            _ => (
                config.sharding.default_datasource,
                st.render(crate::rewrite::unsharded_edits(&st, &analysis, &values))
                    .sql,
                None,
            ),
        };
        let prepared = match self.connection(Target::primary(ds)).await {
            Ok(conn) => conn.prepare_cached(&text).await,
            Err(e) => Err(e),
        };
        self.txn.release_idle();
        let meta = prepared?;
        if usize::from(meta.statement.params) != params {
            return Err(ProxyError::Internal(format!(
                "the server counts {} parameters where the proxy counts {params}",
                meta.statement.params
            )));
        }
        let columns = usize::from(meta.statement.columns);
        let id = self.register(sql, lexed, Kind::Data { analysis, hints }, params);
        self.answer_prepare(
            client,
            id,
            columns,
            &meta.param_defs,
            &meta.column_defs,
            meta.warnings,
            names.as_deref(),
        )
    }

    fn register(&mut self, sql: &[u8], lexed: Lexed, kind: Kind, params: usize) -> u32 {
        let statements = &mut self.statements;
        statements.next_id = statements.next_id.wrapping_add(1).max(1);
        let id = statements.next_id;
        statements.by_id.insert(
            id,
            PreparedStatement {
                sql: sql.to_vec(),
                lexed,
                kind,
                params,
                types: None,
                long_data: vec![None; params],
                long_data_bytes: 0,
                generation: self.rt.generation,
                checked_in: None,
                cursor: None,
            },
        );
        id
    }

    #[allow(clippy::too_many_arguments)]
    fn answer_prepare(
        &mut self,
        client: &mut Client,
        id: u32,
        columns: usize,
        param_defs: &[bytes::BytesMut],
        column_defs: &[bytes::BytesMut],
        warnings: u16,
        names: Option<&ResultNames>,
    ) -> Result<(), ProxyError> {
        let mut ok = vec![0x00];
        ok.extend_from_slice(&id.to_le_bytes());
        ok.extend_from_slice(&(columns as u16).to_le_bytes());
        ok.extend_from_slice(&(param_defs.len() as u16).to_le_bytes());
        ok.push(0);
        ok.extend_from_slice(&warnings.to_le_bytes());
        client.packet(&ok)?;
        let status = self.status();
        for def in param_defs {
            client.packet(def)?;
        }
        if !param_defs.is_empty() && !client.deprecate_eof() {
            client.packet(&eof_packet(0, status))?;
        }
        for def in column_defs {
            match names.and_then(|n| rewrite_column_definition(def, n)) {
                Some(renamed) => client.packet(&renamed)?,
                None => client.packet(def)?,
            }
        }
        if !column_defs.is_empty() && !client.deprecate_eof() {
            client.packet(&eof_packet(0, status))?;
        }
        Ok(())
    }

    /// COM_STMT_EXECUTE.
    pub async fn execute_statement(
        &mut self,
        client: &mut Client,
        payload: &[u8],
    ) -> Result<(), ProxyError> {
        let id = binary::statement_id(payload).ok_or_else(|| {
            ProxyError::client(
                ER_WRONG_ARGUMENTS,
                b"HY000",
                "Incorrect arguments to mysqld_stmt_execute",
            )
        })?;
        self.refresh()?;
        let mut statement = self
            .statements
            .by_id
            .remove(&id)
            .ok_or_else(|| unknown(id, "mysqld_stmt_execute"))?;
        let started = std::time::Instant::now();
        self.handle.set_activity(
            self.state.database.as_deref(),
            Some(("Execute", &statement.sql)),
        );
        // Checked again in another epoch (`crate::engine::memo::Epoch`): a reload may have narrowed
        // the user's scope since it was prepared, and a `USE information_schema` since then
        // makes `FROM TABLES` the catalog view the proxy answers itself (the backend's would
        // show every database).
        let checked = match &statement.checked_in {
            Some(epoch) if self.checks.in_epoch(epoch, &self.state, self.rt.generation) => self
                .state
                .check_name_bytes(&statement.sql, &statement.lexed),
            _ => {
                let checked = self
                    .checks
                    .statement(&self.state, &statement.sql, &statement.lexed)
                    .and_then(|()| self.refuse_answered_views(&statement.sql, &statement.lexed));
                if checked.is_ok() {
                    statement.checked_in = Some(self.checks.epoch(&self.state, self.rt.generation));
                }
                checked
            }
        };
        // An execution closes the cursor the last one opened.
        statement.cursor = None;
        // CURSOR_TYPE_READ_ONLY: the rows wait for COM_STMT_FETCH (clients that negotiated
        // DEPRECATE_EOF get them at once, as before: their cursor protocol differs).
        let cursor = payload.get(4).is_some_and(|flags| flags & 1 != 0) && !client.deprecate_eof();
        if cursor {
            client.hold_back(
                usize::try_from(self.rt.config.sharding.merge_row_cap).unwrap_or(usize::MAX),
            );
        }
        let result = match checked {
            Ok(()) => self.execute_fenced(client, &mut statement, payload).await,
            Err(e) => Err(e),
        };
        let result = match (cursor, result) {
            (true, Ok(())) => {
                let held = client.release_held();
                statement.cursor = open_cursor(client, held)?;
                Ok(())
            }
            (true, Err(e)) => {
                client.release_held();
                Err(e)
            }
            (false, result) => result,
        };
        self.handle
            .set_activity(self.state.database.as_deref(), None);
        self.statement_done(&statement.sql, &result, started);
        // Long data is consumed by the execution, whatever its outcome.
        statement.clear_long_data();
        self.statements.by_id.insert(id, statement);
        result
    }

    /// Refuses a prepared statement naming the information_schema views the proxy answers
    /// itself (TABLES, COLUMNS, SCHEMATA, PROCESSLIST, ...) under the current database: it
    /// answers them in the text protocol only, and the backend would answer with what its
    /// account sees (SPEC §8a).
    fn refuse_answered_views(
        &self,
        sql: &[u8],
        lexed: &crate::sql::lexer::Lexed,
    ) -> Result<(), ProxyError> {
        let in_is = self
            .state
            .database
            .as_deref()
            .is_some_and(|d| d.eq_ignore_ascii_case("information_schema"));
        if crate::engine::catalog::view_refs(sql, lexed, in_is).is_empty() {
            return Ok(());
        }
        Err(crate::engine::catalog::views_refused(
            "in prepared statements: send them as text",
        ))
    }

    /// [`Session::execute_with`], run again when it met a moved shard's fence
    /// ([`super::fence`]).
    async fn execute_fenced(
        &mut self,
        client: &mut Client,
        statement: &mut PreparedStatement,
        payload: &[u8],
    ) -> Result<(), ProxyError> {
        let mut fences = super::fence::Fences::default();
        loop {
            let version = self.rt.config.sharding.map_version;
            let written = client.stream.packets_written();
            let result = self.execute_with(client, statement, payload).await;
            let Err(e) = &result else { return result };
            let untouched =
                written == client.stream.packets_written() && client.held_back.is_none();
            // Boxed: the wait reads the meta datasource (a large future), rarely.
            match Box::pin(self.after_fence(&mut fences, e, version, untouched)).await {
                AfterFence::Stands => return result,
                AfterFence::RunAgain => {}
                AfterFence::Replace(e) => return Err(e),
            }
        }
    }

    async fn execute_with(
        &mut self,
        client: &mut Client,
        statement: &mut PreparedStatement,
        payload: &[u8],
    ) -> Result<(), ProxyError> {
        if statement.long_data.iter().flatten().any(|d| d.overflow) {
            return Err(ProxyError::client(
                ER_UNKNOWN_ERROR,
                b"HY000",
                format!(
                    "Parameter of prepared statement which is set through mysql_send_long_data() is longer than 'max_allowed_packet' bytes (routekey-proxy buffers at most {} MiB of long data per statement)",
                    LONG_DATA_LIMIT >> 20
                ),
            ));
        }
        let long: Vec<bool> = statement.long_data.iter().map(Option::is_some).collect();
        let execute =
            binary::parse_execute(payload, statement.params, statement.types.as_deref(), &long)
                .map_err(|m| {
                    ProxyError::client(
                        ER_WRONG_ARGUMENTS,
                        b"HY000",
                        format!("Incorrect arguments to mysqld_stmt_execute: {m}"),
                    )
                })?;
        if execute.types_sent {
            statement.types = Some(execute.params.iter().map(|p| p.kind).collect());
        }
        match &statement.kind {
            Kind::Session => {
                let sql = statement.sql.clone();
                self.query(client, &sql).await
            }
            Kind::Explain { body } => {
                let values: Vec<_> = execute
                    .params
                    .iter()
                    .map(|p| param_value(payload, p))
                    .collect();
                let (sql, body) = (statement.sql.clone(), *body);
                self.explain_route(client, &sql, body, Some(&values), MoreResults::None)
                    .await
            }
            Kind::NextOrderId { region, column } => {
                let region = match region {
                    RegionArg::Missing => None,
                    RegionArg::Literal(r) => Some(r.clone()),
                    RegionArg::Param => {
                        match execute.params.first().map(|p| param_value(payload, p)) {
                            Some(crate::protocol::binary::ParamValue::Bytes(b)) => {
                                Some(String::from_utf8_lossy(&b).into_owned())
                            }
                            _ => None,
                        }
                    }
                };
                let column = column.clone();
                self.next_order_id_binary(client, region.as_deref(), &column)
                    .await
            }
            Kind::Data { analysis, hints } => {
                let values: Vec<_> = execute
                    .params
                    .iter()
                    .map(|p| param_value(payload, p))
                    .collect();
                let binding = Binding {
                    payload,
                    params: &execute.params,
                    long_data: &statement.long_data,
                };
                let analysis = if statement.generation == self.rt.generation {
                    analysis.clone()
                } else {
                    self.analysis(&statement.sql, &statement.lexed)?
                };
                let prepared = crate::engine::statement::Prepared {
                    text: crate::plan::Text {
                        sql: &statement.sql,
                        tokens: &statement.lexed.tokens,
                        prefix: &[],
                    },
                    analysis,
                    hints: hints.clone(),
                    params: &values,
                    binary: true,
                };
                let plan = self.plan(&prepared, false).await?;
                self.execute(client, &plan, &prepared, Some(&binding), MoreResults::None)
                    .await
            }
        }
    }

    /// COM_STMT_SEND_LONG_DATA (no reply): buffered until the next execution.
    pub fn long_data(&mut self, body: &[u8]) {
        let Some(binary::LongDataChunk {
            statement_id: id,
            param,
            data: chunk,
        }) = binary::parse_long_data(body)
        else {
            return;
        };
        if let Some(s) = self.statements.by_id.get_mut(&id) {
            let fits = s.long_data_bytes + chunk.len() <= LONG_DATA_LIMIT;
            if let Some(slot) = s.long_data.get_mut(param) {
                let data = slot.get_or_insert_with(LongData::default);
                if fits && !data.overflow {
                    data.chunks.push(chunk.to_vec());
                    s.long_data_bytes += chunk.len();
                } else {
                    s.long_data_bytes -= data.chunks.iter().map(Vec::len).sum::<usize>();
                    data.chunks = Vec::new();
                    data.overflow = true;
                }
            }
        }
    }

    /// COM_STMT_RESET: forgets buffered long data.
    pub fn reset_statement(&mut self, client: &mut Client, body: &[u8]) -> Result<(), ProxyError> {
        let id = binary::statement_id(body).unwrap_or(0);
        let s = self
            .statements
            .by_id
            .get_mut(&id)
            .ok_or_else(|| unknown(id, "mysqld_stmt_reset"))?;
        s.clear_long_data();
        s.cursor = None;
        client.ok(&crate::protocol::packets::OkInfo {
            status: self.status(),
            ..Default::default()
        })
    }

    /// COM_STMT_CLOSE (no reply).
    pub fn close_statement(&mut self, body: &[u8]) {
        if let Some(id) = binary::statement_id(body) {
            self.statements.by_id.remove(&id);
        }
    }

    /// COM_STMT_FETCH: the next rows of the statement's cursor, at most as many as asked
    /// for, then an EOF that says whether the cursor is still open (`CURSOR_EXISTS`) or
    /// its last row went (`LAST_ROW_SENT`: fewer rows were left than asked for; the
    /// cursor is closed), as MariaDB answers.
    pub fn fetch(&mut self, client: &mut Client, body: &[u8]) -> Result<(), ProxyError> {
        let id = binary::statement_id(body).unwrap_or(0);
        let asked = body
            .get(4..8)
            .map_or(0, |b| u32::from_le_bytes(b.try_into().expect("4 bytes")));
        let status = self.status();
        let statement = self
            .statements
            .by_id
            .get_mut(&id)
            .ok_or_else(|| unknown(id, "mysqld_stmt_fetch"))?;
        let Some(rows) = statement.cursor.as_mut() else {
            return Err(ProxyError::client(
                ER_STMT_HAS_NO_OPEN_CURSOR,
                b"HY000",
                format!("The statement ({id}) has no open cursor."),
            ));
        };
        let mut sent = 0;
        while sent < asked {
            let Some(row) = rows.pop_front() else {
                break;
            };
            client.packet(&row)?;
            sent += 1;
        }
        let flag = if sent < asked {
            statement.cursor = None;
            crate::protocol::status::LAST_ROW_SENT
        } else {
            crate::protocol::status::CURSOR_EXISTS
        };
        client.rows_end(0, status | flag)
    }

    /// Sends nothing: a helper so the command loop names every statement command.
    pub fn statement_command(code: u8) -> Option<ProtocolCommand> {
        [
            ProtocolCommand::COM_STMT_PREPARE,
            ProtocolCommand::COM_STMT_EXECUTE,
            ProtocolCommand::COM_STMT_SEND_LONG_DATA,
            ProtocolCommand::COM_STMT_CLOSE,
            ProtocolCommand::COM_STMT_RESET,
            ProtocolCommand::COM_STMT_FETCH,
        ]
        .into_iter()
        .find(|c| *c as u8 == code)
    }
}

/// Answers an execution that asked for a cursor from its reply held back: a single result
/// set's column definitions go now, with `CURSOR_EXISTS` in the EOF after them, and its
/// rows are kept for COM_STMT_FETCH (MariaDB materializes a cursor too). Any other reply
/// (an OK, several results of a `CALL`) goes as it is, and opens no cursor.
fn open_cursor(
    client: &mut Client,
    held: Vec<Vec<u8>>,
) -> Result<Option<std::collections::VecDeque<Vec<u8>>>, ProxyError> {
    use crate::protocol::packets::{is_eof, parse_eof, read_lenenc_int};
    let single = || -> Option<(usize, usize)> {
        let first = held.first()?;
        if first.first() == Some(&0x00) {
            return None;
        }
        let columns = usize::try_from(read_lenenc_int(first, &mut 0)?).ok()?;
        let end = held.len().checked_sub(1)?;
        let columns_eof = columns + 1;
        let closed = held.get(columns_eof).is_some_and(|p| is_eof(p))
            && is_eof(&held[end])
            && end > columns_eof
            && parse_eof(&held[end]).1 & crate::protocol::status::MORE_RESULTS_EXISTS == 0;
        closed.then_some((columns_eof, end))
    };
    let Some((columns_eof, end)) = single() else {
        for packet in &held {
            client.packet(packet)?;
        }
        return Ok(None);
    };
    for packet in &held[..columns_eof] {
        client.packet(packet)?;
    }
    let (warnings, status) = parse_eof(&held[columns_eof]);
    client.packet(&crate::protocol::packets::eof_packet(
        warnings,
        status | crate::protocol::status::CURSOR_EXISTS,
    ))?;
    let mut held = held;
    held.truncate(end);
    Ok(Some(held.into_iter().skip(columns_eof + 1).collect()))
}
