//! Turns the raw TOML into a [`Config`], checking everything that serde cannot: references
//! between sections, unique codes, a complete shard map without overlaps.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, UNIX_EPOCH};

use toml::Spanned;

use super::model::*;
use super::raw::RawConfig;
use crate::id::IdLayout;
use cluster::{members, shard_map, topology, transactions};
use sources::{cache, secret};

mod checker;
mod cluster;
mod sharding;
mod sources;
#[cfg(test)]
mod sources_tests;

use checker::Checker;

pub(super) fn validate(text: &str, origin: &str) -> Result<Config, ConfigError> {
    let c = Checker { text, origin };
    let raw: RawConfig = toml::from_str(text).map_err(|e| {
        // toml's message already names the key and quotes the line; keep only its text.
        let message = e.message().to_owned();
        c.err(e.span(), message)
    })?;

    let server = server(&c, &raw)?;
    let users = raw
        .users
        .iter()
        .enumerate()
        .map(|(i, u)| user(&c, i, u))
        .collect::<Result<Vec<_>, ConfigError>>()?;
    if users.is_empty() {
        return Err(c.err(None, "users: at least one [[users]] entry is required"));
    }
    let (datasources, ds_index) = datasources(&c, &raw)?;
    let layout = layout(&c, &raw)?;
    let channels = channels(&c, &raw, &layout)?;
    let regions = regions(&c, &raw, &channels)?;
    let lookup_ds = |name: &Spanned<String>, key: &str| {
        ds_index
            .get(name.get_ref().as_str())
            .copied()
            .ok_or_else(|| {
                c.at(
                    name,
                    format!("{key}: unknown datasource `{}`", name.get_ref()),
                )
            })
    };
    let sharding = sharding::sharding(&c, &raw.sharding, &channels, &raw.channels, &lookup_ds)?;
    let index = IndexTable {
        datasource: lookup_ds(&raw.index.datasource, "index.datasource")?,
        database: raw.index.database.clone(),
        table: raw.index.table.clone(),
        order_id_column: raw.index.order_id_column.clone(),
        channel_column: raw.index.channel_column.clone(),
        created_at_column: raw.index.created_at_column.clone(),
        timeout: raw.index.timeout,
    };
    user_databases(&c, &users, &sharding, &index)?;
    let issuance = issuance(&c, &raw, &channels, &layout)?;
    let admin = admin(&c, &raw)?;
    let cache = cache(&c, &raw)?;
    Ok(Config {
        server,
        users,
        datasources,
        layout,
        clock_skew: raw.id.clock_skew,
        channels,
        regions,
        sharding,
        index,
        cache,
        issuance,
        admin,
        log: crate::config::model::LogConfig {
            statements: raw.log.statements,
        },
        topology: topology(&c, &raw)?,
        transactions: transactions(&c, &raw)?,
        shard_map: shard_map(&c, &raw)?,
        overrides: Vec::new(),
    })
}

/// `[admin]`: the address, and the token from `token_file` (required unless the address
/// is loopback).
fn admin(c: &Checker, raw: &RawConfig) -> Result<Admin, ConfigError> {
    let listen = raw.admin.listen.get_ref().parse().map_err(|_| {
        c.at(
            &raw.admin.listen,
            format!(
                "admin.listen: `{}` is not an IP address with a port",
                raw.admin.listen.get_ref()
            ),
        )
    })?;
    let token = match &raw.admin.token_file {
        None => None,
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| c.err(None, format!("admin.token_file: cannot read {path}: {e}")))?;
            let token = AdminToken::new(&text)
                .ok_or_else(|| c.err(None, format!("admin.token_file: {path} is empty")))?;
            Some(token)
        }
    };
    let admin = Admin { listen, token };
    admin.check().map_err(|e| c.at(&raw.admin.listen, e))?;
    Ok(admin)
}

fn issuance(
    c: &Checker,
    raw: &RawConfig,
    channels: &[Channel],
    layout: &IdLayout,
) -> Result<Issuance, ConfigError> {
    let r = &raw.issuance;
    let route_key_channels = match &r.route_key_channels {
        None => vec![true; channels.len()],
        Some(names) => {
            let mut on = vec![false; channels.len()];
            for name in names.get_ref() {
                let i = channels
                    .iter()
                    .position(|ch| ch.name.eq_ignore_ascii_case(name))
                    .ok_or_else(|| {
                        c.at(
                            names,
                            format!("issuance.route_key_channels: unknown channel `{name}`"),
                        )
                    })?;
                on[i] = true;
            }
            on
        }
    };
    let legacy = crate::id::generator::LegacyLayout {
        machine_bits: r.legacy_machine_bits,
        sequence_bits: r.legacy_sequence_bits,
        epoch_ms: layout.epoch_ms(),
    };
    let workers = 1u64 << layout.worker_bits();
    if u32::from(r.legacy_machine_bits) + u32::from(r.legacy_sequence_bits) >= 32
        || r.legacy_machine_base + workers > 1u64 << r.legacy_machine_bits
    {
        return Err(c.err(
            None,
            format!(
                "issuance: legacy machine ids {}..{} do not fit {} machine bits (or the classic layout leaves fewer than 32 timestamp bits)",
                r.legacy_machine_base,
                r.legacy_machine_base + workers,
                r.legacy_machine_bits
            ),
        ));
    }
    if r.lease_ttl < Duration::from_secs(1) {
        return Err(c.err(None, "issuance.lease_ttl: at least 1s"));
    }
    Ok(Issuance {
        route_key_channels,
        clock_tolerance: r.clock_tolerance,
        lease_table: r.lease_table.clone(),
        lease_ttl: r.lease_ttl,
        legacy_machine_base: r.legacy_machine_base,
        legacy,
    })
}

/// One `[[users]]` entry: exactly one of the password keys, a hash of the form its plugin
/// reads.
fn user(c: &Checker, i: usize, u: &super::raw::RawUser) -> Result<User, ConfigError> {
    use crate::config::credential::Credential;
    use crate::config::model::AuthPlugin;
    let what = format!("users[{i}] ({})", u.name);
    let from_outside = u.password.is_none();
    let password = secret(c, &what, &u.password, &u.password_env, &u.password_file)?;
    let credential = match (password, &u.password_hash) {
        (Some(_), Some(_)) => {
            return Err(c.err(
                None,
                format!("{what}: give either a password key or password_hash, not both"),
            ));
        }
        (None, None) => {
            return Err(c.err(
                None,
                format!(
                    "{what}: one of password, password_env, password_file or password_hash is required"
                ),
            ));
        }
        (Some(p), None) => {
            if from_outside && p.is_empty() {
                // An empty Secret or variable is a deployment mistake, not a wish for an
                // account without a password.
                return Err(c.err(
                    None,
                    format!("{what}: the password from password_env/password_file is empty"),
                ));
            }
            Credential::Password(p)
        }
        (None, Some(hash)) => crate::config::credential::parse_hash(hash)
            .map_err(|e| c.err(None, format!("{what}.password_hash: {e}")))?,
    };
    let hash_plugin = match credential {
        Credential::Password(_) => None,
        Credential::NativeHash(_) => Some(AuthPlugin::MysqlNativePassword),
        Credential::Sha2Crypt(_) => Some(AuthPlugin::CachingSha2Password),
    };
    if hash_plugin.is_some_and(|p| p != u.auth_plugin) {
        return Err(c.err(
            None,
            format!(
                "{what}.password_hash: a {} hash, but auth_plugin is {}",
                hash_plugin.expect("checked").name(),
                u.auth_plugin.name()
            ),
        ));
    }
    Ok(User {
        name: u.name.clone(),
        credential,
        auth_plugin: u.auth_plugin,
        require_tls: u.require_tls,
        scatter: u.scatter,
        scatter_writes: u.scatter_writes,
        databases: u.databases.clone(),
        process: u.process,
        load_data_local: u.load_data_local,
        reads: u.reads,
        consistency: u.consistency.unwrap_or_default(),
    })
}

fn server(c: &Checker, raw: &RawConfig) -> Result<ServerConfig, ConfigError> {
    let socket = unix_socket(c, &raw.server)?;
    let listen = match raw.server.listen.get_ref().as_str() {
        "" if socket.is_some() => None,
        text => Some(text.parse::<SocketAddr>().map_err(|_| {
            c.at(
                &raw.server.listen,
                format!(
                    "server.listen: `{text}` is not an IP address with a port (it may be \"\" only when server.socket is set)"
                ),
            )
        })?),
    };
    if raw.server.max_packet_size < 1024 * 1024 {
        return Err(c.err(None, "server.max_packet_size: must be at least 1 MiB"));
    }
    if raw.server.drain_delay >= raw.server.drain_timeout {
        return Err(c.err(
            None,
            "server.drain_delay: must be shorter than server.drain_timeout (the delay counts against it)",
        ));
    }
    if raw.server.max_connections == 0 {
        return Err(c.err(None, "server.max_connections: must be at least 1"));
    }
    let write_timeout = raw.server.client_write_timeout;
    if !write_timeout.is_zero() && write_timeout < std::time::Duration::from_secs(1) {
        return Err(c.err(
            None,
            "server.client_write_timeout: must be at least 1s (MariaDB's net_write_timeout too), or 0s to turn it off",
        ));
    }
    if raw.server.worker_threads == Some(0) || raw.server.worker_threads > Some(1024) {
        return Err(c.err(
            None,
            "server.worker_threads: must be 1 to 1024 (leave it out to use the CPUs the process may use)",
        ));
    }
    Ok(ServerConfig {
        listen,
        socket,
        server_version: raw.server.server_version.clone(),
        max_packet_size: raw.server.max_packet_size,
        analysis_cache_capacity: raw.server.analysis_cache_capacity,
        handshake_timeout: raw.server.handshake_timeout,
        client_write_timeout: raw.server.client_write_timeout,
        max_connections: raw.server.max_connections,
        drain_timeout: raw.server.drain_timeout,
        drain_delay: raw.server.drain_delay,
        tls: match (&raw.server.tls_cert_file, &raw.server.tls_key_file) {
            (Some(cert), Some(key)) => Some(crate::config::model::TlsFiles {
                cert_file: cert.into(),
                key_file: key.into(),
            }),
            (None, None) => None,
            _ => {
                return Err(c.err(
                    None,
                    "server.tls_cert_file, server.tls_key_file: give both or neither",
                ));
            }
        },
        rsa_private_key_file: raw.server.rsa_private_key_file.as_ref().map(Into::into),
        worker_threads: raw.server.worker_threads,
    })
}

/// A user's `databases` may name neither the proxy's own databases (a shard database, the
/// index table's, `mysql`: reaching them would bypass routing and the index) nor be empty;
/// the logical database and `information_schema` are every user's already (SPEC §8a).
fn user_databases(
    c: &Checker,
    users: &[User],
    sharding: &crate::config::model::Sharding,
    index: &IndexTable,
) -> Result<(), ConfigError> {
    for (i, u) in users.iter().enumerate() {
        for db in &u.databases {
            let why = if db.is_empty() {
                Some("an empty name")
            } else if sharding
                .shards
                .iter()
                .any(|s| s.database.eq_ignore_ascii_case(db))
            {
                Some("a shard database (its tables are reached through the logical database)")
            } else if index.database.eq_ignore_ascii_case(db) {
                Some("the index table's database (the proxy keeps it consistent with the shards)")
            } else if db.eq_ignore_ascii_case("mysql") {
                Some("the `mysql` system database (the backend account's privileges live there)")
            } else {
                None
            };
            if let Some(why) = why {
                return Err(c.err(
                    None,
                    format!(
                        "users[{i}] ({}): databases: `{db}` is {why}; a user may be given other databases on the default datasource only",
                        u.name
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// `server.socket` and `server.socket_mode` (octal, default 0660).
fn unix_socket(
    c: &Checker,
    raw: &super::raw::RawServer,
) -> Result<Option<crate::config::model::UnixSocket>, ConfigError> {
    let mode = match raw.socket_mode.as_deref() {
        None => 0o660,
        Some(text) => u32::from_str_radix(text.trim_start_matches("0o"), 8)
            .ok()
            .filter(|m| *m <= 0o777)
            .ok_or_else(|| {
                c.err(
                    None,
                    format!(
                        "server.socket_mode: `{text}` is not a file mode in octal (like \"0660\")"
                    ),
                )
            })?,
    };
    match raw.socket.as_deref() {
        None if raw.socket_mode.is_some() => Err(c.err(
            None,
            "server.socket_mode: set server.socket too (the mode is the socket file's)",
        )),
        None => Ok(None),
        Some("") => Err(c.err(None, "server.socket: empty path")),
        // sun_path holds 108 bytes with its NUL.
        Some(path) if path.len() > 107 => Err(c.err(
            None,
            format!("server.socket: `{path}` is longer than a Unix socket path may be (107 bytes)"),
        )),
        Some(path) => Ok(Some(crate::config::model::UnixSocket {
            path: path.into(),
            mode,
        })),
    }
}

/// The longest datasource name: an XA branch qualifier (at most 64 bytes) holds the
/// branch's datasource number, a `:` and the decision datasource's name.
const MAX_DATASOURCE_NAME: usize = 48;

fn datasources(
    c: &Checker,
    raw: &RawConfig,
) -> Result<(Vec<Datasource>, HashMap<String, DatasourceId>), ConfigError> {
    let mut list = Vec::new();
    let mut index = HashMap::new();
    if raw.datasources.is_empty() {
        return Err(c.err(None, "datasources: at least one datasource is required"));
    }
    if raw.datasources.len() > usize::from(u16::MAX) {
        return Err(c.err(None, "datasources: too many"));
    }
    for (name, ds) in &raw.datasources {
        if name.len() > MAX_DATASOURCE_NAME {
            // An XA branch qualifier (64 bytes) carries it (docs/decisions/0004).
            return Err(c.err(
                ds.span(),
                format!(
                    "datasources.{name}: a datasource name has at most {MAX_DATASOURCE_NAME} characters (XA branch qualifiers name it)"
                ),
            ));
        }
        let members = members(c, name, ds)?;
        let address = members[0].clone();
        if ds.pool_size == 0 {
            return Err(c.err(
                ds.span(),
                format!("datasources.{name}.pool_size: must be at least 1"),
            ));
        }
        index.insert(name.clone(), DatasourceId(list.len() as u16));
        list.push(Datasource {
            name: name.clone(),
            address,
            cluster: ds.members.is_some(),
            members,
            user: ds.user.clone(),
            password: secret(
                c,
                &format!("datasources.{name}"),
                &ds.password,
                &ds.password_env,
                &ds.password_file,
            )?
            .unwrap_or_default(),
            database: ds.database.clone(),
            pool_size: ds.pool_size,
            connect_timeout: ds.connect_timeout,
            checkout_timeout: ds.checkout_timeout,
            idle_timeout: ds.idle_timeout,
            query_timeout: ds.query_timeout,
            tls: ds.tls,
            tls_ca_certs: sources::tls_ca_certs(c, name, ds)?,
        });
    }
    Ok((list, index))
}

fn unix_ms(c: &Checker, value: &Spanned<String>, key: &str) -> Result<u64, ConfigError> {
    let t = humantime::parse_rfc3339_weak(value.get_ref()).map_err(|e| {
        c.at(
            value,
            format!(
                "{key}: `{}` is not an RFC 3339 UTC time ({e})",
                value.get_ref()
            ),
        )
    })?;
    let ms = t
        .duration_since(UNIX_EPOCH)
        .map_err(|_| c.at(value, format!("{key}: before 1970")))?
        .as_millis();
    u64::try_from(ms).map_err(|_| c.at(value, format!("{key}: out of range")))
}

fn layout(c: &Checker, raw: &RawConfig) -> Result<IdLayout, ConfigError> {
    let epoch = unix_ms(c, &raw.id.epoch, "id.epoch")?;
    IdLayout::new(
        raw.id.timestamp_bits,
        raw.id.worker_bits,
        raw.id.route_key_bits,
        raw.id.sequence_bits,
        epoch,
    )
    .map_err(|e| c.err(None, format!("id: {e}")))
}

fn channels(c: &Checker, raw: &RawConfig, layout: &IdLayout) -> Result<Vec<Channel>, ConfigError> {
    let mut out: Vec<Channel> = Vec::new();
    if raw.channels.is_empty() {
        return Err(c.err(
            None,
            "channels: at least one [[channels]] entry is required",
        ));
    }
    if raw.channels.len() > 255 {
        return Err(c.err(None, "channels: at most 255"));
    }
    let max_code = (1u16 << layout.route_key_bits()) - 1;
    for (i, ch) in raw.channels.iter().enumerate() {
        let key = format!("channels[{i}]");
        let name = ch.name.get_ref().trim();
        if name.is_empty() {
            return Err(c.at(&ch.name, format!("{key}.name: empty")));
        }
        if let Some(other) = out.iter().find(|o| o.name.eq_ignore_ascii_case(name)) {
            return Err(c.at(
                &ch.name,
                format!(
                    "{key}.name: `{name}` is already defined (as `{}`)",
                    other.name
                ),
            ));
        }
        let code = *ch.code.get_ref();
        if code == 0 || u16::from(code) > max_code {
            return Err(c.at(
                &ch.code,
                format!("{key}.code: {code} is not in 1..={max_code} (0 means no region)"),
            ));
        }
        if let Some(other) = out.iter().find(|o| o.code == code) {
            return Err(c.at(
                &ch.code,
                format!("{key}.code: {code} is already used by {}", other.name),
            ));
        }
        let since = unix_ms(c, &ch.route_key_since, &format!("{key}.route_key_since"))?;
        if since < layout.epoch_ms() {
            return Err(c.at(
                &ch.route_key_since,
                format!("{key}.route_key_since: before the id epoch"),
            ));
        }
        out.push(Channel {
            name: name.to_owned(),
            code,
            base_shard: *ch.base_shard.get_ref(),
            route_key_since_ms: since,
        });
    }
    Ok(out)
}

fn regions(
    c: &Checker,
    raw: &RawConfig,
    channels: &[Channel],
) -> Result<HashMap<String, ChannelId>, ConfigError> {
    let mut out = HashMap::new();
    for (region, channel) in &raw.regions {
        let id = channels
            .iter()
            .position(|ch| ch.name.eq_ignore_ascii_case(channel.get_ref()))
            .ok_or_else(|| {
                c.at(
                    channel,
                    format!("regions.{region}: unknown channel `{}`", channel.get_ref()),
                )
            })?;
        if out
            .insert(region.to_ascii_uppercase(), ChannelId(id as u8))
            .is_some()
        {
            return Err(c.at(
                channel,
                format!("regions.{region}: defined twice (regions are case-insensitive)"),
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::credential::Credential;

    const DEMO: &str = include_str!("../../../config/demo.toml");

    #[test]
    fn demo_config_is_valid() {
        let config = validate(DEMO, "demo.toml").unwrap();
        assert_eq!(config.channels.len(), 5);
        assert_eq!(config.sharding.shards.len(), 20);
        let eu = config.channel_by_name("eu_channel").unwrap();
        assert_eq!(config.shard_of(eu, 7), 3);
        assert_eq!(config.channel_by_region("gb"), Some(eu));
        assert_eq!(config.sharding.shards[3].tables[0], "t_order_3");
    }

    #[test]
    fn example_config_is_valid() {
        validate(include_str!("../../../config/example.toml"), "example.toml").unwrap();
    }

    fn with(from: &str, to: &str) -> String {
        assert!(DEMO.contains(from), "demo.toml lacks {from:?}");
        DEMO.replacen(from, to, 1)
    }

    fn error(text: &str) -> String {
        validate(text, "t.toml").unwrap_err().to_string()
    }

    #[test]
    fn a_unix_socket_beside_or_instead_of_tcp() {
        let both = with("[server]\n", "[server]\nsocket = \"/run/rk/mysql.sock\"\n");
        let config = validate(&both, "t").unwrap();
        let socket = config.server.socket.expect("a socket");
        assert_eq!(socket.path, std::path::Path::new("/run/rk/mysql.sock"));
        assert_eq!(socket.mode, 0o660);
        assert!(config.server.listen.is_some());
        let only = both.replacen("listen = \"127.0.0.1:3307\"", "listen = \"\"", 1);
        let config = validate(&only, "t").unwrap();
        assert_eq!(config.server.listen, None);
        let mode = with(
            "[server]\n",
            "[server]\nsocket = \"/s.sock\"\nsocket_mode = \"0666\"\n",
        );
        assert_eq!(
            validate(&mode, "t").unwrap().server.socket.unwrap().mode,
            0o666
        );
        let e = error(&with("listen = \"127.0.0.1:3307\"", "listen = \"\""));
        assert!(e.contains("only when server.socket is set"), "{e}");
        let e = error(&with(
            "[server]\n",
            "[server]\nsocket = \"/s\"\nsocket_mode = \"rw\"\n",
        ));
        assert!(e.contains("not a file mode in octal"), "{e}");
        let e = error(&with("[server]\n", "[server]\nsocket_mode = \"0600\"\n"));
        assert!(e.contains("set server.socket too"), "{e}");
        let long = format!("[server]\nsocket = \"/{}\"\n", "x".repeat(120));
        assert!(error(&with("[server]\n", &long)).contains("longer than"));
    }

    #[test]
    fn worker_threads_default_to_the_usable_cpus_and_refuse_zero() {
        let config = validate(DEMO, "demo.toml").unwrap();
        let usable = std::thread::available_parallelism().unwrap().get();
        assert_eq!(config.server.runtime_threads(), usable);
        let config = validate(&with("[server]\n", "[server]\nworker_threads = 3\n"), "t").unwrap();
        assert_eq!(config.server.runtime_threads(), 3);
        let e = error(&with("[server]\n", "[server]\nworker_threads = 0\n"));
        assert!(
            e.contains("server.worker_threads: must be 1 to 1024"),
            "{e}"
        );
    }

    #[test]
    fn unknown_keys_are_errors_with_a_line() {
        let e = error(&with("[server]\n", "[server]\nlisten_adress = \"x\"\n"));
        assert!(e.starts_with("t.toml:"), "{e}");
        assert!(e.contains("listen_adress"), "{e}");
    }

    #[test]
    fn duplicate_codes_are_refused_with_the_line() {
        let e = error(&with("code = 2", "code = 5"));
        assert!(e.contains("already used by EU_CHANNEL"), "{e}");
        let line = DEMO.lines().position(|l| l.contains("code = 2")).unwrap() + 1;
        assert!(e.starts_with(&format!("t.toml:{line}:")), "{e}");
    }

    #[test]
    fn unmapped_and_overlapping_shards_are_refused() {
        let e = error(&with("first = 10", "first = 11"));
        assert!(e.contains("shard 10 of CN_CHANNEL"), "{e}");
        let line = DEMO
            .lines()
            .position(|l| l.contains("base_shard = 8"))
            .unwrap()
            + 1;
        assert!(e.starts_with(&format!("t.toml:{line}:")), "{e}");
        let e = error(&with("first = 10", "first = 9"));
        assert!(e.contains("mapped twice"), "{e}");
        let e = error(&with("base_shard = 4", "base_shard = 2"));
        assert!(e.contains("overlap"), "{e}");
    }

    #[test]
    fn unknown_references_are_refused() {
        let e = error(&with(
            "default_datasource = \"ds0\"",
            "default_datasource = \"nope\"",
        ));
        assert!(e.contains("unknown datasource `nope`"), "{e}");
        let e = error(&with("GB = \"EU_CHANNEL\"", "GB = \"EU\""));
        assert!(e.contains("unknown channel `EU`"), "{e}");
    }

    /// The demo configuration with `lines` added to its `[cache]` table.
    fn with_cache(lines: &str) -> String {
        with(
            "negative_ttl = \"2s\"\n",
            &format!("negative_ttl = \"2s\"\n{lines}"),
        )
    }

    #[test]
    fn the_redis_tier_is_optional_and_has_defaults() {
        let config = validate(DEMO, "demo.toml").unwrap();
        assert!(config.cache.redis.is_none());
        let text = with_cache("redis_url = \"redis://127.0.0.1:6379/0\"\n");
        let redis = validate(&text, "t.toml").unwrap().cache.redis.unwrap();
        assert_eq!(redis.url, "redis://127.0.0.1:6379/0");
        assert_eq!(redis.timeout, Duration::from_millis(50));
        assert_eq!(redis.retry_after, Duration::from_secs(1));
        let text = with_cache(
            "redis_url = \"redis://:secret@cache.internal\"\nredis_timeout = \"20ms\"\nredis_retry_after = \"250ms\"\n",
        );
        let redis = validate(&text, "t.toml").unwrap().cache.redis.unwrap();
        assert_eq!(redis.timeout, Duration::from_millis(20));
        assert_eq!(redis.retry_after, Duration::from_millis(250));
    }

    #[test]
    fn unusable_redis_urls_are_refused_with_the_line() {
        let line = DEMO
            .lines()
            .position(|l| l.starts_with("negative_ttl"))
            .unwrap()
            + 2;
        for url in [
            "127.0.0.1:6379",
            "http://127.0.0.1:6379",
            "redis://127.0.0.1:6379/first",
            "rediss://:secret@127.0.0.1:6380",
        ] {
            let e = error(&with_cache(&format!("redis_url = \"{url}\"\n")));
            assert!(
                e.starts_with(&format!("t.toml:{line}: cache.redis_url: ")),
                "{url}: {e}"
            );
            assert!(!e.contains("secret"), "the password is not repeated: {e}");
        }
        let e = error(&with_cache(
            "redis_url = \"redis://127.0.0.1\"\nredis_timeout = \"0s\"\n",
        ));
        assert!(e.contains("cache.redis_timeout"), "{e}");
        let e = error(&with_cache("redis_timeout = \"soon\"\n"));
        assert!(e.starts_with(&format!("t.toml:{line}: ")), "{e}");
    }

    #[test]
    fn route_key_since_is_required_and_parsed() {
        let e = error(&DEMO.replacen("route_key_since = \"2024-01-01T00:00:00Z\"\n", "", 1));
        assert!(e.contains("route_key_since"), "{e}");
        let e = error(&with("2024-01-01T00:00:00Z", "yesterday"));
        assert!(e.contains("RFC 3339"), "{e}");
    }

    #[test]
    fn user_credentials_plugins_and_tls_files_are_checked() {
        let user = |lines: &str| {
            DEMO.replacen(
                "name = \"app\"\npassword = \"app\"\n",
                &format!("name = \"app\"\n{lines}\n"),
                1,
            )
        };
        let native = "password_hash = \"*14E65567ABDB5135D0CFD9A70B3032C179A49EE7\"";
        let config = validate(&user(native), "t.toml").unwrap();
        assert_eq!(
            config.users[0].credential,
            Credential::NativeHash(crate::config::credential::native_hash(b"secret"))
        );
        let sha2 = format!("{native}\nauth_plugin = \"caching_sha2_password\"");
        let e = error(&user(&sha2));
        assert!(
            e.contains("a mysql_native_password hash, but auth_plugin is caching_sha2_password"),
            "{e}"
        );
        let e = error(&user(&format!("{native}\npassword = \"x\"")));
        assert!(e.contains("not both"), "{e}");
        let e = error(&user("password_hash = \"*12\""));
        assert!(e.contains("40 hex digits"), "{e}");
        let e = error(&user("password = \"x\"\nauth_plugin = \"sha256_password\""));
        assert!(e.contains("unknown variant `sha256_password`"), "{e}");
        let e = error(&DEMO.replacen("tls_key_file", "# tls_key_file", 1));
        assert!(e.contains("give both or neither"), "{e}");
    }
}
