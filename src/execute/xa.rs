//! Atomic commits across datasources (issue 27; SPEC §5; docs/decisions/0004): the xid, the
//! process's coordinator (xids, counters, failpoints), the decision record both the
//! coordinator ([`super::commit`]) and the resolver ([`super::resolver`]) write.
//!
//! A transaction that writes on one datasource is a plain transaction there. Each further
//! datasource it joins starts an XA branch (`XA START xid`); the first one keeps its plain
//! transaction: the **decision branch**. `COMMIT` then runs:
//!
//! 1. `XA END` + `XA PREPARE` on every XA branch (any failure: everything rolls back);
//! 2. a commit record (`xid`, `'commit'`) inserted into the decision table *inside* the
//!    decision branch, and that branch's `COMMIT`: the transaction's decision;
//! 3. `XA COMMIT` on every XA branch; one that fails is finished by a resolver.
//!
//! Exactly one of `commit` and `abort` can be recorded for an xid (the table's key): a
//! resolver that finds a prepared branch with no record inserts `abort` first, so a late
//! coordinator's commit record fails on the key, and a resolver's abort waits for (and
//! then loses to) a decision branch that already holds the commit record's row lock.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::backend::BackendConn;
use crate::config::{Config, Datasource, DatasourceId};
use crate::error::ProxyError;
use crate::topology::{Cluster, Topology};

/// The XA format id of routekey-proxy's xids ("rk"): `XA RECOVER` rows with another format
/// id are someone else's and are never touched.
pub const FORMAT_ID: u32 = 0x726B;

/// The prefix of every gtrid routekey-proxy writes.
pub const GTRID_PREFIX: &str = "rk:";

/// ER_XA_RBROLLBACK: the transaction was rolled back (SQLSTATE XA100).
pub const ER_XA_RBROLLBACK: u16 = 1402;
/// ER_XAER_NOTA: unknown xid.
pub const ER_XAER_NOTA: u16 = 1397;

/// An XA transaction id: `gtrid` = `rk:<sidecar>:<start nonce>:<sequence>` (who
/// coordinates it, unique across restarts), `bqual` = `<branch datasource number>:<decision
/// datasource name>` (two datasources on one server are two branches), the format id
/// [`FORMAT_ID`]. Each is at most 64 bytes (MariaDB's limit).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Xid {
    /// The global transaction id (ASCII).
    pub gtrid: String,
    /// The branch qualifier: `<branch datasource number>:<decision datasource name>`.
    pub bqual: String,
}

impl Xid {
    /// The xid as XA statements take it: `X'..',X'..',29291` (hex literals: any datasource
    /// name is safe).
    pub fn sql(&self) -> String {
        format!(
            "X'{}',X'{}',{FORMAT_ID}",
            hex(self.gtrid.as_bytes()),
            hex(self.bqual.as_bytes())
        )
    }

    /// The xid of the branch on datasource `branch` of the transaction `gtrid` decided on
    /// datasource `decision` (a name).
    pub fn branch(gtrid: &str, branch: DatasourceId, decision: &str) -> Xid {
        Xid {
            gtrid: gtrid.to_owned(),
            bqual: format!("{}:{decision}", branch.0),
        }
    }

    /// The decision datasource's name, from the branch qualifier.
    pub fn decision(&self) -> &str {
        self.bqual
            .split_once(':')
            .map_or(self.bqual.as_str(), |(_, name)| name)
    }

    /// The gtrid as a hexadecimal literal: its bytes whatever the session's character set
    /// (the decision table's key is binary).
    pub fn gtrid_literal(&self) -> String {
        format!("X'{}'", hex(self.gtrid.as_bytes()))
    }

    /// Reads one row of `XA RECOVER` (`formatID`, `gtrid_length`, `bqual_length`,
    /// `data`): `None` for another format id or a gtrid not ours.
    pub fn from_recover(row: &[Option<Vec<u8>>]) -> Option<Xid> {
        let num = |i: usize| -> Option<usize> {
            std::str::from_utf8(row.get(i)?.as_deref()?)
                .ok()?
                .parse()
                .ok()
        };
        if num(0)? != FORMAT_ID as usize {
            return None;
        }
        let (g, b) = (num(1)?, num(2)?);
        let data = row.get(3)?.as_deref()?;
        if data.len() < g + b {
            return None;
        }
        let gtrid = String::from_utf8(data[..g].to_vec()).ok()?;
        let bqual = String::from_utf8(data[g..g + b].to_vec()).ok()?;
        gtrid
            .starts_with(GTRID_PREFIX)
            .then_some(Xid { gtrid, bqual })
    }
}

impl std::fmt::Display for Xid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.gtrid, self.bqual)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Where the coordinator's process may be killed for the fault tests: the environment
/// variable `ROUTEKEY_FAILPOINTS` lists `name` or `name:percent` entries, comma-separated
/// (`after_prepare`, `after_decision`, `between_xa_commits`); a point reached kills the
/// process with SIGKILL (with the given chance, default 100 %). Unset: nothing happens.
#[derive(Debug, Default)]
struct Failpoints(Vec<(String, u32)>);

impl Failpoints {
    fn from_env() -> Self {
        let Ok(spec) = std::env::var("ROUTEKEY_FAILPOINTS") else {
            return Self::default();
        };
        Self(
            spec.split(',')
                .filter(|s| !s.trim().is_empty())
                .map(|s| match s.trim().split_once(':') {
                    Some((name, pct)) => (name.to_owned(), pct.parse().unwrap_or(100)),
                    None => (s.trim().to_owned(), 100),
                })
                .collect(),
        )
    }

    fn reach(&self, point: &str) {
        let Some((_, pct)) = self.0.iter().find(|(n, _)| n == point) else {
            return;
        };
        if rand::random_range(0..100u32) >= *pct {
            return;
        }
        tracing::error!(
            point,
            "failpoint reached: the process kills itself (SIGKILL)"
        );
        let pid = std::process::id().to_string();
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid])
            .status();
        std::process::abort();
    }
}

/// A branch a resolver found prepared ([`super::resolver`]), as `SHOW ROUTEKEY
/// TRANSACTIONS` lists it.
#[derive(Debug, Clone)]
pub struct InDoubt {
    /// Its xid.
    pub xid: Xid,
    /// The datasource holding it prepared.
    pub datasource: String,
    /// When this sidecar's resolver first saw it prepared.
    pub first_seen: Instant,
    /// The decision recorded for it, if one was read: `commit` or `abort`.
    pub decision: Option<String>,
    /// The last error met deciding or finishing it.
    pub error: Option<String>,
}

/// The counters of atomic commits and the resolver (`/metrics`, SHOW ROUTEKEY
/// TRANSACTIONS).
#[derive(Debug, Default)]
pub struct XaCounters {
    /// Transactions committed on one datasource (explicit `COMMIT`).
    pub commits_single: AtomicU64,
    /// Transactions committed atomically on several datasources (decided commit).
    pub commits_atomic: AtomicU64,
    /// Atomic commits that ended rolled back (a branch failed to prepare, the decision
    /// failed or was an abort).
    pub atomic_rolled_back: AtomicU64,
    /// Atomic commits whose decision was lost in flight and could not be read back.
    pub atomic_unknown: AtomicU64,
    /// XA branches prepared.
    pub prepared: AtomicU64,
    /// `XA COMMIT`s after the decision that failed (left to a resolver).
    pub commit_failures: AtomicU64,
    /// Branches a resolver committed.
    pub resolved_commit: AtomicU64,
    /// Branches a resolver rolled back.
    pub resolved_rollback: AtomicU64,
    /// Resolver rounds run.
    pub resolver_rounds: AtomicU64,
}

/// What every session's coordinator shares in one process: who this sidecar is, the
/// sequence of its xids, the failpoints, the counters and what its resolver found.
#[derive(Debug)]
pub struct Coordinator {
    /// `<host>:<start nonce>`: the sidecar part of each gtrid.
    sidecar: String,
    sequence: AtomicU64,
    failpoints: Failpoints,
    /// The counters.
    pub counters: XaCounters,
    /// Prepared branches of ours as the last resolver round saw them.
    pub in_doubt: Mutex<Vec<InDoubt>>,
}

impl Default for Coordinator {
    fn default() -> Self {
        Self::new()
    }
}

impl Coordinator {
    /// This process's coordinator: the host name (`HOSTNAME`, else the kernel's; at most 24
    /// of its letters, digits, `.`, `-`, `_`) and a random start nonce name it.
    pub fn new() -> Self {
        let host = std::env::var("HOSTNAME")
            .ok()
            .filter(|h| !h.is_empty())
            .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
            .unwrap_or_else(|| "proxy".to_owned());
        let host: String = host
            .trim()
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
            .take(24)
            .collect();
        let nonce: u32 = rand::random();
        Self {
            sidecar: format!("{host}:{nonce:08x}"),
            sequence: AtomicU64::new(1),
            failpoints: Failpoints::from_env(),
            counters: XaCounters::default(),
            in_doubt: Mutex::new(Vec::new()),
        }
    }

    /// The sidecar part of this process's gtrids.
    pub fn sidecar(&self) -> &str {
        &self.sidecar
    }

    /// A new gtrid: this sidecar's next.
    pub fn next_gtrid(&self) -> String {
        let n = self.sequence.fetch_add(1, Ordering::Relaxed);
        format!("{GTRID_PREFIX}{}:{n}", self.sidecar)
    }

    /// Reaches failpoint `point` ([`Failpoints`]): the process may kill itself here.
    pub(super) fn failpoint(&self, point: &str) {
        if !self.failpoints.0.is_empty() {
            self.failpoints.reach(point);
        }
    }
}

/// A transaction with XA branches: its gtrid, its decision branch and the datasources that
/// joined as XA branches, and what the coordinator needs to settle a decision lost in
/// flight.
pub struct Distributed {
    /// The gtrid of every XA branch (the decision record's key).
    pub gtrid: String,
    /// The datasource of the plain transaction that records the decision.
    pub decision: DatasourceId,
    /// The datasources that joined as XA branches, in order.
    pub branches: Vec<DatasourceId>,
    /// The decision datasource's name (every branch's qualifier ends with it).
    pub decision_name: String,
    /// How to reach the decision datasource apart from the session's connection.
    pub source: DecisionSource,
}

impl Distributed {
    /// The xid of the branch on `ds`.
    pub fn xid(&self, ds: DatasourceId) -> Xid {
        Xid::branch(&self.gtrid, ds, &self.decision_name)
    }

    /// The xid naming the transaction in the decision table and in messages.
    pub fn key(&self) -> Xid {
        Xid {
            gtrid: self.gtrid.clone(),
            bqual: self.decision_name.clone(),
        }
    }
}

/// Now in UTC as a `DATETIME(6)` literal, by this process's clock: decision records are
/// dated by the proxies, never by a session's `timestamp` or `time_zone`.
pub fn utc_now_literal(ago: std::time::Duration) -> String {
    let at = std::time::SystemTime::now()
        .checked_sub(ago)
        .unwrap_or(std::time::UNIX_EPOCH);
    let text = humantime::format_rfc3339_micros(at).to_string();
    format!("'{}'", text.trim_end_matches('Z').replace('T', " "))
}

/// The decision datasource as a connection of its own reaches it.
#[derive(Clone)]
pub struct DecisionSource {
    /// The coordinator (counters, failpoints).
    pub coordinator: std::sync::Arc<Coordinator>,
    /// Its datasource.
    pub datasource: Datasource,
    /// Its members, when clustered (the primary records decisions).
    pub cluster: Option<std::sync::Arc<Cluster>>,
    /// The decision table, qualified and quoted.
    pub table: String,
    /// Its creation ([`create_statements`]).
    pub create: [String; 2],
    /// The bound on each statement of the commit protocol: half
    /// `transactions.abandon_age`.
    pub step_bound: std::time::Duration,
    /// The largest packet.
    pub max_packet: usize,
}

impl DecisionSource {
    /// For the decision datasource `ds` under `config`.
    pub fn new(
        coordinator: std::sync::Arc<Coordinator>,
        config: &Config,
        topology: &Topology,
        ds: DatasourceId,
    ) -> Self {
        Self {
            coordinator,
            datasource: config.datasource(ds).clone(),
            cluster: topology.cluster(ds).cloned(),
            table: config.transactions.decision_table_sql(),
            create: create_statements(config),
            step_bound: config.transactions.abandon_age / 2,
            max_packet: config.server.max_packet_size,
        }
    }
}

/// The decision recorded for an xid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Commit: every branch commits.
    Commit,
    /// Abort: every branch rolls back.
    Abort,
}

impl Decision {
    /// As the decision table stores it.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Commit => "commit",
            Decision::Abort => "abort",
        }
    }
}

/// `CREATE DATABASE` / `CREATE TABLE IF NOT EXISTS` of the decision table (`table`,
/// qualified; `database` quoted).
pub fn create_statements(config: &Config) -> [String; 2] {
    let db = format!("`{}`", config.transactions.database.replace('`', "``"));
    let table = config.transactions.decision_table_sql();
    [
        format!("CREATE DATABASE IF NOT EXISTS {db}"),
        format!(
            "CREATE TABLE IF NOT EXISTS {table} (\
             xid VARBINARY(64) NOT NULL PRIMARY KEY, \
             decision ENUM('commit','abort') NOT NULL, \
             coordinator VARCHAR(64) NOT NULL, \
             decided_at DATETIME(6) NOT NULL, \
             KEY decided_at (decided_at)) ENGINE=InnoDB"
        ),
    ]
}

/// The decision recorded for `xid` on `conn` (autocommit): the one there, or `abort`
/// recorded now when none is. Waits at most 5 s for a decision branch that holds the row
/// (its commit record not yet committed), then fails.
///
/// # Errors
/// The statement failed (the decision is unknown).
pub async fn decide_unless_decided(
    conn: &mut BackendConn,
    table: &str,
    xid: &Xid,
    who: &str,
) -> Result<Decision, ProxyError> {
    conn.execute(b"SET SESSION innodb_lock_wait_timeout = 5")
        .await?;
    let g = xid.gtrid_literal();
    let insert = format!(
        "INSERT IGNORE INTO {table} (xid, decision, coordinator, decided_at) VALUES ({g}, 'abort', '{}', {})",
        who.replace(['\'', '\\'], ""),
        utc_now_literal(std::time::Duration::ZERO)
    );
    conn.execute(insert.as_bytes()).await?;
    recorded(conn, table, xid)
        .await?
        .ok_or_else(|| ProxyError::Internal(format!("no decision for {xid} after recording one")))
}

/// The decision recorded for `xid` on `conn`, if any.
///
/// # Errors
/// The read failed.
pub async fn recorded(
    conn: &mut BackendConn,
    table: &str,
    xid: &Xid,
) -> Result<Option<Decision>, ProxyError> {
    let sql = format!(
        "SELECT decision FROM {table} WHERE xid = {}",
        xid.gtrid_literal()
    );
    let (_, rows) = conn.query_rows(sql.as_bytes()).await?;
    Ok(
        match rows
            .first()
            .and_then(|r| r.first())
            .and_then(|v| v.as_deref())
        {
            Some(b"commit") => Some(Decision::Commit),
            Some(b"abort") => Some(Decision::Abort),
            _ => None,
        },
    )
}

/// A connection of its own to the primary of `datasource` (`cluster`: its members).
///
/// # Errors
/// No primary, or it cannot be reached.
pub async fn primary_connection(
    datasource: &Datasource,
    cluster: Option<&Cluster>,
    id: DatasourceId,
    max_packet: usize,
) -> Result<BackendConn, ProxyError> {
    let member = match cluster {
        Some(c) => c.primary().await?,
        None => 0,
    };
    let connect = super::control::own_connection(
        datasource,
        super::target::Target::primary(id),
        member,
        max_packet,
    );
    match tokio::time::timeout(datasource.connect_timeout, connect).await {
        Ok(conn) => conn,
        Err(_) => Err(ProxyError::Unavailable(format!(
            "datasource {}: no answer within {:?}",
            datasource.name, datasource.connect_timeout
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xids_name_the_sidecar_and_read_back_from_xa_recover() {
        let c = Coordinator::new();
        let (g1, g2) = (c.next_gtrid(), c.next_gtrid());
        assert_ne!(g1, g2);
        let a = Xid::branch(&g1, DatasourceId(1), "ds0");
        // Two datasources on one server: two branches of one transaction, two xids.
        assert_ne!(a, Xid::branch(&g1, DatasourceId(2), "ds0"));
        assert!(a.gtrid.starts_with("rk:"), "{a}");
        assert!(a.gtrid.len() <= 64, "{a}");
        assert_eq!(a.bqual, "1:ds0");
        assert_eq!(a.decision(), "ds0");
        assert_eq!(Xid::branch(&g1, DatasourceId(0), "a:b").decision(), "a:b");
        let data = format!("{}{}", a.gtrid, a.bqual).into_bytes();
        let row = vec![
            Some(FORMAT_ID.to_string().into_bytes()),
            Some(a.gtrid.len().to_string().into_bytes()),
            Some(a.bqual.len().to_string().into_bytes()),
            Some(data.clone()),
        ];
        assert_eq!(Xid::from_recover(&row), Some(a.clone()));
        let mut other = row.clone();
        other[0] = Some(b"1".to_vec());
        assert_eq!(Xid::from_recover(&other), None, "another format id");
        let mut short = row;
        short[3] = Some(data[..4].to_vec());
        assert_eq!(
            Xid::from_recover(&short),
            None,
            "data shorter than its lengths"
        );
        assert!(a.sql().ends_with(",29291"), "{}", a.sql());
        assert!(a.sql().starts_with("X'726b3a"), "{}", a.sql());
        // The decision key is hexadecimal: the same bytes in any connection character set.
        let quoted = Xid {
            gtrid: "rk:it's:1".into(),
            bqual: "0:ds0".into(),
        };
        assert_eq!(quoted.gtrid_literal(), "X'726b3a697427733a31'");
    }

    #[test]
    fn decisions_are_dated_in_utc_by_the_proxy() {
        let now = utc_now_literal(std::time::Duration::ZERO);
        assert!(
            now.starts_with("'20") && now.ends_with('\'') && now.len() == 28,
            "{now}"
        );
        assert!(utc_now_literal(std::time::Duration::from_secs(86_400)) < now);
    }

    #[test]
    fn failpoints_parse_names_and_chances() {
        let f = Failpoints(vec![("after_prepare".into(), 0)]);
        // A 0 % chance never fires; an unnamed point never fires.
        f.reach("after_prepare");
        f.reach("after_decision");
    }
}
