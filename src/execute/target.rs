//! Where a backend access goes. Every connection a session takes to run something — a
//! plan's step, a `SET` and its read-back, `BEGIN`, a lock, a prepare, a catalog query, a
//! `LOAD DATA` batch — is asked for through one door,
//! [`super::Transaction::connection`], with a [`Target`]: the datasource, and what the
//! access needs of it.
//!
//! Today a datasource is one server and every target reaches it. The access kind is what a
//! datasource with replicas decides by (issue 26): writes and session-state changes go to
//! the primary, reads may go to a replica that has caught up with the session.

use crate::config::DatasourceId;

/// What an access needs of a datasource's servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// Writes data, opens or joins a transaction, takes a lock, changes or reads back the
    /// session's state (`SET`, `USE`), prepares, or runs a client statement whose kind the
    /// proxy does not know: the datasource's primary.
    Primary,
    /// Reads only, and not the session's own uncommitted work (catalog and `SHOW` answers
    /// the proxy builds, probes for legacy ids): a member that has applied the session's
    /// writes may answer.
    Read,
}

/// A datasource and what the access needs of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Target {
    /// The datasource.
    pub datasource: DatasourceId,
    /// What the access needs of it.
    pub access: Access,
}

impl Target {
    /// The primary of `datasource`: see [`Access::Primary`].
    pub fn primary(datasource: DatasourceId) -> Self {
        Self {
            datasource,
            access: Access::Primary,
        }
    }

    /// A read of `datasource`: see [`Access::Read`].
    pub fn read(datasource: DatasourceId) -> Self {
        Self {
            datasource,
            access: Access::Read,
        }
    }
}
