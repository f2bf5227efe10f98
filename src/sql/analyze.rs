//! Analysis of data statements with sqlparser (MySQL dialect): which tables a statement
//! names, whether they are sharded, its order id predicate, its route context, and, for
//! an INSERT, the rows. The result refers to token indices, so it is reusable for any
//! statement of the same shape (see [`super::shape`]).

use std::collections::HashSet;
use std::ops::ControlFlow;

use sqlparser::ast::{
    Delete, Expr, FromTable, Ident, Insert, ObjectName, OnInsert, Query, Select, SelectItem,
    SelectItemQualifiedWildcardKind, SetExpr, Statement, TableFactor, TableObject, TableWithJoins,
    Update, Visit, Visitor,
};
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;

use super::charset::{Decoded, Decoding};
use super::lexer::{Lexed, TokenKind};
use super::predicates::{
    AGGREGATES, PINNING_FUNCTIONS, Positions, and_terms, column_ref, session_fn,
};
use super::*;
use crate::config::Config;

/// What the analysis needs to know about the session.
#[derive(Debug, Clone, Copy)]
pub struct AnalyzeContext<'a> {
    /// Logical database, binding tables and their columns.
    pub config: &'a Config,
    /// The session's current database is the logical database, so unqualified names of
    /// binding tables are the sharded tables.
    pub db_is_logical: bool,
    /// How statement bytes decode.
    pub decoding: Decoding,
}

/// The outcome of analysing one statement.
#[derive(Debug)]
pub struct Analyzed {
    /// The analysis.
    pub analysis: Analysis,
    /// Every position mapped to a token: the analysis is valid for the statement's shape.
    pub cacheable: bool,
}

/// Analyses one statement. `Err` carries the parser's message: the caller decides, from
/// tokens alone, whether the statement may pass through unparsed.
pub fn analyze(sql: &[u8], lexed: &Lexed, cx: AnalyzeContext<'_>) -> Result<Analyzed, String> {
    let decoded = Decoded::new(sql, cx.decoding);
    let statements = Parser::new(&MySqlDialect {})
        .try_with_sql(&decoded.text)
        .and_then(|mut p| p.parse_statements())
        .map_err(|e| e.to_string())?;
    let statement = match statements.as_slice() {
        [one] => one,
        [] => {
            return Ok(Analyzed {
                analysis: Analysis {
                    verb: Verb::Other,
                    target: Target::Unsharded,
                    session_fns: Vec::new(),
                    pins: false,
                },
                cacheable: true,
            });
        }
        _ => return Err("more than one statement".to_owned()),
    };
    let pos = Positions {
        sql,
        decoded: &decoded,
        tokens: &lexed.tokens,
    };
    let mut walk = Walk::new(&pos);
    let _ = statement.visit(&mut walk);
    let pins = walk.pins || token_pins(sql, lexed) || statement_pins(statement);
    let verb = verb_of(statement);
    let session_fns = std::mem::take(&mut walk.session_fns);

    let mut planner = Planner {
        cx,
        pos: &pos,
        walk: &walk,
        refs: Vec::new(),
        edits: Vec::new(),
        cacheable: walk.cacheable,
    };
    let target = planner.target(statement);
    let cacheable = planner.cacheable && !lexed.unterminated;
    Ok(Analyzed {
        analysis: Analysis {
            verb,
            target,
            session_fns,
            pins,
        },
        cacheable,
    })
}

fn verb_of(statement: &Statement) -> Verb {
    match statement {
        Statement::Query(_) => Verb::Select,
        Statement::Insert(_) => Verb::Insert,
        Statement::Update(_) => Verb::Update,
        Statement::Delete(_) => Verb::Delete,
        Statement::CreateTable(t) if t.temporary => Verb::Other,
        Statement::CreateTable(_)
        | Statement::AlterTable(_)
        | Statement::Drop { .. }
        | Statement::Truncate(_)
        | Statement::CreateIndex(_)
        | Statement::CreateView(_)
        | Statement::RenameTable(_)
        | Statement::CreateDatabase { .. }
        | Statement::CreateFunction(_)
        | Statement::CreateProcedure { .. }
        | Statement::CreateTrigger(_)
        | Statement::Grant(_)
        | Statement::Revoke(_) => Verb::Ddl,
        _ => Verb::Other,
    }
}

/// Statements that leave session state on the backend connection.
fn statement_pins(statement: &Statement) -> bool {
    match statement {
        Statement::CreateTable(t) => t.temporary,
        Statement::Drop { temporary, .. } => *temporary,
        Statement::LockTables { .. }
        | Statement::UnlockTables
        | Statement::Prepare { .. }
        | Statement::Execute { .. }
        | Statement::Deallocate { .. } => true,
        _ => false,
    }
}

/// `@x := ...` and `... INTO @x` set user variables inside a statement.
fn token_pins(sql: &[u8], lexed: &Lexed) -> bool {
    lexed.tokens.windows(2).any(|w| {
        w[0].is_punct(sql, ":=")
            || (w[0].is_word(sql, "into") && w[1].kind == TokenKind::UserVariable)
    }) || lexed.tokens.iter().any(|t| t.is_punct(sql, ":="))
}

/// What one pass of the visitor collects.
struct Walk<'a, 'p> {
    pos: &'a Positions<'p>,
    /// Every table reference (FROM, JOIN, INSERT INTO, UPDATE), with its alias.
    relations: Vec<(ObjectName, Option<String>)>,
    cte_names: HashSet<String>,
    selects: usize,
    derived: bool,
    aggregate: bool,
    pins: bool,
    qualifiers: Vec<Vec<Ident>>,
    session_fns: Vec<SessionFnUse>,
    unnamed_items: HashSet<u32>,
    cacheable: bool,
}

impl<'a, 'p> Walk<'a, 'p> {
    fn new(pos: &'a Positions<'p>) -> Self {
        Self {
            pos,
            relations: Vec::new(),
            cte_names: HashSet::new(),
            selects: 0,
            derived: false,
            aggregate: false,
            pins: false,
            qualifiers: Vec::new(),
            session_fns: Vec::new(),
            unnamed_items: HashSet::new(),
            cacheable: true,
        }
    }
}

impl Visitor for Walk<'_, '_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        if let Some(with) = &query.with {
            for cte in &with.cte_tables {
                self.cte_names
                    .insert(cte.alias.name.value.to_ascii_lowercase());
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_select(&mut self, select: &Select) -> ControlFlow<()> {
        self.selects += 1;
        for item in &select.projection {
            match item {
                SelectItem::UnnamedExpr(e @ Expr::Function(f)) if session_fn(e).is_some() => {
                    if let Some(t) = f.name.0.first().and_then(|p| p.as_ident()) {
                        if let Some(i) = self.pos.token_at(t.span.start) {
                            self.unnamed_items.insert(i);
                        }
                    }
                }
                SelectItem::QualifiedWildcard(
                    SelectItemQualifiedWildcardKind::ObjectName(n),
                    _,
                ) => {
                    self.qualifiers
                        .push(n.0.iter().filter_map(|p| p.as_ident().cloned()).collect());
                }
                _ => {}
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
        match factor {
            TableFactor::Table { name, alias, .. } => {
                self.relations.push((
                    name.clone(),
                    alias.as_ref().map(|a| a.name.value.to_ascii_lowercase()),
                ));
            }
            TableFactor::Derived { .. } | TableFactor::NestedJoin { .. } => self.derived = true,
            _ => {}
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_relation(&mut self, relation: &ObjectName) -> ControlFlow<()> {
        // Table factors were recorded with their aliases; record the others (INSERT INTO).
        let start = relation
            .0
            .first()
            .and_then(|p| p.as_ident())
            .map(|i| i.span.start);
        let known = self
            .relations
            .iter()
            .any(|(n, _)| n.0.first().and_then(|p| p.as_ident()).map(|i| i.span.start) == start);
        if !known {
            self.relations.push((relation.clone(), None));
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
        match expr {
            Expr::CompoundIdentifier(parts) => self.qualifiers.push(parts.clone()),
            Expr::Function(f) => {
                let name = f
                    .name
                    .0
                    .last()
                    .and_then(|p| p.as_ident())
                    .map(|i| i.value.to_ascii_lowercase())
                    .unwrap_or_default();
                if AGGREGATES.contains(&name.as_str()) || f.over.is_some() {
                    self.aggregate = true;
                }
                if PINNING_FUNCTIONS.contains(&name.as_str()) {
                    self.pins = true;
                }
                if let Some(function) = session_fn(expr) {
                    self.record_session_fn(function, f);
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

impl Walk<'_, '_> {
    fn record_session_fn(&mut self, function: SessionFn, f: &sqlparser::ast::Function) {
        let Some(name) = f.name.0.first().and_then(|p| p.as_ident()) else {
            return;
        };
        let Some(i) = self.pos.token_at(name.span.start) else {
            self.cacheable = false;
            return;
        };
        let sql_tokens = self.pos.tokens;
        let is = |k: usize, c: u8| {
            sql_tokens
                .get(k)
                .is_some_and(|t| t.kind == TokenKind::Punct && t.range.len() == 1)
                && c != 0
        };
        // name ( ) : three tokens.
        let (open, close) = (i as usize + 1, i as usize + 2);
        if !(is(open, b'(') && is(close, b')')) {
            self.cacheable = false;
            return;
        }
        self.session_fns.push(SessionFnUse {
            function,
            span: TokSpan {
                first: i,
                last: i + 2,
            },
            keep_name: self.unnamed_items.contains(&i),
        });
    }
}

/// A sharded table reference of the statement.
#[derive(Debug, Clone)]
struct TableRef {
    table: TableId,
    /// The name the statement uses for it: its alias, else its table name (lower case).
    visible_name: String,
    aliased: bool,
}

struct Planner<'a, 'p> {
    cx: AnalyzeContext<'a>,
    pos: &'a Positions<'p>,
    walk: &'a Walk<'a, 'p>,
    refs: Vec<TableRef>,
    edits: Vec<TableEdit>,
    cacheable: bool,
}

fn ident_parts(name: &ObjectName) -> Option<Vec<&Ident>> {
    name.0.iter().map(|p| p.as_ident()).collect()
}

impl Planner<'_, '_> {
    fn not_yet(what: &str) -> Target {
        Target::Refused(Refusal::NotYet(what.to_owned()))
    }

    fn is_logical_db(&self, name: &str) -> bool {
        name.eq_ignore_ascii_case(&self.cx.config.sharding.logical_database)
    }

    /// The binding table a relation names, if it is one.
    fn sharded_table(&self, name: &ObjectName) -> Option<TableId> {
        let parts = ident_parts(name)?;
        match parts.as_slice() {
            [table] if self.cx.db_is_logical => {
                let lower = table.value.to_ascii_lowercase();
                if self.walk.cte_names.contains(&lower) {
                    return None;
                }
                self.cx.config.binding_table(&table.value)
            }
            [db, table] if self.is_logical_db(&db.value) => {
                self.cx.config.binding_table(&table.value)
            }
            _ => None,
        }
    }

    fn target(&mut self, statement: &Statement) -> Target {
        let mut sharded = 0;
        let mut other = 0;
        for (name, _) in &self.walk.relations {
            if self.sharded_table(name).is_some() {
                sharded += 1;
            } else {
                let cte = ident_parts(name).is_some_and(|p| {
                    p.len() == 1
                        && self
                            .walk
                            .cte_names
                            .contains(&p[0].value.to_ascii_lowercase())
                });
                if !cte {
                    other += 1;
                }
            }
        }
        if sharded == 0 {
            let dml = matches!(
                statement,
                Statement::Query(_)
                    | Statement::Insert(_)
                    | Statement::Update(_)
                    | Statement::Delete(_)
            );
            // DDL and other statements name tables in places the visitor does not report.
            if !dml && mentions_sharded_table(self.pos, self.cx) {
                return Target::Refused(Refusal::Unsupported(
                    "this statement on a sharded table (DDL and maintenance statements run on each shard directly)".to_owned(),
                ));
            }
            return Target::Unsharded;
        }
        if other > 0 {
            return Self::not_yet("a statement over both sharded and unsharded tables");
        }
        for (name, alias) in &self.walk.relations {
            if let Some(table) = self.sharded_table(name) {
                self.add_ref(name, table, alias.clone());
            }
        }
        let plan = match statement {
            Statement::Query(q) => self.plan_query(q),
            Statement::Insert(ins) => self.plan_insert(ins),
            Statement::Update(u) => self.plan_update(u),
            Statement::Delete(d) => self.plan_delete(d),
            Statement::Explain { .. } => Err(Self::not_yet("EXPLAIN of a statement on a sharded table")),
            _ => Err(Target::Refused(Refusal::Unsupported(
                "this statement on a sharded table (DDL and maintenance statements run on each shard directly)".to_owned(),
            ))),
        };
        match plan {
            Ok(mut plan) => {
                self.add_qualifier_edits();
                plan.edits = std::mem::take(&mut self.edits);
                plan.edits.sort_by_key(|e| e.span.first);
                plan.edits.dedup();
                Target::Sharded(Box::new(plan))
            }
            Err(refused) => refused,
        }
    }

    fn add_ref(&mut self, name: &ObjectName, table: TableId, alias: Option<String>) {
        let Some(parts) = ident_parts(name) else {
            return;
        };
        match self.pos.ident_span(&parts) {
            Some(span) => self.edits.push(TableEdit {
                span,
                table,
                form: EditForm::Qualified,
            }),
            None => self.cacheable = false,
        }
        let table_name = parts
            .last()
            .map(|i| i.value.to_ascii_lowercase())
            .unwrap_or_default();
        self.refs.push(TableRef {
            table,
            aliased: alias.is_some(),
            visible_name: alias.unwrap_or(table_name),
        });
    }

    /// `t_order.col`, `orders.t_order.col` and `t_order.*` name the table itself: rewritten
    /// too. Qualifiers that are aliases stay.
    fn add_qualifier_edits(&mut self) {
        for parts in &self.walk.qualifiers {
            let refs: Vec<&Ident> = parts.iter().collect();
            let (span_parts, form, table) = match refs.as_slice() {
                [db, table, _col] if self.is_logical_db(&db.value) => {
                    (&refs[..2], EditForm::Qualified, table)
                }
                [table, _] | [table] => (&refs[..1], EditForm::TableOnly, table),
                _ => continue,
            };
            let lower = table.value.to_ascii_lowercase();
            let Some(r) = self
                .refs
                .iter()
                .find(|r| !r.aliased && r.visible_name == lower)
            else {
                continue;
            };
            match self.pos.ident_span(span_parts) {
                Some(span) => self.edits.push(TableEdit {
                    span,
                    table: r.table,
                    form,
                }),
                None => self.cacheable = false,
            }
        }
    }

    fn empty_plan(&self) -> ShardedPlan {
        ShardedPlan {
            edits: Vec::new(),
            primary_table: self.refs[0].table,
            key_values: Vec::new(),
            context: Vec::new(),
            rows: Vec::new(),
            values_span: None,
            needs_merge: false,
            sets_key: None,
            sets_context: Vec::new(),
        }
    }

    fn plan_query(&mut self, q: &Query) -> Result<ShardedPlan, Target> {
        let SetExpr::Select(select) = q.body.as_ref() else {
            return Err(Self::not_yet(
                "UNION or other set operations over sharded tables",
            ));
        };
        if q.with.is_some() || self.walk.selects > 1 || self.walk.derived {
            return Err(Self::not_yet(
                "subqueries, derived tables or CTEs over sharded tables",
            ));
        }
        self.check_joins(&select.from, select.selection.as_ref())?;
        let mut plan = self.empty_plan();
        self.read_where(select.selection.as_ref(), &mut plan)?;
        let group_by = match &select.group_by {
            sqlparser::ast::GroupByExpr::All(_) => true,
            sqlparser::ast::GroupByExpr::Expressions(e, _) => !e.is_empty(),
        };
        plan.needs_merge = select.distinct.is_some()
            || group_by
            || select.having.is_some()
            || self.walk.aggregate
            || q.order_by.is_some()
            || q.limit_clause.is_some();
        Ok(plan)
    }

    fn plan_update(&mut self, u: &Update) -> Result<ShardedPlan, Target> {
        if u.from.is_some() || self.walk.selects > 0 || self.walk.derived {
            return Err(Self::not_yet(
                "UPDATE with subqueries or FROM over sharded tables",
            ));
        }
        self.check_joins(std::slice::from_ref(&u.table), u.selection.as_ref())?;
        let mut plan = self.empty_plan();
        self.read_where(u.selection.as_ref(), &mut plan)?;
        for a in &u.assignments {
            let sqlparser::ast::AssignmentTarget::ColumnName(col) = &a.target else {
                return Err(Self::not_yet("tuple assignments"));
            };
            let column = col
                .0
                .last()
                .and_then(|p| p.as_ident())
                .map(|i| i.value.to_ascii_lowercase())
                .unwrap_or_default();
            let value = self.pos.value_slot(&a.value);
            let sharding = &self.cx.config.sharding;
            if column == sharding.shard_key {
                plan.sets_key = Some(value);
            } else if column == sharding.channel_column {
                plan.sets_context.push(ContextSlot {
                    kind: ContextKind::Channel,
                    value,
                });
            } else if column == sharding.region_column {
                plan.sets_context.push(ContextSlot {
                    kind: ContextKind::Region,
                    value,
                });
            }
        }
        plan.needs_merge = !u.order_by.is_empty() || u.limit.is_some();
        Ok(plan)
    }

    fn plan_delete(&mut self, d: &Delete) -> Result<ShardedPlan, Target> {
        if self.walk.selects > 0 || self.walk.derived {
            return Err(Self::not_yet("DELETE with subqueries over sharded tables"));
        }
        let from = match &d.from {
            FromTable::WithFromKeyword(f) | FromTable::WithoutKeyword(f) => f,
        };
        let mut all: Vec<TableWithJoins> = from.clone();
        if let Some(using) = &d.using {
            all.extend(using.iter().cloned());
        }
        self.check_joins(&all, d.selection.as_ref())?;
        // Multi-table DELETE targets name aliases or tables; tables are rewritten.
        for target in &d.tables {
            let Some(parts) = ident_parts(target) else {
                continue;
            };
            let lower = parts
                .last()
                .map(|i| i.value.to_ascii_lowercase())
                .unwrap_or_default();
            let Some(r) = self.refs.iter().find(|r| r.visible_name == lower) else {
                continue;
            };
            if r.aliased {
                continue;
            }
            let form = if parts.len() == 2 {
                EditForm::Qualified
            } else {
                EditForm::TableOnly
            };
            match self.pos.ident_span(&parts) {
                Some(span) => self.edits.push(TableEdit {
                    span,
                    table: r.table,
                    form,
                }),
                None => self.cacheable = false,
            }
        }
        let mut plan = self.empty_plan();
        self.read_where(d.selection.as_ref(), &mut plan)?;
        plan.needs_merge = !d.order_by.is_empty() || d.limit.is_some();
        Ok(plan)
    }

    fn plan_insert(&mut self, ins: &Insert) -> Result<ShardedPlan, Target> {
        let TableObject::TableName(_) = &ins.table else {
            return Err(Self::not_yet("INSERT INTO TABLE FUNCTION"));
        };
        let mut plan = self.empty_plan();
        let sharding = &self.cx.config.sharding;
        let column_names: Vec<String> = ins
            .columns
            .iter()
            .map(|c| {
                c.0.last()
                    .and_then(|p| p.as_ident())
                    .map(|i| i.value.to_ascii_lowercase())
                    .unwrap_or_default()
            })
            .collect();
        let index_of = |name: &str| column_names.iter().position(|c| c == name);
        let (key_col, channel_col, region_col) = (
            index_of(&sharding.shard_key),
            index_of(&sharding.channel_column),
            index_of(&sharding.region_column),
        );
        if let Some(OnInsert::DuplicateKeyUpdate(assignments)) = &ins.on {
            for a in assignments {
                let target = a.target.to_string().to_ascii_lowercase();
                let target = target.rsplit('.').next().unwrap_or("").trim_matches('`');
                if [
                    &sharding.shard_key,
                    &sharding.channel_column,
                    &sharding.region_column,
                ]
                .iter()
                .any(|c| c.as_str() == target)
                {
                    return Err(Target::Refused(Refusal::Unsupported(format!(
                        "ON DUPLICATE KEY UPDATE of `{target}`: the shard key, channel and region of an order cannot change"
                    ))));
                }
            }
        }
        if !ins.assignments.is_empty() {
            // INSERT ... SET col = value: one row.
            let mut row = InsertRow {
                span: TokSpan::one(0),
                order_id: None,
                channel: None,
                region: None,
            };
            for a in &ins.assignments {
                let name = a.target.to_string().to_ascii_lowercase();
                let name = name
                    .rsplit('.')
                    .next()
                    .unwrap_or("")
                    .trim_matches('`')
                    .to_owned();
                let slot = Some(self.pos.value_slot(&a.value));
                if name == sharding.shard_key {
                    row.order_id = slot;
                } else if name == sharding.channel_column {
                    row.channel = slot;
                } else if name == sharding.region_column {
                    row.region = slot;
                }
            }
            plan.rows.push(row);
            return Ok(plan);
        }
        let Some(source) = &ins.source else {
            return Err(Self::not_yet("this form of INSERT on a sharded table"));
        };
        let SetExpr::Values(values) = source.body.as_ref() else {
            return Err(Self::not_yet("INSERT ... SELECT into a sharded table"));
        };
        if self.walk.selects > 0 {
            return Err(Self::not_yet("INSERT with subqueries into a sharded table"));
        }
        if column_names.is_empty() {
            return Err(Self::not_yet(
                "INSERT into a sharded table without a column list (name the columns)",
            ));
        }
        for row in &values.rows {
            let (Some(open), Some(close)) = (
                self.pos.token_at(row.opening_token.0.span.start),
                self.pos.token_at(row.closing_token.0.span.start),
            ) else {
                return Err(Target::Refused(Refusal::Unsupported(
                    "an INSERT whose rows the proxy cannot locate in the text".to_owned(),
                )));
            };
            let slot = |i: Option<usize>| {
                i.and_then(|i| row.content.get(i))
                    .map(|e| self.pos.value_slot(e))
            };
            plan.rows.push(InsertRow {
                span: TokSpan {
                    first: open,
                    last: close,
                },
                order_id: slot(key_col),
                channel: slot(channel_col),
                region: slot(region_col),
            });
        }
        plan.values_span = match (plan.rows.first(), plan.rows.last()) {
            (Some(f), Some(l)) => Some(TokSpan {
                first: f.span.first,
                last: l.span.last,
            }),
            _ => None,
        };
        Ok(plan)
    }

    /// The FROM clause holds binding tables only, each joined to the others on the shard
    /// key, so a join stays inside one shard.
    fn check_joins(&self, from: &[TableWithJoins], selection: Option<&Expr>) -> Result<(), Target> {
        if self.refs.len() <= 1 {
            return Ok(());
        }
        let key = &self.cx.config.sharding.shard_key;
        let n = self.refs.len();
        let mut parent: Vec<usize> = (0..n).collect();
        fn find(p: &mut [usize], i: usize) -> usize {
            let mut i = i;
            while p[i] != i {
                p[i] = p[p[i]];
                i = p[i];
            }
            i
        }
        let mut union = |a: usize, b: usize| {
            let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
            parent[ra] = rb;
        };
        let index_of = |qualifier: &str| self.refs.iter().position(|r| r.visible_name == qualifier);
        let equalities = |expr: &Expr, union: &mut dyn FnMut(usize, usize)| {
            for term in and_terms(expr) {
                if let Expr::BinaryOp {
                    left,
                    op: sqlparser::ast::BinaryOperator::Eq,
                    right,
                } = term
                {
                    if let (Some((ql, cl)), Some((qr, cr))) = (column_ref(left), column_ref(right))
                    {
                        if &cl == key && &cr == key {
                            if let (Some(a), Some(b)) = (index_of(&ql), index_of(&qr)) {
                                union(a, b);
                            }
                        }
                    }
                }
            }
        };
        let mut position = 0usize;
        for twj in from {
            position += 1;
            for join in &twj.joins {
                let this = position;
                position += 1;
                use sqlparser::ast::{JoinConstraint as C, JoinOperator as J};
                let constraint = match &join.join_operator {
                    J::Join(c)
                    | J::Inner(c)
                    | J::Left(c)
                    | J::LeftOuter(c)
                    | J::Right(c)
                    | J::RightOuter(c)
                    | J::CrossJoin(c)
                    | J::StraightJoin(c) => Some(c),
                    _ => None,
                };
                match constraint {
                    Some(C::On(expr)) => equalities(expr, &mut union),
                    Some(C::Using(cols))
                        if cols.iter().any(|c| c.to_string().eq_ignore_ascii_case(key)) =>
                    {
                        union(this, this - 1)
                    }
                    Some(C::Natural) => union(this, this - 1),
                    _ => {}
                }
            }
        }
        if let Some(selection) = selection {
            equalities(selection, &mut union);
        }
        let root = find(&mut parent, 0);
        if (1..n).all(|i| find(&mut parent, i) == root) {
            Ok(())
        } else {
            Err(Self::not_yet(
                "a join of sharded tables that is not on the shard key (join binding tables ON a.order_id = b.order_id)",
            ))
        }
    }

    /// Finds the usable order id predicate and the route context among the top-level AND
    /// terms of the WHERE clause.
    fn read_where(&self, selection: Option<&Expr>, plan: &mut ShardedPlan) -> Result<(), Target> {
        let Some(selection) = selection else {
            return Ok(());
        };
        let sharding = &self.cx.config.sharding;
        let belongs = |qualifier: &str| {
            qualifier.is_empty() || self.refs.iter().any(|r| r.visible_name == qualifier)
        };
        for term in and_terms(selection) {
            match term {
                Expr::BinaryOp {
                    left,
                    op: sqlparser::ast::BinaryOperator::Eq,
                    right,
                } => {
                    let (col, value) = match (column_ref(left), column_ref(right)) {
                        (Some(c), None) => (c, right.as_ref()),
                        (None, Some(c)) => (c, left.as_ref()),
                        _ => continue,
                    };
                    if !belongs(&col.0) {
                        continue;
                    }
                    let slot = self.pos.value_slot(value);
                    if col.1 == sharding.shard_key {
                        if plan.key_values.is_empty() {
                            plan.key_values.push(slot);
                        }
                    } else if col.1 == sharding.channel_column {
                        plan.context.push(ContextSlot {
                            kind: ContextKind::Channel,
                            value: slot,
                        });
                    } else if col.1 == sharding.region_column {
                        plan.context.push(ContextSlot {
                            kind: ContextKind::Region,
                            value: slot,
                        });
                    }
                }
                Expr::In {
                    expr,
                    target: sqlparser::ast::InTarget::List(list),
                    negated: false,
                    ..
                } => {
                    let Some(col) = column_ref(expr) else {
                        continue;
                    };
                    if belongs(&col.0) && col.1 == sharding.shard_key && plan.key_values.is_empty()
                    {
                        plan.key_values = list.iter().map(|e| self.pos.value_slot(e)).collect();
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Whether any token names a sharded table: a binding table name, unqualified while the
/// session is in the logical database, or qualified by the logical database. Used for
/// statements the parser cannot read and statements whose table names it does not report.
pub fn mentions_sharded_table(pos: &Positions<'_>, cx: AnalyzeContext<'_>) -> bool {
    token_mentions_sharded_table(pos.decoded_sql(), pos.tokens, cx)
}

/// [`mentions_sharded_table`] on raw tokens.
pub fn token_mentions_sharded_table(
    sql: &[u8],
    tokens: &[super::lexer::Token],
    cx: AnalyzeContext<'_>,
) -> bool {
    !sharded_table_tokens(sql, tokens, cx).is_empty()
}

/// The tokens that name sharded tables, found without parsing: each span covers the table
/// name and its `db.` qualifier when it has one.
pub fn sharded_table_tokens(
    sql: &[u8],
    tokens: &[super::lexer::Token],
    cx: AnalyzeContext<'_>,
) -> Vec<(TokSpan, TableId)> {
    let mode = super::lexer::LexMode::default();
    let name = |t: &super::lexer::Token| super::command::ident_text(sql, t, mode);
    let mut out = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        if !matches!(t.kind, TokenKind::Word | TokenKind::QuotedIdent) {
            continue;
        }
        let Some(table) = cx.config.binding_table(&name(t)) else {
            continue;
        };
        let dotted = i >= 1 && tokens[i - 1].is_punct(sql, ".");
        let span = if dotted {
            let qualified_by_logical = i >= 2
                && cx
                    .config
                    .sharding
                    .logical_database
                    .eq_ignore_ascii_case(&name(&tokens[i - 2]));
            if !qualified_by_logical {
                continue;
            }
            TokSpan {
                first: (i - 2) as u32,
                last: i as u32,
            }
        } else if cx.db_is_logical {
            TokSpan::one(i as u32)
        } else {
            continue;
        };
        out.push((span, table));
    }
    out
}

#[cfg(test)]
#[path = "analyze_tests.rs"]
mod tests;
