//! Who may reach what (SPEC §8a), end to end through mysql_async: a user reaches the
//! logical database, `information_schema` and its `databases`, nothing else, with MySQL's
//! codes (1044 for a database as such, 1142 for a table, 1095 for another user's session);
//! `SHOW DATABASES` and `SCHEMATA` list exactly that; `SHOW PROCESSLIST` and
//! `information_schema.PROCESSLIST` list the proxy's own sessions, which `KILL` accepts.

mod common;

use common::*;
use mysql_async::prelude::*;
use mysql_async::{Conn, OptsBuilder};

/// The demo configuration plus `granted` (may use `orders_ref`) and `ops`
/// (`process = true`), both with password `app`.
fn scoped_config() -> routekey_proxy::config::Config {
    let mut config = config();
    let mut granted = config.users[0].clone();
    granted.name = "granted".to_owned();
    granted.databases = vec!["orders_ref".to_owned()];
    let mut ops = config.users[0].clone();
    ops.name = "ops".to_owned();
    ops.process = true;
    config.users.push(granted);
    config.users.push(ops);
    config
}

async fn connect(h: &Harness, user: &str, db: Option<&str>) -> Result<Conn, mysql_async::Error> {
    let opts = OptsBuilder::from_opts(h.opts())
        .user(Some(user))
        .db_name(db)
        .client_found_rows(false);
    Conn::new(opts).await
}

/// Ten fresh sessions in a row read an unsharded table of the logical database: no pooled
/// backend connection was moved to another database behind the proxy's back (the query
/// would fail there with 1146).
async fn assert_pool_serves_the_logical_database(h: &Harness) {
    for _ in 0..10 {
        let mut c = h.client().await;
        let n: Option<u64> = c
            .query_first("SELECT COUNT(*) FROM t_merchant")
            .await
            .unwrap_or_else(|e| panic!("a pooled connection left the logical database: {e}"));
        assert!(n.is_some());
    }
}

/// (code, message) of a statement that must fail.
async fn refusal(c: &mut Conn, sql: &str) -> (u16, String) {
    let (code, state, message) = match c.query_drop(sql).await {
        Err(mysql_async::Error::Server(e)) => (e.code, e.state, e.message),
        other => panic!("{sql}\n  expected a MySQL error, got {other:?}"),
    };
    assert_eq!(state, "42000", "{sql}: {message}");
    (code, message)
}

async fn strings(c: &mut Conn, sql: &str) -> Vec<String> {
    c.query::<String, _>(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

#[tokio::test]
async fn tables_outside_the_scope_are_refused_in_every_statement_form() {
    let h = Harness::start_with(scoped_config()).await;
    let mut c = h.client().await;
    let (code, message) = refusal(&mut c, "SELECT COUNT(*) FROM orders_ref.t_order").await;
    assert_eq!(code, 1142);
    assert_eq!(
        message,
        "SELECT command denied to user 'app'@'127.0.0.1' for table `orders_ref`.`t_order`"
    );
    let id = seed().channels["EU_CHANNEL"].new_format_ids[0];
    for sql in [
        format!(
            "SELECT * FROM t_order o JOIN orders_ref.t_order r ON o.order_id = r.order_id WHERE o.order_id = {id}"
        ),
        format!(
            "SELECT * FROM t_order WHERE order_id IN (SELECT order_id FROM orders_ref.t_order) AND order_id = {id}"
        ),
        "SELECT * FROM (SELECT * FROM order_meta.t_order_index) AS d".to_owned(),
        "WITH c AS (SELECT * FROM mysql.user) SELECT COUNT(*) FROM c".to_owned(),
        "SELECT * FROM t_merchant m, orders_ref.t_order r WHERE m.merchant_id = r.order_id"
            .to_owned(),
        "SELECT orders_ref.t_order.order_id FROM t_merchant".to_owned(),
        "SELECT /*!40001 COUNT(*) FROM orders_ref.t_order */".to_owned(),
        // The SQL parser cannot read this one; the lexer still finds the name.
        "SELECT * FROM orders_ref.t_order LOCK IN SHARE MODE".to_owned(),
        "DESCRIBE orders_ref.t_order".to_owned(),
        "SHOW CREATE TABLE orders_ref.t_order".to_owned(),
        "SELECT * FROM information_schema.ROUTINES".to_owned(),
    ] {
        assert_eq!(refusal(&mut c, &sql).await.0, 1142, "{sql}");
    }
    for (sql, command) in [
        (
            "INSERT INTO t_merchant SELECT * FROM orders_ref.t_merchant",
            "INSERT",
        ),
        (
            "INSERT INTO orders_ref.t_order (order_id) VALUES (1)",
            "INSERT",
        ),
        (
            "UPDATE t_merchant m, orders_ref.t_order r SET m.name = r.note",
            "UPDATE",
        ),
        (
            "DELETE r FROM orders_ref.t_order r WHERE r.order_id = 1",
            "DELETE",
        ),
        (
            "DELETE FROM order_meta.t_order_index WHERE order_id = 1",
            "DELETE",
        ),
    ] {
        let (code, message) = refusal(&mut c, sql).await;
        assert_eq!(code, 1142, "{sql}");
        assert!(
            message.starts_with(&format!("{command} command denied")),
            "{sql}: {message}"
        );
    }
    assert_eq!(refusal(&mut c, "SELECT orders_ref.f(1)").await.0, 1370);
    // Stacked statements: the first runs, the second is refused.
    let (code, _, _) = server_error(
        c.query_drop("SELECT 1; SELECT COUNT(*) FROM orders_ref.t_order")
            .await,
    );
    assert_eq!(code, 1142);
    // Prepared statements and EXPLAIN ROUTE refuse the same way.
    let (code, _, _) = server_error(
        c.prep("SELECT * FROM orders_ref.t_order WHERE order_id = ?")
            .await,
    );
    assert_eq!(code, 1142);
    let sql = format!("EXPLAIN ROUTE SELECT * FROM orders_ref.t_order WHERE order_id = {id}");
    assert_eq!(refusal(&mut c, &sql).await.0, 1142);
    // Inside the scope: the logical database, qualified or not, and information_schema.
    let n: Option<u64> = c
        .query_first("SELECT COUNT(*) FROM orders.t_merchant m WHERE m.merchant_id > 0")
        .await
        .unwrap();
    assert_eq!(n, Some(20));
    let sql = format!(
        "SELECT o.order_id FROM orders.t_order o JOIN t_order_item i ON o.order_id = i.order_id WHERE o.order_id = {id} LIMIT 1"
    );
    assert_eq!(rows(&mut c, &sql).await.len(), 1);
    let stmt = c
        .prep("SELECT COUNT(*) FROM t_order WHERE order_id = ?")
        .await
        .unwrap();
    let n: Option<u64> = c.exec_first(&stmt, (id,)).await.unwrap();
    assert_eq!(n, Some(1));
    // The catalog never shows another database's tables.
    let n: Option<u64> = c
        .query_first("SELECT COUNT(*) FROM information_schema.TABLES WHERE table_schema IN ('orders_ref', 'order_meta', 'mysql', 'order_shards')")
        .await
        .unwrap();
    assert_eq!(n, Some(0));
    assert_usable(&mut c).await;
    h.stop().await;
}

#[tokio::test]
async fn databases_outside_the_scope_are_refused_with_1044() {
    let h = Harness::start_with(scoped_config()).await;
    let mut c = h.client().await;
    let (code, message) = refusal(&mut c, "USE orders_ref").await;
    assert_eq!(code, 1044);
    assert_eq!(
        message,
        "Access denied for user 'app'@'127.0.0.1' to database 'orders_ref'"
    );
    for sql in [
        "USE mysql",
        "USE order_shards",
        "SHOW TABLES FROM orders_ref",
        "SHOW TABLE STATUS FROM mysql",
        "SHOW COLUMNS FROM t_order FROM orders_ref",
        "SHOW TRIGGERS FROM orders_ref",
        "SHOW CREATE DATABASE order_meta",
    ] {
        assert_eq!(refusal(&mut c, sql).await.0, 1044, "{sql}");
    }
    // Database names compare exactly (MariaDB's are case-sensitive on Linux).
    assert_eq!(refusal(&mut c, "USE ORDERS_REF").await.0, 1044);
    let db: Option<String> = c.query_first("SELECT DATABASE()").await.unwrap();
    assert_eq!(db.as_deref(), Some("orders"));
    // COM_INIT_DB and the handshake's database.
    let mut raw = RawClient::connect(h.addr).await;
    raw.send(2, b"orders_ref").await;
    assert!(
        matches!(raw.reply().await, RawReply::Err(1044, _)),
        "COM_INIT_DB"
    );
    raw.send(2, b"information_schema").await;
    assert!(matches!(raw.reply().await, RawReply::Ok(_)));
    let e = connect(&h, "app", Some("orders_ref")).await.map(|_| ());
    assert_eq!(server_code(e), 1044);
    h.stop().await;
}

#[tokio::test]
async fn a_granted_database_is_reachable_and_listed() {
    let h = Harness::start_with(scoped_config()).await;
    let mut g = connect(&h, "granted", Some("orders")).await.unwrap();
    let mut r = reference().await;
    let want: Option<u64> = r.query_first("SELECT COUNT(*) FROM t_order").await.unwrap();
    let n: Option<u64> = g
        .query_first("SELECT COUNT(*) FROM orders_ref.t_order")
        .await
        .unwrap();
    assert_eq!(n, want);
    exec(&mut g, "USE orders_ref").await;
    let n: Option<u64> = g.query_first("SELECT COUNT(*) FROM t_order").await.unwrap();
    assert_eq!(n, want);
    // Still nothing of the proxy's own databases.
    assert_eq!(
        refusal(&mut g, "SELECT * FROM order_meta.t_order_index")
            .await
            .0,
        1142
    );
    assert_eq!(
        strings(&mut g, "SHOW DATABASES").await,
        ["information_schema", "orders", "orders_ref"]
    );
    let n: Option<u64> = g
        .query_first("SELECT COUNT(*) FROM information_schema.TABLES WHERE table_schema = 'orders_ref' AND table_name = 't_order'")
        .await
        .unwrap();
    assert_eq!(n, Some(1));
    let mut c = h.client().await;
    assert_eq!(
        strings(&mut c, "SHOW DATABASES").await,
        ["information_schema", "orders"]
    );
    assert_eq!(
        strings(&mut c, "SHOW SCHEMAS LIKE 'ord%'").await,
        ["orders"]
    );
    assert_eq!(
        strings(&mut c, "SHOW DATABASES WHERE `Database` <> 'orders'").await,
        ["information_schema"]
    );
    assert_eq!(
        strings(
            &mut c,
            "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA ORDER BY SCHEMA_NAME"
        )
        .await,
        ["information_schema", "orders"]
    );
    h.stop().await;
}

/// ID, USER, DB, COMMAND, INFO of `information_schema.PROCESSLIST`.
type ProcessRow = (u32, String, Option<String>, String, Option<String>);

/// The ids `SHOW PROCESSLIST` lists.
async fn process_ids(c: &mut Conn, sql: &str) -> Vec<u32> {
    let rows: Vec<mysql_async::Row> = c.query(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows.into_iter()
        .map(|r| r.get::<u32, _>(0).unwrap())
        .collect()
}

#[tokio::test]
async fn processlist_shows_the_users_own_sessions_and_kill_takes_their_ids() {
    let h = Harness::start_with(scoped_config()).await;
    let mut a = h.client().await;
    let mut b = h.client().await;
    let mut g = connect(&h, "granted", Some("orders")).await.unwrap();
    let a_id = a.id();
    let b_id = b.id();
    let g_id = g.id();
    let mut own = vec![a_id, b_id];
    own.sort();
    assert_eq!(process_ids(&mut a, "SHOW PROCESSLIST").await, own);
    assert_eq!(process_ids(&mut a, "SHOW FULL PROCESSLIST").await, own);
    assert_eq!(
        process_ids(
            &mut a,
            "SELECT ID FROM information_schema.PROCESSLIST ORDER BY ID"
        )
        .await,
        own
    );
    // Its own row: the proxy's user, database and statement, never the backend account.
    let row: Option<ProcessRow> = a
        .query_first(format!(
            "SELECT ID, USER, DB, COMMAND, INFO FROM information_schema.PROCESSLIST WHERE ID = {a_id}"
        ))
        .await
        .unwrap();
    let (id, user, db, command, info) = row.unwrap();
    assert_eq!(
        (id, user.as_str(), db.as_deref()),
        (a_id, "app", Some("orders"))
    );
    assert_eq!(command, "Query");
    assert!(info.unwrap().contains("information_schema.PROCESSLIST"));
    let list: Vec<mysql_async::Row> = a.query("SHOW PROCESSLIST").await.unwrap();
    for row in list {
        assert_eq!(row.get::<String, _>(1).unwrap(), "app");
    }
    // Another user's session: 1095; its own other session: killed.
    let (code, _, message) = server_error(a.query_drop(format!("KILL {g_id}")).await);
    assert_eq!(
        (code, message),
        (1095, format!("You are not owner of thread {g_id}"))
    );
    exec(&mut a, &format!("KILL {b_id}")).await;
    assert!(
        b.query_drop("SELECT 1").await.is_err(),
        "killed session serves"
    );
    assert_eq!(process_ids(&mut a, "SHOW PROCESSLIST").await, [a_id]);
    assert_usable(&mut g).await;
    h.stop().await;
}

#[tokio::test]
async fn a_process_user_sees_and_kills_every_session() {
    let h = Harness::start_with(scoped_config()).await;
    let mut a = h.client().await;
    let mut g = connect(&h, "granted", Some("orders")).await.unwrap();
    let mut ops = connect(&h, "ops", Some("orders")).await.unwrap();
    let mut all = vec![a.id(), g.id(), ops.id()];
    all.sort();
    assert_eq!(process_ids(&mut ops, "SHOW PROCESSLIST").await, all);
    exec(&mut ops, &format!("KILL QUERY {}", g.id())).await;
    assert_usable(&mut g).await;
    exec(&mut ops, &format!("KILL {}", a.id())).await;
    assert!(
        a.query_drop("SELECT 1").await.is_err(),
        "killed session serves"
    );
    // A reload takes `process` away: COM_PROCESS_KILL as the session's first command after
    // it may no longer reach another user's session.
    let mut raw = RawClient::connect_as(h.addr, "ops", "app", "orders").await;
    let mut narrowed = scoped_config();
    let user = narrowed.users.iter_mut().find(|u| u.name == "ops");
    user.expect("the ops user").process = false;
    h.proxy.reload(narrowed).unwrap();
    let refused = raw.command(0x0c, &g.id().to_le_bytes()).await;
    assert_eq!(refused[0][0], 0xFF, "{refused:?}");
    assert_eq!(u16::from_le_bytes([refused[0][1], refused[0][2]]), 1095);
    assert_usable(&mut g).await;
    h.stop().await;
}

#[tokio::test]
async fn a_reload_that_takes_a_database_away_refuses_it_at_once() {
    let h = Harness::start_with(scoped_config()).await;
    let mut g = connect(&h, "granted", Some("orders")).await.unwrap();
    exec(&mut g, "USE orders_ref").await;
    let mut raw = RawClient::connect_as(h.addr, "granted", "app", "orders_ref").await;
    let columns = raw.command(0x04, b"t_order\0").await;
    assert!(columns.len() > 1, "COM_FIELD_LIST lists t_order's columns");
    let mut init = RawClient::connect_as(h.addr, "granted", "app", "orders").await;
    let mut narrowed = scoped_config();
    let granted = narrowed.users.iter_mut().find(|u| u.name == "granted");
    granted.expect("the granted user").databases.clear();
    h.proxy.reload(narrowed).unwrap();
    // Unqualified names would still reach the current database: refused until USE.
    assert_eq!(
        refusal(&mut g, "SELECT COUNT(*) FROM t_order").await.0,
        1044
    );
    assert_eq!(refusal(&mut g, "SELECT 1").await.0, 1044);
    // COM_FIELD_LIST names a table of the current database too: no column names.
    let refused = raw.command(0x04, b"t_order\0").await;
    assert_eq!(refused.len(), 1, "one ERR packet: {refused:?}");
    assert_eq!(refused[0][0], 0xFF);
    assert_eq!(u16::from_le_bytes([refused[0][1], refused[0][2]]), 1044);
    // COM_INIT_DB as a session's first command after the reload.
    let refused = init.command(0x02, b"orders_ref").await;
    assert_eq!(refused[0][0], 0xFF, "{refused:?}");
    assert_eq!(u16::from_le_bytes([refused[0][1], refused[0][2]]), 1044);
    assert_eq!(refusal(&mut g, "USE orders_ref").await.0, 1044);
    exec(&mut g, "USE orders").await;
    assert_eq!(
        refusal(&mut g, "SELECT COUNT(*) FROM orders_ref.t_order")
            .await
            .0,
        1142
    );
    assert_eq!(
        strings(&mut g, "SHOW DATABASES").await,
        ["information_schema", "orders"]
    );
    h.stop().await;
}

/// A session skips the scope check for a statement shape it ran under the same scope and
/// database (`engine/memo.rs`), and a prepared statement for a text it passed with: after
/// a reload, or in another database, the same shape with other values is checked again.
#[tokio::test]
async fn a_shape_run_before_a_reload_is_checked_again_after_it() {
    let h = Harness::start_with(scoped_config()).await;
    let mut g = connect(&h, "granted", Some("orders")).await.unwrap();
    let mut here = connect(&h, "granted", Some("orders_ref")).await.unwrap();
    let prepared = "SELECT COUNT(*) FROM t_order WHERE order_id = ?";
    for id in 1..4 {
        let qualified = format!("SELECT COUNT(*) FROM orders_ref.t_order WHERE order_id = {id}");
        let _: Vec<u64> = g.query(&qualified).await.unwrap();
        let unqualified = format!("SELECT COUNT(*) FROM t_order WHERE order_id = {id}");
        let _: Vec<u64> = here.query(&unqualified).await.unwrap();
        let _: Vec<u64> = here.exec(prepared, (id,)).await.unwrap();
    }
    let mut narrowed = scoped_config();
    let granted = narrowed.users.iter_mut().find(|u| u.name == "granted");
    granted.expect("the granted user").databases.clear();
    h.proxy.reload(narrowed).unwrap();
    assert_eq!(
        refusal(
            &mut g,
            "SELECT COUNT(*) FROM orders_ref.t_order WHERE order_id = 9"
        )
        .await
        .0,
        1142
    );
    // The statement prepared and executed before the reload: its execution is checked again.
    match here.exec::<u64, _, _>(prepared, (9,)).await {
        Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1044, "{}", e.message),
        other => panic!("a prepared statement outside the narrowed scope ran: {other:?}"),
    }
    assert_eq!(
        refusal(&mut here, "SELECT COUNT(*) FROM t_order WHERE order_id = 9")
            .await
            .0,
        1044
    );
    h.stop().await;
}

/// Found by attacking the scope: text the proxy once read differently from MariaDB
/// (comments, ODBC joins, backquoted names) hid a table of another database.
#[tokio::test]
async fn text_read_as_mariadb_reads_it_hides_no_table() {
    let h = Harness::start_with(scoped_config()).await;
    let mut c = h.client().await;
    for sql in [
        "SELECT 1 /*!050800 ' */ , (SELECT COUNT(*) FROM orders_ref.t_order) -- '",
        "SELECT 1 /*M!999999 /* */ ' */ , (SELECT COUNT(*) FROM orders_ref.t_order) -- '",
        "SELECT 1 --\x7f '\n, (SELECT COUNT(*) FROM orders_ref.t_order) -- '",
        "SELECT * FROM {OJ orders_ref.t_order LEFT OUTER JOIN t_merchant ON 1=0} LIMIT 1",
        // An index hint's FOR ORDER BY once ended the table list, in statements the SQL
        // parser cannot read as in those it can.
        "SELECT u.user FROM t_merchant USE INDEX FOR ORDER BY (PRIMARY), mysql.user u LOCK IN SHARE MODE",
        "SELECT 1 FROM t_merchant IGNORE INDEX FOR GROUP BY (PRIMARY), order_meta.t_order_index i LIMIT 1",
        "UPDATE t_merchant USE INDEX FOR ORDER BY (PRIMARY), orders_ref.t_order o SET o.status = o.status WHERE 1 = 0",
        "CREATE TABLE stolen SELECT * FROM t_merchant FORCE KEY FOR ORDER BY (PRIMARY), orders_ref.t_order",
        // A second attack: lists in parentheses after UPDATE and USING, ODBC braces with
        // any word, short executable comment versions, `value` as an alias.
        "UPDATE (t_merchant, order_meta.t_order_index) SET channel = channel WHERE 1 = 0",
        "DELETE FROM i USING (t_merchant m, orders_ref.t_order i) WHERE 1 = 0 AND \\N IS NULL",
        "SELECT user FROM { foo mysql.user LEFT OUTER JOIN t_merchant ON 1 = 0 }",
        "SELECT user, \\N FROM t_merchant /*!12where*/, mysql.user",
        "SELECT COUNT(*), \\N FROM t_merchant value, orders_ref.t_order",
        "UPDATE t_merchant value, orders_ref.t_order i SET i.status = i.status WHERE 1 = 0 AND \\N IS NULL",
        "LOCK TABLES t_merchant value READ, orders_ref.t_order READ",
        // A third attack: an executable comment inside one, a number touching FROM.
        "SELECT COUNT(*) /*! /*! FROM orders_ref.t_order -- */ */\n */",
        "SELECT COUNT(*), 1e1from orders_ref.t_order LIMIT ROWS EXAMINED 100000",
        "CREATE TABLE zz_m (order_id BIGINT) ENGINE=MERGE UNION (orders_ref.t_order) INSERT_METHOD=NO SELECT 1 AS order_id FROM t_merchant WHERE 1 = 0",
    ] {
        assert_eq!(refusal(&mut c, sql).await.0, 1142, "{sql}");
    }
    // A backquoted system variable is tracked like a bare one: the proxy then reads
    // "orders_ref"."t_order" as the server does.
    exec(&mut c, "SET `sql_mode` = 'ANSI_QUOTES'").await;
    let sql = "SELECT COUNT(*) FROM \"orders_ref\".\"t_order\" LOCK IN SHARE MODE";
    assert_eq!(refusal(&mut c, sql).await.0, 1142);
    let e = c
        .query_drop("SET `character_set_client` = sjis")
        .await
        .unwrap_err();
    assert!(e.to_string().contains("1115"), "{e}");
    assert_eq!(
        refusal(&mut c, "SELECT `load_file`('/etc/hostname')")
            .await
            .0,
        1227
    );
    // With information_schema current, its views are the proxy's in every position.
    exec(&mut c, "USE information_schema").await;
    for sql in [
        "SELECT t.name FROM engines e USE INDEX FOR ORDER BY (), innodb_sys_tables t",
        "SELECT COUNT(*) FROM { OJ routines LEFT OUTER JOIN tables ON 1 = 0 }",
        "SELECT COUNT(*), \\N FROM tables value, routines",
    ] {
        assert_eq!(refusal(&mut c, sql).await.0, 1142, "{sql}");
    }
    let hosts: Vec<String> = c
        .query("SELECT p.HOST FROM (SELECT 1) x STRAIGHT_JOIN PROCESSLIST p")
        .await
        .unwrap();
    assert_eq!(hosts, ["127.0.0.1"], "this session only");
    let schemas: Vec<String> = c
        .query("SELECT DISTINCT t.TABLE_SCHEMA FROM (TABLES t) ORDER BY 1")
        .await
        .unwrap();
    assert_eq!(schemas, ["information_schema", "orders"]);
    h.stop().await;
}

#[test]
fn naming_the_proxys_own_databases_is_a_configuration_error() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/config/demo.toml");
    let text = std::fs::read_to_string(path).unwrap();
    for (db, why) in [
        ("order_shards", "a shard database"),
        ("order_meta", "the index table's database"),
        ("MySQL", "the `mysql` system database"),
    ] {
        let broken = text.replacen(
            "password = \"app\"\n",
            &format!("password = \"app\"\ndatabases = [\"{db}\"]\n"),
            1,
        );
        let e = routekey_proxy::config::Config::from_toml(&broken, "demo.toml").unwrap_err();
        assert!(e.to_string().contains(why), "{db}: {e}");
    }
    let fine = text.replacen(
        "password = \"app\"\n",
        "password = \"app\"\ndatabases = [\"orders_ref\"]\nprocess = true\n",
        1,
    );
    let config = routekey_proxy::config::Config::from_toml(&fine, "demo.toml").unwrap();
    assert_eq!(config.users[0].databases, ["orders_ref"]);
    assert!(config.users[0].process);
}

/// Found by attacking the scope: in latin1 (and latin2) the byte 0xA0 is a space to the
/// server, so `USE\xA0mysql` changed the database of a pooled backend connection behind
/// the proxy's back (and every session that got the connection after it). Names with such
/// bytes outside quotes are refused in single-byte character sets; `USE` takes exactly one
/// name.
#[tokio::test]
async fn bytes_a_single_byte_character_set_reads_as_spaces_hide_no_name() {
    let h = Harness::start_with(scoped_config()).await;
    let mut raw = RawClient::connect(h.addr).await;
    let code = |packets: &[Vec<u8>]| {
        let p = &packets[0];
        (p[0] == 0xFF).then(|| u16::from_le_bytes([p[1], p[2]]))
    };
    assert_eq!(code(&raw.command(0x03, b"SET NAMES latin1").await), None);
    for sql in [
        &b"USE\xa0mysql"[..],
        b"SELECT user FROM\xa0mysql.user",
        b"SELECT user FROM t_merchant\xa0JOIN mysql.user",
        b"SELECT `caf\xe9` FROM t_merchant\xa0JOIN orders_ref.t_order",
    ] {
        let reply = raw.command(0x03, sql).await;
        assert_eq!(code(&reply), Some(1235), "{}", String::from_utf8_lossy(sql));
    }
    // Quoted, such bytes are names as usual.
    let reply = raw.command(0x03, b"SELECT 1 AS `caf\xe9`").await;
    assert_eq!(reply[0], [1], "one column: {reply:?}");
    let rows = raw.read_until_eof().await;
    assert_eq!(rows.len(), 2, "one row and EOF: {rows:?}");
    for sql in ["USE /*!mysql*/", "USE orders_ref extra"] {
        let reply = raw.command(0x03, sql.as_bytes()).await;
        assert!(
            code(&reply).is_some(),
            "{sql}: {:?}",
            String::from_utf8_lossy(&reply[0])
        );
    }
    // No pooled connection was moved to another database.
    assert_pool_serves_the_logical_database(&h).await;
    h.stop().await;
}

/// Found by attacking the scope: a stored program runs SQL the proxy never sees (a
/// `PREPARE` of a string built at run time), so creating one is refused in every
/// spelling of its DEFINER clause; and an executable comment inside one could run `USE`
/// on a pooled connection.
#[tokio::test]
async fn stored_programs_and_hidden_use_are_refused() {
    let h = Harness::start_with(scoped_config()).await;
    let mut c = h.client().await;
    for sql in [
        "CREATE DEFINER=CURRENT_USER() PROCEDURE zz_p() SQL SECURITY INVOKER BEGIN PREPARE s FROM CONCAT('SELECT COUNT(*) FROM orders', '_ref.t_order'); EXECUTE s; DEALLOCATE PREPARE s; END",
        "CREATE DEFINER = CURRENT_USER ( ) FUNCTION zz_f() RETURNS INT RETURN 1",
        "CREATE DEFINER=view@localhost PROCEDURE zz_p() SELECT 1",
    ] {
        assert_eq!(refusal(&mut c, sql).await.0, 1227, "{sql}");
    }
    let sql = "SELECT 1 /*! /*! ; USE orders_ref -- */ */\n */";
    assert!(c.query_drop(sql).await.is_err(), "{sql}");
    let hidden_use = "/*! /*! USE orders_ref -- */ */\n */";
    assert!(c.query_drop(hidden_use).await.is_err(), "{hidden_use}");
    assert_pool_serves_the_logical_database(&h).await;
    h.stop().await;
}

/// The databases the datasources have (read at start, then every minute) back the reader
/// up like those the configuration names: `orders_ref.x` is refused wherever it stands
/// for a user without it, and left to the server for a user granted it.
#[tokio::test]
async fn databases_the_servers_have_are_refused_wherever_they_stand() {
    let h = Harness::start_with(scoped_config()).await;
    h.proxy.learn_server_databases().await;
    let known = h.proxy.server_databases();
    assert!(
        known.names.iter().any(|n| n == "orders_ref") && known.version > 0,
        "{known:?}"
    );
    let mut c = h.client().await;
    let sql = "SELECT orders_ref.t_order FROM t_merchant LIMIT 1";
    assert_eq!(refusal(&mut c, sql).await.0, 1142, "{sql}");
    let mut g = connect(&h, "granted", Some("orders")).await.unwrap();
    match g.query_drop(sql).await {
        Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1054, "{e}"),
        other => panic!("the server's unknown column, got {other:?}"),
    }
    h.stop().await;
}
