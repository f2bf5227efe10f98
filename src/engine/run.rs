//! Running a data statement's plan: its effects, then its steps by the plan's primitive
//! ([`crate::plan::Execution`]: relayed, atomic, merged or a probe), the reply relayed or
//! merged ([`super::respond`]), and the session's bookkeeping after (the final packet, what
//! a probe learnt).

use std::time::Duration;

use super::session::Session;
use super::statement::Prepared;
use crate::error::{ER_STATEMENT_TIMEOUT, ProxyError};
use crate::execute::results::Extras;
use crate::execute::{Access, Target};
use crate::execute::{Binding, Results};
use crate::plan::{Execution, Plan, PlanKind};
use crate::protocol::packets::OkInfo;
use crate::protocol::status::MoreResults;
use crate::sql::Verb;
use crate::wire::client::Client;

impl Session {
    /// Runs a plan and writes its result: the plan's effects (counters, cache fills, index
    /// rows), then its steps, relayed or merged; the session's bookkeeping after.
    pub(super) async fn execute(
        &mut self,
        client: &mut Client,
        plan: &Plan,
        s: &Prepared<'_>,
        binding: Option<&Binding<'_>>,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        // Datasources with replicas: where this statement's reads may go.
        let clustered = !self.rt.topology.is_empty();
        if clustered {
            self.place_reads(plan, s)?;
        }
        let done = self.execute_plan(client, plan, s, binding, more).await;
        if clustered {
            self.txn.causal.set_after(Vec::new());
            self.statement_reads = None;
            self.step_access = Access::Primary;
        }
        done
    }

    /// Where a statement's reads may go on clustered datasources: its steps' access, its
    /// `/*read=...*/` hint and its `/*after=...*/` token (1210 when the token is not one).
    fn place_reads(&mut self, plan: &Plan, s: &Prepared<'_>) -> Result<(), ProxyError> {
        let after = match &s.hints.after {
            Some(token) => crate::topology::token::decode(token, &self.rt.config).map_err(|e| {
                ProxyError::client(
                    crate::error::ER_WRONG_ARGUMENTS,
                    b"HY000",
                    format!("after hint: {e}"),
                )
            })?,
            None => Vec::new(),
        };
        self.txn.causal.set_after(after);
        self.statement_reads = s.hints.read;
        self.step_access = step_access(plan, s);
        Ok(())
    }

    /// [`Session::execute`] once the statement's reads are placed.
    async fn execute_plan(
        &mut self,
        client: &mut Client,
        plan: &Plan,
        s: &Prepared<'_>,
        binding: Option<&Binding<'_>>,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        match plan.kind {
            PlanKind::AwaitsIds => {
                return Err(ProxyError::Internal(
                    "an INSERT planned without its ids".into(),
                ));
            }
            PlanKind::NoRows => {
                self.rt.router.apply(&plan.effects).await;
                return self.no_rows(client, more);
            }
            _ => {}
        }
        if self.txn.tables_locked() {
            if let Some(step) = plan
                .steps
                .iter()
                .find(|s| !self.txn.locked_on(s.datasource))
            {
                // MariaDB refuses a table that LOCK TABLES did not lock; a datasource where
                // the session locked none would run it unlocked.
                return Err(ProxyError::client(
                    crate::error::ER_TABLE_NOT_LOCKED,
                    b"HY000",
                    format!(
                        "Table was not locked with LOCK TABLES (the statement runs on datasource {}, where this session's LOCK TABLES locked no table)",
                        self.rt.config.datasource(step.datasource).name
                    ),
                ));
            }
        }
        if s.analysis.verb == Verb::Ddl {
            // A table's definition may change: combined reads describe their columns again.
            self.rt.columns.clear();
        }
        if s.analysis.verb == Verb::Ddl && self.in_transaction() {
            // DDL commits the open transaction first, as MySQL does.
            self.txn.end(b"COMMIT").await?;
        }
        crate::execute::effects::before_running(&self.rt.router, plan).await?;
        if s.analysis.pins {
            self.txn.pin();
        }
        let sql = s.text.sql;
        let extras = Extras {
            calc_found_rows: s
                .text
                .tokens
                .iter()
                .any(|t| t.is_word(sql, "sql_calc_found_rows")),
            // LAST_INSERT_ID(expr) sets the session's value, even in a SELECT.
            sets_insert_id: s.text.tokens.windows(3).any(|w| {
                w[0].is_word(sql, "last_insert_id")
                    && w[1].is_punct(sql, "(")
                    && !w[2].is_punct(sql, ")")
            }),
            autocommit: true,
        };
        self.state.warnings.clear();
        if extras.calc_found_rows {
            self.state.found_rows = 0;
        }
        let mut ran = match self.open_for_characteristics(&s.analysis, sql, s.text.tokens) {
            Ok(opened) => {
                let ran = self.run_plan(client, plan, binding, extras, more).await;
                self.close_for_characteristics(opened, ran).await
            }
            Err(e) => Err(e),
        };
        if ran.is_ok() && s.analysis.pins {
            if let Err(e) = self.after_assignments(plan, sql, s.text.tokens).await {
                ran = Err(e);
            }
        }
        self.conclude(client, plan, ran, more).await
    }

    /// After a statement that pins the session ran: the user variables it assigned on one
    /// datasource are carried to the others ([`Session::carry_user_variables`]).
    async fn after_assignments(
        &mut self,
        plan: &Plan,
        sql: &[u8],
        tokens: &[crate::sql::lexer::Token],
    ) -> Result<(), ProxyError> {
        let Some(first) = plan.steps.first().map(|s| s.datasource) else {
            return Ok(());
        };
        if plan.steps.iter().any(|s| s.datasource != first) {
            return Ok(());
        }
        let names = crate::sql::analyze::assigned_user_variables(sql, tokens);
        if names.is_empty() {
            return Ok(());
        }
        self.carry_user_variables(first, &names).await
    }

    /// Runs a plan by its primitive ([`Execution`]) and relays or merges the replies,
    /// within the longest query timeout of the datasources involved (`more`: another
    /// statement of the same query follows). The one place that tells the primitives
    /// apart; how the replies become the answer is [`super::respond::respond`]'s.
    pub(super) async fn run_plan(
        &mut self,
        client: &mut Client,
        plan: &Plan,
        binding: Option<&Binding<'_>>,
        extras: Extras,
        more: MoreResults,
    ) -> Result<Ran, ProxyError> {
        if self.rt.topology.is_empty() {
            // No datasource with members: one attempt, nothing to watch.
            return self
                .run_plan_once(client, plan, binding, extras, more)
                .await;
        }
        let mut retry = super::failover::Retry::new(self, plan);
        loop {
            let written = client.stream.packets_written();
            // A replica that stops answering mid-read (a stalled server) would hold the read
            // as long as it stays so: the probes' verdict ends it.
            let watched = self.may_read_a_replica().then(|| {
                self.txn.causal.take_replica_used();
                (self.rt.clone(), self.handle.clone())
            });
            let ran = tokio::select! {
                biased;
                ran = self.run_plan_once(client, plan, binding, extras, more) => ran,
                lost = super::failover::replica_lost(watched) => Err(lost),
            };
            let untouched =
                written == client.stream.packets_written() && client.held_back.is_none();
            let Err(e) = &ran else {
                return ran;
            };
            if !retry.again(self, plan, e, untouched).await {
                return ran;
            }
        }
    }

    /// Whether the running statement's steps may read on a replica.
    fn may_read_a_replica(&self) -> bool {
        self.step_access == Access::Read
            && self.statement_reads.unwrap_or(self.user_reads.0) == crate::config::Reads::Replica
    }

    /// [`Session::run_plan`], one attempt.
    async fn run_plan_once(
        &mut self,
        client: &mut Client,
        plan: &Plan,
        binding: Option<&Binding<'_>>,
        extras: Extras,
        more: MoreResults,
    ) -> Result<Ran, ProxyError> {
        match &plan.execution {
            Execution::Atomic => self.run_atomic(client, plan, binding, extras, more).await,
            Execution::Relay | Execution::Merge(_) | Execution::Probe { .. } => {
                let ran = self.run_bounded(client, plan, binding, extras, more).await;
                match (ran, &plan.combined) {
                    (Err(ProxyError::Stale(why)), Some(combined)) => {
                        // The held column description no longer fits (a table changed
                        // outside the proxy); nothing reached the client: run the read
                        // again, described.
                        tracing::debug!(why, "a combined read runs again, described");
                        self.rt.columns.forget(combined.key);
                        self.txn.release_idle();
                        let described = plan.describing();
                        self.run_bounded(client, &described, binding, extras, more)
                            .await
                    }
                    (ran, _) => ran,
                }
            }
        }
    }

    /// [`Execution::Atomic`]: the steps inside one backend transaction on their
    /// datasource, or under a savepoint on each datasource of the client's transaction;
    /// committed (released) when all ran, rolled back otherwise. Steps on several
    /// datasources outside a transaction run in one the proxy opens and commits
    /// atomically ([`Session::run_atomic_across`]).
    async fn run_atomic(
        &mut self,
        client: &mut Client,
        plan: &Plan,
        binding: Option<&Binding<'_>>,
        extras: Extras,
        more: MoreResults,
    ) -> Result<Ran, ProxyError> {
        let mut datasources: Vec<crate::config::DatasourceId> = Vec::new();
        for step in &plan.steps {
            if !datasources.contains(&step.datasource) {
                datasources.push(step.datasource);
            }
        }
        let savepoint = self.in_transaction() || !self.state.autocommit;
        if datasources.len() > 1 && !savepoint {
            // Boxed: a second run of the steps inside would double this future's size,
            // which every statement's future carries.
            return Box::pin(self.run_atomic_across(
                client,
                plan,
                binding,
                extras,
                more,
                &datasources,
            ))
            .await;
        }
        let begin: &[u8] = if savepoint {
            b"SAVEPOINT routekey_statement"
        } else {
            b"BEGIN"
        };
        for &ds in &datasources {
            self.connection(Target::primary(ds))
                .await?
                .execute(begin)
                .await?;
        }
        let outcome = self.run_bounded(client, plan, binding, extras, more).await;
        let end: &[u8] = match (&outcome, savepoint) {
            (Ok(_), true) => b"RELEASE SAVEPOINT routekey_statement",
            (Ok(_), false) => b"COMMIT",
            (Err(_), true) => b"ROLLBACK TO SAVEPOINT routekey_statement",
            (Err(_), false) => b"ROLLBACK",
        };
        let mut ended = Ok(());
        for &ds in &datasources {
            if let Some(conn) = self.txn.held_mut(ds) {
                if let Err(e) = conn.execute(end).await {
                    ended = ended.and(Err(e));
                }
            }
        }
        let outcome = outcome?;
        ended.map(|()| outcome)
    }

    /// A write on several datasources with autocommit on: a transaction the proxy opens
    /// (not shown to the client) whose first datasource is the decision branch and the
    /// others XA branches, committed atomically ([`crate::execute::commit::commit`]) when every
    /// step ran, rolled back on every datasource otherwise.
    async fn run_atomic_across(
        &mut self,
        client: &mut Client,
        plan: &Plan,
        binding: Option<&Binding<'_>>,
        extras: Extras,
        more: MoreResults,
        datasources: &[crate::config::DatasourceId],
    ) -> Result<Ran, ProxyError> {
        self.txn.begin_statement(b"BEGIN");
        for &ds in datasources {
            if let Err(e) = self.connection(Target::primary(ds)).await {
                self.txn.end(b"ROLLBACK").await.ok();
                return Err(e);
            }
        }
        match self.run_bounded(client, plan, binding, extras, more).await {
            Ok(ran) => {
                for &ds in datasources {
                    // Inside the transaction: the GTIDs are read when it commits.
                    self.record_write(ds);
                }
                self.txn.end(b"COMMIT").await?;
                Ok(ran)
            }
            Err(e) => {
                self.txn.end(b"ROLLBACK").await.ok();
                Err(e)
            }
        }
    }

    /// The steps within the longest query timeout of their datasources.
    async fn run_bounded(
        &mut self,
        client: &mut Client,
        plan: &Plan,
        binding: Option<&Binding<'_>>,
        extras: Extras,
        more: MoreResults,
    ) -> Result<Ran, ProxyError> {
        let limit = plan
            .steps
            .iter()
            .map(|s| self.rt.config.datasource(s.datasource).query_timeout)
            .max()
            .unwrap_or_default();
        if limit.is_zero() {
            return self.steps(client, plan, binding, extras, more).await;
        }
        let steps = self.steps(client, plan, binding, extras, more);
        match tokio::time::timeout(limit, steps).await {
            Ok(r) => r,
            Err(_) => Err(timeout_error(limit, plan, &self.rt.config)),
        }
    }

    async fn steps(
        &mut self,
        client: &mut Client,
        plan: &Plan,
        binding: Option<&Binding<'_>>,
        mut extras: Extras,
        more: MoreResults,
    ) -> Result<Ran, ProxyError> {
        let parallel = (!self.in_transaction() && self.state.autocommit && !self.txn.pinned())
            .then(|| {
                self.rt
                    .config
                    .sharding
                    .max_fan_out
                    .map_or(usize::MAX, |n| n as usize)
            });
        // The session's flags as the statement starts; what the backends add (the
        // transaction the statement opens, its index use) joins them packet by packet.
        let status = self.final_status(more);
        extras.autocommit = self.state.autocommit;
        let handle = self.handle.clone();
        let rt = self.rt.clone();
        let config = rt.config.clone();
        let access = self.step_access;
        let (txn, wants) = self.parts();
        let mut results =
            Results::start(plan, txn, &wants, binding, extras, parallel, access).await?;
        handle.set_running(Some(crate::session_registry::Running {
            config,
            threads: results.threads(),
        }));
        let respond = super::respond::respond(
            client,
            &mut results,
            plan,
            binding.is_some(),
            status,
            &rt.columns,
        )
        .await;
        handle.set_running(None);
        if respond.is_err() {
            results.settle().await;
        }
        let outcome = respond?;
        Ok(Ran {
            outcome,
            calc_found_rows: extras.calc_found_rows,
            diagnostics: std::mem::take(&mut results.diagnostics),
            found_rows: results.found_rows,
            insert_id_set: results.insert_id_set,
            autocommit_read: results.autocommit_read.take(),
        })
    }

    /// The session's bookkeeping after a plan ran, and the result's final packet.
    pub(super) async fn conclude(
        &mut self,
        client: &mut Client,
        plan: &Plan,
        ran: Result<Ran, ProxyError>,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        let ran = match ran {
            Ok(ran) => ran,
            Err(e) => {
                if matches!(e, ProxyError::MergeCap(_)) {
                    self.proxy.metrics.count_merge_cap_hit();
                }
                if let Some(code) = backend_error_code(&e) {
                    for step in &plan.steps {
                        let name = &self.rt.config.datasource(step.datasource).name;
                        self.proxy.metrics.count_backend_error(name, &code);
                    }
                }
                self.state.record_error(&e);
                if self.txn.distributed().is_some() && rolls_back_all(&e) {
                    // A deadlock or lock wait timeout in one branch ends the whole
                    // transaction: the others must not commit without it.
                    tracing::debug!(error = %e, "a branch of an atomic transaction failed: every branch rolls back");
                    self.txn.end(b"ROLLBACK").await.ok();
                }
                let ran_on: Vec<_> = plan.steps.iter().map(|s| s.datasource).collect();
                self.txn
                    .after_failed_statement(&ran_on, self.state.autocommit);
                self.txn.release_idle();
                return Err(e);
            }
        };
        if plan.write {
            // Each datasource once (a write's steps are few: no set is built).
            for (i, step) in plan.steps.iter().enumerate() {
                if plan.steps[..i]
                    .iter()
                    .all(|s| s.datasource != step.datasource)
                {
                    self.record_write(step.datasource);
                }
            }
        }
        if let Some(on) = ran.autocommit_read {
            // A procedure changed the session's autocommit (boxed: a rare path, whose state
            // would make every statement's future larger).
            Box::pin(self.adopt_autocommit(on)).await?;
        }
        let out = ran.outcome;
        if !out.result_set && out.affected_rows > 0 {
            self.txn.record_changed_rows();
        }
        self.state.warnings = ran.diagnostics;
        let issued = plan
            .ids
            .iter()
            .find(|i| i.layer == crate::plan::RouteLayer::Issued);
        if let Some(id) = issued.and_then(|i| i.order_id) {
            self.state.set_last_insert_id(id);
        } else if let Some(id) = ran.insert_id_set {
            self.state.set_last_insert_id(id);
        } else if out.last_insert_id != 0 {
            self.state.set_last_insert_id(out.last_insert_id);
        }
        if out.result_set {
            self.state.row_count = -1;
            self.state.found_rows = if ran.calc_found_rows {
                ran.found_rows
            } else {
                out.rows
            };
        } else {
            self.state.row_count = i64::try_from(out.affected_rows).unwrap_or(i64::MAX);
        }
        if let Execution::Probe { ids, .. } = &plan.execution {
            self.learn_from_probe(plan, ids).await;
        }
        self.count_reach(plan);
        self.txn.settle().await;
        self.txn.release_idle();
        let status = out.final_status(self.final_status(more));
        let warnings = u16::try_from(out.warnings).unwrap_or(u16::MAX);
        if out.result_set {
            client.rows_end(warnings, status)
        } else {
            let last_insert_id = issued
                .and_then(|i| i.order_id)
                .unwrap_or(out.last_insert_id);
            client.ok(&OkInfo {
                affected_rows: out.affected_rows,
                last_insert_id,
                status,
                warnings,
                info: out.info,
                session_state: out.session_state,
            })
        }
    }

    /// Counts a plan's reach: the shards it read when more than one (not statements: a
    /// merge may send one more describing its columns, and a combined statement asks
    /// several), by user for a scatter, and how a merged read was asked.
    fn count_reach(&self, plan: &Plan) {
        let reached = match &plan.steps[..] {
            [one] => one.shards.len().max(1),
            steps => steps
                .iter()
                .flat_map(|s| &s.shards)
                .collect::<std::collections::BTreeSet<_>>()
                .len(),
        };
        if reached < 2 {
            return;
        }
        if plan.execution.merge().is_some() {
            // The engine runs the describing steps exactly when it holds no description.
            let how = match &plan.combined {
                None => "per_shard",
                Some(c) if c.columns.is_none() => "describing",
                Some(_) => "combined",
            };
            self.proxy.metrics.count_merged_read(how);
        }
        if plan.execution != Execution::Atomic {
            let user = (plan.kind == PlanKind::Scatter).then_some(self.user.as_str());
            self.proxy.metrics.count_fan_out(user, reached);
        }
    }

    /// Runs one statement on one datasource and relays its answer (statements the proxy
    /// passes through or rewrites itself: SHOW, DESCRIBE, ...).
    pub(super) async fn run_one(
        &mut self,
        client: &mut Client,
        datasource: crate::config::DatasourceId,
        sql: Vec<u8>,
        names: Option<std::sync::Arc<crate::config::ResultNames>>,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        let plan = Plan::single(datasource, sql, names);
        self.state.warnings.clear();
        let ran = self
            .run_plan(client, &plan, None, Extras::default(), more)
            .await;
        self.conclude(client, &plan, ran, more).await
    }

    /// A write that matches no row: MySQL's OK (no info: the server has none for an
    /// impossible WHERE either), without touching a backend.
    fn no_rows(&mut self, client: &mut Client, more: MoreResults) -> Result<(), ProxyError> {
        self.state.row_count = 0;
        self.state.warnings.clear();
        client.ok(&OkInfo {
            status: self.final_status(more),
            ..Default::default()
        })
    }

    /// A probe ran (`sharding.unresolved_reads = "probe"`): which shards hold the ids it
    /// looked for is read (one query per datasource, by primary key) and what is certain
    /// is cached. A failure here costs the cache entry, never the statement.
    async fn learn_from_probe(&mut self, plan: &Plan, probe: &[u64]) {
        let config = self.rt.config.clone();
        let Some(table) = plan.table else { return };
        let key = crate::rewrite::quote_ident(&config.sharding.shard_key);
        let ids: Vec<String> = probe.iter().map(u64::to_string).collect();
        let mut found: Vec<(u64, Vec<u32>)> = probe.iter().map(|id| (*id, Vec::new())).collect();
        let mut by_ds: Vec<(crate::config::DatasourceId, Vec<u32>)> = Vec::new();
        for step in &plan.steps {
            for &shard in &step.shards {
                match by_ds.iter_mut().find(|(d, _)| *d == step.datasource) {
                    // A combined read's describing statement names its first shard again.
                    Some((_, v)) if v.contains(&shard) => {}
                    Some((_, v)) => v.push(shard),
                    None => by_ds.push((step.datasource, vec![shard])),
                }
            }
        }
        for (ds, shards) in by_ds {
            let parts: Vec<String> = shards
                .iter()
                .map(|&n| {
                    let s = &config.sharding.shards[n as usize];
                    format!(
                        "SELECT {n}, {key} FROM {}.{} WHERE {key} IN ({})",
                        crate::rewrite::quote_ident(&s.database),
                        crate::rewrite::quote_ident(&s.tables[usize::from(table.0)]),
                        ids.join(", ")
                    )
                })
                .collect();
            // The explicit LIMIT keeps the session's sql_select_limit from cutting it.
            let sql = format!("{} LIMIT 18446744073709551615", parts.join(" UNION ALL "));
            let rows = match self.connection(Target::read(ds)).await {
                Ok(conn) => conn.query_rows(sql.as_bytes()).await,
                Err(e) => Err(e),
            };
            self.txn.release_idle();
            let Ok((_, rows)) = rows else {
                tracing::debug!("a probe could not read where its ids are; nothing cached");
                return;
            };
            for row in rows {
                let field = |i: usize| {
                    row.get(i)
                        .cloned()
                        .flatten()
                        .and_then(|v| String::from_utf8_lossy(&v).parse::<u64>().ok())
                };
                if let (Some(shard), Some(id)) = (field(0), field(1)) {
                    if let Some((_, shards)) = found.iter_mut().find(|(i, _)| *i == id) {
                        shards.push(shard as u32);
                    }
                }
            }
        }
        let findings = crate::execute::effects::ProbeFindings { found };
        let (hit, nowhere, ambiguous) = findings.learn(&self.rt.router, &config).await;
        self.proxy.metrics.count_probes(hit, nowhere, ambiguous);
    }
}

/// What running a plan's steps gave.
pub(super) struct Ran {
    outcome: super::outcome::Outcome,
    calc_found_rows: bool,
    diagnostics: Vec<crate::backend::Diagnostic>,
    found_rows: u64,
    insert_id_set: Option<u64>,
    /// The session's `autocommit` as read back after a step that ended with the other.
    autocommit_read: Option<bool>,
}

fn timeout_error(limit: Duration, plan: &Plan, config: &crate::config::Config) -> ProxyError {
    let mut names: Vec<&str> = plan
        .steps
        .iter()
        .map(|s| config.datasource(s.datasource).name.as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    ProxyError::client(
        ER_STATEMENT_TIMEOUT,
        b"70100",
        format!(
            "Query execution was interrupted (routekey-proxy query_timeout of {limit:?} exceeded on datasource {}; its connection was closed)",
            names.join(", ")
        ),
    )
}

/// The `code` label of `routekey_backend_errors_total` for an error met running a plan;
/// `None` for the proxy's own refusals.
fn backend_error_code(e: &ProxyError) -> Option<String> {
    match e {
        ProxyError::Backend { code, .. } => Some(code.to_string()),
        ProxyError::Client { code, .. } if *code == ER_STATEMENT_TIMEOUT => {
            Some("timeout".to_owned())
        }
        ProxyError::Unavailable(_) => Some("unavailable".to_owned()),
        ProxyError::Io(_) => Some("io".to_owned()),
        _ => None,
    }
}

/// Errors after which a transaction with XA branches rolls back on every datasource: a
/// deadlock (MariaDB rolled back that branch) and a lock wait timeout (it rolled back the
/// statement; the transaction could not commit as the client wrote it).
fn rolls_back_all(e: &ProxyError) -> bool {
    matches!(e, ProxyError::Backend { code, .. }
        if matches!(*code, crate::error::ER_LOCK_DEADLOCK | crate::error::ER_LOCK_WAIT_TIMEOUT))
}

/// How a data statement's steps reach a clustered datasource: `Read` (a replica may answer)
/// for a SELECT that writes nothing, pins nothing and takes no lock
/// ([`crate::sql::reads::replica_may_answer`]); `Primary` for everything else.
pub(super) fn step_access(plan: &Plan, s: &Prepared<'_>) -> Access {
    let reads = !plan.write
        && s.analysis.verb == Verb::Select
        && !s.analysis.pins
        && crate::sql::reads::replica_may_answer(s.text.sql, s.text.tokens);
    if reads { Access::Read } else { Access::Primary }
}
