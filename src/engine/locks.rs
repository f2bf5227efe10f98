//! `LOCK TABLES` and `UNLOCK TABLES` (mariadb-dump takes `LOCK TABLES ... READ LOCAL`
//! before it reads): a logical table is locked on every shard, each datasource locking the
//! physical tables it holds in one statement; the connections stay with the session.

use std::collections::BTreeMap;

use super::session::Session;
use crate::config::{Config, DatasourceId};
use crate::error::ProxyError;
use crate::execute::Target;
use crate::protocol::packets::OkInfo;
use crate::protocol::status::MoreResults;
use crate::rewrite::quote_ident;
use crate::sql::command::Lock;
use crate::wire::client::Client;

/// The `LOCK TABLES` statement each datasource receives, in datasource order.
///
/// Errors: an alias on a logical table (every shard's table would take the same alias,
/// which the server refuses) is ER_NOT_SUPPORTED_YET.
pub fn lock_statements(
    lock: &Lock,
    config: &Config,
    in_logical_database: bool,
) -> Result<Vec<(DatasourceId, Vec<u8>)>, ProxyError> {
    let logical = &config.sharding.logical_database;
    let mut per_ds: BTreeMap<DatasourceId, Vec<String>> = BTreeMap::new();
    for item in &lock.items {
        let names_logical = match &item.database {
            Some(db) => db.eq_ignore_ascii_case(logical),
            None => in_logical_database,
        };
        let table = config.binding_table(&item.table).filter(|_| names_logical);
        let Some(table) = table else {
            let mut text = String::new();
            if let Some(db) = &item.database {
                text.push_str(&quote_ident(db));
                text.push('.');
            }
            text.push_str(&quote_ident(&item.table));
            if let Some(alias) = &item.alias {
                text.push_str(" AS ");
                text.push_str(&quote_ident(alias));
            }
            text.push(' ');
            text.push_str(&item.lock_type);
            per_ds
                .entry(config.sharding.default_datasource)
                .or_default()
                .push(text);
            continue;
        };
        if item.alias.is_some() {
            return Err(ProxyError::not_yet(format!(
                "LOCK TABLES with an alias on the sharded table {} (every shard's table would take the same alias); lock it without one",
                item.table
            )));
        }
        for shard in &config.sharding.shards {
            let physical = &shard.tables[usize::from(table.0)];
            per_ds.entry(shard.datasource).or_default().push(format!(
                "{}.{} {}",
                quote_ident(&shard.database),
                quote_ident(physical),
                item.lock_type
            ));
        }
    }
    Ok(per_ds
        .into_iter()
        .map(|(ds, items)| {
            let mut sql = format!("LOCK TABLES {}", items.join(", "));
            if let Some(wait) = &lock.wait {
                sql.push(' ');
                sql.push_str(wait);
            }
            (ds, sql.into_bytes())
        })
        .collect())
}

impl Session {
    /// `LOCK TABLES`: as MySQL, an open transaction is committed (and pending `SET
    /// TRANSACTION` characteristics spent) and locks held before are released first; then each datasource locks its tables. If one datasource refuses,
    /// the others unlock again and its error is returned.
    pub(super) async fn lock_tables(
        &mut self,
        client: &mut Client,
        lock: &Lock,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        let statements = lock_statements(
            lock,
            &self.rt.config,
            self.state
                .in_database(&self.rt.config.sharding.logical_database),
        )?;
        // Its implicit commit spends pending `SET TRANSACTION` characteristics (MariaDB
        // 10.11), also when a table then turns out not to exist.
        self.txn.clear_next_characteristics();
        if self.txn.in_transaction() {
            self.txn.end(b"COMMIT").await?;
        }
        self.txn.on_every_held(b"UNLOCK TABLES").await?;
        // Locked from the first statement on: with autocommit off, the connections the
        // locks take join no XA branch (MariaDB refuses LOCK TABLES inside one).
        self.txn
            .set_locked(statements.iter().map(|(ds, _)| *ds).collect());
        self.txn.pin();
        let mut failure = None;
        for (ds, sql) in &statements {
            let locked = match self.connection(Target::primary(*ds)).await {
                Ok(conn) => conn.execute(sql).await.map(|_| ()),
                Err(e) => Err(e),
            };
            if let Err(e) = locked {
                failure = Some(e);
                break;
            }
        }
        if let Some(e) = failure {
            let _ = self.txn.on_every_held(b"UNLOCK TABLES").await;
            self.txn.set_locked(Vec::new());
            self.txn.release_idle();
            return Err(e);
        }
        self.state.warnings.clear();
        client.ok(&OkInfo {
            status: self.final_status(more),
            ..Default::default()
        })
    }

    /// `UNLOCK TABLES` on every connection the session holds. With tables locked, its
    /// implicit commit spends pending `SET TRANSACTION` characteristics (MariaDB 10.11).
    pub(super) async fn unlock_tables(
        &mut self,
        client: &mut Client,
        more: MoreResults,
    ) -> Result<(), ProxyError> {
        if self.txn.tables_locked() {
            self.txn.clear_next_characteristics();
            self.txn.set_locked(Vec::new());
        }
        let unlocked = self.txn.on_every_held(b"UNLOCK TABLES").await;
        self.txn.release_idle();
        unlocked?;
        self.state.warnings.clear();
        client.ok(&OkInfo {
            status: self.final_status(more),
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::command::LockItem;

    fn demo() -> Config {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/config/demo.toml");
        Config::load(std::path::Path::new(path)).expect("demo config")
    }

    fn item(db: Option<&str>, table: &str, alias: Option<&str>, lock_type: &str) -> LockItem {
        LockItem {
            database: db.map(str::to_owned),
            table: table.to_owned(),
            alias: alias.map(str::to_owned),
            lock_type: lock_type.to_owned(),
        }
    }

    #[test]
    fn a_logical_table_locks_every_shard_on_its_datasource() {
        let config = demo();
        let lock = Lock {
            items: vec![
                item(None, "t_order", None, "READ LOCAL"),
                item(None, "t_merchant", None, "READ LOCAL"),
            ],
            wait: Some("NOWAIT".into()),
        };
        let got = lock_statements(&lock, &config, true).unwrap();
        assert_eq!(got.len(), 2);
        let ds0 = String::from_utf8(got[0].1.clone()).unwrap();
        let ds1 = String::from_utf8(got[1].1.clone()).unwrap();
        assert!(
            ds0.starts_with("LOCK TABLES `order_shards`.`t_order_0` READ LOCAL, "),
            "{ds0}"
        );
        assert!(
            ds0.contains("`order_shards`.`t_order_9` READ LOCAL"),
            "{ds0}"
        );
        assert!(ds0.ends_with("`t_merchant` READ LOCAL NOWAIT"), "{ds0}");
        assert!(!ds0.contains("t_order_10"), "{ds0}");
        assert_eq!(ds1.matches("READ LOCAL").count(), 10, "{ds1}");
        assert!(
            ds1.contains("`order_shards`.`t_order_19` READ LOCAL"),
            "{ds1}"
        );
    }

    #[test]
    fn outside_the_logical_database_names_pass_as_written_and_aliases_are_refused() {
        let config = demo();
        let lock = Lock {
            items: vec![item(None, "t_order", Some("o"), "WRITE")],
            wait: None,
        };
        let got = lock_statements(&lock, &config, false).unwrap();
        assert_eq!(got[0].1, b"LOCK TABLES `t_order` AS `o` WRITE".to_vec());
        let err = lock_statements(&lock, &config, true).unwrap_err();
        assert!(err.to_string().contains("alias"), "{err}");
    }
}
