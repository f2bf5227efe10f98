//! What a statement produced over all its steps (rows, affected rows, warnings, the
//! backends' final flags), from which its final packet is written.

use crate::protocol::packets::OkInfo;
use crate::protocol::status;

/// The flags of a backend's final packet a statement's final packet keeps: the
/// statement's index use ([`status::relayed`]).
pub(super) const KEPT_FLAGS: u16 = status::STATEMENT;

/// What a statement produced over all its steps.
#[derive(Debug, Default)]
pub(super) struct Outcome {
    /// A result set was sent (its final terminator is still to be written).
    pub result_set: bool,
    /// Rows sent.
    pub rows: u64,
    /// Affected rows, summed.
    pub affected_rows: u64,
    /// The first non-zero insert id.
    pub last_insert_id: u64,
    /// Warnings, summed.
    pub warnings: u32,
    /// The OK info: one shard's, or the sum of several shards' that read alike.
    pub info: Vec<u8>,
    /// The session-state changes of a statement that ran on one backend (its final OK's).
    pub session_state: Vec<u8>,
    /// The backends' final status flags the final packet keeps ([`KEPT_FLAGS`]).
    pub backend_flags: u16,
    /// A backend answered (else the final packet is the session's alone).
    pub from_backend: bool,
}

impl Outcome {
    pub(super) fn add_ok(&mut self, ok: &OkInfo, first: bool) {
        self.affected_rows += ok.affected_rows;
        if self.last_insert_id == 0 {
            self.last_insert_id = ok.last_insert_id;
        }
        self.warnings += u32::from(ok.warnings);
        self.info = if first {
            ok.info.clone()
        } else {
            crate::protocol::packets::sum_infos(&self.info, &ok.info)
        };
        // Several backends' changes are not one session's: none is passed on then.
        self.session_state = if first {
            ok.session_state.clone()
        } else {
            Vec::new()
        };
        self.add_end(ok.status);
    }

    /// Keeps what a backend's final packet says of the statement.
    pub(super) fn add_end(&mut self, backend_status: u16) {
        self.backend_flags |= backend_status & KEPT_FLAGS;
        self.from_backend = true;
    }

    /// The status flags of the statement's final packet, `session` being the session's
    /// own after it ran.
    pub(super) fn final_status(&self, session: u16) -> u16 {
        if self.from_backend {
            status::relayed(session, self.backend_flags)
        } else {
            session
        }
    }
}
