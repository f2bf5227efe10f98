//! What drivers send around their statements: SET STATEMENT ... FOR (Connector/J's query
//! timeout in text mode) and the IGNORE_SPACE client flag (Connector/J, `mariadb
//! --ignore-spaces`).

mod common;

use common::*;
use mysql_async::prelude::*;

#[tokio::test]
async fn set_statement_for_a_sharded_statement_is_routed_with_its_prefix() {
    let h = Harness::start().await;
    let id = seed().channels["CN_CHANNEL"].new_format_ids[1];
    let mut c = h.client().await;
    let got: Option<u64> = c
        .query_first(format!(
            "SET STATEMENT max_statement_time=5 FOR SELECT order_id FROM t_order WHERE order_id = {id}"
        ))
        .await
        .unwrap();
    assert_eq!(got, Some(id));
    // The limit reaches the shard: a statement over it is interrupted there.
    let r = c
        .query_drop(format!(
            "SET STATEMENT max_statement_time=0.5 FOR SELECT order_id, SLEEP(3) FROM t_order WHERE order_id = {id}"
        ))
        .await;
    assert_eq!(server_code(r), 1969);
    assert_usable(&mut c).await;
}

#[tokio::test]
async fn the_ignore_space_client_flag_reaches_every_connection_of_the_session() {
    let h = Harness::start().await;
    let id = seed().channels["BIZ_CHANNEL"].new_format_ids[1]; // ds1
    // Async: the proxy runs on this test's runtime and must keep serving meanwhile.
    let out = tokio::process::Command::new("mariadb")
        .args([
            "--no-defaults",
            "--ignore-spaces",
            "-h127.0.0.1",
            &format!("-P{}", h.addr.port()),
            "-uapp",
            "-papp",
            "orders",
            "-N",
            "-e",
        ])
        .arg(format!(
            "SELECT COUNT (*) FROM t_merchant; SELECT COUNT (*) FROM t_order WHERE order_id = {id}; SELECT @@sql_mode LIKE '%IGNORE_SPACE%'"
        ))
        .output()
        .await
        .expect("the mariadb client (installed with the sandbox)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout.split_whitespace().collect::<Vec<_>>(),
        ["20", "1", "1"]
    );
}
