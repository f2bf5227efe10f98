//! Values that come from outside the file's own text: secrets (environment variables,
//! mounted files) and the shared cache tier's URL.

use std::time::Duration;

use super::Checker;
use crate::config::raw::RawConfig;
use crate::config::{CacheConfig, ConfigError, RedisTier};

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
