//! Copies of the shards and of the index table of one test's own (its own physical and
//! index databases, so other tests' rows never show up in a scan), and the helpers the
//! `verify` and `index backfill` tests share: they run the binary as an operator does.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Output};

use mysql_async::prelude::*;
use routekey_proxy::config::Config;

use super::*;

pub const BIN: &str = env!("CARGO_BIN_EXE_routekey-proxy");

/// Physical and index databases of one test, and a configuration file naming them.
pub struct Fixture {
    /// The physical database of every shard (`rk_legacy_<tag>`).
    pub physical: String,
    /// The index database (`rk_legacy_meta_<tag>`, on ds0).
    pub meta: String,
    /// The configuration file naming them.
    pub path: PathBuf,
    /// The same configuration, parsed.
    pub config: Config,
}

impl Fixture {
    /// Creates `rk_legacy_<tag>` (every shard's tables, on the shard's server) and
    /// `rk_legacy_meta_<tag>` (the index table, on ds0), empty.
    pub async fn new(tag: &str) -> Self {
        Self::with_cache(tag, "").await
    }

    /// As [`Fixture::new`], with `cache` lines added to the `[cache]` table.
    pub async fn with_cache(tag: &str, cache: &str) -> Self {
        check_sandbox().await;
        let physical = format!("rk_legacy_{tag}");
        let meta = format!("rk_legacy_meta_{tag}");
        let text = include_str!("../../config/demo.toml")
            .replace("\"order_shards\"", &format!("\"{physical}\""))
            .replace("\"order_meta\"", &format!("\"{meta}\""))
            .replace("127.0.0.1:33061", &format!("127.0.0.1:{}", sandbox_port(0)))
            .replace("127.0.0.1:33062", &format!("127.0.0.1:{}", sandbox_port(1)))
            .replace("[cache]\n", &format!("[cache]\n{cache}\n"));
        let path =
            std::env::temp_dir().join(format!("rk-legacy-{tag}-{}.toml", std::process::id()));
        std::fs::write(&path, &text).unwrap();
        let config = Config::from_toml(&text, "legacy test").unwrap();
        for ds in 0..2 {
            let mut c = backend(ds).await;
            c.query_drop(format!("DROP DATABASE IF EXISTS {physical}"))
                .await
                .unwrap();
            c.query_drop(format!("CREATE DATABASE {physical}"))
                .await
                .unwrap();
            if ds == 0 {
                c.query_drop(format!("DROP DATABASE IF EXISTS {meta}"))
                    .await
                    .unwrap();
                c.query_drop(format!("CREATE DATABASE {meta}"))
                    .await
                    .unwrap();
                c.query_drop(format!(
                    "CREATE TABLE {meta}.t_order_index LIKE order_meta.t_order_index"
                ))
                .await
                .unwrap();
            }
        }
        for shard in 0..20u32 {
            let mut c = backend(datasource_of(shard)).await;
            for t in ["t_order", "t_order_item"] {
                c.query_drop(format!(
                    "CREATE TABLE {physical}.{t}_{shard} LIKE order_shards.{t}_{shard}"
                ))
                .await
                .unwrap();
            }
        }
        Self {
            physical,
            meta,
            path,
            config,
        }
    }

    /// A copy of the configuration file with datasource ds1 at `address` (a server that is
    /// down, or one that never answers); the caller removes it.
    pub fn config_with_ds1_at(&self, address: &str, tag: &str) -> PathBuf {
        let text = std::fs::read_to_string(&self.path)
            .unwrap()
            .replace(&format!("127.0.0.1:{}", sandbox_port(1)), address);
        let path = self.path.with_extension(format!("{tag}.toml"));
        std::fs::write(&path, text).unwrap();
        path
    }

    pub async fn order(&self, shard: u32, id: u64, channel: &str) {
        let mut c = backend(datasource_of(shard)).await;
        c.query_drop(format!(
            "INSERT INTO {}.t_order_{shard} (order_id, channel, region, user_id, amount, status, created_at) \
             VALUES ({id}, '{channel}', 'GB', 1, 9.99, 'NEW', NOW(3))",
            self.physical
        ))
        .await
        .unwrap();
    }

    pub async fn item(&self, shard: u32, id: u64) {
        let mut c = backend(datasource_of(shard)).await;
        c.query_drop(format!(
            "INSERT INTO {}.t_order_item_{shard} (order_id, item_no, sku, qty, price) VALUES ({id}, 1, 'SKU', 1, 9.99), ({id}, 2, 'SKU2', 2, 1.00)",
            self.physical
        ))
        .await
        .unwrap();
    }

    /// An index row written `age_secs` ago.
    pub async fn index(&self, id: u64, channel: &str, age_secs: u64) {
        let mut c = backend(0).await;
        c.query_drop(format!(
            "INSERT INTO {}.t_order_index (order_id, channel, created_at) VALUES ({id}, '{channel}', NOW(3) - INTERVAL {age_secs} SECOND)",
            self.meta
        ))
        .await
        .unwrap();
    }

    pub async fn indexed(&self, id: u64) -> Option<String> {
        let mut c = backend(0).await;
        c.query_first(format!(
            "SELECT channel FROM {}.t_order_index WHERE order_id = {id}",
            self.meta
        ))
        .await
        .unwrap()
    }

    pub async fn index_rows(&self) -> u64 {
        let mut c = backend(0).await;
        c.query_first(format!("SELECT COUNT(*) FROM {}.t_order_index", self.meta))
            .await
            .unwrap()
            .unwrap()
    }

    /// Clean orders of every channel: new-format ids and legacy ids with their index rows,
    /// each with items beside it.
    pub async fn clean_orders(&self, per_channel: usize) {
        for (name, code, _, _) in CHANNELS {
            for _ in 0..per_channel {
                let id = fresh_new_id(code);
                self.order(expected_shard(name, id), id, name).await;
                self.item(expected_shard(name, id), id).await;
                let old = fresh_legacy_id();
                self.order(expected_shard(name, old), old, name).await;
                self.item(expected_shard(name, old), old).await;
                self.index(old, name, 7200).await;
            }
        }
    }

    pub fn run(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(BIN);
        cmd.arg("--config").arg(&self.path).args(args);
        cmd.output().unwrap()
    }

    /// `verify --recheck-after 0s --report FILE` plus `args`: its output and the report's
    /// lines (kind, order id, shard).
    pub fn verify(&self, args: &[&str]) -> (Output, BTreeSet<(String, u64, Option<u64>)>) {
        let report = self
            .path
            .with_extension(format!("report-{}.jsonl", std::process::id()));
        let path = report.to_str().unwrap();
        let base = ["verify", "--recheck-after", "0s", "--report", path];
        let out = self.run(&[&base[..], args].concat());
        let lines = report_lines(&report);
        let _ = std::fs::remove_file(report);
        (out, lines)
    }

    /// The kinds of a report's lines.
    pub fn kinds(lines: &BTreeSet<(String, u64, Option<u64>)>) -> BTreeSet<String> {
        lines.iter().map(|l| l.0.clone()).collect()
    }

    pub async fn drop(self) {
        for ds in 0..2 {
            let mut c = backend(ds).await;
            let _ = c
                .query_drop(format!("DROP DATABASE IF EXISTS {}", self.physical))
                .await;
            let _ = c
                .query_drop(format!("DROP DATABASE IF EXISTS {}", self.meta))
                .await;
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The (kind, order_id, shard) of every line of a verify report.
pub fn report_lines(path: &std::path::Path) -> BTreeSet<(String, u64, Option<u64>)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            for key in ["kind", "table", "shard", "order_id", "detail"] {
                assert!(v.get(key).is_some(), "report line without {key}: {l}");
            }
            (
                v["kind"].as_str().unwrap().to_owned(),
                v["order_id"].as_str().unwrap().parse().unwrap(),
                v["shard"].as_u64(),
            )
        })
        .collect()
}

pub fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub fn other_shard_of_same_channel(shard: u32) -> u32 {
    shard - shard % 4 + (shard + 1) % 4
}

/// Legacy orders without index rows on every shard, `n` of them.
pub async fn unindexed_orders(f: &Fixture, n: usize) -> Vec<u64> {
    let mut ids = Vec::new();
    for i in 0..n {
        let (name, ..) = CHANNELS[i % CHANNELS.len()];
        let id = fresh_legacy_id();
        f.order(expected_shard(name, id), id, name).await;
        ids.push(id);
    }
    ids
}

pub fn summary_number(out: &Output, label: &str) -> u64 {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with(label))
        .unwrap_or_else(|| panic!("no `{label}` in {}", text(out)));
    line.trim_start()[label.len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}
