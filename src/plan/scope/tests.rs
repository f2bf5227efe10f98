//! The scope check on statement text: what it refuses, with which code, and what it lets pass.

use super::*;
use crate::sql::lexer::lex;

fn scope() -> Scope {
    Scope {
        user: "app".into(),
        host: "127.0.0.1".into(),
        databases: vec!["orders".into(), "reports".into()],
        elsewhere: vec!["mysql".into(), "order_meta".into(), "order_shards".into()],
        process: false,
    }
}

fn check(sql: &str) -> Result<(), (u16, String)> {
    check_in(sql, None)
}

/// [`check`] with `current` as the session's database.
fn check_in(sql: &str, current: Option<&str>) -> Result<(), (u16, String)> {
    let lexed = lex(sql.as_bytes(), LexMode::default());
    check_statement(
        &scope(),
        sql.as_bytes(),
        &lexed.tokens,
        LexMode::default(),
        current,
    )
    .map_err(|e| {
        let (code, _, message) = e.to_packet_parts();
        (code, String::from_utf8_lossy(&message).into_owned())
    })
}

fn refused(sql: &str) -> u16 {
    match check(sql) {
        Err((code, _)) => code,
        Ok(()) => panic!("not refused: {sql}"),
    }
}

#[test]
fn names_inside_the_scope_pass() {
    for sql in [
        "SELECT o.order_id, o.amount FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id WHERE o.status = 1",
        "SELECT * FROM orders.t_order, reports.daily WHERE daily.d = t_order.d",
        "SELECT COUNT(*) FROM information_schema.TABLES t WHERE t.table_schema = 'x'",
        "UPDATE t_order o SET o.status = 2 WHERE o.order_id = 5",
        "SELECT t.* FROM t_order t",
        "SELECT `reports`.`daily`.`d` FROM reports.daily",
        "SELECT 1.5, .5, 1e3, @@session.sql_mode, @x",
        "SHOW COLUMNS FROM t_order FROM orders",
        "SHOW TABLES FROM reports",
        "SELECT * FROM (SELECT a.x FROM t a) d, t_order o WHERE d.x = o.y",
        "INSERT INTO reports.daily SELECT o.d FROM t_order o",
        "INSERT INTO t_order (order_id) VALUES (1) ON DUPLICATE KEY UPDATE t_order.x = 1, t_order.y = 2",
        "SELECT * FROM t_order o FORCE INDEX (a, b) WHERE o.x IN (o.y, o.z)",
        "SELECT o.x FROM t_order o FOR UPDATE",
    ] {
        assert_eq!(check(sql), Ok(()), "{sql}");
    }
}

#[test]
fn tables_outside_the_scope_are_refused_wherever_they_stand() {
    for sql in [
        "SELECT * FROM orders_ref.t_order",
        "select * from `orders_ref`.`t_order`",
        "SELECT * FROM t_order o JOIN orders_ref.t_order r ON o.order_id = r.order_id",
        "SELECT * FROM t_order WHERE order_id IN (SELECT order_id FROM orders_ref.t_order)",
        "SELECT * FROM (SELECT * FROM mysql.user) d",
        "WITH c AS (SELECT * FROM order_meta.t_order_index) SELECT * FROM c",
        "SELECT * FROM t_order AS orders_ref, orders_ref.t_order",
        "SELECT * FROM (SELECT 1) d, orders_ref.t_order",
        "INSERT INTO t_order SELECT * FROM orders_ref.t_order",
        "INSERT INTO orders_ref.t_order VALUES (1)",
        "UPDATE t_order o, orders_ref.t_order r SET o.x = r.x",
        "DELETE r FROM orders_ref.t_order r",
        "DELETE FROM orders_ref.t_order",
        "SELECT orders_ref.t_order.order_id FROM t_order",
        // Index hints' FOR ORDER BY / FOR GROUP BY stand inside the table list.
        "SELECT * FROM t_order USE INDEX FOR ORDER BY (PRIMARY), mysql.user LOCK IN SHARE MODE",
        "SELECT * FROM t_order IGNORE KEY FOR GROUP BY (PRIMARY), orders_ref.t_order",
        "SELECT * FROM t_order FORCE INDEX FOR JOIN (PRIMARY), order_meta.t_order_index",
        "UPDATE t_merchant USE INDEX FOR ORDER BY (PRIMARY), orders_ref.t_order o SET o.status = 1",
        "INSERT INTO t_order SELECT * FROM t_merchant USE INDEX FOR GROUP BY (PRIMARY), orders_ref.t_order",
        // A second attack: parenthesised lists after UPDATE and USING, ODBC braces with
        // any word, `value` as an alias.
        "UPDATE (t_merchant, orders_ref.t_order) SET status = status WHERE 1 = 0",
        "DELETE FROM i USING (t_merchant m, orders_ref.t_order i) WHERE 1 = 0",
        "SELECT * FROM { foo orders_ref.t_order LEFT OUTER JOIN t_merchant ON 1 = 0 }",
        "SELECT * FROM t_merchant value, orders_ref.t_order",
        "SELECT * FROM t_merchant AS value, orders_ref.t_order",
        "UPDATE t_merchant value, orders_ref.t_order i SET i.status = 1 WHERE 1 = 0",
        "LOCK TABLES t_merchant value READ, orders_ref.t_order READ",
        "INSERT INTO t_order SELECT * FROM t_merchant value, orders_ref.t_order",
        "SELECT * FROM t_merchant m JOIN t_order o ON VALUE(m.id) IS NULL, orders_ref.t_order",
        // A third attack: a MERGE table's UNION without `=` in DDL holding a SELECT.
        "CREATE TABLE m (order_id BIGINT) ENGINE=MERGE UNION (orders_ref.t_order) SELECT 1 AS order_id",
        "SELECT COUNT(*), 1e1from orders_ref.t_order LIMIT ROWS EXAMINED 100000",
        "SELECT COUNT(*) /*! /*! FROM orders_ref.t_order -- */ */\n */",
        "SELECT /*!40001 * FROM orders_ref.t_order */",
        "CREATE TABLE x LIKE orders_ref.t_order",
        "DROP TABLE IF EXISTS orders_ref.t_order",
        "RENAME TABLE a TO orders_ref.a",
        "TRUNCATE orders_ref.t_order",
        "LOCK TABLES t_order READ, orders_ref.t_order WRITE",
        "SELECT NEXTVAL(orders_ref.s)",
        "SELECT NEXT VALUE FOR orders_ref.s",
        "SELECT * FROM t_order LOCK IN SHARE MODE UNION SELECT * FROM orders_ref.x",
        "SHOW COLUMNS FROM orders_ref.t_order",
        "DESCRIBE orders_ref.t_order",
        "SELECT * FROM orders_ref . t_order",
        "SELECT * FROM information_schema.ROUTINES",
        "SELECT * FROM t_order a JOIN t_order_item b ON a.order_id = b.order_id, orders_ref.t_order c",
        "SELECT * FROM (t_order o, orders_ref.t_order r)",
        "SELECT * FROM t_order o FORCE INDEX (a), orders_ref.t_order",
        "SELECT * FROM t_order o JOIN (orders_ref.t_order r) ON o.a = r.a",
        "INSERT orders_ref.t_order VALUES (1)",
        "REPLACE LOW_PRIORITY orders_ref.t_order VALUES (1)",
        "ALTER TABLE t RENAME AS orders_ref.t",
        "ALTER TABLE t RENAME orders_ref.t",
        "SHOW CREATE PROCEDURE orders_ref.p",
        "SHOW INDEX IN orders_ref.t",
        "CREATE TABLE t (a INT REFERENCES orders_ref.p (a))",
        "CREATE TABLE m (a INT) ENGINE=MERGE UNION=(orders_ref.t_order)",
        "ALTER TABLE m UNION = (t_merchant, orders_ref.t_order)",
    ] {
        assert_eq!(refused(sql), 1142, "{sql}");
    }
    assert_eq!(
        check("SELECT * FROM orders_ref.t_order").unwrap_err().1,
        "SELECT command denied to user 'app'@'127.0.0.1' for table `orders_ref`.`t_order`"
    );
    assert!(
        check("INSERT INTO orders_ref.t VALUES (1)")
            .unwrap_err()
            .1
            .starts_with("INSERT command denied")
    );
}

#[test]
fn routines_and_databases_outside_the_scope_are_refused() {
    assert_eq!(refused("SELECT orders_ref.f(1)"), 1370);
    assert_eq!(refused("CALL orders_ref.p()"), 1370);
    assert_eq!(refused("CALL orders_ref.p"), 1142);
    assert_eq!(refused("SHOW TABLES FROM orders_ref"), 1044);
    assert_eq!(refused("SHOW TRIGGERS IN mysql"), 1044);
    assert_eq!(refused("SHOW COLUMNS FROM t IN orders_ref"), 1044);
    assert_eq!(refused("SHOW CREATE DATABASE orders_ref"), 1044);
    assert_eq!(refused("SHOW TABLE STATUS FROM `mysql`"), 1044);
}

#[test]
fn information_schema_tables_are_checked_unqualified_too() {
    let check_in = |sql: &str| {
        let lexed = lex(sql.as_bytes(), LexMode::default());
        let is = Some(INFORMATION_SCHEMA);
        check_statement(
            &scope(),
            sql.as_bytes(),
            &lexed.tokens,
            LexMode::default(),
            is,
        )
        .map_err(|e| e.to_packet_parts().0)
    };
    for sql in [
        "SELECT * FROM ROUTINES",
        "SELECT * FROM TABLES t JOIN `VIEWS` v ON t.a = v.b",
        "SELECT * FROM TABLES, INNODB_TRX",
    ] {
        assert_eq!(check_in(sql), Err(1142), "{sql}");
    }
    for sql in [
        "SHOW TABLES LIKE 'PROC%'",
        "SELECT * FROM TABLES WHERE TABLE_SCHEMA = 'orders'",
        "EXPLAIN SELECT * FROM COLUMNS",
        "SELECT 1 FROM DUAL",
        "SELECT * FROM TABLES FOR UPDATE",
    ] {
        assert_eq!(check_in(sql), Ok(()), "{sql}");
    }
}

#[test]
fn every_reading_the_server_may_give_is_checked() {
    let check_text = |sql: &str, mode: LexMode| {
        let lexed = lex(sql.as_bytes(), mode);
        super::check_text(&scope(), sql.as_bytes(), &lexed.tokens, mode, None)
            .map_err(|e| e.to_packet_parts().0)
    };
    let plain = LexMode::default();
    for sql in [
        r#"SET STATEMENT sql_mode = 'ANSI_QUOTES' FOR SELECT * FROM "orders_ref"."t_order""#,
        r"SET STATEMENT sql_mode = 'NO_BACKSLASH_ESCAPES' FOR SELECT 'x' FROM orders_ref.t_order -- '",
        "SELECT 1 /*M!999999 FROM orders_ref.t_order */",
    ] {
        assert_eq!(check_text(sql, plain), Err(1142), "{sql}");
    }
    assert_eq!(
        check_text(r#"SELECT "orders_ref.t_order" FROM t_order"#, plain),
        Ok(())
    );
}

#[test]
fn names_compare_exactly_but_information_schema_in_any_case() {
    let s = scope();
    assert!(s.allows("orders") && s.allows("INFORMATION_SCHEMA"));
    assert!(!s.allows("ORDERS") && !s.allows("orders_ref"));
    assert_eq!(
        s.check_database("mysql").unwrap_err().to_packet_parts().0,
        1044
    );
}

#[test]
fn a_known_database_outside_the_scope_is_refused_wherever_its_name_stands() {
    // Whatever the reader takes the position for, `mysql.x`, `order_meta.x` (databases the
    // proxy knows of) and refused information_schema views are refused.
    for sql in [
        "SELECT 1 FROM t_merchant /*!12where*/, mysql.user",
        "SELECT mysql.user FROM t_merchant",
        "SELECT 1 FROM t_merchant mysql WHERE mysql.user = 1",
        "SELECT 1 FROM t_merchant WHERE 1 = 0, order_meta.t_order_index",
        "SELECT * FROM t_merchant m, `ORDER_SHARDS`.t_order_0",
        "SELECT 1 FROM t_merchant value, information_schema.routines",
        "SELECT 1 FROM t_merchant WHERE x IN (information_schema.VIEWS)",
    ] {
        assert_eq!(refused(sql), 1142, "{sql}");
    }
    assert_eq!(refused("SELECT mysql.f(1)"), 1370);
    // Names of other databases' look-alikes pass.
    check("SELECT mysqlx.user, o.mysql FROM t_order o").unwrap();
    check("SELECT information_schema.tables.table_name FROM information_schema.tables").unwrap();
}

#[test]
fn with_information_schema_current_a_refused_view_is_refused_anywhere() {
    let lexed_check =
        |sql: &str| check_in(sql, Some("information_schema")).map_err(|(code, _)| code);
    for sql in [
        "SELECT COUNT(*) FROM { OJ routines LEFT OUTER JOIN tables ON 1 = 0 }",
        "SELECT COUNT(*) FROM tables value, routines",
        "SELECT t.name FROM engines e USE INDEX FOR ORDER BY (), innodb_sys_tables t",
        "SELECT 1 FROM tables WHERE 1 = 0, `USER_PRIVILEGES`",
    ] {
        assert_eq!(lexed_check(sql), Err(1142), "{sql}");
    }
    lexed_check("SELECT table_name, routine_name FROM tables").unwrap();
    lexed_check("SELECT COUNT(*) FROM collations").unwrap();
}

#[test]
fn a_qualified_name_as_the_first_token_is_read_without_looking_before_it() {
    // DDL names tables at any position, so `CREATE.x(` reaches the routine rule at token 0,
    // where nothing stands before the name.
    // Refused or passed, the check returns (it subtracted 1 from 0 there once).
    for sql in [
        "CREATE.x()",
        "create.t(",
        "DROP.x(1)",
        "ALTER.x()",
        "`a`.b()",
    ] {
        let _ = check(sql);
    }
}

#[test]
fn databases_the_servers_have_join_the_known_ones_but_for_the_scopes_own() {
    let s = scope().with_server_databases(&[
        "orders".into(),
        "reports".into(),
        "information_schema".into(),
        "orders_ref".into(),
    ]);
    assert!(s.is_elsewhere("ORDERS_REF") && s.is_elsewhere("mysql"));
    assert!(!s.is_elsewhere("orders") && !s.is_elsewhere("reports"));
    assert!(!s.is_elsewhere("information_schema"));
}

#[test]
fn a_statement_has_one_reading_unless_it_holds_an_executable_comment_or_sql_mode() {
    let m = LexMode::default();
    assert!(has_one_reading(
        b"SELECT * FROM t_order WHERE order_id = 1",
        m
    ));
    assert!(has_one_reading(b"SELECT '/*' FROM t /* comment */", m));
    for sql in [
        "SELECT 1 /*!50000 FROM mysql.user */",
        "SELECT 1 /*M!100000 x */",
        "select 1 /*m!100000 x */",
        "SELECT 'SQL_MODE' FROM t",
        "SET sql_mode = 'ANSI_QUOTES'",
        "SELECT @@Sql_Mode",
    ] {
        assert!(!has_one_reading(sql.as_bytes(), m), "{sql}");
    }
}

#[test]
fn one_reading_is_what_the_list_of_other_readings_says() {
    let newest = LexMode {
        server_version: u32::MAX,
        ..LexMode::default()
    };
    let ansi = LexMode {
        ansi_quotes: true,
        ..LexMode::default()
    };
    for mode in [LexMode::default(), newest, ansi] {
        for sql in [
            "SELECT * FROM t_order WHERE order_id = 1",
            "SELECT 1 /*!50000 FROM mysql.user */",
            "select 1 /*m!100000 x */",
            "SELECT 'SQL_MODE' FROM t",
            "SET STATEMENT sql_mode = 'ANSI_QUOTES' FOR SELECT 1 /*!1 x */",
            "",
        ] {
            assert_eq!(
                has_one_reading(sql.as_bytes(), mode),
                other_readings(sql.as_bytes(), mode).is_empty(),
                "{sql} in {mode:?}"
            );
        }
    }
}

#[test]
fn the_case_blind_search_finds_needles_at_the_edges_and_nowhere_else() {
    assert!(contains_ignore_ascii_case(b"sql_mode", b"sql_mode"));
    assert!(contains_ignore_ascii_case(b"x SQL_MODE", b"sql_mode"));
    assert!(contains_ignore_ascii_case(b"/*!", b"/*!"));
    assert!(!contains_ignore_ascii_case(b"x sql_mod", b"sql_mode"));
    assert!(!contains_ignore_ascii_case(b"", b"/*!"));
    assert!(!contains_ignore_ascii_case(b"/* !", b"/*!"));
    assert!(contains_ignore_ascii_case(b"ssql_mode", b"sql_mode"));
}
