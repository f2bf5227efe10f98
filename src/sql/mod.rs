//! SQL analysis: from a statement's bytes to what the router needs to know about it.
//!
//! - [`lexer`] splits and tokenizes the client's bytes (fast, every statement);
//! - [`command`] recognizes session and transaction commands from tokens alone;
//! - [`analyze`] parses a data statement with sqlparser (MySQL dialect) and finds its
//!   tables, order id predicates, route context and insert rows;
//! - [`shape`] keeps analyses for reuse by statements that differ only in literals;
//! - [`hints`] reads sqlcommenter route hints from comments;
//! - [`charset`] decodes statement bytes and maps parser positions back to byte offsets.
//!
//! Positions in an [`Analysis`] are token indices, not byte offsets, so an analysis made
//! for one statement applies to every statement of the same shape.

pub mod analyze;
pub mod characteristics;
pub mod charset;
pub mod command;
pub mod hints;
pub mod implicit;
pub mod lexer;
pub mod load_data;
pub mod predicates;
pub mod reads;
pub mod shape;

use crate::config::TableId;

/// Quotes an identifier with backquotes (a backquote inside is doubled).
pub fn quote_ident(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    push_quoted_ident(&mut out, name);
    out
}

/// Appends `name` quoted as [`quote_ident`] quotes it (no allocation of its own).
pub fn push_quoted_ident(out: &mut String, name: &str) {
    out.push('`');
    for (i, part) in name.split('`').enumerate() {
        if i > 0 {
            out.push_str("``");
        }
        out.push_str(part);
    }
    out.push('`');
}

/// Inclusive range of token indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokSpan {
    /// First token.
    pub first: u32,
    /// Last token (inclusive).
    pub last: u32,
}

impl TokSpan {
    /// A span of one token.
    pub fn one(i: u32) -> Self {
        Self { first: i, last: i }
    }
}

/// Where a value in the statement comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueSlot {
    /// A literal token (number or string); `negated` for a unary minus before it.
    Literal {
        /// Token index.
        token: u32,
        /// A `-` precedes the literal.
        negated: bool,
    },
    /// The n-th `?` of a prepared statement (0-based).
    Param(u32),
    /// `NULL`.
    Null,
    /// `LAST_INSERT_ID()`: the session's value.
    LastInsertId,
    /// An order id the proxy issues for INSERT row n, which names no `order_id` (SPEC §6).
    Generated(u32),
    /// Anything else: an expression the proxy does not evaluate.
    Expression,
}

/// What a statement does, for transaction and write bookkeeping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    /// `SELECT` (and `EXPLAIN SELECT`).
    Select,
    /// `INSERT` or `REPLACE`.
    Insert,
    /// `UPDATE`.
    Update,
    /// `DELETE`.
    Delete,
    /// Statements that commit a transaction implicitly (DDL and friends).
    Ddl,
    /// Anything else the parser understood (`CALL`, `DO`, `SHOW`, ...).
    Other,
}

/// A reference to a sharded table in the statement text, rewritten per shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TableEdit {
    /// Tokens replaced: the table name, with its database qualifier when it has one.
    pub span: TokSpan,
    /// Which binding table.
    pub table: TableId,
    /// What the tokens become.
    pub form: EditForm,
}

/// How a table reference is written back for a shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EditForm {
    /// `` `db`.`table` ``: a table reference, or a `db.table.column` qualifier.
    Qualified,
    /// `` `table` ``: the table part of a `table.column` qualifier.
    TableOnly,
}

/// A channel or region claim made by the statement itself (SPEC §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ContextSlot {
    /// Whether the value names a channel or a region.
    pub kind: ContextKind,
    /// The value.
    pub value: ValueSlot,
}

/// The column a context value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContextKind {
    /// The channel column: a channel name.
    Channel,
    /// The region column: a region code.
    Region,
}

/// One row of a multi-row INSERT.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct InsertRow {
    /// The row's tokens, parentheses included.
    pub span: TokSpan,
    /// The shard key value, when the column list has it.
    pub order_id: Option<ValueSlot>,
    /// The channel column's value.
    pub channel: Option<ValueSlot>,
    /// The region column's value.
    pub region: Option<ValueSlot>,
}

/// Where an INSERT that names no shard key gets one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyInsert {
    /// `(col, ...) VALUES (v, ...), ...`: the key column after this `(` token, each row's id
    /// after its own `(`.
    ColumnList {
        /// The column list's `(`.
        after: u32,
    },
    /// `INSERT ... SET col = v, ...`: `key = id,` after this `SET` token.
    Assignments {
        /// The `SET` keyword.
        after: u32,
    },
}

/// Session identity functions the proxy answers itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionFn {
    /// `LAST_INSERT_ID()`.
    LastInsertId,
    /// `CONNECTION_ID()`.
    ConnectionId,
    /// `DATABASE()`, `SCHEMA()`.
    Database,
    /// `ROW_COUNT()`.
    RowCount,
    /// `FOUND_ROWS()`.
    FoundRows,
    /// `USER()`, `SESSION_USER()`, `SYSTEM_USER()`.
    User,
    /// `CURRENT_USER()`.
    CurrentUser,
}

/// Where a session function call stands, to be replaced by its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SessionFnUse {
    /// The function.
    pub function: SessionFn,
    /// Its tokens: name, `(`, `)`.
    pub span: TokSpan,
    /// An unaliased select-list item: the value gets `AS` the original text, so the column
    /// keeps the name MySQL would give it.
    pub keep_name: bool,
}

/// What the router needs to know about a data statement.
#[derive(Debug, Clone, PartialEq)]
pub struct Analysis {
    /// What the statement does.
    pub verb: Verb,
    /// Where it goes.
    pub placement: Placement,
    /// Session functions to substitute.
    pub session_fns: Vec<SessionFnUse>,
    /// The statement leaves state on its backend connection that the proxy cannot carry
    /// (temporary tables, named locks, user variables): the session keeps its connections.
    pub pins: bool,
    /// `(database, table)` of every table the parser found named with a database
    /// (`db.t`, `db.t.column`), for the planner's scope check (SPEC §8a); empty when the
    /// statement was not parsed.
    pub qualified_tables: Vec<(String, String)>,
}

/// Where a statement runs, as the analysis places it.
#[derive(Debug, Clone, PartialEq)]
pub enum Placement {
    /// No sharded table: the default datasource, statement unchanged.
    Unsharded,
    /// Sharded tables: routed by order id.
    Sharded(Box<ShardedPlan>),
    /// A statement the proxy refuses, with the reason.
    Refused(Refusal),
}

/// Why a statement is refused; becomes a MySQL error (see `docs/errors.md`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// A feature that comes later (scatter, cross-shard merges, ...): ER_NOT_SUPPORTED_YET.
    NotYet(String),
    /// Something that will not be supported: ER_NOT_SUPPORTED_YET with the reason.
    Unsupported(String),
    /// The SQL parser cannot read a statement that names a sharded table; the parser's
    /// message. Whether it is valid MySQL at all is for a backend to say.
    Unparsed(String),
}

/// The routing plan of a statement on sharded tables.
#[derive(Debug, Clone, PartialEq)]
pub struct ShardedPlan {
    /// Every reference to a sharded table, to rewrite.
    pub edits: Vec<TableEdit>,
    /// The first binding table of the statement (result column names, unresolved reads).
    pub primary_table: TableId,
    /// Values of the usable order id predicate (`=` gives one, `IN` several); empty when
    /// the statement has none.
    pub key_values: Vec<ValueSlot>,
    /// Channel or region predicates ANDed with the key predicate.
    pub context: Vec<ContextSlot>,
    /// INSERT rows (empty for other verbs).
    pub rows: Vec<InsertRow>,
    /// For INSERT: the tokens from the first row's `(` to the last row's `)`.
    pub values_span: Option<TokSpan>,
    /// The statement orders, limits, groups, aggregates or de-duplicates rows: its result
    /// cannot be the concatenation of several shards' results.
    pub needs_merge: bool,
    /// UPDATE assigns the shard key this value (allowed only when unchanged).
    pub sets_key: Option<ValueSlot>,
    /// INSERT without the shard key: where the proxy adds it with the ids it issues.
    pub key_insert: Option<KeyInsert>,
    /// UPDATE assigns the channel or region column.
    pub sets_context: Vec<ContextSlot>,
    /// A SELECT: how it runs on several shards and how their results merge.
    pub multi: Option<Box<MultiShard>>,
}

/// A piece of a column the proxy adds to a statement: text, or a copy of tokens of the
/// statement (an expression it orders, groups or aggregates by).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// This text.
    Text(&'static str),
    /// These tokens, as the shard's statement has them (table names rewritten).
    Tokens(TokSpan),
}

/// `LIMIT` of a SELECT: where it stands and its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitClause {
    /// The clause's tokens, `LIMIT` included.
    pub span: TokSpan,
    /// The row count.
    pub count: ValueSlot,
    /// The offset (`LIMIT o, n` or `LIMIT n OFFSET o`).
    pub offset: Option<ValueSlot>,
    /// Each shard gets `LIMIT offset + count` (rows are cut after the merge); else the
    /// clause is removed from the shards' statements (grouped statements: groups are
    /// complete only after the merge).
    pub push_down: bool,
}

/// How a SELECT on sharded tables runs on several shards and how their results merge
/// into what one table would answer (SPEC §5). Made once per statement shape.
#[derive(Debug, Clone, PartialEq)]
pub struct MultiShard {
    /// Columns each shard's statement gets after the client's (hidden from it).
    pub hidden: Vec<Vec<Piece>>,
    /// The token the hidden columns are inserted before: the top-level `FROM`.
    pub insert_before: u32,
    /// Clauses removed from the shards' statements (HAVING; ORDER BY when grouped).
    pub removed: Vec<TokSpan>,
    /// The last token before a trailing locking clause (`FOR UPDATE`), else the
    /// statement's last token: a LIMIT the proxy adds goes right after it.
    pub tail: u32,
    /// Select items the merge computes from hidden aggregates (`MAX(x) - 99`): the shards
    /// that send rows get `NULL` in their place (a shard's partial value could fail where
    /// the whole would not), and one more statement with `LIMIT 0` describes them.
    pub computed: Vec<TokSpan>,
    /// `SELECT SQL_CALC_FOUND_ROWS`: `FOUND_ROWS()` counts the merged rows.
    pub calc_found_rows: bool,
    /// The LIMIT clause.
    pub limit: Option<LimitClause>,
    /// The merge; its offset, limit and row cap are set when the statement is planned.
    pub merge: crate::merge::MergeSpec,
    /// Why the results of several shards cannot be merged exactly, when they cannot: the
    /// statement is refused when it reaches more than one shard.
    pub refused: Option<String>,
}
