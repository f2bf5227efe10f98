//! A session's state as a value: what the client asked for (database, session variables,
//! autocommit, the lexer mode its `sql_mode` implies, the decoding its character set
//! implies) and what it was told (the identity values `LAST_INSERT_ID()`, `ROW_COUNT()`,
//! `FOUND_ROWS()`, the diagnostics `SHOW WARNINGS` lists). No I/O: the session's commands
//! read and change it, and the rules that follow from it alone (status flags, the idle
//! timeout, the results character set) are its methods, tested here.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::backend::Diagnostic;
use crate::backend::vars::SessionVars;
use crate::error::ProxyError;
use crate::protocol::status;
use crate::proxy::SessionDefaults;
use crate::sql::charset::{CHARSET_VARS, Decoding, collation_names, decoding_for};
use crate::sql::lexer::{LexMode, Lexed, TokenKind};

/// What one session asked for and was told (see the module documentation).
#[derive(Debug)]
pub struct SessionState {
    /// Current database.
    pub database: Option<String>,
    /// Session variables as SQL literals, by lower-case name; always holds the character
    /// set variables and `autocommit`. User variables set with `SET @x = ...` are kept
    /// here too, under their `@name`, and applied to every connection the session uses.
    pub vars: SessionVars,
    /// `autocommit`.
    pub autocommit: bool,
    /// How statements are lexed (from `sql_mode`).
    pub lex_mode: LexMode,
    /// How statements decode (from `character_set_client`).
    pub decoding: Decoding,
    /// `LAST_INSERT_ID()`.
    pub last_insert_id: u64,
    /// `ROW_COUNT()`.
    pub row_count: i64,
    /// `FOUND_ROWS()`.
    pub found_rows: u64,
    /// `@@sql_select_limit` below its default, read when a SET changes it.
    pub select_limit: Option<u64>,
    /// What `SHOW WARNINGS` lists: the previous statement's diagnostics.
    pub warnings: Vec<Diagnostic>,
    /// What the servers give a new session, as the proxy last read it when this session
    /// started (or was reset): kept, as a server session keeps what it started with.
    pub defaults: Option<Arc<SessionDefaults>>,
    /// The session's `wait_timeout` (at least 1 s): from `defaults` (`interactive_timeout`
    /// for an interactive client), then as `SET wait_timeout` reads back.
    pub wait_timeout: Duration,
}

fn literal(s: &[u8]) -> Vec<u8> {
    crate::rewrite::quote_string(s)
}

impl SessionState {
    /// The state a session starts with: the character set of the handshake's collation
    /// (`collation`, a collation id; a MySQL 8 collation MariaDB does not know becomes
    /// utf8mb4_general_ci), autocommit on, and what the servers give a new session
    /// (`defaults`: `sql_mode`; `interactive_timeout` as an `interactive` client's
    /// `wait_timeout`, as MariaDB starts it).
    pub fn new(collation: u8, interactive: bool, defaults: Option<Arc<SessionDefaults>>) -> Self {
        let collation_id = collation;
        let (charset, collation) = match collation_names(collation) {
            // MySQL 8 collations (ids above 247) are unknown to MariaDB 10.x.
            Some((cs, coll)) if collation <= 247 => (cs, coll),
            Some((cs, _)) if cs == "utf8mb4" => (cs, "utf8mb4_general_ci".to_owned()),
            _ => ("utf8mb4".to_owned(), "utf8mb4_general_ci".to_owned()),
        };
        let mut vars = BTreeMap::new();
        for name in &CHARSET_VARS[..3] {
            vars.insert((*name).to_owned(), literal(charset.as_bytes()));
        }
        vars.insert(
            "collation_connection".to_owned(),
            literal(collation.as_bytes()),
        );
        vars.insert("autocommit".to_owned(), b"1".to_vec());
        vars.insert("last_insert_id".to_owned(), b"0".to_vec());
        let mut lex_mode = LexMode::default();
        if let Some(d) = &defaults {
            vars.insert("sql_mode".to_owned(), literal(&d.sql_mode));
            lex_mode = lex_mode.with_sql_mode(&String::from_utf8_lossy(&d.sql_mode));
            if interactive && d.interactive_timeout != d.wait_timeout {
                vars.insert(
                    "wait_timeout".to_owned(),
                    d.interactive_timeout.to_string().into_bytes(),
                );
            }
        }
        // Sessions that start alike share the applied form of their variables.
        let key = u64::from(collation_id)
            | u64::from(interactive) << 8
            | defaults.as_ref().map_or(0, |d| d.generation) << 9;
        let wait_timeout = defaults.as_ref().map_or(28_800, |d| {
            if interactive {
                d.interactive_timeout
            } else {
                d.wait_timeout
            }
        });
        Self {
            database: None,
            vars: SessionVars::handshake_default(key, vars),
            autocommit: true,
            lex_mode,
            decoding: decoding_for(&charset).unwrap_or(Decoding::Utf8),
            last_insert_id: 0,
            row_count: -1,
            found_rows: 0,
            select_limit: None,
            warnings: Vec::new(),
            wait_timeout: Duration::from_secs(wait_timeout.max(1)),
            defaults,
        }
    }

    /// Sets `LAST_INSERT_ID()`; connections the session uses get it too, so
    /// `@@last_insert_id` and `@@identity` agree with it.
    pub fn set_last_insert_id(&mut self, id: u64) {
        self.last_insert_id = id;
        self.vars
            .insert("last_insert_id".to_owned(), id.to_string().into_bytes());
    }

    /// After an error, `SHOW WARNINGS` lists it.
    pub fn record_error(&mut self, e: &ProxyError) {
        let (code, _, message) = e.to_packet_parts();
        self.warnings = vec![Diagnostic {
            level: b"Error".to_vec(),
            code: code.to_string().into_bytes(),
            message,
        }];
    }

    /// The current database is `logical` (the logical database of the configuration).
    pub fn in_database(&self, logical: &str) -> bool {
        self.database
            .as_deref()
            .is_some_and(|d| d.eq_ignore_ascii_case(logical))
    }

    /// The status flags of the session's `sql_mode` (`NO_BACKSLASH_ESCAPES`,
    /// `ANSI_QUOTES`), as the lexer reads statements under it.
    pub fn sql_mode_flags(&self) -> u16 {
        let mut flags = 0;
        if self.lex_mode.no_backslash_escapes {
            flags |= status::NO_BACKSLASH_ESCAPES;
        }
        if self.lex_mode.ansi_quotes {
            flags |= status::ANSI_QUOTES;
        }
        flags
    }

    /// The session's `tx_read_only` (`SET SESSION TRANSACTION READ ONLY`).
    pub fn read_only(&self) -> bool {
        self.vars.transaction_read_only()
    }

    /// How long the client may stay silent between commands before the session ends, as
    /// MariaDB decides it (`THD::get_net_wait_timeout`): in a transaction
    /// (`in_transaction`), `idle_write_transaction_timeout` once it `wrote` or
    /// `idle_readonly_transaction_timeout` until then, else `idle_transaction_timeout`,
    /// whichever is set (above 0); otherwise `wait_timeout`, which an interactive
    /// client's session starts with at `interactive_timeout`. Session values where the
    /// session set them, the servers' defaults ([`SessionDefaults`]) otherwise.
    pub fn idle_timeout(&self, in_transaction: bool, wrote: bool) -> Duration {
        if !in_transaction {
            return self.wait_timeout;
        }
        let seconds = |name: &str, default: u64| {
            self.vars
                .get(name)
                .and_then(|v| std::str::from_utf8(v).ok()?.parse::<u64>().ok())
                .unwrap_or(default)
        };
        let idle = self
            .defaults
            .as_ref()
            .map_or([0; 3], |d| d.idle_transaction_timeouts);
        let (specific, default) = if wrote {
            ("idle_write_transaction_timeout", idle[2])
        } else {
            ("idle_readonly_transaction_timeout", idle[1])
        };
        [
            seconds(specific, default),
            seconds("idle_transaction_timeout", idle[0]),
        ]
        .into_iter()
        .find(|&limit| limit > 0)
        .map_or(self.wait_timeout, Duration::from_secs)
    }

    /// Refuses names outside quotes with bytes above 0x7F in a single-byte character set.
    pub fn check_name_bytes(&self, sql: &[u8], lexed: &Lexed) -> Result<(), ProxyError> {
        // In a single-byte character set a byte above 0x7F may be a space to the server
        // (0xA0 in latin1 and latin2, not in cp1251): the proxy, reading it as part of a
        // name, would not see the words it separates (`USE\xA0mysql`).
        if self.decoding == Decoding::SingleByte {
            let unquoted = lexed
                .tokens
                .iter()
                .any(|t| t.kind == TokenKind::Word && t.bytes(sql).iter().any(|&b| b > 0x7F));
            if unquoted {
                return Err(ProxyError::unsupported(
                    "a name with bytes above 0x7F outside quotes in a single-byte character set (some of them are spaces to the server): quote the name with backquotes, or use utf8mb4",
                ));
            }
        }
        Ok(())
    }

    /// The shape of a statement the session's memo may hold ([`super::memo`]), if it may
    /// (`logical`: the configuration's logical database).
    pub fn memo_shape(&self, sql: &[u8], lexed: &Lexed, logical: &str) -> Option<Vec<u8>> {
        super::memo::ShapeMemo::<crate::plan::scope::Scope>::eligible(sql, lexed, self.lex_mode)
            .then(|| {
                crate::sql::shape::shape_key(sql, lexed, self.lex_mode, self.in_database(logical))
            })
    }

    /// Collation id and bytes per character of the results the client receives
    /// (`character_set_results`): the proxy's own result columns are described in it.
    pub fn result_charset(&self) -> (u16, u32) {
        let cs = self.vars.get("character_set_results").map(|v| {
            String::from_utf8_lossy(v)
                .trim_matches('\'')
                .to_ascii_lowercase()
        });
        match cs.as_deref() {
            Some("utf8mb4") => (45, 4),
            Some("latin1") => (8, 1),
            Some("ascii") => (11, 1),
            Some("binary") => (63, 1),
            _ => (33, 3),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults(sql_mode: &str) -> Arc<SessionDefaults> {
        Arc::new(SessionDefaults {
            sql_mode: sql_mode.as_bytes().to_vec(),
            wait_timeout: 600,
            interactive_timeout: 30,
            session_track_schema: false,
            idle_transaction_timeouts: [0, 20, 0],
            generation: 1,
        })
    }

    #[test]
    fn a_session_starts_in_its_handshake_character_set_and_the_servers_sql_mode() {
        let state = SessionState::new(8, false, Some(defaults("NO_BACKSLASH_ESCAPES")));
        assert_eq!(state.vars.get("character_set_client").unwrap(), b"'latin1'");
        assert_eq!(
            state.vars.get("collation_connection").unwrap(),
            b"'latin1_swedish_ci'"
        );
        assert_eq!(state.decoding, Decoding::SingleByte);
        assert_eq!(state.sql_mode_flags(), status::NO_BACKSLASH_ESCAPES);
        assert_eq!(state.wait_timeout, Duration::from_secs(600));
        // A MySQL 8 collation (255: utf8mb4_0900_ai_ci) is one MariaDB knows instead.
        let state = SessionState::new(255, false, None);
        assert_eq!(
            state.vars.get("collation_connection").unwrap(),
            b"'utf8mb4_general_ci'"
        );
        assert_eq!(state.sql_mode_flags(), 0);
    }

    #[test]
    fn an_interactive_client_waits_interactive_timeout_and_a_transaction_its_own() {
        let state = SessionState::new(45, true, Some(defaults("")));
        assert_eq!(state.vars.get("wait_timeout").unwrap(), b"30");
        assert_eq!(state.idle_timeout(false, false), Duration::from_secs(30));
        // In a transaction that has not written: idle_readonly_transaction_timeout.
        assert_eq!(state.idle_timeout(true, false), Duration::from_secs(20));
        // Written: idle_write_transaction_timeout is 0, idle_transaction_timeout 0 too.
        assert_eq!(state.idle_timeout(true, true), Duration::from_secs(30));
        let mut state = state;
        state
            .vars
            .insert("idle_transaction_timeout".to_owned(), b"5".to_vec());
        assert_eq!(state.idle_timeout(true, true), Duration::from_secs(5));
    }

    #[test]
    fn last_insert_id_and_errors_are_what_the_session_functions_read() {
        let mut state = SessionState::new(45, false, None);
        state.set_last_insert_id(42);
        assert_eq!(state.last_insert_id, 42);
        assert_eq!(state.vars.get("last_insert_id").unwrap(), b"42");
        state.record_error(&ProxyError::unsupported("no"));
        assert_eq!(state.warnings.len(), 1);
        assert_eq!(state.warnings[0].code, b"1235");
        state
            .vars
            .insert("character_set_results".to_owned(), b"'latin1'".to_vec());
        assert_eq!(state.result_charset(), (8, 1));
        state.database = Some("ORDERS".into());
        assert!(state.in_database("orders"));
    }
}
