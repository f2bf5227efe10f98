//! `LOCK TABLES` and `UNLOCK TABLES`, read from tokens: a lock names tables the proxy maps
//! to every shard's physical table, so it cannot pass through as written.

use crate::sql::lexer::{LexMode, Token, TokenKind, ident_text};

/// One table of `LOCK TABLES`: `[db.]table [[AS] alias] lock_type`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockItem {
    /// The `db.` qualifier.
    pub database: Option<String>,
    /// The table's name.
    pub table: String,
    /// The alias, when one is given.
    pub alias: Option<String>,
    /// The lock type as written, words joined by one space: `READ`, `READ LOCAL`, `WRITE`,
    /// `LOW_PRIORITY WRITE`, `WRITE CONCURRENT`.
    pub lock_type: String,
}

/// The lock of a `LOCK TABLES` statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lock {
    /// The tables, in the order written.
    pub items: Vec<LockItem>,
    /// `WAIT n` or `NOWAIT` after the list (MariaDB), as written.
    pub wait: Option<String>,
}

/// A table-lock statement, as [`classify`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockStatement {
    /// `LOCK TABLE[S] ...` in a form MySQL accepts.
    Lock(Lock),
    /// `UNLOCK TABLE[S]`.
    Unlock,
    /// `LOCK TABLE[S]` in a form MySQL does not accept either: the server gives its own
    /// syntax error.
    Malformed,
}

/// `LOCK TABLE[S] ...` or `UNLOCK TABLE[S]`, or `None` for anything else. `tokens` are the statement's without executable-comment
/// delimiters (`READ /*!32311 LOCAL */` reads as `READ LOCAL`).
pub fn classify(sql: &[u8], tokens: &[Token], mode: LexMode) -> Option<LockStatement> {
    let word = |i: usize, w: &str| tokens.get(i).is_some_and(|t| t.is_word(sql, w));
    let tables = word(1, "tables") || word(1, "table");
    if word(0, "unlock") && tables && tokens.len() == 2 {
        return Some(LockStatement::Unlock);
    }
    if !word(0, "lock") || !tables {
        return None;
    }
    Some(match lock(sql, &tokens[2..], mode) {
        Some(lock) => LockStatement::Lock(lock),
        None => LockStatement::Malformed,
    })
}

fn lock(sql: &[u8], tokens: &[Token], mode: LexMode) -> Option<Lock> {
    let mut items = Vec::new();
    let mut wait = None;
    for part in tokens.split(|t| t.is_punct(sql, ",")) {
        let mut part = part;
        // `WAIT n` / `NOWAIT` close the statement.
        if let Some(at) = part
            .iter()
            .position(|t| t.is_word(sql, "wait") || t.is_word(sql, "nowait"))
        {
            let text: Vec<String> = part[at..]
                .iter()
                .map(|t| String::from_utf8_lossy(t.bytes(sql)).into_owned())
                .collect();
            wait = Some(text.join(" "));
            part = &part[..at];
        }
        items.push(item(sql, part, mode)?);
    }
    (!items.is_empty()).then_some(Lock { items, wait })
}

fn item(sql: &[u8], part: &[Token], mode: LexMode) -> Option<LockItem> {
    let is_name = |t: &Token| matches!(t.kind, TokenKind::Word | TokenKind::QuotedIdent);
    let first = part.first().filter(|t| is_name(t))?;
    let (database, table, mut rest) = match part {
        [db, dot, t, rest @ ..] if dot.is_punct(sql, ".") && is_name(t) => (
            Some(ident_text(sql, db, mode)),
            ident_text(sql, t, mode),
            rest,
        ),
        [_, rest @ ..] => (None, ident_text(sql, first, mode), rest),
        [] => return None,
    };
    let lock_word = |t: &Token| {
        ["read", "write", "low_priority"]
            .iter()
            .any(|w| t.is_word(sql, w))
    };
    let mut alias = None;
    if rest.first().is_some_and(|t| t.is_word(sql, "as")) {
        rest = &rest[1..];
        alias = Some(ident_text(sql, rest.first().filter(|t| is_name(t))?, mode));
        rest = &rest[1..];
    } else if let Some(t) = rest.first().filter(|t| is_name(t) && !lock_word(t)) {
        alias = Some(ident_text(sql, t, mode));
        rest = &rest[1..];
    }
    if rest.is_empty() || !rest.iter().all(|t| t.kind == TokenKind::Word) {
        return None;
    }
    let words: Vec<String> = rest
        .iter()
        .map(|t| String::from_utf8_lossy(t.bytes(sql)).to_ascii_uppercase())
        .collect();
    let lock_type = words.join(" ");
    let known = [
        "READ",
        "READ LOCAL",
        "WRITE",
        "LOW_PRIORITY WRITE",
        "WRITE CONCURRENT",
    ];
    known.contains(&lock_type.as_str()).then_some(LockItem {
        database,
        table,
        alias,
        lock_type,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::lexer::lex;

    fn parse(sql: &str) -> Option<LockStatement> {
        let lexed = lex(sql.as_bytes(), LexMode::default());
        let tokens: Vec<Token> = lexed
            .tokens
            .into_iter()
            .filter(|t| !t.is_exec_marker())
            .collect();
        classify(sql.as_bytes(), &tokens, LexMode::default())
    }

    fn items(sql: &str) -> Vec<(Option<String>, String, Option<String>, String)> {
        match parse(sql) {
            Some(LockStatement::Lock(lock)) => lock
                .items
                .into_iter()
                .map(|i| (i.database, i.table, i.alias, i.lock_type))
                .collect(),
            other => panic!("{sql}: {other:?}"),
        }
    }

    #[test]
    fn the_dump_s_lock_reads_with_its_executable_comment() {
        let got = items(
            "LOCK TABLES `t_order` READ /*!32311 LOCAL */,`t_order_item` READ /*!32311 LOCAL */",
        );
        assert_eq!(
            got,
            vec![
                (None, "t_order".into(), None, "READ LOCAL".into()),
                (None, "t_order_item".into(), None, "READ LOCAL".into()),
            ]
        );
    }

    #[test]
    fn qualifiers_aliases_and_lock_types() {
        let got = items("lock table orders.t_order AS o write, t_merchant m low_priority write");
        assert_eq!(
            got[0],
            (
                Some("orders".into()),
                "t_order".into(),
                Some("o".into()),
                "WRITE".into()
            )
        );
        assert_eq!(
            got[1],
            (
                None,
                "t_merchant".into(),
                Some("m".into()),
                "LOW_PRIORITY WRITE".into()
            )
        );
        match parse("LOCK TABLES t READ, u WRITE WAIT 5") {
            Some(LockStatement::Lock(l)) => assert_eq!(l.wait.as_deref(), Some("WAIT 5")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unlock_and_malformed_locks() {
        assert_eq!(parse("UNLOCK TABLES"), Some(LockStatement::Unlock));
        assert_eq!(parse("unlock table"), Some(LockStatement::Unlock));
        assert_eq!(parse("LOCK TABLES t"), Some(LockStatement::Malformed));
        assert_eq!(
            parse("LOCK TABLES t READ LOUDLY"),
            Some(LockStatement::Malformed)
        );
        assert_eq!(parse("SELECT 1"), None);
    }
}
