//! What a session checks each statement's text against before anything reaches a backend:
//! its user's scope (the databases it may reach, SPEC §8a) under the configuration in force
//! and the databases the servers were last seen to have, and the memo of the statement
//! shapes that passed the checks in the present epoch ([`super::memo`]).
//!
//! A value the session owns. What it reads of the session (the current database, the
//! lexer mode) comes in as the session's [`SessionState`] and the generation of the
//! configuration the session works under.

use std::sync::Arc;

use super::memo::{Epoch, ShapeMemo};
use super::state::SessionState;
use crate::error::ProxyError;
use crate::plan::scope::Scope;
use crate::proxy::{Proxy, Runtime};
use crate::sql::Analysis;
use crate::sql::lexer::Lexed;

/// A session's scope and memo of checked shapes.
pub struct Checks {
    /// The databases the user may reach (SPEC §8a).
    scope: Arc<Scope>,
    /// The [`Proxy::server_databases`] version and the configuration generation `scope`
    /// was built with.
    databases_version: u64,
    generation: u64,
    /// The data-statement shapes the session ran last, under `scope`.
    memo: ShapeMemo,
}

impl Checks {
    /// The checks of `user@host` under `current` (the configuration the session works
    /// under), with the databases the servers were last seen to have.
    pub fn new(proxy: &Proxy, current: &Runtime, user: &str, host: &str) -> Self {
        let known = proxy.server_databases();
        Self {
            scope: Arc::new(
                Scope::of(&current.config, user, host).with_server_databases(&known.names),
            ),
            databases_version: known.version,
            generation: current.generation,
            memo: ShapeMemo::default(),
        }
    }

    /// Follows the newest configuration and server databases at once (in a transaction
    /// and in a pinned session too: the scope only narrows or widens what the checks let
    /// through). The memo stays: its entries are kept per scope, so the new scope misses.
    pub fn follow(&mut self, proxy: &Proxy, user: &str, host: &str) {
        if proxy.server_databases_version() != self.databases_version
            || proxy.generation() != self.generation
        {
            let memo = std::mem::take(&mut self.memo);
            *self = Self::new(proxy, &proxy.runtime(), user, host);
            self.memo = memo;
        }
    }

    /// The databases the user may reach.
    pub fn scope(&self) -> Arc<Scope> {
        self.scope.clone()
    }

    /// Refuses a database outside the scope (1044): `USE`, COM_INIT_DB, the handshake's
    /// database, `SHOW ... FROM db`.
    pub fn database(&self, name: &str) -> Result<(), ProxyError> {
        self.scope.check_database(name)
    }

    /// Refuses a statement naming a database outside the scope (1142, 1370, 1044;
    /// [`crate::plan::scope::check_statement`]), before anything reaches a backend. A
    /// current database a reload took out of the scope refuses every statement but `USE`
    /// (1044): unqualified names would still reach it.
    pub fn statement(
        &self,
        state: &SessionState,
        sql: &[u8],
        lexed: &Lexed,
    ) -> Result<(), ProxyError> {
        state.check_name_bytes(sql, lexed)?;
        if let Some(db) = state.database.as_deref() {
            let is_use = lexed.tokens.first().is_some_and(|t| t.is_word(sql, "use"));
            if !is_use {
                self.scope.check_database(db)?;
            }
        }
        crate::plan::scope::check_text(
            &self.scope,
            sql,
            &lexed.tokens,
            state.lex_mode,
            state.database.as_deref(),
        )
    }

    /// The present epoch of a session in `state` under configuration `generation`
    /// ([`Epoch`]).
    pub fn epoch(&self, state: &SessionState, generation: u64) -> Epoch {
        Epoch::new(
            &self.scope,
            generation,
            state.database.as_deref(),
            state.lex_mode,
        )
    }

    /// Whether a session in `state` under configuration `generation` is in `epoch`.
    pub fn in_epoch(&self, epoch: &Epoch, state: &SessionState, generation: u64) -> bool {
        epoch.matches(
            &self.scope,
            generation,
            state.database.as_deref(),
            state.lex_mode,
        )
    }

    /// The analysis of a data statement of shape `shape` that passed the checks in the
    /// present epoch.
    pub fn memo_get(
        &mut self,
        shape: &[u8],
        state: &SessionState,
        generation: u64,
    ) -> Option<Arc<Analysis>> {
        self.memo.get(
            shape,
            &self.scope,
            generation,
            state.database.as_deref(),
            state.lex_mode,
        )
    }

    /// Keeps a shape that just passed the checks as a plain data statement.
    pub fn memo_insert(
        &mut self,
        shape: Vec<u8>,
        analysis: Arc<Analysis>,
        state: &SessionState,
        generation: u64,
    ) {
        self.memo.insert(
            shape,
            analysis,
            &self.scope,
            generation,
            state.database.as_deref(),
            state.lex_mode,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::sql::lexer::lex;

    fn checks() -> (Arc<Proxy>, Checks) {
        let config =
            Config::from_toml(include_str!("../../config/demo.toml"), "demo.toml").unwrap();
        let proxy = Proxy::new(config);
        let checks = Checks::new(&proxy, &proxy.runtime(), "app", "localhost");
        (proxy, checks)
    }

    // Tokio: the proxy's pools start their reapers on it.
    #[tokio::test]
    async fn a_database_outside_the_scope_is_refused_before_any_backend() {
        let (_proxy, checks) = checks();
        let mut state = SessionState::new(45, false, None);
        state.database = Some("orders".into());
        let ok = "SELECT * FROM t_order WHERE order_id = 1";
        assert!(
            checks
                .statement(&state, ok.as_bytes(), &lex(ok.as_bytes(), state.lex_mode))
                .is_ok()
        );
        let outside = "SELECT * FROM mysql.user";
        let refused = checks
            .statement(
                &state,
                outside.as_bytes(),
                &lex(outside.as_bytes(), state.lex_mode),
            )
            .unwrap_err();
        assert_eq!(refused.to_packet_parts().0, 1142, "{refused}");
        assert_eq!(
            checks.database("mysql").unwrap_err().to_packet_parts().0,
            1044
        );
    }

    #[tokio::test]
    async fn a_memoized_shape_is_found_only_in_its_epoch() {
        let (_proxy, mut checks) = checks();
        let mut state = SessionState::new(45, false, None);
        state.database = Some("orders".into());
        let sql = b"SELECT * FROM t_order WHERE order_id = 1";
        let lexed = lex(sql, state.lex_mode);
        let shape = state.memo_shape(sql, &lexed, "orders").expect("eligible");
        let analysis = Arc::new(Analysis {
            verb: crate::sql::Verb::Select,
            placement: crate::sql::Placement::Unsharded,
            session_fns: Vec::new(),
            pins: false,
            qualified_tables: Vec::new(),
        });
        checks.memo_insert(shape.clone(), analysis, &state, 1);
        assert!(checks.memo_get(&shape, &state, 1).is_some());
        // Another configuration generation, another database: another epoch.
        assert!(checks.memo_get(&shape, &state, 2).is_none());
        state.database = Some("other".into());
        assert!(checks.memo_get(&shape, &state, 1).is_none());
    }
}
