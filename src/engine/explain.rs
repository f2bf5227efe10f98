//! `EXPLAIN ROUTE <statement>` (SPEC §8), as text or as a prepared statement with `?`
//! parameters: the statement's plan as rows ([`crate::plan::explain`]), made exactly as
//! running it would make it, without running it, issuing ids, or changing a counter or a
//! cache.

use mysql_common::constants::{ColumnFlags, ColumnType};

use super::session::Session;
use crate::error::{ER_PARSE_ERROR, ProxyError};
use crate::plan::explain::{COLUMNS, ExplainRow, rows};
use crate::protocol::binary::ParamValue;
use crate::protocol::packets::ColumnSpec;
use crate::protocol::status::MoreResults;
use crate::sql::command::{Command, classify};
use crate::sql::lexer::{Lexed, lex};
use crate::wire::client::Client;

/// The statement after `EXPLAIN ROUTE`, when it is a data statement.
pub(super) fn explained(sql: &[u8], body: usize, session: &Session) -> Result<Lexed, ProxyError> {
    let inner = &sql[body..];
    let lexed = lex(inner, session.state.lex_mode);
    match classify(inner, &lexed.tokens, session.state.lex_mode) {
        Command::Statement => Ok(lexed),
        _ => Err(ProxyError::client(
            ER_PARSE_ERROR,
            b"42000",
            "EXPLAIN ROUTE explains data statements (SELECT, INSERT, UPDATE, DELETE, ...), not session commands",
        )),
    }
}

impl Session {
    /// The result columns of EXPLAIN ROUTE, in the client's result character set.
    pub(super) fn explain_columns(&self) -> Vec<ColumnSpec<'static>> {
        let (charset, width) = self.state.result_charset();
        let text = |name: &'static str, chars: u32| ColumnSpec {
            name,
            column_type: ColumnType::MYSQL_TYPE_VAR_STRING,
            flags: ColumnFlags::empty(),
            charset,
            length: chars * width,
            decimals: 39,
        };
        COLUMNS
            .iter()
            .map(|&name| match name {
                "order_id" => ColumnSpec {
                    name,
                    column_type: ColumnType::MYSQL_TYPE_LONGLONG,
                    flags: ColumnFlags::UNSIGNED_FLAG
                        | ColumnFlags::BINARY_FLAG
                        | ColumnFlags::NUM_FLAG,
                    charset: 63,
                    length: 20,
                    decimals: 0,
                },
                "shard" => ColumnSpec {
                    name,
                    column_type: ColumnType::MYSQL_TYPE_LONG,
                    flags: ColumnFlags::UNSIGNED_FLAG
                        | ColumnFlags::BINARY_FLAG
                        | ColumnFlags::NUM_FLAG,
                    charset: 63,
                    length: 10,
                    decimals: 0,
                },
                "layer" => ColumnSpec {
                    flags: ColumnFlags::NOT_NULL_FLAG,
                    ..text(name, 16)
                },
                "statement" => text(name, 65_535 / width.max(1)),
                _ => text(name, 128),
            })
            .collect()
    }

    /// EXPLAIN ROUTE of the statement at byte `body` of `sql`; `params` are a prepared
    /// execution's values (`None` for text: the answer is then in the text protocol).
    pub(super) async fn explain_route(
        &mut self,
        client: &mut Client,
        sql: &[u8],
        body: usize,
        params: Option<&[ParamValue]>,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        let lexed = explained(sql, body, self)?;
        let inner = &sql[body..];
        self.checks.statement(&self.state, inner, &lexed)?;
        let mut statement = self
            .prepare_data(inner, &lexed, &[], params.unwrap_or_default())
            .await?;
        statement.binary = params.is_some();
        let plan = self.plan(&statement, true).await?;
        let access = super::run::step_access(&plan, &statement);
        // Its `after` token counts as it would if the statement ran.
        let after = match &statement.hints.after {
            Some(token) if !self.rt.topology.is_empty() => {
                crate::topology::token::decode(token, &self.rt.config).unwrap_or_default()
            }
            _ => Vec::new(),
        };
        self.txn.causal.set_after(after);
        let mut planned: Vec<crate::config::DatasourceId> = Vec::new();
        for step in &plan.steps {
            if !planned.contains(&step.datasource) {
                planned.push(step.datasource);
            }
        }
        let table: Vec<Vec<Option<Vec<u8>>>> = rows(&plan, &self.rt.config)
            .into_iter()
            .map(|r| {
                let member = r
                    .datasource
                    .as_deref()
                    .and_then(|name| self.member_for(name, access, statement.hints.read));
                let branch = r
                    .datasource
                    .as_deref()
                    .and_then(|name| self.branch_for(name, &planned, plan.write));
                let mut row = cells(r);
                row.push(member.map(String::into_bytes));
                row.push(branch.map(|b| b.as_bytes().to_vec()));
                row
            })
            .collect();
        self.txn.causal.set_after(Vec::new());
        self.state.warnings.clear();
        self.state.row_count = -1;
        let status = self.final_status(more);
        let columns = self.explain_columns();
        match params {
            None => client.result_set(&columns, &table, ("", ""), status),
            Some(_) => client.binary_result_set(&columns, &table, status),
        }
    }
}

impl Session {
    /// EXPLAIN ROUTE's `branch` for a step on datasource `name` of a plan over `planned`
    /// (in order; `write`: the plan writes): the transaction branch it would run in.
    fn branch_for(
        &self,
        name: &str,
        planned: &[crate::config::DatasourceId],
        write: bool,
    ) -> Option<&'static str> {
        let config = &self.rt.config;
        let at = config.datasources.iter().position(|d| d.name == name)?;
        let ds = crate::config::DatasourceId(at as u16);
        if let Some(branch) = self.txn.branch_of(ds) {
            return Some(branch);
        }
        let atomic = config.transactions.cross_datasource == crate::config::CrossDatasource::Atomic;
        if self.in_transaction() || !self.state.autocommit {
            let holding = self.txn.transaction_datasources();
            let first = holding.first().or(planned.first());
            // A transaction that cannot branch (read-only, a snapshot, LOCK TABLES, or
            // refuse) is plain wherever it runs.
            let plain = *first? == ds || !self.txn.may_branch(config, &self.state.vars);
            return Some(if plain { "plain" } else { "new xa" });
        }
        if write && atomic && planned.len() > 1 {
            return Some(if planned.first() == Some(&ds) {
                "decision"
            } else {
                "new xa"
            });
        }
        None
    }
}

fn cells(r: ExplainRow) -> Vec<Option<Vec<u8>>> {
    vec![
        r.order_id.map(|v| v.to_string().into_bytes()),
        Some(r.layer.as_bytes().to_vec()),
        r.decode_failure.map(|v| v.as_bytes().to_vec()),
        r.channel.map(String::into_bytes),
        r.shard.map(|v| v.to_string().into_bytes()),
        r.datasource.map(String::into_bytes),
        r.physical_table.map(String::into_bytes),
        r.statement,
    ]
}
