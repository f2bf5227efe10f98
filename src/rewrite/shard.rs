//! The edits that make a statement one shard's: physical table names, the ids the proxy
//! issued for an INSERT, NULL for order ids nothing resolves, and an INSERT's own rows.

use super::session_fns::SessionValues;
use super::statement::{Edit, Frag, Param, Rendered, Segment, Statement};
use crate::config::Shard;
use crate::sql::push_quoted_ident;
use crate::sql::quote_ident;
use crate::sql::{Analysis, EditForm, KeyInsert, ShardedPlan, ValueSlot};

/// What becomes of the statement's order ids on a shard.
#[derive(Debug, Clone, Copy, Default)]
pub struct KeyEdits<'a> {
    /// Ids the proxy issued for INSERT rows without the shard key, by row.
    pub generated: &'a [u64],
    /// They go to the backend as parameters (a prepared statement's execution binds them),
    /// so the statement text stays the same from one execution to the next.
    pub as_params: bool,
    /// The shard key column's name (for the INSERTs that get one).
    pub shard_key: &'a str,
    /// The order id values become NULL (an unresolved read's empty answer).
    pub null_keys: bool,
}

/// Edits for the default datasource: session functions replaced, nothing else.
pub fn unsharded_edits(
    st: &Statement<'_>,
    analysis: &Analysis,
    values: &SessionValues,
) -> Vec<Edit> {
    st.session_edits(analysis, values)
}

/// Edits for one shard: session functions, physical table names, issued ids, NULL keys.
pub fn shard_edits(
    st: &Statement<'_>,
    analysis: &Analysis,
    plan: &ShardedPlan,
    shard: &Shard,
    keys: &KeyEdits<'_>,
    values: &SessionValues,
) -> Vec<Edit> {
    let mut edits = st.session_edits(analysis, values);
    for edit in &plan.edits {
        let table = &shard.tables[usize::from(edit.table.0)];
        let text = match edit.form {
            EditForm::Qualified => {
                let mut text = String::with_capacity(shard.database.len() + table.len() + 5);
                push_quoted_ident(&mut text, &shard.database);
                text.push('.');
                push_quoted_ident(&mut text, table);
                text
            }
            EditForm::TableOnly => quote_ident(table),
        };
        edits.push(Edit {
            at: st.bytes_of(edit.span),
            with: vec![Frag::Bytes(text.into_bytes())],
        });
    }
    if let Some(insert) = plan.key_insert {
        let key = quote_ident(keys.shard_key);
        let after = |t: u32| {
            let end = st.tokens[t as usize].range.end;
            end..end
        };
        let id = |row: usize| {
            let id = keys.generated.get(row).copied().unwrap_or_default();
            if keys.as_params {
                Frag::Param(Param::Value(id))
            } else {
                Frag::Bytes(id.to_string().into_bytes())
            }
        };
        match insert {
            KeyInsert::ColumnList { after: open } => {
                edits.push(Edit {
                    at: after(open),
                    with: vec![Frag::Bytes(format!("{key}, ").into_bytes())],
                });
                for (n, row) in plan.rows.iter().enumerate() {
                    edits.push(Edit {
                        at: after(row.span.first),
                        with: vec![id(n), Frag::text(", ")],
                    });
                }
            }
            KeyInsert::Assignments { after: set } => {
                edits.push(Edit {
                    at: after(set),
                    with: vec![
                        Frag::Bytes(format!(" {key} = ").into_bytes()),
                        id(0),
                        Frag::text(","),
                    ],
                });
            }
        }
    }
    if keys.null_keys {
        for slot in &plan.key_values {
            let token = match slot {
                ValueSlot::Literal { token, .. } => *token,
                ValueSlot::Param(_) => match placeholder_token(st, *slot) {
                    Some(t) => t,
                    None => continue,
                },
                _ => continue,
            };
            edits.push(Edit {
                at: st.tokens[token as usize].range.clone(),
                with: vec![Frag::text("NULL")],
            });
        }
    }
    edits
}

/// The token of the n-th `?` of the statement.
fn placeholder_token(st: &Statement<'_>, slot: ValueSlot) -> Option<u32> {
    let ValueSlot::Param(n) = slot else {
        return None;
    };
    st.tokens
        .iter()
        .enumerate()
        .filter(|(_, t)| t.kind == crate::sql::lexer::TokenKind::Placeholder)
        .nth(n as usize)
        .map(|(i, _)| i as u32)
}

/// The parts of an INSERT that keep only `rows` (all rows when empty or all are kept).
pub fn row_segments(st: &Statement<'_>, plan: &ShardedPlan, rows: &[usize]) -> Vec<Segment> {
    let whole = vec![Segment::Original(0..st.sql.len())];
    let Some(span) = plan.values_span else {
        return whole;
    };
    if rows.is_empty() || rows.len() == plan.rows.len() {
        return whole;
    }
    let all = st.bytes_of(span);
    let mut out = vec![Segment::Original(0..all.start)];
    for (n, &row) in rows.iter().enumerate() {
        if n > 0 {
            out.push(Segment::Bytes(b", ".to_vec()));
        }
        out.push(Segment::Original(st.bytes_of(plan.rows[row].span)));
    }
    out.push(Segment::Original(all.end..st.sql.len()));
    out
}

impl Statement<'_> {
    /// The statement one shard receives: `rows` of an INSERT (all when empty), with the
    /// shard's edits.
    pub fn for_shard(
        &self,
        analysis: &Analysis,
        plan: &ShardedPlan,
        shard: &Shard,
        rows: &[usize],
        keys: &KeyEdits<'_>,
        values: &SessionValues,
    ) -> Rendered {
        let edits = shard_edits(self, analysis, plan, shard, keys, values);
        self.render_segments(&row_segments(self, plan, rows), edits)
    }
}
