//! Comparison keys of rows: what ORDER BY, GROUP BY, DISTINCT and MIN/MAX compare, taken
//! from a shard's row as its column definitions describe it. Text compares by its
//! collation's weights (the hidden `WEIGHT_STRING` columns, padded for PAD SPACE
//! collations), everything else by value.

use std::cmp::Ordering;

use super::spec::{KeyCols, TextCols};
use super::value::{Value, canonical_weight, compare, compare_weights, decode};
use crate::protocol::row::{ColumnMeta, Protocol, RowError, split_row};

/// Why rows could not be merged; the statement fails with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct MergeError {
    /// What went wrong, for the client.
    pub message: String,
    /// The merge would have held more than `sharding.merge_row_cap` rows or groups.
    pub over_cap: bool,
}

impl MergeError {
    /// Rows that cannot be merged (malformed, or values the merge cannot compute with).
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            over_cap: false,
        }
    }
}

impl From<RowError> for MergeError {
    fn from(e: RowError) -> Self {
        MergeError::new(format!("a malformed row from a shard: {e}"))
    }
}

impl From<super::value::ValueError> for MergeError {
    fn from(e: super::value::ValueError) -> Self {
        MergeError::new(format!("a value the merge cannot read: {e}"))
    }
}

/// One compared value.
#[derive(Debug, Clone, PartialEq)]
pub enum Key {
    /// NULL: first in ascending order, last in descending.
    Null,
    /// Text: its collation weight, and the weight of a space when the collation pads.
    Text {
        /// `WEIGHT_STRING(value)`.
        weight: Vec<u8>,
        /// The pad unit (PAD SPACE collations).
        pad: Option<Vec<u8>>,
    },
    /// Any other value, by value.
    Value(Value),
}

impl Key {
    /// Orders two keys of one column as the server does.
    pub fn compare(&self, other: &Key) -> Ordering {
        match (self, other) {
            (Key::Null, Key::Null) => Ordering::Equal,
            (Key::Null, _) => Ordering::Less,
            (_, Key::Null) => Ordering::Greater,
            (Key::Text { weight: a, pad }, Key::Text { weight: b, .. }) => {
                compare_weights(a, b, pad.as_deref())
            }
            (Key::Value(a), Key::Value(b)) => compare(a, b),
            (Key::Text { .. }, Key::Value(_)) => Ordering::Greater,
            (Key::Value(_), Key::Text { .. }) => Ordering::Less,
        }
    }

    /// Bytes equal for keys that compare equal (to group and de-duplicate by hash).
    pub fn canonical(&self, out: &mut Vec<u8>) {
        match self {
            Key::Null => out.push(0),
            Key::Text { weight, pad } => {
                out.push(1);
                let w = canonical_weight(weight, pad.as_deref());
                out.extend_from_slice(&(w.len() as u32).to_le_bytes());
                out.extend_from_slice(w);
            }
            Key::Value(v) => {
                out.push(2);
                let text = match v {
                    Value::Int(i) => i.to_string(),
                    Value::Decimal(d) => {
                        let t = d.to_text();
                        if t.contains('.') {
                            t.trim_end_matches('0').trim_end_matches('.').to_owned()
                        } else {
                            t
                        }
                    }
                    Value::Double(f) => format!("d{}", if *f == 0.0 { 0.0 } else { *f }),
                    Value::Temporal(t) => format!("{t:?}"),
                    Value::Bytes(b) => {
                        out.push(3);
                        out.extend_from_slice(&(b.len() as u32).to_le_bytes());
                        out.extend_from_slice(b);
                        return;
                    }
                    Value::Null => String::new(),
                };
                out.extend_from_slice(&(text.len() as u32).to_le_bytes());
                out.extend_from_slice(text.as_bytes());
            }
        }
    }
}

/// Whether a column holds text compared by a collation (not binary strings).
pub fn is_collated_text(meta: &ColumnMeta) -> bool {
    matches!(meta.column_type, 15 | 245 | 249..=254) && meta.charset != 63
}

/// ENUM and SET sort by their index, not their text: the merge refuses to order them.
fn is_enum_or_set(meta: &ColumnMeta) -> bool {
    meta.column_type == 247 || meta.column_type == 248 || meta.flags & (0x100 | 0x800) != 0
}

/// One shard row, split, with its columns' definitions.
pub struct Row<'a> {
    /// Raw values (`None` for NULL).
    pub values: Vec<Option<&'a [u8]>>,
    /// Column definitions of every column, hidden ones included.
    pub metas: &'a [ColumnMeta],
    /// How it was encoded.
    pub protocol: Protocol,
    /// Hidden columns at its end.
    pub hidden: usize,
}

impl<'a> Row<'a> {
    /// Splits a row packet.
    pub fn split(
        packet: &'a [u8],
        metas: &'a [ColumnMeta],
        protocol: Protocol,
        hidden: usize,
    ) -> Result<Self, MergeError> {
        let mut values = Vec::with_capacity(metas.len());
        split_row(packet, metas, protocol, &mut values)?;
        Ok(Self {
            values,
            metas,
            protocol,
            hidden,
        })
    }

    /// Position of a column.
    pub fn index(&self, col: super::spec::Col) -> usize {
        col.index(self.metas.len(), self.hidden)
    }

    /// The raw value of a column.
    pub fn raw(&self, col: super::spec::Col) -> Option<&'a [u8]> {
        self.values.get(self.index(col)).copied().flatten()
    }

    /// The decoded value of a column.
    pub fn value(&self, col: super::spec::Col) -> Result<Value, MergeError> {
        let i = self.index(col);
        match self.values.get(i).copied().flatten() {
            None => Ok(Value::Null),
            Some(raw) => Ok(decode(raw, &self.metas[i], self.protocol)?),
        }
    }

    /// A small integer of a hidden column (the pad flag), as either protocol sends it.
    fn flag(&self, col: super::spec::Col) -> bool {
        matches!(self.value(col), Ok(Value::Int(1)))
    }

    /// The comparison key of a value.
    pub fn key(&self, key: &KeyCols) -> Result<Key, MergeError> {
        let i = self.index(key.value);
        let Some(raw) = self.values.get(i).copied().flatten() else {
            return Ok(Key::Null);
        };
        let meta = &self.metas[i];
        if is_enum_or_set(meta) {
            return Err(MergeError::new(
                "comparing ENUM or SET values over several shards (they sort by index)".to_owned(),
            ));
        }
        match (is_collated_text(meta), key.text) {
            (true, Some(TextCols { weight, pad, pads })) => Ok(Key::Text {
                weight: self.raw(weight).unwrap_or_default().to_vec(),
                pad: self
                    .flag(pads)
                    .then(|| self.raw(pad).unwrap_or_default().to_vec())
                    .filter(|p| !p.is_empty()),
            }),
            (true, None) => Err(MergeError::new(
                "comparing text values over several shards without their collation weights"
                    .to_owned(),
            )),
            (false, _) => Ok(Key::Value(decode(raw, meta, self.protocol)?)),
        }
    }
}
