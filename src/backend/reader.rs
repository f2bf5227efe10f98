//! The one reader of a backend's replies: after a command, [`BackendConn::read_reply`]
//! gives an OK, a backend error, or a result set's column definitions; the rows follow,
//! one [`BackendConn::next_row`] at a time, until the result's end, whose warnings and
//! status [`BackendConn::result_end`] then tells. Nothing here writes to a client, except
//! [`BackendConn::relay_large_row`], which passes a row of megabytes on as it arrives.

use bytes::BytesMut;
use mysql_common::constants::StatusFlags;

use super::conn::BackendConn;
use super::reply::{FileRequest, Reply, ResultEnd, backend_error};
use crate::error::ProxyError;
use crate::protocol::packets::{OkInfo, is_eof, parse_eof, parse_err, parse_ok, read_lenenc_int};

impl BackendConn {
    /// Reads the reply to the command just sent: an OK, or a result set's column
    /// definitions (rows follow). A backend ERR is [`ProxyError::Backend`]; a connection
    /// left mid-reply by an I/O or protocol error is marked broken.
    pub async fn read_reply(&mut self) -> Result<Reply, ProxyError> {
        let result = self.read_reply_inner().await;
        if let Err(e) = &result {
            if !matches!(e, ProxyError::Backend { .. }) {
                self.mark_broken();
            }
        }
        result
    }

    async fn read_reply_inner(&mut self) -> Result<Reply, ProxyError> {
        loop {
            let packet = self.read_packet().await?;
            match packet.first() {
                Some(0x00) => {
                    let ok = parse_ok(&packet).ok_or_else(|| {
                        ProxyError::Internal("malformed OK packet from backend".into())
                    })?;
                    self.observe_status(ok.status);
                    return Ok(Reply::Ok(ok));
                }
                Some(0xff) => {
                    let e = parse_err(&packet);
                    self.observe_error(&e);
                    return Err(backend_error(e));
                }
                Some(0xfb) => {
                    // LOCAL INFILE request: never negotiated; refuse it and read on.
                    self.send_empty_packet().await?;
                }
                _ => {
                    let mut pos = 0;
                    let count = read_lenenc_int(&packet, &mut pos).ok_or_else(|| {
                        ProxyError::Internal("malformed result set header from backend".into())
                    })?;
                    let mut columns = Vec::with_capacity(count.min(4096) as usize);
                    for _ in 0..count {
                        columns.push(self.read_packet().await?);
                    }
                    let eof = self.read_packet().await?;
                    if !is_eof(&eof) {
                        return Err(ProxyError::Internal(
                            "expected EOF after column definitions".into(),
                        ));
                    }
                    let (_, status) = parse_eof(&eof);
                    return Ok(Reply::ResultSet { columns, status });
                }
            }
        }
    }

    /// The next row of the result set being read (the backend's packet, unchanged);
    /// `None` at its end, after which [`BackendConn::result_end`] tells how it ended. An
    /// ERR in place of a row is [`ProxyError::Backend`].
    pub async fn next_row(&mut self) -> Result<Option<BytesMut>, ProxyError> {
        let packet = match self.read_packet().await {
            Ok(p) => p,
            Err(e) => {
                self.mark_broken();
                return Err(e);
            }
        };
        if is_eof(&packet) {
            let (warnings, status) = parse_eof(&packet);
            self.observe_status(status);
            self.set_result_end(ResultEnd { warnings, status });
            return Ok(None);
        }
        if packet.first() == Some(&0xff) {
            let e = parse_err(&packet);
            self.observe_error(&e);
            return Err(backend_error(e));
        }
        Ok(Some(packet))
    }

    /// Reads the rows of the result set being read to its end and drops them.
    pub async fn skip_rows(&mut self) -> Result<ResultEnd, ProxyError> {
        while self.next_row().await?.is_some() {}
        Ok(self.result_end())
    }

    /// Reads the rest of a reply (every result of a multi-result reply) and drops it;
    /// returns the last OK, or a default one when the reply ended with a result set.
    pub async fn drain_reply(&mut self, first: Reply) -> Result<OkInfo, ProxyError> {
        let mut reply = first;
        loop {
            let more = match reply {
                Reply::Ok(ok) => {
                    if ok.status & StatusFlags::SERVER_MORE_RESULTS_EXISTS.bits() == 0 {
                        return Ok(ok);
                    }
                    true
                }
                Reply::ResultSet { .. } => self.skip_rows().await?.more_results(),
            };
            if !more {
                return Ok(OkInfo::default());
            }
            reply = self.read_reply().await?;
        }
    }
}

impl BackendConn {
    /// Sends a `LOAD DATA LOCAL INFILE` statement and reads the server's first answer: its
    /// request for the file, or an OK; an ERR is [`ProxyError::Backend`].
    pub async fn load_local(&mut self, sql: &[u8]) -> Result<FileRequest, ProxyError> {
        self.send_command(mysql_common::constants::Command::COM_QUERY, sql)
            .await?;
        let packet = self.read_packet().await?;
        match packet.first() {
            Some(0xfb) => Ok(FileRequest::Asked),
            Some(0x00) => {
                let ok = parse_ok(&packet).ok_or_else(|| {
                    self.mark_broken();
                    ProxyError::Internal("malformed OK packet from backend".into())
                })?;
                self.observe_status(ok.status);
                Ok(FileRequest::Answered(ok))
            }
            Some(0xff) => {
                let e = parse_err(&packet);
                self.observe_error(&e);
                Err(backend_error(e))
            }
            _ => {
                self.mark_broken();
                Err(ProxyError::Internal(
                    "a result set in answer to LOAD DATA LOCAL INFILE".into(),
                ))
            }
        }
    }

    /// Queues `data` as the next packet of the file asked for (not empty: an empty packet
    /// ends the file), and sends what is queued once enough is.
    pub async fn send_file_data(&mut self, data: &[u8]) -> Result<(), ProxyError> {
        debug_assert!(!data.is_empty());
        self.write_file_packet(data)?;
        self.flush_if_full().await
    }

    /// Ends the file (an empty packet) and reads the statement's answer: its OK, or its
    /// error as [`ProxyError::Backend`].
    pub async fn finish_file(&mut self) -> Result<OkInfo, ProxyError> {
        self.write_file_packet(&[])?;
        self.flush_file().await?;
        match self.read_reply().await? {
            Reply::Ok(ok) => Ok(ok),
            Reply::ResultSet { .. } => {
                self.mark_broken();
                Err(ProxyError::Internal(
                    "a result set in answer to a LOAD DATA file".into(),
                ))
            }
        }
    }
}
