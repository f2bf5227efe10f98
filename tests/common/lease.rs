//! Worker id lease helpers: configurations with lease tables of their own, their rows.

#![allow(dead_code)]

use super::*;

// ---------------------------------------------------------------------------------------
// Order id issuance.
// ---------------------------------------------------------------------------------------

/// The demo configuration with a lease table of its own (tests that count worker ids).
/// (Leases of 2 s: worker id rows a test creates can be leased 2.4 s later.)
pub fn lease_config(tag: &str) -> routekey_proxy::config::Config {
    let mut c = config();
    c.issuance.lease_table = format!("rk_lease_{tag}_{}", std::process::id());
    c.issuance.lease_ttl = std::time::Duration::from_secs(2);
    c
}

/// Drops a test's lease table.
pub async fn drop_lease_table(c: &routekey_proxy::config::Config) {
    let mut conn = backend(0).await;
    exec(
        &mut conn,
        &format!(
            "DROP TABLE IF EXISTS {}.{}",
            c.index.database, c.issuance.lease_table
        ),
    )
    .await;
}

/// Rows of a lease table that were ever leased: (worker id, holder, expired,
/// issued_until_ms).
pub async fn lease_rows(c: &routekey_proxy::config::Config) -> Vec<(u64, String, u8, u64)> {
    let mut conn = backend(0).await;
    conn.query(format!(
        "SELECT worker_id, holder, expires_at < NOW(3), issued_until_ms FROM {}.{} WHERE holder <> '' ORDER BY worker_id",
        c.index.database, c.issuance.lease_table
    ))
    .await
    .unwrap()
}

pub fn caller() -> routekey_proxy::issuance::Caller<'static> {
    routekey_proxy::issuance::Caller {
        user: "test",
        program: Some("ids.rs"),
    }
}

/// The channel an id decodes to (route-key ids only).
pub fn decoded(
    c: &routekey_proxy::config::Config,
    id: u64,
) -> Option<routekey_proxy::config::ChannelId> {
    c.route_key_decoder().decode(id, now_ms()).ok()
}
