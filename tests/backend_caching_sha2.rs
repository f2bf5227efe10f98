//! caching_sha2_password toward a backend (issue 11): no MySQL 8 server is installable here,
//! so the backend is a second routekey-proxy whose user logs in with caching_sha2_password
//! (the frontend side of the same issue). The proxy's own backend connection (data path)
//! and a mysql_async connection built by `control_opts` (control path) log in to it:
//!
//! - over plain TCP on a fresh backend proxy: full authentication with the RSA key exchange;
//! - again: the fast path (the backend cached the password);
//! - over TLS on another fresh backend proxy: full authentication with the clear password;
//! - with a wrong password: the backend's 1045, named.
//!
//! The backend proxy is configured with `[[users]] auth_plugin = "caching_sha2_password"` and
//! `[server] tls_cert_file / tls_key_file / rsa_private_key_file`.

mod common;

use std::path::{Path, PathBuf};

use common::Harness;
use mysql_async::prelude::*;
use routekey_proxy::backend::BackendConn;
use routekey_proxy::config::{BackendTls, Config, Datasource, DatasourceId};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

const USER: &str = "sha2_backend";
const PASSWORD: &str = "sha2-secret";

fn sandbox_tls(name: &str) -> PathBuf {
    std::env::var_os("ROUTEKEY_SANDBOX_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".sandbox"))
        .join("tls")
        .join(name)
}

/// The demo configuration for the backend proxy: TLS and the RSA key from the sandbox, and
/// a caching_sha2_password user.
fn backend_proxy_config() -> Config {
    let demo =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config/demo.toml")).unwrap();
    let mut text: String = demo
        .lines()
        .filter(|l| {
            !["tls_cert_file", "tls_key_file", "rsa_private_key_file"]
                .iter()
                .any(|k| l.trim_start().starts_with(k))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let server = format!(
        "[server]\ntls_cert_file = \"{}\"\ntls_key_file = \"{}\"\nrsa_private_key_file = \"{}\"\n",
        sandbox_tls("server.pem").display(),
        sandbox_tls("server-key.pem").display(),
        sandbox_tls("server-key.pem").display(),
    );
    text = text.replacen("[server]\n", &server, 1);
    text.push_str(&format!(
        "\n[[users]]\nname = \"{USER}\"\npassword = \"{PASSWORD}\"\nauth_plugin = \"caching_sha2_password\"\n"
    ));
    let mut config = Config::from_toml(&text, "backend-proxy.toml").unwrap();
    config.datasources = common::config().datasources;
    config
}

/// A datasource that is the backend proxy, as the caching_sha2 user.
fn toward(backend: &Harness, tls: BackendTls) -> Datasource {
    let mut ds = common::config().datasources[0].clone();
    ds.address = backend.addr.to_string();
    ds.user = USER.into();
    ds.password = PASSWORD.into();
    ds.database = Some("orders".into());
    ds.tls = tls;
    ds.tls_ca_certs = CertificateDer::pem_file_iter(sandbox_tls("ca.pem"))
        .unwrap()
        .map(|c| c.unwrap().to_vec())
        .collect();
    ds
}

/// Logs in on the data path and runs a sharded count through the backend proxy.
async fn data_path_count(ds: &Datasource) -> Result<u64, String> {
    let mut conn = BackendConn::connect(ds, DatasourceId(0), false, 16 << 20)
        .await
        .map_err(|e| e.to_string())?;
    conn.scalar(b"SELECT COUNT(*) FROM t_order")
        .await
        .map_err(|e| e.to_string())
}

/// Logs in on the control path (mysql_async) and runs the same count.
async fn control_path_count(ds: &Datasource) -> Result<u64, String> {
    let pool = mysql_async::Pool::new(routekey_proxy::route::index::control_opts(ds, 1));
    let result = async {
        let mut c = pool.get_conn().await?;
        let n: Option<u64> = c.query_first("SELECT COUNT(*) FROM orders.t_order").await?;
        Ok::<_, mysql_async::Error>(n.unwrap_or(0))
    }
    .await
    .map_err(|e| e.to_string());
    let _ = pool.disconnect().await;
    result
}

#[tokio::test]
async fn caching_sha2_password_toward_a_backend_in_each_path() {
    let mut reference = common::reference().await;
    let expected: u64 = reference
        .query_first("SELECT COUNT(*) FROM t_order")
        .await
        .unwrap()
        .unwrap();

    // Plain TCP, fresh backend: full authentication with the backend's RSA key; then the
    // fast path; the control path too.
    let backend = Harness::start_with(backend_proxy_config()).await;
    let plain = toward(&backend, BackendTls::Off);
    assert_eq!(
        data_path_count(&plain).await.unwrap(),
        expected,
        "RSA exchange"
    );
    assert_eq!(
        data_path_count(&plain).await.unwrap(),
        expected,
        "fast path"
    );
    assert_eq!(control_path_count(&plain).await.unwrap(), expected);
    let mut wrong = plain.clone();
    wrong.password = "not-it".into();
    let e = data_path_count(&wrong).await.unwrap_err();
    assert!(e.contains("1045"), "{e}");
    backend.stop().await;

    // TLS, fresh backend: full authentication with the clear password inside TLS.
    let backend = Harness::start_with(backend_proxy_config()).await;
    let tls = toward(&backend, BackendTls::VerifyIdentity);
    assert_eq!(
        data_path_count(&tls).await.unwrap(),
        expected,
        "full auth over TLS"
    );
    assert_eq!(control_path_count(&tls).await.unwrap(), expected);
    backend.stop().await;
}
