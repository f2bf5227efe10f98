//! The TOML file as written: serde types with `deny_unknown_fields`. Validation into
//! [`super::Config`] happens in `super::validate`; nothing else reads these types.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    pub server: RawServer,
    #[serde(default)]
    pub users: Vec<RawUser>,
    pub datasources: BTreeMap<String, RawDatasource>,
    #[serde(default)]
    pub id: RawId,
    pub channels: Vec<RawChannel>,
    #[serde(default)]
    pub regions: BTreeMap<String, Spanned<String>>,
    pub sharding: RawSharding,
    pub index: RawIndex,
    #[serde(default)]
    pub cache: RawCache,
    #[serde(default)]
    pub issuance: RawIssuance,
    #[serde(default)]
    pub admin: RawAdmin,
    #[serde(default)]
    pub log: RawLog,
    #[serde(default)]
    pub topology: RawTopology,
    #[serde(default)]
    pub transactions: RawTransactions,
    #[serde(default)]
    pub shard_map: RawShardMap,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawShardMap {
    #[serde(default = "default_shard_map_table")]
    pub table: String,
    #[serde(default = "default_moves_table")]
    pub moves_table: String,
    #[serde(default = "default_poll_interval", with = "humantime_serde")]
    pub poll_interval: Duration,
    #[serde(default = "default_fence_wait", with = "humantime_serde")]
    pub fence_wait: Duration,
}

impl Default for RawShardMap {
    fn default() -> Self {
        Self {
            table: default_shard_map_table(),
            moves_table: default_moves_table(),
            poll_interval: default_poll_interval(),
            fence_wait: default_fence_wait(),
        }
    }
}

fn default_shard_map_table() -> String {
    "routekey_shard_map".to_owned()
}

fn default_moves_table() -> String {
    "routekey_shard_moves".to_owned()
}

fn default_poll_interval() -> Duration {
    Duration::from_secs(1)
}

fn default_fence_wait() -> Duration {
    Duration::from_secs(5)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTransactions {
    #[serde(default)]
    pub cross_datasource: super::model::CrossDatasource,
    #[serde(default = "default_abandon_age", with = "humantime_serde")]
    pub abandon_age: Duration,
    #[serde(default = "default_resolve_interval", with = "humantime_serde")]
    pub resolve_interval: Duration,
    #[serde(default = "default_decision_retention", with = "humantime_serde")]
    pub decision_retention: Duration,
    #[serde(default = "default_decision_database")]
    pub database: String,
    #[serde(default = "default_decision_table")]
    pub decision_table: String,
}

impl Default for RawTransactions {
    fn default() -> Self {
        Self {
            cross_datasource: super::model::CrossDatasource::default(),
            abandon_age: default_abandon_age(),
            resolve_interval: default_resolve_interval(),
            decision_retention: default_decision_retention(),
            database: default_decision_database(),
            decision_table: default_decision_table(),
        }
    }
}

fn default_abandon_age() -> Duration {
    Duration::from_secs(30)
}

fn default_resolve_interval() -> Duration {
    Duration::from_secs(5)
}

fn default_decision_retention() -> Duration {
    Duration::from_secs(24 * 3600)
}

fn default_decision_database() -> String {
    "routekey".to_owned()
}

fn default_decision_table() -> String {
    "routekey_xa_decisions".to_owned()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTopology {
    #[serde(default = "default_probe_interval", with = "humantime_serde")]
    pub probe_interval: Duration,
    #[serde(default = "default_probe_interval", with = "humantime_serde")]
    pub probe_timeout: Duration,
    #[serde(default = "default_failover_wait", with = "humantime_serde")]
    pub failover_wait: Duration,
    #[serde(default = "default_max_replica_lag", with = "humantime_serde")]
    pub max_replica_lag: Duration,
    #[serde(default = "default_causal_wait", with = "humantime_serde")]
    pub causal_wait: Duration,
}

impl Default for RawTopology {
    fn default() -> Self {
        Self {
            probe_interval: default_probe_interval(),
            probe_timeout: default_probe_interval(),
            failover_wait: default_failover_wait(),
            max_replica_lag: default_max_replica_lag(),
            causal_wait: default_causal_wait(),
        }
    }
}

fn default_probe_interval() -> Duration {
    Duration::from_secs(1)
}

fn default_failover_wait() -> Duration {
    Duration::from_secs(10)
}

fn default_max_replica_lag() -> Duration {
    Duration::from_secs(5)
}

fn default_causal_wait() -> Duration {
    Duration::from_millis(50)
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLog {
    #[serde(default)]
    pub statements: super::model::StatementLog,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawIssuance {
    pub route_key_channels: Option<Spanned<Vec<String>>>,
    #[serde(default = "default_clock_tolerance", with = "humantime_serde")]
    pub clock_tolerance: Duration,
    #[serde(default = "default_lease_table")]
    pub lease_table: String,
    #[serde(default = "default_lease_ttl", with = "humantime_serde")]
    pub lease_ttl: Duration,
    #[serde(default = "default_legacy_machine_base")]
    pub legacy_machine_base: u64,
    #[serde(default = "default_legacy_machine_bits")]
    pub legacy_machine_bits: u8,
    #[serde(default = "default_legacy_sequence_bits")]
    pub legacy_sequence_bits: u8,
}

impl Default for RawIssuance {
    fn default() -> Self {
        Self {
            route_key_channels: None,
            clock_tolerance: default_clock_tolerance(),
            lease_table: default_lease_table(),
            lease_ttl: default_lease_ttl(),
            legacy_machine_base: default_legacy_machine_base(),
            legacy_machine_bits: default_legacy_machine_bits(),
            legacy_sequence_bits: default_legacy_sequence_bits(),
        }
    }
}

fn default_clock_tolerance() -> Duration {
    Duration::from_millis(5)
}

fn default_lease_table() -> String {
    "routekey_worker_lease".to_owned()
}

fn default_lease_ttl() -> Duration {
    Duration::from_secs(10)
}

fn default_legacy_machine_base() -> u64 {
    512
}

fn default_legacy_machine_bits() -> u8 {
    10
}

fn default_legacy_sequence_bits() -> u8 {
    12
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAdmin {
    #[serde(default = "default_admin_listen")]
    pub listen: Spanned<String>,
    #[serde(default)]
    pub token_file: Option<String>,
}

impl Default for RawAdmin {
    fn default() -> Self {
        Self {
            listen: default_admin_listen(),
            token_file: None,
        }
    }
}

fn default_admin_listen() -> Spanned<String> {
    Spanned::new(0..0, "127.0.0.1:9307".to_owned())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    pub listen: Spanned<String>,
    #[serde(default = "default_server_version")]
    pub server_version: String,
    #[serde(default = "default_max_packet_size")]
    pub max_packet_size: usize,
    #[serde(default = "default_analysis_cache")]
    pub analysis_cache_capacity: u64,
    #[serde(default = "default_handshake_timeout", with = "humantime_serde")]
    pub handshake_timeout: Duration,
    #[serde(default = "default_client_write_timeout", with = "humantime_serde")]
    pub client_write_timeout: Duration,
    #[serde(default = "default_drain_timeout", with = "humantime_serde")]
    pub drain_timeout: Duration,
    #[serde(default, with = "humantime_serde")]
    pub drain_delay: Duration,
    pub socket: Option<String>,
    pub socket_mode: Option<String>,
    pub tls_cert_file: Option<String>,
    pub tls_key_file: Option<String>,
    pub rsa_private_key_file: Option<String>,
    #[serde(default)]
    pub worker_threads: Option<usize>,
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
}

fn default_max_connections() -> usize {
    2048
}

fn default_drain_timeout() -> Duration {
    Duration::from_secs(30)
}

fn default_client_write_timeout() -> Duration {
    Duration::from_secs(60)
}

fn default_handshake_timeout() -> Duration {
    Duration::from_secs(10)
}

fn default_server_version() -> String {
    String::new()
}

fn default_max_packet_size() -> usize {
    64 * 1024 * 1024
}

fn default_analysis_cache() -> u64 {
    10_000
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUser {
    pub name: String,
    pub password: Option<String>,
    pub password_env: Option<String>,
    pub password_file: Option<String>,
    pub password_hash: Option<String>,
    #[serde(default)]
    pub auth_plugin: super::model::AuthPlugin,
    #[serde(default)]
    pub require_tls: bool,
    #[serde(default = "allow")]
    pub scatter: super::model::Scatter,
    #[serde(default = "refuse")]
    pub scatter_writes: super::model::Scatter,
    #[serde(default)]
    pub databases: Vec<String>,
    #[serde(default)]
    pub process: bool,
    #[serde(default)]
    pub load_data_local: bool,
    #[serde(default)]
    pub reads: super::model::Reads,
    pub consistency: Option<super::model::Consistency>,
}

fn allow() -> super::model::Scatter {
    super::model::Scatter::Allow
}

fn refuse() -> super::model::Scatter {
    super::model::Scatter::Refuse
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDatasource {
    pub address: Option<Spanned<String>>,
    pub members: Option<Spanned<Vec<String>>>,
    pub user: String,
    pub password: Option<String>,
    pub password_env: Option<String>,
    pub password_file: Option<String>,
    pub database: Option<String>,
    #[serde(default = "default_pool_size")]
    pub pool_size: u32,
    #[serde(default = "default_connect_timeout", with = "humantime_serde")]
    pub connect_timeout: Duration,
    #[serde(default = "default_checkout_timeout", with = "humantime_serde")]
    pub checkout_timeout: Duration,
    #[serde(default = "default_idle_timeout", with = "humantime_serde")]
    pub idle_timeout: Duration,
    #[serde(default = "default_query_timeout", with = "humantime_serde")]
    pub query_timeout: Duration,
    #[serde(default)]
    pub tls: super::model::BackendTls,
    pub tls_ca_file: Option<String>,
}

impl RawDatasource {
    /// Where the datasource's servers are written (`address` or `members`), for errors.
    pub fn span(&self) -> Option<std::ops::Range<usize>> {
        match (&self.address, &self.members) {
            (Some(a), _) => Some(a.span()),
            (None, Some(m)) => Some(m.span()),
            (None, None) => None,
        }
    }
}

fn default_query_timeout() -> Duration {
    Duration::from_secs(600)
}

fn default_pool_size() -> u32 {
    32
}

fn default_connect_timeout() -> Duration {
    Duration::from_secs(2)
}

fn default_checkout_timeout() -> Duration {
    Duration::from_secs(5)
}

fn default_idle_timeout() -> Duration {
    Duration::from_secs(600)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawId {
    #[serde(default = "default_epoch")]
    pub epoch: Spanned<String>,
    #[serde(default = "default_timestamp_bits")]
    pub timestamp_bits: u8,
    #[serde(default = "default_worker_bits")]
    pub worker_bits: u8,
    #[serde(default = "default_route_key_bits")]
    pub route_key_bits: u8,
    #[serde(default = "default_sequence_bits")]
    pub sequence_bits: u8,
    #[serde(default = "default_clock_skew", with = "humantime_serde")]
    pub clock_skew: Duration,
}

impl Default for RawId {
    fn default() -> Self {
        Self {
            epoch: default_epoch(),
            timestamp_bits: default_timestamp_bits(),
            worker_bits: default_worker_bits(),
            route_key_bits: default_route_key_bits(),
            sequence_bits: default_sequence_bits(),
            clock_skew: default_clock_skew(),
        }
    }
}

fn default_epoch() -> Spanned<String> {
    Spanned::new(0..0, "2010-11-04T01:42:54.657Z".to_owned())
}

fn default_timestamp_bits() -> u8 {
    41
}

fn default_worker_bits() -> u8 {
    5
}

fn default_route_key_bits() -> u8 {
    4
}

fn default_sequence_bits() -> u8 {
    14
}

fn default_clock_skew() -> Duration {
    Duration::from_secs(5)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawChannel {
    pub name: Spanned<String>,
    pub code: Spanned<u8>,
    pub base_shard: Spanned<u32>,
    pub route_key_since: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSharding {
    pub logical_database: String,
    pub default_datasource: Spanned<String>,
    #[serde(default = "default_shards_per_channel")]
    pub shards_per_channel: Spanned<u32>,
    pub binding_tables: Spanned<Vec<String>>,
    #[serde(default = "default_shard_key")]
    pub shard_key: String,
    #[serde(default = "default_channel_column")]
    pub channel_column: String,
    #[serde(default = "default_region_column")]
    pub region_column: String,
    pub physical_database: Spanned<String>,
    pub physical_table: Spanned<String>,
    pub shards: Vec<RawShardRange>,
    #[serde(default)]
    pub unresolved_reads: super::model::UnresolvedReads,
    #[serde(default = "default_merge_row_cap")]
    pub merge_row_cap: Spanned<u64>,
    pub max_fan_out: Option<Spanned<u32>>,
    #[serde(default = "default_true")]
    pub combine_shards: bool,
}

fn default_true() -> bool {
    true
}

fn default_merge_row_cap() -> Spanned<u64> {
    Spanned::new(0..0, 1_000_000)
}

fn default_shards_per_channel() -> Spanned<u32> {
    Spanned::new(0..0, 4)
}

fn default_shard_key() -> String {
    "order_id".to_owned()
}

fn default_channel_column() -> String {
    "channel".to_owned()
}

fn default_region_column() -> String {
    "region".to_owned()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawShardRange {
    pub first: Spanned<u32>,
    pub last: Spanned<u32>,
    pub datasource: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawIndex {
    pub datasource: Spanned<String>,
    pub database: String,
    pub table: String,
    #[serde(default = "default_shard_key")]
    pub order_id_column: String,
    #[serde(default = "default_channel_column")]
    pub channel_column: String,
    pub created_at_column: Option<String>,
    #[serde(default = "default_index_timeout", with = "humantime_serde")]
    pub timeout: Duration,
}

fn default_index_timeout() -> Duration {
    Duration::from_secs(2)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCache {
    #[serde(default = "default_cache_capacity")]
    pub capacity: u64,
    #[serde(default = "default_cache_ttl", with = "humantime_serde")]
    pub ttl: Duration,
    #[serde(default = "default_negative_ttl", with = "humantime_serde")]
    pub negative_ttl: Duration,
    pub redis_url: Option<Spanned<String>>,
    #[serde(default = "default_redis_timeout", with = "humantime_serde")]
    pub redis_timeout: Duration,
    #[serde(default = "default_redis_retry_after", with = "humantime_serde")]
    pub redis_retry_after: Duration,
}

impl Default for RawCache {
    fn default() -> Self {
        Self {
            capacity: default_cache_capacity(),
            ttl: default_cache_ttl(),
            negative_ttl: default_negative_ttl(),
            redis_url: None,
            redis_timeout: default_redis_timeout(),
            redis_retry_after: default_redis_retry_after(),
        }
    }
}

fn default_redis_timeout() -> Duration {
    Duration::from_millis(50)
}

fn default_redis_retry_after() -> Duration {
    Duration::from_secs(1)
}

fn default_cache_capacity() -> u64 {
    1_000_000
}

fn default_cache_ttl() -> Duration {
    Duration::from_secs(3600)
}

fn default_negative_ttl() -> Duration {
    Duration::from_secs(2)
}
