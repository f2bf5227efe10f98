//! The binary protocol of prepared statements: reading a client's COM_STMT_EXECUTE and
//! writing the one a backend receives. mysql_common has no parser for COM_STMT_EXECUTE, and
//! its value decoder panics on some type codes, so parameters are read here, with every
//! type code checked first.

use std::ops::Range;

/// A parameter of a prepared statement, as bound by the client.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamValue {
    /// NULL.
    Null,
    /// A signed integer.
    Int(i64),
    /// An unsigned integer.
    UInt(u64),
    /// A floating-point number.
    Float(f64),
    /// A string or DECIMAL, as its bytes.
    Bytes(Vec<u8>),
    /// A date, time, or a value sent as long data: not an order id the proxy reads.
    Other,
}

/// The unsigned flag of a parameter type (second byte of its type).
pub const UNSIGNED: u8 = 0x80;

/// One bound parameter of an execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundParam {
    /// NULL (null bitmap).
    pub null: bool,
    /// Type code and flags byte, as the client sent them (or remembered from before).
    pub kind: (u8, u8),
    /// The value's bytes in the execute packet (empty for NULL and long data).
    pub value: Range<usize>,
    /// The value arrives as COM_STMT_SEND_LONG_DATA, not in the packet.
    pub long_data: bool,
}

/// A parsed COM_STMT_EXECUTE (payload without the command byte).
#[derive(Debug, Clone)]
pub struct Execute {
    /// The client's statement id.
    pub statement_id: u32,
    /// Cursor flags the client asked for.
    pub flags: u8,
    /// Parameters in order.
    pub params: Vec<BoundParam>,
    /// The packet carried parameter types (the "new params bound" flag).
    pub types_sent: bool,
}

/// Byte length of a fixed-size value of `type_code`, `None` for length-prefixed ones.
fn fixed_len(type_code: u8) -> Option<usize> {
    Some(match type_code {
        1 => 1,      // TINY
        2 | 13 => 2, // SHORT, YEAR
        3 | 9 => 4,  // LONG, INT24
        8 => 8,      // LONGLONG
        4 => 4,      // FLOAT
        5 => 8,      // DOUBLE
        6 => 0,      // NULL
        _ => return None,
    })
}

/// Type codes whose values the proxy can read: integers, floats, strings, decimals, blobs,
/// dates, times, bits. Anything else (TIMESTAMP2, DATETIME2, TIME2, typed arrays) is refused.
fn known(type_code: u8) -> bool {
    matches!(type_code, 0..=16 | 245..=255)
}

fn is_date_or_time(type_code: u8) -> bool {
    matches!(type_code, 7 | 10 | 11 | 12 | 14)
}

/// Reads the statement id of an execute packet.
pub fn statement_id(payload: &[u8]) -> Option<u32> {
    Some(u32::from_le_bytes(payload.get(..4)?.try_into().ok()?))
}

/// One COM_STMT_SEND_LONG_DATA payload (after the command byte), as read by
/// [`parse_long_data`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LongDataChunk<'a> {
    /// The client's statement id.
    pub statement_id: u32,
    /// 0-based index of the parameter the chunk belongs to.
    pub param: usize,
    /// The chunk's bytes (possibly empty).
    pub data: &'a [u8],
}

/// Reads a COM_STMT_SEND_LONG_DATA payload: statement id (4 bytes LE), parameter index
/// (2 bytes LE), then the data. `None` when shorter than 6 bytes (the packet has no reply,
/// so the caller ignores it, as MySQL does).
pub fn parse_long_data(payload: &[u8]) -> Option<LongDataChunk<'_>> {
    let param = payload.get(4..6)?;
    Some(LongDataChunk {
        statement_id: statement_id(payload)?,
        param: usize::from(u16::from_le_bytes([param[0], param[1]])),
        data: &payload[6..],
    })
}

/// Parses a COM_STMT_EXECUTE payload (after the command byte). `param_count` comes from
/// the prepare; `remembered` are the types of the previous execution (a re-execution may
/// omit them); `long_data[i]` says a value arrived as long data.
pub fn parse_execute(
    payload: &[u8],
    param_count: usize,
    remembered: Option<&[(u8, u8)]>,
    long_data: &[bool],
) -> Result<Execute, String> {
    let truncated = || "malformed COM_STMT_EXECUTE: packet too short".to_owned();
    let statement_id = statement_id(payload).ok_or_else(truncated)?;
    let flags = *payload.get(4).ok_or_else(truncated)?;
    let mut pos = 9; // id (4), flags (1), iteration count (4)
    if param_count == 0 {
        return Ok(Execute {
            statement_id,
            flags,
            params: Vec::new(),
            types_sent: false,
        });
    }
    let bitmap_len = param_count.div_ceil(8);
    let bitmap = payload.get(pos..pos + bitmap_len).ok_or_else(truncated)?;
    pos += bitmap_len;
    let types_sent = *payload.get(pos).ok_or_else(truncated)? == 1;
    pos += 1;
    let types: Vec<(u8, u8)> = if types_sent {
        let raw = payload
            .get(pos..pos + 2 * param_count)
            .ok_or_else(truncated)?;
        pos += 2 * param_count;
        raw.chunks(2).map(|c| (c[0], c[1])).collect()
    } else {
        remembered
            .filter(|t| t.len() == param_count)
            .ok_or(
                "COM_STMT_EXECUTE without parameter types for a statement never executed with them",
            )?
            .to_vec()
    };
    let mut params = Vec::with_capacity(param_count);
    for (i, &(code, kind_flags)) in types.iter().enumerate() {
        if !known(code) {
            return Err(format!(
                "parameter {} has type code {code}, which is not supported",
                i + 1
            ));
        }
        let null = bitmap[i / 8] & (1 << (i % 8)) != 0;
        let long = long_data.get(i).copied().unwrap_or(false);
        let start = pos;
        if !null && !long {
            let len = match fixed_len(code) {
                Some(n) => n,
                None if is_date_or_time(code) => {
                    1 + usize::from(*payload.get(pos).ok_or_else(truncated)?)
                }
                None => {
                    let mut p = pos;
                    let n =
                        super::packets::read_lenenc_int(payload, &mut p).ok_or_else(truncated)?;
                    // A length near 2^64 must not wrap around to a small one.
                    usize::try_from(n)
                        .ok()
                        .and_then(|n| n.checked_add(p - pos))
                        .ok_or_else(truncated)?
                }
            };
            if pos.checked_add(len).is_none_or(|end| end > payload.len()) {
                return Err(truncated());
            }
            pos += len;
        }
        params.push(BoundParam {
            null,
            kind: (code, kind_flags),
            value: start..pos,
            long_data: long && !null,
        });
    }
    Ok(Execute {
        statement_id,
        flags,
        params,
        types_sent,
    })
}

/// The value of a parameter as the router reads it.
pub fn param_value(payload: &[u8], p: &BoundParam) -> ParamValue {
    if p.null {
        return ParamValue::Null;
    }
    if p.long_data {
        return ParamValue::Other;
    }
    let b = &payload[p.value.clone()];
    let unsigned = p.kind.1 & UNSIGNED != 0;
    let int = |v: i64, u: u64| {
        if unsigned {
            ParamValue::UInt(u)
        } else {
            ParamValue::Int(v)
        }
    };
    match p.kind.0 {
        1 => int(i64::from(b[0] as i8), u64::from(b[0])),
        2 | 13 => {
            let raw = [b[0], b[1]];
            int(
                i64::from(i16::from_le_bytes(raw)),
                u64::from(u16::from_le_bytes(raw)),
            )
        }
        3 | 9 => {
            let raw = [b[0], b[1], b[2], b[3]];
            int(
                i64::from(i32::from_le_bytes(raw)),
                u64::from(u32::from_le_bytes(raw)),
            )
        }
        8 => {
            let raw: [u8; 8] = b.try_into().unwrap_or_default();
            int(i64::from_le_bytes(raw), u64::from_le_bytes(raw))
        }
        4 => ParamValue::Float(f64::from(f32::from_le_bytes(
            b.try_into().unwrap_or_default(),
        ))),
        5 => ParamValue::Float(f64::from_le_bytes(b.try_into().unwrap_or_default())),
        6 => ParamValue::Null,
        c if is_date_or_time(c) => ParamValue::Other,
        _ => {
            let mut pos = 0;
            match super::packets::read_lenenc_bytes(b, &mut pos) {
                Some(bytes) => ParamValue::Bytes(bytes.to_vec()),
                None => ParamValue::Other,
            }
        }
    }
}

/// Long data of one parameter (COM_STMT_SEND_LONG_DATA), kept in the chunks it arrived
/// in: each goes to the backend as its own COM_STMT_SEND_LONG_DATA, as the server expects
/// (one packet of the whole value could exceed its `max_allowed_packet` where the chunks
/// do not).
#[derive(Debug, Clone, Default)]
pub struct LongData {
    /// The chunks, in order.
    pub chunks: Vec<Vec<u8>>,
    /// More arrived than the proxy buffers: the execution is refused, as MySQL refuses a
    /// parameter longer than `max_allowed_packet`.
    pub overflow: bool,
}

/// A parameter a backend statement's execution sends.
#[derive(Debug, Clone, Copy)]
pub enum SentParam<'a> {
    /// A client's parameter, as it was bound.
    Bound(&'a BoundParam),
    /// An unsigned 64-bit value of the proxy's own (an order id it issued).
    UInt(u64),
}

/// A COM_STMT_EXECUTE payload (command byte included) for a backend statement: the given
/// parameters (what that backend statement's placeholders take, in order), types always
/// sent (the backend statement may be new on that connection), no cursor. `payload` is the
/// client's execute packet the bound parameters' values are ranges of.
pub fn build_execute(backend_statement: u32, payload: &[u8], params: &[SentParam<'_>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + payload.len());
    out.push(0x17);
    out.extend_from_slice(&backend_statement.to_le_bytes());
    out.push(0); // no cursor: the whole result comes back at once
    out.extend_from_slice(&1u32.to_le_bytes());
    if params.is_empty() {
        return out;
    }
    let mut bitmap = vec![0u8; params.len().div_ceil(8)];
    for (i, p) in params.iter().enumerate() {
        if matches!(p, SentParam::Bound(b) if b.null) {
            bitmap[i / 8] |= 1 << (i % 8);
        }
    }
    out.extend_from_slice(&bitmap);
    out.push(1);
    for p in params {
        let kind = match p {
            SentParam::Bound(b) => b.kind,
            SentParam::UInt(_) => (8, UNSIGNED),
        };
        out.push(kind.0);
        out.push(kind.1);
    }
    for p in params {
        match p {
            SentParam::Bound(b) if !b.null => out.extend_from_slice(&payload[b.value.clone()]),
            SentParam::Bound(_) => {}
            SentParam::UInt(v) => out.extend_from_slice(&v.to_le_bytes()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// id 7, no cursor, 3 params: LONGLONG unsigned 42, NULL, VAR_STRING "abc".
    fn packet(types: bool) -> Vec<u8> {
        let mut p = vec![7, 0, 0, 0, 0, 1, 0, 0, 0];
        p.push(0b010); // null bitmap: param 2
        p.push(u8::from(types));
        if types {
            p.extend_from_slice(&[8, 0x80, 6, 0, 253, 0]);
        }
        p.extend_from_slice(&42u64.to_le_bytes());
        p.extend_from_slice(&[3, b'a', b'b', b'c']);
        p
    }

    #[test]
    fn parameters_are_read_with_sent_or_remembered_types() {
        let p = packet(true);
        let e = parse_execute(&p, 3, None, &[false; 3]).unwrap();
        assert_eq!(e.statement_id, 7);
        assert!(e.types_sent);
        assert_eq!(param_value(&p, &e.params[0]), ParamValue::UInt(42));
        assert_eq!(param_value(&p, &e.params[1]), ParamValue::Null);
        assert_eq!(
            param_value(&p, &e.params[2]),
            ParamValue::Bytes(b"abc".to_vec())
        );
        let again = packet(false);
        let remembered = [(8, 0x80), (6, 0), (253, 0)];
        let e2 = parse_execute(&again, 3, Some(&remembered), &[false; 3]).unwrap();
        assert_eq!(
            param_value(&again, &e2.params[2]),
            ParamValue::Bytes(b"abc".to_vec())
        );
        assert!(parse_execute(&again, 3, None, &[false; 3]).is_err());
    }

    #[test]
    fn malformed_and_unknown_types_are_errors_not_panics() {
        let p = packet(true);
        for cut in 0..p.len() {
            let _ = parse_execute(&p[..cut], 3, None, &[false; 3]);
        }
        let mut bad = packet(true);
        bad[11] = 17; // TIMESTAMP2
        assert!(
            parse_execute(&bad, 3, None, &[false; 3])
                .unwrap_err()
                .contains("type code 17")
        );
    }

    #[test]
    fn a_length_prefix_near_2_pow_64_is_a_truncated_packet() {
        // Found by the client_packets fuzz target: the length overflowed (a panic in debug
        // builds, a wrong value range in release ones).
        let mut p = vec![7, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 253, 0, 0xfe];
        p.extend_from_slice(&u64::MAX.to_le_bytes());
        p.extend_from_slice(b"abcdefgh");
        let e = parse_execute(&p, 1, None, &[false]).unwrap_err();
        assert!(e.contains("too short"), "{e}");
        let mut q = vec![7, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 253, 0, 0xfe];
        q.extend_from_slice(&(u64::MAX - 8).to_le_bytes());
        assert!(parse_execute(&q, 1, None, &[false]).is_err());
    }

    #[test]
    fn long_data_packets_name_statement_parameter_and_chunk() {
        let chunk = parse_long_data(&[7, 0, 0, 0, 2, 0, b'x', b'y']).unwrap();
        assert_eq!(
            chunk,
            LongDataChunk {
                statement_id: 7,
                param: 2,
                data: b"xy"
            }
        );
        assert_eq!(parse_long_data(&[7, 0, 0, 0, 2, 0]).unwrap().data, b"");
        assert!(parse_long_data(&[7, 0, 0, 0, 2]).is_none());
    }

    #[test]
    fn the_backend_packet_carries_a_subset_with_types() {
        let p = packet(true);
        let e = parse_execute(&p, 3, None, &[false; 3]).unwrap();
        let out = build_execute(
            99,
            &p,
            &[
                SentParam::Bound(&e.params[0]),
                SentParam::Bound(&e.params[2]),
            ],
        );
        let mut want = vec![0x17, 99, 0, 0, 0, 0, 1, 0, 0, 0, 0b00, 1, 8, 0x80, 253, 0];
        want.extend_from_slice(&42u64.to_le_bytes());
        want.extend_from_slice(&[3, b'a', b'b', b'c']);
        assert_eq!(out, want);
        let issued = build_execute(
            99,
            &p,
            &[SentParam::Bound(&e.params[1]), SentParam::UInt(7)],
        );
        let mut want = vec![0x17, 99, 0, 0, 0, 0, 1, 0, 0, 0, 0b01, 1, 6, 0, 8, 0x80];
        want.extend_from_slice(&7u64.to_le_bytes());
        assert_eq!(issued, want);
    }
}
