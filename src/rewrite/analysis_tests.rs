//! Analysis and rewrite of the statement shapes the proxy routes, from text to the bytes
//! each shard receives.

use crate::config::Config;
use crate::rewrite::{SessionValues, Statement as Rewrite};
use crate::sql::analyze::*;
use crate::sql::charset::Decoding;
use crate::sql::lexer::{LexMode, lex};
use crate::sql::*;

fn config() -> Config {
    Config::from_toml(include_str!("../../config/demo.toml"), "demo.toml").unwrap()
}

fn analysis(sql: &str) -> Analysis {
    analysis_in(sql, true)
}

fn analysis_in(sql: &str, db_is_logical: bool) -> Analysis {
    let config = config();
    let lexed = lex(sql.as_bytes(), LexMode::default());
    let cx = AnalyzeContext {
        config: &config,
        db_is_logical,
        decoding: Decoding::Utf8,
        pipes_as_concat: false,
    };
    let analyzed = analyze(sql.as_bytes(), &lexed, cx).unwrap();
    assert!(analyzed.cacheable, "{sql}");
    analyzed.analysis
}

fn plan(sql: &str) -> ShardedPlan {
    match analysis(sql).placement {
        Placement::Sharded(p) => *p,
        other => panic!("{sql}: {other:?}"),
    }
}

fn refused(sql: &str) -> String {
    match analysis(sql).placement {
        Placement::Refused(Refusal::NotYet(m) | Refusal::Unsupported(m)) => m,
        other => panic!("{sql}: expected a refusal, got {other:?}"),
    }
}

/// The statement shard `shard` receives (all rows, keys kept).
fn for_shard(sql: &str, shard: usize, rows: &[usize]) -> String {
    let config = config();
    let a = analysis(sql);
    let Placement::Sharded(p) = &a.placement else {
        panic!("not sharded")
    };
    let lexed = lex(sql.as_bytes(), LexMode::default());
    let st = Rewrite {
        sql: sql.as_bytes(),
        tokens: &lexed.tokens,
    };
    let values = SessionValues {
        last_insert_id: 77,
        ..Default::default()
    };
    let keys = crate::rewrite::KeyEdits {
        shard_key: "order_id",
        ..Default::default()
    };
    String::from_utf8(
        st.for_shard(&a, p, &config.sharding.shards[shard], rows, &keys, &values)
            .sql,
    )
    .unwrap()
}

fn literal(sql: &str, slot: ValueSlot) -> String {
    let lexed = lex(sql.as_bytes(), LexMode::default());
    match slot {
        ValueSlot::Literal { token, negated } => format!(
            "{}{}",
            if negated { "-" } else { "" },
            String::from_utf8_lossy(lexed.tokens[token as usize].bytes(sql.as_bytes()))
        ),
        other => format!("{other:?}"),
    }
}

#[test]
fn point_select() {
    let sql = "SELECT * FROM t_order WHERE order_id = 123";
    let p = plan(sql);
    assert_eq!(p.key_values.len(), 1);
    assert_eq!(literal(sql, p.key_values[0]), "123");
    assert!(!p.needs_merge);
    assert_eq!(
        for_shard(sql, 3, &[]),
        "SELECT * FROM `order_shards`.`t_order_3` WHERE order_id = 123"
    );
}

#[test]
fn aliases_backquotes_qualified_names_comments_and_case() {
    let sql = "select /*+ NO_ICP(o) */ o.* from ORDERS.`T_ORDER` as o -- x\n where o.ORDER_ID = '12' and o.channel = 'EU_CHANNEL' /*region='GB'*/";
    let p = plan(sql);
    assert_eq!(literal(sql, p.key_values[0]), "'12'");
    assert_eq!(p.context.len(), 1);
    assert_eq!(p.context[0].kind, ContextKind::Channel);
    assert_eq!(
        for_shard(sql, 0, &[]),
        "select /*+ NO_ICP(o) */ o.* from `order_shards`.`t_order_0` as o -- x\n where o.ORDER_ID = '12' and o.channel = 'EU_CHANNEL' /*region='GB'*/"
    );
}

#[test]
fn qualifiers_naming_the_table_are_rewritten() {
    let sql = "SELECT t_order.order_id, `t_order`.amount, orders.t_order.status, t_order.* FROM t_order WHERE `t_order`.`order_id` IN (1, 2)";
    let p = plan(sql);
    assert_eq!(p.key_values.len(), 2);
    assert_eq!(
        for_shard(sql, 5, &[]),
        "SELECT `t_order_5`.order_id, `t_order_5`.amount, `order_shards`.`t_order_5`.status, `t_order_5`.* FROM `order_shards`.`t_order_5` WHERE `t_order_5`.`order_id` IN (1, 2)"
    );
}

#[test]
fn usable_order_id_must_be_a_top_level_and_term() {
    assert!(
        plan("SELECT * FROM t_order WHERE order_id = 1 OR status = 'x'")
            .key_values
            .is_empty()
    );
    assert_eq!(
        plan("SELECT * FROM t_order WHERE (status = 'x' AND (order_id = 5))")
            .key_values
            .len(),
        1
    );
    let sql = "SELECT * FROM t_order WHERE 7 = order_id AND region = 'GB'";
    let p = plan(sql);
    assert_eq!(literal(sql, p.key_values[0]), "7");
    assert_eq!(p.context[0].kind, ContextKind::Region);
    let sql = "SELECT * FROM t_order WHERE order_id = -7";
    assert_eq!(literal(sql, plan(sql).key_values[0]), "-7");
    assert_eq!(
        plan("SELECT * FROM t_order WHERE order_id = NULL").key_values,
        [ValueSlot::Null]
    );
    assert_eq!(
        plan("SELECT * FROM t_order WHERE order_id = 1 + 1").key_values,
        [ValueSlot::Expression]
    );
    assert_eq!(
        plan("SELECT * FROM t_order WHERE order_id = LAST_INSERT_ID()").key_values,
        [ValueSlot::LastInsertId]
    );
}

#[test]
fn binding_tables_join_on_the_shard_key() {
    let sql = "SELECT o.order_id, i.sku FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id WHERE o.order_id = 9";
    plan(sql);
    assert_eq!(
        for_shard(sql, 1, &[]),
        "SELECT o.order_id, i.sku FROM `order_shards`.`t_order_1` o JOIN `order_shards`.`t_order_item_1` i ON o.order_id = i.order_id WHERE o.order_id = 9"
    );
    plan("SELECT * FROM t_order JOIN t_order_item USING (order_id) WHERE order_id = 9");
    plan(
        "SELECT * FROM t_order o, t_order_item i WHERE o.order_id = i.order_id AND o.order_id = 9",
    );
    assert!(
        refused(
            "SELECT * FROM t_order o JOIN t_order_item i ON o.user_id = i.qty WHERE o.order_id = 9"
        )
        .contains("shard key")
    );
    assert!(
        refused("SELECT * FROM t_order o JOIN t_merchant m ON 1 WHERE o.order_id = 9")
            .contains("sharded and unsharded")
    );
}

#[test]
fn unsharded_and_other_databases_pass_through() {
    assert_eq!(
        analysis("SELECT * FROM t_merchant").placement,
        Placement::Unsharded
    );
    assert_eq!(analysis("SELECT 1").placement, Placement::Unsharded);
    assert_eq!(
        analysis_in("SELECT * FROM t_order WHERE order_id = 1", false).placement,
        Placement::Unsharded
    );
    assert!(matches!(
        analysis_in("SELECT * FROM orders.t_order WHERE order_id = 1", false).placement,
        Placement::Sharded(_)
    ));
    assert_eq!(
        analysis("WITH t_order AS (SELECT 1 AS order_id) SELECT * FROM t_order").placement,
        Placement::Unsharded
    );
}

#[test]
fn merges_are_flagged() {
    for sql in [
        "SELECT COUNT(*) FROM t_order WHERE order_id IN (1, 2)",
        "SELECT * FROM t_order WHERE order_id IN (1, 2) ORDER BY amount",
        "SELECT * FROM t_order WHERE order_id IN (1, 2) LIMIT 1",
        "SELECT DISTINCT status FROM t_order WHERE order_id IN (1, 2)",
        "SELECT status FROM t_order WHERE order_id IN (1, 2) GROUP BY status",
    ] {
        assert!(plan(sql).needs_merge, "{sql}");
    }
}

#[test]
fn subqueries_unions_and_ddl_on_sharded_tables_are_refused() {
    refused(
        "SELECT * FROM t_order WHERE order_id IN (SELECT order_id FROM t_order_item WHERE order_id = 1)",
    );
    refused(
        "SELECT * FROM t_order WHERE order_id = 1 UNION SELECT * FROM t_order WHERE order_id = 2",
    );
    refused("ALTER TABLE t_order ADD COLUMN x INT");
    refused("DROP TABLE t_order");
}

#[test]
fn multi_row_insert_splits_by_rows() {
    let sql = "INSERT INTO t_order (order_id, channel, region, amount) VALUES (1, 'EU_CHANNEL', 'GB', 1.5), (2, 'CN_CHANNEL', 'CN', 2), (3, 'EU_CHANNEL', 'FR', 3) ON DUPLICATE KEY UPDATE amount = VALUES(amount)";
    let p = plan(sql);
    assert_eq!(p.rows.len(), 3);
    assert_eq!(literal(sql, p.rows[1].order_id.unwrap()), "2");
    assert_eq!(literal(sql, p.rows[1].channel.unwrap()), "'CN_CHANNEL'");
    assert_eq!(literal(sql, p.rows[2].region.unwrap()), "'FR'");
    assert_eq!(
        for_shard(sql, 2, &[0, 2]),
        "INSERT INTO `order_shards`.`t_order_2` (order_id, channel, region, amount) VALUES (1, 'EU_CHANNEL', 'GB', 1.5), (3, 'EU_CHANNEL', 'FR', 3) ON DUPLICATE KEY UPDATE amount = VALUES(amount)"
    );
    let sql = "INSERT INTO t_order_item SET order_id = LAST_INSERT_ID(), item_no = 1";
    let p = plan(sql);
    assert_eq!(p.rows[0].order_id, Some(ValueSlot::LastInsertId));
    assert_eq!(
        for_shard(sql, 4, &[]),
        "INSERT INTO `order_shards`.`t_order_item_4` SET order_id = 77, item_no = 1"
    );
    refused("INSERT INTO t_order VALUES (1, 'EU_CHANNEL')");
    refused("INSERT INTO t_order (order_id) SELECT order_id FROM t_order_item WHERE order_id = 1");
    refused(
        "INSERT INTO t_order (order_id, channel) VALUES (1, 'x') ON DUPLICATE KEY UPDATE channel = 'y'",
    );
}

#[test]
fn update_and_delete() {
    let sql = "UPDATE t_order SET status = 'PAID', order_id = 5 WHERE order_id = 5";
    let p = plan(sql);
    assert_eq!(literal(sql, p.sets_key.unwrap()), "5");
    let p = plan("UPDATE t_order o SET o.region = 'FR' WHERE o.order_id = 5");
    assert_eq!(p.sets_context[0].kind, ContextKind::Region);
    let sql = "DELETE t_order FROM t_order WHERE order_id = 5";
    plan(sql);
    assert_eq!(
        for_shard(sql, 7, &[]),
        "DELETE `t_order_7` FROM `order_shards`.`t_order_7` WHERE order_id = 5"
    );
    let sql = "DELETE o, i FROM t_order o JOIN t_order_item i ON i.order_id = o.order_id WHERE o.order_id = 5";
    assert_eq!(
        for_shard(sql, 7, &[]),
        "DELETE o, i FROM `order_shards`.`t_order_7` o JOIN `order_shards`.`t_order_item_7` i ON i.order_id = o.order_id WHERE o.order_id = 5"
    );
}

#[test]
fn session_functions_and_pins() {
    let a = analysis("SELECT LAST_INSERT_ID(), CONNECTION_ID() AS c, database()");
    assert_eq!(a.placement, Placement::Unsharded);
    assert_eq!(a.session_fns.len(), 3);
    assert!(a.session_fns[0].keep_name && !a.session_fns[1].keep_name);
    assert!(!analysis("SELECT 1").pins);
    assert!(analysis("SELECT GET_LOCK('a', 1)").pins);
    assert!(analysis("SELECT @x := 1").pins);
    assert!(analysis("SELECT 1 INTO @x").pins);
    assert!(analysis("CREATE TEMPORARY TABLE tmp (a INT)").pins);
    assert_eq!(analysis("CREATE TABLE x (a INT)").verb, Verb::Ddl);
    // No implicit commit for CREATE or DROP of a TEMPORARY table; ALTER of one commits.
    assert_eq!(
        analysis("CREATE TEMPORARY TABLE tmp (a INT)").verb,
        Verb::Other
    );
    assert_eq!(analysis("DROP TEMPORARY TABLE tmp").verb, Verb::Other);
    assert!(analysis("DROP TEMPORARY TABLE IF EXISTS tmp").pins);
    assert_eq!(analysis("DROP TABLE tmp").verb, Verb::Ddl);
    assert_eq!(analysis("ALTER TABLE tmp ADD COLUMN b INT").verb, Verb::Ddl);
    assert!(!analysis("CREATE TABLE x (a INT)").pins);
    // Found by attacking the pool: state the parser's tree did not show.
    for sql in [
        "CREATE TEMPORARY SEQUENCE t_merchant",
        "CREATE OR REPLACE TEMPORARY SEQUENCE s",
        "SELECT 1 INTO /*!@v2*/",
        "SELECT NEXTVAL(s)",
        "SELECT NEXT VALUE FOR s",
        "DO RELEASE_LOCK('a')",
    ] {
        let lexed = crate::sql::lexer::lex(sql.as_bytes(), LexMode::default());
        assert!(token_pins(sql.as_bytes(), &lexed), "{sql}");
    }
}

#[test]
fn binary_bytes_in_literals_survive_the_rewrite() {
    let mut sql =
        b"INSERT INTO t_order (order_id, channel, note) VALUES (1, 'EU_CHANNEL', _binary'".to_vec();
    sql.extend_from_slice(&[0xff, 0x00, 0xc3, 0x28]);
    sql.extend_from_slice(b"')");
    let config = config();
    let lexed = lex(&sql, LexMode::default());
    let cx = AnalyzeContext {
        config: &config,
        db_is_logical: true,
        decoding: Decoding::Utf8,
        pipes_as_concat: false,
    };
    let a = analyze(&sql, &lexed, cx).unwrap().analysis;
    let Placement::Sharded(p) = &a.placement else {
        panic!()
    };
    let st = Rewrite {
        sql: &sql,
        tokens: &lexed.tokens,
    };
    let out = st
        .for_shard(
            &a,
            p,
            &config.sharding.shards[1],
            &[],
            &crate::rewrite::KeyEdits::default(),
            &SessionValues::default(),
        )
        .sql;
    assert!(out.starts_with(b"INSERT INTO `order_shards`.`t_order_1` (order_id"));
    assert!(out.ends_with(&[b'\'', 0xff, 0x00, 0xc3, 0x28, b'\'', b')']));
}

#[test]
fn executable_comments_are_read_as_sql() {
    // MariaDB runs what `/*M! */` and `/*! */` hold: the OR takes the key predicate off
    // the top level.
    for sql in [
        "SELECT COUNT(*) FROM t_order WHERE order_id = 5 /*M!100100 OR 1=1 */",
        "SELECT COUNT(*) FROM t_order WHERE order_id = 5 /*!50000 OR 1=1 */",
    ] {
        assert!(plan(sql).key_values.is_empty(), "{sql}");
    }
    // An assignment hidden in one is seen too.
    let p = plan("UPDATE t_order SET status = status /*M! , order_id = 77 */ WHERE order_id = 5");
    assert!(p.sets_key.is_some());
}

#[test]
fn operators_the_parser_misreads_are_refused_on_sharded_tables() {
    assert!(refused("SELECT * FROM t_order WHERE order_id = 5 AND 1 XOR 1").contains("XOR"));
    assert!(
        refused("SELECT * FROM t_order WHERE order_id = 5 AND status = 'x' || 1").contains("||")
    );
    // Elsewhere they pass through untouched.
    assert_eq!(
        analysis("SELECT 1 XOR 1, 'a' || 'b'").placement,
        Placement::Unsharded
    );
    assert!(
        plan("SELECT JSON_ARRAYAGG(order_id) FROM t_order WHERE order_id IN (1, 2)").needs_merge
    );
    assert!(plan("SELECT BIT_XOR(user_id) FROM t_order WHERE order_id IN (1, 2)").needs_merge);
}

#[test]
fn long_operator_chains_are_not_parsed() {
    let config = config();
    let sql = format!(
        "SELECT 1 FROM t_order WHERE order_id = 5{}",
        " AND 1".repeat(MAX_OPERATORS + 1)
    );
    let lexed = lex(sql.as_bytes(), LexMode::default());
    let cx = AnalyzeContext {
        config: &config,
        db_is_logical: true,
        decoding: Decoding::Utf8,
        pipes_as_concat: false,
    };
    assert!(
        analyze(sql.as_bytes(), &lexed, cx)
            .unwrap_err()
            .contains("operators")
    );
    // Below the limit the chain parses (and walks, and drops) on a small stack.
    let sql = format!(
        "SELECT 1 FROM t_order WHERE order_id = 5{}",
        " AND 1".repeat(MAX_OPERATORS - 10)
    );
    let lexed = lex(sql.as_bytes(), LexMode::default());
    let handle = std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(move || {
            let config = config;
            let cx = AnalyzeContext {
                config: &config,
                db_is_logical: true,
                decoding: Decoding::Utf8,
                pipes_as_concat: false,
            };
            analyze(sql.as_bytes(), &lexed, cx).is_ok()
        })
        .unwrap();
    assert!(handle.join().unwrap());
}

#[test]
fn merges_that_read_literals_are_not_shared_between_statements_of_a_shape() {
    let config = config();
    let cacheable = |sql: &str| {
        let lexed = lex(sql.as_bytes(), LexMode::default());
        let cx = AnalyzeContext {
            config: &config,
            db_is_logical: true,
            decoding: Decoding::Utf8,
            pipes_as_concat: false,
        };
        analyze(sql.as_bytes(), &lexed, cx).unwrap().cacheable
    };
    for sql in [
        "SELECT order_id, status FROM t_order WHERE user_id = 7 ORDER BY 2 DESC",
        "SELECT channel, region, COUNT(*) FROM t_order GROUP BY 1",
        "SELECT channel, COUNT(*) AS n FROM t_order GROUP BY channel HAVING n > 30",
        "SELECT COUNT(*) + 1 FROM t_order WHERE user_id = 7",
        "SELECT IFNULL(MAX(note), 'none') FROM t_order",
    ] {
        assert!(!cacheable(sql), "{sql}");
    }
    for sql in [
        "SELECT * FROM t_order WHERE order_id = 5",
        "SELECT 1 FROM t_order WHERE order_id = 5",
        "SELECT * FROM t_order WHERE order_id IN (1, 2) ORDER BY created_at LIMIT 10 OFFSET 5",
        "SELECT COUNT(*) FROM t_order WHERE user_id = 42 AND channel = 'EU_CHANNEL'",
    ] {
        assert!(cacheable(sql), "{sql}");
    }
}

#[test]
fn tables_named_with_a_database_are_reported_for_the_scope_check() {
    let names = |sql: &str| analysis(sql).qualified_tables;
    let pair = |d: &str, t: &str| (d.to_owned(), t.to_owned());
    assert_eq!(
        names("SELECT COUNT(*) FROM orders_ref.t_order"),
        [pair("orders_ref", "t_order")]
    );
    assert_eq!(
        names("SELECT o.order_id FROM t_order o JOIN `mysql`.`user` u ON o.a = u.b"),
        [pair("mysql", "user")]
    );
    assert_eq!(
        names("SELECT x.t.c FROM t_merchant WHERE 1"),
        [pair("x", "t")]
    );
    assert_eq!(
        names("INSERT INTO t_merchant SELECT * FROM (SELECT * FROM a.b) d"),
        [pair("a", "b")]
    );
    assert!(names("SELECT o.order_id FROM t_order o WHERE o.order_id = 1").is_empty());
}

#[test]
fn assigned_user_variables_are_the_into_list_and_the_targets_of_colon_equals() {
    let names = |sql: &str| {
        let lexed = lex(sql.as_bytes(), LexMode::default());
        assigned_user_variables(sql.as_bytes(), &lexed.tokens)
    };
    assert_eq!(
        names("SELECT a, b INTO @A, @`b c` FROM t WHERE id = 1"),
        ["@a", "@b c"]
    );
    assert_eq!(
        names("SELECT @x := a, @y := @x + 1, @z FROM t"),
        ["@x", "@y"]
    );
    assert_eq!(names("SELECT a FROM t WHERE b = @v"), Vec::<String>::new());
    assert_eq!(names("INSERT INTO t VALUES (@v)"), Vec::<String>::new());
    assert_eq!(names("SELECT a INTO @a FROM t INTO @a"), ["@a"]);
}

#[test]
fn a_backslash_ends_no_string_under_no_backslash_escapes() {
    let config = config();
    let sql = r"SELECT * FROM t_order WHERE note = 'C:\' AND order_id = 42";
    let mode = LexMode {
        no_backslash_escapes: true,
        ..LexMode::default()
    };
    let lexed = lex(sql.as_bytes(), mode);
    let cx = AnalyzeContext {
        config: &config,
        db_is_logical: true,
        decoding: Decoding::Utf8,
        pipes_as_concat: false,
    };
    let analysis = analyze(sql.as_bytes(), &lexed, cx).unwrap().analysis;
    let Placement::Sharded(plan) = analysis.placement else {
        panic!("{:?}", analysis.placement);
    };
    assert_eq!(
        plan.key_values.len(),
        1,
        "the order id is found after the string"
    );
}
