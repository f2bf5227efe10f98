//! Session functions (`LAST_INSERT_ID()`, `CONNECTION_ID()`, `DATABASE()`, ...) replaced by
//! the session's values: a backend connection serves many sessions, so its own answers
//! would be wrong.

use super::statement::{Edit, Frag, Statement, quote_string};
use crate::sql::quote_ident;
use crate::sql::{Analysis, SessionFn};

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
    /// `USER()`: `name@client-host` (shared: made once per session).
    pub user: std::sync::Arc<str>,
    /// `CURRENT_USER()`: `name@%`.
    pub current_user: std::sync::Arc<str>,
    /// `@@sql_select_limit` when the session set it below its default (2^64 - 1): the
    /// server cuts a top-level SELECT without LIMIT to this many rows, which a merge of
    /// several shards must do after merging ([`crate::plan`]).
    pub select_limit: Option<u64>,
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

impl Statement<'_> {
    /// Edits replacing the statement's session functions by the session's values.
    pub fn session_edits(&self, analysis: &Analysis, values: &SessionValues) -> Vec<Edit> {
        analysis
            .session_fns
            .iter()
            .map(|f| {
                let at = self.bytes_of(f.span);
                let mut text = session_fn_text(f.function, values, f.keep_name);
                if f.keep_name {
                    text.extend_from_slice(b" AS ");
                    let name = String::from_utf8_lossy(&self.sql[at.clone()]).into_owned();
                    text.extend_from_slice(quote_ident(&name).as_bytes());
                }
                Edit {
                    at,
                    with: vec![Frag::Bytes(text)],
                }
            })
            .collect()
    }
}
