//! What a merge does, as the planner describes it: which columns each shard adds for the
//! merge (hidden, after the client's), how rows order, group and aggregate, and where the
//! answer is cut. Column positions are [`Col`]s, resolved against the column count the
//! shards actually return (a `*` expands to columns the planner does not know).

use super::expr::Expr;

/// A column of the shards' results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Col {
    /// The n-th column the client sees.
    Visible(usize),
    /// The n-th hidden column (after every visible one).
    Hidden(usize),
}

impl Col {
    /// Its position in a row of `total` columns of which `hidden` are hidden.
    pub fn index(self, total: usize, hidden: usize) -> usize {
        match self {
            Col::Visible(i) => i,
            Col::Hidden(i) => total - hidden + i,
        }
    }
}

/// The hidden columns that compare a text value as the server's collation does: its
/// `WEIGHT_STRING`, the weight of one space in its collation (the pad unit), and whether
/// the collation pads (PAD SPACE: `' ' = ''`). For a value that turns out not to be text,
/// they are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TextCols {
    /// `WEIGHT_STRING(e)`.
    pub weight: Col,
    /// `WEIGHT_STRING(LEFT(CONCAT(' ', e), 1))`: one space in e's collation.
    pub pad: Col,
    /// `LEFT(CONCAT(' ', e), 1) = LEFT(e, 0)`: 1 when the collation pads with spaces.
    pub pads: Col,
}

/// A value that is compared: its column, and its collation weights when it is text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyCols {
    /// The value.
    pub value: Col,
    /// Its weights.
    pub text: Option<TextCols>,
}

/// One ORDER BY key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SortKey {
    /// The value compared: a column of the shards' rows, or (grouped) of the merged rows.
    pub key: KeyCols,
    /// `DESC` (NULLs last), else `ASC` (NULLs first), as MySQL orders them.
    pub descending: bool,
}

/// An aggregate function the merge combines from the shards' partial values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggFn {
    /// `COUNT(...)`: the partial counts summed.
    Count,
    /// `SUM(...)`: partial sums summed (NULL when every one is NULL).
    Sum,
    /// `MIN(...)`.
    Min,
    /// `MAX(...)`.
    Max,
}

/// One aggregate column of the shards' rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aggregate {
    /// How partial values combine.
    pub func: AggFn,
    /// The column holding the shard's partial value.
    pub column: Col,
    /// Collation weights of a MIN/MAX over text.
    pub text: Option<TextCols>,
}

/// How one column of a merged group row is computed.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// The value of a group key (as the first partial row of the group had it).
    Key(usize),
    /// A value the statement neither groups nor aggregates: the first partial row's that
    /// came from at least one row (MySQL returns some row's value).
    First(KeyCols),
    /// An aggregate, combined.
    Aggregate(usize),
    /// `AVG(x)`: the combined `SUM(x)` over the combined `COUNT(x)`, in the type and scale
    /// the shards describe the AVG column with.
    Average {
        /// The SUM aggregate.
        sum: usize,
        /// The COUNT aggregate.
        count: usize,
    },
    /// An expression over aggregates and group keys, computed from the combined values.
    Expr(Expr),
}

/// GROUP BY and aggregates over several shards: each shard groups its rows; the merge
/// combines partial rows of the same group.
#[derive(Debug, Clone, PartialEq)]
pub struct Grouping {
    /// The group keys (none: one group, as for `SELECT COUNT(*) FROM t`).
    pub keys: Vec<KeyCols>,
    /// `COUNT(*)` of each partial row (hidden), so a value is taken from a partial row
    /// that came from rows.
    pub rows: Col,
    /// The aggregates combined.
    pub aggregates: Vec<Aggregate>,
    /// The columns of a merged row: the visible ones, then those ORDER BY needs.
    pub outputs: Vec<Output>,
    /// HAVING over the merged row (outputs, aggregates and keys by index).
    pub having: Option<Expr>,
}

/// How the results of several shards combine into the answer one table would give
/// (SPEC §5): exact, or the statement is refused.
#[derive(Debug, Clone, PartialEq)]
pub struct MergeSpec {
    /// Trailing columns each shard returns for the merge only.
    pub hidden: usize,
    /// The order of the answer. Without grouping, each shard returns its rows in this
    /// order and the merge interleaves them (keys are shard columns); with grouping, the
    /// merged rows are sorted (keys are [`Col::Visible`] positions of merged rows: output
    /// n is `Col::Visible(n)`). Grouped rows without ORDER BY come in group key order.
    pub order: Vec<SortKey>,
    /// Rows skipped before the first returned (`OFFSET`).
    pub offset: u64,
    /// At most this many rows returned (`LIMIT`).
    pub limit: Option<u64>,
    /// GROUP BY and aggregates.
    pub grouping: Option<Grouping>,
    /// DISTINCT: the comparison keys of the visible columns.
    pub distinct: Option<Vec<KeyCols>>,
    /// Rows (or groups) the merge may hold in memory before it fails the statement
    /// (`sharding.merge_row_cap`).
    pub row_cap: u64,
}
