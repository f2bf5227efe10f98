//! Data statements, in three steps: **plan** (analyse, or reuse the analysis of the same
//! shape; issue ids an INSERT needs; [`crate::plan::plan`]), here; **execute** (apply the
//! plan's effects, run its steps by its primitive: [`super::run`]) and **respond** (relay
//! or merge the replies to the client: [`super::respond`]).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::session::Session;
use crate::error::ProxyError;
use crate::execute::Target;
use crate::merge::columns::ColumnCache;
use crate::plan::{Inputs, Plan, ScatterPolicy, Text};
use crate::protocol::binary::ParamValue;
use crate::protocol::status::MoreResults;
use crate::route::value::StatementValues;
use crate::sql::analyze::{AnalyzeContext, analyze, token_mentions_sharded_table};
use crate::sql::hints::{RouteHints, route_hints};
use crate::sql::lexer::{Lexed, TokenKind};
use crate::sql::shape::shape_key;
use crate::sql::{Analysis, Placement, Refusal, Verb};
use crate::wire::client::Client;

/// Keywords of statements that only read.
const READ_VERBS: [&str; 7] = [
    "select", "show", "describe", "desc", "explain", "help", "do",
];

/// Where the statement of `SET STATEMENT ... FOR <statement>` starts.
fn set_statement_body(sql: &[u8], lexed: &Lexed) -> Option<usize> {
    let tokens = &lexed.tokens;
    if !(tokens.first()?.is_word(sql, "set") && tokens.get(1)?.is_word(sql, "statement")) {
        return None;
    }
    let i = crate::sql::command::set_statement_for(sql, tokens)?;
    tokens.get(i + 1).map(|t| t.range.start)
}

pub(super) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A data statement as it is planned: its text and prefix, analysis and hints, and for a
/// prepared statement's execution its bound values.
pub(super) struct Prepared<'a> {
    pub text: Text<'a>,
    pub analysis: Arc<Analysis>,
    pub hints: RouteHints,
    pub params: &'a [ParamValue],
    /// A prepared statement's execution (binary protocol).
    pub binary: bool,
}

impl Session {
    /// Runs a data statement and writes its result. `shape` is its shape when the
    /// session's memo may keep it ([`super::memo`]).
    pub(super) async fn data_statement(
        &mut self,
        client: &mut Client,
        sql: &[u8],
        lexed: &Lexed,
        shape: Option<Vec<u8>>,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        let (prefix, sql, inner) = match set_statement_body(sql, lexed) {
            // SET STATEMENT var = value FOR <statement> (Connector/J's query timeout): the
            // statement is routed and rewritten; the prefix goes with it to each shard.
            Some(start) => {
                let (prefix, inner) = sql.split_at(start);
                (
                    prefix,
                    inner,
                    Some(crate::sql::lexer::lex(inner, self.state.lex_mode)),
                )
            }
            None => (&[][..], sql, None),
        };
        let lexed = inner.as_ref().unwrap_or(lexed);
        let in_is = self
            .state
            .database
            .as_deref()
            .is_some_and(|d| d.eq_ignore_ascii_case("information_schema"));
        let refs = super::catalog::view_refs(sql, lexed, in_is);
        if !refs.is_empty() {
            // The proxy answers these views itself; passed on, the backend would answer
            // with what its account sees of the whole server (SPEC §8a).
            let cx = self.analyze_context();
            if !prefix.is_empty() || token_mentions_sharded_table(sql, &lexed.tokens, cx) {
                return Err(super::catalog::views_refused(
                    "in statements on sharded tables or under SET STATEMENT",
                ));
            }
            return self
                .catalog_statement(client, sql, lexed, &refs, more)
                .await;
        }
        let analysis = match shape {
            Some(shape) if prefix.is_empty() => {
                let (analysis, shared) = self.analysis_of_shape(sql, lexed, &shape)?;
                if shared {
                    self.checks.memo_insert(
                        shape,
                        analysis.clone(),
                        &self.state,
                        self.rt.generation,
                    );
                }
                analysis
            }
            _ => self.analysis(sql, lexed)?,
        };
        self.run_data(client, sql, lexed, prefix, analysis, more)
            .await
    }

    /// Plans, runs and answers a data statement with its analysis (from the session's memo
    /// when its shape is there: [`super::memo`]).
    pub(super) async fn run_data(
        &mut self,
        client: &mut Client,
        sql: &[u8],
        lexed: &Lexed,
        prefix: &[u8],
        analysis: Arc<Analysis>,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        let hints = route_hints(sql, &lexed.comments).map_err(ProxyError::unroutable)?;
        let statement = self
            .prepared(sql, lexed, prefix, &[], hints, analysis)
            .await?;
        let plan = self.plan(&statement, false).await?;
        self.execute(client, &plan, &statement, None, more).await
    }

    /// Analyses a data statement (refusals included) and reads its hints.
    pub(super) async fn prepare_data<'a>(
        &mut self,
        sql: &'a [u8],
        lexed: &'a Lexed,
        prefix: &'a [u8],
        params: &'a [ParamValue],
    ) -> Result<Prepared<'a>, ProxyError> {
        let hints = route_hints(sql, &lexed.comments).map_err(ProxyError::unroutable)?;
        let analysis = self.analysis(sql, lexed)?;
        self.prepared(sql, lexed, prefix, params, hints, analysis)
            .await
    }

    /// A data statement with its hints and analysis, ready to plan; a statement the parser
    /// could not read is refused here with the reason.
    async fn prepared<'a>(
        &mut self,
        sql: &'a [u8],
        lexed: &'a Lexed,
        prefix: &'a [u8],
        params: &'a [ParamValue],
        hints: RouteHints,
        analysis: Arc<Analysis>,
    ) -> Result<Prepared<'a>, ProxyError> {
        if let Placement::Refused(Refusal::Unparsed(message)) = &analysis.placement {
            return Err(self.validate_unparsed(sql, lexed, message).await);
        }
        Ok(Prepared {
            text: Text {
                sql,
                tokens: &lexed.tokens,
                prefix,
            },
            analysis,
            hints,
            params,
            binary: false,
        })
    }

    /// Plans a statement: the ids an INSERT without order ids needs are issued first
    /// (unless `explain`), then [`crate::plan::plan`] decides everything else.
    pub(super) async fn plan(
        &mut self,
        s: &Prepared<'_>,
        explain: bool,
    ) -> Result<Plan, ProxyError> {
        let mut values = StatementValues {
            sql: s.text.sql,
            tokens: s.text.tokens,
            mode: self.state.lex_mode,
            params: s.params,
            last_insert_id: self.state.last_insert_id,
            generated: &[],
        };
        let generated = if explain {
            Vec::new()
        } else {
            self.issue_for_insert(&s.analysis, &values, &s.hints)
                .await?
        };
        values.generated = &generated;
        let user = self.rt.config.user(&self.user);
        let session = self.session_values();
        let scope = self.checks.scope();
        let inputs = Inputs {
            text: s.text,
            analysis: &s.analysis,
            values,
            hints: &s.hints,
            session: &session,
            binary: s.binary,
            scatter: ScatterPolicy {
                reads: user.is_none_or(|u| u.scatter == crate::config::Scatter::Allow),
                writes: user.is_some_and(|u| u.scatter_writes == crate::config::Scatter::Allow),
            },
            now_ms: now_ms(),
            scope: Some(&*scope),
        };
        let mut plan = match crate::plan::plan(&self.rt.router, &inputs).await {
            Ok(plan) => plan,
            Err(refused) => {
                // A refused statement's resolutions still count (an unresolved write, its
                // index lookup); EXPLAIN ROUTE counts nothing.
                if !explain {
                    self.rt.router.apply(&refused.effects).await;
                }
                return Err(refused.error);
            }
        };
        plan.write = plan.write || is_write(&s.analysis, s.text.sql, s.text.tokens);
        if plan.write {
            match &plan.steps[..] {
                [] => {}
                [one] => self.txn.check_write(one.datasource, &self.rt.config)?,
                steps => {
                    let mut datasources = Vec::new();
                    for step in steps {
                        if !datasources.contains(&step.datasource) {
                            datasources.push(step.datasource);
                        }
                    }
                    self.txn.check_writes(&datasources, &self.rt.config)?;
                }
            }
        }
        if let Some(c) = &mut plan.combined {
            // A combined read's column definitions, when held; else its describing
            // statement runs first.
            if let Some(shape) = c.shape {
                c.key = ColumnCache::key(shape, self.description_scope());
                c.columns = self.rt.columns.get(c.key);
            }
            if c.columns.is_none() {
                plan.steps.clone_from(&c.describing);
            }
        }
        Ok(plan)
    }

    /// What of the session decides how a statement's columns are described: its current
    /// database, `USER()`, and its variables but the user variables (a statement that
    /// reads one is never combined) and `last_insert_id` (read as a literal of fixed type).
    fn description_scope(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = crate::merge::columns::fixed_hasher();
        self.state.database.hash(&mut h);
        self.user_at_host.hash(&mut h);
        for (name, value) in self.state.vars.iter() {
            if !name.starts_with('@') && name != "last_insert_id" {
                (name, value).hash(&mut h);
            }
        }
        h.finish()
    }

    /// What analysis needs of the session.
    fn analyze_context(&self) -> AnalyzeContext<'_> {
        AnalyzeContext {
            config: &self.rt.config,
            db_is_logical: self
                .state
                .in_database(&self.rt.config.sharding.logical_database),
            decoding: self.state.decoding,
            pipes_as_concat: self.state.lex_mode.pipes_as_concat,
        }
    }

    /// The statement's analysis: kept by shape, or made now.
    pub(super) fn analysis(&self, sql: &[u8], lexed: &Lexed) -> Result<Arc<Analysis>, ProxyError> {
        let db_is_logical = self
            .state
            .in_database(&self.rt.config.sharding.logical_database);
        let key = shape_key(sql, lexed, self.state.lex_mode, db_is_logical);
        self.analysis_of_shape(sql, lexed, &key).map(|(a, _)| a)
    }

    /// [`Session::analysis`] of a statement whose shape is `key`
    /// ([`shape_key`] in the session's mode and database), and whether statements of that
    /// shape share it (the shared cache keeps it).
    pub(super) fn analysis_of_shape(
        &self,
        sql: &[u8],
        lexed: &Lexed,
        key: &[u8],
    ) -> Result<(Arc<Analysis>, bool), ProxyError> {
        if let Some(a) = self.rt.analyses.get(key) {
            return Ok((a, true));
        }
        let cx = self.analyze_context();
        match analyze(sql, lexed, cx) {
            Ok(analyzed) => {
                let analysis = Arc::new(analyzed.analysis);
                if analyzed.cacheable {
                    self.rt.analyses.insert(key.to_vec(), analysis.clone());
                }
                Ok((analysis, analyzed.cacheable))
            }
            Err(parse_error) => {
                let placement = if token_mentions_sharded_table(sql, &lexed.tokens, cx) {
                    Placement::Refused(Refusal::Unparsed(parse_error))
                } else {
                    // Valid MySQL the parser does not know passes through to the default
                    // datasource; invalid SQL gets the server's own error there.
                    Placement::Unsharded
                };
                // What a statement the parser cannot read leaves on its connection (an
                // open HANDLER, a temporary table, a lock, a user variable) is unknown:
                // the session keeps the connection, which is reset when it ends.
                let pins = matches!(placement, Placement::Unsharded);
                let analysis = Analysis {
                    verb: Verb::Other,
                    placement,
                    session_fns: Vec::new(),
                    pins,
                    qualified_tables: Vec::new(),
                };
                Ok((Arc::new(analysis), false))
            }
        }
    }
}

impl Session {
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
            db_is_logical: self
                .state
                .in_database(&self.rt.config.sharding.logical_database),
            decoding: self.state.decoding,
            pipes_as_concat: self.state.lex_mode.pipes_as_concat,
        };
        let shard = &config.sharding.shards[self.rt.router.first_shard() as usize];
        let st = crate::rewrite::Statement {
            sql,
            tokens: &lexed.tokens,
        };
        let edits = crate::sql::analyze::sharded_table_tokens(sql, &lexed.tokens, cx)
            .into_iter()
            .map(|(span, table)| crate::rewrite::Edit {
                at: st.bytes_of(span),
                with: vec![crate::rewrite::Frag::Bytes(
                    format!(
                        "{}.{}",
                        crate::rewrite::quote_ident(&shard.database),
                        crate::rewrite::quote_ident(&shard.tables[usize::from(table.0)])
                    )
                    .into_bytes(),
                )],
            })
            .collect();
        let rewritten = st.render(edits).sql;
        let checked = match self.connection(Target::primary(shard.datasource)).await {
            Ok(conn) => conn.prepare_check(&rewritten).await,
            Err(e) => Err(e),
        };
        self.txn.release_idle();
        match checked {
            Err(e) => e,
            Ok(()) => crate::plan::refusal(&Refusal::Unparsed(message.to_owned())),
        }
    }
}

/// Whether a statement may change data: the datasource rule applies to writes only.
fn is_write(analysis: &Analysis, sql: &[u8], tokens: &[crate::sql::lexer::Token]) -> bool {
    match analysis.verb {
        Verb::Select => false,
        Verb::Insert | Verb::Update | Verb::Delete | Verb::Ddl => true,
        Verb::Other => !tokens
            .iter()
            .find(|t| t.kind != TokenKind::ExecCommentOpen && !t.is_punct(sql, "("))
            .is_some_and(|t| READ_VERBS.iter().any(|v| t.is_word(sql, v))),
    }
}
