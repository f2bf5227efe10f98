//! Datasources that are replication clusters (issue 26): a datasource configured with
//! `members` is probed every `topology.probe_interval`, its primary is the one writable
//! member, and its replicas serve the reads of users with `reads = "replica"` while they
//! are at most `topology.max_replica_lag` behind.
//!
//! A [`Cluster`] per clustered datasource holds the latest [`View`] (swapped whole by its
//! prober task, read without a lock by sessions), what each member is known to have
//! applied, and the counters of `SHOW ROUTEKEY TOPOLOGY` and `/metrics`. A datasource with
//! `address` alone has no cluster: its one server takes everything, unprobed, as before.
//!
//! Replicas are taken in turn (round robin) among the readable ones: each sidecar sees
//! only its own load, so a least-loaded choice by its own connection counts would balance
//! one pod's share, not the servers'; turns spread a fleet's reads evenly.

pub mod gtid;
pub mod token;
pub mod view;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use arc_swap::ArcSwap;
use tokio::sync::{Notify, watch};

use crate::backend::probe::{MemberProbe, ProbeAnswer};
use crate::config::{Config, Datasource, DatasourceId, TopologySettings};
use crate::error::{ER_OPTION_PREVENTS_STATEMENT, ProxyError};
use gtid::GtidSet;
use view::{Answer, Observation, Primary, Role, View};

/// Every clustered datasource's [`Cluster`], by datasource.
#[derive(Default)]
pub struct Topology {
    clusters: Vec<Option<Arc<Cluster>>>,
    /// Some datasource is a cluster.
    any: bool,
}

impl Topology {
    /// The clusters of `config`'s datasources configured with `members`, each probed by a
    /// task of its own (started here: call within a Tokio runtime). A cluster of
    /// `previous` whose datasource reaches the same members as the same account is kept,
    /// with what it knows; the others stop probing when their last user lets go.
    pub fn new(config: &Config, previous: Option<&Topology>) -> Self {
        let clusters = config
            .datasources
            .iter()
            .enumerate()
            .map(|(i, ds)| {
                if !ds.cluster {
                    return None;
                }
                let id = DatasourceId(i as u16);
                let kept = previous
                    .and_then(|p| p.cluster(id))
                    .filter(|c| c.same_servers(ds) && c.settings == config.topology);
                Some(kept.cloned().unwrap_or_else(|| {
                    Cluster::start(ds, id, config.topology, config.server.max_packet_size)
                }))
            })
            .collect::<Vec<_>>();
        let any = clusters.iter().any(Option::is_some);
        Self { clusters, any }
    }

    /// The cluster of `datasource`, if it is one.
    #[inline]
    pub fn cluster(&self, datasource: DatasourceId) -> Option<&Arc<Cluster>> {
        self.clusters.get(usize::from(datasource.0))?.as_ref()
    }

    /// No datasource is a cluster: every access goes to its datasource's one server.
    #[inline]
    pub fn is_empty(&self) -> bool {
        !self.any
    }

    /// Every cluster, in datasource order.
    pub fn clusters(&self) -> impl Iterator<Item = &Arc<Cluster>> {
        self.clusters.iter().flatten()
    }
}

/// A read's replica, as [`Cluster::replica`] finds one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicaChoice {
    /// This member, which has applied what the read needs.
    Ready(usize),
    /// This member, not known to have applied it yet: wait on it (`MASTER_GTID_WAIT`)
    /// before reading.
    Behind(usize),
    /// No replica may serve reads now: the primary reads.
    None,
}

/// What a clustered datasource's reads and writes counted (`SHOW ROUTEKEY TOPOLOGY`,
/// `/metrics`).
#[derive(Default)]
pub struct Counters {
    /// Reads served by the primary.
    pub primary_reads: AtomicU64,
    /// Reads served by a replica.
    pub replica_reads: AtomicU64,
    /// Causal waits on a replica that saw the session's writes in time.
    pub causal_caught_up: AtomicU64,
    /// Causal waits that ran out (the primary read instead).
    pub causal_timed_out: AtomicU64,
    /// Writes held while no primary was known, or retried after a primary refused them
    /// (`read_only`) or could not be reached before they were sent.
    pub writes_retried: AtomicU64,
}

/// One member's counters and what it is known to have applied.
pub struct Member {
    /// `host:port`.
    pub address: String,
    /// Its position: the latest probe's, or higher when a causal wait on it succeeded.
    position: Mutex<GtidSet>,
    /// Reads it served.
    pub reads: AtomicU64,
    /// Writes it served.
    pub writes: AtomicU64,
}

/// A clustered datasource: its members, the latest probe round's [`View`], and the prober
/// task that renews it.
pub struct Cluster {
    /// The datasource.
    pub id: DatasourceId,
    /// Its name.
    pub name: String,
    /// What it was built from (a reload keeps it when the servers and account are the same).
    datasource: Datasource,
    /// `[topology]`.
    pub settings: TopologySettings,
    /// By member index ([`Datasource::members`] order).
    pub members: Vec<Member>,
    view: ArcSwap<View>,
    /// The round of each new view (writes waiting for a primary watch it).
    changed: watch::Sender<u64>,
    /// Asks the prober for a round now (a write found no primary, or a primary refused).
    nudge: Arc<Notify>,
    /// Round-robin turn among readable replicas.
    turn: AtomicUsize,
    /// Reads, causal waits, retried writes.
    pub counters: Counters,
    /// Cells the control path reads its primary from (the index table's and the leases'
    /// pools): set whenever a probe round knows the primary.
    followers: Mutex<Vec<Weak<std::sync::atomic::AtomicUsize>>>,
}

impl Cluster {
    /// A cluster of `datasource`'s members, probed every `settings.probe_interval` by a task
    /// of its own while the cluster lives (none outside a Tokio runtime: the view then
    /// stays empty, and writes fail after `failover_wait`).
    pub fn start(
        datasource: &Datasource,
        id: DatasourceId,
        settings: TopologySettings,
        max_packet: usize,
    ) -> Arc<Self> {
        let (changed, _) = watch::channel(0);
        let cluster = Arc::new(Self {
            id,
            name: datasource.name.clone(),
            datasource: datasource.clone(),
            settings,
            members: datasource
                .members
                .iter()
                .map(|address| Member {
                    address: address.clone(),
                    position: Mutex::new(GtidSet::default()),
                    reads: AtomicU64::new(0),
                    writes: AtomicU64::new(0),
                })
                .collect(),
            view: ArcSwap::from_pointee(View::initial(datasource.members.len())),
            changed,
            nudge: Arc::new(Notify::new()),
            turn: AtomicUsize::new(0),
            counters: Counters::default(),
            followers: Mutex::new(Vec::new()),
        });
        let probes = (0..datasource.members.len())
            .map(|m| MemberProbe::new(datasource, id, m, max_packet))
            .collect();
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(run_probes(Arc::downgrade(&cluster), probes));
            }
            Err(_) => tracing::warn!(
                datasource = %datasource.name,
                "no async runtime: the datasource's members are not probed"
            ),
        }
        cluster
    }

    fn same_servers(&self, ds: &Datasource) -> bool {
        let a = &self.datasource;
        (&a.members, &a.user, &a.password, &a.tls, &a.tls_ca_certs)
            == (
                &ds.members,
                &ds.user,
                &ds.password,
                &ds.tls,
                &ds.tls_ca_certs,
            )
    }

    /// Keeps `cell` naming this datasource's primary (a member index) from now on: the
    /// control path's pools ([`crate::route::index::MemberPools`]) follow a failover.
    pub fn follow(&self, cell: &Arc<std::sync::atomic::AtomicUsize>) {
        if let Some(m) = self.primary_now() {
            cell.store(m, Ordering::Relaxed);
        }
        let mut followers = self
            .followers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        followers.retain(|w| w.strong_count() > 0);
        followers.push(Arc::downgrade(cell));
    }

    /// The latest probe round's view.
    pub fn view(&self) -> Arc<View> {
        self.view.load_full()
    }

    /// The probe rounds as they happen (a reader waits for the next view).
    pub fn rounds(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Asks for a probe round now.
    pub fn nudge(&self) {
        self.nudge.notify_one();
    }

    /// The primary by the latest probe, without waiting.
    pub fn primary_now(&self) -> Option<usize> {
        match self.view.load().primary {
            Primary::Known(m) => Some(m),
            _ => None,
        }
    }

    /// The member writes go to: the primary by the latest probe round, waiting up to
    /// `failover_wait` for one while none is known.
    ///
    /// # Errors
    /// No primary within `failover_wait` ([`ProxyError::Unavailable`], the members' roles
    /// named); several writable members (split brain: 1290, the members named), at once.
    pub async fn primary(&self) -> Result<usize, ProxyError> {
        self.writable(false).await
    }

    /// The member a read goes to when no replica serves it: the primary, or during a
    /// split brain the last member known as the primary (else the first writable one);
    /// waits like [`Cluster::primary`] while no member is writable.
    ///
    /// # Errors
    /// No writable member within `failover_wait`.
    pub async fn primary_for_read(&self) -> Result<usize, ProxyError> {
        self.writable(true).await
    }

    async fn writable(&self, read: bool) -> Result<usize, ProxyError> {
        if let Some(m) = self.primary_now() {
            return Ok(m);
        }
        let deadline = tokio::time::Instant::now() + self.settings.failover_wait;
        let mut rounds = self.changed.subscribe();
        loop {
            let view = self.view.load_full();
            match &view.primary {
                Primary::Known(m) => return Ok(*m),
                Primary::SplitBrain(writable) if read => {
                    let last = view.last_primary.filter(|m| writable.contains(m));
                    return Ok(last.unwrap_or(writable[0]));
                }
                Primary::SplitBrain(writable) => return Err(self.split_brain(writable)),
                Primary::None => {}
            }
            self.nudge();
            let waited = tokio::time::timeout_at(deadline, rounds.changed()).await;
            if !matches!(waited, Ok(Ok(()))) {
                return Err(ProxyError::Unavailable(format!(
                    "datasource {}: no primary known after waiting {:?} (topology.failover_wait); members: {}",
                    self.name,
                    self.settings.failover_wait,
                    self.describe(&self.view.load())
                )));
            }
        }
    }

    /// Waits for the next probe round (at most `failover_wait`), asking for one now: a
    /// write the primary refused or could not take looks again.
    pub async fn next_round(&self) {
        let mut rounds = self.changed.subscribe();
        self.nudge();
        let _ = tokio::time::timeout(self.settings.failover_wait, rounds.changed()).await;
    }

    fn split_brain(&self, writable: &[usize]) -> ProxyError {
        let names: Vec<&str> = writable
            .iter()
            .map(|&m| self.members[m].address.as_str())
            .collect();
        ProxyError::client(
            ER_OPTION_PREVENTS_STATEMENT,
            b"HY000",
            format!(
                "routekey-proxy refuses writes to datasource {}: {} members are writable ({}), a split brain; set all but one read_only (reads go on)",
                self.name,
                names.len(),
                names.join(", ")
            ),
        )
    }

    /// Each member and its role, for errors.
    fn describe(&self, view: &View) -> String {
        self.members
            .iter()
            .zip(&view.members)
            .map(|(m, v)| format!("{} {}", m.address, v.role.name()))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// A replica for a read that must have seen `required` (empty: anything): the next
    /// readable one in turn that is known to have applied it, else the next in turn
    /// ([`ReplicaChoice::Behind`]); none when no replica is readable.
    pub fn replica(&self, required: &GtidSet) -> ReplicaChoice {
        let view = self.view.load();
        let readable = view.members.iter().filter(|m| m.readable).count();
        if readable == 0 {
            return ReplicaChoice::None;
        }
        let turn = self.turn.fetch_add(1, Ordering::Relaxed) % readable;
        let nth = |k: usize| {
            view.members
                .iter()
                .enumerate()
                .filter(|(_, m)| m.readable)
                .nth(k)
                .map(|(i, _)| i)
                .expect("k < readable")
        };
        if required.is_empty() {
            return ReplicaChoice::Ready(nth(turn));
        }
        for k in 0..readable {
            let m = nth((turn + k) % readable);
            if self.position(m).covers(required) {
                return ReplicaChoice::Ready(m);
            }
        }
        ReplicaChoice::Behind(nth(turn))
    }

    fn position(&self, member: usize) -> std::sync::MutexGuard<'_, GtidSet> {
        self.members[member]
            .position
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `member` has applied `position` (a causal wait on it returned in time).
    pub fn caught_up(&self, member: usize, position: &GtidSet) {
        self.position(member).merge(position);
        self.counters
            .causal_caught_up
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a read served by `member` in `role`.
    #[inline]
    pub fn count_read(&self, member: usize, replica: bool) {
        self.members[member].reads.fetch_add(1, Ordering::Relaxed);
        let c = if replica {
            &self.counters.replica_reads
        } else {
            &self.counters.primary_reads
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a write (or any access that needs the primary) served by `member`.
    #[inline]
    pub fn count_write(&self, member: usize) {
        self.members[member].writes.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether `member` is the primary by the latest probe.
    pub fn is_primary(&self, member: usize) -> bool {
        self.primary_now() == Some(member)
    }

    /// The role of `member` by the latest probe.
    pub fn role(&self, member: usize) -> Role {
        self.view
            .load()
            .members
            .get(member)
            .map_or(Role::Unknown, |m| m.role)
    }

    /// A member's last known position (the probe's, or a causal wait's).
    pub fn member_position(&self, member: usize) -> String {
        self.position(member).to_string()
    }

    fn apply(&self, observed: &[Observation]) {
        let now = Instant::now();
        let before = self.view.load_full();
        let next = before.next(observed, &self.settings, now);
        for (m, o) in observed.iter().enumerate() {
            if let Observation::Answered(a) = o {
                self.position(m).merge(&a.gtid);
            }
        }
        if next.primary != before.primary && before.round == 0 {
            tracing::info!(datasource = %self.name, primary = ?next.primary, "the datasource's members answered their first probe");
        } else if next.primary != before.primary {
            let name = |p: &Primary| match p {
                Primary::Known(m) => self.members[*m].address.clone(),
                Primary::None => "none".to_owned(),
                Primary::SplitBrain(ms) => format!(
                    "split brain ({})",
                    ms.iter()
                        .map(|&m| self.members[m].address.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            tracing::warn!(
                datasource = %self.name,
                from = %name(&before.primary),
                to = %name(&next.primary),
                "the datasource's primary changed"
            );
        }
        for (m, (b, n)) in before.members.iter().zip(&next.members).enumerate() {
            if b.readable != n.readable {
                tracing::info!(
                    datasource = %self.name,
                    member = %self.members[m].address,
                    readable = n.readable,
                    lag = ?n.lag,
                    error = %n.error,
                    "a replica's reads changed"
                );
            }
        }
        if let Primary::Known(m) = next.primary {
            let followers = self
                .followers
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for cell in followers.iter().filter_map(Weak::upgrade) {
                cell.store(m, Ordering::Relaxed);
            }
        }
        let round = next.round;
        self.view.store(Arc::new(next));
        self.changed.send_replace(round);
    }
}

/// What a probe's answer says, its GTID position read.
fn observation(answer: Result<ProbeAnswer, String>) -> Observation {
    let answer = match answer {
        Ok(a) => a,
        Err(why) => return Observation::Failed(why),
    };
    match GtidSet::parse(&answer.gtid_current_pos) {
        Ok(gtid) => Observation::Answered(Answer {
            read_only: answer.read_only,
            gtid,
            replication: answer.replication,
        }),
        Err(e) => Observation::Failed(format!("gtid_current_pos: {e}")),
    }
}

/// The prober: a round of probes (all members at once) every `probe_interval`, or sooner
/// when nudged (at most one extra round per 100 ms), until the cluster is dropped.
async fn run_probes(cluster: Weak<Cluster>, mut probes: Vec<MemberProbe>) {
    loop {
        let Some(c) = cluster.upgrade() else {
            return;
        };
        let (timeout, interval, nudge) = (
            c.settings.probe_timeout,
            c.settings.probe_interval,
            c.nudge.clone(),
        );
        drop(c);
        // Rounds start every `interval` (a member slow to answer does not stretch it).
        let started = tokio::time::Instant::now();
        let answers =
            futures_util::future::join_all(probes.iter_mut().map(|p| p.probe(timeout))).await;
        let observed: Vec<Observation> = answers.into_iter().map(observation).collect();
        let Some(c) = cluster.upgrade() else {
            return;
        };
        c.apply(&observed);
        drop(c);
        tokio::select! {
            () = tokio::time::sleep_until(started + interval) => {}
            () = nudge.notified() => {
                tokio::time::sleep(std::time::Duration::from_millis(100).min(interval)).await;
            }
        }
    }
}
