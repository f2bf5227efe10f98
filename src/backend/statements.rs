//! The statements prepared on one backend connection, kept so a client's prepared
//! statement is prepared once per connection, not at every execution.

use std::collections::VecDeque;
use std::hash::Hash;
use std::sync::Arc;

use hashbrown::{Equivalent, HashMap};

use bytes::BytesMut;

use super::vars::AppliedState;

/// A statement prepared on a backend connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackendStatement {
    /// The backend's statement id.
    pub id: u32,
    /// Parameters.
    pub params: u16,
    /// Result columns.
    pub columns: u16,
}

/// A statement prepared on a backend with the definitions it answered with.
#[derive(Debug, Clone)]
pub struct PreparedMetadata {
    /// The statement.
    pub statement: BackendStatement,
    /// Parameter definitions.
    pub param_defs: Vec<BytesMut>,
    /// Result column definitions.
    pub column_defs: Vec<BytesMut>,
    /// Warnings of the prepare.
    pub warnings: u16,
}

/// Statements kept prepared per backend connection; the oldest is closed beyond this, so
/// a server's `max_prepared_stmt_count` (16,382 by default) is not reached.
pub const STATEMENTS_PER_CONNECTION: usize = 128;

/// What a prepared statement is kept under: its text and the session state the server
/// read it in ([`Context`]).
#[derive(Clone, PartialEq, Eq, Hash)]
struct StatementKey {
    context: Vec<u8>,
    sql: Vec<u8>,
}

/// A [`StatementKey`] borrowed, for lookups without building one. Its derived `Hash`
/// hashes the same as the owned key's (a `Vec<u8>` hashes as its slice).
#[derive(Hash)]
struct StatementKeyRef<'a> {
    context: &'a [u8],
    sql: &'a [u8],
}

impl Equivalent<StatementKey> for StatementKeyRef<'_> {
    fn equivalent(&self, key: &StatementKey) -> bool {
        self.context == key.context.as_slice() && self.sql == key.sql.as_slice()
    }
}

/// The session state a statement is read in, as bytes: the default database names its
/// unqualified tables, `sql_mode` decides how it parses (`ANSI_QUOTES`,
/// `PIPES_AS_CONCAT`, ...) and the character set variables how its literals read, so the
/// same text prepared under other values is another statement. Built again only when the
/// connection's variables (by their identity) or database changed.
#[derive(Default)]
struct Context {
    /// The identity of the variables and the database it was built from; `None`: never built.
    built_from: Option<(u64, Option<String>)>,
    bytes: Vec<u8>,
}

impl Context {
    fn of(&mut self, state: &AppliedState) -> &[u8] {
        let current = self
            .built_from
            .as_ref()
            .is_some_and(|(vars, db)| *vars == state.vars.id() && *db == state.database);
        if !current {
            self.bytes.clear();
            self.bytes
                .extend_from_slice(state.database.as_deref().unwrap_or("").as_bytes());
            self.bytes.push(0);
            for (name, value) in state.vars.iter() {
                if name == "sql_mode" || crate::sql::charset::names_a_charset(name) {
                    self.bytes.extend_from_slice(name.as_bytes());
                    self.bytes.push(b'=');
                    self.bytes.extend_from_slice(value);
                    self.bytes.push(0);
                }
            }
            self.built_from = Some((state.vars.id(), state.database.clone()));
        }
        &self.bytes
    }
}

/// The statements prepared on one connection, by text and [`Context`], at most
/// [`STATEMENTS_PER_CONNECTION`] (the oldest goes first). Hashed with foldhash (seeded per
/// map): the lookup runs at every execution, where SipHash over the text cost 2% of a
/// prepared point select.
#[derive(Default)]
pub struct StatementCache {
    by_key: HashMap<StatementKey, Arc<PreparedMetadata>, foldhash::fast::RandomState>,
    /// Oldest first.
    order: VecDeque<StatementKey>,
    context: Context,
}

impl StatementCache {
    /// The statement prepared for `sql` under the connection's `state`, if any.
    pub fn get(&mut self, state: &AppliedState, sql: &[u8]) -> Option<Arc<PreparedMetadata>> {
        let context = self.context.of(state);
        self.by_key.get(&StatementKeyRef { context, sql }).cloned()
    }

    /// Makes room for one more: the oldest statement, taken out, when the cache is full
    /// (the caller closes it on the server).
    pub fn evict_oldest_if_full(&mut self) -> Option<Arc<PreparedMetadata>> {
        if self.order.len() < STATEMENTS_PER_CONNECTION {
            return None;
        }
        let oldest = self.order.pop_front()?;
        self.by_key.remove(&oldest)
    }

    /// Keeps `prepared` for `sql` under the connection's `state`.
    pub fn insert(&mut self, state: &AppliedState, sql: &[u8], prepared: Arc<PreparedMetadata>) {
        let key = StatementKey {
            context: self.context.of(state).to_vec(),
            sql: sql.to_vec(),
        };
        if self.by_key.insert(key.clone(), prepared).is_none() {
            self.order.push_back(key);
        }
    }

    /// Forgets every statement (the server closed them: a reset).
    pub fn clear(&mut self) {
        self.by_key.clear();
        self.order.clear();
    }

    /// How many are kept.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prepared(id: u32) -> Arc<PreparedMetadata> {
        Arc::new(PreparedMetadata {
            statement: BackendStatement {
                id,
                params: 1,
                columns: 2,
            },
            param_defs: Vec::new(),
            column_defs: Vec::new(),
            warnings: 0,
        })
    }

    fn state(database: Option<&str>, sql_mode: &str) -> AppliedState {
        let mut state = AppliedState {
            database: database.map(str::to_owned),
            ..AppliedState::default()
        };
        state
            .vars
            .insert("sql_mode".into(), sql_mode.as_bytes().to_vec());
        state
            .vars
            .insert("character_set_client".into(), b"'utf8mb4'".to_vec());
        state
    }

    const SQL: &[u8] = b"SELECT * FROM t_order_0 WHERE order_id = ?";

    #[test]
    fn a_statement_is_found_again_under_the_state_it_was_prepared_in_and_only_there() {
        let mut cache = StatementCache::default();
        let mut st = state(Some("orders_0"), "''");
        assert!(cache.get(&st, SQL).is_none());
        cache.insert(&st, SQL, prepared(7));
        assert_eq!(cache.get(&st, SQL).map(|p| p.statement.id), Some(7));
        assert!(cache.get(&st, b"SELECT 1").is_none());
        // Another sql_mode parses the text otherwise: another statement.
        let ansi = state(Some("orders_0"), "'ANSI_QUOTES'");
        assert!(cache.get(&ansi, SQL).is_none());
        // Another default database names other tables.
        st.database = Some("orders_1".into());
        assert!(cache.get(&st, SQL).is_none());
        st.database = Some("orders_0".into());
        assert_eq!(cache.get(&st, SQL).map(|p| p.statement.id), Some(7));
        // A variable that does not change how the text reads: the same statement, though
        // the variables' identity changed.
        st.vars.insert("@x".into(), b"1".to_vec());
        assert_eq!(cache.get(&st, SQL).map(|p| p.statement.id), Some(7));
        // A character set does change it.
        st.vars
            .insert("character_set_client".into(), b"'latin1'".to_vec());
        assert!(cache.get(&st, SQL).is_none());
    }

    #[test]
    fn the_oldest_statement_goes_when_the_cache_is_full() {
        let mut cache = StatementCache::default();
        let st = state(None, "''");
        let texts: Vec<Vec<u8>> = (0..STATEMENTS_PER_CONNECTION)
            .map(|i| format!("SELECT {i}").into_bytes())
            .collect();
        for (i, text) in texts.iter().enumerate() {
            assert!(cache.evict_oldest_if_full().is_none());
            cache.insert(&st, text, prepared(i as u32));
        }
        assert_eq!(cache.len(), STATEMENTS_PER_CONNECTION);
        let evicted = cache.evict_oldest_if_full().expect("full");
        assert_eq!(evicted.statement.id, 0);
        assert!(cache.get(&st, &texts[0]).is_none());
        assert!(cache.get(&st, &texts[1]).is_some());
        cache.clear();
        assert!(cache.is_empty() && cache.get(&st, &texts[1]).is_none());
    }
}
