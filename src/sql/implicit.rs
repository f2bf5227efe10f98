//! Statements that commit the open transaction before they run (MariaDB 10.11, "SQL
//! statements that cause an implicit commit"): the engine commits a transaction across
//! datasources atomically first (issue 27), where the server would commit each datasource's
//! part alone.

use super::lexer::Token;

/// Whether the statement (its `tokens`) makes MariaDB commit the open transaction first:
/// `ALTER`, `CREATE` and `DROP` (but `CREATE`/`DROP TEMPORARY TABLE`), `RENAME`,
/// `TRUNCATE`, `ANALYZE`/`CHECK`/`OPTIMIZE`/`REPAIR TABLE`, `CACHE INDEX`, `LOAD INDEX`,
/// `FLUSH`, `RESET`, `GRANT`, `REVOKE`, `INSTALL`, `UNINSTALL`, `CHANGE MASTER`,
/// `START`/`STOP SLAVE`/`REPLICA`. Statements the engine ends a transaction for itself
/// (`BEGIN`, `LOCK TABLES`, `SET autocommit`) are not listed.
pub fn commits_implicitly(sql: &[u8], tokens: &[Token]) -> bool {
    let word = |i: usize| {
        tokens
            .get(i)
            .is_some_and(|t| t.kind == super::lexer::TokenKind::Word)
    };
    let is = |i: usize, w: &str| tokens.get(i).is_some_and(|t| t.is_word(sql, w));
    if !word(0) {
        return false;
    }
    let table_after = |i: usize| {
        // ANALYZE [LOCAL | NO_WRITE_TO_BINLOG] TABLE ...
        let i = if is(i, "local") || is(i, "no_write_to_binlog") {
            i + 1
        } else {
            i
        };
        is(i, "table") || is(i, "tables")
    };
    if is(0, "create") || is(0, "drop") {
        return !(is(1, "temporary") || (is(1, "or") && is(3, "temporary")));
    }
    if [
        "alter",
        "rename",
        "truncate",
        "flush",
        "reset",
        "grant",
        "revoke",
        "install",
        "uninstall",
    ]
    .iter()
    .any(|w| is(0, w))
    {
        return true;
    }
    if ["analyze", "check", "optimize", "repair"]
        .iter()
        .any(|w| is(0, w))
    {
        return table_after(1);
    }
    (is(0, "cache") || is(0, "load")) && is(1, "index")
        || is(0, "change") && is(1, "master")
        || (is(0, "start") || is(0, "stop")) && (is(1, "slave") || is(1, "replica"))
}

#[cfg(test)]
mod tests {
    use super::commits_implicitly;
    use crate::sql::lexer::{LexMode, lex};

    fn commits(sql: &str) -> bool {
        commits_implicitly(
            sql.as_bytes(),
            &lex(sql.as_bytes(), LexMode::default()).tokens,
        )
    }

    #[test]
    fn statements_that_commit_first_are_told_apart() {
        for sql in [
            "ALTER TABLE t_merchant ENGINE=InnoDB",
            "alter table t force",
            "CREATE TABLE x (a INT) PARTITION BY HASH(a)",
            "CREATE SEQUENCE s",
            "ALTER SEQUENCE s RESTART",
            "CREATE OR REPLACE VIEW v AS SELECT 1",
            "DROP TABLE x",
            "RENAME TABLE a TO b",
            "TRUNCATE t",
            "OPTIMIZE TABLE t",
            "ANALYZE NO_WRITE_TO_BINLOG TABLE t",
            "CHECK TABLE t",
            "REPAIR TABLE t",
            "CACHE INDEX t IN k",
            "LOAD INDEX INTO CACHE t",
            "FLUSH TABLES",
            "GRANT SELECT ON *.* TO u",
        ] {
            assert!(commits(sql), "{sql}");
        }
        for sql in [
            "CREATE TEMPORARY TABLE x (a INT)",
            "DROP TEMPORARY TABLE x",
            "CREATE OR REPLACE TEMPORARY TABLE x (a INT)",
            "ANALYZE SELECT 1",
            "SELECT 1",
            "UPDATE t SET a = 1",
            "CHECKSUM TABLE t",
            "LOAD DATA LOCAL INFILE 'x' INTO TABLE t",
            "/* c */ SELECT 1",
        ] {
            assert!(!commits(sql), "{sql}");
        }
    }
}
