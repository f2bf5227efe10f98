//! The session's prepared statements: what each one is, and the registry that holds them
//! by the id the proxy gave.

use std::collections::HashMap;
use std::sync::Arc;

use crate::protocol::binary::LongData;
use crate::sql::Analysis;
use crate::sql::command::RegionArg;
use crate::sql::hints::RouteHints;
use crate::sql::lexer::Lexed;

/// What executing a prepared statement does.
pub(super) enum Kind {
    /// A data statement: routed at each execution.
    Data {
        analysis: Arc<Analysis>,
        hints: RouteHints,
    },
    /// A session command without parameters (BEGIN, COMMIT, SET ...): run as text.
    Session,
    /// `EXPLAIN ROUTE <statement>`: planned at each execution, not run.
    Explain {
        /// Byte offset of the explained statement.
        body: usize,
    },
    /// `SELECT NEXT_ORDER_ID(...)`: the proxy answers, in the binary protocol.
    NextOrderId {
        /// The region: a literal, a parameter or none.
        region: RegionArg,
        /// The result column's name.
        column: String,
    },
}

/// A statement the client prepared.
pub struct PreparedStatement {
    pub(super) sql: Vec<u8>,
    pub(super) lexed: Lexed,
    pub(super) kind: Kind,
    pub(super) params: usize,
    /// Parameter types of the last execution that sent them.
    pub(super) types: Option<Vec<(u8, u8)>>,
    /// COM_STMT_SEND_LONG_DATA received since the last execution, per parameter.
    pub(super) long_data: Vec<Option<LongData>>,
    /// Bytes of long data buffered (bounded by [`LONG_DATA_LIMIT`]).
    pub(super) long_data_bytes: usize,
    /// The configuration generation it was analysed under: after a reload, an execution
    /// analyses it again (a table may have become sharded, or stopped being).
    pub(super) generation: u64,
    /// The epoch its text last passed the scope and catalog-view checks in: an execution
    /// in the same epoch would get the same answers, since the text is the same.
    pub(super) checked_in: Option<crate::engine::memo::Epoch>,
    /// The rows of the cursor its last execution opened, not fetched yet.
    pub(super) cursor: Option<std::collections::VecDeque<Vec<u8>>>,
}

/// Long data the proxy buffers per statement between executions (64 MiB, its largest
/// packet): beyond it the execution is refused rather than the proxy's memory used up.
pub const LONG_DATA_LIMIT: usize = 64 << 20;

/// Prepared statements per client connection, as MySQL's default
/// `max_prepared_stmt_count` (16,382): beyond it PREPARE is refused with error 1461.
pub const MAX_PREPARED_STATEMENTS: usize = 16_382;

impl PreparedStatement {
    pub(super) fn clear_long_data(&mut self) {
        self.long_data.iter_mut().for_each(|d| *d = None);
        self.long_data_bytes = 0;
    }
}

/// The session's prepared statements.
#[derive(Default)]
pub struct Statements {
    /// By the id the proxy gave (foldhash: looked up at every execution).
    pub(super) by_id: HashMap<u32, PreparedStatement, foldhash::fast::RandomState>,
    pub(super) next_id: u32,
}
