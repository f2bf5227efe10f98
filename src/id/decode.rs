//! Layer 1 of routing (SPEC §4.1): read the channel from an order id's route key bits.
//!
//! An id is trusted only when its code is assigned to a channel **and** its embedded
//! timestamp lies in `[route_key_since(channel), now + skew]`. A legacy Snowflake id has
//! machine bits where the route key sits, so about 5 in 16 of them carry an assigned code by
//! accident; their timestamps, read in this layout, fall years before any
//! `route_key_since`, which is what rejects them (SPEC §9.2).

use std::time::Duration;

use super::layout::IdLayout;

/// A channel, by its position in the configuration's channel list
/// (`crate::config::Config::channels`); the route key decodes to one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChannelId(pub u8);

/// Why an id does not decode to a channel. Each reason is counted separately (SPEC §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeFailure {
    /// Route key 0: the id was issued without a region.
    NoCode,
    /// A code no channel is assigned to.
    UnassignedCode(u8),
    /// The embedded timestamp is before the channel's `route_key_since`: a legacy id.
    BeforeRouteKeySince,
    /// The embedded timestamp is later than now plus the allowed clock skew.
    InFuture,
}

impl DecodeFailure {
    /// A short stable label (metrics, `decode` command).
    pub fn label(&self) -> &'static str {
        match self {
            Self::NoCode => "no_code",
            Self::UnassignedCode(_) => "unassigned_code",
            Self::BeforeRouteKeySince => "before_route_key_since",
            Self::InFuture => "timestamp_in_future",
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Assigned {
    channel: ChannelId,
    route_key_since_ms: u64,
}

/// Decodes order ids to channels under one configuration. Built once per configuration;
/// decoding is a few shifts and compares, never cached.
#[derive(Debug, Clone)]
pub struct RouteKeyDecoder {
    layout: IdLayout,
    /// Indexed by route key code; `2^route_key_bits` entries.
    by_code: Vec<Option<Assigned>>,
    skew_ms: u64,
}

impl RouteKeyDecoder {
    /// Builds a decoder. `channels` gives, per channel, its id, its route key code and its
    /// `route_key_since` in Unix milliseconds. Codes must fit the layout's route key field
    /// (the configuration checks this first; a code that does not fit is ignored here).
    pub fn new(
        layout: IdLayout,
        channels: impl IntoIterator<Item = (ChannelId, u8, u64)>,
        clock_skew: Duration,
    ) -> Self {
        let mut by_code = vec![None; 1usize << layout.route_key_bits()];
        for (channel, code, since) in channels {
            if let Some(slot) = by_code.get_mut(usize::from(code)) {
                *slot = Some(Assigned {
                    channel,
                    route_key_since_ms: since,
                });
            }
        }
        Self {
            layout,
            by_code,
            skew_ms: u64::try_from(clock_skew.as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// The layout this decoder reads.
    pub fn layout(&self) -> &IdLayout {
        &self.layout
    }

    /// The channel an id carries, or why it carries none. `now_unix_ms` is the current time
    /// in Unix milliseconds (a parameter so tests can fix it).
    #[inline]
    pub fn decode(&self, id: u64, now_unix_ms: u64) -> Result<ChannelId, DecodeFailure> {
        let code = self.layout.route_key(id);
        if code == 0 {
            return Err(DecodeFailure::NoCode);
        }
        let assigned =
            self.by_code[usize::from(code)].ok_or(DecodeFailure::UnassignedCode(code))?;
        let ts = self.layout.unix_ms(id);
        if ts < assigned.route_key_since_ms {
            return Err(DecodeFailure::BeforeRouteKeySince);
        }
        if ts > now_unix_ms.saturating_add(self.skew_ms) {
            return Err(DecodeFailure::InFuture);
        }
        Ok(assigned.channel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::layout::{IdFields, SNOWFLAKE_EPOCH_MS};

    // 2024-01-01T00:00:00Z and friends, in Unix ms.
    const JAN_2024: u64 = 1_704_067_200_000;
    const JAN_2020: u64 = 1_577_836_800_000;
    const NOW: u64 = 1_795_000_000_000; // late 2026

    /// The default channels: (id, code, route_key_since).
    fn channels() -> Vec<(ChannelId, u8, u64)> {
        vec![
            (ChannelId(0), 5, JAN_2024), // EU
            (ChannelId(1), 2, JAN_2024), // GLOBAL
            (ChannelId(2), 1, JAN_2024), // CN
            (ChannelId(3), 3, JAN_2024), // BIZ
            (ChannelId(4), 4, JAN_2024), // CORP
        ]
    }

    fn decoder() -> RouteKeyDecoder {
        RouteKeyDecoder::new(IdLayout::default(), channels(), Duration::from_secs(5))
    }

    fn new_id(unix_ms: u64, worker: u64, code: u64, seq: u64) -> u64 {
        IdLayout::default()
            .compose(IdFields {
                timestamp: unix_ms - SNOWFLAKE_EPOCH_MS,
                worker,
                route_key: code,
                sequence: seq,
            })
            .unwrap()
    }

    /// Classic Snowflake: 41-bit time << 22 | 10-bit machine << 12 | 12-bit sequence.
    fn classic_id(unix_ms: u64, machine: u64, seq: u64) -> u64 {
        ((unix_ms - SNOWFLAKE_EPOCH_MS) << 22) | (machine << 12) | seq
    }

    #[test]
    fn ids_built_field_by_field_decode_to_their_channel() {
        let d = decoder();
        for (channel, code, since) in channels() {
            for (ts, worker, seq) in [
                (since, 0, 0),
                (since + 1, 31, 16383),
                (NOW - 1, 7, 123),
                (NOW, 1, 1),
                (NOW + 5_000, 2, 2), // within the skew
            ] {
                let id = new_id(ts, worker, u64::from(code), seq);
                assert_eq!(d.decode(id, NOW), Ok(channel), "id {id}");
            }
        }
    }

    #[test]
    fn design_note_example_is_not_decodable() {
        assert_eq!(
            decoder().decode(1_234_567_890_123_456_789, NOW),
            Err(DecodeFailure::UnassignedCode(6))
        );
    }

    #[test]
    fn code_zero_and_unassigned_codes_are_refused() {
        let d = decoder();
        assert_eq!(
            d.decode(new_id(NOW, 1, 0, 1), NOW),
            Err(DecodeFailure::NoCode)
        );
        for code in 6..16 {
            assert_eq!(
                d.decode(new_id(NOW, 1, code, 1), NOW),
                Err(DecodeFailure::UnassignedCode(code as u8))
            );
        }
    }

    #[test]
    fn timestamps_outside_the_window_are_refused() {
        let d = decoder();
        assert_eq!(
            d.decode(new_id(JAN_2024 - 1, 1, 5, 1), NOW),
            Err(DecodeFailure::BeforeRouteKeySince)
        );
        assert_eq!(
            d.decode(new_id(NOW + 5_001, 1, 5, 1), NOW),
            Err(DecodeFailure::InFuture)
        );
    }

    #[test]
    fn classic_snowflake_ids_from_before_route_key_since_never_decode() {
        let d = decoder();
        let mut with_assigned_code = 0;
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        for i in 0..200_000u64 {
            // xorshift: spread timestamps over 2011..2024 and machines/sequences at random.
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let ts = SNOWFLAKE_EPOCH_MS + 1 + rng % (JAN_2024 - SNOWFLAKE_EPOCH_MS - 1);
            let id = classic_id(ts, (rng >> 20) % 1024, i % 4096);
            let code = IdLayout::default().route_key(id);
            if (1..=5).contains(&code) {
                with_assigned_code += 1;
            }
            assert!(d.decode(id, NOW).is_err(), "classic id {id} decoded");
        }
        // About 5 in 16 carry an assigned code by accident: the window is what stops them.
        assert!(with_assigned_code > 50_000, "{with_assigned_code}");
    }

    #[test]
    fn classic_ids_with_each_assigned_code_in_bits_17_to_14() {
        let d = decoder();
        for code in 1..=5u64 {
            // Machine bits 5..2 of a classic id land on bits 17..14.
            let id = classic_id(JAN_2020, code << 2, 42);
            assert_eq!(IdLayout::default().route_key(id), code as u8);
            assert_eq!(d.decode(id, NOW), Err(DecodeFailure::BeforeRouteKeySince));
        }
    }

    #[test]
    fn an_id_with_bit_63_set_is_handled_unsigned() {
        let d = decoder();
        let id = (1u64 << 63) | (5 << 14);
        // Its timestamp lies ~35 years after the epoch: in the future, never a panic.
        assert_eq!(d.decode(id, NOW), Err(DecodeFailure::InFuture));
        assert_eq!(
            d.decode(u64::MAX, NOW),
            Err(DecodeFailure::UnassignedCode(15))
        );
    }
}
