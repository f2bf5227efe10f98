//! From what the visitor collected to a routing plan: which tables are sharded, whether
//! binding tables join on the shard key, the order id predicate, context and insert rows.

use sqlparser::ast::{
    Delete, Expr, FromTable, Ident, Insert, ObjectName, OnInsert, Query, SetExpr, Statement,
    TableObject, TableWithJoins, Update,
};

use super::tables::{AnalyzeContext, mentions_sharded_table};
use super::walk::Walk;
use crate::config::TableId;
use crate::sql::predicates::{Positions, and_terms, column_ref};
use crate::sql::*;

/// A sharded table reference of the statement.
#[derive(Debug, Clone)]
struct TableRef {
    table: TableId,
    /// The name the statement uses for it: its alias, else its table name (lower case).
    visible_name: String,
    aliased: bool,
}

pub(super) struct Planner<'a, 'p> {
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

impl<'a, 'p> Planner<'a, 'p> {
    pub(super) fn new(
        cx: AnalyzeContext<'a>,
        pos: &'a Positions<'p>,
        walk: &'a Walk<'a, 'p>,
    ) -> Self {
        Self {
            cx,
            pos,
            walk,
            refs: Vec::new(),
            edits: Vec::new(),
            cacheable: walk.cacheable,
        }
    }

    /// Every position mapped to a token.
    pub(super) fn cacheable(&self) -> bool {
        self.cacheable
    }
}

impl Planner<'_, '_> {
    fn not_yet(what: &str) -> Placement {
        Placement::Refused(Refusal::NotYet(what.to_owned()))
    }

    /// Only rows of the first binding table (the orders) get ids the proxy issues: a row of
    /// another one (an order's items) names the order it belongs to.
    fn may_issue_ids(&self, plan: &ShardedPlan) -> Result<(), Placement> {
        if plan.primary_table.0 == 0 {
            return Ok(());
        }
        let tables = &self.cx.config.sharding.binding_tables;
        Err(Placement::Refused(Refusal::Unsupported(format!(
            "INSERT into {} without {}: the proxy issues ids for new rows of {} only; a row of {} names the order it belongs to",
            tables[usize::from(plan.primary_table.0)],
            self.cx.config.sharding.shard_key,
            tables[0],
            tables[usize::from(plan.primary_table.0)],
        ))))
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

    pub(super) fn placement(&mut self, statement: &Statement) -> Placement {
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
                return Placement::Refused(Refusal::Unsupported(
                    "this statement on a sharded table (DDL and maintenance statements run on each shard directly)".to_owned(),
                ));
            }
            return Placement::Unsharded;
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
            _ => Err(Placement::Refused(Refusal::Unsupported(
                "this statement on a sharded table (DDL and maintenance statements run on each shard directly)".to_owned(),
            ))),
        };
        match plan {
            Ok(mut plan) => {
                self.add_qualifier_edits();
                plan.edits = std::mem::take(&mut self.edits);
                plan.edits.sort_by_key(|e| e.span.first);
                plan.edits.dedup();
                Placement::Sharded(Box::new(plan))
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
            key_insert: None,
            sets_context: Vec::new(),
            multi: None,
        }
    }

    fn plan_query(&mut self, q: &Query) -> Result<ShardedPlan, Placement> {
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
        plan.multi = Some(Box::new(super::multi::multi_shard(self.pos, q, select)));
        // A shape stands for statements that differ in literals; a merge reads the select
        // list, GROUP BY, HAVING and ORDER BY (`ORDER BY 2`, `HAVING n > 30`, `COUNT(*) + 1`),
        // so their literals must not be shared. WHERE and LIMIT values are read per statement.
        if plan.needs_merge && literal_beyond_where_and_limit(self.pos.sql, self.pos.tokens) {
            self.cacheable = false;
        }
        Ok(plan)
    }

    fn plan_update(&mut self, u: &Update) -> Result<ShardedPlan, Placement> {
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

    fn plan_delete(&mut self, d: &Delete) -> Result<ShardedPlan, Placement> {
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

    fn plan_insert(&mut self, ins: &Insert) -> Result<ShardedPlan, Placement> {
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
                    return Err(Placement::Refused(Refusal::Unsupported(format!(
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
            if row.order_id.is_none() {
                self.may_issue_ids(&plan)?;
                let after = ins
                    .assignments
                    .first()
                    .and_then(|a| match &a.target {
                        sqlparser::ast::AssignmentTarget::ColumnName(n) => n.0.first()?.as_ident(),
                        _ => None,
                    })
                    .and_then(|i| self.pos.token_at(i.span.start))
                    .and_then(|t| t.checked_sub(1))
                    .filter(|&t| self.pos.tokens[t as usize].is_word(self.pos.decoded_sql(), "set"))
                    .ok_or_else(|| Self::not_yet("this form of INSERT without order_id"))?;
                plan.key_insert = Some(KeyInsert::Assignments { after });
                row.order_id = Some(ValueSlot::Generated(0));
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
        if key_col.is_none() {
            self.may_issue_ids(&plan)?;
            let after = ins
                .columns
                .first()
                .and_then(|c| c.0.first()?.as_ident())
                .and_then(|i| self.pos.token_at(i.span.start))
                .and_then(|t| t.checked_sub(1))
                .filter(|&t| self.pos.tokens[t as usize].is_punct(self.pos.decoded_sql(), "("))
                .ok_or_else(|| Self::not_yet("this form of INSERT without order_id"))?;
            plan.key_insert = Some(KeyInsert::ColumnList { after });
        }
        for (n, row) in values.rows.iter().enumerate() {
            let (Some(open), Some(close)) = (
                self.pos.token_at(row.opening_token.0.span.start),
                self.pos.token_at(row.closing_token.0.span.start),
            ) else {
                return Err(Placement::Refused(Refusal::Unsupported(
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
                order_id: match key_col {
                    Some(_) => slot(key_col),
                    None => Some(ValueSlot::Generated(n as u32)),
                },
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
    fn check_joins(
        &self,
        from: &[TableWithJoins],
        selection: Option<&Expr>,
    ) -> Result<(), Placement> {
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
    fn read_where(
        &self,
        selection: Option<&Expr>,
        plan: &mut ShardedPlan,
    ) -> Result<(), Placement> {
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

/// Whether a literal lies outside the top-level WHERE and LIMIT clauses of a SELECT.
fn literal_beyond_where_and_limit(sql: &[u8], tokens: &[crate::sql::lexer::Token]) -> bool {
    use crate::sql::lexer::TokenKind;
    #[derive(PartialEq)]
    enum Clause {
        Other,
        Where,
        Limit,
    }
    let mut clause = Clause::Other;
    let mut depth = 0i32;
    for t in tokens {
        if t.is_punct(sql, "(") {
            depth += 1;
        } else if t.is_punct(sql, ")") {
            depth -= 1;
        } else if depth == 0 && t.kind == TokenKind::Word {
            if t.is_word(sql, "where") {
                clause = Clause::Where;
            } else if t.is_word(sql, "limit") || t.is_word(sql, "offset") {
                clause = Clause::Limit;
            } else if [
                "group", "having", "order", "window", "for", "lock", "into", "union",
            ]
            .iter()
            .any(|w| t.is_word(sql, w))
            {
                clause = Clause::Other;
            }
        }
        let literal = matches!(
            t.kind,
            TokenKind::Number | TokenKind::String | TokenKind::HexOrBit
        );
        if literal && clause == Clause::Other {
            return true;
        }
    }
    false
}
