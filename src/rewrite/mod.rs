//! Rewriting a statement for one shard: logical table names become physical ones, session
//! functions become their values, and an INSERT keeps only the shard's rows.
//!
//! Edits replace token byte ranges in the client's original bytes; everything else
//! (comments, optimizer hints, modifiers, literals, odd bytes in `_binary` strings) goes
//! out exactly as the client sent it.

use std::borrow::Cow;
use std::ops::Range;

use crate::config::{Config, Shard};
use crate::sql::lexer::Token;
use crate::sql::{Analysis, EditForm, SessionFn, ShardedPlan, TokSpan, ValueSlot};

/// The session values that session functions are replaced with.
#[derive(Debug, Clone, Default)]
pub struct SessionValues {
    /// `LAST_INSERT_ID()`.
    pub last_insert_id: u64,
    /// `CONNECTION_ID()`: the proxy's connection id.
    pub connection_id: u32,
    /// `DATABASE()`.
    pub database: Option<String>,
    /// `ROW_COUNT()`.
    pub row_count: i64,
    /// `FOUND_ROWS()`.
    pub found_rows: u64,
    /// `USER()`: `name@client-host`.
    pub user: String,
    /// `CURRENT_USER()`: `name@%`.
    pub current_user: String,
    /// Ids the proxy issued for INSERT rows without the shard key, by row.
    pub generated_ids: Vec<u64>,
    /// Those ids go to the backend as parameters (`?`, a prepared statement's execution
    /// binds them), so the statement text stays the same from one execution to the next.
    pub generated_as_params: bool,
    /// The shard key column's name (for the INSERTs that get one).
    pub shard_key: String,
}

/// Quotes an identifier with backquotes.
pub fn quote_ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// A string literal that reads the same under any `sql_mode`.
pub fn quote_string(value: &[u8]) -> Vec<u8> {
    if value.contains(&b'\\') || value.iter().any(|b| *b < 0x20) {
        let mut out = b"X'".to_vec();
        for b in value {
            out.extend_from_slice(format!("{b:02X}").as_bytes());
        }
        out.push(b'\'');
        return out;
    }
    let mut out = Vec::with_capacity(value.len() + 2);
    out.push(b'\'');
    for &b in value {
        if b == b'\'' {
            out.push(b'\'');
        }
        out.push(b);
    }
    out.push(b'\'');
    out
}

/// The value of a session function. In a select list (`metadata`), the value is wrapped so
/// the column keeps the type, length and nullability of the function itself:
/// `IF(1, CAST(42 AS UNSIGNED), LAST_INSERT_ID())` is described exactly as
/// `LAST_INSERT_ID()` is. Elsewhere (WHERE, VALUES) the bare literal keeps index use.
fn session_fn_text(function: SessionFn, values: &SessionValues, metadata: bool) -> Vec<u8> {
    let (value, cast, original): (Vec<u8>, Option<&str>, &str) = match function {
        SessionFn::LastInsertId => (
            values.last_insert_id.to_string().into_bytes(),
            Some("UNSIGNED"),
            "LAST_INSERT_ID()",
        ),
        SessionFn::ConnectionId => (
            values.connection_id.to_string().into_bytes(),
            Some("UNSIGNED"),
            "CONNECTION_ID()",
        ),
        SessionFn::RowCount => (
            values.row_count.to_string().into_bytes(),
            Some("SIGNED"),
            "ROW_COUNT()",
        ),
        SessionFn::FoundRows => (
            values.found_rows.to_string().into_bytes(),
            Some("SIGNED"),
            "FOUND_ROWS()",
        ),
        SessionFn::Database => (
            values
                .database
                .as_ref()
                .map_or(b"NULL".to_vec(), |db| quote_string(db.as_bytes())),
            None,
            "DATABASE()",
        ),
        SessionFn::User => (quote_string(values.user.as_bytes()), None, "USER()"),
        SessionFn::CurrentUser => (
            quote_string(values.current_user.as_bytes()),
            None,
            "CURRENT_USER()",
        ),
    };
    if !metadata {
        return value;
    }
    let value = match cast {
        Some(cast) => format!("CAST({} AS {cast})", String::from_utf8_lossy(&value)).into_bytes(),
        None => value,
    };
    [
        b"IF(1, ".as_slice(),
        &value,
        b", ",
        original.as_bytes(),
        b")",
    ]
    .concat()
}

/// A statement with its tokens, ready to render variants of.
pub struct Statement<'a> {
    /// The client's bytes.
    pub sql: &'a [u8],
    /// Its tokens.
    pub tokens: &'a [Token],
}

impl Statement<'_> {
    fn bytes_of(&self, span: TokSpan) -> Range<usize> {
        self.tokens[span.first as usize].range.start..self.tokens[span.last as usize].range.end
    }

    fn session_edits(
        &self,
        analysis: &Analysis,
        values: &SessionValues,
    ) -> Vec<(Range<usize>, Vec<u8>)> {
        analysis
            .session_fns
            .iter()
            .map(|f| {
                let range = self.bytes_of(f.span);
                let mut text = session_fn_text(f.function, values, f.keep_name);
                if f.keep_name {
                    text.extend_from_slice(b" AS ");
                    let name = String::from_utf8_lossy(&self.sql[range.clone()]).into_owned();
                    text.extend_from_slice(quote_ident(&name).as_bytes());
                }
                (range, text)
            })
            .collect()
    }

    /// The statement for the default datasource: session functions replaced, nothing else.
    pub fn unsharded(&self, analysis: &Analysis, values: &SessionValues) -> Cow<'_, [u8]> {
        if analysis.session_fns.is_empty() {
            return Cow::Borrowed(self.sql);
        }
        let mut edits = self.session_edits(analysis, values);
        edits.sort_by_key(|e| e.0.start);
        Cow::Owned(render(self.sql, 0..self.sql.len(), &edits))
    }

    /// The statement for one shard. `rows` selects INSERT rows (empty: all); `null_keys`
    /// replaces the order id values by NULL (an unresolved read's empty answer).
    pub fn for_shard(
        &self,
        analysis: &Analysis,
        plan: &ShardedPlan,
        shard: &Shard,
        rows: &[usize],
        null_keys: bool,
        values: &SessionValues,
    ) -> Vec<u8> {
        let mut edits = self.session_edits(analysis, values);
        for edit in &plan.edits {
            let table = &shard.tables[usize::from(edit.table.0)];
            let text = match edit.form {
                EditForm::Qualified => {
                    format!("{}.{}", quote_ident(&shard.database), quote_ident(table))
                }
                EditForm::TableOnly => quote_ident(table),
            };
            edits.push((self.bytes_of(edit.span), text.into_bytes()));
        }
        if let Some(insert) = plan.key_insert {
            let key = quote_ident(&values.shard_key);
            let at = |t: u32| {
                let end = self.tokens[t as usize].range.end;
                end..end
            };
            match insert {
                crate::sql::KeyInsert::ColumnList { after } => {
                    edits.push((at(after), format!("{key}, ").into_bytes()));
                    for (n, row) in plan.rows.iter().enumerate() {
                        let id = values.generated_ids.get(n).copied().unwrap_or_default();
                        let id = if values.generated_as_params {
                            "?".to_owned()
                        } else {
                            id.to_string()
                        };
                        edits.push((at(row.span.first), format!("{id}, ").into_bytes()));
                    }
                }
                crate::sql::KeyInsert::Assignments { after } => {
                    let id = values.generated_ids.first().copied().unwrap_or_default();
                    let id = if values.generated_as_params {
                        "?".to_owned()
                    } else {
                        id.to_string()
                    };
                    edits.push((at(after), format!(" {key} = {id},").into_bytes()));
                }
            }
        }
        if null_keys {
            for slot in &plan.key_values {
                if let ValueSlot::Literal { token, .. } = slot {
                    edits.push((self.tokens[*token as usize].range.clone(), b"NULL".to_vec()));
                }
            }
        }
        edits.sort_by_key(|e| e.0.start);
        match (
            plan.values_span,
            rows.is_empty() || rows.len() == plan.rows.len(),
        ) {
            (Some(span), false) => {
                let all = self.bytes_of(span);
                let mut out = render(self.sql, 0..all.start, &edits);
                for (n, &row) in rows.iter().enumerate() {
                    if n > 0 {
                        out.extend_from_slice(b", ");
                    }
                    let range = self.bytes_of(plan.rows[row].span);
                    out.extend_from_slice(&render(self.sql, range, &edits));
                }
                out.extend_from_slice(&render(self.sql, all.end..self.sql.len(), &edits));
                out
            }
            _ => render(self.sql, 0..self.sql.len(), &edits),
        }
    }
}

/// The bytes of `range` with the edits that fall inside it applied (edits sorted by start).
fn render(sql: &[u8], range: Range<usize>, edits: &[(Range<usize>, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(range.len() + 64);
    let mut at = range.start;
    for (r, text) in edits {
        if r.start < at || r.end > range.end {
            continue;
        }
        out.extend_from_slice(&sql[at..r.start]);
        out.extend_from_slice(text);
        at = r.end;
    }
    out.extend_from_slice(&sql[at..range.end]);
    out
}

/// How result column definitions name tables: physical names of one shard back to
/// logical ones.
#[derive(Debug, Clone)]
pub struct ResultNames {
    /// The shard's physical database.
    pub physical_database: String,
    /// The logical database.
    pub logical_database: String,
    /// (physical, logical) table names.
    pub tables: Vec<(String, String)>,
}

impl ResultNames {
    /// Names for one shard.
    pub fn for_shard(config: &Config, shard: &Shard) -> Self {
        Self {
            physical_database: shard.database.clone(),
            logical_database: config.sharding.logical_database.clone(),
            tables: shard
                .tables
                .iter()
                .cloned()
                .zip(config.sharding.binding_tables.iter().cloned())
                .collect(),
        }
    }

    /// The logical name of a physical table of this shard.
    pub fn logical_table(&self, physical: &[u8]) -> Option<&str> {
        self.tables
            .iter()
            .find(|(p, _)| p.as_bytes() == physical)
            .map(|(_, l)| l.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(quote_ident("a`b"), "`a``b`");
        assert_eq!(quote_string(b"it's"), b"'it''s'");
        assert_eq!(quote_string(b"a\\b"), b"X'615C62'");
    }

    #[test]
    fn render_applies_only_edits_inside_the_range() {
        let sql = b"abc def ghi";
        let edits = vec![(0..3, b"X".to_vec()), (8..11, b"Z".to_vec())];
        assert_eq!(render(sql, 0..11, &edits), b"X def Z");
        assert_eq!(render(sql, 4..11, &edits), b"def Z");
    }
}
