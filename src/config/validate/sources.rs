//! Values that come from outside the file's own text: secrets (environment variables,
//! mounted files) and the shared cache tier's URL.

use std::time::Duration;

use super::Checker;
use crate::config::raw::{RawConfig, RawDatasource};
use crate::config::{BackendTls, CacheConfig, ConfigError, RedisTier};

/// A password given in the file (`password`), by an environment variable (`password_env`)
/// or in a file (`password_file`, a mounted Kubernetes Secret; one trailing newline is
/// dropped). At most one of the three; `None` when none is given.
pub(super) fn secret(
    c: &Checker,
    what: &str,
    password: &Option<String>,
    env: &Option<String>,
    file: &Option<String>,
) -> Result<Option<String>, ConfigError> {
    match (password, env, file) {
        (None, None, None) => Ok(None),
        (Some(p), None, None) => Ok(Some(p.clone())),
        (None, Some(var), None) => std::env::var(var).map(Some).map_err(|_| {
            c.err(
                None,
                format!(
                    "{what}.password_env: environment variable {var} is not set (or not UTF-8)"
                ),
            )
        }),
        (None, None, Some(path)) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                c.err(
                    None,
                    format!("{what}.password_file: cannot read {path}: {e}"),
                )
            })?;
            let text = text.strip_suffix('\n').unwrap_or(&text);
            Ok(Some(text.strip_suffix('\r').unwrap_or(text).to_owned()))
        }
        _ => Err(c.err(
            None,
            format!("{what}: give only one of password, password_env and password_file"),
        )),
    }
}

/// The CA certificates of a datasource's `tls_ca_file` (PEM, one or more certificates), as
/// DER. `verify_ca` and `verify_identity` need the file; `off` and `required` ignore it.
pub(super) fn tls_ca_certs(
    c: &Checker,
    name: &str,
    ds: &RawDatasource,
) -> Result<Vec<Vec<u8>>, ConfigError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;

    let key = format!("datasources.{name}.tls_ca_file");
    let path = match (&ds.tls_ca_file, ds.tls) {
        (Some(path), _) => path,
        (None, BackendTls::VerifyCa | BackendTls::VerifyIdentity) => {
            return Err(c.at(
                &ds.address,
                format!("{key}: tls = verify_ca and verify_identity need a CA file"),
            ));
        }
        (None, _) => return Ok(Vec::new()),
    };
    let pem = std::fs::read(path)
        .map_err(|e| c.at(&ds.address, format!("{key}: cannot read {path}: {e}")))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .map(|cert| cert.map(|c| c.to_vec()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| c.at(&ds.address, format!("{key}: {path} is not PEM ({e})")))?;
    if certs.is_empty() {
        return Err(c.at(
            &ds.address,
            format!("{key}: {path} holds no CERTIFICATE block"),
        ));
    }
    Ok(certs)
}

pub(super) fn cache(c: &Checker, raw: &RawConfig) -> Result<CacheConfig, ConfigError> {
    let r = &raw.cache;
    let redis = match &r.redis_url {
        None => None,
        Some(url) => {
            // The message leaves the URL out: it may hold a password.
            redis::Client::open(url.get_ref().as_str()).map_err(|e| {
                c.at(
                    url,
                    format!("cache.redis_url: not a usable Redis URL ({e})"),
                )
            })?;
            if r.redis_timeout.is_zero() {
                return Err(c.err(None, "cache.redis_timeout: must be more than 0"));
            }
            if r.ttl < Duration::from_millis(1) {
                return Err(c.err(None, "cache.ttl: at least 1ms with a Redis tier"));
            }
            Some(RedisTier {
                url: url.get_ref().clone(),
                timeout: r.redis_timeout,
                retry_after: r.redis_retry_after,
            })
        }
    };
    Ok(CacheConfig {
        capacity: r.capacity,
        ttl: r.ttl,
        negative_ttl: r.negative_ttl,
        redis,
    })
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, Credential};

    const DEMO: &str = include_str!("../../../config/demo.toml");

    fn with(from: &str, to: &str) -> String {
        assert!(DEMO.contains(from), "demo.toml lacks {from:?}");
        DEMO.replacen(from, to, 1)
    }

    #[test]
    fn passwords_come_from_the_file_an_environment_variable_or_a_secret_file() {
        let dir = std::env::temp_dir().join(format!("routekey-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("ds1-password");
        std::fs::write(&file, "s3cret\n").unwrap();
        let text = with(
            "name = \"app\"\npassword = \"app\"",
            "name = \"app\"\npassword_env = \"PATH\"",
        )
        .replacen(
            "address = \"127.0.0.1:33062\"\nuser = \"root\"\npassword = \"\"",
            &format!(
                "address = \"127.0.0.1:33062\"\nuser = \"root\"\npassword_file = \"{}\"",
                file.display()
            ),
            1,
        );
        let config = Config::from_toml(&text, "t.toml").unwrap();
        let path = std::env::var("PATH").unwrap();
        assert_eq!(config.users[0].credential, Credential::Password(path));
        assert_eq!(
            config.datasources[1].password, "s3cret",
            "one newline dropped"
        );
        for (from, to, message) in [
            (
                "password = \"app\"",
                "password_env = \"ROUTEKEY_TEST_NOT_SET_ANYWHERE\"",
                "ROUTEKEY_TEST_NOT_SET_ANYWHERE is not set",
            ),
            (
                "password = \"app\"",
                "password_file = \"/nonexistent/secret\"",
                "cannot read /nonexistent/secret",
            ),
            (
                "password = \"app\"",
                "password = \"app\"\npassword_env = \"PATH\"",
                "only one of",
            ),
            (
                "password = \"app\"",
                "",
                "one of password, password_env, password_file or password_hash",
            ),
        ] {
            let e = Config::from_toml(&with(from, to), "t.toml").unwrap_err();
            assert!(e.message.contains(message), "{}", e.message);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn backend_tls_modes_and_their_ca_file() {
        use crate::config::BackendTls;
        let ds0 = "address = \"127.0.0.1:33061\"\n";
        let config = Config::from_toml(DEMO, "t").unwrap();
        assert_eq!(config.datasources[0].tls, BackendTls::Off);
        assert!(config.datasources[0].tls_ca_certs.is_empty());
        // required needs no CA file.
        let config =
            Config::from_toml(&with(ds0, &format!("{ds0}tls = \"required\"\n")), "t").unwrap();
        assert_eq!(config.datasources[0].tls, BackendTls::Required);
        // The verifying modes do.
        for mode in ["verify_ca", "verify_identity"] {
            let e = Config::from_toml(&with(ds0, &format!("{ds0}tls = \"{mode}\"\n")), "t")
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("datasources.ds0.tls_ca_file: tls = verify_ca and verify_identity need a CA file"),
                "{e}"
            );
        }
        let e = Config::from_toml(&with(ds0, &format!("{ds0}tls = \"on\"\n")), "t")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown variant `on`"), "{e}");
        // The file must exist and hold certificates.
        let dir = std::env::temp_dir().join(format!("routekey-ca-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let with_file = |path: &std::path::Path| {
            with(
                ds0,
                &format!(
                    "{ds0}tls = \"verify_ca\"\ntls_ca_file = \"{}\"\n",
                    path.display()
                ),
            )
        };
        let e = Config::from_toml(&with_file(&dir.join("missing.pem")), "t")
            .unwrap_err()
            .to_string();
        assert!(e.contains("tls_ca_file: cannot read"), "{e}");
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = Config::from_toml(&with_file(&empty), "t")
            .unwrap_err()
            .to_string();
        assert!(e.contains("holds no CERTIFICATE block"), "{e}");
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, TEST_CA).unwrap();
        let config = Config::from_toml(&with_file(&ca), "t").unwrap();
        assert_eq!(config.datasources[0].tls, BackendTls::VerifyCa);
        assert_eq!(config.datasources[0].tls_ca_certs.len(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A self-signed CA certificate (openssl req -x509), only parsed here.
    const TEST_CA: &str = "-----BEGIN CERTIFICATE-----
MIIBijCCATGgAwIBAgIUQGlSzMF7oZg2pnHazMnQ9HoKmPMwCgYIKoZIzj0EAwIw
GzEZMBcGA1UEAwwQcm91dGVrZXkgdGVzdCBDQTAeFw0yNjEyMDIwNDEwNDZaFw0z
NjExMjkwNDEwNDZaMBsxGTAXBgNVBAMMEHJvdXRla2V5IHRlc3QgQ0EwWTATBgcq
hkjOPQIBBggqhkjOPQMBBwNCAATy3amzwEr0WuTVSSWTt39WSvsInDmrNN9CkSGW
r9tKjczUaYS3YPQ3G84d3FOvN4eOiqDrw5cpnLT6gMVubci8o1MwUTAdBgNVHQ4E
FgQUn45z9XW2356wl8oc5pSqo6ZqH9swHwYDVR0jBBgwFoAUn45z9XW2356wl8oc
5pSqo6ZqH9swDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNHADBEAiAdhF1a
gI+FA1swwrNvvU6PduZpag1zpAnSgIWtruQNdAIgRWSD5KpRcc6Vl07wGuJJEBVM
OBbUqWJo7/Mj9zgCm6I=
-----END CERTIFICATE-----
";
}
