//! Reading WHERE clauses and values: the top-level AND terms that name an order id or a
//! route context, and where each value comes from (SPEC §4, §5).

use sqlparser::ast::{BinaryOperator, Expr, Ident, UnaryOperator, Value};
use sqlparser::tokenizer::Location;

use super::charset::Decoded;
use super::lexer::{Token, TokenKind};
use super::{SessionFn, TokSpan, ValueSlot};

/// Maps parser positions to token indices of the lexed statement.
pub struct Positions<'a> {
    /// The statement bytes.
    pub sql: &'a [u8],
    /// The decoded statement.
    pub decoded: &'a Decoded,
    /// Its tokens.
    pub tokens: &'a [Token],
}

impl Positions<'_> {
    /// The statement bytes the tokens index.
    pub fn decoded_sql(&self) -> &[u8] {
        self.sql
    }

    /// The index of the token starting at `loc`.
    pub fn token_at(&self, loc: Location) -> Option<u32> {
        let offset = self.decoded.byte_offset(loc)?;
        let i = self
            .tokens
            .binary_search_by_key(&offset, |t| t.range.start)
            .ok()?;
        u32::try_from(i).ok()
    }

    /// Tokens of an identifier chain (`db`.`table`), first part to last.
    pub fn ident_span(&self, idents: &[&Ident]) -> Option<TokSpan> {
        let first = self.token_at(idents.first()?.span.start)?;
        let last = self.token_at(idents.last()?.span.start)?;
        Some(TokSpan { first, last })
    }

    /// The number of `?` placeholders before token `i`.
    fn placeholder_index(&self, i: u32) -> u32 {
        self.tokens[..i as usize]
            .iter()
            .filter(|t| t.kind == TokenKind::Placeholder)
            .count() as u32
    }

    /// Where a value expression comes from.
    pub fn value_slot(&self, expr: &Expr) -> ValueSlot {
        match expr {
            Expr::Nested(inner) => self.value_slot(inner),
            Expr::Value(v) => match &v.value {
                Value::Null => ValueSlot::Null,
                Value::Number(..)
                | Value::SingleQuotedString(_)
                | Value::DoubleQuotedString(_)
                | Value::NationalStringLiteral(_) => {
                    self.token_at(v.span.start)
                        .map_or(ValueSlot::Expression, |token| ValueSlot::Literal {
                            token,
                            negated: false,
                        })
                }
                Value::Placeholder(p) if p == "?" => self
                    .token_at(v.span.start)
                    .map_or(ValueSlot::Expression, |t| {
                        ValueSlot::Param(self.placeholder_index(t))
                    }),
                _ => ValueSlot::Expression,
            },
            Expr::UnaryOp { op, expr } => match (op, self.value_slot(expr)) {
                (UnaryOperator::Minus, ValueSlot::Literal { token, negated }) => {
                    ValueSlot::Literal {
                        token,
                        negated: !negated,
                    }
                }
                (UnaryOperator::Plus, slot @ ValueSlot::Literal { .. }) => slot,
                _ => ValueSlot::Expression,
            },
            // _binary'..', _utf8mb4'..': the introducer does not change the digits.
            Expr::Prefixed { value, .. } => self.value_slot(value),
            Expr::Function(_) if session_fn(expr) == Some(SessionFn::LastInsertId) => {
                ValueSlot::LastInsertId
            }
            _ => ValueSlot::Expression,
        }
    }
}

/// The top-level AND terms of a condition, parentheses around conjunctions removed.
pub fn and_terms(expr: &Expr) -> Vec<&Expr> {
    let mut out = Vec::new();
    let mut stack = vec![expr];
    while let Some(e) = stack.pop() {
        match e {
            Expr::BinaryOp {
                left,
                op: BinaryOperator::And,
                right,
            } => {
                stack.push(right);
                stack.push(left);
            }
            Expr::Nested(inner) => stack.push(inner),
            other => out.push(other),
        }
    }
    out
}

/// A column reference: its qualifier (lower case, empty when unqualified) and name (lower
/// case). `db.table.column` gives the table as qualifier.
pub fn column_ref(expr: &Expr) -> Option<(String, String)> {
    match expr {
        Expr::Identifier(id) => Some((String::new(), id.value.to_ascii_lowercase())),
        Expr::CompoundIdentifier(parts) if parts.len() >= 2 => {
            let n = parts.len();
            Some((
                parts[n - 2].value.to_ascii_lowercase(),
                parts[n - 1].value.to_ascii_lowercase(),
            ))
        }
        Expr::Nested(inner) => column_ref(inner),
        _ => None,
    }
}

/// A session identity function called with no arguments.
pub fn session_fn(expr: &Expr) -> Option<SessionFn> {
    let Expr::Function(f) = expr else {
        return None;
    };
    if f.name.0.len() != 1 || !no_args(&f.args) {
        return None;
    }
    let name = f.name.0[0].as_ident()?.value.to_ascii_lowercase();
    Some(match name.as_str() {
        "last_insert_id" => SessionFn::LastInsertId,
        "connection_id" => SessionFn::ConnectionId,
        "database" | "schema" => SessionFn::Database,
        "row_count" => SessionFn::RowCount,
        "found_rows" => SessionFn::FoundRows,
        "user" | "session_user" | "system_user" => SessionFn::User,
        "current_user" => SessionFn::CurrentUser,
        _ => return None,
    })
}

fn no_args(args: &sqlparser::ast::FunctionArguments) -> bool {
    match args {
        sqlparser::ast::FunctionArguments::List(list) => list.args.is_empty(),
        _ => false,
    }
}

/// Functions whose effect outlives the statement on its backend connection.
pub const PINNING_FUNCTIONS: [&str; 5] = [
    "get_lock",
    "release_lock",
    "release_all_locks",
    "is_used_lock",
    "is_free_lock",
];

/// Aggregate functions: a result over several shards would need merging.
pub const AGGREGATES: [&str; 20] = [
    "count",
    "sum",
    "min",
    "max",
    "avg",
    "group_concat",
    "std",
    "stddev",
    "stddev_pop",
    "stddev_samp",
    "variance",
    "var_pop",
    "var_samp",
    "bit_and",
    "bit_or",
    "bit_xor",
    "json_arrayagg",
    "json_objectagg",
    "any_value",
    "median",
];
