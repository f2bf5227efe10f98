//! A DBA's tools through the proxy: `mariadb-dump` of the logical database (LOCK TABLES
//! and `--single-transaction`, whole database and one table) restored into an empty
//! scratch MariaDB server holds exactly the rows of every shard; `SHOW TABLE STATUS` and
//! `information_schema` describe the logical tables (sizes summed over the shards) and
//! never show the physical ones; `LOCK TABLES` of a logical table holds writes on every
//! shard until `UNLOCK TABLES`.

mod common;

use common::*;
use mysql_async::prelude::*;

/// `(rows, checksum)` of a table's rows: COUNT(*) and BIT_XOR of a CRC32 per row, which
/// combine across shards by addition and XOR.
const ORDER_DIGEST: &str = "SELECT COUNT(*), COALESCE(BIT_XOR(CRC32(CONCAT_WS('|', order_id, channel, region, user_id, amount, status, IFNULL(note, '~'), created_at))), 0)";
const ITEM_DIGEST: &str = "SELECT COUNT(*), COALESCE(BIT_XOR(CRC32(CONCAT_WS('|', order_id, item_no, sku, qty, price))), 0)";

/// The digest of a logical table read straight from every physical shard.
async fn shards_digest(table: usize) -> (u64, u64) {
    let digest = if table == 0 {
        ORDER_DIGEST
    } else {
        ITEM_DIGEST
    };
    let mut total = (0u64, 0u64);
    let shards = config().sharding.shards.len() as u32;
    for shard in 0..shards {
        let (ds, t, ti) = physical(shard);
        let name = if table == 0 { t } else { ti };
        let mut conn = backend(ds).await;
        let (n, x): (u64, u64) = conn
            .query_first(format!("{digest} FROM {name}"))
            .await
            .unwrap()
            .unwrap();
        total = (total.0 + n, total.1 ^ x);
    }
    total
}

/// Tests of this file one at a time: a dump must not see another test's rows come and go,
/// nor wait on its lock.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn digest_of(conn: &mut mysql_async::Conn, table: usize, name: &str) -> (u64, u64) {
    let digest = if table == 0 {
        ORDER_DIGEST
    } else {
        ITEM_DIGEST
    };
    conn.query_first(format!("{digest} FROM {name}"))
        .await
        .unwrap()
        .unwrap()
}

/// A MariaDB client program (`mariadb`, `mariadb-dump`) connecting to the proxy as `app`.
fn to_proxy(program: &str, h: &Harness) -> std::process::Command {
    let mut c = std::process::Command::new(program);
    c.args([
        "--no-defaults",
        "--protocol=TCP",
        "-h127.0.0.1",
        "-uapp",
        "-papp",
    ])
    .arg(format!("-P{}", h.addr.port()));
    c
}

/// Runs `mariadb-dump` against the proxy; panics with its stderr when it fails.
fn dump(h: &Harness, args: &[&str]) -> Vec<u8> {
    let out = to_proxy("mariadb-dump", h)
        .args(args)
        .output()
        .expect("mariadb-dump runs (scripts/sandbox.sh installs the MariaDB client)");
    assert!(
        out.status.success(),
        "mariadb-dump {args:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "mariadb-dump {args:?} warned: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// An empty MariaDB server of this test's own (own data directory under the sandbox
/// folder, a free port), to restore dumps into as a DBA would; killed and removed on drop.
struct ScratchServer {
    server: std::process::Child,
    dir: std::path::PathBuf,
    port: u16,
}

impl ScratchServer {
    fn start() -> Self {
        let root = std::env::var("ROUTEKEY_SANDBOX_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|_| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".sandbox"));
        let dir = root.join(format!("scratch-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (data, tmp) = (dir.join("data"), dir.join("tmp"));
        std::fs::create_dir_all(&data).unwrap();
        std::fs::create_dir_all(&tmp).unwrap();
        let sbin = |b: &str| {
            ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"]
                .iter()
                .map(|d| std::path::Path::new(d).join(b))
                .find(|p| p.exists())
                .unwrap_or_else(|| b.into())
        };
        let log = std::fs::File::create(dir.join("install.log")).unwrap();
        let installed = std::process::Command::new(sbin("mariadb-install-db"))
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--tmpdir={}", tmp.display()))
            .args(["--user=root", "--auth-root-authentication-method=normal"])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .status()
            .expect("mariadb-install-db runs (scripts/sandbox.sh installs MariaDB)");
        assert!(
            installed.success(),
            "mariadb-install-db: see {}",
            dir.display()
        );
        let port = free_port();
        let log = std::fs::File::create(dir.join("server.log")).unwrap();
        let server = std::process::Command::new(sbin("mariadbd"))
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--tmpdir={}", tmp.display()))
            .arg(format!("--socket={}", dir.join("mysqld.sock").display()))
            .arg(format!("--port={port}"))
            .args([
                "--user=root",
                "--bind-address=127.0.0.1",
                "--skip-log-bin",
                "--innodb-buffer-pool-size=32M",
            ])
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut scratch = ScratchServer { server, dir, port };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = scratch.server.try_wait() {
                panic!(
                    "scratch mariadbd exited ({status}): see {}",
                    scratch.dir.display()
                );
            }
            assert!(
                std::time::Instant::now() < deadline,
                "scratch mariadbd did not listen within 60 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        scratch
    }

    fn cli(&self, extra: &[&str]) -> std::process::Command {
        let mut c = std::process::Command::new("mariadb");
        c.args(["--no-defaults", "--protocol=TCP", "-h127.0.0.1", "-uroot"])
            .arg(format!("-P{}", self.port))
            .args(extra);
        c
    }

    async fn conn(&self) -> mysql_async::Conn {
        let opts: mysql_async::Opts = mysql_async::OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(self.port)
            .user(Some("root"))
            .prefer_socket(false)
            .into();
        mysql_async::Conn::new(opts).await.unwrap()
    }

    /// Loads a dump into a new database `database` with the mariadb client.
    fn restore(&self, database: &str, dump: &[u8]) {
        use std::io::Write;
        let create = format!("CREATE DATABASE {database}");
        assert!(self.cli(&["-e", &create]).status().unwrap().success());
        let mut child = self
            .cli(&[database])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(dump).unwrap();
        assert!(child.wait().unwrap().success(), "the dump restores");
    }

    /// The restored tables' digests equal the shards'.
    async fn check_restored(&self, database: &str, tables: &[usize]) {
        let mut conn = self.conn().await;
        for &t in tables {
            let name = ["t_order", "t_order_item"][t];
            let restored = digest_of(&mut conn, t, &format!("{database}.{name}")).await;
            assert_eq!(
                restored,
                shards_digest(t).await,
                "{name} restored from the dump"
            );
            assert!(restored.0 >= 1500, "{name}: {restored:?}");
        }
    }
}

impl Drop for ScratchServer {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dump_through_the_proxy_restores_every_row_of_every_shard() {
    let _serial = SERIAL.lock().await;
    let h = Harness::start().await;
    let scratch = ScratchServer::start();
    for (mode, flags) in [
        ("locked", &[][..]),
        ("snapshot", &["--single-transaction"][..]),
    ] {
        let mut args = flags.to_vec();
        args.push("orders");
        let whole = dump(&h, &args);
        let text = String::from_utf8_lossy(&whole);
        for table in ["t_merchant", "t_order", "t_order_item"] {
            assert!(
                text.contains(&format!("CREATE TABLE `{table}`")),
                "{mode}: {table}"
            );
        }
        assert!(
            !text.contains("t_order_0"),
            "{mode}: a physical name leaked"
        );
        let db = format!("dump_check_{mode}");
        scratch.restore(&db, &whole);
        scratch.check_restored(&db, &[0, 1]).await;

        args.push("t_order_item");
        let one = dump(&h, &args);
        let db = format!("dump_check_{mode}_one");
        scratch.restore(&db, &one);
        scratch.check_restored(&db, &[1]).await;
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn show_table_status_sums_the_shards_and_keeps_the_server_s_columns() {
    let _serial = SERIAL.lock().await;
    let h = Harness::start().await;
    let mut c = h.client().await;
    c.query_drop("USE orders").await.unwrap();
    let mut result = c
        .query_iter("SHOW TABLE STATUS LIKE 't\\_order%'")
        .await
        .unwrap();
    let columns: Vec<String> = result
        .columns_ref()
        .iter()
        .map(|c| c.name_str().into_owned())
        .collect();
    let rows: Vec<mysql_async::Row> = result.collect().await.unwrap();
    assert_eq!(columns.len(), 20, "{columns:?}");
    assert_eq!(
        &columns[..5],
        ["Name", "Engine", "Version", "Row_format", "Rows"]
    );
    assert_eq!(columns[19], "Temporary");
    let names: Vec<String> = rows.iter().map(|r| r.get(0).unwrap()).collect();
    assert_eq!(names, ["t_order", "t_order_item"]);
    // Rows is the sum of the shards' TABLE_ROWS, read from the servers at the same time.
    let mut direct = 0u64;
    for ds in 0..2 {
        let mut b = backend(ds).await;
        let n: Option<u64> = b
            .query_first("SELECT SUM(TABLE_ROWS) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'order_shards' AND TABLE_NAME REGEXP '^t_order_[0-9]+$'")
            .await
            .unwrap()
            .flatten();
        direct += n.unwrap_or(0);
    }
    let rows_of_order: u64 = rows[0].get(4).unwrap();
    assert_eq!(rows_of_order, direct);
    let auto_increment: Option<u64> = rows[0].get(10).unwrap();
    assert_eq!(auto_increment, None);

    let filtered: Vec<String> = c
        .query("SHOW TABLE STATUS FROM orders WHERE Name = 't_merchant'")
        .await
        .unwrap()
        .into_iter()
        .map(|r: mysql_async::Row| r.get(0).unwrap())
        .collect();
    assert_eq!(filtered, ["t_merchant"]);
    // Another database is outside the user's scope (SPEC §8a); no database at all is the
    // server's 1046.
    assert_eq!(
        error_code(&mut c, "SHOW TABLE STATUS FROM orders_ref").await,
        1044
    );
    let opts = mysql_async::OptsBuilder::from_opts(h.opts()).db_name(None::<String>);
    let mut bare = mysql_async::Conn::new(opts).await.unwrap();
    assert_eq!(error_code(&mut bare, "SHOW TABLE STATUS").await, 1046);
    bare.query_drop("SELECT 1").await.unwrap();
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn information_schema_shows_logical_tables_and_hides_the_physical_ones() {
    let _serial = SERIAL.lock().await;
    let h = Harness::start().await;
    let mut c = h.client().await;
    c.query_drop("USE orders").await.unwrap();
    let tables: Vec<(String, String)> = c
        .query("SELECT table_name, engine FROM information_schema.TABLES WHERE table_schema = DATABASE() ORDER BY table_name")
        .await
        .unwrap();
    let names: Vec<&str> = tables.iter().map(|t| t.0.as_str()).collect();
    assert_eq!(names, ["t_merchant", "t_order", "t_order_item"]);
    let leaked: Vec<(String, String)> = c
        .query("SELECT table_schema, table_name FROM information_schema.tables t WHERE t.table_name LIKE 't\\_order\\_%' OR t.table_schema IN ('order_shards', 'order_meta', 'mysql')")
        .await
        .unwrap();
    assert!(
        leaked.iter().all(|(_, t)| t == "t_order_item"),
        "physical tables or protected databases listed: {leaked:?}"
    );
    let schemata: Vec<String> = c
        .query("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA ORDER BY SCHEMA_NAME")
        .await
        .unwrap();
    assert!(schemata.contains(&"orders".to_owned()), "{schemata:?}");
    for hidden in ["order_shards", "order_meta", "mysql"] {
        assert!(
            !schemata.contains(&hidden.to_owned()),
            "{hidden} listed: {schemata:?}"
        );
    }
    // COLUMNS of the logical table are those of a physical shard table, in order.
    let logical: Vec<(String, String, String)> = c
        .query("select column_name, column_type, is_nullable from information_schema.columns where table_schema=database() and table_name='t_order' order by ordinal_position")
        .await
        .unwrap();
    let mut b = backend(0).await;
    let physical: Vec<(String, String, String)> = b
        .query("select column_name, column_type, is_nullable from information_schema.columns where table_schema='order_shards' and table_name='t_order_0' order by ordinal_position")
        .await
        .unwrap();
    assert_eq!(logical, physical);
    assert!(logical.len() >= 8);
    // The result describes information_schema's view, not the proxy's copy.
    let mut result = c
        .query_iter("SELECT INDEX_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = 'orders' AND TABLE_NAME = 't_order' AND SEQ_IN_INDEX = 1 ORDER BY INDEX_NAME")
        .await
        .unwrap();
    let col = result.columns_ref()[0].clone();
    assert_eq!(col.schema_str(), "information_schema");
    assert_eq!(col.org_table_str(), "STATISTICS");
    let indexes: Vec<String> = result.collect().await.unwrap();
    assert!(indexes.contains(&"PRIMARY".to_owned()), "{indexes:?}");
    // A statement the server refuses is its error, and the session goes on.
    let code = error_code(
        &mut c,
        "SELECT no_such_column FROM information_schema.TABLES",
    )
    .await;
    assert_eq!(code, 1054);
    assert_usable(&mut c).await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn lock_tables_on_a_logical_table_holds_writes_on_every_shard() {
    let _serial = SERIAL.lock().await;
    let h = Harness::start().await;
    let mut locker = h.client().await;
    locker.query_drop("USE orders").await.unwrap();
    locker
        .query_drop("LOCK TABLES t_order READ /*!32311 LOCAL */, t_merchant READ")
        .await
        .unwrap();
    let n: u64 = locker
        .query_first("SELECT COUNT(*) FROM t_order")
        .await
        .unwrap()
        .unwrap();
    assert!(n >= 1500);
    // Another session's write to a shard on either datasource waits for the lock.
    let mut writer = h.client().await;
    writer.query_drop("USE orders").await.unwrap();
    writer
        .query_drop("SET SESSION lock_wait_timeout = 1")
        .await
        .unwrap();
    let ids = [fresh_new_id_on(5, 0), fresh_new_id_on(1, 1)];
    for (id, channel) in ids.iter().zip(["EU_CHANNEL", "CN_CHANNEL"]) {
        let id = *id;
        let sql = insert_order_sql(id, channel, "lock-test");
        let code = error_code(&mut writer, &sql).await;
        assert_eq!(
            code, 1205,
            "a write to a locked shard ({channel}) waits and times out"
        );
    }
    locker.query_drop("UNLOCK TABLES").await.unwrap();
    for (id, channel) in ids.iter().zip(["EU_CHANNEL", "CN_CHANNEL"]) {
        writer
            .query_drop(insert_order_sql(*id, channel, "lock-test"))
            .await
            .unwrap();
    }
    purge(&ids).await;
    // An alias on a sharded table cannot be given to every shard's table.
    let code = error_code(&mut locker, "LOCK TABLES t_order AS o READ").await;
    assert_eq!(code, 1235);
    assert_usable(&mut locker).await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_data_only_dump_restores_through_the_proxy_each_row_to_its_shard() {
    let _serial = SERIAL.lock().await;
    let h = Harness::start().await;
    let mut c = h.client().await;
    // Orders of every channel (CN_CHANNEL's shards lie on both datasources), and a legacy
    // order (routed by its channel value, its index row written first).
    let mut orders: Vec<(u64, &str)> = CHANNELS
        .iter()
        .map(|&(name, code, _, _)| (fresh_new_id(code), name))
        .collect();
    orders.push((fresh_new_id_on(1, 0), "CN_CHANNEL"));
    orders.push((fresh_new_id_on(1, 1), "CN_CHANNEL"));
    orders.push((fresh_legacy_id(), "CN_CHANNEL"));
    let ids: Vec<u64> = orders.iter().map(|o| o.0).collect();
    let _guard = Cleanup::new(&ids);
    for &(id, name) in &orders {
        exec(&mut c, &insert_order_sql(id, name, "restore me")).await;
    }
    let list = ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let filter = format!("--where=order_id IN ({list})");
    // The flags docs/dba.md gives for a restore through the proxy.
    let data = dump(
        &h,
        &[
            "--no-create-info",
            "--complete-insert",
            "--skip-disable-keys",
            "--skip-extended-insert",
            &filter,
            "orders",
            "t_order",
        ],
    );
    let text = String::from_utf8_lossy(&data);
    assert_eq!(
        text.matches("INSERT INTO `t_order`").count(),
        ids.len(),
        "{text}"
    );
    for &(id, _) in &orders {
        exec(
            &mut c,
            &format!("DELETE FROM t_order WHERE order_id = {id}"),
        )
        .await;
        assert_eq!(placement(id).await.0, Vec::<u32>::new());
    }

    use std::io::Write;
    let mut cli = to_proxy("mariadb", &h)
        .arg("orders")
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    cli.stdin.take().unwrap().write_all(&data).unwrap();
    let out = cli.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "restore through the proxy: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for &(id, name) in &orders {
        let shard = expected_shard(name, id);
        assert_eq!(placement(id).await.0, vec![shard], "order {id} of {name}");
        let row = physical_row(shard, id).await.unwrap();
        assert_eq!(show(&row[6]), "restore me");
    }
    assert_eq!(
        index_channel(orders[orders.len() - 1].0).await.as_deref(),
        Some("CN_CHANNEL")
    );
    h.stop().await;
}
