//! What the proxy remembers between logins: the caching_sha2_password fast-path cache and
//! recent failures per (address, user), which slow repeated guessing down.

use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::config::Credential;

/// Failures counted per (address, user) within this window.
pub const FAILURE_WINDOW: Duration = Duration::from_secs(60);
/// Failures within [`FAILURE_WINDOW`] answered without delay.
pub const FREE_FAILURES: usize = 5;
/// The longest delay before an answer.
pub const MAX_DELAY: Duration = Duration::from_secs(10);
/// (address, user) pairs remembered at most: the table's memory is bounded whatever the
/// number of addresses or made-up user names; the least recently seen go first.
const MAX_PAIRS: u64 = 100_000;
/// Longest user name kept in a key (longer ones are cut: still one bucket per prefix).
const MAX_KEY_USER: usize = 64;

/// The delay before answering a login when `recent` failures of its (address, user) lie
/// within [`FAILURE_WINDOW`]: none up to [`FREE_FAILURES`], then 1 s doubling per failure,
/// at most [`MAX_DELAY`].
pub fn failure_delay(recent: usize) -> Duration {
    match recent.checked_sub(FREE_FAILURES) {
        None => Duration::ZERO,
        Some(extra) => Duration::from_secs(1u64 << extra.min(8)).min(MAX_DELAY),
    }
}

/// Login state shared by every connection of one proxy.
pub struct Logins {
    /// `SHA256(SHA256(pw))` by (user, what identifies its configured credential), learnt
    /// at a full authentication.
    sha2: moka::sync::Cache<(String, Vec<u8>), [u8; 32]>,
    /// Times of recent failures by (address, user), newest last.
    failures: moka::sync::Cache<(IpAddr, String), Arc<Mutex<Vec<Instant>>>>,
}

impl Default for Logins {
    fn default() -> Self {
        Self {
            sha2: moka::sync::Cache::new(10_000),
            failures: moka::sync::Cache::builder()
                .max_capacity(MAX_PAIRS)
                .time_to_idle(FAILURE_WINDOW)
                .build(),
        }
    }
}

/// What ties a cache entry to the credential it was learnt for: a changed password (or
/// hash) in a reloaded configuration does not reuse it.
fn credential_key(credential: &Credential) -> Vec<u8> {
    use sha2::{Digest, Sha256};
    match credential {
        Credential::Password(p) => Sha256::digest(p.as_bytes()).to_vec(),
        Credential::NativeHash(h) => h.to_vec(),
        Credential::Sha2Crypt(c) => [&c.salt[..], &c.digest[..]].concat(),
    }
}

fn pair(address: IpAddr, user: &str) -> (IpAddr, String) {
    let mut end = user.len().min(MAX_KEY_USER);
    while !user.is_char_boundary(end) {
        end -= 1;
    }
    (address, user[..end].to_owned())
}

impl Logins {
    /// The cached fast-path value of `user` with `credential`, if it logged in fully before.
    pub fn sha2_cached(&self, user: &str, credential: &Credential) -> Option<[u8; 32]> {
        self.sha2
            .get(&(user.to_owned(), credential_key(credential)))
    }

    /// Remembers the fast-path value after a full authentication.
    pub fn sha2_learnt(&self, user: &str, credential: &Credential, stage2: [u8; 32]) {
        self.sha2
            .insert((user.to_owned(), credential_key(credential)), stage2);
    }

    /// How long to wait before answering a login of `user` from `address`.
    pub fn delay(&self, address: IpAddr, user: &str) -> Duration {
        let Some(times) = self.failures.get(&pair(address, user)) else {
            return Duration::ZERO;
        };
        let mut times = times.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        times.retain(|t| now.duration_since(*t) < FAILURE_WINDOW);
        failure_delay(times.len())
    }

    /// Counts a failed login.
    pub fn failed(&self, address: IpAddr, user: &str) {
        let times = self
            .failures
            .get_with(pair(address, user), Default::default);
        let mut times = times.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        times.retain(|t| now.duration_since(*t) < FAILURE_WINDOW);
        // Past this many the delay no longer grows: the list stays short.
        if times.len() < FREE_FAILURES + 8 {
            times.push(now);
        } else {
            times.remove(0);
            times.push(now);
        }
    }

    /// A successful login forgets the failures of its (address, user).
    pub fn succeeded(&self, address: IpAddr, user: &str) {
        self.failures.invalidate(&pair(address, user));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delay_starts_after_five_failures_and_doubles_to_ten_seconds() {
        let secs: Vec<u64> = (0..12).map(|n| failure_delay(n).as_secs()).collect();
        assert_eq!(secs, [0, 0, 0, 0, 0, 1, 2, 4, 8, 10, 10, 10]);
    }

    #[test]
    fn failures_count_per_address_and_user_and_a_success_resets() {
        let logins = Logins::default();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        for _ in 0..6 {
            logins.failed(a, "app");
        }
        assert_eq!(logins.delay(a, "app"), Duration::from_secs(2));
        assert_eq!(logins.delay(b, "app"), Duration::ZERO);
        assert_eq!(logins.delay(a, "other"), Duration::ZERO);
        logins.succeeded(a, "app");
        assert_eq!(logins.delay(a, "app"), Duration::ZERO);
    }

    #[test]
    fn the_sha2_cache_is_tied_to_the_credential() {
        let logins = Logins::default();
        let old = Credential::Password("old".into());
        let new = Credential::Password("new".into());
        logins.sha2_learnt("app", &old, [7; 32]);
        assert_eq!(logins.sha2_cached("app", &old), Some([7; 32]));
        assert_eq!(logins.sha2_cached("app", &new), None);
        assert_eq!(logins.sha2_cached("other", &old), None);
    }
}
