//! Write tokens (`SELECT ROUTEKEY_WRITE_TOKEN()`, `/*after='TOKEN'*/`): the positions of a
//! session's last writes, by datasource name, `ds0:0-1-100;ds1:1-2-7` (empty: no write on
//! a clustered datasource yet). Another session that passes the token reads what they
//! wrote, as the writing session does (issue 26).

use super::gtid::GtidSet;
use crate::config::{Config, DatasourceId};

/// The token of `written` (datasource and position each).
pub fn encode(written: &[(DatasourceId, GtidSet)], config: &Config) -> String {
    written
        .iter()
        .filter(|(_, p)| !p.is_empty())
        .map(|(ds, p)| format!("{}:{p}", config.datasource(*ds).name))
        .collect::<Vec<_>>()
        .join(";")
}

/// The positions a token names.
///
/// # Errors
/// A part that is not `datasource:gtid,...`, or names a datasource `config` has not.
pub fn decode(token: &str, config: &Config) -> Result<Vec<(DatasourceId, GtidSet)>, String> {
    let mut out = Vec::new();
    for part in token.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, position) = part
            .split_once(':')
            .ok_or_else(|| format!("`{part}` is not datasource:position"))?;
        let ds = config
            .datasources
            .iter()
            .position(|d| d.name == name)
            .ok_or_else(|| {
                format!("the token names datasource `{name}`, which is not configured")
            })?;
        out.push((DatasourceId(ds as u16), GtidSet::parse(position)?));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/config/demo.toml");
        Config::load(std::path::Path::new(path)).unwrap()
    }

    #[test]
    fn a_token_names_datasources_and_their_positions() {
        let config = config();
        let written = vec![
            (DatasourceId(1), GtidSet::parse("2-2-40,102-102-3").unwrap()),
            (DatasourceId(0), GtidSet::parse("1-1-7").unwrap()),
            (DatasourceId(0), GtidSet::default()),
        ];
        let token = encode(&written, &config);
        assert_eq!(token, "ds1:2-2-40,102-102-3;ds0:1-1-7");
        let back = decode(&token, &config).unwrap();
        assert_eq!(back, written[..2].to_vec());
        assert_eq!(decode("", &config).unwrap(), Vec::new());
    }

    #[test]
    fn a_bad_token_is_an_error() {
        let config = config();
        assert!(decode("ds9:1-1-1", &config).unwrap_err().contains("ds9"));
        assert!(decode("ds0", &config).is_err());
        assert!(decode("ds0:1-1", &config).is_err());
    }
}
