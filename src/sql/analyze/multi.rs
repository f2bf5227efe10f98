//! How a SELECT on sharded tables runs on several shards (SPEC §5): the columns each
//! shard's statement gets for the merge, the clauses it loses, and the merge itself. Made
//! once per statement shape from the parse tree and the tokens; a SELECT whose results
//! cannot be merged exactly gets the reason instead.
//!
//! Rows without grouping: each shard orders its rows (its ORDER BY stays, with `LIMIT
//! offset + count`), and the merge interleaves them by the same keys, compared as the
//! server compares them: text by its collation's weights (`WEIGHT_STRING`, with the pad
//! unit of PAD SPACE collations), numbers, decimals and temporals by value. With GROUP BY
//! or aggregates: each shard groups its rows (no HAVING, ORDER BY or LIMIT); the merge
//! combines partial rows of a group (COUNT and SUM summed, MIN and MAX compared, AVG from
//! the combined SUM and COUNT), then applies HAVING, ORDER BY and LIMIT.

use sqlparser::ast::{
    self, BinaryOperator, Distinct, Expr, FunctionArguments, GroupByExpr, LimitClause as AstLimit,
    OrderByKind, OrderBySort, Query, Select, SelectItem, UnaryOperator, Value as AstValue,
};

use crate::merge::decimal::Decimal;
use crate::merge::expr::{BinaryOp, Function, UnaryOp};
use crate::merge::value::Value;
use crate::merge::{AggFn, Col, KeyCols, MergeSpec, SortKey, TextCols};
use crate::sql::lexer::{Token, TokenKind};
use crate::sql::predicates::{AGGREGATES, Positions};
use crate::sql::{LimitClause, MultiShard, Piece, TokSpan};

/// The multi-shard form of a SELECT, or one that names why it cannot be merged.
pub(super) fn multi_shard(pos: &Positions<'_>, q: &Query, select: &Select) -> MultiShard {
    let mut b = Builder {
        pos,
        hidden: Vec::new(),
        computed: Vec::new(),
    };
    match b.build(q, select) {
        Ok(multi) => multi,
        Err(why) => MultiShard {
            hidden: Vec::new(),
            insert_before: 0,
            removed: Vec::new(),
            tail: 0,
            computed: Vec::new(),
            calc_found_rows: false,
            limit: None,
            merge: empty_merge(),
            refused: Some(why),
        },
    }
}

fn empty_merge() -> MergeSpec {
    MergeSpec {
        hidden: 0,
        order: Vec::new(),
        offset: 0,
        limit: None,
        grouping: None,
        distinct: None,
        row_cap: 0,
    }
}

/// A select-list item.
struct Item {
    /// Its expression's tokens (`None` for `*` and `t.*`).
    expr: Option<TokSpan>,
    /// Its alias, lower case.
    alias: Option<String>,
}

/// One ORDER BY key: its expression (a position or alias resolved to the select item's),
/// direction, and the select item it is, if any.
struct OrderKey<'q> {
    span: TokSpan,
    descending: bool,
    item: Option<usize>,
    expr: &'q Expr,
}

/// Where the top-level clauses of the SELECT stand (token indices).
struct Clauses {
    items: Vec<TokSpan>,
    from: usize,
    group: Option<TokSpan>,
    having: Option<TokSpan>,
    order: Option<TokSpan>,
    limit: Option<TokSpan>,
    tail: usize,
    calc_found_rows: bool,
}

/// Statement modifiers that may follow SELECT before the select list.
const MODIFIERS: [&str; 11] = [
    "all",
    "distinct",
    "distinctrow",
    "high_priority",
    "straight_join",
    "sql_small_result",
    "sql_big_result",
    "sql_buffer_result",
    "sql_cache",
    "sql_no_cache",
    "sql_calc_found_rows",
];

/// Words that start a top-level clause after the select list.
const CLAUSES: [&str; 11] = [
    "from",
    "where",
    "group",
    "having",
    "window",
    "order",
    "limit",
    "for",
    "lock",
    "into",
    "procedure",
];

struct Builder<'a, 'p> {
    pos: &'a Positions<'p>,
    hidden: Vec<Vec<Piece>>,
    /// Visible items the merge computes (see [`MultiShard::computed`]).
    computed: Vec<TokSpan>,
}

impl Builder<'_, '_> {
    fn sql(&self) -> &[u8] {
        self.pos.decoded_sql()
    }

    fn tokens(&self) -> &[Token] {
        self.pos.tokens
    }

    fn word(&self, i: usize, w: &str) -> bool {
        self.tokens()
            .get(i)
            .is_some_and(|t| t.is_word(self.sql(), w))
    }

    /// Splits the statement into its top-level clauses.
    fn clauses(&self) -> Result<Clauses, String> {
        let tokens = self.tokens();
        let sql = self.sql();
        let plain = |t: &Token| !t.is_exec_marker();
        let unreadable = || "this form of SELECT (the proxy could not find its clauses)".to_owned();
        let first = tokens.iter().position(plain).ok_or_else(unreadable)?;
        if !tokens[first].is_word(sql, "select") {
            return Err(unreadable());
        }
        let mut start = first + 1;
        while tokens
            .get(start)
            .is_some_and(|t| MODIFIERS.iter().any(|m| t.is_word(sql, m)) || !plain(t))
        {
            start += 1;
        }
        let mut marks: Vec<(usize, String)> = Vec::new();
        let mut depth = 0i32;
        let mut commas = Vec::new();
        for (i, t) in tokens.iter().enumerate().skip(start) {
            if !plain(t) {
                // The shards' statements copy and cut clauses by tokens: a comment's
                // markers would be split from its body (`ORDER BY id /*!DESC*/`). Around
                // the modifiers (`SELECT /*!40001 SQL_NO_CACHE */ *`, as dumps send) is fine.
                return Err(
                    "an executable comment (/*! ... */) after the select list's start in a SELECT over several shards".to_owned(),
                );
            }
            if t.is_punct(sql, "(") {
                depth += 1;
            } else if t.is_punct(sql, ")") {
                depth -= 1;
            } else if depth == 0 && t.kind == TokenKind::Word {
                let w = String::from_utf8_lossy(t.bytes(sql)).to_ascii_lowercase();
                if CLAUSES.contains(&w.as_str()) && !(w == "for" && marks.is_empty()) {
                    marks.push((i, w));
                }
            } else if depth == 0 && t.is_punct(sql, ",") && marks.is_empty() {
                commas.push(i);
            }
        }
        let (from, _) = marks
            .first()
            .filter(|(_, w)| w == "from")
            .cloned()
            .ok_or_else(unreadable)?;
        let span_of = |name: &str| -> Option<TokSpan> {
            let k = marks.iter().position(|(_, w)| w == name)?;
            let end = marks.get(k + 1).map_or(tokens.len(), |(i, _)| *i);
            Some(TokSpan {
                first: marks[k].0 as u32,
                last: (end - 1) as u32,
            })
        };
        let mut items = Vec::new();
        let mut at = start;
        for &c in commas.iter().chain(std::iter::once(&from)) {
            if c == at {
                return Err(unreadable());
            }
            items.push(TokSpan {
                first: at as u32,
                last: (c - 1) as u32,
            });
            at = c + 1;
        }
        if marks
            .iter()
            .any(|(_, w)| w == "window" || w == "into" || w == "procedure")
        {
            return Err("SELECT ... INTO, WINDOW or PROCEDURE over several shards".to_owned());
        }
        let mut tail = marks
            .iter()
            .find(|(_, w)| w == "for" || w == "lock")
            .map_or(tokens.len(), |(i, _)| *i)
            - 1;
        while tail > from && tokens[tail].is_punct(sql, ";") {
            tail -= 1;
        }
        Ok(Clauses {
            items,
            from,
            group: span_of("group"),
            having: span_of("having"),
            order: span_of("order"),
            limit: span_of("limit"),
            tail,
            calc_found_rows: tokens[first + 1..start]
                .iter()
                .any(|t| t.is_word(sql, "sql_calc_found_rows")),
        })
    }

    /// The items of a clause list (GROUP BY, ORDER BY) after its keywords, split at
    /// top-level commas, each without a trailing ASC/DESC.
    fn list_items(&self, clause: TokSpan, keywords: usize) -> Vec<TokSpan> {
        let sql = self.sql();
        let mut out = Vec::new();
        let mut depth = 0i32;
        let start = clause.first as usize + keywords;
        let mut at = start;
        let last = clause.last as usize;
        for i in start..=last {
            let t = &self.tokens()[i];
            if t.is_punct(sql, "(") {
                depth += 1;
            } else if t.is_punct(sql, ")") {
                depth -= 1;
            } else if depth == 0 && t.is_punct(sql, ",") {
                out.push(self.strip_direction(at, i - 1));
                at = i + 1;
            }
        }
        if at <= last {
            out.push(self.strip_direction(at, last));
        }
        out
    }

    fn strip_direction(&self, first: usize, last: usize) -> TokSpan {
        let last = if last > first && (self.word(last, "asc") || self.word(last, "desc")) {
            last - 1
        } else {
            last
        };
        TokSpan {
            first: first as u32,
            last: last as u32,
        }
    }

    /// An identifier's or keyword's text, lower case, without quotes.
    fn token_text(&self, t: &Token) -> String {
        let b = t.bytes(self.sql());
        let b = if t.kind == TokenKind::QuotedIdent {
            &b[1..b.len().saturating_sub(1)]
        } else {
            b
        };
        String::from_utf8_lossy(b).to_ascii_lowercase()
    }

    /// A comparable text of a token span (words lower case), to find equal expressions.
    fn text_key(&self, span: TokSpan) -> Vec<u8> {
        let mut key = Vec::new();
        for t in &self.tokens()[span.first as usize..=span.last as usize] {
            match t.kind {
                TokenKind::Word => key.extend(t.bytes(self.sql()).to_ascii_lowercase()),
                TokenKind::QuotedIdent => {
                    let b = t.bytes(self.sql());
                    key.extend(b[1..b.len().saturating_sub(1)].to_ascii_lowercase());
                }
                _ => key.extend_from_slice(t.bytes(self.sql())),
            }
            key.push(b' ');
        }
        key
    }

    fn hide(&mut self, pieces: Vec<Piece>) -> Col {
        self.hidden.push(pieces);
        Col::Hidden(self.hidden.len() - 1)
    }

    fn hide_copy(&mut self, span: TokSpan) -> Col {
        self.hide(vec![
            Piece::Text("("),
            Piece::Tokens(span),
            Piece::Text(")"),
        ])
    }

    /// The hidden columns that compare `span`'s value as its collation does.
    fn trio(&mut self, span: TokSpan) -> TextCols {
        let e = Piece::Tokens(span);
        TextCols {
            weight: self.hide(vec![
                Piece::Text("WEIGHT_STRING("),
                e.clone(),
                Piece::Text(")"),
            ]),
            pad: self.hide(vec![
                Piece::Text("WEIGHT_STRING(LEFT(CONCAT(' ', "),
                e.clone(),
                Piece::Text("), 1))"),
            ]),
            pads: self.hide(vec![
                Piece::Text("(LEFT(CONCAT(' ', "),
                e.clone(),
                Piece::Text("), 1) = LEFT("),
                e,
                Piece::Text(", 0))"),
            ]),
        }
    }

    fn key_of(&mut self, span: TokSpan) -> KeyCols {
        KeyCols {
            value: self.hide_copy(span),
            text: Some(self.trio(span)),
        }
    }

    fn build(&mut self, q: &Query, select: &Select) -> Result<MultiShard, String> {
        refuse_unmergeable(q, select)?;
        let clauses = self.clauses()?;
        if clauses.items.len() != select.projection.len() {
            return Err("this select list (the proxy could not read its items)".to_owned());
        }
        let items: Vec<Item> = select
            .projection
            .iter()
            .zip(&clauses.items)
            .map(|(item, span)| self.item(item, *span))
            .collect();
        let grouped = !group_exprs(select).is_empty() || has_aggregate_in(select);
        let limit = self.limit(q, &clauses)?;
        let mut merge = if grouped {
            self.grouped(q, select, &items, &clauses)?
        } else {
            self.rows(q, select, &items, &clauses)?
        };
        merge.hidden = self.hidden.len();
        // Groups are complete only after the merge, so HAVING waits for it. ORDER BY stays:
        // it changes nothing the merge reads, and the server describes a sorted result's
        // columns differently (key flags dropped through its temporary table).
        let mut removed = Vec::new();
        if grouped {
            removed.extend(clauses.having);
        }
        Ok(MultiShard {
            hidden: std::mem::take(&mut self.hidden),
            insert_before: clauses.from as u32,
            removed,
            tail: clauses.tail as u32,
            computed: std::mem::take(&mut self.computed),
            calc_found_rows: clauses.calc_found_rows,
            limit: limit.map(|l| LimitClause {
                push_down: !grouped,
                ..l
            }),
            merge,
            refused: None,
        })
    }

    fn item(&self, item: &SelectItem, span: TokSpan) -> Item {
        match item {
            SelectItem::UnnamedExpr(_) => Item {
                expr: Some(span),
                alias: None,
            },
            SelectItem::ExprWithAlias { alias, .. } => {
                let mut last = span.last.saturating_sub(1);
                if last > span.first && self.word(last as usize, "as") {
                    last -= 1;
                }
                Item {
                    expr: Some(TokSpan {
                        first: span.first,
                        last,
                    }),
                    alias: Some(alias.value.to_ascii_lowercase()),
                }
            }
            _ => Item {
                expr: None,
                alias: None,
            },
        }
    }

    fn limit(&self, q: &Query, clauses: &Clauses) -> Result<Option<LimitClause>, String> {
        let Some(limit) = &q.limit_clause else {
            return Ok(None);
        };
        let span = clauses
            .limit
            .ok_or_else(|| "this LIMIT clause (the proxy could not find it)".to_owned())?;
        let (count, offset) = match limit {
            AstLimit::LimitOffset {
                limit,
                offset,
                limit_by,
            } => {
                if !limit_by.is_empty() {
                    return Err("LIMIT ... BY".to_owned());
                }
                let Some(count) = limit else {
                    return Err("LIMIT without a row count".to_owned());
                };
                (
                    self.pos.value_slot(count),
                    offset.as_ref().map(|o| self.pos.value_slot(&o.value)),
                )
            }
            AstLimit::OffsetCommaLimit { offset, limit } => (
                self.pos.value_slot(limit),
                Some(self.pos.value_slot(offset)),
            ),
        };
        Ok(Some(LimitClause {
            span,
            count,
            offset,
            push_down: true,
        }))
    }

    /// The ORDER BY keys: each key's expression tokens and direction. A position or an
    /// alias names a select item's expression.
    fn order_keys<'q>(
        &self,
        q: &'q Query,
        items: &[Item],
        clauses: &Clauses,
    ) -> Result<Vec<OrderKey<'q>>, String> {
        let Some(order) = &q.order_by else {
            return Ok(Vec::new());
        };
        let OrderByKind::Expressions(exprs) = &order.kind else {
            return Err("ORDER BY ALL".to_owned());
        };
        let spans = clauses
            .order
            .map(|c| self.list_items(c, 2))
            .unwrap_or_default();
        if spans.len() != exprs.len() {
            return Err("this ORDER BY clause (the proxy could not read its keys)".to_owned());
        }
        let mut out = Vec::new();
        for (e, span) in exprs.iter().zip(spans) {
            if e.options.nulls_first.is_some() || e.with_fill.is_some() {
                return Err("NULLS FIRST/LAST or WITH FILL in ORDER BY".to_owned());
            }
            let descending = match &e.options.sort {
                Some(OrderBySort::Desc) => true,
                Some(OrderBySort::Asc) | None => false,
                Some(OrderBySort::Using(_)) => return Err("ORDER BY ... USING".to_owned()),
            };
            let (span, item) = self.resolve(&e.expr, span, items, "ORDER BY")?;
            out.push(OrderKey {
                span,
                descending,
                item,
                expr: &e.expr,
            });
        }
        Ok(out)
    }

    /// What an ORDER BY or GROUP BY key names: a position or an alias names a select
    /// item; anything else is the expression itself (which must not use an alias).
    fn resolve(
        &self,
        expr: &Expr,
        span: TokSpan,
        items: &[Item],
        clause: &str,
    ) -> Result<(TokSpan, Option<usize>), String> {
        if let Expr::Value(v) = expr {
            if let AstValue::Number(n, _) = &v.value {
                let n: usize = n
                    .parse()
                    .map_err(|_| format!("{clause} by the position {n}"))?;
                let first_wildcard = items.iter().position(|it| it.expr.is_none());
                let item = n
                    .checked_sub(1)
                    .and_then(|i| items.get(i).map(|it| (i, it)))
                    .ok_or_else(|| match first_wildcard {
                        Some(_) => format!(
                            "{clause} by a position inside or after `*` over several shards: name the column"
                        ),
                        None => format!("{clause} by position {n}, beyond the select list"),
                    })?;
                return match (item.1.expr, first_wildcard) {
                    (Some(e), None) => Ok((e, Some(item.0))),
                    (Some(e), Some(w)) if w > item.0 => Ok((e, Some(item.0))),
                    _ => Err(format!(
                        "{clause} by a position inside or after `*` over several shards: name the column"
                    )),
                };
            }
        }
        let aliases: Vec<&str> = items.iter().filter_map(|i| i.alias.as_deref()).collect();
        if let Expr::Identifier(id) = expr {
            let name = id.value.to_ascii_lowercase();
            if let Some(i) = items
                .iter()
                .position(|it| it.alias.as_deref() == Some(&name))
            {
                let e = items[i].expr.expect("aliased items have expressions");
                // MariaDB groups by a column of that name when there is one (warning
                // 1052); a select expression naming it proves there is.
                let names_column = |span: TokSpan| {
                    self.tokens()[span.first as usize..=span.last as usize]
                        .iter()
                        .any(|t| {
                            matches!(t.kind, TokenKind::Word | TokenKind::QuotedIdent)
                                && self.token_text(t).eq_ignore_ascii_case(&name)
                        })
                };
                let bare = e.first == e.last && names_column(e);
                if clause == "GROUP BY"
                    && !bare
                    && items.iter().filter_map(|it| it.expr).any(names_column)
                {
                    return Err(format!(
                        "GROUP BY `{name}`, which names both a select alias and a column (MariaDB groups by the column): group by the expression or rename the alias"
                    ));
                }
                return Ok((e, Some(i)));
            }
        }
        let key = self.text_key(span);
        for t in &self.tokens()[span.first as usize..=span.last as usize] {
            if t.kind == TokenKind::Placeholder {
                return Err(format!(
                    "a ? parameter in {clause} of a statement run on several shards"
                ));
            }
            let word = match t.kind {
                TokenKind::Word | TokenKind::QuotedIdent => self.token_text(t),
                _ => continue,
            };
            if aliases.contains(&word.as_str()) && span.first != span.last {
                return Err(format!(
                    "{clause} by an expression over the select alias `{word}` on several shards: repeat the aliased expression instead"
                ));
            }
        }
        let item = items
            .iter()
            .position(|it| it.expr.is_some_and(|e| self.text_key(e) == key));
        Ok((span, item))
    }

    /// Rows without grouping: per-shard order and limit, interleaved by the merge.
    fn rows(
        &mut self,
        q: &Query,
        select: &Select,
        items: &[Item],
        clauses: &Clauses,
    ) -> Result<MergeSpec, String> {
        let keys = self.order_keys(q, items, clauses)?;
        let distinct = matches!(select.distinct, Some(Distinct::Distinct));
        if distinct && items.iter().any(|i| i.expr.is_none()) {
            return Err("SELECT DISTINCT * over several shards: name the columns".to_owned());
        }
        let mut order = Vec::new();
        for OrderKey {
            span,
            descending,
            item,
            ..
        } in keys
        {
            if distinct && item.is_none() {
                return Err(
                    "SELECT DISTINCT ordered by a column it does not select, over several shards"
                        .to_owned(),
                );
            }
            order.push(SortKey {
                key: self.key_of(span),
                descending,
            });
        }
        let distinct = if distinct {
            let mut keys = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let span = item.expr.expect("checked above");
                keys.push(KeyCols {
                    value: Col::Visible(i),
                    text: Some(self.trio(span)),
                });
            }
            Some(keys)
        } else {
            None
        };
        Ok(MergeSpec {
            order,
            distinct,
            ..empty_merge()
        })
    }
}

mod grouped;

/// The GROUP BY expressions of a SELECT.
fn group_exprs(select: &Select) -> Vec<&Expr> {
    match &select.group_by {
        GroupByExpr::Expressions(e, _) => e.iter().collect(),
        GroupByExpr::All(_) => Vec::new(),
    }
}

/// Whether any aggregate function appears in the select list or HAVING.
fn has_aggregate_in(select: &Select) -> bool {
    let mut found = false;
    let mut check = |e: &Expr| {
        if aggregate_name(e).is_some() {
            found = true;
        }
        std::ops::ControlFlow::<()>::Continue(())
    };
    let _ = ast::visit_expressions(&select.projection, &mut check);
    let _ = ast::visit_expressions(&select.having, &mut check);
    found
}

/// The lower-case name of an aggregate function call.
fn aggregate_name(e: &Expr) -> Option<String> {
    let Expr::Function(f) = e else {
        return None;
    };
    let name = f.name.0.last()?.as_ident()?.value.to_ascii_lowercase();
    AGGREGATES.contains(&name.as_str()).then_some(name)
}

/// Constructs whose results over several shards cannot be merged exactly.
fn refuse_unmergeable(q: &Query, select: &Select) -> Result<(), String> {
    if select.into.is_some() {
        return Err("SELECT ... INTO over several shards".to_owned());
    }
    if matches!(select.distinct, Some(Distinct::On(_))) {
        return Err("DISTINCT ON".to_owned());
    }
    let (GroupByExpr::Expressions(_, modifiers) | GroupByExpr::All(modifiers)) = &select.group_by;
    if !modifiers.is_empty() || matches!(select.group_by, GroupByExpr::All(_)) {
        return Err("GROUP BY ... WITH ROLLUP (or GROUP BY ALL) over several shards".to_owned());
    }
    if q.fetch.is_some() {
        return Err("FETCH over several shards".to_owned());
    }
    let mut refusal: Option<String> = None;
    let mut check = |e: &Expr| {
        if let Expr::Function(f) = e {
            let name = f
                .name
                .0
                .last()
                .and_then(|p| p.as_ident())
                .map(|i| i.value.to_ascii_lowercase())
                .unwrap_or_default();
            if f.over.is_some() {
                refusal = Some(format!(
                    "the window function {} over several shards",
                    name.to_uppercase()
                ));
            } else if AGGREGATES.contains(&name.as_str()) {
                let distinct = matches!(
                    &f.args,
                    FunctionArguments::List(l) if matches!(l.duplicate_treatment, Some(ast::DuplicateTreatment::Distinct))
                );
                let clauses =
                    matches!(&f.args, FunctionArguments::List(l) if !l.clauses.is_empty());
                if !["count", "sum", "min", "max", "avg"].contains(&name.as_str()) {
                    refusal = Some(format!(
                        "{}() over several shards (it cannot be combined exactly from per-shard values)",
                        name.to_uppercase()
                    ));
                } else if distinct {
                    refusal = Some(format!(
                        "{}(DISTINCT ...) over several shards (per-shard distinct values cannot be combined exactly)",
                        name.to_uppercase()
                    ));
                } else if clauses || f.filter.is_some() || !f.within_group.is_empty() {
                    refusal = Some(format!(
                        "{}() with clauses over several shards",
                        name.to_uppercase()
                    ));
                }
            }
        }
        std::ops::ControlFlow::<()>::Continue(())
    };
    let _ = ast::visit_expressions(&select.projection, &mut check);
    let _ = ast::visit_expressions(&select.having, &mut check);
    let _ = ast::visit_expressions(&q.order_by, &mut check);
    let _ = ast::visit_expressions(&select.group_by, &mut check);
    match refusal {
        Some(r) => Err(r),
        None => Ok(()),
    }
}

/// A numeric literal as a merge value.
fn number(text: &str) -> Option<Value> {
    if let Ok(i) = text.parse::<i128>() {
        return Some(Value::Int(i));
    }
    Decimal::parse(text.as_bytes()).map(Value::Decimal)
}

/// The merge's operator for a SQL binary operator, if it computes it.
fn binary_op(op: &BinaryOperator) -> Option<BinaryOp> {
    Some(match op {
        BinaryOperator::Plus => BinaryOp::Add,
        BinaryOperator::Minus => BinaryOp::Sub,
        BinaryOperator::Multiply => BinaryOp::Mul,
        BinaryOperator::Eq => BinaryOp::Eq,
        BinaryOperator::NotEq => BinaryOp::Ne,
        BinaryOperator::Lt => BinaryOp::Lt,
        BinaryOperator::LtEq => BinaryOp::Le,
        BinaryOperator::Gt => BinaryOp::Gt,
        BinaryOperator::GtEq => BinaryOp::Ge,
        BinaryOperator::Spaceship => BinaryOp::NullSafeEq,
        BinaryOperator::And => BinaryOp::And,
        BinaryOperator::Or => BinaryOp::Or,
        _ => return None,
    })
}

/// The merge's function for a SQL function name, if it computes it.
fn function(name: &str) -> Option<Function> {
    Some(match name {
        "nullif" => Function::NullIf,
        "ifnull" => Function::IfNull,
        "coalesce" => Function::Coalesce,
        "if" => Function::If,
        "abs" => Function::Abs,
        _ => return None,
    })
}

/// The merge's unary operator.
fn unary_op(op: &UnaryOperator) -> Option<UnaryOp> {
    match op {
        UnaryOperator::Minus => Some(UnaryOp::Neg),
        UnaryOperator::Not => Some(UnaryOp::Not),
        _ => None,
    }
}

/// Aggregates the merge combines, by name.
fn agg_fn(name: &str) -> Option<AggFn> {
    Some(match name {
        "count" => AggFn::Count,
        "sum" => AggFn::Sum,
        "min" => AggFn::Min,
        "max" => AggFn::Max,
        _ => return None,
    })
}
