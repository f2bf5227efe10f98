//! Row packets of a result set split into raw column values and built back, in the text
//! protocol (answers to COM_QUERY) and the binary protocol (answers to COM_STMT_EXECUTE),
//! as each column's definition packet describes them. Packets are payloads only, without
//! the 4-byte header.

use mysql_common::constants::ColumnType;
use thiserror::Error;

use super::packets::{
    ColumnSpec, put_lenenc_bytes, read_lenenc_bytes, read_lenenc_int, read_lenenc_value, text_row,
};

/// The column flag of UNSIGNED integer columns (`UNSIGNED_FLAG` in `mysql_com.h`).
pub const UNSIGNED_FLAG: u16 = 0x20;

/// How the rows of a result set are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `ProtocolText::ResultsetRow`: every value a length-encoded string, NULL as 0xFB.
    Text,
    /// `ProtocolBinary::ResultsetRow`: a 0x00 header, a NULL bitmap (offset 2), then the
    /// non-NULL values, each encoded by its column's type.
    Binary,
}

/// The fields of a column definition (`Protocol::ColumnDefinition41`) that decide how
/// its values are encoded and compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnMeta {
    /// Type code (`enum_field_types`: 0x08 LONGLONG, 0xF6 NEWDECIMAL, 0xFD VAR_STRING...).
    pub column_type: u8,
    /// Column flags ([`UNSIGNED_FLAG`], 0x80 BINARY, 0x100 ENUM, 0x800 SET...).
    pub flags: u16,
    /// Fraction digits: the scale of a DECIMAL, the fractional-second digits of a
    /// temporal type; 0x1F (31) when not fixed (DOUBLE, strings).
    pub decimals: u8,
    /// Collation id of the values (63: binary).
    pub charset: u16,
    /// Maximum display length, in bytes.
    pub length: u32,
}

impl ColumnMeta {
    /// Reads a column definition packet: lenenc strings catalog, schema, table, org_table,
    /// name, org_name; lenenc 0x0C; charset u16 LE; length u32 LE; type u8; flags u16 LE;
    /// decimals u8; 2 filler bytes, not required (charset comes before length on the wire,
    /// whatever mysql_common's serializer writes). `None` when truncated or when the fixed
    /// part is not announced as 12 bytes (MariaDB's extended type info would shift it).
    pub fn parse(def: &[u8]) -> Option<ColumnMeta> {
        let mut pos = 0;
        for _ in 0..6 {
            read_lenenc_bytes(def, &mut pos)?;
        }
        if read_lenenc_int(def, &mut pos)? != 0x0c {
            return None;
        }
        let fixed = def.get(pos..)?.get(..10)?;
        Some(ColumnMeta {
            charset: u16::from_le_bytes([fixed[0], fixed[1]]),
            length: u32::from_le_bytes([fixed[2], fixed[3], fixed[4], fixed[5]]),
            column_type: fixed[6],
            flags: u16::from_le_bytes([fixed[7], fixed[8]]),
            decimals: fixed[9],
        })
    }

    /// Whether the column is an UNSIGNED integer.
    pub fn is_unsigned(&self) -> bool {
        self.flags & UNSIGNED_FLAG != 0
    }
}

/// A row packet that does not match its column definitions.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RowError {
    /// A binary row must start with 0x00 (`None`: the packet is empty).
    #[error("binary row header is {0:?}, not 0x00")]
    Header(Option<u8>),
    /// The packet ends inside the NULL bitmap of a binary row.
    #[error("row packet ends inside the NULL bitmap")]
    Bitmap,
    /// The value of a column (0-based) is truncated or its length prefix is malformed.
    #[error("row packet value of column {column} is truncated or malformed")]
    Value {
        /// 0-based column index.
        column: usize,
    },
    /// Bytes follow the last column's value.
    #[error("row packet has {0} bytes after the last column")]
    TrailingBytes(usize),
}

/// Splits a row packet into its columns' raw values, `None` for NULL, into `out` (cleared
/// first; the values borrow from `packet`).
///
/// Text rows give each value's string. Binary rows give fixed-width values as they are
/// (TINY 1 byte, SHORT/YEAR 2, LONG/INT24/FLOAT 4, LONGLONG/DOUBLE 8, little-endian),
/// temporal values (DATE, DATETIME, TIMESTAMP, TIME) with their length byte first, and
/// every other type (DECIMAL, strings, blobs, BIT, ENUM, SET, JSON, GEOMETRY...) as the
/// string without its length prefix.
///
/// Errors when the packet is truncated, malformed, or longer than its values.
pub fn split_row<'a>(
    packet: &'a [u8],
    columns: &[ColumnMeta],
    protocol: Protocol,
    out: &mut Vec<Option<&'a [u8]>>,
) -> Result<(), RowError> {
    out.clear();
    let end = match protocol {
        Protocol::Text => {
            let mut pos = 0;
            for column in 0..columns.len() {
                let value =
                    read_lenenc_value(packet, &mut pos).ok_or(RowError::Value { column })?;
                out.push(value);
            }
            pos
        }
        Protocol::Binary => split_binary(packet, columns, out)?,
    };
    match packet.len().saturating_sub(end) {
        0 => Ok(()),
        extra => Err(RowError::TrailingBytes(extra)),
    }
}

/// Builds a row packet from raw values in the form [`split_row`] returns, one per column:
/// text values and binary lenenc-typed values get their length prefix, binary fixed-width
/// and temporal values are written as given. A value without a column definition is
/// written as a lenenc string.
pub fn build_row(values: &[Option<&[u8]>], columns: &[ColumnMeta], protocol: Protocol) -> Vec<u8> {
    let size: usize = values.iter().flatten().map(|v| v.len() + 9).sum();
    let mut buf = Vec::with_capacity(size + values.len() / 8 + 3);
    match protocol {
        Protocol::Text => return text_row(values),
        Protocol::Binary => {
            buf.push(0);
            let mut bitmap = vec![0u8; null_bitmap_len(values.len())];
            let mut body = Vec::with_capacity(size);
            for (column, value) in values.iter().enumerate() {
                let Some(bytes) = value else {
                    let bit = column + 2;
                    if let Some(byte) = bitmap.get_mut(bit / 8) {
                        *byte |= 1 << (bit % 8);
                    }
                    continue;
                };
                match columns.get(column).map(|c| binary_width(c.column_type)) {
                    Some(Width::Fixed(_) | Width::Temporal) => body.extend_from_slice(bytes),
                    Some(Width::LengthEncoded) | None => put_lenenc_bytes(&mut body, bytes),
                }
            }
            buf.extend_from_slice(&bitmap);
            buf.extend_from_slice(&body);
        }
    }
    buf
}

/// The prefix of a text row holding only its first `keep` columns (to drop trailing
/// hidden columns without rebuilding the row); `None` when the row has fewer columns or
/// is malformed before them.
pub fn truncate_text_row(packet: &[u8], keep: usize) -> Option<&[u8]> {
    let mut pos = 0;
    for _ in 0..keep {
        read_lenenc_value(packet, &mut pos)?;
    }
    packet.get(..pos)
}

/// How a binary row encodes a column's value.
enum Width {
    /// That many bytes.
    Fixed(usize),
    /// A length byte, then that many bytes.
    Temporal,
    /// A length-encoded string.
    LengthEncoded,
}

fn binary_width(column_type: u8) -> Width {
    use ColumnType::*;
    match ColumnType::try_from(column_type) {
        Ok(MYSQL_TYPE_NULL) => Width::Fixed(0),
        Ok(MYSQL_TYPE_TINY) => Width::Fixed(1),
        Ok(MYSQL_TYPE_SHORT | MYSQL_TYPE_YEAR) => Width::Fixed(2),
        Ok(MYSQL_TYPE_LONG | MYSQL_TYPE_INT24 | MYSQL_TYPE_FLOAT) => Width::Fixed(4),
        Ok(MYSQL_TYPE_LONGLONG | MYSQL_TYPE_DOUBLE) => Width::Fixed(8),
        Ok(
            MYSQL_TYPE_DATE
            | MYSQL_TYPE_NEWDATE
            | MYSQL_TYPE_DATETIME
            | MYSQL_TYPE_DATETIME2
            | MYSQL_TYPE_TIMESTAMP
            | MYSQL_TYPE_TIMESTAMP2
            | MYSQL_TYPE_TIME
            | MYSQL_TYPE_TIME2,
        ) => Width::Temporal,
        _ => Width::LengthEncoded,
    }
}

/// Bytes of a binary row's NULL bitmap: one bit per column, starting at bit 2.
fn null_bitmap_len(columns: usize) -> usize {
    (columns + 7 + 2) / 8
}

fn split_binary<'a>(
    packet: &'a [u8],
    columns: &[ColumnMeta],
    out: &mut Vec<Option<&'a [u8]>>,
) -> Result<usize, RowError> {
    match packet.first() {
        Some(0) => {}
        other => return Err(RowError::Header(other.copied())),
    }
    let bitmap_len = null_bitmap_len(columns.len());
    let bitmap = packet
        .get(1..)
        .and_then(|p| p.get(..bitmap_len))
        .ok_or(RowError::Bitmap)?;
    let mut pos = 1 + bitmap_len;
    for (column, meta) in columns.iter().enumerate() {
        let bit = column + 2;
        if bitmap
            .get(bit / 8)
            .is_some_and(|b| b & (1 << (bit % 8)) != 0)
        {
            out.push(None);
            continue;
        }
        let len = match binary_width(meta.column_type) {
            Width::Fixed(n) => Some(n),
            Width::Temporal => packet.get(pos).map(|&n| 1 + usize::from(n)),
            Width::LengthEncoded => None,
        };
        let value = match len {
            Some(n) => packet
                .get(pos..)
                .and_then(|rest| rest.get(..n))
                .inspect(|_| pos += n),
            None => read_lenenc_bytes(packet, &mut pos),
        };
        out.push(Some(value.ok_or(RowError::Value { column })?));
    }
    Ok(pos)
}

impl From<&ColumnSpec<'_>> for ColumnMeta {
    /// The fields of a column the proxy describes itself that decide how its values are
    /// encoded.
    fn from(spec: &ColumnSpec<'_>) -> Self {
        ColumnMeta {
            column_type: spec.column_type as u8,
            flags: spec.flags.bits(),
            decimals: spec.decimals,
            charset: spec.charset,
            length: spec.length,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ColumnType::*;

    fn meta(t: ColumnType) -> ColumnMeta {
        ColumnMeta {
            column_type: t as u8,
            flags: 0,
            decimals: 0,
            charset: 63,
            length: 0,
        }
    }

    fn split(packet: &[u8], columns: &[ColumnMeta], protocol: Protocol) -> Result<(), RowError> {
        split_row(packet, columns, protocol, &mut Vec::new())
    }

    /// Builds, splits and compares, in both protocols; the binary packet.
    fn round_trip(values: &[Option<&[u8]>], columns: &[ColumnMeta]) -> Vec<u8> {
        let mut out = Vec::new();
        let text = build_row(values, columns, Protocol::Text);
        split_row(&text, columns, Protocol::Text, &mut out).unwrap();
        assert_eq!(out, values);
        let binary = build_row(values, columns, Protocol::Binary);
        split_row(&binary, columns, Protocol::Binary, &mut out).unwrap();
        assert_eq!(out, values);
        binary
    }

    #[test]
    fn parses_column_definition() {
        let mut def = Vec::new();
        for s in ["def", "shop", "o", "orders_3", "total", "total"] {
            put_lenenc_bytes(&mut def, s.as_bytes());
        }
        def.extend_from_slice(&[0x0c, 45, 0, 12, 0, 0, 0, 0xf6, 0x21, 0x10, 2, 0, 0]);
        let expected = ColumnMeta {
            column_type: 0xf6,
            flags: 0x1021,
            decimals: 2,
            charset: 45,
            length: 12,
        };
        assert_eq!(ColumnMeta::parse(&def), Some(expected));
        assert!(expected.is_unsigned());
        for end in 0..def.len() - 2 {
            assert_eq!(ColumnMeta::parse(&def[..end]), None, "{end}");
        }
        let at = def.len() - 13;
        def[at] = 0x0d;
        assert_eq!(ColumnMeta::parse(&def), None);
    }

    #[test]
    fn round_trips_every_type_family() {
        let (long, huge) = (vec![b'x'; 300], vec![b'y'; 70_000]);
        let cases: [(ColumnType, &[u8]); 20] = [
            (MYSQL_TYPE_TINY, &[0xff]),
            (MYSQL_TYPE_SHORT, &[1, 2]),
            (MYSQL_TYPE_YEAR, &[0xe8, 0x07]),
            (MYSQL_TYPE_LONG, &[1, 2, 3, 4]),
            (MYSQL_TYPE_INT24, &[1, 2, 3, 0]),
            (MYSQL_TYPE_FLOAT, &[0, 0, 0xc0, 0x3f]),
            (MYSQL_TYPE_LONGLONG, &[1, 2, 3, 4, 5, 6, 7, 8]),
            (MYSQL_TYPE_DOUBLE, &[0, 0, 0, 0, 0, 0, 0xf8, 0x3f]),
            (MYSQL_TYPE_DATE, &[4, 0xe8, 0x07, 2, 29]),
            (MYSQL_TYPE_DATETIME, &[0]),
            (MYSQL_TYPE_DATETIME, &[7, 0xe8, 0x07, 2, 29, 23, 59, 58]),
            (
                MYSQL_TYPE_TIMESTAMP,
                &[11, 0xe8, 0x07, 2, 29, 23, 59, 58, 1, 0, 0, 0],
            ),
            (MYSQL_TYPE_TIME, &[8, 1, 34, 0, 0, 0, 22, 59, 59]),
            (
                MYSQL_TYPE_TIME,
                &[12, 0, 1, 0, 0, 0, 1, 2, 3, 0x40, 0x42, 0x0f, 0],
            ),
            (MYSQL_TYPE_NEWDECIMAL, b"-0.50"),
            (MYSQL_TYPE_VAR_STRING, b""),
            (MYSQL_TYPE_STRING, &long),
            (MYSQL_TYPE_BLOB, &huge),
            (MYSQL_TYPE_BIT, &[0x01, 0x80]),
            (MYSQL_TYPE_GEOMETRY, &[0, 0, 0, 0, 1]),
        ];
        for (t, v) in cases {
            round_trip(&[Some(v)], &[meta(t)]);
        }
        let columns: Vec<ColumnMeta> = cases.iter().map(|(t, _)| meta(*t)).collect();
        let values: Vec<Option<&[u8]>> = cases.iter().map(|(_, v)| Some(*v)).collect();
        let binary = round_trip(&values, &columns);
        assert_eq!(&binary[..6], &[0, 0, 0, 0, 0xff, 1]);
        let prefixed = build_row(&[Some(&long)], &[meta(MYSQL_TYPE_STRING)], Protocol::Binary);
        assert_eq!(&prefixed[..5], &[0, 0, 0xfc, 0x2c, 0x01]);
        let text = build_row(&[Some(b"12"), None, Some(b"")], &[], Protocol::Text);
        assert_eq!(text, [2, b'1', b'2', 0xfb, 0]);
    }

    #[test]
    fn null_bitmaps() {
        let column = meta(MYSQL_TYPE_LONG);
        for count in [1usize, 7, 8, 9, 17] {
            let values: Vec<Option<&[u8]>> = (0..count)
                .map(|i| (i % 3 != 1 && i + 1 != count).then_some(&[7, 0, 0, 0][..]))
                .collect();
            let packet = round_trip(&values, &vec![column; count]);
            let non_null = values.iter().flatten().count();
            assert_eq!(packet.len(), 1 + (count + 9) / 8 + 4 * non_null, "{count}");
            let last_bit = count + 1;
            assert_ne!(
                packet[1 + last_bit / 8] & (1 << (last_bit % 8)),
                0,
                "{count}"
            );
        }
        let all_null = build_row(&[None; 17], &[column; 17], Protocol::Binary);
        assert_eq!(all_null, [0, 0xfc, 0xff, 0x07]);
    }

    #[test]
    fn malformed_packets_are_errors() {
        let columns = [
            meta(MYSQL_TYPE_LONG),
            meta(MYSQL_TYPE_VAR_STRING),
            meta(MYSQL_TYPE_DATE),
        ];
        let values: [Option<&[u8]>; 3] =
            [Some(&[1, 2, 3, 4]), Some(b"abc"), Some(&[4, 1, 0, 1, 1])];
        for protocol in [Protocol::Text, Protocol::Binary] {
            let mut packet = build_row(&values, &columns, protocol);
            for end in 0..packet.len() {
                assert!(
                    split(&packet[..end], &columns, protocol).is_err(),
                    "{protocol:?} {end}"
                );
            }
            packet.push(0);
            assert_eq!(
                split(&packet, &columns, protocol),
                Err(RowError::TrailingBytes(1))
            );
        }
        let binary = |p: &[u8], t| split(p, &[meta(t)], Protocol::Binary);
        assert_eq!(binary(&[], MYSQL_TYPE_LONG), Err(RowError::Header(None)));
        assert_eq!(
            binary(&[0xfe, 0], MYSQL_TYPE_LONG),
            Err(RowError::Header(Some(0xfe)))
        );
        assert_eq!(binary(&[0], MYSQL_TYPE_LONG), Err(RowError::Bitmap));
        let huge_len = [0, 0, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
        let bad_value = Err(RowError::Value { column: 0 });
        assert_eq!(binary(&huge_len, MYSQL_TYPE_BLOB), bad_value);
        assert_eq!(binary(&[0, 0, 5, 1, 2], MYSQL_TYPE_DATE), bad_value);
        let text = |p: &[u8]| split(p, &[meta(MYSQL_TYPE_BLOB)], Protocol::Text);
        assert_eq!(text(&[0xff]), bad_value);
        assert_eq!(text(&huge_len[2..]), bad_value);
    }

    #[test]
    fn truncates_text_rows() {
        let packet = build_row(&[Some(b"1"), None, Some(b"hidden")], &[], Protocol::Text);
        assert_eq!(truncate_text_row(&packet, 0), Some(&[][..]));
        assert_eq!(truncate_text_row(&packet, 2), Some(&[1, b'1', 0xfb][..]));
        assert_eq!(truncate_text_row(&packet, 3), Some(&packet[..]));
        assert_eq!(truncate_text_row(&packet, 4), None);
        assert_eq!(truncate_text_row(&packet[..4], 3), None);
    }
}
