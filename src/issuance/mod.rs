//! The order id service of one proxy: holds a worker id lease (taken when the first id is
//! asked for, renewed by heartbeat, given back at shutdown), issues route-key ids for the
//! channels switched on and classic ids for the others, waits out what the generator asks
//! to wait for, and counts what it issued (per channel, and per caller for ids issued
//! without a region).

pub mod lease;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwapOption;
use thiserror::Error;

use crate::config::{ChannelId, Config};
use crate::id::generator::{Generator, IssueError, Step};
use lease::{Lease, LeaseError, LeaseStore};

/// Time for the service (a trait so tests can drive it).
pub trait Clock: Send + Sync + 'static {
    /// Now, in Unix milliseconds.
    fn now_ms(&self) -> u64;
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

/// Why ids could not be issued.
#[derive(Debug, Clone, Error)]
pub enum IssueFailure {
    /// No worker id lease (none free, or the lease table unreachable).
    #[error("cannot issue order ids: {0}")]
    Lease(#[from] LeaseError),
    /// The lease was lost (taken over, or not renewed in time): issuance stopped.
    #[error(
        "cannot issue order ids: the worker id lease was lost; issuance stopped until a lease is taken again"
    )]
    LeaseLost,
    /// The generator refused (clock).
    #[error("cannot issue order ids: {0}")]
    Clock(#[from] IssueError),
    /// The proxy is shutting down and has given its lease back.
    #[error("cannot issue order ids: the proxy is shutting down")]
    ShuttingDown,
}

/// After a failed lease attempt, callers get its error for this long before the next try
/// (a meta datasource that is down is not asked once per request).
const RETRY_AFTER_MS: u64 = 1000;

/// Who asked for an id (counted when no region was given).
#[derive(Debug, Clone, Copy)]
pub struct Caller<'a> {
    /// The MySQL user, or `http`.
    pub user: &'a str,
    /// The `program_name` connection attribute, or the HTTP User-Agent.
    pub program: Option<&'a str>,
}

/// Times an issue call reads the clock again when its reading is behind the generator's
/// last id by more than the tolerance, before it refuses (see [`Issuer::issue`]).
const STALE_READING_RETRIES: u32 = 3;

/// Callers without a region are kept by name up to this many; the rest count as `other`.
const MAX_CALLERS: usize = 1000;

/// Counters of the service.
#[derive(Debug, Default)]
pub struct IssueStats {
    /// Ids issued for a channel, by the channel's code (stable across reloads).
    pub per_channel: Vec<AtomicU64>,
    /// Ids issued without a region (route key 0).
    pub without_region: AtomicU64,
    /// Times the clock went back beyond the tolerance.
    pub clock_refusals: AtomicU64,
    /// Times an issue call waited for the clock to pass the last issued id's time (a step
    /// back within the tolerance, or a worker id whose previous holder issued ahead).
    pub clock_waits: AtomicU64,
    /// Times a lease could not be taken because every worker id was leased.
    pub lease_full: AtomicU64,
    callers: Mutex<HashMap<String, u64>>,
}

impl IssueStats {
    /// Callers that asked without a region, most ids first: (caller, ids).
    pub fn top_callers(&self, n: usize) -> Vec<(String, u64)> {
        let mut all: Vec<(String, u64)> = self
            .callers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        all.truncate(n);
        all
    }

    fn count_caller(&self, caller: &Caller<'_>, n: u64) {
        let key = match caller.program {
            Some(p) if !p.is_empty() => format!("{}/{p}", caller.user),
            _ => caller.user.to_owned(),
        };
        let mut callers = self.callers.lock().unwrap_or_else(|e| e.into_inner());
        let key = if callers.contains_key(&key) || callers.len() < MAX_CALLERS {
            key
        } else {
            "other".to_owned()
        };
        *callers.entry(key).or_default() += n;
    }
}

/// A lease in use, with its generators.
struct Active {
    lease: Lease,
    route_key: Generator,
    legacy: Generator,
    /// The holder stops issuing at this local time (Unix ms) unless renewed; the lease
    /// row's bound is at least this.
    deadline_ms: AtomicU64,
    /// Issuance stopped (lease taken over, or released).
    lost: AtomicBool,
    /// Issue calls between their `lost` check and their last id (release waits for 0).
    in_flight: AtomicUsize,
    heartbeat: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Active {
    fn usable(&self, now_ms: u64) -> bool {
        // SeqCst with `in_flight`: a release either sees an issue call in flight or the
        // call sees the release.
        !self.lost.load(Ordering::SeqCst) && now_ms < self.deadline_ms.load(Ordering::Acquire)
    }

    /// The last timestamp issued with this lease (Unix ms).
    fn issued_until_ms(&self) -> u64 {
        self.route_key
            .last_unix_ms()
            .max(self.legacy.last_unix_ms())
    }
}

/// Counts an issue call in flight while it lives.
struct InFlight<'a>(&'a AtomicUsize);

impl<'a> InFlight<'a> {
    fn enter(counter: &'a AtomicUsize) -> Self {
        counter.fetch_add(1, Ordering::SeqCst);
        Self(counter)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        if let Some(h) = self
            .heartbeat
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            h.abort();
        }
    }
}

/// The order id service of one proxy.
pub struct Issuer {
    /// The configuration in force (swapped on reload; the layout and the lease settings
    /// never change while the process runs).
    config: arc_swap::ArcSwap<Config>,
    store: Arc<LeaseStore>,
    clock: Arc<dyn Clock>,
    active: ArcSwapOption<Active>,
    acquiring: tokio::sync::Mutex<()>,
    /// The last failed lease attempt: when (Unix ms) and why.
    failed: Mutex<Option<(u64, LeaseError)>>,
    closed: AtomicBool,
    stats: IssueStats,
}

impl Issuer {
    /// The cell naming the primary of the datasource that holds the leases: the topology
    /// keeps it ([`crate::topology::Cluster::follow`]).
    pub fn lease_primary_cell(&self) -> Arc<std::sync::atomic::AtomicUsize> {
        self.store.primary_cell()
    }

    /// The service for a configuration (no lease is taken before the first id).
    pub fn new(config: Arc<Config>, clock: Arc<dyn Clock>) -> Arc<Self> {
        let holder = format!(
            "{}:{}:{:08x}",
            hostname(),
            std::process::id(),
            rand::random::<u32>()
        );
        let stats = IssueStats {
            per_channel: (0..1usize << config.layout.route_key_bits())
                .map(|_| AtomicU64::new(0))
                .collect(),
            ..Default::default()
        };
        Arc::new(Self {
            store: Arc::new(LeaseStore::new(&config, holder)),
            config: arc_swap::ArcSwap::new(config),
            clock,
            active: ArcSwapOption::empty(),
            acquiring: tokio::sync::Mutex::new(()),
            failed: Mutex::new(None),
            closed: AtomicBool::new(false),
            stats,
        })
    }

    /// Creates the lease table and its rows if they are missing (called at startup; takes no
    /// lease). Rows created now can be leased a lease time later, so doing it early spares
    /// the first id that wait. Failures are only logged: the first id tries again.
    pub async fn prepare(&self) {
        if let Err(e) = self.store.prepare().await {
            tracing::debug!(error = %e, "could not prepare the worker id lease table");
        }
    }

    /// Counters.
    pub fn stats(&self) -> &IssueStats {
        &self.stats
    }

    /// The worker id held, if any.
    pub fn worker(&self) -> Option<u64> {
        self.active
            .load()
            .as_ref()
            .filter(|a| a.usable(self.clock.now_ms()))
            .map(|a| a.lease.worker)
    }

    /// Issues under `config` from now on: which channels are switched on, their codes.
    /// The caller has checked that the id layout and the lease settings are unchanged.
    pub fn reconfigure(&self, config: Arc<Config>) {
        self.config.store(config);
    }

    /// The worker id lease's state for `/metrics`: `held` (usable now), `refused` (the last
    /// attempt found every worker id leased), `failed` (the last attempt failed otherwise:
    /// the lease table unreachable) or `none` (not taken yet, released or lost). Both
    /// `refused` and `failed` mean no id can be issued now (the `RoutekeyNoWorkerLease` alert).
    pub fn lease_state(&self) -> &'static str {
        if self.worker().is_some() {
            return "held";
        }
        match &*self.failed.lock().unwrap_or_else(|e| e.into_inner()) {
            Some((_, LeaseError::Full(_))) => "refused",
            Some(_) => "failed",
            None => "none",
        }
    }

    /// `count` ids for `channel` (None: no region given, route key 0).
    pub async fn issue(
        self: &Arc<Self>,
        channel: Option<ChannelId>,
        caller: &Caller<'_>,
        count: usize,
    ) -> Result<Vec<u64>, IssueFailure> {
        let active = self.active().await?;
        let config = self.config.load();
        let (generator, code) = match channel {
            Some(ch) if config.issuance.route_key_channels[usize::from(ch.0)] => {
                (&active.route_key, config.channel(ch).code)
            }
            Some(_) => (&active.legacy, 0),
            None => (&active.route_key, 0),
        };
        let _in_flight = InFlight::enter(&active.in_flight);
        let mut ids = Vec::with_capacity(count);
        let mut waited_for_clock = false;
        let mut fresh_readings = 0;
        while ids.len() < count {
            let now = self.clock.now_ms();
            if !active.usable(now) {
                self.active.compare_and_swap(&Some(active.clone()), None);
                return Err(IssueFailure::LeaseLost);
            }
            match generator.next(code, now) {
                Ok(Step::Id(id)) => ids.push(id),
                Ok(Step::WaitUntil(t)) => {
                    if !waited_for_clock && generator.last_unix_ms() > now {
                        waited_for_clock = true;
                        self.stats.clock_waits.fetch_add(1, Ordering::Relaxed);
                    }
                    tokio::time::sleep(Duration::from_millis(t.saturating_sub(now).max(1))).await;
                }
                // A task descheduled between reading the clock and asking holds a reading
                // that tasks on other threads have moved past: under load that looks like
                // the clock going back. Only fresh readings that are still behind refuse.
                Err(IssueError::ClockWentBack { .. }) if fresh_readings < STALE_READING_RETRIES => {
                    fresh_readings += 1;
                    tokio::task::yield_now().await;
                }
                Err(e) => {
                    self.stats.clock_refusals.fetch_add(1, Ordering::Relaxed);
                    return Err(e.into());
                }
            }
        }
        let n = ids.len() as u64;
        match channel {
            Some(ch) => {
                let code = usize::from(config.channel(ch).code);
                self.stats.per_channel[code].fetch_add(n, Ordering::Relaxed);
            }
            None => {
                self.stats.without_region.fetch_add(n, Ordering::Relaxed);
                self.stats.count_caller(caller, n);
            }
        }
        Ok(ids)
    }

    /// The lease in use, taking one when there is none.
    async fn active(self: &Arc<Self>) -> Result<Arc<Active>, IssueFailure> {
        if let Some(a) = self.active.load_full() {
            if a.usable(self.clock.now_ms()) {
                return Ok(a);
            }
        }
        let _turn = self.acquiring.lock().await;
        if self.closed.load(Ordering::SeqCst) {
            return Err(IssueFailure::ShuttingDown);
        }
        if let Some(a) = self.active.load_full() {
            if a.usable(self.clock.now_ms()) {
                return Ok(a);
            }
        }
        let started = self.clock.now_ms();
        if let Some((at, e)) = &*self.failed.lock().unwrap_or_else(|e| e.into_inner()) {
            if started.saturating_sub(*at) < RETRY_AFTER_MS {
                return Err(e.clone().into());
            }
        }
        let clock = self.clock.clone();
        let lease = match self.store.acquire(&move || clock.now_ms()).await {
            Ok(lease) => lease,
            Err(e) => {
                if matches!(e, LeaseError::Full(_)) {
                    self.stats.lease_full.fetch_add(1, Ordering::Relaxed);
                }
                *self.failed.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some((self.clock.now_ms(), e.clone()));
                return Err(e.into());
            }
        };
        *self.failed.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let config = self.config.load();
        let issuance = &config.issuance;
        let tolerance = u64::try_from(issuance.clock_tolerance.as_millis()).unwrap_or(u64::MAX);
        let route_key = Generator::new(config.layout, lease.worker, tolerance);
        let legacy = Generator::legacy(
            issuance.legacy,
            issuance.legacy_machine_base + lease.worker,
            tolerance,
        );
        // Never at or before what the previous holder of this worker id issued.
        route_key.start_after(lease.issued_until_ms);
        legacy.start_after(lease.issued_until_ms);
        let active = Arc::new(Active {
            lease,
            route_key,
            legacy,
            deadline_ms: AtomicU64::new(lease.deadline_ms),
            lost: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            heartbeat: Mutex::new(None),
        });
        let handle = tokio::spawn(heartbeat(
            Arc::downgrade(&active),
            self.store.clone(),
            self.clock.clone(),
        ));
        *active.heartbeat.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
        tracing::info!(worker = lease.worker, "took a worker id lease");
        self.active.store(Some(active.clone()));
        Ok(active)
    }

    /// Stops issuing and gives the lease back (at shutdown), recording the last timestamp
    /// issued so the next holder of the worker id may start right after it.
    pub async fn release(&self) {
        // No lease is taken after this; one being taken now finishes first.
        let _turn = self.acquiring.lock().await;
        self.closed.store(true, Ordering::SeqCst);
        if let Some(active) = self.active.swap(None) {
            if let Some(h) = active
                .heartbeat
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take()
            {
                h.abort();
            }
            active.lost.store(true, Ordering::SeqCst);
            // Issue calls that passed their check finish within microseconds (one waiting
            // for the next millisecond, within one).
            let mut waited = 0;
            while active.in_flight.load(Ordering::SeqCst) > 0 && waited < 1000 {
                tokio::time::sleep(Duration::from_millis(1)).await;
                waited += 1;
            }
            let until = if active.in_flight.load(Ordering::SeqCst) == 0 {
                active.issued_until_ms()
            } else {
                active.deadline_ms.load(Ordering::Acquire)
            };
            if let Err(e) = self.store.release(active.lease.worker, until).await {
                tracing::warn!(error = %e, "could not give the worker id lease back; it expires on its own");
            }
        }
    }
}

/// Renews a lease every third of its lifetime until it is lost or dropped.
async fn heartbeat(active: std::sync::Weak<Active>, store: Arc<LeaseStore>, clock: Arc<dyn Clock>) {
    let ttl = store.ttl();
    let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
    loop {
        tokio::time::sleep(ttl / 3).await;
        let Some(a) = active.upgrade() else { return };
        // The row's bound goes up before the local deadline does.
        let deadline = clock.now_ms() + ttl_ms;
        match store.renew(a.lease.worker, deadline).await {
            Ok(true) => {
                a.deadline_ms.fetch_max(deadline, Ordering::AcqRel);
            }
            Ok(false) => {
                tracing::warn!(
                    worker = a.lease.worker,
                    "worker id lease taken over; issuance stopped"
                );
                a.lost.store(true, Ordering::Release);
                return;
            }
            Err(e) => tracing::warn!(error = %e, "could not renew the worker id lease"),
        }
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}
