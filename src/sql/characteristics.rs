//! Transaction characteristics as `SET TRANSACTION` and `START TRANSACTION` give them: read
//! and checked by the proxy, which keeps `SET TRANSACTION` (next transaction only) and
//! `BEGIN` to itself until a statement needs a backend (`engine::characteristics`). A
//! text MariaDB would refuse is refused when the client sends it, with 1064 as MariaDB
//! does, never replayed later on a pooled connection.
//!
//! Grammar (MariaDB 10.11):
//! - `SET TRANSACTION characteristic [, characteristic]`: at most one `ISOLATION LEVEL
//!   {READ UNCOMMITTED | READ COMMITTED | REPEATABLE READ | SERIALIZABLE}` and at most one
//!   `READ ONLY` / `READ WRITE`.
//! - `START TRANSACTION [property [, property] ...]`: `WITH CONSISTENT SNAPSHOT`, `READ
//!   ONLY`, `READ WRITE`, repeated at will, but not both `READ ONLY` and `READ WRITE`.
//!
//! Several `SET TRANSACTION` statements before one transaction add up: each sets the
//! characteristics it names ([`Characteristics::then`]).

use super::lexer::Token;

/// An isolation level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// `READ UNCOMMITTED`.
    ReadUncommitted,
    /// `READ COMMITTED`.
    ReadCommitted,
    /// `REPEATABLE READ`.
    RepeatableRead,
    /// `SERIALIZABLE`.
    Serializable,
}

impl Isolation {
    fn sql(self) -> &'static str {
        match self {
            Isolation::ReadUncommitted => "READ UNCOMMITTED",
            Isolation::ReadCommitted => "READ COMMITTED",
            Isolation::RepeatableRead => "REPEATABLE READ",
            Isolation::Serializable => "SERIALIZABLE",
        }
    }
}

/// The characteristics `SET TRANSACTION` gives the next transaction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Characteristics {
    /// `ISOLATION LEVEL ...`, when named.
    pub isolation: Option<Isolation>,
    /// `READ ONLY` (`true`) or `READ WRITE` (`false`), when named.
    pub read_only: Option<bool>,
}

impl Characteristics {
    /// These characteristics followed by a later `SET TRANSACTION` (`later`): what it names
    /// replaces, what it does not name stays.
    pub fn then(self, later: Characteristics) -> Characteristics {
        Characteristics {
            isolation: later.isolation.or(self.isolation),
            read_only: later.read_only.or(self.read_only),
        }
    }

    /// One `SET TRANSACTION` statement giving them all.
    pub fn sql(&self) -> Vec<u8> {
        let mut parts = Vec::new();
        if let Some(level) = self.isolation {
            parts.push(format!("ISOLATION LEVEL {}", level.sql()));
        }
        if let Some(read_only) = self.read_only {
            parts.push(if read_only { "READ ONLY" } else { "READ WRITE" }.to_owned());
        }
        format!("SET TRANSACTION {}", parts.join(", ")).into_bytes()
    }
}

/// Reads the characteristic list of `SET TRANSACTION` (`tokens`: those after the word
/// `TRANSACTION`; executable-comment markers are skipped). `Err` holds what is wrong, for a
/// 1064.
pub fn parse_set_transaction(sql: &[u8], tokens: &[Token]) -> Result<Characteristics, String> {
    let tokens = &without_markers(tokens);
    let mut out = Characteristics::default();
    let mut i = 0;
    loop {
        let word = |k: usize, w: &str| tokens.get(k).is_some_and(|t| t.is_word(sql, w));
        if word(i, "isolation") && word(i + 1, "level") {
            let (level, used) = if word(i + 2, "read") && word(i + 3, "uncommitted") {
                (Isolation::ReadUncommitted, 4)
            } else if word(i + 2, "read") && word(i + 3, "committed") {
                (Isolation::ReadCommitted, 4)
            } else if word(i + 2, "repeatable") && word(i + 3, "read") {
                (Isolation::RepeatableRead, 4)
            } else if word(i + 2, "serializable") {
                (Isolation::Serializable, 3)
            } else {
                return Err("an isolation level is READ UNCOMMITTED, READ COMMITTED, REPEATABLE READ or SERIALIZABLE".into());
            };
            if out.isolation.replace(level).is_some() {
                return Err("the isolation level is given twice".into());
            }
            i += used;
        } else if word(i, "read") && (word(i + 1, "only") || word(i + 1, "write")) {
            if out.read_only.replace(word(i + 1, "only")).is_some() {
                return Err("the access mode is given twice".into());
            }
            i += 2;
        } else {
            return Err(
                "SET TRANSACTION takes ISOLATION LEVEL ..., READ ONLY or READ WRITE".into(),
            );
        }
        match tokens.get(i) {
            None => return Ok(out),
            Some(t) if t.is_punct(sql, ",") => i += 1,
            Some(_) => return Err("characteristics are separated by commas".into()),
        }
    }
}

/// Checks `BEGIN [WORK]` or `START TRANSACTION [property [, property] ...]` (`tokens`: the
/// whole statement; executable-comment markers are skipped) and gives its access mode:
/// `Some(true)` for `READ ONLY`, `Some(false)` for `READ WRITE`, `None` when it names
/// neither (the session's or the next transaction's mode applies). `Err` holds what is
/// wrong, for a 1064.
pub fn check_begin(sql: &[u8], tokens: &[Token]) -> Result<Option<bool>, String> {
    let tokens = &without_markers(tokens);
    let word = |k: usize, w: &str| tokens.get(k).is_some_and(|t| t.is_word(sql, w));
    if word(0, "begin") {
        return match tokens.len() {
            1 => Ok(None),
            2 if word(1, "work") => Ok(None),
            _ => Err("BEGIN takes no characteristics (START TRANSACTION does)".into()),
        };
    }
    let mut i = 2;
    let mut read_only = None;
    if tokens.len() == i {
        return Ok(read_only);
    }
    loop {
        if word(i, "with") && word(i + 1, "consistent") && word(i + 2, "snapshot") {
            i += 3;
        } else if word(i, "read") && (word(i + 1, "only") || word(i + 1, "write")) {
            let only = word(i + 1, "only");
            if read_only.is_some_and(|r| r != only) {
                return Err("a transaction is READ ONLY or READ WRITE, not both".into());
            }
            read_only = Some(only);
            i += 2;
        } else {
            return Err(
                "START TRANSACTION takes WITH CONSISTENT SNAPSHOT, READ ONLY or READ WRITE".into(),
            );
        }
        match tokens.get(i) {
            None => return Ok(read_only),
            Some(t) if t.is_punct(sql, ",") => i += 1,
            Some(_) => return Err("properties are separated by commas".into()),
        }
    }
}

/// The tokens of `/*! ... */` without its markers: what the server reads.
fn without_markers(tokens: &[Token]) -> Vec<Token> {
    tokens
        .iter()
        .filter(|t| !t.is_exec_marker())
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::lexer::{LexMode, lex};

    fn set(text: &str) -> Result<Characteristics, String> {
        let lexed = lex(text.as_bytes(), LexMode::default());
        parse_set_transaction(text.as_bytes(), &lexed.tokens)
    }

    fn begin(text: &str) -> Result<(), String> {
        let lexed = lex(text.as_bytes(), LexMode::default());
        check_begin(text.as_bytes(), &lexed.tokens).map(|_| ())
    }

    #[test]
    fn begin_gives_its_access_mode() {
        let access = |text: &str| {
            let lexed = lex(text.as_bytes(), LexMode::default());
            check_begin(text.as_bytes(), &lexed.tokens)
        };
        assert_eq!(access("BEGIN"), Ok(None));
        assert_eq!(access("START TRANSACTION"), Ok(None));
        assert_eq!(access("START TRANSACTION READ ONLY"), Ok(Some(true)));
        assert_eq!(
            access("start transaction with consistent snapshot, read write"),
            Ok(Some(false))
        );
        assert_eq!(access("/*!START TRANSACTION READ ONLY */"), Ok(Some(true)));
    }

    #[test]
    fn set_transaction_lists_are_read_as_mariadb_reads_them() {
        assert_eq!(
            set("READ ONLY"),
            Ok(Characteristics {
                isolation: None,
                read_only: Some(true)
            })
        );
        assert_eq!(
            set("read write , isolation level read committed"),
            Ok(Characteristics {
                isolation: Some(Isolation::ReadCommitted),
                read_only: Some(false)
            })
        );
        assert_eq!(
            set("ISOLATION LEVEL SERIALIZABLE").map(|c| c.isolation),
            Ok(Some(Isolation::Serializable))
        );
        for bad in [
            "",
            "ISOLATION LEVEL FOO",
            "READ ONLY, READ WRITE",
            "READ ONLY, READ ONLY",
            "READ ONLY garbage",
            "ISOLATION LEVEL SERIALIZABLE READ ONLY",
            "ISOLATION LEVEL READ COMMITTED, ISOLATION LEVEL SERIALIZABLE",
            "READ ONLY,",
        ] {
            assert!(set(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn later_set_transaction_statements_add_to_earlier_ones() {
        let ro = set("READ ONLY").unwrap();
        let ser = set("ISOLATION LEVEL SERIALIZABLE").unwrap();
        let both = ro.then(ser);
        assert_eq!(
            both.sql(),
            b"SET TRANSACTION ISOLATION LEVEL SERIALIZABLE, READ ONLY"
        );
        assert_eq!(ser.then(ro), both);
        assert_eq!(
            both.then(set("READ WRITE").unwrap()).sql(),
            b"SET TRANSACTION ISOLATION LEVEL SERIALIZABLE, READ WRITE"
        );
    }

    #[test]
    fn begin_texts_are_checked_as_mariadb_checks_them() {
        for good in [
            "BEGIN",
            "begin work",
            "START TRANSACTION",
            "START TRANSACTION READ ONLY",
            "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY",
            "START TRANSACTION READ ONLY, READ ONLY",
            "START TRANSACTION READ WRITE, WITH CONSISTENT SNAPSHOT",
        ] {
            assert_eq!(begin(good), Ok(()), "{good}");
        }
        for bad in [
            "BEGIN foo",
            "START TRANSACTION READ WRITE, READ ONLY",
            "START TRANSACTION READ ONLY READ WRITE",
            "START TRANSACTION ISOLATION LEVEL SERIALIZABLE",
            "START TRANSACTION,",
            "START TRANSACTION WITH SNAPSHOT",
        ] {
            assert!(begin(bad).is_err(), "{bad}");
        }
    }
}
