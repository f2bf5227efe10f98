//! `SET` and `USE`: session state the proxy keeps and applies to whichever backend
//! connection serves the client.
//!
//! A `SET` runs on a backend connection (so the server validates it and its errors are
//! the server's), then the proxy reads the resulting values back and keeps them as
//! literals: `concat(@@sql_mode, ',X')` is evaluated once, never replayed.

use mysql_common::constants::ColumnType;

use super::session::Session;
use crate::backend::BackendConn;
use crate::error::{ER_UNKNOWN_CHARACTER_SET, ProxyError};
use crate::execute::Target;
use crate::protocol::packets::OkInfo;
use crate::protocol::status::MoreResults;
use crate::rewrite::quote_string;
use crate::sql::charset::names_a_charset;
use crate::sql::charset::{CHARSET_VARS, decoding_for};
use crate::sql::command::SetItem;
use crate::wire::client::Client;

/// A one-shot value (the next insert's auto-increment): not carried, the connection pins.
const IDENTITY_VARS: [&str; 1] = ["insert_id"];

/// A read-back value as a literal that gives the same value and type when set again.
fn literal_of(value: &[u8], column_type: u8, charset: u16) -> Vec<u8> {
    use ColumnType::*;
    if column_type == MYSQL_TYPE_DOUBLE as u8 || column_type == MYSQL_TYPE_FLOAT as u8 {
        return format!("CAST('{}' AS DOUBLE)", String::from_utf8_lossy(value)).into_bytes();
    }
    if numeric(column_type) {
        return value.to_vec();
    }
    if charset == 63 {
        let mut out = b"X'".to_vec();
        for b in value {
            out.extend_from_slice(format!("{b:02X}").as_bytes());
        }
        out.push(b'\'');
        return out;
    }
    quote_string(value)
}

fn numeric(column_type: u8) -> bool {
    use ColumnType::*;
    [
        MYSQL_TYPE_DECIMAL,
        MYSQL_TYPE_TINY,
        MYSQL_TYPE_SHORT,
        MYSQL_TYPE_LONG,
        MYSQL_TYPE_FLOAT,
        MYSQL_TYPE_DOUBLE,
        MYSQL_TYPE_LONGLONG,
        MYSQL_TYPE_INT24,
        MYSQL_TYPE_NEWDECIMAL,
        MYSQL_TYPE_YEAR,
    ]
    .iter()
    .any(|t| *t as u8 == column_type)
}

/// A `SET` the proxy refuses: `SET GLOBAL`, or `SET NAMES` of an unknown character set.
fn refusal(items: &[SetItem]) -> Result<(), ProxyError> {
    if let Some(SetItem::GlobalVar(name)) =
        items.iter().find(|i| matches!(i, SetItem::GlobalVar(_)))
    {
        return Err(ProxyError::unsupported(format!(
            "SET GLOBAL {name}: global settings are changed on each server directly, not through the proxy"
        )));
    }
    for item in items {
        if let SetItem::Names(Some(charset)) = item {
            if !crate::sql::charset::can_be_client(charset) {
                return Err(ProxyError::client(
                    crate::error::ER_WRONG_VALUE_FOR_VAR,
                    b"42000",
                    format!(
                        "Variable 'character_set_client' can't be set to the value of '{}'",
                        charset.to_ascii_lowercase()
                    ),
                ));
            }
            decoding_for(charset)
                .map_err(|m| ProxyError::client(ER_UNKNOWN_CHARACTER_SET, b"42000", m))?;
        }
    }
    Ok(())
}

/// A value the proxy refuses for a variable (`value`: as read back). The session trackers
/// of state changes and of transactions would have to speak for statements the proxy
/// answers itself (`BEGIN`, `USE`, `SET TRANSACTION`, prepares), which it cannot do
/// exactly: refused rather than tracked in part. Schema and system-variable tracking are
/// exact.
fn refused_value(name: &str, value: &[u8]) -> Option<ProxyError> {
    let text = String::from_utf8_lossy(value);
    let text = text.trim_matches('\'');
    match name {
        "session_track_state_change" if text == "1" => Some(ProxyError::not_yet(
            "session_track_state_change = ON (the proxy answers some statements itself and cannot tell which of them changed the session state); session_track_schema and session_track_system_variables are tracked",
        )),
        "session_track_transaction_info" if !text.eq_ignore_ascii_case("OFF") => {
            Some(ProxyError::not_yet(
                "session_track_transaction_info other than OFF (a transaction reaches the backends only with its first statement); the IN_TRANS status flag is exact",
            ))
        }
        _ => None,
    }
}

/// The variables a `SET` changes that are read back after it runs (sorted, once each).
fn read_back_names(items: &[SetItem]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for item in items {
        match item {
            SetItem::Names(_) => names.extend(CHARSET_VARS.iter().map(|s| (*s).to_owned())),
            // @@identity is @@last_insert_id under another name.
            SetItem::SessionVar(v) if v == "identity" => names.push("last_insert_id".to_owned()),
            SetItem::SessionVar(v) => {
                // The server sets a character set and its collation together: setting one
                // changes the other, so both are read back.
                match linked_charset_var(v) {
                    Some(other) => names.extend([v.clone(), other.to_owned()]),
                    None => names.push(v.clone()),
                }
            }
            SetItem::UserVar(v) => names.push(v.clone()),
            SetItem::Transaction { session: true } => {
                names.extend(["tx_isolation".to_owned(), "tx_read_only".to_owned()])
            }
            _ => {}
        }
    }
    names.sort();
    names.dedup();
    names
}

/// The variable the server changes with `name`: a character set's collation, a
/// collation's character set (`character_set_connection` and `collation_connection`, and
/// the `_database` and `_server` pairs).
fn linked_charset_var(name: &str) -> Option<&'static str> {
    Some(match name {
        "character_set_connection" => "collation_connection",
        "collation_connection" => "character_set_connection",
        "character_set_database" => "collation_database",
        "collation_database" => "character_set_database",
        "character_set_server" => "collation_server",
        "collation_server" => "character_set_server",
        _ => return None,
    })
}

/// The values of `names` on `conn`, as SQL literals (`NULL` included). Character set and
/// collation names are read as bytes and given as quoted strings, whatever the session's
/// results character set: as hex literals (`SET NAMES binary`) or in UTF-16, `SET NAMES`
/// and the variables would not take them. A user variable holding a string is read as its
/// own bytes with its character set and collation, and given as `_cs X'..' COLLATE c`: set
/// from that on another connection it is the same string (a quoted literal in the
/// connection's character set turned `'a\\b'` into bytes and latin1 into utf8mb4).
async fn read_back(
    conn: &mut BackendConn,
    names: &[String],
) -> Result<Vec<(String, Vec<u8>)>, ProxyError> {
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let select = names
        .iter()
        .map(|v| match v.strip_prefix('@') {
            Some(user) => {
                let u = format!("@{}", crate::rewrite::quote_ident(user));
                format!("{u}, CONVERT(CHARSET({u}) USING binary), CONVERT(COLLATION({u}) USING binary), CAST({u} AS BINARY)")
            }
            // As bytes: a name read in the results character set (utf16, ucs2) would not
            // read back as a name.
            None if names_a_charset(v) => format!("CONVERT(@@session.{v} USING binary)"),
            None => format!("@@session.{v}"),
        })
        .collect::<Vec<_>>()
        .join(", ");
    // An explicit LIMIT: the session's sql_select_limit (0 included) must not cut the
    // read-back.
    let select = format!("SELECT {select} LIMIT 1");
    let (columns, rows) = conn.query_rows(select.as_bytes()).await?;
    let row = rows.into_iter().next().unwrap_or_default();
    let cell = |i: usize| row.get(i).cloned().flatten();
    let mut i = 0;
    Ok(names
        .iter()
        .map(|name| {
            let column = columns.get(i);
            let value = match cell(i) {
                None => b"NULL".to_vec(),
                Some(v) if names_a_charset(name) => quote_string(&v),
                Some(v) => {
                    let column_type = column.map_or(0, |c| c.column_type);
                    match (name.starts_with('@'), cell(i + 1), cell(i + 2), cell(i + 3)) {
                        (true, Some(cs), Some(collation), Some(bytes))
                            if !numeric(column_type) && cs != b"binary" =>
                        {
                            string_literal(&cs, &collation, &bytes)
                        }
                        _ => literal_of(&v, column_type, column.map_or(33, |c| c.charset)),
                    }
                }
            };
            i += if name.starts_with('@') { 4 } else { 1 };
            (name.clone(), value)
        })
        .collect())
}

/// Values above this many bytes are carried as plain literals ([`string_literal`]).
const LARGE_VALUE: usize = 4 << 20;

/// `_cs X'..' COLLATE collation`: `bytes` as a string of that character set and collation
/// (names as the server gave them: letters, digits and `_` only, or the plain literal).
fn string_literal(charset: &[u8], collation: &[u8], bytes: &[u8]) -> Vec<u8> {
    let name =
        |n: &[u8]| !n.is_empty() && n.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_');
    // Hex doubles the size: a value of megabytes would make the `SET` that carries it pass
    // the servers' max_allowed_packet (every later statement there failing with 1153).
    // Those keep the plain literal (and lose their character set, as before).
    if !name(charset) || !name(collation) || bytes.len() > LARGE_VALUE {
        return quote_string(bytes);
    }
    let mut out = b"_".to_vec();
    out.extend_from_slice(charset);
    out.extend_from_slice(b" X'");
    for b in bytes {
        out.extend_from_slice(format!("{b:02X}").as_bytes());
    }
    out.extend_from_slice(b"' COLLATE ");
    out.extend_from_slice(collation);
    out
}

impl Session {
    /// Handles a `SET` statement.
    pub async fn set(
        &mut self,
        client: &mut Client,
        sql: &[u8],
        lexed: &crate::sql::lexer::Lexed,
        items: &[SetItem],
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        refusal(items)?;
        if items.len() > 1 && items[1..].contains(&SetItem::Transaction { session: false }) {
            // `SET TRANSACTION` takes no assignment before it (MariaDB: 1064); what
            // follows its first characteristic after a comma is another characteristic,
            // which the characteristics grammar checks.
            return Err(super::characteristics::syntax_error(
                "SET TRANSACTION cannot be combined with other assignments".into(),
            ));
        }
        if items
            .iter()
            .any(|i| i == &SetItem::Transaction { session: false })
            && !self.in_transaction()
        {
            // Applies to the next transaction only (`super::characteristics`).
            return self.set_next_characteristics(client, sql, lexed, more);
        }
        if self.txn.distributed().is_some()
            && items.contains(&SetItem::SessionVar("autocommit".to_owned()))
        {
            // MariaDB commits the open transaction when autocommit turns on: here that is
            // an atomic commit, before the SET reaches any branch (on the decision branch
            // it would commit that datasource alone; an XA branch refuses it).
            match autocommit_value(sql, &lexed.tokens) {
                Some(true) if !self.state.autocommit => self.txn.end(b"COMMIT").await?,
                Some(_) => {}
                None => {
                    return Err(ProxyError::not_yet(
                        "SET autocommit to an expression in a transaction across datasources (write 1, 0, ON or OFF, or COMMIT first)",
                    ));
                }
            }
        }
        // Forms whose effect cannot be read back (SET ROLE, SET PASSWORD, SET TRANSACTION
        // inside a transaction) run on every held connection and pin the session.
        let opaque = items
            .iter()
            .any(|i| matches!(i, SetItem::Other | SetItem::Transaction { session: false }));
        let names = read_back_names(items);
        // The statement runs once, on the default datasource's connection (or the first one
        // held); its values are read back there and set as literals on the others.
        let default_ds = self.rt.config.sharding.default_datasource;
        let first = if !self.txn.holds_any() || self.txn.holds(default_ds) {
            default_ds
        } else {
            self.txn.held_datasources()[0]
        };
        // A value with side effects (`GET_LOCK(...)`, `@v := ...`, `NEXTVAL(...)`) leaves
        // state on the connection that no read-back sees: the session keeps it.
        if crate::sql::analyze::token_pins(sql, lexed) {
            self.txn.pin();
        }
        let conn = self.connection(Target::primary(first)).await?;
        // What the server tells a client that tracks session state (the tracked variables
        // the statement set, in its words) is what this client is owed.
        let session_state = conn.execute(sql).await?.session_state;
        // The statement ran: a value that cannot be read back (a name the proxy misread)
        // leaves the connection in a state nobody knows, so it is never pooled again.
        let values = match read_back(conn, &names).await {
            Ok(values) => values,
            Err(e) => {
                conn.mark_broken();
                return Err(e);
            }
        };
        let carried: Vec<(String, Vec<u8>)> = values
            .iter()
            .filter(|(n, _)| !IDENTITY_VARS.contains(&n.as_str()))
            .cloned()
            .collect();
        for (name, value) in &carried {
            conn.state.vars.insert(name.clone(), value.clone());
        }
        let others: Vec<_> = self
            .txn
            .held_datasources()
            .into_iter()
            .filter(|ds| *ds != first)
            .collect();
        for ds in others {
            if opaque {
                self.connection(Target::primary(ds))
                    .await?
                    .execute(sql)
                    .await?;
            }
        }
        if opaque {
            self.txn.pin();
        }
        let autocommit_was_off = !self.state.autocommit;
        if let Err(e) = self.absorb(values) {
            // A value the proxy refuses (a character set it cannot lex) is already in
            // force on the backend: that connection goes.
            if let Ok(conn) = self.connection(Target::primary(first)).await {
                conn.mark_broken();
            }
            return Err(e);
        }
        self.txn.sync_held(&self.state.vars).await?;
        if autocommit_was_off && self.state.autocommit {
            self.autocommit_turned_on().await?;
        }
        self.state.warnings.clear();
        self.txn.release_idle();
        client.ok(&OkInfo {
            status: self.final_status(more),
            session_state,
            ..Default::default()
        })
    }

    /// After `SET autocommit = 1` from 0. MariaDB commits the open transaction, even a
    /// BEGIN's: the statement did on the first connection, and `sync_held` on the others.
    /// A transaction begun with `SET TRANSACTION` characteristics leaves them in force after
    /// that commit (MariaDB 10.11: the next writes get 1792 until a statement on a table
    /// succeeds or a transaction ends), so the session keeps them pending, and a `COMMIT` on
    /// each connection that had them clears them there before it goes back to the pool.
    async fn autocommit_turned_on(&mut self) -> Result<(), ProxyError> {
        let chars = self.txn.next_characteristics();
        if chars.is_some() && self.txn.explicit() {
            self.txn.end(b"COMMIT").await?;
        } else {
            self.txn.ended();
        }
        if let Some(chars) = chars {
            self.txn.set_next_characteristics(chars);
        }
        Ok(())
    }

    /// After a data statement that assigns user variables (`SELECT ... INTO @v`,
    /// `@v := ...`) ran on one datasource, `ds`: their values are read back there and
    /// carried to the session's other connections, as after `SET @v = ...`, so a later
    /// `SELECT @v` on another datasource sees them (it saw NULL before). A statement that
    /// ran on several datasources left a value on each; those stay where they are.
    pub(super) async fn carry_user_variables(
        &mut self,
        ds: crate::config::DatasourceId,
        names: &[String],
    ) -> Result<(), ProxyError> {
        let Some(conn) = self.txn.held_mut(ds) else {
            return Ok(());
        };
        let values = match read_back(conn, names).await {
            Ok(values) => values,
            Err(e) => {
                conn.mark_broken();
                return Err(e);
            }
        };
        for (name, value) in &values {
            conn.state.vars.insert(name.clone(), value.clone());
        }
        self.absorb(values)?;
        self.txn.sync_held(&self.state.vars).await
    }

    /// The session's `autocommit` is `on`, as a procedure set it (read back from the
    /// backend that ran it): kept, and set on the other connections the session holds.
    pub(super) async fn adopt_autocommit(&mut self, on: bool) -> Result<(), ProxyError> {
        let was_off = !self.state.autocommit;
        let value = if on { b"1" } else { b"0" }.to_vec();
        self.absorb(vec![("autocommit".to_owned(), value)])?;
        self.txn.sync_held(&self.state.vars).await?;
        if was_off && on {
            // The server committed the open transaction, as after `SET autocommit = 1`.
            self.autocommit_turned_on().await?;
        }
        Ok(())
    }

    /// Keeps read-back values and updates what depends on them.
    fn absorb(&mut self, values: Vec<(String, Vec<u8>)>) -> Result<(), ProxyError> {
        if let Some(refused) = values.iter().find_map(|(n, v)| refused_value(n, v)) {
            return Err(refused);
        }
        for (name, value) in values {
            let text = String::from_utf8_lossy(&value)
                .trim_matches('\'')
                .to_owned();
            match name.as_str() {
                "last_insert_id" => {
                    self.state.set_last_insert_id(text.parse().unwrap_or(0));
                    continue;
                }
                "insert_id" => {
                    // One-shot: it lives on the backend connection, which stays pinned.
                    self.txn.pin();
                    continue;
                }
                "autocommit" => self.state.autocommit = text == "1",
                "sql_select_limit" => {
                    self.state.select_limit = text.parse().ok().filter(|&n: &u64| n != u64::MAX);
                }
                "sql_mode" => self.state.lex_mode = self.state.lex_mode.with_sql_mode(&text),
                "wait_timeout" => {
                    if let Ok(seconds) = text.parse::<u64>() {
                        self.state.wait_timeout = std::time::Duration::from_secs(seconds.max(1));
                    }
                }
                "character_set_client" => {
                    self.state.decoding = decoding_for(&text)
                        .map_err(|m| ProxyError::client(ER_UNKNOWN_CHARACTER_SET, b"42000", m))?;
                }
                _ => {}
            }
            self.state.vars.insert(name, value);
        }
        Ok(())
    }

    /// `USE db` and COM_INIT_DB. The logical database needs no backend; another database
    /// is checked on the default datasource.
    pub async fn use_database(
        &mut self,
        client: &mut Client,
        database: &str,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        self.select_database(database).await?;
        self.state.warnings.clear();
        client.ok(&OkInfo {
            status: self.final_status(more),
            session_state: self.schema_state(),
            ..Default::default()
        })
    }

    /// The session-state entry of the current database, for a session that tracks it
    /// (`session_track_schema`, the server's default unless the session set it); empty
    /// otherwise.
    pub(super) fn schema_state(&self) -> Vec<u8> {
        let tracked = match self.state.vars.get("session_track_schema") {
            Some(v) => v == b"1",
            None => self
                .state
                .defaults
                .as_ref()
                .is_some_and(|d| d.session_track_schema),
        };
        match (&self.state.database, tracked) {
            (Some(db), true) => crate::protocol::packets::session_state_schema(db.as_bytes()),
            _ => Vec::new(),
        }
    }

    /// Makes `database` current without answering the client (connect-time database).
    pub async fn select_database(&mut self, database: &str) -> Result<(), ProxyError> {
        // COM_INIT_DB may be the first command after a reload: its scope counts.
        self.refresh()?;
        self.checks.database(database)?;
        if database.is_empty() {
            return Err(ProxyError::client(
                crate::error::ER_NO_DB_ERROR,
                b"3D000",
                "No database selected",
            ));
        }
        let logical = &self.rt.config.sharding.logical_database;
        if !database.eq_ignore_ascii_case(logical) {
            let ds = self.rt.config.sharding.default_datasource;
            let conn = self.connection(Target::primary(ds)).await?;
            let checked = conn.init_db(database).await;
            self.txn.release_idle();
            checked?;
        }
        self.state.database = Some(database.to_owned());
        Ok(())
    }
}

/// The value `SET ... autocommit = v` gives when `v` is a literal: 1, ON, TRUE, DEFAULT
/// (on), 0, OFF, FALSE (off), bare or quoted; `None` for anything else (an expression).
fn autocommit_value(sql: &[u8], tokens: &[crate::sql::lexer::Token]) -> Option<bool> {
    let at = tokens.iter().position(|t| {
        let name = t.bytes(sql).to_ascii_lowercase();
        let name = name.strip_prefix(b"@@").unwrap_or(&name);
        let name = name
            .strip_prefix(b"session.")
            .or_else(|| name.strip_prefix(b"local."))
            .unwrap_or(name);
        name == b"autocommit"
    })?;
    let assign = tokens.get(at + 1)?;
    if !(assign.is_punct(sql, "=") || assign.is_punct(sql, ":=")) {
        return None;
    }
    let value = tokens.get(at + 2)?;
    if let Some(next) = tokens.get(at + 3) {
        if !next.is_punct(sql, ",") && !next.is_punct(sql, ";") {
            return None;
        }
    }
    let text = String::from_utf8_lossy(value.bytes(sql)).to_ascii_lowercase();
    match text.trim_matches(['\'', '"']) {
        "1" | "on" | "true" | "default" => Some(true),
        "0" | "off" | "false" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod autocommit_tests {
    use super::autocommit_value;
    use crate::sql::lexer::{LexMode, lex};

    #[test]
    fn literal_autocommit_values_are_read_and_expressions_are_not() {
        let value = |sql: &str| {
            autocommit_value(
                sql.as_bytes(),
                &lex(sql.as_bytes(), LexMode::default()).tokens,
            )
        };
        assert_eq!(value("SET autocommit = 1"), Some(true));
        assert_eq!(value("SET autocommit=ON"), Some(true));
        assert_eq!(value("set @@autocommit := 'on'"), Some(true));
        assert_eq!(value("SET SESSION autocommit = DEFAULT"), Some(true));
        assert_eq!(value("SET @@session.autocommit = 0, @x = 1"), Some(false));
        assert_eq!(value("SET autocommit = false"), Some(false));
        assert_eq!(value("SET autocommit = 1 - 1"), None);
        assert_eq!(value("SET autocommit = @v"), None);
    }
}
