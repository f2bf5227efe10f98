//! Exact decimal numbers for re-aggregating DECIMAL results across shards: a 128-bit
//! mantissa and a decimal scale. That holds 38 significant digits; MariaDB's DECIMAL holds
//! up to 65, and values beyond 38 digits are refused (`None`) rather than rounded.

use std::cmp::Ordering;
use std::hash::{Hash, Hasher};

/// The largest scale a [`Decimal`] holds: 10^38 is the largest power of ten in an `i128`.
pub const MAX_SCALE: u8 = 38;

/// An exact decimal number, `mantissa / 10^scale`, with `scale <= MAX_SCALE`.
///
/// Equality, ordering and hashing are by numeric value: `1.50 == 1.5`, so decimals can key
/// the groups of a GROUP BY or DISTINCT. Arithmetic is checked: `None` on overflow.
#[derive(Debug, Clone, Copy)]
pub struct Decimal {
    mantissa: i128,
    scale: u8,
}

impl Decimal {
    /// `mantissa / 10^scale`; `None` when `scale > MAX_SCALE`.
    pub fn new(mantissa: i128, scale: u8) -> Option<Decimal> {
        (scale <= MAX_SCALE).then_some(Decimal { mantissa, scale })
    }

    /// An integer, at scale 0.
    pub fn from_i128(value: i128) -> Decimal {
        Decimal {
            mantissa: value,
            scale: 0,
        }
    }

    /// The unscaled digits: `-50` for `-0.50`.
    pub fn mantissa(&self) -> i128 {
        self.mantissa
    }

    /// The number of fraction digits: `2` for `-0.50`.
    pub fn scale(&self) -> u8 {
        self.scale
    }

    /// Reads MySQL's text form of a DECIMAL or an integer: an optional `-`, digits, and an
    /// optional `.` with fraction digits (`-0.50`, `12`; `.5` and `5.` are accepted too).
    /// `None` for anything else (a `+`, exponents, spaces, no digits at all), for more than
    /// `MAX_SCALE` fraction digits, and when the digits do not fit in an `i128`.
    pub fn parse(text: &[u8]) -> Option<Decimal> {
        let (negative, number) = match text.split_first() {
            Some((b'-', rest)) => (true, rest),
            _ => (false, text),
        };
        let (integer, fraction) = match number.iter().position(|&b| b == b'.') {
            Some(dot) => (&number[..dot], &number[dot + 1..]),
            None => (number, &[][..]),
        };
        if integer.is_empty() && fraction.is_empty() {
            return None;
        }
        let scale = u8::try_from(fraction.len())
            .ok()
            .filter(|&s| s <= MAX_SCALE)?;
        let mut mantissa: i128 = 0;
        for &b in integer.iter().chain(fraction) {
            if !b.is_ascii_digit() {
                return None;
            }
            mantissa = mantissa
                .checked_mul(10)?
                .checked_add(i128::from(b - b'0'))?;
        }
        Some(Decimal {
            mantissa: if negative { -mantissa } else { mantissa },
            scale,
        })
    }

    /// Whether the value is zero (at any scale).
    pub fn is_zero(&self) -> bool {
        self.mantissa == 0
    }

    /// The negation; `None` only for a mantissa of `i128::MIN`.
    pub fn checked_neg(&self) -> Option<Decimal> {
        Some(Decimal {
            mantissa: self.mantissa.checked_neg()?,
            scale: self.scale,
        })
    }

    /// The exact sum, at the larger of the two scales; `None` on overflow.
    pub fn checked_add(&self, other: &Decimal) -> Option<Decimal> {
        let scale = self.scale.max(other.scale);
        let a = self.mantissa.checked_mul(pow10(scale - self.scale)?)?;
        let b = other.mantissa.checked_mul(pow10(scale - other.scale)?)?;
        Some(Decimal {
            mantissa: a.checked_add(b)?,
            scale,
        })
    }

    /// The exact difference, at the larger of the two scales; `None` on overflow.
    pub fn checked_sub(&self, other: &Decimal) -> Option<Decimal> {
        self.checked_add(&other.checked_neg()?)
    }

    /// The product, at the sum of the two scales; beyond `MAX_SCALE` fraction digits it is
    /// rounded half away from zero to `MAX_SCALE`. `None` on overflow.
    pub fn checked_mul(&self, other: &Decimal) -> Option<Decimal> {
        let mantissa = self.mantissa.checked_mul(other.mantissa)?;
        let scale = u32::from(self.scale) + u32::from(other.scale);
        let exact = DivParts {
            dividend: mantissa,
            dividend_scale: scale,
            divisor: 1,
            divisor_scale: 0,
        };
        exact.round(MAX_SCALE.min(u8::try_from(scale).ok()?))
    }

    /// `self / divisor` rounded half away from zero to `scale` fraction digits, as MariaDB
    /// rounds decimals (ROUND_HALF_UP): `2 / 3` at scale 4 is `0.6667`, `-1 / 8` at scale 2
    /// is `-0.13`. `None` when `divisor` is zero, `scale > MAX_SCALE`, or on overflow.
    pub fn div_round(&self, divisor: &Decimal, scale: u8) -> Option<Decimal> {
        let parts = DivParts {
            dividend: self.mantissa,
            dividend_scale: u32::from(self.scale),
            divisor: divisor.mantissa,
            divisor_scale: u32::from(divisor.scale),
        };
        parts.round(scale)
    }

    /// The value at `scale` fraction digits, rounded half away from zero when digits are
    /// dropped (`0.125` -> `0.13`) and padded with zeros when added; `None` when
    /// `scale > MAX_SCALE` or the padded mantissa overflows.
    pub fn rescale_round(&self, scale: u8) -> Option<Decimal> {
        self.div_round(&Decimal::from_i128(1), scale)
    }

    /// MySQL's text form: exactly `scale` fraction digits (`-0.50`, `0.00`, `12`), never a
    /// minus sign on zero.
    pub fn to_text(&self) -> String {
        let digits = self.mantissa.unsigned_abs().to_string();
        let scale = usize::from(self.scale);
        let mut out = String::with_capacity(digits.len() + scale + 3);
        if self.mantissa < 0 {
            out.push('-');
        }
        if digits.len() <= scale {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', scale - digits.len()));
            out.push_str(&digits);
        } else {
            let (integer, fraction) = digits.split_at(digits.len() - scale);
            out.push_str(integer);
            if scale > 0 {
                out.push('.');
                out.push_str(fraction);
            }
        }
        out
    }

    /// The nearest `f64` (through the text form, so correctly rounded), for comparing with
    /// DOUBLE values the way MariaDB does.
    pub fn to_f64(&self) -> f64 {
        self.to_text().parse().unwrap_or(f64::NAN)
    }

    /// The integer and fraction parts, both with the sign of the value; the fraction at
    /// `scale` digits.
    fn split(&self) -> (i128, i128) {
        let unit = 10i128.saturating_pow(u32::from(self.scale));
        (self.mantissa / unit, self.mantissa % unit)
    }

    /// The same value without trailing fraction zeros.
    fn normalized(&self) -> Decimal {
        let mut d = *self;
        while d.scale > 0 && d.mantissa % 10 == 0 {
            d.mantissa /= 10;
            d.scale -= 1;
        }
        d
    }
}

/// `10^exp`, for `exp <= MAX_SCALE`.
fn pow10(exp: u8) -> Option<i128> {
    10i128.checked_pow(u32::from(exp))
}

/// A quotient `(dividend / 10^dividend_scale) / (divisor / 10^divisor_scale)`.
struct DivParts {
    dividend: i128,
    dividend_scale: u32,
    divisor: i128,
    divisor_scale: u32,
}

impl DivParts {
    /// The quotient at `scale` digits, rounded half away from zero, by long division so that
    /// only the result (not `dividend * 10^scale`) has to fit in 128 bits.
    fn round(&self, scale: u8) -> Option<Decimal> {
        if self.divisor == 0 || scale > MAX_SCALE {
            return None;
        }
        let negative = (self.dividend < 0) != (self.divisor < 0);
        let dividend = self.dividend.unsigned_abs();
        let mut divisor = self.divisor.unsigned_abs();
        // quotient * 10^scale = dividend * 10^exp / divisor
        let exp = i64::from(scale) + i64::from(self.divisor_scale) - i64::from(self.dividend_scale);
        let digits = u32::try_from(exp).unwrap_or(0);
        if exp < 0 {
            let shift = u32::try_from(-exp).ok();
            match shift.and_then(|s| 10u128.checked_pow(s)?.checked_mul(divisor)) {
                Some(d) => divisor = d,
                // The divisor exceeds u128::MAX > 2 * dividend: the quotient rounds to 0.
                None => return Decimal::new(0, scale),
            }
        }
        let mut quotient = dividend / divisor;
        let mut remainder = dividend % divisor;
        for _ in 0..digits {
            let r10 = remainder.checked_mul(10)?;
            quotient = quotient.checked_mul(10)?.checked_add(r10 / divisor)?;
            remainder = r10 % divisor;
        }
        if remainder >= divisor - remainder {
            quotient = quotient.checked_add(1)?;
        }
        let magnitude = i128::try_from(quotient).ok()?;
        Decimal::new(if negative { -magnitude } else { magnitude }, scale)
    }
}

impl Ord for Decimal {
    fn cmp(&self, other: &Self) -> Ordering {
        let (ai, af) = self.split();
        let (bi, bf) = other.split();
        let scale = self.scale.max(other.scale);
        // |fraction| < 10^own scale, so the aligned fractions stay below 10^38.
        let af = af.saturating_mul(10i128.saturating_pow(u32::from(scale - self.scale)));
        let bf = bf.saturating_mul(10i128.saturating_pow(u32::from(scale - other.scale)));
        ai.cmp(&bi).then(af.cmp(&bf))
    }
}

impl PartialOrd for Decimal {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Decimal {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Decimal {}

impl Hash for Decimal {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let d = self.normalized();
        d.mantissa.hash(state);
        d.scale.hash(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(text: &str) -> Decimal {
        Decimal::parse(text.as_bytes()).unwrap()
    }

    #[test]
    fn parses_mysql_text() {
        assert_eq!((d("-0.50").mantissa(), d("-0.50").scale()), (-50, 2));
        assert_eq!((d("12").mantissa(), d("12").scale()), (12, 0));
        assert_eq!(d(".5"), d("0.5"));
        assert_eq!(d("5."), d("5"));
        assert_eq!(d("-0").to_text(), "0");
        for bad in [
            "", "-", ".", "+1", "1e5", " 1", "1 ", "1.2.3", "--1", "0x10", "1,5",
        ] {
            assert_eq!(Decimal::parse(bad.as_bytes()), None, "{bad:?}");
        }
    }

    #[test]
    fn parse_limits() {
        let max = i128::MAX.to_string();
        assert_eq!(d(&max).mantissa(), i128::MAX);
        assert_eq!(d(&format!("-{max}")).mantissa(), -i128::MAX);
        assert_eq!(Decimal::parse(format!("{max}0").as_bytes()), None);
        assert_eq!(
            Decimal::parse(b"170141183460469231731687303715884105728"),
            None
        );
        let fraction = format!("0.{}", "1".repeat(38));
        assert_eq!(d(&fraction).scale(), 38);
        assert_eq!(
            Decimal::parse(format!("0.{}", "0".repeat(39)).as_bytes()),
            None
        );
    }

    #[test]
    fn prints_exactly_scale_digits() {
        assert_eq!(d("-0.50").to_text(), "-0.50");
        assert_eq!(d("0.00").to_text(), "0.00");
        assert_eq!(d("-0.00").to_text(), "0.00");
        assert_eq!(d("12").to_text(), "12");
        assert_eq!(d("0.001").to_text(), "0.001");
        assert_eq!(d("-123.4500").to_text(), "-123.4500");
        assert_eq!(
            Decimal::new(i128::MIN, 0).unwrap().to_text(),
            i128::MIN.to_string()
        );
        assert_eq!(Decimal::new(1, 39), None);
    }

    #[test]
    fn compares_and_hashes_by_value() {
        use std::collections::HashSet;
        assert_eq!(d("1.50"), d("1.5"));
        assert!(d("-1.5") < d("-1.2"));
        assert!(d("-0.5") < d("0.3"));
        assert!(d("-1.0") < d("-0.9"));
        assert!(d("0.9") < d("1"));
        assert!(
            d("99999999999999999999999999999999999999")
                > d("0.99999999999999999999999999999999999999")
        );
        assert_eq!(Decimal::from_i128(-3).cmp(&d("-3.000")), Ordering::Equal);
        let set: HashSet<Decimal> = [d("1.50"), d("1.5"), d("1"), d("1.000")].into();
        assert_eq!(set.len(), 2);
    }

    #[test]
    fn adds_subtracts_and_multiplies() {
        assert_eq!(d("1.5").checked_add(&d("0.25")).unwrap().to_text(), "1.75");
        assert_eq!(d("1.5").checked_sub(&d("2.25")).unwrap().to_text(), "-0.75");
        assert_eq!(
            d("-1.5").checked_mul(&d("0.25")).unwrap().to_text(),
            "-0.375"
        );
        let big = Decimal::from_i128(i128::MAX);
        assert_eq!(big.checked_add(&Decimal::from_i128(1)), None);
        assert_eq!(big.checked_mul(&Decimal::from_i128(2)), None);
        assert_eq!(
            d("2").checked_add(&d(&format!("0.{}", "1".repeat(38)))),
            None
        );
        assert_eq!(Decimal::new(i128::MIN, 0).unwrap().checked_neg(), None);
        assert!(d("0.000").is_zero() && !d("0.001").is_zero());
        let tiny = d(&format!("0.{}5", "0".repeat(19)));
        assert_eq!(tiny.checked_mul(&tiny).unwrap().scale(), MAX_SCALE);
    }

    #[test]
    fn divides_rounding_half_away_from_zero() {
        let div = |a: &str, b: &str, s: u8| d(a).div_round(&d(b), s).map(|q| q.to_text());
        assert_eq!(div("2", "3", 4).as_deref(), Some("0.6667"));
        assert_eq!(div("-2", "3", 4).as_deref(), Some("-0.6667"));
        assert_eq!(div("2", "-3", 4).as_deref(), Some("-0.6667"));
        assert_eq!(div("1", "8", 2).as_deref(), Some("0.13"));
        assert_eq!(div("-1", "8", 2).as_deref(), Some("-0.13"));
        assert_eq!(div("10.50", "4", 6).as_deref(), Some("2.625000"));
        assert_eq!(div("1", "3000", 0).as_deref(), Some("0"));
        assert_eq!(div("-1", "3", 0).as_deref(), Some("0"));
        assert_eq!(div("1", "0.00", 2), None);
        assert_eq!(div("1", "3", 39), None);
        let max = Decimal::from_i128(i128::MAX);
        assert_eq!(max.div_round(&Decimal::from_i128(1), 1), None);
        let huge_divisor = Decimal::new(i128::MAX, 0).unwrap();
        let small = Decimal::new(1, 38).unwrap();
        assert!(small.div_round(&huge_divisor, 0).unwrap().is_zero());
    }

    #[test]
    fn rescales_rounding_half_away_from_zero() {
        let r = |a: &str, s: u8| d(a).rescale_round(s).map(|q| q.to_text());
        assert_eq!(r("0.125", 2).as_deref(), Some("0.13"));
        assert_eq!(r("-0.125", 2).as_deref(), Some("-0.13"));
        assert_eq!(r("0.124", 2).as_deref(), Some("0.12"));
        assert_eq!(r("-0.004", 2).as_deref(), Some("0.00"));
        assert_eq!(r("2.5", 0).as_deref(), Some("3"));
        assert_eq!(r("1.5", 4).as_deref(), Some("1.5000"));
        assert_eq!(Decimal::from_i128(i128::MAX).rescale_round(1), None);
    }

    #[test]
    fn converts_to_f64() {
        assert_eq!(d("-0.50").to_f64(), -0.5);
        assert_eq!(d("0.1").to_f64(), 0.1);
    }
}
