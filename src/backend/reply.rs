//! What a backend replies to a command, as the reader ([`super::reader`]) gives it.

use bytes::BytesMut;
use mysql_common::constants::StatusFlags;

use crate::error::ProxyError;
use crate::protocol::packets::{OkInfo, ServerErr};

/// The first part of a backend's reply to a command.
#[derive(Debug)]
pub enum Reply {
    /// An OK packet (a statement without a result set).
    Ok(OkInfo),
    /// A result set: its column definitions as the backend sent them (one packet each) and
    /// the status flags of the EOF after them (the server has planned the statement by
    /// then: index use, a transaction it opened, more results of a `CALL`); its rows are
    /// read with [`super::BackendConn::next_row`].
    ResultSet {
        /// The column definitions.
        columns: Vec<BytesMut>,
        /// The status flags of the EOF packet that ends them.
        status: u16,
    },
}

/// How a result set ended: its EOF packet's warnings and status flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResultEnd {
    /// Warnings of the statement.
    pub warnings: u16,
    /// Status flags (`SERVER_MORE_RESULTS_EXISTS` when another result follows).
    pub status: u16,
}

impl ResultEnd {
    /// Another result of the same command follows (a `CALL`).
    pub fn more_results(&self) -> bool {
        self.status & StatusFlags::SERVER_MORE_RESULTS_EXISTS.bits() != 0
    }
}

/// The server's first answer to a `LOAD DATA LOCAL INFILE` ([`super::BackendConn::load_local`]).
#[derive(Debug)]
pub enum FileRequest {
    /// It asks for the file: send it with [`super::BackendConn::send_file_data`], then
    /// [`super::BackendConn::finish_file`].
    Asked,
    /// It answered without asking (nothing to send).
    Answered(OkInfo),
}

/// A backend ERR as a client error, unchanged.
pub fn backend_error(e: ServerErr) -> ProxyError {
    ProxyError::Backend {
        code: e.code,
        state: e.state,
        message: e.message,
    }
}
