//! Bringing a backend connection to a client session's variables: only what differs from
//! what the proxy applied to it before ([`super::vars::AppliedState`]) is set.

use super::conn::BackendConn;
use super::vars::SessionVars;
use crate::error::ProxyError;
use crate::sql::charset::CHARSET_VARS;
use crate::sql::quote_ident;

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
