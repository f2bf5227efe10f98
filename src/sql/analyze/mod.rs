//! Analysis of data statements with sqlparser (MySQL dialect): which tables a statement
//! names, whether they are sharded, its order id predicate, its route context, and, for
//! an INSERT, the rows. The result refers to token indices, so it is reusable for any
//! statement of the same shape (see [`super::shape`]).

use sqlparser::ast::{Statement, Visit};
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;

mod multi;
mod routing;
mod tables;
mod walk;

use super::charset::Decoded;
use super::lexer::{Lexed, TokenKind};
use super::predicates::Positions;
use super::*;
use routing::Planner;
pub use tables::{
    AnalyzeContext, mentions_sharded_table, sharded_table_tokens, token_mentions_sharded_table,
};
use walk::Walk;

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
    let operators = lexed.tokens.iter().filter(|t| is_operator(sql, t)).count();
    if operators > MAX_OPERATORS {
        // sqlparser builds a left-deep tree for operator chains, and walking or dropping a
        // deep tree overflows the stack: such statements are not parsed at all.
        return Err(format!("more than {MAX_OPERATORS} operators"));
    }
    let decoded = Decoded::new(&parser_text(sql, lexed), cx.decoding);
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
                    placement: Placement::Unsharded,
                    session_fns: Vec::new(),
                    pins: false,
                    qualified_tables: Vec::new(),
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
    let qualified_tables = walk.qualified_tables();

    let mut planner = Planner::new(cx, &pos, &walk);
    let mut placement = planner.placement(statement);
    if matches!(placement, Placement::Sharded(_)) {
        if let Some(what) = misread_operator(sql, lexed, cx) {
            placement = Placement::Refused(Refusal::NotYet(format!(
                "{what} in statements on sharded tables (the SQL parser reads it differently from MySQL; rewrite it with AND/OR)"
            )));
        }
    }
    let cacheable = planner.cacheable() && !lexed.unterminated;
    Ok(Analyzed {
        analysis: Analysis {
            verb,
            placement,
            session_fns,
            pins,
            qualified_tables,
        },
        cacheable,
    })
}

/// Statements with more operators than this are not parsed (see [`analyze()`]).
pub const MAX_OPERATORS: usize = 5000;

fn is_operator(sql: &[u8], t: &super::lexer::Token) -> bool {
    match t.kind {
        TokenKind::Punct => matches!(
            t.bytes(sql),
            b"+" | b"-"
                | b"*"
                | b"/"
                | b"%"
                | b"="
                | b"<"
                | b">"
                | b"|"
                | b"&"
                | b"^"
                | b"~"
                | b"!"
        ),
        TokenKind::Word => ["and", "or", "xor", "not", "div", "mod"]
            .iter()
            .any(|k| t.is_word(sql, k)),
        _ => false,
    }
}

/// The statement as the SQL parser reads it: the delimiters of executable comments
/// (`/*!50001 ... */`, `/*M!100100 ... */`) blanked (MariaDB runs what they hold, so the
/// parser must read it too), and under NO_BACKSLASH_ESCAPES the backslashes of strings
/// replaced. Same length, so positions stay where they were.
fn parser_text<'a>(sql: &'a [u8], lexed: &Lexed) -> std::borrow::Cow<'a, [u8]> {
    let delimiters: Vec<_> = lexed.tokens.iter().filter(|t| t.is_exec_marker()).collect();
    // Under NO_BACKSLASH_ESCAPES a backslash ends nothing in a string, but the SQL parser
    // (MySQL dialect) always reads it as an escape: `'\'` would not close. Each is read as
    // another byte instead, so the parser sees the strings the lexer found. The parser's
    // string values are never used (literals are read from the tokens, under the mode).
    let backslashes: Vec<_> = if lexed.no_backslash_escapes {
        lexed
            .tokens
            .iter()
            .filter(|t| t.kind == TokenKind::String && t.bytes(sql).contains(&b'\\'))
            .collect()
    } else {
        Vec::new()
    };
    if delimiters.is_empty() && backslashes.is_empty() {
        return std::borrow::Cow::Borrowed(sql);
    }
    let mut out = sql.to_vec();
    for t in delimiters {
        out[t.range.clone()].fill(b' ');
    }
    for t in backslashes {
        for b in &mut out[t.range.clone()] {
            if *b == b'\\' {
                *b = b'/';
            }
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Operators the SQL parser reads differently from MySQL: `XOR` (wrong precedence) and
/// `||` (concatenation in the parser, OR in MySQL unless PIPES_AS_CONCAT).
fn misread_operator(sql: &[u8], lexed: &Lexed, cx: AnalyzeContext<'_>) -> Option<&'static str> {
    let tokens = &lexed.tokens;
    if tokens.iter().any(|t| t.is_word(sql, "xor")) {
        return Some("XOR");
    }
    let pipes = tokens.windows(2).any(|w| {
        w[0].is_punct(sql, "|") && w[1].is_punct(sql, "|") && w[0].range.end == w[1].range.start
    });
    (pipes && !cx.pipes_as_concat).then_some("||")
}

fn verb_of(statement: &Statement) -> Verb {
    match statement {
        Statement::Query(_) => Verb::Select,
        Statement::Insert(_) => Verb::Insert,
        Statement::Update(_) => Verb::Update,
        Statement::Delete(_) => Verb::Delete,
        // CREATE and DROP of a TEMPORARY table do not commit the open transaction (MySQL);
        // other statements on temporary tables (ALTER, CREATE INDEX) do.
        Statement::CreateTable(t) if t.temporary => Verb::Other,
        Statement::Drop {
            temporary: true, ..
        } => Verb::Other,
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

/// `CREATE [OR REPLACE] TEMPORARY ...` or `DROP TEMPORARY ...` (a table or a sequence),
/// read on the tokens: `TEMPORARY` before any parenthesis. Executable-comment markers are
/// skipped (the server runs what they hold).
pub fn temporary_ddl(sql: &[u8], tokens: &[crate::sql::lexer::Token]) -> bool {
    let mut tokens = tokens.iter().filter(|t| !t.is_exec_marker());
    tokens
        .next()
        .is_some_and(|t| t.is_word(sql, "create") || t.is_word(sql, "drop"))
        && tokens
            .take_while(|t| !t.is_punct(sql, "("))
            .any(|t| t.is_word(sql, "temporary"))
}

/// `@x := ...` and `... INTO @x` set user variables inside a statement.
///
/// Also, read on the tokens whatever the parser made of them (executable comments count as
/// the server runs them): a temporary table or sequence (`CREATE [OR REPLACE] TEMPORARY
/// ...`, which shadows a real table of the same name), named locks (`GET_LOCK`,
/// `RELEASE_LOCK`), sequence values (`NEXTVAL`, `SETVAL`, `NEXT VALUE FOR`: `LASTVAL`
/// would show them to the next session), `HANDLER`, and `CALL` (a procedure's `SET` of a
/// session variable lasts after it returns).
pub fn token_pins(sql: &[u8], lexed: &Lexed) -> bool {
    let tokens: Vec<&crate::sql::lexer::Token> = lexed
        .tokens
        .iter()
        .filter(|t| !t.is_exec_marker())
        .collect();
    let first = |w: &str| tokens.first().is_some_and(|t| t.is_word(sql, w));
    let temporary = temporary_ddl(sql, &lexed.tokens);
    let calls_state_function = tokens.windows(2).any(|w| {
        w[1].is_punct(sql, "(")
            && [
                "get_lock",
                "release_lock",
                "release_all_locks",
                "nextval",
                "setval",
            ]
            .iter()
            .any(|f| w[0].is_word(sql, f))
    });
    let next_value = tokens.windows(3).any(|w| {
        w[0].is_word(sql, "next") && w[1].is_word(sql, "value") && w[2].is_word(sql, "for")
    });
    temporary
        || calls_state_function
        || next_value
        || first("handler")
        // A procedure may set any session state (user variables, time_zone, the session's
        // transaction mode...) that lasts after it returns and that no read-back sees.
        || first("call")
        || tokens.iter().any(|t| t.is_punct(sql, ":="))
        || tokens
            .windows(2)
            .any(|w| w[0].is_word(sql, "into") && w[1].kind == TokenKind::UserVariable)
}

/// The user variables a statement assigns (`... INTO @a, @b`, `@v := ...`), by
/// [`crate::sql::command::user_variable_name`], once each: after it ran on one datasource
/// the session reads them back there and carries them to its other connections.
pub fn assigned_user_variables(sql: &[u8], tokens: &[crate::sql::lexer::Token]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut add = |t: &crate::sql::lexer::Token| {
        let name = crate::sql::command::user_variable_name(sql, t);
        if !names.contains(&name) {
            names.push(name);
        }
    };
    for (i, t) in tokens.iter().enumerate() {
        if t.kind == TokenKind::UserVariable
            && tokens.get(i + 1).is_some_and(|n| n.is_punct(sql, ":="))
        {
            add(t);
        }
        if t.is_word(sql, "into") {
            // `INTO @a, @b`: the list of targets.
            let mut j = i + 1;
            while let Some(v) = tokens.get(j).filter(|v| v.kind == TokenKind::UserVariable) {
                add(v);
                if !tokens.get(j + 1).is_some_and(|c| c.is_punct(sql, ",")) {
                    break;
                }
                j += 2;
            }
        }
    }
    names
}
