//! The sessions of one proxy, by connection id, for `KILL` and `Statement.cancel()`:
//! each client has its own connection id, and a KILL of it reaches the backend thread that
//! runs its statement (never whatever backend thread has the same number).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::config::DatasourceId;

/// What other sessions may know of one session.
#[derive(Debug)]
pub struct SessionHandle {
    /// Its connection id.
    pub id: u32,
    /// Its MySQL user (a user may kill its own connections only).
    pub user: String,
    running: Mutex<Option<(DatasourceId, u32)>>,
    killed: AtomicBool,
    wake: Notify,
}

impl SessionHandle {
    /// The backend thread running the session's statement now, if any.
    pub fn running(&self) -> Option<(DatasourceId, u32)> {
        *self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the backend thread the session's statement runs on (None when done).
    pub fn set_running(&self, running: Option<(DatasourceId, u32)>) {
        *self.running.lock().unwrap_or_else(|e| e.into_inner()) = running;
    }

    /// KILL CONNECTION: the session closes as soon as it can.
    pub fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        self.wake.notify_one();
    }

    /// Whether the session was killed.
    pub fn killed(&self) -> bool {
        self.killed.load(Ordering::SeqCst)
    }

    /// Resolves when the session is killed (for a session waiting for its next command).
    pub async fn killed_signal(&self) {
        while !self.killed() {
            self.wake.notified().await;
        }
    }
}

/// All sessions of the proxy.
#[derive(Debug, Default)]
pub struct Registry {
    sessions: Mutex<HashMap<u32, Arc<SessionHandle>>>,
}

impl Registry {
    /// Registers a session.
    pub fn register(&self, id: u32, user: &str) -> Arc<SessionHandle> {
        let handle = Arc::new(SessionHandle {
            id,
            user: user.to_owned(),
            running: Mutex::new(None),
            killed: AtomicBool::new(false),
            wake: Notify::new(),
        });
        self.lock().insert(id, handle.clone());
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
