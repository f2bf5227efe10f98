//! The sessions of one proxy, by connection id, for `KILL` and `Statement.cancel()`:
//! each client has its own connection id, and a KILL of it reaches the backend thread that
//! runs its statement (never whatever backend thread has the same number).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::config::DatasourceId;

/// A statement running on backend threads: the configuration the session runs under (a
/// reload may renumber datasources), and each datasource with the thread id there.
#[derive(Debug, Clone)]
pub struct Running {
    /// The session's configuration.
    pub config: std::sync::Arc<crate::config::Config>,
    /// The datasources (in that configuration) and backend thread (connection) ids.
    /// (datasource, member, backend thread id) each.
    pub threads: Vec<(DatasourceId, usize, u32)>,
}

/// What other sessions may know of one session.
#[derive(Debug)]
pub struct SessionHandle {
    /// Its connection id.
    pub id: u32,
    /// Its MySQL user (a user may kill its own connections only, unless it has
    /// `process = true`).
    pub user: String,
    /// The client's host and port, as `SHOW PROCESSLIST` gives it.
    pub host: String,
    activity: Mutex<ActivityState>,
    running: Mutex<Option<Running>>,
    killed: AtomicBool,
    draining: AtomicBool,
    wake: Notify,
    /// KILL QUERY (or KILL) reached the statement running now: a wait for a pooled
    /// connection gives up with 1317. Cleared when the next command starts.
    query_killed: AtomicBool,
    query_wake: Notify,
    /// While the session waits for its client's next command: when that wait ends
    /// ([`clock_ms`]); 0 while a command runs.
    idle_deadline: AtomicU64,
    /// The client stayed silent past the deadline ([`Registry::expire_idle`]).
    idle_expired: AtomicBool,
}

/// Milliseconds on a monotonic clock (from its first use in the process): the time of
/// idle deadlines.
fn clock_ms() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let start = START.get_or_init(std::time::Instant::now);
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// What a session does now, as `SHOW PROCESSLIST` shows it.
#[derive(Debug, Clone)]
pub struct Activity {
    /// Its current database.
    pub database: Option<String>,
    /// `Query` or `Execute` while a statement runs, `Sleep` between statements.
    pub command: &'static str,
    /// The statement running, while one runs.
    pub info: Option<String>,
    /// Since when it does this.
    pub since: std::time::Instant,
}

/// [`Activity`] as it is kept: the statement's bytes in a buffer reused from statement to
/// statement, so recording one allocates nothing; text is made when someone asks.
#[derive(Debug)]
struct ActivityState {
    database: Option<String>,
    command: &'static str,
    info: Option<Vec<u8>>,
    /// The buffer `info` had, kept for the next statement.
    spare: Vec<u8>,
    since: std::time::Instant,
}

impl SessionHandle {
    /// What the session does now.
    pub fn activity(&self) -> Activity {
        let a = self.activity.lock().unwrap_or_else(|e| e.into_inner());
        Activity {
            database: a.database.clone(),
            command: a.command,
            info: a
                .info
                .as_ref()
                .map(|i| String::from_utf8_lossy(i).into_owned()),
            since: a.since,
        }
    }

    /// Records that the session runs a statement (`Some((command, text))`: `Query` or
    /// `Execute`) or waits for the next (`None`), in database `database`.
    pub fn set_activity(&self, database: Option<&str>, statement: Option<(&'static str, &[u8])>) {
        let mut activity = self.activity.lock().unwrap_or_else(|e| e.into_inner());
        if activity.database.as_deref() != database {
            activity.database = database.map(str::to_owned);
        }
        activity.command = statement.map_or("Sleep", |(command, _)| command);
        let mut buf = match activity.info.take() {
            Some(buf) => buf,
            None => std::mem::take(&mut activity.spare),
        };
        buf.clear();
        match statement {
            Some((_, text)) => {
                buf.extend_from_slice(text);
                activity.info = Some(buf);
            }
            None => activity.spare = buf,
        }
        activity.since = std::time::Instant::now();
    }

    /// The backend threads running the session's statement now, if any.
    pub fn running(&self) -> Option<Running> {
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Records the backend threads the session's statement runs on (None when done).
    pub fn set_running(&self, running: Option<Running>) {
        *self.running.lock().unwrap_or_else(|e| e.into_inner()) = running;
    }

    /// KILL CONNECTION: the session closes as soon as it can; the statement it runs stops
    /// waiting for a connection ([`SessionHandle::kill_query`]).
    pub fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        self.wake.notify_one();
        self.kill_query();
    }

    /// KILL QUERY: the statement running now gives up a wait for a pooled connection (its
    /// backend threads, if any, are killed by the caller). Does nothing to a statement
    /// that starts after it.
    pub fn kill_query(&self) {
        self.query_killed.store(true, Ordering::SeqCst);
        self.query_wake.notify_waiters();
    }

    /// A command from the client starts: a KILL QUERY that came before it was for an
    /// earlier one (or for none, while the session waited); the wait for it is over.
    pub fn command_starts(&self) {
        self.query_killed.store(false, Ordering::SeqCst);
        self.idle_deadline.store(0, Ordering::Relaxed);
    }

    /// The session waits for its client's next command, for `limit` at most (its idle
    /// timeout): past it, [`Registry::expire_idle`] ends the wait
    /// ([`SessionHandle::stop_signal`]). A clock read and two stores per command, where a
    /// timer of its own would cost a timer-wheel insertion and removal.
    pub fn waits_for_command(&self, limit: std::time::Duration) {
        self.idle_expired.store(false, Ordering::Relaxed);
        let limit = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX).max(1);
        self.idle_deadline
            .store(clock_ms().saturating_add(limit), Ordering::Relaxed);
    }

    /// The client stayed silent past its session's idle timeout.
    pub fn idle_expired(&self) -> bool {
        self.idle_expired.load(Ordering::Relaxed)
    }

    /// Whether the statement running now was killed ([`SessionHandle::kill_query`]).
    pub fn query_killed(&self) -> bool {
        self.query_killed.load(Ordering::SeqCst)
    }

    /// Resolves once the statement running now is killed.
    pub async fn query_kill_signal(&self) {
        loop {
            let notified = self.query_wake.notified();
            tokio::pin!(notified);
            // Registered before the check: a kill between the two still wakes it.
            notified.as_mut().enable();
            if self.query_killed() {
                return;
            }
            notified.await;
        }
    }

    /// Whether the session was killed.
    pub fn killed(&self) -> bool {
        self.killed.load(Ordering::SeqCst)
    }

    /// Whether the proxy drains: the session closes once it is not in a transaction.
    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Resolves when a session waiting for its next command should close: killed, or
    /// draining while `idle` (not in a transaction).
    pub async fn stop_signal(&self, idle: bool) {
        while !(self.killed() || self.idle_expired() || idle && self.draining()) {
            self.wake.notified().await;
        }
    }
}

/// All sessions of the proxy.
#[derive(Debug, Default)]
pub struct Registry {
    sessions: Mutex<HashMap<u32, Arc<SessionHandle>>>,
    draining: AtomicBool,
}

/// How often [`Registry::expire_idle`] runs while the proxy serves: an idle client is
/// disconnected at most this long after its timeout.
pub const IDLE_SWEEP: std::time::Duration = std::time::Duration::from_secs(1);

impl Registry {
    /// Ends the wait of every session whose client stayed silent past its idle timeout
    /// ([`SessionHandle::waits_for_command`]); how many.
    pub fn expire_idle(&self) -> usize {
        let now = clock_ms();
        let mut expired = 0;
        for handle in self.lock().values() {
            let deadline = handle.idle_deadline.load(Ordering::Relaxed);
            if deadline != 0 && now >= deadline && !handle.idle_expired() {
                handle.idle_expired.store(true, Ordering::Relaxed);
                handle.wake.notify_one();
                expired += 1;
            }
        }
        expired
    }

    /// Registers a session of `user` connected from `host`.
    pub fn register(&self, id: u32, user: &str, host: &str) -> Arc<SessionHandle> {
        let handle = Arc::new(SessionHandle {
            id,
            user: user.to_owned(),
            host: host.to_owned(),
            activity: Mutex::new(ActivityState {
                database: None,
                command: "Sleep",
                info: None,
                spare: Vec::new(),
                since: std::time::Instant::now(),
            }),
            running: Mutex::new(None),
            killed: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            wake: Notify::new(),
            query_killed: AtomicBool::new(false),
            query_wake: Notify::new(),
            idle_deadline: AtomicU64::new(0),
            idle_expired: AtomicBool::new(false),
        });
        let mut sessions = self.lock();
        handle
            .draining
            .store(self.draining.load(Ordering::SeqCst), Ordering::SeqCst);
        sessions.insert(id, handle.clone());
        handle
    }

    /// Removes a session, if `handle` is still the one registered under its id.
    pub fn unregister(&self, handle: &Arc<SessionHandle>) {
        let mut sessions = self.lock();
        if sessions
            .get(&handle.id)
            .is_some_and(|h| Arc::ptr_eq(h, handle))
        {
            sessions.remove(&handle.id);
        }
    }

    /// The session with this connection id.
    pub fn get(&self, id: u32) -> Option<Arc<SessionHandle>> {
        self.lock().get(&id).cloned()
    }

    /// Starts a drain: every session closes at its next command boundary outside a
    /// transaction (idle ones at once); sessions registered later too.
    pub fn drain(&self) {
        let sessions = self.lock();
        self.draining.store(true, Ordering::SeqCst);
        for handle in sessions.values() {
            handle.draining.store(true, Ordering::SeqCst);
            handle.wake.notify_one();
        }
    }

    /// Every session now.
    pub fn all(&self) -> Vec<Arc<SessionHandle>> {
        self.lock().values().cloned().collect()
    }

    /// Sessions now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// No session now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Arc<SessionHandle>>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_silent_past_its_limit_is_expired_and_one_that_spoke_is_not() {
        let registry = Registry::default();
        let silent = registry.register(1, "app", "h");
        let talking = registry.register(2, "app", "h");
        let running = registry.register(3, "app", "h");
        silent.waits_for_command(std::time::Duration::from_millis(1));
        talking.waits_for_command(std::time::Duration::from_millis(1));
        talking.command_starts();
        running.waits_for_command(std::time::Duration::from_secs(3600));
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert_eq!(registry.expire_idle(), 1);
        assert!(silent.idle_expired());
        assert!(!talking.idle_expired() && !running.idle_expired());
        // Once expired, not counted again; the next wait starts afresh.
        assert_eq!(registry.expire_idle(), 0);
        silent.waits_for_command(std::time::Duration::from_secs(3600));
        assert!(!silent.idle_expired());
    }
}
