//! The engine's unit tests: a session driven command by command, as the frontend's loop
//! drives it, against two in-process backends ([`crate::backend::memory`]) that speak the
//! MySQL protocol and answer from a script. No MariaDB: `cargo test --lib` runs them
//! anywhere. Placement is checked by what each backend received.

mod harness;

use mysql_common::constants::{ColumnType, Command, StatusFlags};
use mysql_common::value::Value;

use super::command::protocol_command;
use crate::backend::memory::Reply;
use crate::config::Config;
use harness::{Answer, COLLATION, Harness, IN_TRANS, order_id};

#[tokio::test]
async fn a_text_point_select_goes_to_its_shard_and_relays_the_rows() {
    let mut h = Harness::start().await;
    let id = order_id(5, 7);
    let shard = id % 4;
    h.ds0.answer(
        &format!(
            "SELECT order_id, status FROM `order_shards`.`t_order_{shard}` WHERE order_id = {id}"
        ),
        Reply::Rows {
            table: format!("order_shards.t_order_{shard}"),
            columns: vec![
                ("order_id".into(), ColumnType::MYSQL_TYPE_VAR_STRING),
                ("status".into(), ColumnType::MYSQL_TYPE_VAR_STRING),
            ],
            rows: vec![vec![Some(id.to_string()), Some("PAID".into())]],
        },
    );
    let answer = h
        .query(&format!(
            "SELECT order_id, status FROM t_order WHERE order_id = {id}"
        ))
        .await;
    assert_eq!(
        answer,
        Answer::Rows {
            columns: vec!["order_id".into(), "status".into()],
            // The physical table's name is the logical one's to the client.
            tables: vec!["t_order".into(), "t_order".into()],
            rows: vec![vec![
                Value::Bytes(id.to_string().into_bytes()),
                Value::Bytes(b"PAID".to_vec())
            ]],
            status: StatusFlags::SERVER_STATUS_AUTOCOMMIT.bits(),
        },
        "{:?}",
        h.ds0.received()
    );
    assert_eq!(
        h.ds0.statements(),
        [format!(
            "SELECT order_id, status FROM `order_shards`.`t_order_{shard}` WHERE order_id = {id}"
        )]
    );
    assert!(h.ds1.statements().is_empty());
}

#[tokio::test]
async fn a_prepared_point_select_is_prepared_and_executed_on_its_shard() {
    let mut h = Harness::start().await;
    let id = order_id(5, 10);
    let shard = id % 4;
    let physical =
        format!("SELECT order_id, amount FROM `order_shards`.`t_order_{shard}` WHERE order_id = ?");
    let reply = Reply::Rows {
        table: String::new(),
        columns: vec![
            ("order_id".into(), ColumnType::MYSQL_TYPE_LONGLONG),
            ("amount".into(), ColumnType::MYSQL_TYPE_DOUBLE),
        ],
        rows: vec![vec![Some(id.to_string()), Some("12.5".into())]],
    };
    // The client's PREPARE is checked on the first shard; its execution runs on the id's.
    let first = "SELECT order_id, amount FROM `order_shards`.`t_order_0` WHERE order_id = ?";
    h.ds0.answer(first, reply.clone());
    h.ds0.answer(&physical, reply);
    let Answer::Prepared {
        id: statement,
        params: 1,
        columns: 2,
    } = h
        .prepare("SELECT order_id, amount FROM t_order WHERE order_id = ?")
        .await
    else {
        panic!("not prepared: {:?}", h.ds0.received());
    };
    let answer = h.execute(statement, &[Value::UInt(id)]).await;
    assert_eq!(
        answer,
        Answer::Rows {
            columns: vec!["order_id".into(), "amount".into()],
            tables: vec![String::new(), String::new()],
            rows: vec![vec![Value::Int(id as i64), Value::Double(12.5)]],
            status: StatusFlags::SERVER_STATUS_AUTOCOMMIT.bits(),
        },
        "{:?}",
        h.ds0.received()
    );
    // The client's value is the one bound on the shard.
    assert!(
        h.ds0
            .statements()
            .contains(&format!("EXECUTE {physical} [{id}]")),
        "{:?}",
        h.ds0.received()
    );
    assert!(h.ds1.statements().is_empty(), "{:?}", h.ds1.received());
}

#[tokio::test]
async fn a_transaction_pins_one_connection_until_commit() {
    let mut h = Harness::start().await;
    let (a, b) = (order_id(5, 1), order_id(5, 2));
    for id in [a, b] {
        h.ds0.answer(
            &format!(
                "UPDATE `order_shards`.`t_order_{}` SET status = 'PAID' WHERE order_id = {id}",
                id % 4
            ),
            Reply::Ok {
                affected: 1,
                insert_id: 0,
            },
        );
    }
    let ds0 = crate::config::DatasourceId(0);
    let begin = h.query("BEGIN").await;
    assert!(matches!(begin, Answer::Ok { status, .. } if status & IN_TRANS != 0));
    for id in [a, b] {
        let update = h
            .query(&format!(
                "UPDATE t_order SET status = 'PAID' WHERE order_id = {id}"
            ))
            .await;
        assert!(
            matches!(update, Answer::Ok { affected: 1, status, .. } if status & IN_TRANS != 0),
            "{update:?} {:?}",
            h.ds0.received()
        );
        assert!(
            h.session.txn.holds(ds0),
            "held between the transaction's statements"
        );
    }
    let commit = h.query("COMMIT").await;
    assert!(matches!(commit, Answer::Ok { status, .. } if status & IN_TRANS == 0));
    assert!(!h.session.txn.holds_any(), "given back at COMMIT");
    // Outside a transaction nothing is held between statements.
    h.query(&format!(
        "UPDATE t_order SET status = 'PAID' WHERE order_id = {a}"
    ))
    .await;
    assert!(!h.session.txn.holds_any());
    // One connection carried the transaction, from its BEGIN to its COMMIT.
    let on_connection = h.ds0.received_by_connection();
    let carried: Vec<_> = on_connection
        .iter()
        .filter(|(_, s)| !s.starts_with("SET "))
        .collect();
    assert_eq!(carried.len(), 5, "{on_connection:?}");
    assert_eq!(carried[0].1, "BEGIN");
    assert_eq!(carried[3].1, "COMMIT");
    assert!(
        carried[..4].iter().all(|(c, _)| *c == carried[0].0),
        "{on_connection:?}"
    );
    assert!(h.ds1.received().is_empty());
}

#[tokio::test]
async fn a_set_is_read_back_and_carried_to_the_other_datasource() {
    let mut h = Harness::start().await;
    // The server computes the value; the session carries what it read back, typed as the
    // server typed it (an integer: a quoted '10' would be refused by MariaDB, 1232).
    h.ds0.answer(
        "SELECT @@session.sql_select_limit LIMIT 1",
        Reply::Rows {
            table: String::new(),
            columns: vec![(
                "@@session.sql_select_limit".into(),
                ColumnType::MYSQL_TYPE_LONGLONG,
            )],
            rows: vec![vec![Some("10".into())]],
        },
    );
    let set = h.query("SET sql_select_limit = 5 + 5").await;
    assert!(
        matches!(set, Answer::Ok { .. }),
        "{set:?} {:?}",
        h.ds0.received()
    );
    assert_eq!(
        h.ds0.received(),
        [
            "SET sql_select_limit = 5 + 5",
            "SELECT @@session.sql_select_limit LIMIT 1"
        ]
    );
    // BIZ_CHANNEL (3): shards 12-15, on ds1.
    let id = order_id(3, 3);
    let physical = format!(
        "SELECT status FROM `order_shards`.`t_order_{}` WHERE order_id = {id}",
        12 + id % 4
    );
    h.ds1
        .answer(&physical, Reply::rows(&["status"], &[&[Some("NEW")]]));
    let select = h
        .query(&format!("SELECT status FROM t_order WHERE order_id = {id}"))
        .await;
    assert!(
        matches!(select, Answer::Rows { .. }),
        "{select:?} {:?}",
        h.ds1.received()
    );
    assert_eq!(
        h.ds1.received(),
        ["SET @@session.sql_select_limit = 10".to_owned(), physical],
        "the read-back value set before the statement"
    );
}

#[tokio::test]
async fn a_statement_the_proxy_cannot_place_is_refused_before_any_backend_sees_it() {
    let mut h = Harness::start().await;
    // One channel's shards, all on ds0: only the user's scatter policy refuses it (app has
    // no scatter_writes).
    let answer = h
        .query("DELETE FROM t_order WHERE channel = 'EU_CHANNEL' AND status = 'NEW'")
        .await;
    let Answer::Error { code, message } = answer else {
        panic!("not refused: {answer:?} {:?}", h.ds0.received());
    };
    assert_eq!(code, crate::error::ER_NOT_SUPPORTED_YET, "{message}");
    assert!(message.contains("scatter"), "{message}");
    assert!(h.ds0.statements().is_empty(), "{:?}", h.ds0.received());
    assert!(h.ds1.statements().is_empty(), "{:?}", h.ds1.received());
}

#[tokio::test]
async fn a_scatter_count_is_the_sum_of_every_shards_count() {
    let mut h = Harness::start_with(|toml| {
        toml.replace("[sharding]\n", "[sharding]\ncombine_shards = false\n")
    })
    .await;
    let config = h.session.rt.config.clone();
    let mut expected = 0;
    for (shard, placed) in config.sharding.shards.iter().enumerate() {
        let count = shard * 3 + 1;
        expected += count;
        let server = if placed.datasource.0 == 0 {
            &h.ds0
        } else {
            &h.ds1
        };
        server.answer(
            // The merge reads the count from a column of its own, after the client's.
            &format!("SELECT COUNT(*) , COUNT(*) FROM `order_shards`.`t_order_{shard}`"),
            Reply::Rows {
                table: String::new(),
                columns: vec![
                    ("COUNT(*)".into(), ColumnType::MYSQL_TYPE_LONGLONG),
                    ("COUNT(*)".into(), ColumnType::MYSQL_TYPE_LONGLONG),
                ],
                rows: vec![vec![Some(count.to_string()), Some(count.to_string())]],
            },
        );
    }
    let answer = h.query("SELECT COUNT(*) FROM t_order").await;
    let Answer::Rows { rows, .. } = &answer else {
        panic!("{answer:?} {:?}", h.ds0.received());
    };
    assert_eq!(
        rows,
        &vec![vec![Value::Bytes(expected.to_string().into_bytes())]]
    );
    assert_eq!(
        h.ds0.statements().len() + h.ds1.statements().len(),
        config.sharding.shards.len()
    );
}

#[tokio::test]
async fn a_write_over_two_shards_is_atomic_and_a_failed_step_rolls_it_back() {
    let mut h = Harness::start().await;
    // EU_CHANNEL: shards 0-3, all on ds0; the two ids fall on two of them.
    let (a, b) = (order_id(5, 1), order_id(5, 2));
    assert_ne!(a % 4, b % 4);
    let update = |id: u64| {
        format!(
            "UPDATE `order_shards`.`t_order_{}` SET status = 'PAID' WHERE order_id IN ({a}, {b})",
            id % 4
        )
    };
    h.ds0.answer(
        &update(a),
        Reply::Ok {
            affected: 1,
            insert_id: 0,
        },
    );
    h.ds0.answer(
        &update(b),
        Reply::Ok {
            affected: 1,
            insert_id: 0,
        },
    );
    let sql = format!("UPDATE t_order SET status = 'PAID' WHERE order_id IN ({a}, {b})");
    let answer = h.query(&sql).await;
    assert!(
        matches!(answer, Answer::Ok { affected: 2, status, .. } if status & IN_TRANS == 0),
        "{answer:?} {:?}",
        h.ds0.received()
    );
    let statements = h.ds0.statements();
    assert_eq!(
        statements.first().map(String::as_str),
        Some("BEGIN"),
        "{statements:?}"
    );
    assert_eq!(
        statements.last().map(String::as_str),
        Some("COMMIT"),
        "{statements:?}"
    );
    assert_eq!(statements.len(), 4, "{statements:?}");
    let connections: std::collections::BTreeSet<u32> = h
        .ds0
        .received_by_connection()
        .into_iter()
        .filter(|(_, s)| !s.starts_with("SET "))
        .map(|(c, _)| c)
        .collect();
    assert_eq!(connections.len(), 1, "one transaction, one connection");

    // The second shard refuses: the first one's change is rolled back, and the client
    // gets the backend's error.
    h.ds0.answer(
        &update(b),
        Reply::Error {
            code: crate::error::ER_LOCK_WAIT_TIMEOUT,
            state: *b"HY000",
            message: "Lock wait timeout exceeded; try restarting transaction".into(),
        },
    );
    let answer = h.query(&sql).await;
    assert!(
        matches!(
            answer,
            Answer::Error {
                code: crate::error::ER_LOCK_WAIT_TIMEOUT,
                ..
            }
        ),
        "{answer:?}"
    );
    let statements = h.ds0.statements();
    assert_eq!(
        statements[4..],
        [
            "BEGIN".to_owned(),
            update(a),
            update(b),
            "ROLLBACK".to_owned()
        ],
        "the first shard's change, then the failed one, then the rollback"
    );
}

#[tokio::test]
async fn protocol_commands_without_a_statement() {
    let mut h = Harness::start().await;
    assert!(matches!(
        h.command(Command::COM_PING, b"").await,
        Answer::Ok { .. }
    ));
    let unknown = h.command(Command::COM_DEBUG, b"").await;
    assert!(
        matches!(unknown, Answer::Error { code: 1047, .. }),
        "{unknown:?}"
    );
    // A database outside the user's scope: refused by the proxy (1044), no backend asked.
    let init = h.command(Command::COM_INIT_DB, b"mysql").await;
    assert!(matches!(init, Answer::Error { code: 1044, .. }), "{init:?}");
    assert!(h.ds0.received().is_empty(), "{:?}", h.ds0.received());
    assert_eq!(h.session.database(), Some("orders"));
}

#[tokio::test]
async fn an_ok_with_a_large_insert_id_reaches_the_client_whole() {
    // The OK a server sends after `LAST_INSERT_ID(expr)`: an insert id of 8 bytes.
    let mut h = Harness::start().await;
    let id = order_id(5, 9);
    h.ds0.answer(
        &format!(
            "UPDATE `order_shards`.`t_order_{}` SET note = 'x' WHERE order_id = {id}",
            id % 4
        ),
        Reply::Ok {
            affected: 1,
            insert_id: id,
        },
    );
    let answer = h
        .query(&format!(
            "UPDATE t_order SET note = 'x' WHERE order_id = {id}"
        ))
        .await;
    assert!(
        matches!(answer, Answer::Ok { affected: 1, .. }),
        "{answer:?} {:?}",
        h.ds0.received()
    );
    assert_eq!(h.session.state.last_insert_id, id);
}

#[tokio::test]
async fn a_multi_statement_query_answers_each_statement_in_turn() {
    let mut h = Harness::start().await;
    // COM_SET_OPTION 0: multi-statements on (the reply is an EOF packet).
    h.client.stream.reset_seq();
    protocol_command(
        &mut h.session,
        &mut h.client,
        &[Command::COM_SET_OPTION as u8, 0, 0],
        COLLATION,
    )
    .await
    .unwrap();
    h.client.flush().await.unwrap();
    h.peer.reset_seq();
    assert_eq!(h.packet().await[0], 0xFE);
    let (a, b) = (order_id(5, 3), order_id(3, 4));
    // EU_CHANNEL's shards start at 0 (ds0), BIZ_CHANNEL's at 12 (ds1). The second statement
    // goes to the backend as the client wrote it after the `;`, its space included.
    let select = |base: u64, id: u64| {
        format!(
            "SELECT status FROM `order_shards`.`t_order_{}` WHERE order_id = {id}",
            base + id % 4
        )
    };
    h.ds0
        .answer(&select(0, a), Reply::rows(&["status"], &[&[Some("A")]]));
    h.ds1.answer(
        &format!(" {}", select(12, b)),
        Reply::rows(&["status"], &[&[Some("B")]]),
    );
    let more = StatusFlags::SERVER_MORE_RESULTS_EXISTS.bits();
    let first = h
        .query(&format!(
            "SELECT status FROM t_order WHERE order_id = {a}; SELECT status FROM t_order WHERE order_id = {b}"
        ))
        .await;
    assert!(
        matches!(&first, Answer::Rows { rows, status, .. } if rows[0][0] == Value::Bytes(b"A".to_vec()) && status & more != 0),
        "{first:?} {:?} {:?}",
        h.ds0.received(),
        h.ds1.received()
    );
    let second = h.read_answer(Command::COM_QUERY).await;
    assert!(
        matches!(&second, Answer::Rows { rows, status, .. } if rows[0][0] == Value::Bytes(b"B".to_vec()) && status & more == 0),
        "{second:?}"
    );
}

#[tokio::test]
async fn a_reset_connection_keeps_the_database_and_forgets_the_rest() {
    let mut h = Harness::start().await;
    h.ds0.answer(
        "SELECT ? + 1",
        Reply::Rows {
            table: String::new(),
            columns: vec![("? + 1".into(), ColumnType::MYSQL_TYPE_LONGLONG)],
            rows: vec![vec![Some("2".into())]],
        },
    );
    let Answer::Prepared { id: statement, .. } = h.prepare("SELECT ? + 1").await else {
        panic!("not prepared: {:?}", h.ds0.received());
    };
    h.query("SET @mark = 1").await;
    h.session.state.set_last_insert_id(5);
    let reset = h.command(Command::COM_RESET_CONNECTION, b"").await;
    assert!(matches!(reset, Answer::Ok { .. }), "{reset:?}");
    assert_eq!(h.session.database(), Some("orders"));
    assert_eq!(h.session.state.last_insert_id, 0);
    assert!(h.session.state.vars.get("@mark").is_none());
    let gone = h.execute(statement, &[Value::Int(1)]).await;
    assert!(matches!(gone, Answer::Error { code: 1243, .. }), "{gone:?}");
}

#[tokio::test]
async fn a_reload_that_widens_the_scope_reaches_the_session_at_its_next_command() {
    let mut h = Harness::start().await;
    let refused = h.command(Command::COM_INIT_DB, b"reports").await;
    assert!(
        matches!(refused, Answer::Error { code: 1044, .. }),
        "{refused:?}"
    );
    let toml = include_str!("../../../config/demo.toml")
        .replace("127.0.0.1:33061", &h.ds0.address())
        .replace("127.0.0.1:33062", &h.ds1.address())
        .replace(
            "name = \"app\"\npassword = \"app\"\n",
            "name = \"app\"\npassword = \"app\"\ndatabases = [\"reports\"]\n",
        );
    let config = Config::from_toml(&toml, "demo.toml").expect("the widened configuration");
    h.session.proxy.reload(config).expect("reloaded");
    let allowed = h.command(Command::COM_INIT_DB, b"reports").await;
    assert!(
        matches!(allowed, Answer::Ok { .. }),
        "{allowed:?} {:?}",
        h.ds0.received()
    );
    assert_eq!(h.session.database(), Some("reports"));
}

/// The statement a shard's part of `SELECT COUNT(*) FROM t_order` is (the merge reads the
/// count from a column of its own, after the client's).
fn count_of(shard: usize) -> String {
    format!("SELECT COUNT(*) , COUNT(*) FROM `order_shards`.`t_order_{shard}`")
}

fn counts(rows: Vec<Vec<Option<String>>>, name: &str) -> Reply {
    Reply::Rows {
        table: String::new(),
        columns: vec![
            ("COUNT(*)".into(), ColumnType::MYSQL_TYPE_LONGLONG),
            (name.into(), ColumnType::MYSQL_TYPE_LONGLONG),
        ],
        rows,
    }
}

#[tokio::test]
async fn a_combined_scatter_sends_one_statement_per_datasource_once_its_columns_are_known() {
    let mut h = Harness::start().await;
    let config = h.session.rt.config.clone();
    let mut expected = 0;
    let mut branches = [Vec::new(), Vec::new()];
    let mut rows = [Vec::new(), Vec::new()];
    for (shard, placed) in config.sharding.shards.iter().enumerate() {
        let count = shard * 3 + 1;
        expected += count;
        let ds = usize::from(placed.datasource.0);
        branches[ds].push(format!("({}\n)", count_of(shard)));
        rows[ds].push(vec![Some(count.to_string()), Some(count.to_string())]);
    }
    let union = |parts: &[String]| parts.join(" UNION ALL ");
    let (all0, rest0, all1) = (
        union(&branches[0]),
        union(&branches[0][1..]),
        union(&branches[1]),
    );
    h.ds0
        .answer(&count_of(0), counts(rows[0][..1].to_vec(), "COUNT(*)"));
    h.ds0
        .answer(&rest0, counts(rows[0][1..].to_vec(), "COUNT(*)"));
    h.ds0.answer(&all0, counts(rows[0].clone(), "COUNT(*)"));
    h.ds1.answer(&all1, counts(rows[1].clone(), "COUNT(*)"));
    let sum = async |h: &mut Harness| {
        let answer = h.query("SELECT COUNT(*) FROM t_order").await;
        let Answer::Rows { rows, .. } = &answer else {
            panic!("{answer:?} {:?}", h.ds0.received());
        };
        assert_eq!(
            rows,
            &vec![vec![Value::Bytes(expected.to_string().into_bytes())]]
        );
    };
    // First: the first shard alone (its columns are the answer's), its datasource's other
    // shards in one statement, the other datasource's in one.
    sum(&mut h).await;
    assert_eq!(h.ds0.statements(), [count_of(0), rest0.clone()]);
    assert_eq!(h.ds1.statements(), std::slice::from_ref(&all1));
    // Again: the description is kept; one statement per datasource.
    sum(&mut h).await;
    assert_eq!(h.ds0.statements()[2..], *std::slice::from_ref(&all0));
    assert_eq!(h.ds1.statements().len(), 2);
    // The union now describes its columns otherwise (a table changed outside the proxy):
    // the read runs again, describing, and the client sees only the answer.
    h.ds0.answer(&all0, counts(rows[0].clone(), "COUNT(*) "));
    h.ds0
        .answer(&rest0, counts(rows[0][1..].to_vec(), "COUNT(*) "));
    sum(&mut h).await;
    assert_eq!(
        h.ds0.statements()[3..],
        [all0.clone(), count_of(0), rest0.clone()]
    );
    assert_eq!(h.ds1.statements().len(), 4);
    // Described again: one statement per datasource.
    sum(&mut h).await;
    assert_eq!(h.ds0.statements()[6..], *std::slice::from_ref(&all0));
    // DDL through the proxy forgets every description.
    let _ = h.query("ALTER TABLE t_merchant ADD COLUMN x INT").await;
    let before = h.ds0.statements().len();
    sum(&mut h).await;
    assert_eq!(h.ds0.statements()[before..], [count_of(0), rest0]);
}

#[tokio::test]
async fn a_failing_shard_of_a_merged_read_fails_it_naming_its_datasource_and_table() {
    let mut h = Harness::start().await;
    let config = h.session.rt.config.clone();
    let mut branches = [Vec::new(), Vec::new()];
    for (shard, placed) in config.sharding.shards.iter().enumerate() {
        branches[usize::from(placed.datasource.0)].push(format!("({}\n)", count_of(shard)));
    }
    let union = |parts: &[String]| parts.join(" UNION ALL ");
    h.ds0.answer(
        &count_of(0),
        counts(vec![vec![Some("1".into()); 2]], "COUNT(*)"),
    );
    h.ds0.answer(
        &union(&branches[0][1..]),
        counts(vec![vec![Some("1".into()); 2]; 9], "COUNT(*)"),
    );
    h.ds1.answer(
        &union(&branches[1]),
        Reply::Error {
            code: 1146,
            state: *b"42S02",
            message: "Table 'order_shards.t_order_13' doesn't exist".into(),
        },
    );
    let answer = h.query("SELECT COUNT(*) FROM t_order").await;
    let Answer::Error { code, message } = &answer else {
        panic!("a partial answer: {answer:?}");
    };
    assert_eq!(*code, 1146);
    assert_eq!(
        message,
        "Table 'order_shards.t_order_13' doesn't exist (on datasource ds1)"
    );
    // The columns were described before ds1 failed (by the first shard and ds0's other
    // shards): the next read sends one statement per datasource.
    h.ds0.answer(
        &union(&branches[0]),
        counts(vec![vec![Some("1".into()); 2]; 10], "COUNT(*)"),
    );
    h.ds1.answer(
        &union(&branches[1]),
        counts(vec![vec![Some("1".into()); 2]; 10], "COUNT(*)"),
    );
    let answer = h.query("SELECT COUNT(*) FROM t_order").await;
    assert!(
        matches!(&answer, Answer::Rows { rows, .. } if rows == &vec![vec![Value::Bytes(b"20".to_vec())]]),
        "{answer:?}"
    );
    // The data statements (the proxy's own reads of the shard map while the 1146, which
    // names a shard table, waited at a possible fence aside: none stood, so it stood).
    let data = h
        .ds0
        .statements()
        .iter()
        .filter(|s| s.contains("t_order"))
        .count();
    assert_eq!(data, 3);
}
