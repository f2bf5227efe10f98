use super::*;
use crate::sql::lexer::lex;

fn cmd(sql: &str) -> Command {
    let lexed = lex(sql.as_bytes(), LexMode::default());
    classify(sql.as_bytes(), &lexed.tokens, LexMode::default())
}

#[test]
fn transaction_commands() {
    assert_eq!(cmd("BEGIN"), Command::Begin);
    assert_eq!(cmd("begin work"), Command::Begin);
    assert_eq!(cmd("START TRANSACTION READ ONLY"), Command::Begin);
    assert_eq!(cmd("commit"), Command::Commit);
    assert_eq!(cmd("COMMIT WORK AND NO CHAIN NO RELEASE"), Command::Commit);
    assert_eq!(cmd("COMMIT AND CHAIN"), Command::ChainOrRelease);
    assert_eq!(cmd("ROLLBACK RELEASE"), Command::ChainOrRelease);
    assert_eq!(cmd("rollback"), Command::Rollback);
    assert_eq!(
        cmd("ROLLBACK TO SAVEPOINT a"),
        Command::RollbackTo("a".into())
    );
    assert_eq!(cmd("rollback work to `b`"), Command::RollbackTo("b".into()));
    assert_eq!(cmd("SAVEPOINT s1"), Command::Savepoint("s1".into()));
    assert_eq!(
        cmd("RELEASE SAVEPOINT s1"),
        Command::ReleaseSavepoint("s1".into())
    );
    assert_eq!(cmd("BEGIN NOT ATOMIC SELECT 1; END"), Command::Statement);
}

#[test]
fn set_forms_drivers_send() {
    assert_eq!(
        cmd("set autocommit=1, sql_mode = concat(@@sql_mode,',STRICT_TRANS_TABLES')"),
        Command::Set(vec![
            SetItem::SessionVar("autocommit".into()),
            SetItem::SessionVar("sql_mode".into())
        ])
    );
    assert_eq!(
        cmd("SET @@session.autocommit = OFF"),
        Command::Set(vec![SetItem::SessionVar("autocommit".into())])
    );
    assert_eq!(
        cmd("SET NAMES 'utf8mb4' COLLATE 'utf8mb4_unicode_ci'"),
        Command::Set(vec![SetItem::Names(Some("utf8mb4".into()))])
    );
    assert_eq!(
        cmd("SET character set gbk"),
        Command::Set(vec![SetItem::Names(Some("gbk".into()))])
    );
    assert_eq!(
        cmd("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"),
        Command::Set(vec![SetItem::Transaction { session: true }])
    );
    assert_eq!(
        cmd("SET TRANSACTION READ ONLY"),
        Command::Set(vec![SetItem::Transaction { session: false }])
    );
    assert_eq!(
        cmd("SET GLOBAL max_connections = 10"),
        Command::Set(vec![SetItem::GlobalVar("max_connections".into())])
    );
    assert_eq!(
        cmd("SET @X = 1, @`a b` := 2"),
        Command::Set(vec![
            SetItem::UserVar("@x".into()),
            SetItem::UserVar("@a b".into())
        ])
    );
    assert_eq!(
        cmd("SET time_zone = '+00:00', @@local.wait_timeout=10"),
        Command::Set(vec![
            SetItem::SessionVar("time_zone".into()),
            SetItem::SessionVar("wait_timeout".into())
        ])
    );
    assert_eq!(
        cmd("SET STATEMENT max_statement_time=1 FOR SELECT 1"),
        Command::Statement
    );
}

#[test]
fn show_and_describe() {
    assert_eq!(
        cmd("SHOW WARNINGS"),
        Command::ShowDiagnostics {
            errors_only: false,
            count: false
        }
    );
    assert_eq!(
        cmd("show count(*) errors"),
        Command::ShowDiagnostics {
            errors_only: true,
            count: true
        }
    );
    assert_eq!(
        cmd("SHOW FULL TABLES FROM orders LIKE 't\\_%'"),
        Command::ShowTables {
            full: true,
            database: Some("orders".into()),
            like: Some(b"t\\_%".to_vec()),
            filtered: false
        }
    );
    assert!(matches!(
        cmd("DESCRIBE orders.t_order"),
        Command::TableInfo {
            table: TokSpan { first: 1, last: 3 },
            ..
        }
    ));
    assert!(matches!(
        cmd("SHOW CREATE TABLE `t_order`"),
        Command::TableInfo {
            names_in_rows: true,
            ..
        }
    ));
    assert!(matches!(
        cmd("show full columns from t_order from orders"),
        Command::TableInfo {
            database: Some(_),
            ..
        }
    ));
    assert_eq!(cmd("EXPLAIN SELECT 1"), Command::Statement);
    assert_eq!(cmd("show routekey stats"), Command::ShowRouteStats);
    assert!(matches!(cmd("explain t_order"), Command::TableInfo { .. }));
    assert_eq!(cmd("USE `orders`"), Command::Use("orders".into()));
    assert_eq!(
        cmd("KILL QUERY 12"),
        Command::Kill {
            query_only: true,
            id: Some(12),
            own: false
        }
    );
    // HARD and SOFT change nothing for the proxy; QUERY still means the statement only.
    assert_eq!(
        cmd("KILL HARD QUERY 12"),
        Command::Kill {
            query_only: true,
            id: Some(12),
            own: false
        }
    );
    assert_eq!(
        cmd("kill soft connection 7"),
        Command::Kill {
            query_only: false,
            id: Some(7),
            own: false
        }
    );
    assert!(matches!(cmd("KILL QUERY ID 12"), Command::Refused(_)));
    // A fifth attack: what reads or changes a pooled connection's state past the proxy.
    for sql in [
        "GET DIAGNOSTICS CONDITION 1 @m = MESSAGE_TEXT",
        "GET CURRENT DIAGNOSTICS @n = NUMBER",
        "SELECT @@warning_count",
        "SELECT @@session.error_count + 0",
        "SELECT @@session . warning_count",
        "SET STATEMENT max_statement_time = 10 FOR SET time_zone = '+05:00'",
        "SET STATEMENT max_statement_time = 10 FOR USE mysql",
        "SET STATEMENT max_statement_time = 10 FOR BEGIN",
    ] {
        assert!(
            matches!(cmd(sql), Command::Refused(_)),
            "{sql}: {:?}",
            cmd(sql)
        );
    }
    assert_eq!(
        cmd("SET STATEMENT max_statement_time = 10 FOR SELECT 1"),
        Command::Statement
    );
    assert_eq!(cmd("USE `orders`"), Command::Use("orders".into()));
    assert_eq!(cmd("USE /*!mysql*/"), Command::Use("mysql".into()));
    for sql in ["USE mysql extra", "USE 'mysql'", "USE /*!mysql x*/", "USE"] {
        assert!(
            matches!(cmd(sql), Command::Refused(_)),
            "{sql}: {:?}",
            cmd(sql)
        );
    }
    for sql in [
        "KILL USER app",
        "KILL HARD QUERY USER 'app'",
        "KILL CONNECTION USER app",
    ] {
        assert!(matches!(cmd(sql), Command::Refused(_)), "{sql}");
    }
}

#[test]
fn backquoted_names_are_read_as_the_server_reads_them() {
    assert!(matches!(
        cmd("SELECT `load_file`('/etc/hostname')"),
        Command::Administrative(_)
    ));
    assert!(matches!(
        cmd("SELECT `LOAD_FILE` ('/etc/hostname')"),
        Command::Administrative(_)
    ));
    let Command::Set(items) =
        cmd("SET `sql_mode` = 'ANSI_QUOTES', @@session.`time_zone` = '+00:00'")
    else {
        panic!("a SET");
    };
    assert_eq!(
        items,
        vec![
            SetItem::SessionVar("sql_mode".into()),
            SetItem::SessionVar("time_zone".into())
        ]
    );
    let Command::Set(items) = cmd("SET `character_set_client` = sjis") else {
        panic!("a SET");
    };
    assert_eq!(
        items,
        vec![SetItem::SessionVar("character_set_client".into())]
    );
}

#[test]
fn administration_is_recognized() {
    for sql in [
        "SET PASSWORD = PASSWORD('x')",
        "set password for root@localhost = 'x'",
        "GRANT ALL ON *.* TO x",
        "CREATE USER x",
        "drop database order_shards",
        "DROP SCHEMA orders",
        "SHUTDOWN",
        "FLUSH TABLES WITH READ LOCK",
        "LOAD DATA INFILE '/etc/passwd' INTO TABLE t_merchant",
        "SELECT * FROM t_merchant INTO OUTFILE '/tmp/x'",
        "SET ROLE admin",
        "STOP SLAVE",
        "/*!50000 GRANT ALL ON *.* TO x */",
        "/*!CREATE USER y*/",
        "CREATE OR REPLACE USER z",
        "CREATE OR REPLACE DATABASE d",
        "SET STATEMENT max_statement_time=100 FOR CREATE USER q",
        "SET NAMES utf8mb4, PASSWORD FOR x = PASSWORD('y')",
        "SET autocommit=1, ROLE NONE",
        "CREATE DEFINER=root@localhost PROCEDURE p() SELECT 1",
        "CREATE PROCEDURE p() CREATE USER u",
        "CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO SELECT 1",
        "BACKUP STAGE START",
        "SELECT LOAD_FILE('/etc/hostname')",
        // Found by an attack: forwarded, they ran with the backend account's privileges.
        "SET sql_log_bin = 0",
        "SET SESSION sql_log_off = 1",
        "SET @@session.pseudo_thread_id = 7",
        "SET @@gtid_seq_no = 100",
        "SET autocommit = 1, `skip_replication` = 1",
        "SET LOCAL binlog_format = 'STATEMENT'",
        "SET server_id = 99",
        "SET STATEMENT sql_log_bin = 0 FOR INSERT INTO t_merchant VALUES (1)",
        "SET STATEMENT max_statement_time = 1, sql_log_off = 1 FOR SELECT 1",
        // A fourth attack: spaces around the scope's dot, an executable comment.
        "SET @@session . sql_log_bin = 0",
        "SET @@local .`sql_log_bin` = 0",
        "SET /*!sql_log_bin*/ = 0",
        "CREATE TABLE t (a INT) DATA DIRECTORY = '/tmp'",
        // A third attack: the DEFINER clause's forms hid the stored program's type.
        "CREATE DEFINER=CURRENT_USER() PROCEDURE p() SQL SECURITY INVOKER SELECT 1",
        "CREATE DEFINER = CURRENT_USER ( ) FUNCTION f() RETURNS INT RETURN 1",
        "CREATE DEFINER=view@localhost PROCEDURE p() SELECT 1",
        "CREATE DEFINER='sequence'@'%' TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET @a = 1",
        "CREATE DEFINER=`temporary`@`localhost` EVENT e ON SCHEDULE EVERY 1 DAY DO SELECT 1",
        "CREATE /*!50013 DEFINER=`root`@`localhost` */ PROCEDURE p() SELECT 1",
        "CREATE OR REPLACE DEFINER=table @ localhost AGGREGATE FUNCTION f() RETURNS INT RETURN 1",
        "create table t (a int) engine=MyISAM index directory '/tmp'",
        "ALTER TABLE t DATA DIRECTORY = '/tmp'",
    ] {
        assert!(
            matches!(cmd(sql), Command::Administrative(_)),
            "{sql}: {:?}",
            cmd(sql)
        );
    }
    assert_eq!(cmd("START TRANSACTION"), Command::Begin);
    assert_eq!(cmd("CREATE TABLE t (a INT)"), Command::Statement);
    assert_eq!(
        cmd("CREATE TABLE t (data INT, directory INT)"),
        Command::Statement
    );
    for view in [
        "CREATE DEFINER=CURRENT_USER VIEW v AS SELECT 1",
        "CREATE ALGORITHM=MERGE DEFINER=procedure@localhost SQL SECURITY INVOKER VIEW v AS SELECT 1",
        "CREATE DEFINER=CURRENT_USER() VIEW v AS SELECT 1",
    ] {
        assert_eq!(cmd(view), Command::Statement, "{view}");
    }
    assert_eq!(
        cmd("SET STATEMENT max_statement_time = 1 FOR SELECT 1"),
        Command::Statement
    );
    assert!(!matches!(
        cmd("SET sql_log_bin_x = 0, @sql_log_bin = 0"),
        Command::Administrative(_)
    ));
    assert_eq!(
        cmd("CREATE TABLE t (user INT, role INT)"),
        Command::Statement
    );
    assert_eq!(
        cmd("CREATE OR REPLACE VIEW v AS SELECT user FROM t"),
        Command::Statement
    );
    assert_eq!(cmd("DROP TABLE IF EXISTS user"), Command::Statement);
    assert_eq!(cmd("SELECT 'into outfile'"), Command::Statement);
    for sql in [
        "PREPARE s FROM 'SELECT 1'",
        "EXECUTE s",
        "EXECUTE IMMEDIATE 'SELECT 1'",
        "DEALLOCATE PREPARE s",
    ] {
        assert!(matches!(cmd(sql), Command::Refused(_)), "{sql}");
    }
    assert_eq!(
        cmd("SET STATEMENT max_statement_time=1 FOR SELECT 1"),
        Command::Statement
    );
    // Executable comments around a table name keep their token positions.
    assert!(matches!(
        cmd("DESCRIBE /*!50000 orders.t_order */"),
        Command::TableInfo {
            table: TokSpan { first: 2, last: 4 },
            ..
        }
    ));
}

#[test]
fn next_order_id_alone_is_the_proxys_function_and_any_other_use_is_refused() {
    assert_eq!(
        cmd("SELECT NEXT_ORDER_ID('GB') AS id"),
        Command::NextOrderId {
            region: RegionArg::Literal("GB".into()),
            column: "id".into()
        }
    );
    assert_eq!(cmd("SELECT next_order_id FROM t"), Command::Statement);
    for sql in [
        "SELECT NEXT_ORDER_ID('GB'), 1",
        "SELECT NEXT_ORDER_ID('GB', 2)",
        "SELECT NEXT_ORDER_ID(region) FROM t",
        "SELECT next_order_id, NEXT_ORDER_ID() FROM t",
        "INSERT INTO t_order (order_id) VALUES (NEXT_ORDER_ID('GB'))",
        "SELECT 1 FROM dual WHERE next_order_id () > 0",
    ] {
        assert!(matches!(cmd(sql), Command::Refused(_)), "{sql}");
    }
}

#[test]
fn explain_route_body_keeps_the_hints_before_its_verb() {
    let sql = "EXPLAIN ROUTE /*route_key='BIZ_CHANNEL'*/ SELECT 1";
    let Command::ExplainRoute { body } = cmd(sql) else {
        panic!("{sql}");
    };
    assert_eq!(&sql[body..], " /*route_key='BIZ_CHANNEL'*/ SELECT 1");
    assert!(!matches!(
        cmd("EXPLAIN ROUTE"),
        Command::ExplainRoute { .. }
    ));
}

#[test]
fn show_session_status_is_answered_with_the_client_connections_ssl_variables() {
    for sql in [
        "SHOW STATUS",
        "SHOW STATUS LIKE 'Ssl_cipher'",
        "show session status like 'ssl%'",
        "SHOW LOCAL STATUS LIKE 'Ssl_version'",
        "SHOW STATUS LIKE '%cipher'",
        "SHOW STATUS WHERE Variable_name = 'Ssl_cipher'",
    ] {
        assert_eq!(cmd(sql), Command::ShowSessionStatus, "{sql}");
    }
    for other in ["SHOW GLOBAL STATUS LIKE 'Ssl_cipher'", "SHOW STATUS x"] {
        assert_eq!(cmd(other), Command::Statement, "{other}");
    }
}

#[test]
fn show_forms_of_the_users_scope_are_the_proxys_and_the_whole_servers_are_refused() {
    assert_eq!(
        cmd("SHOW DATABASES"),
        Command::ShowDatabases { filter: None }
    );
    assert_eq!(
        cmd("show schemas like 'o%'"),
        Command::ShowDatabases { filter: Some(13) }
    );
    assert!(matches!(cmd("SHOW DATABASES junk"), Command::Refused(_)));
    assert_eq!(
        cmd("SHOW PROCESSLIST"),
        Command::ShowProcesslist { full: false }
    );
    assert_eq!(
        cmd("show full processlist"),
        Command::ShowProcesslist { full: true }
    );
    for sql in [
        "SHOW ENGINE INNODB STATUS",
        "SHOW GRANTS",
        "SHOW GRANTS FOR root",
        "SHOW CREATE USER root",
        "SHOW PROCEDURE STATUS",
        "SHOW FUNCTION STATUS WHERE Db = 'x'",
        "SHOW OPEN TABLES",
        "SHOW EXPLAIN FOR 3",
        "SHOW SLAVE STATUS",
        "SHOW TABLE_STATISTICS",
    ] {
        assert!(matches!(cmd(sql), Command::Administrative(_)), "{sql}");
    }
    assert_eq!(cmd("SHOW ENGINES"), Command::Statement);
    assert_eq!(cmd("SHOW VARIABLES LIKE 'x'"), Command::Statement);
}

#[test]
fn a_system_variable_with_spaces_around_its_scope_dot_is_read_as_mariadb_reads_it() {
    assert_eq!(
        cmd("SET @@session . sql_mode = 'ANSI'"),
        Command::Set(vec![SetItem::SessionVar("sql_mode".into())])
    );
    assert_eq!(
        cmd("SET @@global . max_connections = 1"),
        Command::Set(vec![SetItem::GlobalVar("max_connections".into())])
    );
}

#[test]
fn routekey_topology_statements() {
    assert_eq!(cmd("SHOW ROUTEKEY TOPOLOGY"), Command::ShowRouteTopology);
    assert_eq!(
        cmd("SHOW ROUTEKEY TRANSACTIONS"),
        Command::ShowRouteTransactions
    );
    assert_eq!(
        cmd("SELECT ROUTEKEY_WRITE_TOKEN()"),
        Command::WriteToken {
            column: "ROUTEKEY_WRITE_TOKEN()".into()
        }
    );
    assert_eq!(
        cmd("select routekey_write_token() as t"),
        Command::WriteToken { column: "t".into() }
    );
    assert_eq!(
        cmd("SELECT routekey_write_token FROM x"),
        Command::Statement
    );
}
