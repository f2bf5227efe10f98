//! Configuration: the TOML file (`config/example.toml` documents every key), validated once
//! into a [`Config`] that the rest of the proxy trusts without checking again.
//!
//! Parsing is strict: unknown keys are errors, and every error names the file, the line and
//! the key (`config/demo.toml:42: channels[1].code: ...`).

mod credential;
pub mod env;
mod model;
mod raw;
pub mod shard_map;
mod validate;

use std::path::Path;

pub use credential::{Credential, Sha2Crypt, native_hash, parse_hash, sha256_crypt};
pub use model::*;

impl Config {
    /// Reads and validates a configuration file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        // Other variables that are not UTF-8 are no concern of ours; an override whose value
        // is not UTF-8 is an error, not silently left out.
        let mut vars = Vec::new();
        for (k, v) in std::env::vars_os() {
            let Ok(k) = k.into_string() else { continue };
            match v.into_string() {
                Ok(v) => vars.push((k, v)),
                Err(_) if k.starts_with(env::PREFIX) && k.contains("__") => {
                    return Err(ConfigError {
                        origin: path.display().to_string(),
                        line: None,
                        message: format!("environment override {k}: the value is not UTF-8"),
                    });
                }
                Err(_) => {}
            }
        }
        Self::load_with_env(path, vars)
    }

    /// [`Config::load`] with these environment variables: `ROUTEKEY_..__..` overrides are
    /// applied to the file's text before it is validated ([`mod@env`]).
    pub fn load_with_env(
        path: &Path,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            origin: origin.clone(),
            line: None,
            message: format!("cannot read: {e}"),
        })?;
        let (text, overrides) = env::apply(&text, vars).map_err(|message| ConfigError {
            origin: origin.clone(),
            line: None,
            message: format!("environment override {message}"),
        })?;
        if overrides.is_empty() {
            return Self::from_toml(&text, &origin);
        }
        let origin = format!("{origin} (with ROUTEKEY_ environment overrides)");
        let mut config = Self::from_toml(&text, &origin)?;
        config.overrides = overrides;
        Ok(config)
    }

    /// Parses and validates TOML text; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self, ConfigError> {
        validate::validate(text, origin)
    }
}

#[cfg(test)]
mod id_tests {
    use super::*;
    use crate::id::generator::{Generator, LegacyLayout, Step};

    #[test]
    fn the_demo_configuration_does_not_decode_a_legacy_id() {
        const T0: u64 = 1_790_000_000_000;
        let g = Generator::legacy(LegacyLayout::default(), 513, 5);
        let Ok(Step::Id(id)) = g.next(0, T0) else {
            panic!("no id issued")
        };
        let config =
            Config::from_toml(include_str!("../../config/demo.toml"), "demo.toml").unwrap();
        assert!(config.route_key_decoder().decode(id, T0).is_err());
    }
}

#[cfg(test)]
mod admin_tests {
    use super::{Admin, AdminToken};

    #[test]
    fn the_token_is_trimmed_compared_whole_and_never_printed() {
        let token = AdminToken::new(" s3cret\n").unwrap();
        assert!(token.matches(b"s3cret"));
        assert!(!token.matches(b"s3cre"));
        assert!(!token.matches(b"s3cret "));
        assert!(!token.matches(b""));
        assert!(AdminToken::new(" \r\n").is_none());
        assert!(!format!("{token:?}").contains("s3cret"));
    }

    #[test]
    fn only_loopback_listeners_go_without_a_token() {
        for (addr, needs) in [
            ("127.0.0.1:9307", false),
            ("127.0.0.2:9307", false),
            ("[::1]:9307", false),
            ("[::ffff:127.0.0.1]:9307", false),
            ("0.0.0.0:9307", true),
            ("[::]:9307", true),
            ("10.0.0.7:9307", true),
        ] {
            assert_eq!(Admin::needs_token(addr.parse().unwrap()), needs, "{addr}");
        }
        let open = Admin {
            listen: "0.0.0.0:9307".parse().unwrap(),
            token: None,
        };
        assert!(
            open.check()
                .unwrap_err()
                .contains("admin.token_file is required")
        );
    }
}

#[cfg(test)]
mod server_tests {
    use super::Config;

    fn with_write_timeout(value: &str) -> Result<Config, super::ConfigError> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/example.toml");
        let vars = [(
            "ROUTEKEY_SERVER__CLIENT_WRITE_TIMEOUT".to_owned(),
            value.to_owned(),
        )];
        Config::load_with_env(&path, vars)
    }

    #[test]
    fn the_client_write_timeout_is_zero_or_at_least_a_second() {
        let secs = |v: &str| with_write_timeout(v).unwrap().server.client_write_timeout;
        assert_eq!(secs("60s").as_secs(), 60);
        assert!(secs("0s").is_zero());
        let err = with_write_timeout("1ms").unwrap_err().to_string();
        assert!(
            err.contains("server.client_write_timeout: must be at least 1s"),
            "{err}"
        );
    }
}
