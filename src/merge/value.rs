//! Column values decoded from raw row values (as [`split_row`](crate::protocol::row::split_row)
//! returns them) to compare and re-aggregate, encoded back for values the proxy computes,
//! and the comparison of collation weight strings (`WEIGHT_STRING()`) the shards compute.

use std::cmp::Ordering;

use mysql_common::constants::ColumnType;
use thiserror::Error;

use super::decimal::Decimal;
use crate::protocol::row::{ColumnMeta, Protocol};

/// A decoded column value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// TINYINT to BIGINT (signed or UNSIGNED), MEDIUMINT, YEAR.
    Int(i128),
    /// DECIMAL.
    Decimal(Decimal),
    /// FLOAT (widened) or DOUBLE; never NaN or infinite.
    Double(f64),
    /// DATE, DATETIME, TIMESTAMP, TIME.
    Temporal(Temporal),
    /// Any other type, as its raw bytes: strings, blobs, BIT, ENUM, SET, JSON, GEOMETRY.
    Bytes(Vec<u8>),
}

/// A temporal value, ordered chronologically within each variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Temporal {
    /// DATE, DATETIME or TIMESTAMP; a DATE has zero time fields. The zero date
    /// `0000-00-00` is all zeros and sorts first, as in MariaDB.
    DateTime {
        /// 0 to 9999.
        year: u16,
        /// 1 to 12 (0 in zero dates).
        month: u8,
        /// 1 to 31 (0 in zero dates).
        day: u8,
        /// 0 to 23.
        hour: u8,
        /// 0 to 59.
        minute: u8,
        /// 0 to 59.
        second: u8,
        /// 0 to 999999.
        microsecond: u32,
    },
    /// TIME as signed microseconds since 00:00:00: `-838:59:59` is `-3_020_399_000_000`.
    Time {
        /// Microseconds, negative for negative times.
        microseconds: i64,
    },
}

/// A raw value that does not fit its column type (each variant carries the type code).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ValueError {
    /// The raw bytes are not a value of the column type.
    #[error("malformed value for column type {0:#04x}")]
    Malformed(u8),
    /// The value is outside the column type's range.
    #[error("value out of range for column type {0:#04x}")]
    OutOfRange(u8),
    /// This value cannot be encoded for the column type (see [`encode`]).
    #[error("cannot encode this value for column type {0:#04x}")]
    Unsupported(u8),
}

/// Decodes a non-NULL raw value of a column (the form `split_row` returns).
///
/// Integers: text digits, or binary little-endian of the type's width, signed unless the
/// column is UNSIGNED (YEAR always unsigned). DECIMAL: its text in both protocols (up to
/// 38 digits). FLOAT/DOUBLE: text parsed (FLOAT as `f32`, like the binary form), or
/// binary `f32`/`f64`. DATE/DATETIME/TIMESTAMP: text `YYYY-MM-DD[ HH:MM:SS[.ffffff]]` or
/// binary of length 0, 4, 7 or 11. TIME: text `[-]HHH:MM:SS[.ffffff]` or binary of length
/// 0, 8 or 12. Anything else is copied as [`Value::Bytes`].
///
/// Errors with [`ValueError::Malformed`] when the bytes do not fit the type.
pub fn decode(raw: &[u8], meta: &ColumnMeta, protocol: Protocol) -> Result<Value, ValueError> {
    let finite = |f: Option<f64>| f.filter(|f| f.is_finite()).map(Value::Double);
    let value = match (Family::of(meta.column_type), protocol) {
        (Family::Int { .. }, Protocol::Text) => text_int(raw).map(Value::Int),
        (Family::Int { bytes, .. }, Protocol::Binary) => {
            binary_int(raw, bytes, is_unsigned(meta)).map(Value::Int)
        }
        (Family::Decimal, _) => Decimal::parse(raw).map(Value::Decimal),
        (Family::Float, Protocol::Text) => finite(text_number::<f32>(raw).map(f64::from)),
        (Family::Float, Protocol::Binary) => finite(
            raw.try_into()
                .ok()
                .map(|b| f64::from(f32::from_le_bytes(b))),
        ),
        (Family::Double, Protocol::Text) => finite(text_number::<f64>(raw)),
        (Family::Double, Protocol::Binary) => finite(raw.try_into().ok().map(f64::from_le_bytes)),
        (Family::DateTime, Protocol::Text) => text_datetime(raw).map(Value::Temporal),
        (Family::DateTime, Protocol::Binary) => binary_datetime(raw).map(Value::Temporal),
        (Family::Time, Protocol::Text) => text_time(raw).map(Value::Temporal),
        (Family::Time, Protocol::Binary) => binary_time(raw).map(Value::Temporal),
        (Family::Other, _) => Some(Value::Bytes(raw.to_vec())),
    };
    value.ok_or(ValueError::Malformed(meta.column_type))
}

/// Encodes a value the proxy computed as the raw value of a column (what `split_row`
/// would return for it).
///
/// Int into TINY, SHORT, INT24, LONG, LONGLONG, YEAR: text digits, or binary little-endian
/// of the type's width; [`ValueError::OutOfRange`] outside the type's range (signed, or
/// UNSIGNED by the column's flag). Int or Decimal into DECIMAL/NEWDECIMAL: the text with
/// exactly `meta.decimals` fraction digits, rounded half away from zero, in both
/// protocols. Int, Decimal or Double into binary FLOAT/DOUBLE: `f32`/`f64` little-endian;
/// into text DOUBLE (decimals not fixed) its shortest digits between 1e-10 and 1e15.
/// Temporals into DATE/DATETIME/TIMESTAMP/TIME as the server writes them. Everything else
/// (text FLOAT, fixed-decimals or huge or tiny text DOUBLE, whose printed form MariaDB
/// chooses; NULL, which a row writes as `None`) is [`ValueError::Unsupported`].
pub fn encode(value: &Value, meta: &ColumnMeta, protocol: Protocol) -> Result<Vec<u8>, ValueError> {
    let column_type = meta.column_type;
    let (out_of_range, unsupported) = (
        ValueError::OutOfRange(column_type),
        ValueError::Unsupported(column_type),
    );
    let decimal = |d: Decimal| {
        d.rescale_round(meta.decimals)
            .map(|d| d.to_text().into_bytes())
    };
    match (Family::of(column_type), value, protocol) {
        (Family::Int { bits, bytes }, Value::Int(v), _) => {
            encode_int(*v, bits, bytes, is_unsigned(meta), protocol).ok_or(out_of_range)
        }
        (Family::Decimal, Value::Int(v), _) => decimal(Decimal::from_i128(*v)).ok_or(out_of_range),
        (Family::Decimal, Value::Decimal(d), _) => decimal(*d).ok_or(out_of_range),
        (Family::Float, _, Protocol::Binary) => as_f64(value)
            .map(|f| (f as f32).to_le_bytes().to_vec())
            .ok_or(unsupported),
        (Family::Double, _, Protocol::Binary) => as_f64(value)
            .map(|f| f.to_le_bytes().to_vec())
            .ok_or(unsupported),
        // A string column holding a number (`IFNULL(MAX(note), 0)`): its text, as the
        // server converts it.
        (Family::Other, Value::Int(v), _) => Ok(v.to_string().into_bytes()),
        (Family::Other, Value::Decimal(d), _) => Ok(d.to_text().into_bytes()),
        (Family::Other, Value::Bytes(b), _) => Ok(b.clone()),
        (Family::Double, _, Protocol::Text) if meta.decimals >= 31 => {
            as_f64(value).and_then(text_double).ok_or(unsupported)
        }
        (Family::DateTime, Value::Temporal(t @ Temporal::DateTime { .. }), _)
        | (Family::Time, Value::Temporal(t @ Temporal::Time { .. }), _) => {
            Ok(encode_temporal(*t, meta, protocol))
        }
        _ => Err(unsupported),
    }
}

/// A DOUBLE as MariaDB's text protocol prints it when its decimals are not fixed: the
/// shortest digits that read back as the same double, without an exponent. MariaDB
/// switches to an exponent at 1e15 and for tiny numbers, so only 0 and magnitudes from
/// 1e-10 to below 1e15 are written (both print alike there); others are `None`.
fn text_double(v: f64) -> Option<Vec<u8>> {
    if v == 0.0 {
        return Some(b"0".to_vec());
    }
    (1e-10..1e15)
        .contains(&v.abs())
        .then(|| v.to_string().into_bytes())
}

/// A DATE, DATETIME, TIMESTAMP or TIME value as the server writes it: text with the
/// column's fractional digits (`meta.decimals`, 0 to 6), or the binary protocol's
/// length-prefixed fields, shortest form (as the server sends them).
fn encode_temporal(value: Temporal, meta: &ColumnMeta, protocol: Protocol) -> Vec<u8> {
    let decimals = usize::from(meta.decimals);
    let fraction = |microsecond: u32| match decimals {
        1..=6 => format!(".{microsecond:06}")[..=decimals].to_owned(),
        _ => String::new(),
    };
    match value {
        Temporal::DateTime {
            year,
            month,
            day,
            hour,
            minute,
            second,
            microsecond,
        } => match protocol {
            Protocol::Text
                if ColumnType::try_from(meta.column_type).is_ok_and(|t| {
                    matches!(
                        t,
                        ColumnType::MYSQL_TYPE_DATE | ColumnType::MYSQL_TYPE_NEWDATE
                    )
                }) =>
            {
                format!("{year:04}-{month:02}-{day:02}").into_bytes()
            }
            Protocol::Text => format!(
                "{year:04}-{month:02}-{day:02} {hour:02}:{minute:02}:{second:02}{}",
                fraction(microsecond)
            )
            .into_bytes(),
            Protocol::Binary => {
                let mut body = year.to_le_bytes().to_vec();
                body.extend_from_slice(&[month, day, hour, minute, second]);
                body.extend_from_slice(&microsecond.to_le_bytes());
                let len = if microsecond != 0 {
                    11
                } else if hour != 0 || minute != 0 || second != 0 {
                    7
                } else if year != 0 || month != 0 || day != 0 {
                    4
                } else {
                    0
                };
                length_prefixed(&body[..len])
            }
        },
        Temporal::Time { microseconds } => {
            let negative = microseconds < 0;
            let total = microseconds.unsigned_abs();
            let micro = (total % 1_000_000) as u32;
            let seconds = total / 1_000_000;
            let (hours, minute, second) = (
                seconds / 3600,
                (seconds / 60 % 60) as u8,
                (seconds % 60) as u8,
            );
            match protocol {
                Protocol::Text => format!(
                    "{}{hours:02}:{minute:02}:{second:02}{}",
                    if negative { "-" } else { "" },
                    fraction(micro)
                )
                .into_bytes(),
                Protocol::Binary => {
                    // TIME spans at most 838 hours: the days fit.
                    let mut body = vec![u8::from(negative)];
                    body.extend_from_slice(&((hours / 24) as u32).to_le_bytes());
                    body.extend_from_slice(&[(hours % 24) as u8, minute, second]);
                    body.extend_from_slice(&micro.to_le_bytes());
                    let len = match (micro, total) {
                        (1.., _) => 12,
                        (0, 1..) => 8,
                        _ => 0,
                    };
                    length_prefixed(&body[..len])
                }
            }
        }
    }
}

/// `body` after its one-byte length (binary temporals).
fn length_prefixed(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 1);
    out.push(body.len() as u8);
    out.extend_from_slice(body);
    out
}

/// Orders two values of one column as MariaDB's ORDER BY does: NULL first (a plain
/// reverse gives DESC, NULL last), numbers by value (Int and Decimal exactly, against a
/// Double as doubles, `-0.0 == 0.0`), temporals chronologically, bytes by memcmp. Values
/// of different kinds order NULL, numbers, temporals, bytes.
pub fn compare(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => x.cmp(y),
        (Value::Decimal(x), Value::Decimal(y)) => x.cmp(y),
        (Value::Int(x), Value::Decimal(y)) => Decimal::from_i128(*x).cmp(y),
        (Value::Decimal(x), Value::Int(y)) => x.cmp(&Decimal::from_i128(*y)),
        (Value::Temporal(x), Value::Temporal(y)) => x.cmp(y),
        (Value::Bytes(x), Value::Bytes(y)) => x.cmp(y),
        _ => match (as_f64(a), as_f64(b)) {
            (Some(x), Some(y)) if x == y => Ordering::Equal,
            (Some(x), Some(y)) => x.total_cmp(&y),
            _ => rank(a).cmp(&rank(b)),
        },
    }
}

/// Compares two weight strings (`WEIGHT_STRING(col)` from the shards) in a collation's
/// order. With `pad` (the collation's weight of a space, for PAD SPACE collations:
/// `0020` for utf8mb4_general_ci, `0209` for utf8mb4_unicode_ci, `000020` for
/// utf8mb4_bin) the shorter string compares as if extended by repeated `pad` units, since
/// MariaDB's WEIGHT_STRING keeps trailing spaces (`'a\t' < 'a'`: tab weighs below the pad).
/// With `None` (NO PAD collations, binary strings) it is memcmp, so `'a' < 'a '`.
pub fn compare_weights(a: &[u8], b: &[u8], pad: Option<&[u8]>) -> Ordering {
    let common = a.len().min(b.len());
    let prefix = a[..common].cmp(&b[..common]);
    match pad {
        Some(unit) if !unit.is_empty() && prefix == Ordering::Equal && a.len() != b.len() => {
            if a.len() > b.len() {
                compare_to_pad(&a[common..], unit)
            } else {
                compare_to_pad(&b[common..], unit).reverse()
            }
        }
        _ => prefix.then(a.len().cmp(&b.len())),
    }
}

/// The weight string without trailing whole `pad` units, so that two strings are equal
/// by [`compare_weights`] with that `pad` exactly when their canonical weights are equal
/// (to group or DISTINCT by hash). Without `pad` the weight is returned whole.
pub fn canonical_weight<'a>(weight: &'a [u8], pad: Option<&[u8]>) -> &'a [u8] {
    let mut weight = weight;
    if let Some(unit) = pad.filter(|u| !u.is_empty()) {
        while let Some(rest) = weight.strip_suffix(unit) {
            weight = rest;
        }
    }
    weight
}

/// The remainder of the longer weight string against repeated pad units; a remainder that
/// matches but ends inside a unit is greater (it is longer).
fn compare_to_pad(rest: &[u8], unit: &[u8]) -> Ordering {
    let cyclic = rest.iter().cmp(unit.iter().cycle().take(rest.len()));
    match cyclic {
        Ordering::Equal if rest.len() % unit.len() != 0 => Ordering::Greater,
        other => other,
    }
}

fn as_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::Decimal(d) => Some(d.to_f64()),
        Value::Double(f) => Some(*f),
        _ => None,
    }
}

fn rank(v: &Value) -> u8 {
    match v {
        Value::Null => 0,
        Value::Int(_) | Value::Decimal(_) | Value::Double(_) => 1,
        Value::Temporal(_) => 2,
        Value::Bytes(_) => 3,
    }
}

/// How values of a column type are decoded and encoded.
enum Family {
    /// An integer of `bits` value bits, `bytes` bytes in binary rows (INT24 takes 4).
    Int {
        bits: u32,
        bytes: usize,
    },
    Decimal,
    Float,
    Double,
    /// DATE, DATETIME, TIMESTAMP.
    DateTime,
    Time,
    Other,
}

impl Family {
    fn of(column_type: u8) -> Family {
        use ColumnType::*;
        match ColumnType::try_from(column_type) {
            Ok(MYSQL_TYPE_TINY) => Family::Int { bits: 8, bytes: 1 },
            Ok(MYSQL_TYPE_SHORT | MYSQL_TYPE_YEAR) => Family::Int { bits: 16, bytes: 2 },
            Ok(MYSQL_TYPE_INT24) => Family::Int { bits: 24, bytes: 4 },
            Ok(MYSQL_TYPE_LONG) => Family::Int { bits: 32, bytes: 4 },
            Ok(MYSQL_TYPE_LONGLONG) => Family::Int { bits: 64, bytes: 8 },
            Ok(MYSQL_TYPE_DECIMAL | MYSQL_TYPE_NEWDECIMAL) => Family::Decimal,
            Ok(MYSQL_TYPE_FLOAT) => Family::Float,
            Ok(MYSQL_TYPE_DOUBLE) => Family::Double,
            Ok(
                MYSQL_TYPE_DATE
                | MYSQL_TYPE_NEWDATE
                | MYSQL_TYPE_DATETIME
                | MYSQL_TYPE_DATETIME2
                | MYSQL_TYPE_TIMESTAMP
                | MYSQL_TYPE_TIMESTAMP2,
            ) => Family::DateTime,
            Ok(MYSQL_TYPE_TIME | MYSQL_TYPE_TIME2) => Family::Time,
            _ => Family::Other,
        }
    }
}

/// UNSIGNED by the column's flag; YEAR (0 or 1901 to 2155) always.
fn is_unsigned(meta: &ColumnMeta) -> bool {
    meta.is_unsigned() || meta.column_type == ColumnType::MYSQL_TYPE_YEAR as u8
}

fn binary_int(raw: &[u8], bytes: usize, unsigned: bool) -> Option<i128> {
    if raw.len() != bytes {
        return None;
    }
    let negative = !unsigned && raw.last().is_some_and(|b| b & 0x80 != 0);
    let mut le = [if negative { 0xff } else { 0 }; 16];
    le[..bytes].copy_from_slice(raw);
    Some(i128::from_le_bytes(le))
}

/// Text digits, or binary little-endian of `bytes`; `None` outside a `bits`-bit range.
fn encode_int(
    v: i128,
    bits: u32,
    bytes: usize,
    unsigned: bool,
    protocol: Protocol,
) -> Option<Vec<u8>> {
    let (min, max) = if unsigned {
        (0, (1i128 << bits) - 1)
    } else {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    };
    (min..=max).contains(&v).then(|| match protocol {
        Protocol::Text => v.to_string().into_bytes(),
        Protocol::Binary => v.to_le_bytes()[..bytes].to_vec(),
    })
}

fn text_int(raw: &[u8]) -> Option<i128> {
    let (negative, digits) = match raw.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, raw),
    };
    if digits.is_empty() || digits.len() > 38 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let magnitude = digits
        .iter()
        .fold(0i128, |n, &b| n * 10 + i128::from(b - b'0'));
    Some(if negative { -magnitude } else { magnitude })
}

fn text_number<T: std::str::FromStr>(raw: &[u8]) -> Option<T> {
    std::str::from_utf8(raw).ok()?.parse().ok()
}

/// `len` and then year u16, month, day, hour, minute, second, microsecond u32 (LE), the
/// fields a shorter length leaves out being zero.
fn binary_datetime(raw: &[u8]) -> Option<Temporal> {
    let (&len, body) = raw.split_first()?;
    if body.len() != usize::from(len) || ![0, 4, 7, 11].contains(&len) {
        return None;
    }
    let mut f = [0u8; 11];
    f[..body.len()].copy_from_slice(body);
    let microsecond = u32::from_le_bytes([f[7], f[8], f[9], f[10]]);
    (microsecond < 1_000_000).then_some(Temporal::DateTime {
        year: u16::from_le_bytes([f[0], f[1]]),
        month: f[2],
        day: f[3],
        hour: f[4],
        minute: f[5],
        second: f[6],
        microsecond,
    })
}

/// `len` and then is_negative, days u32, hour, minute, second, microsecond u32 (LE).
fn binary_time(raw: &[u8]) -> Option<Temporal> {
    let (&len, body) = raw.split_first()?;
    if body.len() != usize::from(len) || ![0, 8, 12].contains(&len) {
        return None;
    }
    let mut f = [0u8; 12];
    f[..body.len()].copy_from_slice(body);
    let days = u32::from_le_bytes([f[1], f[2], f[3], f[4]]);
    let hours = u64::from(days) * 24 + u64::from(f[5]);
    let microsecond = u32::from_le_bytes([f[8], f[9], f[10], f[11]]);
    time_microseconds(f[0] != 0, hours, f[6], f[7], microsecond)
}

fn text_datetime(raw: &[u8]) -> Option<Temporal> {
    let date = raw.get(..10)?;
    if date[4] != b'-' || date[7] != b'-' {
        return None;
    }
    let (hour, minute, second, microsecond) = match &raw[10..] {
        [] => (0, 0, 0, 0),
        [b' ', clock @ ..] if clock.get(2) == Some(&b':') => text_clock(clock)?,
        _ => return None,
    };
    Some(Temporal::DateTime {
        year: u16::try_from(digits(&date[..4])?).ok()?,
        month: u8::try_from(digits(&date[5..7])?).ok()?,
        day: u8::try_from(digits(&date[8..10])?).ok()?,
        hour: u8::try_from(hour).ok()?,
        minute,
        second,
        microsecond,
    })
}

fn text_time(raw: &[u8]) -> Option<Temporal> {
    let (negative, clock) = match raw.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, raw),
    };
    let (hours, minute, second, microsecond) = text_clock(clock)?;
    time_microseconds(negative, u64::from(hours), minute, second, microsecond)
}

/// Reads `H+:MM:SS[.f{1,6}]` (hours up to 4 digits) as hours, minute, second, microsecond.
fn text_clock(raw: &[u8]) -> Option<(u32, u8, u8, u32)> {
    let colon = raw.iter().position(|&b| b == b':')?;
    let (hours, rest) = raw.split_at(colon);
    let [b':', m1, m2, b':', s1, s2, fraction @ ..] = rest else {
        return None;
    };
    let microsecond = match fraction {
        [] => 0,
        [b'.', f @ ..] if (1..=6).contains(&f.len()) => digits(f)? * 10u32.pow(6 - f.len() as u32),
        _ => return None,
    };
    let minute = u8::try_from(digits(&[*m1, *m2])?).ok()?;
    let second = u8::try_from(digits(&[*s1, *s2])?).ok()?;
    if hours.len() > 4 || minute > 59 || second > 59 {
        return None;
    }
    Some((digits(hours)?, minute, second, microsecond))
}

/// A decimal number of 1 to 9 ASCII digits.
fn digits(text: &[u8]) -> Option<u32> {
    if text.is_empty() || text.len() > 9 || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(text.iter().fold(0, |n, &b| n * 10 + u32::from(b - b'0')))
}

fn time_microseconds(
    negative: bool,
    hours: u64,
    minute: u8,
    second: u8,
    microsecond: u32,
) -> Option<Temporal> {
    if minute > 59 || second > 59 || microsecond >= 1_000_000 {
        return None;
    }
    let seconds = hours.checked_mul(3600)? + u64::from(minute) * 60 + u64::from(second);
    let total = seconds
        .checked_mul(1_000_000)?
        .checked_add(u64::from(microsecond))?;
    let total = i64::try_from(total).ok()?;
    let microseconds = if negative { -total } else { total };
    Some(Temporal::Time { microseconds })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ColumnType::{
        MYSQL_TYPE_BIT as BIT, MYSQL_TYPE_BLOB as BLOB, MYSQL_TYPE_DATE as DATE,
        MYSQL_TYPE_DATETIME as DATETIME, MYSQL_TYPE_DOUBLE as DOUBLE, MYSQL_TYPE_FLOAT as FLOAT,
        MYSQL_TYPE_INT24 as INT24, MYSQL_TYPE_JSON as JSON, MYSQL_TYPE_LONG as LONG,
        MYSQL_TYPE_LONGLONG as LONGLONG, MYSQL_TYPE_NEWDECIMAL as NEWDECIMAL,
        MYSQL_TYPE_SHORT as SHORT, MYSQL_TYPE_TIME as TIME, MYSQL_TYPE_TIMESTAMP as TIMESTAMP,
        MYSQL_TYPE_TINY as TINY, MYSQL_TYPE_YEAR as YEAR,
    };
    use Ordering::{Equal, Greater, Less};
    use Protocol::{Binary, Text};

    const UNSIGNED: u16 = 0x20;

    fn meta(t: ColumnType, flags: u16, decimals: u8) -> ColumnMeta {
        let column_type = t as u8;
        ColumnMeta {
            column_type,
            flags,
            decimals,
            charset: 63,
            length: 0,
        }
    }

    fn text(raw: &str, t: ColumnType) -> Option<Value> {
        decode(raw.as_bytes(), &meta(t, 0, 0), Text).ok()
    }

    fn bin(raw: &[u8], t: ColumnType, flags: u16) -> Option<Value> {
        decode(raw, &meta(t, flags, 0), Binary).ok()
    }

    fn int(v: i128) -> Option<Value> {
        Some(Value::Int(v))
    }

    fn double(f: f64) -> Option<Value> {
        Some(Value::Double(f))
    }

    fn dec(text: &str) -> Value {
        Value::Decimal(Decimal::parse(text.as_bytes()).unwrap())
    }

    fn time(microseconds: i64) -> Value {
        Value::Temporal(Temporal::Time { microseconds })
    }

    fn enc(value: Value, t: ColumnType, flags: u16, protocol: Protocol) -> Option<Vec<u8>> {
        encode(&value, &meta(t, flags, 2), protocol).ok()
    }

    #[test]
    fn decodes_integers() {
        assert_eq!(text("-128", TINY), int(-128));
        assert_eq!(text("18446744073709551615", LONGLONG), int(u64::MAX.into()));
        assert_eq!(bin(&[0xff], TINY, 0), int(-1));
        assert_eq!(bin(&[0xff], TINY, UNSIGNED), int(255));
        assert_eq!(bin(&[0xfe, 0xff], SHORT, 0), int(-2));
        assert_eq!(bin(&[0xe8, 0x07], YEAR, 0), int(2024));
        assert_eq!(bin(&[0, 0, 0x80, 0xff], INT24, 0), int(-8_388_608));
        assert_eq!(bin(&[0xff; 4], LONG, UNSIGNED), int(u32::MAX.into()));
        assert_eq!(bin(&[0xff; 8], LONGLONG, UNSIGNED), int(u64::MAX.into()));
        assert_eq!(bin(&[0xff; 8], LONGLONG, 0), int(-1));
        let malformed = decode(&[1, 2, 3], &meta(LONG, 0, 0), Binary);
        assert_eq!(malformed, Err(ValueError::Malformed(3)));
        for bad in ["", "-", "1.5", "+1", " 1", "1e3"] {
            assert_eq!(text(bad, LONG), None, "{bad:?}");
        }
    }

    #[test]
    fn decodes_decimals_and_doubles() {
        assert_eq!(text("-0.50", NEWDECIMAL), Some(dec("-0.5")));
        assert_eq!(bin(b"-0.50", NEWDECIMAL, 0), Some(dec("-0.50")));
        assert_eq!(text("1e5", NEWDECIMAL), None);
        assert_eq!(text("-1.5e3", DOUBLE), double(-1500.0));
        assert_eq!(bin(&2.5f64.to_le_bytes(), DOUBLE, 0), double(2.5));
        assert_eq!(text("0.1", FLOAT), double(f64::from(0.1f32)));
        assert_eq!(
            bin(&0.1f32.to_le_bytes(), FLOAT, 0),
            double(f64::from(0.1f32))
        );
        assert_eq!(text("NaN", DOUBLE), None);
        assert_eq!(text("inf", DOUBLE), None);
        assert_eq!(bin(&f64::NAN.to_le_bytes(), DOUBLE, 0), None);
        assert_eq!(bin(&[0; 4], DOUBLE, 0), None);
    }

    #[test]
    fn decodes_dates_alike_in_both_protocols() {
        let leap = Temporal::DateTime {
            year: 2024,
            month: 2,
            day: 29,
            hour: 23,
            minute: 59,
            second: 58,
            microsecond: 500_000,
        };
        assert_eq!(
            text("2024-02-29 23:59:58.5", TIMESTAMP),
            Some(Value::Temporal(leap))
        );
        let micro = [11, 0xe8, 0x07, 2, 29, 23, 59, 58, 0x20, 0xa1, 0x07, 0];
        assert_eq!(bin(&micro, DATETIME, 0), Some(Value::Temporal(leap)));
        let seconds = &[7, 0xe8, 0x07, 2, 29, 23, 59, 58];
        assert_eq!(
            bin(seconds, DATETIME, 0),
            text("2024-02-29 23:59:58", DATETIME)
        );
        assert_eq!(
            bin(&[4, 0xe8, 0x07, 2, 29], DATE, 0),
            text("2024-02-29", DATE)
        );
        assert_eq!(
            bin(&[0], TIMESTAMP, 0),
            text("0000-00-00 00:00:00.000000", DATETIME)
        );
        let (zero, first) = (bin(&[0], DATE, 0), text("1000-01-01", DATE));
        assert_eq!(compare(&zero.unwrap(), &first.unwrap()), Less);
        let bad_micro = [11, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x42, 0x0f, 0];
        for bad in [
            &bad_micro[..],
            &[5, 0xe8, 0x07, 2, 29, 1],
            &[4, 0xe8, 0x07, 2],
            &[],
        ] {
            assert_eq!(bin(bad, DATE, 0), None, "{bad:?}");
        }
        for bad in [
            "2024-02-29 ",
            "2024-02-29T23:59:58",
            "2024-02-29 3:59:58",
            "2024-2-29",
        ] {
            assert_eq!(text(bad, DATETIME), None, "{bad:?}");
        }
        assert_eq!(text("2024-02-29 23:59:58.1234567", DATETIME), None);
    }

    #[test]
    fn decodes_times_alike_in_both_protocols() {
        let min = -((838 * 3600 + 59 * 60 + 59) * 1_000_000);
        assert_eq!(text("-838:59:59.000000", TIME), Some(time(min)));
        assert_eq!(text("838:59:59", TIME), Some(time(-min)));
        assert_eq!(text("-00:00:01.5", TIME), Some(time(-1_500_000)));
        assert_eq!(text("-00:00:00", TIME), Some(time(0)));
        assert_eq!(
            bin(&[8, 1, 34, 0, 0, 0, 22, 59, 59], TIME, 0),
            Some(time(min))
        );
        let micro = [12, 0, 1, 0, 0, 0, 1, 2, 3, 1, 0, 0, 0];
        assert_eq!(bin(&micro, TIME, 0), text("25:02:03.000001", TIME));
        assert_eq!(bin(&[0], TIME, 0), Some(time(0)));
        assert_eq!(bin(&[8, 0, 0, 0, 0, 0, 0, 0, 60], TIME, 0), None);
        for bad in ["12:60:00", "12:00", "-", "1:2:3", "12345:00:00", "1:00:00."] {
            assert_eq!(text(bad, TIME), None, "{bad:?}");
        }
    }

    #[test]
    fn decodes_other_types_as_bytes() {
        for t in [BLOB, BIT, JSON] {
            assert_eq!(bin(b"\x00ab", t, 0), Some(Value::Bytes(b"\x00ab".to_vec())));
        }
    }

    #[test]
    fn encodes_integers_with_range_checks() {
        assert_eq!(enc(Value::Int(-5), LONGLONG, 0, Text), Some(b"-5".to_vec()));
        assert_eq!(
            enc(Value::Int(-2), SHORT, 0, Binary),
            Some(vec![0xfe, 0xff])
        );
        assert_eq!(
            enc(Value::Int(255), TINY, UNSIGNED, Binary),
            Some(vec![0xff])
        );
        let int24_min = Some(vec![0, 0, 0x80, 0xff]);
        assert_eq!(enc(Value::Int(-8_388_608), INT24, 0, Binary), int24_min);
        let max = Value::Int(u64::MAX.into());
        assert_eq!(enc(max, LONGLONG, UNSIGNED, Binary), Some(vec![0xff; 8]));
        let out_of_range = encode(&Value::Int(128), &meta(TINY, 0, 0), Binary);
        assert_eq!(out_of_range, Err(ValueError::OutOfRange(1)));
        assert_eq!(enc(Value::Int(-1), TINY, UNSIGNED, Text), None);
        assert_eq!(enc(Value::Int(8_388_608), INT24, 0, Text), None);
        assert_eq!(enc(Value::Int(1 << 64), LONGLONG, UNSIGNED, Binary), None);
        for (v, t, flags) in [
            (-3, LONG, 0),
            (65535, SHORT, UNSIGNED),
            (-1 << 63, LONGLONG, 0),
        ] {
            for protocol in [Text, Binary] {
                let raw = enc(Value::Int(v), t, flags, protocol).unwrap();
                assert_eq!(
                    decode(&raw, &meta(t, flags, 0), protocol),
                    Ok(Value::Int(v))
                );
            }
        }
    }

    #[test]
    fn encodes_decimals_and_doubles() {
        assert_eq!(
            enc(dec("-0.125"), NEWDECIMAL, 0, Text),
            Some(b"-0.13".to_vec())
        );
        assert_eq!(
            enc(dec("0.5"), NEWDECIMAL, 0, Binary),
            Some(b"0.50".to_vec())
        );
        assert_eq!(
            enc(dec("-0.001"), NEWDECIMAL, 0, Text),
            Some(b"0.00".to_vec())
        );
        assert_eq!(
            enc(Value::Int(7), NEWDECIMAL, 0, Text),
            Some(b"7.00".to_vec())
        );
        let too_big = encode(&Value::Int(i128::MAX), &meta(NEWDECIMAL, 0, 2), Text);
        assert_eq!(too_big, Err(ValueError::OutOfRange(0xf6)));
        let binary_double = Some(2.5f64.to_le_bytes().to_vec());
        assert_eq!(enc(Value::Double(2.5), DOUBLE, 0, Binary), binary_double);
        assert_eq!(
            enc(Value::Int(3), FLOAT, 0, Binary),
            Some(3f32.to_le_bytes().to_vec())
        );
        let zero = encode(
            &Value::Int(0),
            &meta(ColumnType::MYSQL_TYPE_VAR_STRING, 0, 39),
            Binary,
        )
        .unwrap();
        assert_eq!(
            zero,
            b"0".to_vec(),
            "a number in a string column is its text"
        );
        // Text DOUBLE: MariaDB's digits where they are known, else refused.
        let text_double = |v: f64, decimals: u8| {
            encode(&Value::Double(v), &meta(DOUBLE, 0, decimals), Text)
                .map(|b| String::from_utf8(b).unwrap())
        };
        for (v, printed) in [
            (2.5, "2.5"),
            (0.1 + 0.2, "0.30000000000000004"),
            (2.0 / 3.0 * 1e10, "6666666666.666666"),
            (999_999_999_999_999.0, "999999999999999"),
            (0.00001, "0.00001"),
            (-3.5, "-3.5"),
            (-0.0, "0"),
        ] {
            assert_eq!(text_double(v, 31).as_deref(), Ok(printed), "{v}");
        }
        for v in [1e15, 1.5e300, 1e-11] {
            assert_eq!(text_double(v, 31), Err(ValueError::Unsupported(5)), "{v}");
        }
        assert_eq!(text_double(2.5, 2), Err(ValueError::Unsupported(5)));
        assert_eq!(enc(time(0), TIME, 0, Binary), Some(vec![0]));
        assert_eq!(enc(Value::Null, LONG, 0, Text), None);
        assert_eq!(enc(Value::Double(1.0), LONG, 0, Text), None);
    }

    #[test]
    fn encodes_temporals_as_the_server_writes_them() {
        let stamp = Temporal::DateTime {
            year: 2024,
            month: 2,
            day: 29,
            hour: 7,
            minute: 5,
            second: 9,
            microsecond: 120_000,
        };
        let text_of = |v: Temporal, t: ColumnType, decimals: u8| {
            String::from_utf8(encode(&Value::Temporal(v), &meta(t, 0, decimals), Text).unwrap())
                .unwrap()
        };
        assert_eq!(text_of(stamp, DATETIME, 3), "2024-02-29 07:05:09.120");
        assert_eq!(text_of(stamp, DATETIME, 0), "2024-02-29 07:05:09");
        assert_eq!(text_of(stamp, DATETIME, 6), "2024-02-29 07:05:09.120000");
        let day = Temporal::DateTime {
            year: 2024,
            month: 2,
            day: 29,
            hour: 0,
            minute: 0,
            second: 0,
            microsecond: 0,
        };
        assert_eq!(text_of(day, DATE, 0), "2024-02-29");
        let span = Temporal::Time {
            microseconds: -((838 * 3600 + 59 * 60 + 59) * 1_000_000 + 500_000),
        };
        assert_eq!(text_of(span, TIME, 1), "-838:59:59.5");
        assert_eq!(
            text_of(
                Temporal::Time {
                    microseconds: 61_000_000
                },
                TIME,
                0
            ),
            "00:01:01"
        );
        // Both protocols read back what was written; binary in its shortest form.
        for (v, t, decimals) in [
            (stamp, DATETIME, 6),
            (day, DATETIME, 0),
            (day, DATE, 0),
            (span, TIME, 6),
            (Temporal::Time { microseconds: 0 }, TIME, 0),
        ] {
            for protocol in [Text, Binary] {
                let m = meta(t, 0, decimals);
                let raw = encode(&Value::Temporal(v), &m, protocol).unwrap();
                assert_eq!(decode(&raw, &m, protocol), Ok(Value::Temporal(v)), "{v:?}");
            }
        }
        let binary = |v| encode(&Value::Temporal(v), &meta(DATETIME, 0, 6), Binary).unwrap();
        assert_eq!(binary(day), vec![4, 0xe8, 0x07, 2, 29]);
        assert_eq!(binary(stamp).len(), 12);
    }

    #[test]
    fn compares_in_mysql_order() {
        let date = |s: &str| text(s, DATETIME).unwrap();
        let sorted = [
            Value::Null,
            Value::Int(-2),
            dec("-1.5"),
            Value::Double(-1.0),
            Value::Int(0),
            dec("0.5"),
            Value::Int(1),
            date("0000-00-00 00:00:00"),
            date("2024-01-01 00:00:00.999999"),
            date("2024-01-01 00:00:01"),
            time(-2),
            time(-1),
            time(0),
            Value::Bytes(vec![]),
            Value::Bytes(b"a".to_vec()),
            Value::Bytes(b"a ".to_vec()),
        ];
        for (i, a) in sorted.iter().enumerate() {
            for (j, b) in sorted.iter().enumerate() {
                assert_eq!(compare(a, b), i.cmp(&j), "{a:?} {b:?}");
            }
        }
        assert_eq!(compare(&Value::Int(2), &dec("2.00")), Equal);
        assert_eq!(compare(&Value::Double(-0.0), &Value::Double(0.0)), Equal);
        assert_eq!(compare(&dec("0.5"), &Value::Double(0.5)), Equal);
    }

    #[test]
    fn compares_weights_as_measured_on_mariadb() {
        let general_ci: Option<&[u8]> = Some(&[0x00, 0x20]);
        let unicode_ci: Option<&[u8]> = Some(&[0x02, 0x09]);
        let bin: Option<&[u8]> = Some(&[0x00, 0x00, 0x20]);
        let (a, a_tab) = (&[0, 0x41][..], &[0, 0x41, 0, 0x09][..]);
        let a_spaces = &[0, 0x41, 0, 0x20, 0, 0x20][..];
        let check = |x: &[u8], y: &[u8], pad, expected: Ordering| {
            assert_eq!(compare_weights(x, y, pad), expected, "{x:?} {y:?}");
            assert_eq!(
                compare_weights(y, x, pad),
                expected.reverse(),
                "{y:?} {x:?}"
            );
        };
        check(a_tab, a, general_ci, Less);
        check(a, a_spaces, general_ci, Equal);
        check(a, &[0, 0x41, 0, 0x42], general_ci, Less);
        check(a, &[0, 0x42], general_ci, Less);
        check(a, &[0, 0x41, 0], general_ci, Less);
        check(a, &a_spaces[..4], None, Less);
        check(a_tab, a, None, Greater);
        check(a, a_spaces, Some(&[]), Less);
        check(&[0x0e, 0x33], &[0x0e, 0x33, 0x02, 0x09], unicode_ci, Equal);
        check(
            &[0, 0, 0x61],
            &[0, 0, 0x61, 0, 0, 0x20, 0, 0, 0x20],
            bin,
            Equal,
        );
        check(&[0, 0, 0x61, 0, 0, 0x1f], &[0, 0, 0x61], bin, Less);
    }

    #[test]
    fn canonical_weights_match_pad_equality() {
        let pad: Option<&[u8]> = Some(&[0x00, 0x20]);
        assert_eq!(
            canonical_weight(&[0, 0x41, 0, 0x20, 0, 0x20], pad),
            [0, 0x41]
        );
        assert_eq!(canonical_weight(&[0, 0x20], pad), [0u8; 0]);
        assert_eq!(
            canonical_weight(&[0, 0x41, 0, 0x09], pad),
            [0, 0x41, 0, 0x09]
        );
        assert_eq!(
            canonical_weight(&[0, 0x41, 0, 0x20], None),
            [0, 0x41, 0, 0x20]
        );
        let weights: [&[u8]; 7] = [
            &[],
            &[0, 0x20],
            &[0, 0x41],
            &[0, 0x41, 0, 0x20],
            &[0, 0x41, 0, 0x09],
            &[0x20, 0],
            &[0, 0x20, 0],
        ];
        for a in weights {
            for b in weights {
                let equal = compare_weights(a, b, pad) == Equal;
                let same = canonical_weight(a, pad) == canonical_weight(b, pad);
                assert_eq!(equal, same, "{a:?} {b:?}");
            }
        }
    }
}
