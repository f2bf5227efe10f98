//! Analysis of data statements with sqlparser (MySQL dialect): which tables a statement
//! names, whether they are sharded, its order id predicate, its route context, and, for
//! an INSERT, the rows. The result refers to token indices, so it is reusable for any
//! statement of the same shape (see [`super::shape`]).

use sqlparser::ast::{Statement, Visit};
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;

mod plan;
mod walk;

use super::charset::{Decoded, Decoding};
use super::lexer::{Lexed, TokenKind};
use super::predicates::Positions;
use super::*;
use crate::config::Config;
use plan::Planner;
use walk::Walk;

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

    let mut planner = Planner::new(cx, &pos, &walk);
    let target = planner.target(statement);
    let cacheable = planner.cacheable() && !lexed.unterminated;
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
mod tests;
