//! The statement shapes a session ran last, so a statement of a shape it has just run skips
//! the checks whose answer only the shape decides.
//!
//! An application sends the same few statements again and again with other values (a point
//! select by order id). For a text statement, the scope check ([`crate::plan::scope`]), the
//! classifier ([`crate::sql::command`]), the check for the information_schema views the proxy
//! answers itself ([`super::catalog`]) and the lookup in the shared analysis cache read
//! nothing but the statement's tokens, and literals only by their kind: a statement with the
//! same shape ([`crate::sql::shape::shape_key`]) gets the same answers from them, as long as
//! the scope, the configuration, the current database and the lexer mode stay the same.
//!
//! The memo keeps the last [`CAPACITY`] shapes that passed them all as plain data statements,
//! each with its analysis, for one such epoch; a change of any part of the epoch empties it.
//! A statement is only looked up or kept when the checks read nothing but its shape:
//! - no other lexing of the text might apply on the server (no executable comment, no
//!   `sql_mode` anywhere in the text: [`crate::plan::scope::has_one_reading`]), since the
//!   scope check then also reads the statement lexed other ways, literals included;
//! - no number token starts with a dot (`db.1t` lexes as `db`, `.1`, `t`, and the scope check
//!   reads such a number as a table name).
//!
//! Entries are compared by their whole shape, never by a hash, so two shapes never share an
//! entry.

use std::sync::Arc;

use crate::plan::scope::Scope;
use crate::sql::Analysis;
use crate::sql::lexer::{LexMode, Lexed, TokenKind};

/// Shapes kept per session: enough for the statements of one request of a typical
/// application, small enough to search linearly.
pub const CAPACITY: usize = 8;

/// What the checks of a statement's text depend on besides the text: a memo entry, or a
/// prepared statement's last check, stands for them only in the same epoch. The scope
/// ([`Scope`]) is compared by address; the configuration by its generation
/// ([`crate::proxy::Runtime::generation`]), so an epoch keeps no configuration, and none of
/// its pools, alive.
pub struct Epoch<S = Scope> {
    /// The scope the checks ran under (kept, so its address is not reused).
    scope: Arc<S>,
    /// The configuration's generation.
    generation: u64,
    database: Option<String>,
    mode: LexMode,
}

impl<S> Epoch<S> {
    /// The epoch of a session with this scope, configuration, database and lexer mode.
    pub fn new(scope: &Arc<S>, generation: u64, database: Option<&str>, mode: LexMode) -> Self {
        Epoch {
            scope: scope.clone(),
            generation,
            database: database.map(str::to_owned),
            mode,
        }
    }

    /// Whether a session with this scope, configuration, database and mode is in it.
    pub fn matches(
        &self,
        scope: &Arc<S>,
        generation: u64,
        database: Option<&str>,
        mode: LexMode,
    ) -> bool {
        Arc::ptr_eq(&self.scope, scope)
            && self.generation == generation
            && self.database.as_deref() == database
            && self.mode == mode
    }
}

/// A session's memo of data-statement shapes that passed the scope check, the classifier
/// and the catalog-view check, with their analyses. See the module documentation.
pub struct ShapeMemo<S = Scope> {
    epoch: Option<Epoch<S>>,
    /// Most recently used last.
    entries: Vec<(Vec<u8>, Arc<Analysis>)>,
}

impl<S> Default for ShapeMemo<S> {
    fn default() -> Self {
        Self {
            epoch: None,
            entries: Vec::new(),
        }
    }
}

impl<S> ShapeMemo<S> {
    /// Whether the statement `sql` (lexed as `lexed` in `mode`) may be looked up or kept:
    /// its checks read nothing but its shape (module documentation).
    pub fn eligible(sql: &[u8], lexed: &Lexed, mode: LexMode) -> bool {
        crate::plan::scope::has_one_reading(sql, mode)
            && !lexed
                .tokens
                .iter()
                .any(|t| t.kind == TokenKind::Number && t.bytes(sql).starts_with(b"."))
    }

    /// The analysis of `shape`, if a statement of this shape passed the checks in this
    /// same epoch.
    pub fn get(
        &mut self,
        shape: &[u8],
        scope: &Arc<S>,
        generation: u64,
        database: Option<&str>,
        mode: LexMode,
    ) -> Option<Arc<Analysis>> {
        if !self
            .epoch
            .as_ref()
            .is_some_and(|e| e.matches(scope, generation, database, mode))
        {
            return None;
        }
        let at = self.entries.iter().rposition(|(key, _)| key == shape)?;
        let last = self.entries.len() - 1;
        if at != last {
            let entry = self.entries.remove(at);
            self.entries.push(entry);
        }
        Some(self.entries[last].1.clone())
    }

    /// Keeps `shape`, which just passed the checks in the epoch given, with its analysis.
    pub fn insert(
        &mut self,
        shape: Vec<u8>,
        analysis: Arc<Analysis>,
        scope: &Arc<S>,
        generation: u64,
        database: Option<&str>,
        mode: LexMode,
    ) {
        if !self
            .epoch
            .as_ref()
            .is_some_and(|e| e.matches(scope, generation, database, mode))
        {
            self.entries.clear();
            self.epoch = Some(Epoch::new(scope, generation, database, mode));
        }
        if let Some(at) = self.entries.iter().position(|(key, _)| *key == shape) {
            self.entries.remove(at);
        } else if self.entries.len() == CAPACITY {
            self.entries.remove(0);
        }
        self.entries.push((shape, analysis));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::lexer::lex;

    fn analysis() -> Arc<Analysis> {
        Arc::new(Analysis {
            verb: crate::sql::Verb::Other,
            placement: crate::sql::Placement::Unsharded,
            session_fns: Vec::new(),
            pins: false,
            qualified_tables: Vec::new(),
        })
    }

    fn eligible(sql: &str) -> bool {
        let m = LexMode::default();
        ShapeMemo::<()>::eligible(sql.as_bytes(), &lex(sql.as_bytes(), m), m)
    }

    #[test]
    fn only_statements_whose_checks_read_nothing_but_their_shape_are_kept() {
        assert!(eligible("SELECT * FROM t_order WHERE order_id = 123"));
        assert!(eligible(
            "SELECT * FROM t /* plain comment */ WHERE a = 'x'"
        ));
        assert!(!eligible("SELECT 1 /*!50000 FROM mysql.user */"));
        assert!(!eligible("SELECT * FROM t WHERE a = 'sql_mode'"));
        assert!(!eligible("SELECT * FROM orders.1t"));
        assert!(!eligible("SELECT .5 FROM t"));
    }

    #[test]
    fn a_shape_is_found_only_in_the_epoch_it_was_kept_in() {
        let (scope, rt) = (Arc::new(()), 1);
        let m = LexMode::default();
        let mut memo = ShapeMemo::<()>::default();
        memo.insert(b"shape".to_vec(), analysis(), &scope, rt, Some("orders"), m);
        assert!(memo.get(b"shape", &scope, rt, Some("orders"), m).is_some());
        assert!(memo.get(b"shapf", &scope, rt, Some("orders"), m).is_none());
        assert!(memo.get(b"shape", &scope, rt, Some("other"), m).is_none());
        assert!(memo.get(b"shape", &scope, rt, None, m).is_none());
        let ansi = LexMode {
            ansi_quotes: true,
            ..m
        };
        assert!(
            memo.get(b"shape", &scope, rt, Some("orders"), ansi)
                .is_none()
        );
        // Another scope or configuration, even an equal one, is another epoch.
        assert!(
            memo.get(b"shape", &Arc::new(()), rt, Some("orders"), m)
                .is_none()
        );
        assert!(memo.get(b"shape", &scope, 2, Some("orders"), m).is_none());
        // Keeping a shape in a new epoch forgets the old one's.
        let narrowed = Arc::new(());
        memo.insert(
            b"other".to_vec(),
            analysis(),
            &narrowed,
            rt,
            Some("orders"),
            m,
        );
        assert!(
            memo.get(b"shape", &narrowed, rt, Some("orders"), m)
                .is_none()
        );
        assert!(memo.get(b"shape", &scope, rt, Some("orders"), m).is_none());
        assert!(
            memo.get(b"other", &narrowed, rt, Some("orders"), m)
                .is_some()
        );
    }

    #[test]
    fn the_least_recently_used_shape_goes_first() {
        let (scope, rt) = (Arc::new(()), 1);
        let m = LexMode::default();
        let mut memo = ShapeMemo::<()>::default();
        for i in 0..CAPACITY {
            memo.insert(vec![i as u8], analysis(), &scope, rt, None, m);
        }
        // Using shape 0 makes shape 1 the oldest.
        assert!(memo.get(&[0], &scope, rt, None, m).is_some());
        memo.insert(vec![0xFF], analysis(), &scope, rt, None, m);
        assert!(memo.get(&[1], &scope, rt, None, m).is_none());
        assert!(memo.get(&[0], &scope, rt, None, m).is_some());
        assert!(memo.get(&[0xFF], &scope, rt, None, m).is_some());
        assert_eq!(memo.entries.len(), CAPACITY);
    }
}
