//! The client's character set: which ones the proxy accepts, and decoding statement bytes
//! to text for the SQL parser while keeping a map back to byte offsets.
//!
//! The parser reports positions as (line, column), columns counted in characters. A rewrite
//! edits the client's original bytes, so every position is mapped back to a byte offset.

use mysql_common::collations::{Collation, CollationId};
use sqlparser::tokenizer::Location;

/// How statement bytes in a character set become text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Decoding {
    /// utf8mb4, utf8mb3: decoded as UTF-8; a byte that is not valid UTF-8 (inside a
    /// `_binary'...'` literal) becomes one U+FFFD.
    Utf8,
    /// latin1, ascii, binary and the other character sets whose multibyte characters never
    /// contain ASCII bytes: one byte, one character (latin1 is MySQL's cp1252).
    SingleByte,
}

/// Character sets whose multibyte characters may contain the byte `0x5C` (`\`) or a quote:
/// a lexer working on bytes would misread them, so clients using them are refused.
const REFUSED: [&str; 5] = ["gbk", "sjis", "big5", "cp932", "gb18030"];

/// Character sets that cannot be a client character set in MySQL either.
const NOT_CLIENT: [&str; 5] = ["ucs2", "utf16", "utf16le", "utf32", "filename"];

/// Whether `charset` can be a client character set at all (MySQL and MariaDB refuse
/// `SET NAMES ucs2` with 1231, as the proxy does).
pub fn can_be_client(charset: &str) -> bool {
    !NOT_CLIENT.contains(&charset.to_ascii_lowercase().as_str())
}

/// Decides how to read statements in `charset`; `Err` holds the reason it is refused.
pub fn decoding_for(charset: &str) -> Result<Decoding, String> {
    let cs = charset.to_ascii_lowercase();
    if REFUSED.contains(&cs.as_str()) {
        return Err(format!(
            "character set '{cs}' is not supported by routekey-proxy: its multibyte characters can contain the byte of '\\', so statements could be misread; use utf8mb4"
        ));
    }
    if NOT_CLIENT.contains(&cs.as_str()) {
        return Err(format!(
            "character set '{cs}' cannot be used as a client character set"
        ));
    }
    Ok(match cs.as_str() {
        "utf8mb4" | "utf8mb3" | "utf8" => Decoding::Utf8,
        _ => Decoding::SingleByte,
    })
}

/// The character set and collation names of a handshake collation id; `None` for ids the
/// table does not know.
pub fn collation_names(id: u8) -> Option<(String, String)> {
    let collation = Collation::resolve(CollationId::from(u16::from(id)));
    match collation.id() {
        CollationId::UNKNOWN_COLLATION_ID => None,
        _ => Some((
            collation.charset().to_owned(),
            collation.collation().to_owned(),
        )),
    }
}

/// A statement decoded to text, with the map from parser positions back to bytes.
#[derive(Debug)]
pub struct Decoded {
    /// The text given to the parser.
    pub text: String,
    /// Character index at which each line starts (line 1 first).
    line_starts: Vec<usize>,
    /// Byte offset of each character, plus the total length at the end; `None` when
    /// characters and bytes coincide.
    char_offsets: Option<Vec<usize>>,
    len: usize,
}

impl Decoded {
    /// Decodes `sql`.
    pub fn new(sql: &[u8], decoding: Decoding) -> Self {
        let mut line_starts = vec![0];
        match decoding {
            Decoding::Utf8 => {
                let mut text = String::with_capacity(sql.len());
                let mut offsets = Vec::with_capacity(sql.len() + 1);
                let mut at = 0;
                for chunk in sql.utf8_chunks() {
                    for (i, ch) in chunk.valid().char_indices() {
                        if ch == '\n' {
                            line_starts.push(offsets.len() + 1);
                        }
                        offsets.push(at + i);
                        text.push(ch);
                    }
                    at += chunk.valid().len();
                    for _ in chunk.invalid() {
                        offsets.push(at);
                        text.push(char::REPLACEMENT_CHARACTER);
                        at += 1;
                    }
                }
                offsets.push(sql.len());
                Self {
                    text,
                    line_starts,
                    char_offsets: Some(offsets),
                    len: sql.len(),
                }
            }
            Decoding::SingleByte => {
                let (text, _) = encoding_rs::WINDOWS_1252.decode_without_bom_handling(sql);
                for (i, &b) in sql.iter().enumerate() {
                    if b == b'\n' {
                        line_starts.push(i + 1);
                    }
                }
                Self {
                    text: text.into_owned(),
                    line_starts,
                    char_offsets: None,
                    len: sql.len(),
                }
            }
        }
    }

    /// The byte offset of a parser location (1-based line and column); `None` when the
    /// location is outside the text (the parser's empty span is line 0).
    pub fn byte_offset(&self, loc: Location) -> Option<usize> {
        let line = usize::try_from(loc.line).ok()?.checked_sub(1)?;
        let col = usize::try_from(loc.column).ok()?.checked_sub(1)?;
        let char_index = self.line_starts.get(line)? + col;
        match &self.char_offsets {
            Some(offsets) => offsets.get(char_index).copied(),
            None => (char_index <= self.len).then_some(char_index),
        }
    }
}

/// Whether the variable `name` holds the name of a character set or a collation
/// (`character_set_client`, `collation_connection`, ...).
pub fn names_a_charset(name: &str) -> bool {
    name.starts_with("character_set") || name.starts_with("collation")
}

/// The character set variables, set together with `SET NAMES` when they agree.
pub const CHARSET_VARS: [&str; 4] = [
    "character_set_client",
    "character_set_connection",
    "character_set_results",
    "collation_connection",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(line: u64, column: u64) -> Location {
        Location { line, column }
    }

    #[test]
    fn utf8_positions_map_to_bytes() {
        let sql = "SELECT 'é🚀'\n, x FROM t".as_bytes();
        let d = Decoded::new(sql, Decoding::Utf8);
        // `x` is line 2, column 3; its byte offset follows the 2+4 byte characters.
        let x = sql.iter().position(|&b| b == b'x').unwrap();
        assert_eq!(d.byte_offset(loc(2, 3)), Some(x));
        assert_eq!(d.byte_offset(loc(1, 1)), Some(0));
        assert_eq!(d.byte_offset(loc(0, 0)), None);
    }

    #[test]
    fn invalid_utf8_becomes_one_char_per_byte() {
        let mut sql = b"SELECT _binary'".to_vec();
        sql.extend_from_slice(&[0xff, 0xfe, 0xc3]);
        sql.extend_from_slice(b"', t");
        let d = Decoded::new(&sql, Decoding::Utf8);
        assert_eq!(d.text.chars().filter(|&c| c == '\u{FFFD}').count(), 3);
        let t = sql.len() - 1;
        let col = d.text.chars().count() as u64;
        assert_eq!(d.byte_offset(loc(1, col)), Some(t));
    }

    #[test]
    fn single_byte_is_identity() {
        let sql = b"SELECT '\xe9'\nFROM t";
        let d = Decoded::new(sql, Decoding::SingleByte);
        assert_eq!(d.text, "SELECT 'é'\nFROM t");
        assert_eq!(d.byte_offset(loc(2, 6)), Some(16));
    }

    #[test]
    fn dangerous_charsets_are_refused() {
        for cs in ["gbk", "SJIS", "big5", "cp932"] {
            assert!(decoding_for(cs).is_err(), "{cs}");
        }
        assert_eq!(decoding_for("utf8mb4"), Ok(Decoding::Utf8));
        assert_eq!(decoding_for("latin1"), Ok(Decoding::SingleByte));
        assert_eq!(decoding_for("binary"), Ok(Decoding::SingleByte));
        assert_eq!(
            collation_names(45),
            Some(("utf8mb4".to_owned(), "utf8mb4_general_ci".to_owned()))
        );
        assert_eq!(collation_names(28).unwrap().0, "gbk");
    }
}
