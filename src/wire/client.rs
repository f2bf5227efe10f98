//! The client side of a session: writes OK, ERR, EOF and result sets as the client
//! negotiated them (classic EOF or DEPRECATE_EOF, session tracking on or off).

use std::sync::Arc;

use mysql_common::constants::CapabilityFlags;

use super::stream::ClientStream;
use crate::config::ResultNames;
use crate::error::ProxyError;
use crate::protocol::PacketStream;
use crate::protocol::packets::{
    ColumnSpec, OkInfo, column_definition, eof_packet, err_packet, ok_packet, put_lenenc_int,
    rewrite_column_definition_into,
};
use crate::protocol::row::{ColumnMeta, Protocol, build_row};

/// The client connection and what it negotiated.
pub struct Client {
    /// Packets to and from the client.
    pub stream: PacketStream<ClientStream>,
    /// Capabilities both sides agreed on.
    pub caps: CapabilityFlags,
    /// The column definitions renamed last ([`RenamedColumns`]).
    pub renamed: RenamedColumns,
    /// Packets held back instead of written, while a reply is made for a cursor
    /// ([`Client::hold_back`]).
    pub held_back: Option<HeldBack>,
}

/// The packets of a reply held back ([`Client::hold_back`]), at most `cap` of them.
#[derive(Debug, Default)]
pub struct HeldBack {
    /// The packets, in order.
    pub packets: Vec<Vec<u8>>,
    cap: usize,
}

/// The column definitions of the last results as the backend sent them and as renamed for
/// the client ([`crate::protocol::packets::rewrite_column_definition_into`]): a statement
/// run again (the same columns of the same shard's tables) gets the renamed definitions
/// without renaming them again. One entry per shard's [`ResultNames`] (compared by
/// address; the entry keeps it alive), up to [`RenamedColumns::CAPACITY`] (the oldest goes);
/// definitions are compared byte for byte.
#[derive(Default)]
pub struct RenamedColumns {
    /// In no order; each with when it was last used (a count of uses), so a hit moves
    /// nothing and a miss replaces the least recently used.
    entries: Vec<(u64, Renamed)>,
    uses: u64,
}

/// One result's column definitions, as sent and as renamed.
struct Renamed {
    names: Arc<ResultNames>,
    /// The backend's definitions, one after another, and where each ends.
    raw: Vec<u8>,
    raw_ends: Vec<usize>,
    /// Their renamed payloads (a definition left as it was is copied), and where each ends.
    renamed: Vec<u8>,
    renamed_ends: Vec<usize>,
}

impl Renamed {
    /// Whether the entry holds exactly `defs` renamed under `names`.
    fn holds(&self, defs: &[bytes::BytesMut], names: &Arc<ResultNames>) -> bool {
        Arc::ptr_eq(&self.names, names)
            && self.raw_ends.len() == defs.len()
            && defs.iter().enumerate().all(|(i, def)| {
                let start = if i == 0 { 0 } else { self.raw_ends[i - 1] };
                self.raw[start..self.raw_ends[i]] == def[..]
            })
    }

    /// Renames `defs` under `names`.
    fn new(defs: &[bytes::BytesMut], names: &Arc<ResultNames>) -> Self {
        let mut entry = Renamed {
            names: names.clone(),
            raw: Vec::new(),
            raw_ends: Vec::with_capacity(defs.len()),
            renamed: Vec::new(),
            renamed_ends: Vec::with_capacity(defs.len()),
        };
        let mut one = Vec::new();
        for def in defs {
            entry.raw.extend_from_slice(def);
            entry.raw_ends.push(entry.raw.len());
            if rewrite_column_definition_into(def, names, &mut one) {
                entry.renamed.extend_from_slice(&one);
            } else {
                entry.renamed.extend_from_slice(def);
            }
            entry.renamed_ends.push(entry.renamed.len());
        }
        entry
    }

    /// The renamed payloads, in order.
    fn payloads(&self) -> impl Iterator<Item = &[u8]> {
        self.renamed_ends.iter().scan(0, |start, &end| {
            let piece = &self.renamed[*start..end];
            *start = end;
            Some(piece)
        })
    }
}

impl RenamedColumns {
    /// Results kept per client connection: the shards of a datasource times a few
    /// statements.
    pub const CAPACITY: usize = 16;

    /// The entry for `defs` under `names`, renamed now if no entry holds them.
    fn get(&mut self, defs: &[bytes::BytesMut], names: &Arc<ResultNames>) -> &Renamed {
        self.uses += 1;
        let at = match self.entries.iter().position(|(_, e)| e.holds(defs, names)) {
            Some(at) => at,
            None if self.entries.len() < Self::CAPACITY => {
                self.entries.push((0, Renamed::new(defs, names)));
                self.entries.len() - 1
            }
            None => {
                let (oldest, _) = self
                    .entries
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, (used, _))| *used)
                    .expect("full, so not empty");
                self.entries[oldest].1 = Renamed::new(defs, names);
                oldest
            }
        };
        let entry = &mut self.entries[at];
        entry.0 = self.uses;
        &entry.1
    }
}

impl Client {
    /// Results end with an OK packet (0xFE) instead of EOF; no EOF after column definitions.
    pub fn deprecate_eof(&self) -> bool {
        self.caps.contains(CapabilityFlags::CLIENT_DEPRECATE_EOF)
    }

    /// OK packets carry their info length-encoded.
    pub fn session_track(&self) -> bool {
        self.caps.contains(CapabilityFlags::CLIENT_SESSION_TRACK)
    }

    /// Queues the column definitions `defs` of a result, renamed under `names`.
    pub fn renamed_columns(
        &mut self,
        defs: &[bytes::BytesMut],
        names: &Arc<ResultNames>,
    ) -> Result<(), ProxyError> {
        let entry = self.renamed.get(defs, names);
        match &mut self.held_back {
            Some(held) => held.packets.extend(entry.payloads().map(<[u8]>::to_vec)),
            None => {
                for payload in entry.payloads() {
                    self.stream
                        .write_packet(payload)
                        .map_err(|e| ProxyError::ClientGone(e.to_string()))?;
                }
            }
        }
        Ok(())
    }

    /// Queues a packet, mapping I/O errors (holds it back while [`Client::hold_back`] is
    /// on; past its cap, the statement fails).
    pub fn packet(&mut self, payload: &[u8]) -> Result<(), ProxyError> {
        if let Some(held) = &mut self.held_back {
            if held.packets.len() >= held.cap {
                return Err(ProxyError::MergeCap(format!(
                    "a cursor over a result of more than {} rows (sharding.merge_row_cap): the proxy holds a cursor's rows in memory; execute without a cursor to stream them",
                    held.cap
                )));
            }
            held.packets.push(payload.to_vec());
            return Ok(());
        }
        self.stream
            .write_packet(payload)
            .map_err(|e| ProxyError::ClientGone(e.to_string()))
    }

    /// From now on packets are held back (at most `cap`) instead of written, until
    /// [`Client::release_held`]: the reply of an execution that opens a cursor, whose rows
    /// wait for COM_STMT_FETCH.
    pub fn hold_back(&mut self, cap: usize) {
        self.held_back = Some(HeldBack {
            packets: Vec::new(),
            cap,
        });
    }

    /// Ends holding packets back; the packets held.
    pub fn release_held(&mut self) -> Vec<Vec<u8>> {
        self.held_back.take().map(|h| h.packets).unwrap_or_default()
    }

    /// Whether packets are held back (rows must then go through [`Client::packet`]).
    pub fn holding_back(&self) -> bool {
        self.held_back.is_some()
    }

    /// Sends what is queued.
    pub async fn flush(&mut self) -> Result<(), ProxyError> {
        self.stream
            .flush()
            .await
            .map_err(|e| ProxyError::ClientGone(e.to_string()))
    }

    /// Sends what is queued once enough is buffered (long results stream).
    pub async fn flush_if_full(&mut self) -> Result<(), ProxyError> {
        self.stream
            .flush_if_full()
            .await
            .map_err(|e| ProxyError::ClientGone(e.to_string()))
    }

    /// An OK packet; its session-state data only to a client that negotiated
    /// SESSION_TRACK.
    pub fn ok(&mut self, ok: &OkInfo) -> Result<(), ProxyError> {
        let payload = if ok.session_state.is_empty() || self.session_track() {
            ok_packet(0x00, ok)
        } else {
            ok_packet(
                0x00,
                &OkInfo {
                    session_state: Vec::new(),
                    ..ok.clone()
                },
            )
        };
        self.packet(&payload)
    }

    /// An ERR packet for `error`.
    ///
    /// When a write to the client stopped partway (a timeout during a long row), the client
    /// holds part of a packet and an error packet would be read as row bytes: the connection
    /// is given up instead ([`ProxyError::ClientGone`]).
    pub fn error(&mut self, error: &ProxyError) -> Result<(), ProxyError> {
        if self.stream.is_cut() {
            return Err(ProxyError::ClientGone(format!(
                "a result was cut off in the middle of a packet ({error})"
            )));
        }
        let (code, state, message) = error.to_packet_parts();
        self.packet(&err_packet(code, &state, &message))
    }

    /// The column count and definitions of a result set, then EOF for classic clients.
    pub fn columns_header(&mut self, count: u64) -> Result<(), ProxyError> {
        let mut buf = Vec::with_capacity(9);
        put_lenenc_int(&mut buf, count);
        self.packet(&buf)
    }

    /// The column count packet and the definitions (named logically) of a result set;
    /// `status`: the flags of the EOF that ends them.
    pub fn send_columns(
        &mut self,
        defs: &[bytes::BytesMut],
        names: Option<&Arc<ResultNames>>,
        status: u16,
    ) -> Result<(), ProxyError> {
        self.columns_header(defs.len() as u64)?;
        match names {
            Some(names) => self.renamed_columns(defs, names)?,
            None => {
                for def in defs {
                    self.packet(def)?;
                }
            }
        }
        self.columns_end(status)
    }

    /// The EOF between column definitions and rows (classic clients only).
    pub fn columns_end(&mut self, status: u16) -> Result<(), ProxyError> {
        if !self.deprecate_eof() {
            self.packet(&eof_packet(0, status))?;
        }
        Ok(())
    }

    /// The end of a result set's rows.
    pub fn rows_end(&mut self, warnings: u16, status: u16) -> Result<(), ProxyError> {
        if self.deprecate_eof() {
            let ok = OkInfo {
                status,
                warnings,
                ..Default::default()
            };
            let payload = ok_packet(0xfe, &ok);
            self.packet(&payload)
        } else {
            self.packet(&eof_packet(warnings, status))
        }
    }

    /// A whole result set built by the proxy in the binary protocol (the answer to a
    /// prepared statement's execution): `rows` hold each value as text, encoded here by
    /// its column's type (integers as little-endian, strings length-encoded); a column of
    /// another fixed-width type is an internal error.
    pub fn binary_result_set(
        &mut self,
        columns: &[ColumnSpec<'_>],
        rows: &[Vec<Option<Vec<u8>>>],
        status: u16,
    ) -> Result<(), ProxyError> {
        self.columns_header(columns.len() as u64)?;
        for c in columns {
            self.packet(&column_definition(c, "", ""))?;
        }
        self.columns_end(status)?;
        let metas: Vec<ColumnMeta> = columns.iter().map(ColumnMeta::from).collect();
        for row in rows {
            let values = row
                .iter()
                .zip(columns)
                .map(|(value, c)| {
                    value
                        .as_deref()
                        .map(|text| binary_value(c, text))
                        .transpose()
                })
                .collect::<Result<Vec<_>, _>>()?;
            let values: Vec<Option<&[u8]>> = values.iter().map(|v| v.as_deref()).collect();
            self.packet(&build_row(&values, &metas, Protocol::Binary))?;
        }
        self.rows_end(0, status)
    }

    /// A whole result set built by the proxy (small answers: SHOW WARNINGS, SHOW TABLES).
    pub fn result_set(
        &mut self,
        columns: &[ColumnSpec<'_>],
        rows: &[Vec<Option<Vec<u8>>>],
        schema_table: (&str, &str),
        status: u16,
    ) -> Result<(), ProxyError> {
        self.columns_header(columns.len() as u64)?;
        for c in columns {
            self.packet(&column_definition(c, schema_table.0, schema_table.1))?;
        }
        self.columns_end(status)?;
        for row in rows {
            let values: Vec<Option<&[u8]>> = row.iter().map(|v| v.as_deref()).collect();
            self.packet(&crate::protocol::packets::text_row(&values))?;
        }
        self.rows_end(0, status)
    }
}

/// A value given as text in its binary-protocol form for column `c`: integers as
/// little-endian, strings as they are (the row adds their length).
fn binary_value(c: &ColumnSpec<'_>, text: &[u8]) -> Result<Vec<u8>, ProxyError> {
    use mysql_common::constants::{ColumnFlags, ColumnType};
    let number = || -> Result<i128, ProxyError> {
        String::from_utf8_lossy(text)
            .parse()
            .map_err(|_| ProxyError::Internal("a non-numeric integer value".into()))
    };
    let unsigned = c.flags.contains(ColumnFlags::UNSIGNED_FLAG);
    Ok(match c.column_type {
        ColumnType::MYSQL_TYPE_LONGLONG if unsigned => (number()? as u64).to_le_bytes().to_vec(),
        ColumnType::MYSQL_TYPE_LONGLONG => (number()? as i64).to_le_bytes().to_vec(),
        ColumnType::MYSQL_TYPE_LONG => (number()? as u32).to_le_bytes().to_vec(),
        ColumnType::MYSQL_TYPE_VAR_STRING
        | ColumnType::MYSQL_TYPE_STRING
        | ColumnType::MYSQL_TYPE_VARCHAR
        | ColumnType::MYSQL_TYPE_BLOB => text.to_vec(),
        other => {
            return Err(ProxyError::Internal(format!(
                "the proxy does not encode {other:?} values in the binary protocol"
            )));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Arc<ResultNames> {
        Arc::new(ResultNames {
            physical_database: "orders_0".into(),
            logical_database: "orders".into(),
            tables: vec![("t_order_0".into(), "t_order".into())],
        })
    }

    fn defs(n: u8) -> Vec<bytes::BytesMut> {
        vec![bytes::BytesMut::from(&[b'x', n][..])]
    }

    fn held(cache: &RenamedColumns, n: u8) -> bool {
        cache.entries.iter().any(|(_, e)| e.raw == [b'x', n])
    }

    #[test]
    fn renamed_columns_keep_the_most_recently_used_and_replace_the_least() {
        let names = names();
        let mut cache = RenamedColumns::default();
        for n in 0..RenamedColumns::CAPACITY as u8 {
            cache.get(&defs(n), &names);
        }
        // A hit on the oldest makes it the newest: the next miss replaces entry 1.
        let payloads: Vec<Vec<u8>> = cache
            .get(&defs(0), &names)
            .payloads()
            .map(<[u8]>::to_vec)
            .collect();
        assert_eq!(
            payloads,
            vec![vec![b'x', 0]],
            "a definition it cannot rename is kept as is"
        );
        cache.get(&defs(100), &names);
        assert_eq!(cache.entries.len(), RenamedColumns::CAPACITY);
        assert!(held(&cache, 0) && held(&cache, 100) && held(&cache, 2));
        assert!(!held(&cache, 1));
        // Other names (another shard's), the same definitions: another entry.
        cache.get(&defs(0), &self::names());
        assert_eq!(
            cache
                .entries
                .iter()
                .filter(|(_, e)| e.raw == [b'x', 0])
                .count(),
            2
        );
    }
}
