//! One pass of sqlparser's visitor over a statement: its relations with their aliases, CTE
//! names, qualifiers, session functions, aggregates and pinning functions.

use std::collections::HashSet;
use std::ops::ControlFlow;

use sqlparser::ast::{
    Expr, Ident, ObjectName, Query, Select, SelectItem, SelectItemQualifiedWildcardKind,
    TableFactor, Visitor,
};

use crate::sql::lexer::TokenKind;
use crate::sql::predicates::{AGGREGATES, PINNING_FUNCTIONS, Positions, session_fn};
use crate::sql::{SessionFn, SessionFnUse, TokSpan};

/// What one pass of the visitor collects.
pub(super) struct Walk<'a, 'p> {
    pub(super) pos: &'a Positions<'p>,
    /// Every table reference (FROM, JOIN, INSERT INTO, UPDATE), with its alias.
    pub(super) relations: Vec<(ObjectName, Option<String>)>,
    pub(super) cte_names: HashSet<String>,
    pub(super) selects: usize,
    pub(super) derived: bool,
    pub(super) aggregate: bool,
    pub(super) pins: bool,
    pub(super) qualifiers: Vec<Vec<Ident>>,
    pub(super) session_fns: Vec<SessionFnUse>,
    pub(super) unnamed_items: HashSet<u32>,
    pub(super) cacheable: bool,
}

impl<'a, 'p> Walk<'a, 'p> {
    pub(super) fn new(pos: &'a Positions<'p>) -> Self {
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
    /// `(database, table)` of every relation named with a database, and of every
    /// `db.t.column` reference.
    pub(super) fn qualified_tables(&self) -> Vec<(String, String)> {
        let relations = self.relations.iter().filter_map(|(name, _)| {
            let parts: Vec<&Ident> = name.0.iter().filter_map(|p| p.as_ident()).collect();
            match parts.as_slice() {
                [.., db, table] => Some((db.value.clone(), table.value.clone())),
                _ => None,
            }
        });
        let columns = self
            .qualifiers
            .iter()
            .filter_map(|parts| match parts.as_slice() {
                [.., db, table, _] => Some((db.value.clone(), table.value.clone())),
                _ => None,
            });
        let mut out: Vec<(String, String)> = relations.chain(columns).collect();
        out.dedup();
        out
    }

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
