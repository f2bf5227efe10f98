//! One statement per datasource for a merged read (`sharding.combine_shards`, SPEC §5).
//!
//! The shards of one datasource are tables of one server, so their selects are asked in
//! one statement: each shard's select as the per-shard plan writes it (its hidden columns,
//! its own `GROUP BY` and partial aggregates, its `ORDER BY ... LIMIT offset + count`),
//! parenthesized and joined with `UNION ALL` ([`outer_clause`] says what follows). The
//! merge above is unchanged: it combines partial rows and groups whichever stream they
//! come in, and sorts a combined stream's runs (each shard's rows, sorted and cut at
//! `offset + count`) itself before it interleaves the streams, so the answer stays exactly
//! what one table gives.
//!
//! Scatters and probes combine; an IN list of order ids keeps a statement per shard it
//! names (few, and EXPLAIN ROUTE shows each id's). A UNION changes how some statements
//! run, and those keep one statement per shard
//! ([`declined`]): whatever evaluates or assigns across rows or statements (user variables,
//! `FOUND_ROWS()`, `SQL_CALC_FOUND_ROWS`, `LAST_INSERT_ID(expr)`, sequences, `INTO`), what a
//! UNION branch may not carry (`SQL_NO_CACHE`, `HIGH_PRIORITY`, `SQL_BUFFER_RESULT`, ...,
//! a `WITH` clause, executable comments, `PROCEDURE`, `LIMIT ROWS EXAMINED`), locking reads,
//! a parameter in the select list (its type is the bound value's), an ordered merge
//! without `LIMIT` (each shard's sorted rows stream; a union's would be held), and a
//! statement over [`MAX_COMBINED`] bytes.

use std::hash::{Hash, Hasher};

use super::model::{Combined, PlanKind, Step};
use super::planner::{Planner, statement};
use crate::merge::MergeSpec;
use crate::merge::columns::fixed_hasher;
use crate::protocol::binary::ParamValue;
use crate::rewrite::{Param, Rendered};
use crate::route::index::IndexTable;
use crate::sql::MultiShard;
use crate::sql::lexer::TokenKind;

/// The longest combined statement sent, in bytes: well under the smallest
/// `max_allowed_packet` MariaDB ships with (16 MiB since 10.2.4; 1 MiB before), so a long
/// IN list never turns a statement that runs per shard into one the server refuses.
pub const MAX_COMBINED: usize = 1 << 20;

/// Words after which a statement keeps one statement per shard (see the module
/// documentation).
const DECLINING_WORDS: &[&str] = &[
    "found_rows",
    "sql_calc_found_rows",
    "into",
    "procedure",
    "examined",
    "high_priority",
    "sql_cache",
    "sql_no_cache",
    "sql_buffer_result",
    "sql_small_result",
    "sql_big_result",
    "straight_join",
    "with",
    "over",
    "nextval",
    "lastval",
    "setval",
];

/// Why a merged read's shards are not asked in one statement per datasource, if they
/// are not: `pushed` is the LIMIT each shard gets, `shards` every shard it reaches.
pub(super) fn declined<I: IndexTable>(
    p: &Planner<'_, '_, I>,
    kind: PlanKind,
    multi: &MultiShard,
    merge: &MergeSpec,
    pushed: Option<u64>,
    shards: &[u32],
) -> Option<String> {
    let config = p.config();
    if !config.sharding.combine_shards {
        return Some("sharding.combine_shards = false".to_owned());
    }
    if kind == PlanKind::Routed {
        // An IN list reaches the shards its ids name, each id's shard shown by EXPLAIN
        // ROUTE with the statement that shard receives.
        return Some("an IN list of order ids".to_owned());
    }
    let most = most_shards_on_one_datasource(p, shards);
    if most < 2 {
        return Some("no datasource holds two of its shards".to_owned());
    }
    let st = statement(p.inputs);
    let (sql, tokens) = (st.sql, st.tokens);
    if multi.calc_found_rows {
        return Some("SQL_CALC_FOUND_ROWS".to_owned());
    }
    if (multi.tail as usize) + 1 < tokens.len() {
        return Some("a locking read".to_owned());
    }
    for (i, t) in tokens.iter().enumerate() {
        match t.kind {
            TokenKind::UserVariable => return Some("a user variable".to_owned()),
            TokenKind::ExecCommentOpen => return Some("an executable comment".to_owned()),
            TokenKind::Placeholder if i < multi.insert_before as usize => {
                return Some("a parameter in the select list".to_owned());
            }
            TokenKind::Word => {
                if let Some(w) = DECLINING_WORDS.iter().find(|w| t.is_word(sql, w)) {
                    return Some(format!("`{}`", w.to_ascii_uppercase()));
                }
                let next = tokens.get(i + 1);
                if t.is_word(sql, "last_insert_id")
                    && next.is_some_and(|n| n.is_punct(sql, "("))
                    && tokens.get(i + 2).is_some_and(|n| !n.is_punct(sql, ")"))
                {
                    return Some("LAST_INSERT_ID(expr)".to_owned());
                }
                if (t.is_word(sql, "next") || t.is_word(sql, "previous"))
                    && next.is_some_and(|n| n.is_word(sql, "value"))
                {
                    return Some("a sequence".to_owned());
                }
            }
            _ => {}
        }
    }
    if !merge.order.is_empty() && merge.grouping.is_none() {
        match pushed {
            None => return Some("ORDER BY without LIMIT".to_owned()),
            Some(n) if n.saturating_mul(most as u64) > merge.row_cap => {
                return Some(format!(
                    "ORDER BY ... LIMIT of more rows per datasource than sharding.merge_row_cap = {}",
                    merge.row_cap
                ));
            }
            Some(_) => {}
        }
    }
    None
}

fn most_shards_on_one_datasource<I: IndexTable>(p: &Planner<'_, '_, I>, shards: &[u32]) -> usize {
    let mut counts: Vec<(crate::config::DatasourceId, usize)> = Vec::new();
    for &s in shards {
        let ds = p.config().sharding.shards[s as usize].datasource;
        match counts.iter_mut().find(|(d, _)| *d == ds) {
            Some((_, n)) => *n += 1,
            None => counts.push((ds, 1)),
        }
    }
    counts.into_iter().map(|(_, n)| n).max().unwrap_or(0)
}

/// What follows a datasource's union: under a session `sql_select_limit`,
/// `LIMIT 2^64-1`, which keeps it from cutting the union as a whole; nothing otherwise (the
/// server streams a bare UNION ALL, and materializes one with a LIMIT).
///
/// An outer `ORDER BY <key positions> LIMIT o+n` was tried and measured (the server sorted
/// the 100 rows of a 10-shard top-10 nearly for free, and the proxy read o+n per
/// datasource), but MariaDB then reports `SERVER_QUERY_NO_INDEX_USED` for a read one table
/// answers from an index: a status flag one table does not set (the status differential
/// test). The proxy sorts a combined stream's runs itself.
pub(super) fn outer_clause<I: IndexTable>(p: &Planner<'_, '_, I>) -> &'static [u8] {
    if p.inputs.session.select_limit.is_some() {
        b" LIMIT 18446744073709551615"
    } else {
        b""
    }
}

/// The per-shard steps (without the statement's prefix) as one step per datasource, in
/// the order the datasources first appear: a datasource with one shard keeps its
/// statement; several are joined with `UNION ALL`, followed by `outer` ([`outer_clause`]).
/// `None` when a combined statement would be longer than [`MAX_COMBINED`].
pub(super) fn combine(prefix: &[u8], steps: Vec<Step>, outer: &[u8]) -> Option<Vec<Step>> {
    let mut groups: Vec<Vec<Step>> = Vec::new();
    for step in steps {
        match groups
            .iter_mut()
            .find(|g| g[0].datasource == step.datasource)
        {
            Some(g) => g.push(step),
            None => groups.push(vec![step]),
        }
    }
    let mut out = Vec::with_capacity(groups.len());
    for group in groups {
        let mut sql = prefix.to_vec();
        let mut params: Vec<Param> = Vec::new();
        let mut shards = Vec::with_capacity(group.len());
        let union = group.len() > 1;
        for (i, step) in group.iter().enumerate() {
            if union {
                sql.extend_from_slice(if i == 0 { b"(" } else { b" UNION ALL (" });
            }
            sql.extend_from_slice(&step.statement.sql);
            if union {
                // A line break ends a trailing `-- comment` before the parenthesis.
                sql.extend_from_slice(b"\n)");
            }
            params.extend(step.statement.params.iter().cloned());
            shards.extend_from_slice(&step.shards);
        }
        if union {
            sql.extend_from_slice(outer);
        }
        if sql.len() > MAX_COMBINED && union {
            return None;
        }
        let first = group.into_iter().next().expect("a group has a step");
        out.push(Step {
            datasource: first.datasource,
            shards,
            statement: Rendered { sql, params },
            names: first.names,
        });
    }
    Some(out)
}

/// The statement's part of its description's key: its tokens as written (every literal
/// included; comments and spacing not), the prefix, the session values the proxy writes
/// into it, the values bound to it, the shards and the protocol. A value can change a
/// statement's column flags: a WHERE the optimizer finds impossible, or one that turns an
/// outer join into an inner one, makes MariaDB describe columns otherwise (`BINARY_FLAG` on
/// an aggregate, `NOT_NULL` on the inner table's columns) while the union's own
/// definitions stay the same. `None` when a bound value cannot be told apart (a date or
/// long data): such a read is described every time.
pub(super) fn shape<I: IndexTable>(p: &Planner<'_, '_, I>, shards: &[u32]) -> Option<u64> {
    let inputs = p.inputs;
    let st = statement(inputs);
    let mut h = fixed_hasher();
    for t in st.tokens {
        st.sql[t.range.clone()].hash(&mut h);
    }
    inputs.text.prefix.hash(&mut h);
    inputs.binary.hash(&mut h);
    shards.hash(&mut h);
    // The session values the statement's session functions are replaced with (only those
    // it calls: FOUND_ROWS() changes with every read), and the session's select limit
    // (a LIMIT the shards get).
    let session = inputs.session;
    let calls = |names: &[&str]| {
        st.tokens
            .iter()
            .any(|t| names.iter().any(|n| t.is_word(st.sql, n)))
    };
    session.select_limit.hash(&mut h);
    // `@@last_insert_id` and `@@identity` read the value the proxy gives each connection.
    let reads_identity = st.tokens.iter().any(|t| {
        t.kind == TokenKind::SystemVariable && {
            let name = st.sql[t.range.clone()].to_ascii_lowercase();
            name.ends_with(b"identity") || name.ends_with(b"last_insert_id")
        }
    });
    if reads_identity || calls(&["last_insert_id"]) {
        session.last_insert_id.hash(&mut h);
    }
    if calls(&["connection_id"]) {
        session.connection_id.hash(&mut h);
    }
    if calls(&["database", "schema"]) {
        session.database.hash(&mut h);
    }
    if calls(&["row_count"]) {
        session.row_count.hash(&mut h);
    }
    if calls(&["found_rows"]) {
        session.found_rows.hash(&mut h);
    }
    if calls(&["user", "session_user", "system_user", "current_user"]) {
        (&session.user, &session.current_user).hash(&mut h);
    }
    for value in inputs.values.params {
        match value {
            ParamValue::Null => 0u8.hash(&mut h),
            ParamValue::Int(n) => (1u8, n).hash(&mut h),
            ParamValue::UInt(n) => (2u8, n).hash(&mut h),
            ParamValue::Float(f) => (3u8, f.to_bits()).hash(&mut h),
            ParamValue::Bytes(b) => (4u8, b).hash(&mut h),
            ParamValue::Other => return None,
        }
    }
    Some(h.finish())
}

/// The plan's [`Combined`]: its shape and the steps that describe its columns.
pub(super) fn combined(
    describing: Vec<Step>,
    describe_only: bool,
    shape: Option<u64>,
) -> Box<Combined> {
    Box::new(Combined {
        shape,
        describing,
        describe_only,
        key: 0,
        columns: None,
    })
}
