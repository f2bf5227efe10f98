//! GROUP BY and aggregates over several shards: what each shard computes and how the
//! merge combines it (see the parent module).

use sqlparser::ast::{Distinct, Expr, Query, Select, Value as AstValue};

use super::{
    Builder, Clauses, Item, OrderKey, agg_fn, aggregate_name, binary_op, empty_merge, function,
    group_exprs, number, unary_op,
};
use crate::merge::expr::Expr as MExpr;
use crate::merge::value::Value;
use crate::merge::{AggFn, Aggregate, Col, Grouping, KeyCols, MergeSpec, Output, SortKey};
use crate::sql::{Piece, TokSpan};

/// The grouping being built: keys by their comparable text.
struct Groups {
    grouping: Grouping,
    key_texts: Vec<Vec<u8>>,
}

impl Builder<'_, '_> {
    pub(super) fn grouped(
        &mut self,
        q: &Query,
        select: &Select,
        items: &[Item],
        clauses: &Clauses,
    ) -> Result<MergeSpec, String> {
        if items.iter().any(|i| i.expr.is_none()) {
            return Err(
                "`*` in a SELECT with GROUP BY or aggregates over several shards".to_owned(),
            );
        }
        if matches!(select.distinct, Some(Distinct::Distinct)) {
            return Err("DISTINCT with GROUP BY or aggregates over several shards".to_owned());
        }
        let mut g = Groups {
            grouping: Grouping {
                keys: Vec::new(),
                rows: Col::Hidden(0),
                aggregates: Vec::new(),
                outputs: Vec::new(),
                having: None,
            },
            key_texts: Vec::new(),
        };
        let exprs = group_exprs(select);
        let spans = clauses
            .group
            .map(|c| self.list_items(c, 2))
            .unwrap_or_default();
        if spans.len() != exprs.len() {
            return Err("this GROUP BY clause (the proxy could not read its keys)".to_owned());
        }
        for (expr, span) in exprs.into_iter().zip(spans) {
            let (span, _) = self.resolve(expr, span, items, "GROUP BY")?;
            if aggregate_in(expr) {
                return Err("GROUP BY an aggregate".to_owned());
            }
            g.key_texts.push(self.text_key(span));
            let key = self.key_of(span);
            g.grouping.keys.push(key);
        }
        g.grouping.rows = self.hide(vec![Piece::Text("COUNT(*)")]);
        for (i, (item, ast_item)) in items.iter().zip(&select.projection).enumerate() {
            let expr = match ast_item {
                sqlparser::ast::SelectItem::UnnamedExpr(e)
                | sqlparser::ast::SelectItem::ExprWithAlias { expr: e, .. } => e,
                _ => return Err("this select item in a grouped SELECT".to_owned()),
            };
            let span = item.expr.expect("checked above");
            let output = self.output(expr, span, Some(Col::Visible(i)), items, &mut g)?;
            g.grouping.outputs.push(output);
        }
        let mut order = Vec::new();
        for OrderKey {
            span,
            descending,
            item,
            expr,
        } in self.order_keys(q, items, clauses)?
        {
            let index = match item {
                Some(i) => i,
                None => {
                    let output = self.output(expr, span, None, items, &mut g)?;
                    g.grouping.outputs.push(output);
                    g.grouping.outputs.len() - 1
                }
            };
            order.push(SortKey {
                key: KeyCols {
                    value: Col::Visible(index),
                    text: None,
                },
                descending,
            });
        }
        if let Some(having) = &select.having {
            g.grouping.having = Some(self.convert(having, items, &mut g, "HAVING")?);
        }
        Ok(MergeSpec {
            order,
            grouping: Some(g.grouping),
            ..empty_merge()
        })
    }

    /// How one column of a merged row is computed; `visible` is its column when the
    /// client sees it.
    fn output(
        &mut self,
        expr: &Expr,
        span: TokSpan,
        visible: Option<Col>,
        items: &[Item],
        g: &mut Groups,
    ) -> Result<Output, String> {
        let expr = unnest(expr);
        if let Some(name) = aggregate_name(expr) {
            if name == "avg" {
                let args = self.call_args(span)?;
                let sum = self.aggregate(
                    AggFn::Sum,
                    vec![Piece::Text("SUM("), Piece::Tokens(args), Piece::Text(")")],
                    g,
                );
                let count = self.aggregate(
                    AggFn::Count,
                    vec![Piece::Text("COUNT("), Piece::Tokens(args), Piece::Text(")")],
                    g,
                );
                return Ok(Output::Average { sum, count });
            }
            let func = agg_fn(&name).ok_or_else(|| format!("{}()", name.to_uppercase()))?;
            let column = match visible {
                Some(c) => c,
                None => self.hide_copy(span),
            };
            let text = matches!(func, AggFn::Min | AggFn::Max).then(|| self.trio(span));
            g.grouping.aggregates.push(Aggregate { func, column, text });
            return Ok(Output::Aggregate(g.grouping.aggregates.len() - 1));
        }
        if aggregate_in(expr) {
            if visible.is_some() {
                self.computed.push(span);
            }
            return Ok(Output::Expr(self.convert(
                expr,
                items,
                g,
                "an expression",
            )?));
        }
        let key = self.text_key(span);
        if let Some(k) = g.key_texts.iter().position(|t| *t == key) {
            return Ok(Output::Key(k));
        }
        let value = match visible {
            Some(c) => c,
            None => self.hide_copy(span),
        };
        Ok(Output::First(KeyCols {
            value,
            text: Some(self.trio(span)),
        }))
    }

    /// A hidden column holding a shard's partial aggregate.
    fn aggregate(&mut self, func: AggFn, pieces: Vec<Piece>, g: &mut Groups) -> usize {
        let column = self.hide(pieces);
        g.grouping.aggregates.push(Aggregate {
            func,
            column,
            text: None,
        });
        g.grouping.aggregates.len() - 1
    }

    /// The tokens inside the parentheses of a call spanning `span` (`f(args)`).
    fn call_args(&self, span: TokSpan) -> Result<TokSpan, String> {
        let sql = self.sql();
        let tokens = self.tokens();
        let open = tokens.get(span.first as usize + 1);
        let close = tokens.get(span.last as usize);
        if !(open.is_some_and(|t| t.is_punct(sql, "("))
            && close.is_some_and(|t| t.is_punct(sql, ")"))
            && span.last > span.first + 2)
        {
            return Err("this aggregate call (the proxy could not read its argument)".to_owned());
        }
        Ok(TokSpan {
            first: span.first + 2,
            last: span.last - 1,
        })
    }

    /// The tokens of the call whose name is at token `name`: through its closing `)`.
    fn call_span(&self, name: u32) -> Option<TokSpan> {
        let sql = self.sql();
        let tokens = self.tokens();
        if !tokens.get(name as usize + 1)?.is_punct(sql, "(") {
            return None;
        }
        let mut depth = 0i32;
        for (i, t) in tokens.iter().enumerate().skip(name as usize + 1) {
            if t.is_punct(sql, "(") {
                depth += 1;
            } else if t.is_punct(sql, ")") {
                depth -= 1;
                if depth == 0 {
                    return Some(TokSpan {
                        first: name,
                        last: i as u32,
                    });
                }
            }
        }
        None
    }

    /// An expression over merged values: aggregates become hidden partial columns,
    /// names become group keys or select items.
    fn convert(
        &mut self,
        expr: &Expr,
        items: &[Item],
        g: &mut Groups,
        place: &str,
    ) -> Result<MExpr, String> {
        let mut c = |e: &Expr, b: &mut Self| b.convert(e, items, g, place);
        Ok(match expr {
            Expr::Nested(inner) => return self.convert(inner, items, g, place),
            Expr::Value(v) => match &v.value {
                AstValue::Number(n, _) => {
                    MExpr::Literal(number(n).ok_or_else(|| format!("the number {n} in {place}"))?)
                }
                AstValue::Null => MExpr::Literal(Value::Null),
                AstValue::Boolean(b) => MExpr::Literal(Value::Int(i128::from(*b))),
                AstValue::Placeholder(_) => {
                    return Err(format!(
                        "a ? parameter in {place} over several shards (the merge computes with the numbers written in the statement: write the value in the SQL text)"
                    ));
                }
                _ => {
                    return Err(format!(
                        "a text or other literal in {place} over several shards (only numbers are compared after the merge)"
                    ));
                }
            },
            Expr::UnaryOp { op, expr: inner } => match unary_op(op) {
                Some(op) => MExpr::Unary(op, Box::new(c(inner, self)?)),
                None if matches!(op, sqlparser::ast::UnaryOperator::Plus) => c(inner, self)?,
                None => return Err(format!("the operator {op} in {place} over several shards")),
            },
            Expr::BinaryOp { left, op, right } => match binary_op(op) {
                Some(bop) => {
                    MExpr::Binary(bop, Box::new(c(left, self)?), Box::new(c(right, self)?))
                }
                None => return Err(format!("the operator {op} in {place} over several shards")),
            },
            Expr::IsNull(inner) => MExpr::IsNull(Box::new(c(inner, self)?), false),
            Expr::IsNotNull(inner) => MExpr::IsNull(Box::new(c(inner, self)?), true),
            Expr::Between {
                expr: e,
                negated,
                low,
                high,
            } => MExpr::Between(
                Box::new(c(e, self)?),
                Box::new(c(low, self)?),
                Box::new(c(high, self)?),
                *negated,
            ),
            Expr::In {
                expr: e,
                target: sqlparser::ast::InTarget::List(list),
                negated,
                ..
            } => {
                let e = c(e, self)?;
                let list = list.iter().map(|x| c(x, self)).collect::<Result<_, _>>()?;
                MExpr::InList(Box::new(e), list, *negated)
            }
            Expr::Function(f) => self.convert_call(expr, f, items, g, place)?,
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) => {
                self.name(expr, items, g, place)?
            }
            other => {
                return Err(format!(
                    "`{other}` in {place} over several shards (the merge computes numbers, comparisons, NULLIF, IFNULL, COALESCE, IF and ABS over aggregates and group keys)"
                ));
            }
        })
    }

    fn convert_call(
        &mut self,
        expr: &Expr,
        f: &sqlparser::ast::Function,
        items: &[Item],
        g: &mut Groups,
        place: &str,
    ) -> Result<MExpr, String> {
        let name_ident = f
            .name
            .0
            .last()
            .and_then(|p| p.as_ident())
            .ok_or_else(|| format!("this function in {place}"))?;
        let name = name_ident.value.to_ascii_lowercase();
        if let Some(agg) = aggregate_name(expr) {
            let func = agg_fn(&agg).ok_or_else(|| {
                format!(
                    "{}() inside {place} over several shards",
                    agg.to_uppercase()
                )
            })?;
            let span = self
                .pos
                .token_at(name_ident.span.start)
                .and_then(|t| self.call_span(t))
                .ok_or_else(|| {
                    format!("this aggregate in {place} (the proxy could not find it)")
                })?;
            let column = self.hide(vec![Piece::Tokens(span)]);
            let text = matches!(func, AggFn::Min | AggFn::Max).then(|| self.trio(span));
            g.grouping.aggregates.push(Aggregate { func, column, text });
            return Ok(MExpr::Aggregate(g.grouping.aggregates.len() - 1));
        }
        let function = function(&name).ok_or_else(|| {
            format!(
                "{}() in {place} over several shards (the merge computes NULLIF, IFNULL, COALESCE, IF and ABS)",
                name.to_uppercase()
            )
        })?;
        let sqlparser::ast::FunctionArguments::List(list) = &f.args else {
            return Err(format!(
                "{}() without arguments in {place}",
                name.to_uppercase()
            ));
        };
        let mut args = Vec::new();
        for arg in &list.args {
            let sqlparser::ast::FunctionArg::Unnamed(sqlparser::ast::FunctionArgExpr::Expr(e)) =
                arg
            else {
                return Err(format!(
                    "this argument of {}() in {place}",
                    name.to_uppercase()
                ));
            };
            args.push(self.convert(e, items, g, place)?);
        }
        Ok(MExpr::Call(function, args))
    }

    /// A column name in HAVING or an aggregate expression: a select alias, or a group key.
    fn name(
        &mut self,
        expr: &Expr,
        items: &[Item],
        g: &mut Groups,
        place: &str,
    ) -> Result<MExpr, String> {
        let idents: Vec<&sqlparser::ast::Ident> = match expr {
            Expr::Identifier(id) => vec![id],
            Expr::CompoundIdentifier(parts) => parts.iter().collect(),
            _ => unreachable!("called for names"),
        };
        if let [id] = idents.as_slice() {
            let lower = id.value.to_ascii_lowercase();
            if let Some(i) = items
                .iter()
                .position(|it| it.alias.as_deref() == Some(&lower))
            {
                return Ok(MExpr::Output(i));
            }
        }
        let span = self
            .pos
            .ident_span(&idents)
            .ok_or_else(|| format!("a name in {place} (the proxy could not find it)"))?;
        let key = self.text_key(span);
        match g.key_texts.iter().position(|t| *t == key) {
            Some(k) => Ok(MExpr::Key(k)),
            None => Err(format!(
                "`{expr}` in {place} over several shards: it is neither grouped nor aggregated"
            )),
        }
    }
}

fn unnest(e: &Expr) -> &Expr {
    match e {
        Expr::Nested(inner) => unnest(inner),
        other => other,
    }
}

/// Whether an aggregate call appears in `e`.
fn aggregate_in(e: &Expr) -> bool {
    let mut found = false;
    let _ = sqlparser::ast::visit_expressions(e, |x| {
        if aggregate_name(x).is_some() {
            found = true;
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    found
}
