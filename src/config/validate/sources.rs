//! Values that come from outside the file's own text: secrets (environment variables,
//! mounted files) and the shared cache tier's URL.

use std::time::Duration;

use super::checker::Checker;
use crate::config::model::{BackendTls, CacheConfig, ConfigError, RedisTier};
use crate::config::raw::{RawConfig, RawDatasource};

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
            return Err(c.err(
                ds.span(),
                format!("{key}: tls = verify_ca and verify_identity need a CA file"),
            ));
        }
        (None, _) => return Ok(Vec::new()),
    };
    let pem = std::fs::read(path)
        .map_err(|e| c.err(ds.span(), format!("{key}: cannot read {path}: {e}")))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .map(|cert| cert.map(|c| c.to_vec()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| c.err(ds.span(), format!("{key}: {path} is not PEM ({e})")))?;
    if certs.is_empty() {
        return Err(c.err(
            ds.span(),
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
