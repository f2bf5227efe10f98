//! Environment overrides of the configuration file (SPEC §7: the file, then the
//! environment, then flags).
//!
//! `ROUTEKEY_<KEY>__<KEY>...=value` sets one key of the TOML document: `__` separates the
//! levels, segments match existing keys case-insensitively (new ones are lower case), and a
//! number indexes an array of tables (`ROUTEKEY_USERS__0__PASSWORD`). Examples:
//! `ROUTEKEY_SERVER__LISTEN=0.0.0.0:3307`, `ROUTEKEY_ADMIN__LISTEN=10.0.0.7:9307`,
//! `ROUTEKEY_DATASOURCES__DS0__PASSWORD=...`. Variables without `__` are not overrides
//! (`ROUTEKEY_ADMIN_LISTEN` of the demo script is left alone).
//!
//! The value is a string when the key already holds one or is a known text key (addresses,
//! names, passwords, paths); otherwise it is read as a TOML value (`64`, `true`, `"10s"`,
//! `["t_order"]`), and taken as a string when it is not one.

use toml_edit::{DocumentMut, Item, Table, Value};

/// The prefix of override variables.
pub const PREFIX: &str = "ROUTEKEY_";

/// Keys whose values are text, whatever they look like (a password may be all digits).
const TEXT_KEYS: &[&str] = &[
    "listen",
    "address",
    "user",
    "name",
    "password",
    "password_env",
    "password_file",
    "token_file",
    "database",
    "server_version",
    "logical_database",
    "default_datasource",
    "physical_database",
    "physical_table",
    "shard_key",
    "channel_column",
    "region_column",
    "redis_url",
    "lease_table",
    "socket",
    "socket_mode",
    "tls_cert_file",
    "tls_key_file",
    "rsa_private_key_file",
    "tls_ca_file",
    "password_hash",
];

/// Applies the overrides among `vars` to `text`. Returns the new text and the keys set
/// (dotted, for the log), or a message naming the variable that cannot apply.
pub fn apply(
    text: &str,
    vars: impl IntoIterator<Item = (String, String)>,
) -> Result<(String, Vec<String>), String> {
    let mut overrides: Vec<(String, String)> = vars
        .into_iter()
        .filter(|(k, _)| k.starts_with(PREFIX) && k.contains("__"))
        .collect();
    if overrides.is_empty() {
        return Ok((text.to_owned(), Vec::new()));
    }
    overrides.sort();
    // A file that is not TOML is left as it is: validating it reports the error by line,
    // without quoting the line (which may hold a secret).
    let Ok(mut doc) = text.parse::<DocumentMut>() else {
        return Ok((text.to_owned(), Vec::new()));
    };
    let mut applied = Vec::new();
    for (var, value) in overrides {
        let path: Vec<&str> = var[PREFIX.len()..].split("__").collect();
        if path.iter().any(|s| s.is_empty()) {
            return Err(format!("{var}: empty key segment"));
        }
        let dotted = set(doc.as_table_mut(), &path, &value).map_err(|e| format!("{var}: {e}"))?;
        applied.push(dotted);
    }
    Ok((doc.to_string(), applied))
}

fn set(table: &mut Table, path: &[&str], value: &str) -> Result<String, String> {
    let key = existing_key(table, path[0]);
    if path.len() == 1 {
        let text_key =
            TEXT_KEYS.contains(&key.as_str()) || table.get(&key).and_then(Item::as_str).is_some();
        let parsed = if text_key {
            Value::from(value)
        } else {
            value
                .parse::<Value>()
                .unwrap_or_else(|_| Value::from(value))
        };
        table[&key] = Item::Value(parsed);
        return Ok(key);
    }
    let rest = &path[1..];
    let item = table.entry(&key).or_insert_with(|| {
        let mut t = Table::new();
        t.set_implicit(true);
        Item::Table(t)
    });
    let below = match item {
        Item::Table(t) => set(t, rest, value)?,
        Item::ArrayOfTables(array) => {
            let i: usize = rest[0]
                .parse()
                .map_err(|_| format!("`{key}` is a list: index it with a number"))?;
            let len = array.len();
            let t = array
                .get_mut(i)
                .ok_or_else(|| format!("`{key}` has {len} entries, no entry {i}"))?;
            if rest.len() == 1 {
                return Err(format!("`{key}.{i}` is a table: name a key inside it"));
            }
            format!("{i}.{}", set(t, &rest[1..], value)?)
        }
        Item::Value(Value::InlineTable(t)) => {
            let mut table = t.clone().into_table();
            let below = set(&mut table, rest, value)?;
            *item = Item::Value(Value::InlineTable(table.into_inline_table()));
            below
        }
        _ => return Err(format!("`{key}` is a value, not a table")),
    };
    Ok(format!("{key}.{below}"))
}

/// The table's key equal to `segment` ignoring case, else `segment` in lower case.
fn existing_key(table: &Table, segment: &str) -> String {
    table
        .iter()
        .map(|(k, _)| k)
        .find(|k| k.eq_ignore_ascii_case(segment))
        .map_or_else(|| segment.to_ascii_lowercase(), str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    const FILE: &str = r#"# comment kept
[server]
listen = "127.0.0.1:3307"

[[users]]
name = "app"
password = "app"

[datasources.DS0]
address = "127.0.0.1:33061"
user = "root"
pool_size = 8
"#;

    #[test]
    fn overrides_set_existing_and_new_keys_and_keep_the_rest() {
        let (text, applied) = apply(
            FILE,
            vars(&[
                ("ROUTEKEY_SERVER__LISTEN", "0.0.0.0:3307"),
                ("ROUTEKEY_DATASOURCES__DS0__PASSWORD", "12345"),
                ("ROUTEKEY_DATASOURCES__DS0__POOL_SIZE", "64"),
                ("ROUTEKEY_USERS__0__PASSWORD", "s3cret"),
                ("ROUTEKEY_ADMIN__LISTEN", "10.0.0.7:9307"),
                ("ROUTEKEY_ADMIN_LISTEN", "not an override"),
                ("PATH", "/usr/bin"),
            ]),
        )
        .unwrap();
        let v: toml::Value = toml::from_str(&text).unwrap();
        assert_eq!(v["server"]["listen"].as_str(), Some("0.0.0.0:3307"));
        // A password of digits stays a string; a pool size becomes a number.
        assert_eq!(v["datasources"]["DS0"]["password"].as_str(), Some("12345"));
        assert_eq!(v["datasources"]["DS0"]["pool_size"].as_integer(), Some(64));
        assert_eq!(v["users"][0]["password"].as_str(), Some("s3cret"));
        assert_eq!(v["admin"]["listen"].as_str(), Some("10.0.0.7:9307"));
        assert!(text.starts_with("# comment kept"));
        assert_eq!(
            applied,
            [
                "admin.listen",
                "datasources.DS0.password",
                "datasources.DS0.pool_size",
                "server.listen",
                "users.0.password"
            ]
        );
    }

    #[test]
    fn overrides_that_cannot_apply_name_their_variable() {
        for (var, value, message) in [
            ("ROUTEKEY_USERS__5__PASSWORD", "x", "no entry 5"),
            ("ROUTEKEY_USERS__X__PASSWORD", "x", "index it with a number"),
            ("ROUTEKEY_SERVER__LISTEN__PORT", "1", "is a value"),
            ("ROUTEKEY_SERVER____LISTEN", "1", "empty key segment"),
        ] {
            let e = apply(FILE, vars(&[(var, value)])).unwrap_err();
            assert!(e.starts_with(var) && e.contains(message), "{e}");
        }
    }

    #[test]
    fn a_file_that_is_not_toml_is_left_to_validation() {
        let bad = "[server]\npassword = hunter2-SECRET\n";
        let (text, applied) = apply(bad, vars(&[("ROUTEKEY_SERVER__LISTEN", "x")])).unwrap();
        assert_eq!(text, bad);
        assert!(applied.is_empty());
    }

    #[test]
    fn no_overrides_leave_the_text_as_it_is() {
        let (text, applied) = apply(FILE, vars(&[("HOME", "/root")])).unwrap();
        assert_eq!(text, FILE);
        assert!(applied.is_empty());
    }
}
