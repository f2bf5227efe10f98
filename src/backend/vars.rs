//! Bringing a backend connection to a client session's variables, setting only what
//! differs from what the proxy applied to it before ([`AppliedState`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Session state the proxy applied to a connection, compared with what a client wants
/// before each use ("only what differs").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppliedState {
    /// Session variables by lower-case name, with their values as SQL literals.
    pub vars: SessionVars,
    /// The selected database.
    pub database: Option<String>,
}

/// Identities below this are the handshake defaults of [`SessionVars::handshake_default`]
/// (their keys); fresh identities count up from it.
const FIRST_FRESH_ID: u64 = 1 << 62;

static NEXT_ID: AtomicU64 = AtomicU64::new(FIRST_FRESH_ID);

fn fresh_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// Session variables by lower-case name, with their values as SQL literals (user variables
/// under `@name`): what a client session wants, or what the proxy applied to a backend
/// connection.
///
/// Each map carries an identity, so the check made before every use of a pooled connection
/// ("does it carry this session's variables?") is one integer comparison in the usual
/// case instead of a walk of both maps. The rule that keeps it exact: **two maps with the
/// same identity have the same contents.** An identity is given out once, to a new or
/// changed map ([`SessionVars::insert`], [`SessionVars::clear`] take a fresh one); the only
/// shared ones are the handshake defaults, whose contents follow from the collation id
/// alone; and a map takes another's identity only after comparing equal to it
/// ([`SessionVars::matches`]). Reads go through `Deref` to the map; there is no mutable
/// access that could change the contents and keep the identity.
#[derive(Debug, Clone)]
pub struct SessionVars {
    map: BTreeMap<String, Vec<u8>>,
    id: u64,
}

impl Default for SessionVars {
    fn default() -> Self {
        Self::from(BTreeMap::new())
    }
}

impl From<BTreeMap<String, Vec<u8>>> for SessionVars {
    fn from(map: BTreeMap<String, Vec<u8>>) -> Self {
        Self {
            map,
            id: fresh_id(),
        }
    }
}

impl PartialEq for SessionVars {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id || self.map == other.map
    }
}

impl Eq for SessionVars {}

impl std::ops::Deref for SessionVars {
    type Target = BTreeMap<String, Vec<u8>>;

    fn deref(&self) -> &Self::Target {
        &self.map
    }
}

impl SessionVars {
    /// The variables a session starts with after a handshake: `map` must be built from
    /// `key` alone (below 2^62: the collation id, the generation of the servers' session
    /// defaults, whether the client is interactive), so every session with that key starts
    /// with the same identity and a pooled connection one of them left matches the next
    /// without a comparison.
    pub fn handshake_default(key: u64, map: BTreeMap<String, Vec<u8>>) -> Self {
        debug_assert!(key < FIRST_FRESH_ID);
        Self { map, id: key }
    }

    /// The session's `tx_read_only` / `transaction_read_only` is on (`SET SESSION
    /// TRANSACTION READ ONLY`).
    pub fn transaction_read_only(&self) -> bool {
        ["tx_read_only", "transaction_read_only"]
            .iter()
            .any(|v| self.map.get(*v).is_some_and(|v| v == b"1"))
    }

    /// The identity: equal identities mean equal contents (see the type's rule).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Sets one variable; a changed value gives the map a fresh identity.
    pub fn insert(&mut self, name: String, value: Vec<u8>) {
        if self.map.get(&name) != Some(&value) {
            self.map.insert(name, value);
            self.id = fresh_id();
        }
    }

    /// Forgets every variable (the server reset them).
    pub fn clear(&mut self) {
        self.map.clear();
        self.id = fresh_id();
    }

    /// Whether this map has the contents of `wanted`: by identity, or else by comparing
    /// both maps, after which this map takes `wanted`'s identity so the next check is
    /// by identity.
    pub fn matches(&mut self, wanted: &SessionVars) -> bool {
        if self.id == wanted.id {
            return true;
        }
        if self.map == wanted.map {
            self.id = wanted.id;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn sessions_of_one_collation_start_with_one_identity_and_others_apart() {
        let defaults = map(&[("autocommit", "1")]);
        let a = SessionVars::handshake_default(45, defaults.clone());
        let b = SessionVars::handshake_default(45, defaults.clone());
        let c = SessionVars::handshake_default(33, map(&[("autocommit", "0")]));
        assert_eq!(a.id, b.id);
        assert_ne!(a.id, c.id);
        // Maps made any other way take identities no default has.
        assert!(SessionVars::from(defaults).id >= FIRST_FRESH_ID);
    }

    #[test]
    fn a_changed_value_takes_a_fresh_identity_and_an_unchanged_one_keeps_it() {
        let mut vars = SessionVars::handshake_default(45, map(&[("autocommit", "1")]));
        let before = vars.id;
        vars.insert("autocommit".into(), b"1".to_vec());
        assert_eq!(vars.id, before);
        vars.insert("autocommit".into(), b"0".to_vec());
        assert_ne!(vars.id, before);
        let changed = vars.id;
        vars.clear();
        assert_ne!(vars.id, changed);
        assert!(vars.is_empty());
    }

    #[test]
    fn a_connection_takes_the_identity_of_what_it_matched_and_loses_it_when_it_changes() {
        let wanted = SessionVars::handshake_default(45, map(&[("autocommit", "1")]));
        let mut conn = SessionVars::from(map(&[("autocommit", "1")]));
        assert_ne!(conn.id, wanted.id);
        assert!(conn.matches(&wanted), "equal contents match by comparison");
        assert_eq!(conn.id, wanted.id, "and the identity is taken");
        conn.insert("@x".into(), b"1".to_vec());
        assert!(
            !conn.matches(&wanted),
            "a changed connection no longer matches"
        );
        let mut other = SessionVars::from(map(&[("autocommit", "0")]));
        assert!(!other.matches(&wanted));
        assert_ne!(
            other.id, wanted.id,
            "no identity taken without equal contents"
        );
    }
}
