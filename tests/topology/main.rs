//! Datasources that are replication clusters (issue 26), against real MariaDB replication:
//! a sandbox of its own (`scripts/sandbox.sh up --replicas 1` in
//! `ROUTEKEY_TOPOLOGY_SANDBOX_DIR`, default `.sandbox-topology`, ports
//! `ROUTEKEY_TOPOLOGY_DS0_PORT`/`DS1_PORT`, default 33261/33262, replicas on +10) where each
//! datasource is a semi-synchronous primary and one replica. The tests kill, stop, slow
//! and promote its servers, so they run one at a time (a lock), each from the canonical
//! topology (`up` again). `scripts/test.sh` takes that sandbox down afterwards.
//!
//! `fixture.rs` holds the sandbox, the configuration and the clients' loops; `reads.rs` the
//! reads on replicas (read your writes, lag, killed and stalled replicas, what stays on the
//! primary); `writes.rs` the writes through failover, switchover and split brain.

#[path = "../common/mod.rs"]
mod common;
mod fixture;
mod reads;
mod writes;
