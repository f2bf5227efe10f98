//! Values of a statement as the router reads them: order ids compared as MySQL compares an
//! unsigned BIGINT column with a literal, and context values as text.

use crate::protocol::binary::ParamValue;
use crate::sql::ValueSlot;
use crate::sql::lexer::{LexMode, Token, TokenKind, unescape_string};

/// The statement's literals and the session values its slots may refer to.
#[derive(Debug, Clone, Copy)]
pub struct StatementValues<'a> {
    /// The statement text.
    pub sql: &'a [u8],
    /// Its tokens.
    pub tokens: &'a [Token],
    /// How its strings are escaped.
    pub mode: LexMode,
    /// Bound parameters (prepared statements); empty for text statements.
    pub params: &'a [ParamValue],
    /// The session's `LAST_INSERT_ID()`.
    pub last_insert_id: u64,
    /// Ids the proxy issued for INSERT rows without `order_id`, by row.
    pub generated: &'a [u64],
}

/// An order id value, as the router sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyValue {
    /// A number an unsigned BIGINT column can hold.
    Id(u64),
    /// A value no order id can equal (NULL, negative, fractional, beyond 2^64-1).
    NoMatch,
    /// A value the proxy refuses to route, with the reason.
    Invalid(String),
    /// An expression the proxy does not evaluate.
    Expression,
}

impl StatementValues<'_> {
    /// The order id a slot holds.
    pub fn key(&self, slot: ValueSlot) -> KeyValue {
        match slot {
            ValueSlot::Literal { token, negated } => {
                let Some(t) = self.tokens.get(token as usize) else {
                    return KeyValue::Expression;
                };
                let value = match t.kind {
                    TokenKind::Number => parse_number(t.bytes(self.sql)),
                    TokenKind::String => {
                        let text = unescape_string(t.bytes(self.sql), self.mode);
                        parse_decimal_string(&text)
                    }
                    _ => KeyValue::Expression,
                };
                match (value, negated) {
                    (KeyValue::Id(0), true) => KeyValue::Id(0),
                    (KeyValue::Id(_), true) => KeyValue::NoMatch,
                    (v, _) => v,
                }
            }
            ValueSlot::Param(i) => match self.params.get(i as usize) {
                None => KeyValue::Expression,
                Some(ParamValue::Null) => KeyValue::NoMatch,
                Some(ParamValue::UInt(v)) => KeyValue::Id(*v),
                Some(ParamValue::Int(v)) => {
                    u64::try_from(*v).map_or(KeyValue::NoMatch, KeyValue::Id)
                }
                Some(ParamValue::Float(f)) => float_key(*f),
                Some(ParamValue::Bytes(b)) => parse_decimal_string(b),
                Some(ParamValue::Other) => KeyValue::Expression,
            },
            ValueSlot::Null => KeyValue::NoMatch,
            ValueSlot::LastInsertId => KeyValue::Id(self.last_insert_id),
            ValueSlot::Generated(row) => self
                .generated
                .get(row as usize)
                .map_or(KeyValue::Expression, |id| KeyValue::Id(*id)),
            ValueSlot::Expression => KeyValue::Expression,
        }
    }

    /// A context value as text (channel name or region code); `None` for NULL and
    /// expressions.
    pub fn text(&self, slot: ValueSlot) -> Option<String> {
        match slot {
            ValueSlot::Literal { token, .. } => {
                let t = self.tokens.get(token as usize)?;
                match t.kind {
                    TokenKind::String => Some(
                        String::from_utf8_lossy(&unescape_string(t.bytes(self.sql), self.mode))
                            .into_owned(),
                    ),
                    TokenKind::Number => {
                        Some(String::from_utf8_lossy(t.bytes(self.sql)).into_owned())
                    }
                    _ => None,
                }
            }
            ValueSlot::Param(i) => match self.params.get(i as usize)? {
                ParamValue::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
                ParamValue::Int(v) => Some(v.to_string()),
                ParamValue::UInt(v) => Some(v.to_string()),
                _ => None,
            },
            _ => None,
        }
    }
}

fn float_key(f: f64) -> KeyValue {
    if f.fract() != 0.0 || f < 0.0 || !f.is_finite() || f >= 18_446_744_073_709_551_616.0 {
        if f == 0.0 {
            return KeyValue::Id(0);
        }
        return KeyValue::NoMatch;
    }
    if f > 9_007_199_254_740_992.0 {
        // Above 2^53 a double no longer names one integer.
        return KeyValue::Invalid(format!(
            "order_id {f:e} is a floating-point value too large to name one order id exactly"
        ));
    }
    KeyValue::Id(f as u64)
}

/// A numeric literal token: `12`, `12.000`, `1.5`, `1e3`.
fn parse_number(text: &[u8]) -> KeyValue {
    if !text.is_empty() && text.iter().all(u8::is_ascii_digit) {
        // The usual literal, digits only: above u64::MAX it matches no order id.
        return text
            .iter()
            .try_fold(0u64, |n, &b| {
                n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
            })
            .map_or(KeyValue::NoMatch, KeyValue::Id);
    }
    let Ok(text) = std::str::from_utf8(text) else {
        return KeyValue::Expression;
    };
    if text.contains(['e', 'E']) {
        return text.parse::<f64>().map_or(KeyValue::Expression, float_key);
    }
    let (int, frac) = text.split_once('.').unwrap_or((text, ""));
    if !frac.bytes().all(|b| b == b'0') {
        return KeyValue::NoMatch;
    }
    if int.is_empty() {
        return KeyValue::Id(0);
    }
    int.parse::<u64>().map_or(KeyValue::NoMatch, KeyValue::Id)
}

/// A quoted value compared with a BIGINT UNSIGNED column: decimal digits with an optional
/// sign, fraction, exponent and surrounding spaces are numbers; anything else MySQL would
/// convert with a truncation warning, so the proxy refuses to guess.
fn parse_decimal_string(bytes: &[u8]) -> KeyValue {
    let text = String::from_utf8_lossy(bytes);
    let trimmed = text.trim_matches(|c: char| c.is_ascii_whitespace());
    let (negative, digits) = match trimmed.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, trimmed.strip_prefix('+').unwrap_or(trimmed)),
    };
    let well_formed = {
        let mantissa = digits.split(['e', 'E']).next().unwrap_or("");
        let exponent_ok = match digits.split_once(['e', 'E']) {
            Some((_, e)) => {
                let e = e.strip_prefix(['+', '-']).unwrap_or(e);
                !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit())
            }
            None => true,
        };
        let (i, f) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        !(i.is_empty() && f.is_empty())
            && i.bytes().all(|b| b.is_ascii_digit())
            && f.bytes().all(|b| b.is_ascii_digit())
            && exponent_ok
    };
    if !well_formed {
        return KeyValue::Invalid(format!(
            "Truncated incorrect DECIMAL value: '{}' (order_id must be a decimal integer)",
            text.chars().take(64).collect::<String>()
        ));
    }
    match (parse_number(digits.as_bytes()), negative) {
        (KeyValue::Id(0), _) => KeyValue::Id(0),
        (KeyValue::Id(_), true) => KeyValue::NoMatch,
        (v, _) => v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::lexer::lex;

    fn key_of(sql: &str) -> KeyValue {
        let lexed = lex(sql.as_bytes(), LexMode::default());
        let values = StatementValues {
            sql: sql.as_bytes(),
            tokens: &lexed.tokens,
            mode: LexMode::default(),
            params: &[],
            last_insert_id: 0,
            generated: &[],
        };
        values.key(ValueSlot::Literal {
            token: 0,
            negated: false,
        })
    }

    #[test]
    fn numbers_compare_as_mysql_does() {
        assert_eq!(key_of("18446744073709551615"), KeyValue::Id(u64::MAX));
        assert_eq!(key_of("18446744073709551616"), KeyValue::NoMatch);
        assert_eq!(key_of("12.000"), KeyValue::Id(12));
        assert_eq!(key_of("12.5"), KeyValue::NoMatch);
        assert_eq!(key_of("1e3"), KeyValue::Id(1000));
        assert_eq!(key_of("1.5e0"), KeyValue::NoMatch);
        assert!(matches!(key_of("1e18"), KeyValue::Invalid(_)));
    }

    #[test]
    fn quoted_decimal_strings_are_numbers() {
        assert_eq!(
            key_of("'1234567890123456789'"),
            KeyValue::Id(1_234_567_890_123_456_789)
        );
        assert_eq!(key_of("' 42 '"), KeyValue::Id(42));
        assert_eq!(key_of("'+42'"), KeyValue::Id(42));
        assert_eq!(key_of("'-42'"), KeyValue::NoMatch);
        assert_eq!(key_of("_binary'42'"), KeyValue::Expression); // token 0 is `_binary`
        assert!(matches!(key_of("'12abc'"), KeyValue::Invalid(m) if m.contains("12abc")));
        assert!(matches!(key_of("''"), KeyValue::Invalid(_)));
    }

    #[test]
    fn negation_and_params() {
        let sql = "-5";
        let lexed = lex(sql.as_bytes(), LexMode::default());
        let params = [
            ParamValue::Int(-1),
            ParamValue::UInt(7),
            ParamValue::Bytes(b"8".to_vec()),
            ParamValue::Null,
        ];
        let v = StatementValues {
            sql: sql.as_bytes(),
            tokens: &lexed.tokens,
            mode: LexMode::default(),
            params: &params,
            last_insert_id: 99,
            generated: &[],
        };
        assert_eq!(
            v.key(ValueSlot::Literal {
                token: 1,
                negated: true
            }),
            KeyValue::NoMatch
        );
        assert_eq!(v.key(ValueSlot::Param(0)), KeyValue::NoMatch);
        assert_eq!(v.key(ValueSlot::Param(1)), KeyValue::Id(7));
        assert_eq!(v.key(ValueSlot::Param(2)), KeyValue::Id(8));
        assert_eq!(v.key(ValueSlot::Param(3)), KeyValue::NoMatch);
        assert_eq!(v.key(ValueSlot::LastInsertId), KeyValue::Id(99));
    }
}
