//! Atomic commits across datasources (issue 27) under faults, against real MariaDB servers
//! and real `routekey-proxy` processes: a sandbox of its own (`scripts/sandbox.sh up` in
//! `ROUTEKEY_XA_SANDBOX_DIR`, default `.sandbox-xa`, ports `ROUTEKEY_XA_DS0_PORT`/`DS1_PORT`,
//! default 33361/33362). The tests SIGKILL proxies (themselves, by `ROUTEKEY_FAILPOINTS`, or
//! the test) and MariaDB servers, so they run one at a time (a lock), each from `up` again.
//! `scripts/test.sh` takes the sandbox down afterwards.
//!
//! `fixture.rs` holds the sandbox, the proxy processes and the direct reads of the servers;
//! `transfers.rs` the transfers between the two datasources through kills of every kind;
//! `resolvers.rs` the resolvers: two at once deciding each branch once, and prepared
//! branches that outlive a killed server; `decisions.rs` COMMITs whose decision was taken
//! first by someone else or lost in flight (1402, 1180), never acknowledged; `implicit.rs`
//! the other ends of a transaction with XA branches: implicit commits (one known bug there:
//! `SET autocommit = 1` commits half of it; that test is ignored until the proxy is fixed)
//! and a lock wait timeout in a branch.

#[path = "../common/mod.rs"]
mod common;
mod decisions;
mod fixture;
mod implicit;
mod resolvers;
mod transfers;
