//! Bringing a backend connection to a client session's variables, setting only what
//! differs from what the proxy applied to it before ([`super::AppliedState`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use super::conn::BackendConn;
use crate::error::ProxyError;
use crate::sql::quote_ident;

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

/// Whether the variable `name` holds the name of a character set or a collation
/// (`character_set_client`, `collation_connection`, ...).
pub fn names_a_charset(name: &str) -> bool {
    name.starts_with("character_set") || name.starts_with("collation")
}

/// The character set variables, set together with `SET NAMES` when they agree.
pub const CHARSET_VARS: [&str; 4] = [
    "character_set_client",
    "character_set_connection",
    "character_set_results",
    "collation_connection",
];

impl BackendConn {
    /// Whether the connection carries variables `wanted` does not name (set by another
    /// session): it must be reset before it serves this one.
    pub fn has_foreign_vars(&mut self, wanted: &SessionVars) -> bool {
        !self.has_vars(wanted) && self.state.vars.keys().any(|k| !wanted.contains_key(k))
    }

    /// Whether this connection has exactly the variables `wanted`, with the same values
    /// (the common case: the same identity, [`SessionVars::matches`]).
    pub fn has_vars(&mut self, wanted: &SessionVars) -> bool {
        self.state.vars.matches(wanted)
    }

    /// Sets on this connection the variables of `wanted` (lower-case name -> SQL literal;
    /// user variables under `@name`) whose values differ here: character sets first, then
    /// system variables, then user variables (so their literals are read in the session's
    /// character set). A failure marks the connection broken (its state is unknown).
    pub async fn apply_vars(&mut self, wanted: &SessionVars) -> Result<(), ProxyError> {
        if self.has_vars(wanted) {
            return Ok(());
        }
        self.apply_names(wanted).await?;
        let diff: Vec<(&String, &Vec<u8>)> = wanted
            .iter()
            .filter(|(k, v)| self.state.vars.get(*k) != Some(*v))
            .collect();
        let (user, system): (Vec<_>, Vec<_>) =
            diff.into_iter().partition(|(k, _)| k.starts_with('@'));
        for group in [system, user] {
            if group.is_empty() {
                continue;
            }
            let mut sql = b"SET ".to_vec();
            for (i, (name, value)) in group.iter().enumerate() {
                if i > 0 {
                    sql.extend_from_slice(b", ");
                }
                match name.strip_prefix('@') {
                    Some(user) => {
                        sql.push(b'@');
                        sql.extend_from_slice(quote_ident(user).as_bytes());
                    }
                    None => {
                        sql.extend_from_slice(b"@@session.");
                        sql.extend_from_slice(name.as_bytes());
                    }
                }
                sql.extend_from_slice(b" = ");
                sql.extend_from_slice(value);
            }
            if let Err(e) = self.execute(&sql).await {
                self.mark_broken();
                return Err(e);
            }
            for (name, value) in group {
                self.state.vars.insert(name.clone(), value.clone());
            }
        }
        // Equal now: take the session's identity, so the next check needs no comparison.
        self.has_vars(wanted);
        Ok(())
    }

    /// The character set variables, with `SET NAMES cs COLLATE c` when client, connection
    /// and results agree: only that form makes MariaDB describe result columns in the
    /// client's collation (setting collation_connection alone leaves the charset's
    /// default). Different sets per direction are left to [`BackendConn::apply_vars`].
    async fn apply_names(&mut self, wanted: &SessionVars) -> Result<(), ProxyError> {
        let differs = CHARSET_VARS
            .iter()
            .any(|k| wanted.get(*k) != self.state.vars.get(*k));
        if !differs {
            return Ok(());
        }
        let get = |k: &str| wanted.get(k);
        let (Some(cs), Some(coll)) = (get("character_set_client"), get("collation_connection"))
        else {
            return Ok(());
        };
        if get("character_set_connection") != Some(cs) || get("character_set_results") != Some(cs) {
            return Ok(());
        }
        let mut sql = b"SET NAMES ".to_vec();
        sql.extend_from_slice(cs);
        sql.extend_from_slice(b" COLLATE ");
        sql.extend_from_slice(coll);
        if let Err(e) = self.execute(&sql).await {
            self.mark_broken();
            return Err(e);
        }
        for k in CHARSET_VARS {
            if let Some(v) = wanted.get(k) {
                self.state.vars.insert(k.to_owned(), v.clone());
            }
        }
        Ok(())
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
