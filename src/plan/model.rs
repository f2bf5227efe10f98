//! What a plan is: its kind, each order id's route, the statement each shard or datasource
//! receives, and what planning needs as input.

use crate::config::ResultNames;
use crate::config::{ChannelId, DatasourceId, TableId};
use crate::id::DecodeFailure;
use crate::merge::MergeSpec;
use crate::rewrite::{Rendered, SessionValues};
use crate::route::Effects;
use crate::route::value::StatementValues;
use crate::sql::Analysis;
use crate::sql::hints::RouteHints;
use crate::sql::lexer::Token;

/// What a plan does, as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanKind {
    /// No sharded table: the default datasource, statement unchanged but for session
    /// functions.
    Unsharded,
    /// The shards its order ids resolve to.
    Routed,
    /// A read whose order ids nothing resolves: it runs on the first shard with its ids
    /// replaced by NULL, which gives exactly MySQL's answer for rows that do not exist
    /// (one row of zeros and NULLs for an aggregate).
    Empty,
    /// A write whose order ids match no row (NULL, negative): nothing runs, 0 rows.
    NoRows,
    /// No usable order id: every shard of the table, or one channel's (SPEC §5).
    Scatter,
    /// Order ids no layer resolves, looked for on every shard of the table
    /// (`sharding.unresolved_reads = "probe"`).
    Probe,
    /// An INSERT whose ids the proxy issues: shown by EXPLAIN ROUTE, never run (the ids
    /// are issued and the statement planned again with them).
    AwaitsIds,
}

/// The layer that placed one row of the plan (EXPLAIN ROUTE's `layer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteLayer {
    /// The route key bits.
    Decode,
    /// The statement's predicates or hints.
    Context,
    /// A cache of index answers (in-process or the shared tier).
    Cache,
    /// The index table.
    Index,
    /// A read of every shard of the table for an id nothing else resolved.
    Probe,
    /// Nothing resolved it: a read answers "no such row".
    Unresolved,
    /// No order id: one of the shards a scatter reaches.
    Scatter,
    /// No sharded table.
    Unsharded,
    /// An INSERT row without an order id: the proxy issues one for its channel.
    Issued,
}

impl RouteLayer {
    /// The label EXPLAIN ROUTE shows.
    pub fn label(self) -> &'static str {
        match self {
            RouteLayer::Decode => "decode",
            RouteLayer::Context => "context",
            RouteLayer::Cache => "cache",
            RouteLayer::Index => "index",
            RouteLayer::Probe => "probe",
            RouteLayer::Unresolved => "unresolved",
            RouteLayer::Scatter => "scatter",
            RouteLayer::Unsharded => "unsharded",
            RouteLayer::Issued => "issued",
        }
    }
}

/// How one order id (or one shard of a scatter) was placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdRoute {
    /// The order id; `None` for a scatter's shards and unsharded statements.
    pub order_id: Option<u64>,
    /// The layer that placed it.
    pub layer: RouteLayer,
    /// Why its route key did not decode, when it did not.
    pub decode_failure: Option<DecodeFailure>,
    /// Its channel, when known.
    pub channel: Option<ChannelId>,
    /// The shard it goes to, when one.
    pub shard: Option<u32>,
}

/// One backend statement of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Where it runs.
    pub datasource: DatasourceId,
    /// The shards it reaches (empty for the default datasource's statements).
    pub shards: Vec<u32>,
    /// The statement, and the parameters it binds when it runs as a prepared statement.
    pub statement: Rendered,
    /// How its result columns are renamed to logical names (sharded statements).
    pub names: Option<std::sync::Arc<ResultNames>>,
}

/// How a plan's steps run and how their replies become the client's answer: the plan's
/// primitive (Vitess's engine primitives are the model: each kind of execution is one
/// variant, and the engine runs each in one place, `engine::run`).
#[derive(Debug, Clone, PartialEq)]
pub enum Execution {
    /// The steps' replies relayed one after another as the backends sent them: one step,
    /// a `CALL`'s several results, or several steps' OKs summed.
    Relay,
    /// The steps of one write over several shards of one datasource, in one backend
    /// transaction (or under a savepoint in the client's): all or nothing. Their OKs are
    /// summed.
    Atomic,
    /// Several shards' results merged into one as `spec` says (boxed: most plans have
    /// none, and a plan moves several times on its way).
    Merge(Box<MergeSpec>),
    /// A read of every shard of the table looking for order ids nothing resolves (`ids`):
    /// what the shards hold is learnt when it has run.
    Probe {
        /// The merge of the shards' results; `None` when the table has one shard (its
        /// reply is relayed).
        spec: Option<Box<MergeSpec>>,
        /// The order ids looked for.
        ids: Vec<u64>,
    },
}

impl Execution {
    /// The merge of the steps' results, when they are merged.
    pub fn merge(&self) -> Option<&MergeSpec> {
        match self {
            Execution::Merge(spec) => Some(spec),
            Execution::Probe { spec, .. } => spec.as_deref(),
            Execution::Relay | Execution::Atomic => None,
        }
    }
}

/// The outcome of planning one statement.
#[derive(Debug, Clone)]
pub struct Plan {
    /// What it does.
    pub kind: PlanKind,
    /// How each order id (or each shard of a scatter) was placed, in statement order.
    pub ids: Vec<IdRoute>,
    /// The backend statements, in order.
    pub steps: Vec<Step>,
    /// Index rows written before the shard write: inserted orders whose id does not
    /// decode (SPEC §5).
    pub index_writes: Vec<(u64, ChannelId)>,
    /// It may change data: the one-datasource write rule applies.
    pub write: bool,
    /// How its steps run and their replies become the client's answer.
    pub execution: Execution,
    /// Counters and cache fills to apply when it runs.
    pub effects: Effects,
    /// The statement's first binding table (its physical names in EXPLAIN ROUTE; where a
    /// probe looks).
    pub table: Option<TableId>,
    /// A merged read whose shards of one datasource are asked in one statement
    /// (`sharding.combine_shards`): how its answer's columns are described.
    pub combined: Option<Box<Combined>>,
}

/// A merged read that asks the shards of each datasource in one statement, their selects
/// joined with `UNION ALL` (a step per datasource, [`Step::shards`] listing them). A UNION
/// describes its columns without their tables and key flags, so the answer's column
/// definitions come from a statement of one shard, as the per-shard plan would send it:
/// until the engine holds them ([`crate::merge::columns`]), the plan runs as `describing`.
#[derive(Debug, Clone)]
pub struct Combined {
    /// The statement's part of the key its description is kept under: its tokens, the
    /// session values written into it, its bound values, the shards and the protocol
    /// (`plan::combine::shape`); `None`: never kept (a bound value it cannot tell apart).
    pub shape: Option<u64>,
    /// The steps that describe the answer's columns as one table would (names, types,
    /// flags, tables) while they run: step 0 is the first shard's statement, alone, and
    /// its datasource's other shards are combined apart. When the merge computes some
    /// select items, step 0 is that statement with `LIMIT 0` (no row evaluated) and every
    /// shard is combined as in the plan's steps.
    pub describing: Vec<Step>,
    /// Step 0 of `describing` returns no row (`LIMIT 0`).
    pub describe_only: bool,
    /// The key the engine keeps the description under (shape and session).
    pub key: u64,
    /// The answer's column definitions when the engine holds them: the plan's steps run,
    /// and a combined step whose own definitions differ from those seen when they were
    /// described makes the plan run again as `describing` ([`ProxyError::Stale`]).
    ///
    /// [`ProxyError::Stale`]: crate::error::ProxyError::Stale
    pub columns: Option<std::sync::Arc<crate::merge::columns::DescribedColumns>>,
}

impl Plan {
    /// The plan that describes its columns as it runs (a combined read whose columns are
    /// not known, or no longer): its steps are [`Combined::describing`].
    pub fn describing(&self) -> Plan {
        let mut plan = self.clone();
        if let Some(c) = &mut plan.combined {
            c.columns = None;
            plan.steps.clone_from(&c.describing);
        }
        plan
    }
}

impl Plan {
    /// A plan of one statement the proxy made itself (SHOW, DESCRIBE of logical tables,
    /// pass-through administration), run on `datasource` as is.
    pub fn single(
        datasource: DatasourceId,
        sql: Vec<u8>,
        names: Option<std::sync::Arc<ResultNames>>,
    ) -> Self {
        Self::single_rendered(
            datasource,
            Rendered {
                sql,
                params: Vec::new(),
            },
            names,
        )
    }

    /// A plan of one rendered statement (with the client's parameters it takes), run on
    /// `datasource`.
    pub fn single_rendered(
        datasource: DatasourceId,
        statement: Rendered,
        names: Option<std::sync::Arc<ResultNames>>,
    ) -> Self {
        Plan {
            kind: PlanKind::Unsharded,
            ids: Vec::new(),
            steps: vec![Step {
                datasource,
                shards: Vec::new(),
                statement,
                names,
            }],
            index_writes: Vec::new(),
            write: false,
            execution: Execution::Relay,
            effects: Effects::default(),
            table: None,
            combined: None,
        }
    }
}

/// Who may scatter (per user, overridden per statement by a `/*scatter='...'*/` hint).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScatterPolicy {
    /// Reads without a usable order id run on every shard (default) or are refused.
    pub reads: bool,
    /// Writes without a usable order id run on every shard of one datasource, or are
    /// refused (default).
    pub writes: bool,
}

/// The text a plan is made from.
#[derive(Clone, Copy)]
pub struct Text<'a> {
    /// The statement routed and rewritten.
    pub sql: &'a [u8],
    /// Its tokens.
    pub tokens: &'a [Token],
    /// Bytes sent before it to every backend, unchanged (`SET STATEMENT ... FOR `).
    pub prefix: &'a [u8],
}

/// Everything a plan is made from.
pub struct Inputs<'a> {
    /// The statement.
    pub text: Text<'a>,
    /// Its analysis.
    pub analysis: &'a Analysis,
    /// Its literals, bound parameters and issued ids.
    pub values: StatementValues<'a>,
    /// Its route hints.
    pub hints: &'a RouteHints,
    /// The session's values for session functions.
    pub session: &'a SessionValues,
    /// It runs as a prepared statement's execution (binary protocol).
    pub binary: bool,
    /// Who may scatter.
    pub scatter: ScatterPolicy,
    /// The current Unix time in ms (decode window).
    pub now_ms: u64,
    /// The databases the user may reach: a table the parser found named with another is
    /// refused (1142) before anything else is planned. `None`: no check (tools, benches).
    pub scope: Option<&'a super::scope::Scope>,
}
