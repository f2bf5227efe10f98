//! The bit layout of an order id (SPEC §2).
//!
//! ```text
//!  63 ............ 23 | 22 ...... 18 | 17 .... 14 | 13 ......... 0
//!  timestamp (41)     | worker (5)   | route key (4) | sequence (14)
//! ```
//!
//! Every width is configurable; the four widths always add up to 64. All arithmetic is on
//! `u64` (SPEC §9.4: the design note's signed arithmetic gives negative shards).

use thiserror::Error;

/// Milliseconds since the Unix epoch of the Snowflake epoch, 2010-11-04T01:42:54.657Z.
pub const SNOWFLAKE_EPOCH_MS: u64 = 1_288_834_974_657;

/// Widths (in bits) of the four fields of an order id and the epoch its timestamp counts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IdLayout {
    timestamp_bits: u8,
    worker_bits: u8,
    route_key_bits: u8,
    sequence_bits: u8,
    epoch_ms: u64,
}

/// The fields of one order id, as the layout reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdFields {
    /// Milliseconds since the layout's epoch.
    pub timestamp: u64,
    /// Generator instance (worker id lease).
    pub worker: u64,
    /// Channel code; 0 means "no region given".
    pub route_key: u64,
    /// Per-millisecond counter.
    pub sequence: u64,
}

/// Why a layout or a field value is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LayoutError {
    /// The widths do not add up to 64 bits.
    #[error("id layout widths add up to {0} bits, not 64")]
    Width(u32),
    /// A field has zero width, or the route key more than 8 bits.
    #[error("id layout field `{0}` must be {1}")]
    Field(&'static str, &'static str),
    /// A value does not fit in its field.
    #[error("{field} value {value} does not fit in {bits} bits")]
    Overflow {
        /// Field name.
        field: &'static str,
        /// The value given.
        value: u64,
        /// The width of the field.
        bits: u8,
    },
}

impl Default for IdLayout {
    fn default() -> Self {
        Self {
            timestamp_bits: 41,
            worker_bits: 5,
            route_key_bits: 4,
            sequence_bits: 14,
            epoch_ms: SNOWFLAKE_EPOCH_MS,
        }
    }
}

impl IdLayout {
    /// Builds a layout from its widths (most significant field first) and its epoch in Unix
    /// milliseconds. Errors when the widths do not add up to 64, when a field is empty, or
    /// when the route key is wider than 8 bits (codes are `u8`).
    pub fn new(
        timestamp_bits: u8,
        worker_bits: u8,
        route_key_bits: u8,
        sequence_bits: u8,
        epoch_ms: u64,
    ) -> Result<Self, LayoutError> {
        let total = u32::from(timestamp_bits)
            + u32::from(worker_bits)
            + u32::from(route_key_bits)
            + u32::from(sequence_bits);
        if total != 64 {
            return Err(LayoutError::Width(total));
        }
        if timestamp_bits < 32 {
            return Err(LayoutError::Field("timestamp_bits", "at least 32"));
        }
        if route_key_bits == 0 || route_key_bits > 8 {
            return Err(LayoutError::Field("route_key_bits", "between 1 and 8"));
        }
        if sequence_bits == 0 {
            return Err(LayoutError::Field("sequence_bits", "at least 1"));
        }
        Ok(Self {
            timestamp_bits,
            worker_bits,
            route_key_bits,
            sequence_bits,
            epoch_ms,
        })
    }

    /// The epoch, in Unix milliseconds.
    pub fn epoch_ms(&self) -> u64 {
        self.epoch_ms
    }

    /// Width of the route key field in bits.
    pub fn route_key_bits(&self) -> u8 {
        self.route_key_bits
    }

    /// Width of the worker field in bits (the number of worker ids is `2^bits`).
    pub fn worker_bits(&self) -> u8 {
        self.worker_bits
    }

    /// Width of the sequence field in bits (ids per millisecond per worker is `2^bits`).
    pub fn sequence_bits(&self) -> u8 {
        self.sequence_bits
    }

    /// Width of the timestamp field in bits.
    pub fn timestamp_bits(&self) -> u8 {
        self.timestamp_bits
    }

    fn route_key_shift(&self) -> u32 {
        u32::from(self.sequence_bits)
    }

    fn worker_shift(&self) -> u32 {
        self.route_key_shift() + u32::from(self.route_key_bits)
    }

    fn timestamp_shift(&self) -> u32 {
        self.worker_shift() + u32::from(self.worker_bits)
    }

    /// Splits an id into its fields.
    pub fn fields(&self, id: u64) -> IdFields {
        IdFields {
            timestamp: id >> self.timestamp_shift(),
            worker: (id >> self.worker_shift()) & mask(self.worker_bits),
            route_key: (id >> self.route_key_shift()) & mask(self.route_key_bits),
            sequence: id & mask(self.sequence_bits),
        }
    }

    /// The route key field alone; cheaper than [`IdLayout::fields`].
    #[inline]
    pub fn route_key(&self, id: u64) -> u8 {
        // Fits: route_key_bits <= 8.
        ((id >> self.route_key_shift()) & mask(self.route_key_bits)) as u8
    }

    /// The embedded timestamp as Unix milliseconds (saturating).
    #[inline]
    pub fn unix_ms(&self, id: u64) -> u64 {
        (id >> self.timestamp_shift()).saturating_add(self.epoch_ms)
    }

    /// Builds an id from its fields; errors when a value does not fit its field.
    pub fn compose(&self, fields: IdFields) -> Result<u64, LayoutError> {
        let check = |field, value: u64, bits: u8| {
            if value > mask(bits) {
                Err(LayoutError::Overflow { field, value, bits })
            } else {
                Ok(value)
            }
        };
        let ts = check("timestamp", fields.timestamp, self.timestamp_bits)?;
        let worker = check("worker", fields.worker, self.worker_bits)?;
        let key = check("route key", fields.route_key, self.route_key_bits)?;
        let seq = check("sequence", fields.sequence, self.sequence_bits)?;
        Ok(shl(ts, self.timestamp_shift())
            | shl(worker, self.worker_shift())
            | shl(key, self.route_key_shift())
            | seq)
    }
}

/// `value << shift` that is 0 when `shift == 64` (a field of width 0 above it).
fn shl(value: u64, shift: u32) -> u64 {
    value.checked_shl(shift).unwrap_or(0)
}

/// The low `bits` bits set.
fn mask(bits: u8) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_layout_places_fields_at_documented_bits() {
        let layout = IdLayout::default();
        let id = layout
            .compose(IdFields {
                timestamp: 1,
                worker: 1,
                route_key: 1,
                sequence: 1,
            })
            .unwrap();
        assert_eq!(id, (1 << 23) | (1 << 18) | (1 << 14) | 1);
    }

    #[test]
    fn fields_round_trip_at_the_edges() {
        let layout = IdLayout::default();
        for fields in [
            IdFields {
                timestamp: (1 << 41) - 1,
                worker: 31,
                route_key: 15,
                sequence: 16383,
            },
            IdFields {
                timestamp: 0,
                worker: 0,
                route_key: 0,
                sequence: 0,
            },
        ] {
            let id = layout.compose(fields).unwrap();
            assert_eq!(layout.fields(id), fields);
        }
        assert_eq!(
            layout
                .compose(IdFields {
                    timestamp: (1 << 41) - 1,
                    worker: 31,
                    route_key: 15,
                    sequence: 16383
                })
                .unwrap(),
            u64::MAX
        );
    }

    #[test]
    fn compose_refuses_values_that_do_not_fit() {
        let layout = IdLayout::default();
        let err = layout
            .compose(IdFields {
                timestamp: 0,
                worker: 32,
                route_key: 0,
                sequence: 0,
            })
            .unwrap_err();
        assert!(matches!(
            err,
            LayoutError::Overflow {
                field: "worker",
                ..
            }
        ));
    }

    #[test]
    fn layout_widths_must_add_up_to_64() {
        assert_eq!(
            IdLayout::new(41, 5, 4, 13, 0).unwrap_err(),
            LayoutError::Width(63)
        );
        assert!(IdLayout::new(41, 8, 4, 11, 0).is_ok());
        assert!(IdLayout::new(41, 0, 9, 14, 0).is_err());
    }

    #[test]
    fn design_note_example_carries_code_6_and_a_2015_timestamp() {
        // SPEC §9.1: 1234567890123456789 is not the EU example the note claims.
        let layout = IdLayout::default();
        let id = 1_234_567_890_123_456_789u64;
        assert_eq!(layout.route_key(id), 6);
        let year_2015_start = 1_420_070_400_000u64;
        let year_2016_start = 1_451_606_400_000u64;
        let ts = layout.unix_ms(id);
        assert!((year_2015_start..year_2016_start).contains(&ts), "{ts}");
    }
}
