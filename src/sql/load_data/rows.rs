//! The client's file of a `LOAD DATA`, cut into records and fields as MariaDB's
//! `READ_INFO` (`sql/sql_load.cc`: `read_field`, `next_line`, `find_start_of_fields`)
//! cuts it, so that each record the proxy sends to a shard is the record that shard's
//! server reads: a byte-level port of those functions for delimiters that are ASCII, in a
//! character set whose multibyte characters hold no ASCII byte (utf8mb4, latin1, ...:
//! [`Format::check`]).
//!
//! What the server does with a record's values (conversion to the column's type, `SET`
//! expressions) stays the server's: the proxy reads only the fields it routes by, and the
//! record's bytes go to the shard unchanged.

use std::ops::Range;

/// How fields and lines are delimited (`FIELDS ...`, `LINES ...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Format {
    /// `FIELDS TERMINATED BY` (default tab).
    pub field_end: Vec<u8>,
    /// `[OPTIONALLY] ENCLOSED BY` (default none).
    pub enclosure: Option<u8>,
    /// `ESCAPED BY` (default backslash; `''` for none).
    pub escape: Option<u8>,
    /// `LINES STARTING BY` (default none).
    pub line_start: Vec<u8>,
    /// `LINES TERMINATED BY` (default newline).
    pub line_end: Vec<u8>,
}

impl Default for Format {
    fn default() -> Self {
        Self {
            field_end: b"\t".to_vec(),
            enclosure: None,
            escape: Some(b'\\'),
            line_start: Vec::new(),
            line_end: b"\n".to_vec(),
        }
    }
}

impl Format {
    /// `Err` with the reason for a format the proxy does not cut into records itself:
    /// fixed-width rows (no field terminator), no line terminator, a field terminator equal
    /// to the line terminator (MariaDB then reads no lines), or delimiters outside ASCII.
    pub fn check(&self) -> Result<(), String> {
        if self.field_end.is_empty() {
            return Err("FIELDS TERMINATED BY '' (fixed-width rows)".into());
        }
        if self.line_end.is_empty() {
            return Err("LINES TERMINATED BY ''".into());
        }
        if self.field_end == self.line_end {
            return Err("the same FIELDS and LINES TERMINATED BY".into());
        }
        let delimiters = self
            .field_end
            .iter()
            .chain(&self.line_end)
            .chain(&self.line_start)
            .chain(&self.enclosure)
            .chain(&self.escape);
        if delimiters.clone().any(|b| !b.is_ascii()) {
            return Err("a delimiter outside ASCII".into());
        }
        Ok(())
    }
}

/// One field of a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Its value as the server reads it (escapes undone, enclosure removed); `None` for
    /// NULL (`\N`, or an unenclosed `NULL` when fields may be enclosed).
    pub value: Option<Vec<u8>>,
    /// Its bytes in the record (enclosure included, terminator excluded).
    pub raw: Range<usize>,
}

/// One record: its bytes and the fields read from them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// How many bytes of the input it spans (from the end of the previous record: bytes
    /// before `LINES STARTING BY` included, its line terminator included).
    pub len: usize,
    /// Where its fields begin (after `LINES STARTING BY`).
    pub fields_start: usize,
    /// Its first fields, up to the number asked for.
    pub fields: Vec<Field>,
}

/// What reading the next record from the start of the input found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// A record.
    Record(Record),
    /// The input ends before the record does: read more (or, at the end of the file, the
    /// input is complete and this does not happen).
    NeedMore,
    /// No record is left: the file ended (`len` bytes of it were read and belong to no
    /// record: text before a `LINES STARTING BY` that never comes).
    End(usize),
}

/// A cursor over the input; `None` from [`Cursor::get`] is the end of the input.
struct Cursor<'a> {
    input: &'a [u8],
    pos: usize,
}

/// The end of the input reached: `Err(More)` unless the file has ended.
enum Stop {
    More,
}

impl Cursor<'_> {
    /// The next byte; `Ok(None)` at the end of the file, `Err(More)` at the end of input
    /// that is not the end of the file.
    fn get(&mut self, eof: bool) -> Result<Option<u8>, Stop> {
        match self.input.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                Ok(Some(b))
            }
            None if eof => Ok(None),
            None => Err(Stop::More),
        }
    }

    /// Whether `rest` follows here; consumed when it does (MariaDB's `terminator`, which
    /// is called after the first byte matched).
    fn terminator(&mut self, rest: &[u8], eof: bool) -> Result<bool, Stop> {
        let available = &self.input[self.pos..];
        let n = rest.len().min(available.len());
        if available[..n] != rest[..n] {
            return Ok(false);
        }
        if n < rest.len() {
            return if eof { Ok(false) } else { Err(Stop::More) };
        }
        self.pos += rest.len();
        Ok(true)
    }
}

/// `READ_INFO::unescape`: the byte an escaped byte stands for; `N` marks NULL.
fn unescape(b: u8, null: &mut bool) -> u8 {
    match b {
        b'n' => b'\n',
        b't' => b'\t',
        b'r' => b'\r',
        b'b' => 8,
        b'0' => 0,
        b'Z' => 26,
        b'N' => {
            *null = true;
            b'N'
        }
        other => other,
    }
}

/// How a field ended.
struct FieldEnd {
    field: Field,
    /// The line ended with it (or the file did).
    end_of_line: bool,
}

/// Reads the record at the start of `input` (`eof`: the file ends with it), filling up to
/// `fields` fields. After `IGNORE n LINES`, call [`skip_line`] first.
pub fn next(input: &[u8], eof: bool, format: &Format, fields: usize) -> Next {
    let mut c = Cursor { input, pos: 0 };
    match record(&mut c, eof, format, fields) {
        Ok(next) => next,
        Err(Stop::More) => Next::NeedMore,
    }
}

/// `READ_INFO::next_line` from the start of `input`: the bytes of the next line
/// (escapes honoured, enclosures not), terminator included; `None` when the input ends
/// first and the file goes on. At the end of the file, all of what is left.
pub fn skip_line(input: &[u8], eof: bool, format: &Format) -> Option<usize> {
    let mut c = Cursor { input, pos: 0 };
    match rest_of_line(&mut c, eof, format) {
        Ok(_) => Some(c.pos),
        Err(Stop::More) => None,
    }
}

fn record(c: &mut Cursor<'_>, eof: bool, f: &Format, wanted: usize) -> Result<Next, Stop> {
    if !f.line_start.is_empty() && !start_of_fields(c, eof, f)? {
        return Ok(Next::End(c.pos));
    }
    let fields_start = c.pos;
    let mut fields = Vec::with_capacity(wanted);
    let mut end_of_line = false;
    while fields.len() < wanted.max(1) {
        let Some(end) = field(c, eof, f)? else {
            if fields.is_empty() {
                // No field at all: the file ended.
                return Ok(Next::End(c.pos));
            }
            end_of_line = true;
            break;
        };
        end_of_line = end.end_of_line;
        if fields.len() < wanted {
            fields.push(end.field);
        }
        if end_of_line {
            break;
        }
    }
    if !end_of_line {
        rest_of_line(c, eof, f)?;
    }
    Ok(Next::Record(Record {
        len: c.pos,
        fields_start,
        fields,
    }))
}

/// `READ_INFO::find_start_of_fields`: skips to just after `LINES STARTING BY`; `false`
/// when the file ends first.
fn start_of_fields(c: &mut Cursor<'_>, eof: bool, f: &Format) -> Result<bool, Stop> {
    let prefix = &f.line_start;
    loop {
        match c.get(eof)? {
            None => return Ok(false),
            Some(b) if b == prefix[0] => {
                let rest = &prefix[1..];
                let at = c.pos;
                let available = &c.input[at..];
                let n = rest.len().min(available.len());
                if available[..n] == rest[..n] {
                    if n < rest.len() && !eof {
                        return Err(Stop::More);
                    }
                    if n == rest.len() {
                        c.pos += n;
                        return Ok(true);
                    }
                }
                // Not the prefix: go on from the byte after its first.
            }
            Some(_) => {}
        }
    }
}

/// `READ_INFO::read_field`: the next field, or `None` when the file ends before it.
fn field(c: &mut Cursor<'_>, eof: bool, f: &Format) -> Result<Option<FieldEnd>, Stop> {
    let start = c.pos;
    let Some(first) = c.get(eof)? else {
        return Ok(None);
    };
    let mut value: Vec<u8> = Vec::new();
    let mut null = false;
    let enclosed_by = f.enclosure.filter(|&e| e == first);
    if enclosed_by.is_none() {
        c.pos -= 1;
    }
    let done =
        |value: Vec<u8>, null: bool, enclosed: bool, end_of_line: bool, raw_end: usize| FieldEnd {
            field: Field {
                value: finish_value(value, null, enclosed, f),
                raw: start..raw_end,
            },
            end_of_line,
        };
    loop {
        let before = c.pos;
        let Some(mut b) = c.get(eof)? else {
            // The file ends the field (and the line).
            let enclosed_prefix = enclosed_by.map(|e| {
                let mut v = vec![e];
                v.append(&mut value);
                v
            });
            let value = enclosed_prefix.unwrap_or(value);
            return Ok(Some(done(value, null, false, true, c.pos)));
        };
        if Some(b) == f.escape {
            let Some(next) = c.get(eof)? else {
                value.push(b);
                let value = match enclosed_by {
                    Some(e) => [vec![e], value].concat(),
                    None => value,
                };
                return Ok(Some(done(value, null, false, true, c.pos)));
            };
            // An escape that is also the enclosure doubles like a quote, and escapes
            // nothing else.
            if f.escape != f.enclosure || Some(next) == f.escape {
                value.push(unescape(next, &mut null));
                continue;
            }
            c.pos -= 1;
            b = f.escape.expect("an escape");
        }
        if b == f.line_end[0] && enclosed_by.is_none() && c.terminator(&f.line_end[1..], eof)? {
            return Ok(Some(done(value, null, false, true, before)));
        }
        if Some(b) == enclosed_by {
            match c.get(eof)? {
                Some(n) if Some(n) == enclosed_by => {
                    // Doubled: one enclosure character.
                    value.push(n);
                    continue;
                }
                None => {
                    return Ok(Some(done(value, null, true, true, c.pos)));
                }
                Some(n) => {
                    let after = c.pos - 1;
                    if n == f.line_end[0] && c.terminator(&f.line_end[1..], eof)? {
                        return Ok(Some(done(value, null, true, true, after)));
                    }
                    if n == f.field_end[0] && c.terminator(&f.field_end[1..], eof)? {
                        return Ok(Some(done(value, null, true, false, after)));
                    }
                    // Not the end of the field: the enclosure character is data.
                    c.pos = after;
                    value.push(b);
                    continue;
                }
            }
        }
        if b == f.field_end[0] && enclosed_by.is_none() && c.terminator(&f.field_end[1..], eof)? {
            return Ok(Some(done(value, null, false, false, before)));
        }
        value.push(b);
    }
}

/// NULL as `read_sep_field` decides it: `\N` alone, or an unenclosed `NULL` when fields may
/// be enclosed.
fn finish_value(value: Vec<u8>, null: bool, enclosed: bool, f: &Format) -> Option<Vec<u8>> {
    let literal_null = !enclosed && f.enclosure.is_some() && value == b"NULL";
    if literal_null || (null && value.len() == 1) {
        None
    } else {
        Some(value)
    }
}

/// `READ_INFO::next_line` after a record's last wanted field: the rest of its line.
fn rest_of_line(c: &mut Cursor<'_>, eof: bool, f: &Format) -> Result<(), Stop> {
    loop {
        let Some(b) = c.get(eof)? else {
            return Ok(());
        };
        if Some(b) == f.escape {
            if c.get(eof)?.is_none() {
                return Ok(());
            }
            continue;
        }
        if b == f.line_end[0] && c.terminator(&f.line_end[1..], eof)? {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every record of `file` (the whole file at once): each record's field values.
    fn records(file: &[u8], f: &Format, wanted: usize) -> Vec<Vec<Option<String>>> {
        let mut out = Vec::new();
        let mut at = 0;
        loop {
            match next(&file[at..], true, f, wanted) {
                Next::Record(r) => {
                    assert!(r.len > 0, "a record of no bytes");
                    out.push(
                        r.fields
                            .iter()
                            .map(|f| {
                                f.value
                                    .as_ref()
                                    .map(|v| String::from_utf8_lossy(v).into_owned())
                            })
                            .collect(),
                    );
                    at += r.len;
                }
                Next::End(_) => return out,
                Next::NeedMore => panic!("the whole file was given"),
            }
        }
    }

    fn s(v: &str) -> Option<String> {
        Some(v.to_owned())
    }

    #[test]
    fn tab_separated_with_escapes_and_null() {
        let f = Format::default();
        let file = b"1\ta\\tb\t\\N\n2\t\\\\\tx\n3";
        assert_eq!(
            records(file, &f, 3),
            vec![
                vec![s("1"), s("a\tb"), None],
                vec![s("2"), s("\\"), s("x")],
                vec![s("3")],
            ]
        );
    }

    #[test]
    fn csv_with_enclosures_doubled_quotes_and_newlines_inside() {
        let f = Format {
            field_end: b",".to_vec(),
            enclosure: Some(b'"'),
            line_end: b"\r\n".to_vec(),
            ..Format::default()
        };
        let file = b"\"1\",\"a,\"\"b\"\"\r\nc\",NULL,\"NULL\"\r\n2,x\"y,\r\n";
        assert_eq!(
            records(file, &f, 4),
            vec![
                vec![s("1"), s("a,\"b\"\r\nc"), None, s("NULL")],
                vec![s("2"), s("x\"y"), s("")],
            ]
        );
    }

    #[test]
    fn an_enclosure_not_followed_by_a_terminator_is_data() {
        let f = Format {
            field_end: b",".to_vec(),
            enclosure: Some(b'"'),
            ..Format::default()
        };
        assert_eq!(
            records(b"\"ab\"c,d\",e\n", &f, 2),
            vec![vec![s("ab\"c,d"), s("e")]]
        );
    }

    #[test]
    fn more_fields_than_wanted_skip_to_the_line_end_honouring_escapes() {
        let f = Format::default();
        assert_eq!(
            records(b"1\t2\t3\\\n4\n5\t6\n", &f, 1),
            vec![vec![s("1")], vec![s("5")]]
        );
    }

    #[test]
    fn lines_starting_by_skip_what_comes_before_and_lines_without_it() {
        let f = Format {
            line_start: b"xx".to_vec(),
            ..Format::default()
        };
        assert_eq!(
            records(b"junkxx1\ta\nno prefix\nxx2\tb\nx", &f, 2),
            vec![vec![s("1"), s("a")], vec![s("2"), s("b")]]
        );
    }

    #[test]
    fn multi_byte_terminators_and_an_empty_line() {
        let f = Format {
            field_end: b"||".to_vec(),
            line_end: b"<>".to_vec(),
            ..Format::default()
        };
        assert_eq!(
            records(b"1||a|b<><>2||c<", &f, 2),
            vec![vec![s("1"), s("a|b")], vec![s("")], vec![s("2"), s("c<")]]
        );
    }

    #[test]
    fn input_that_stops_inside_a_record_asks_for_more() {
        let f = Format::default();
        assert_eq!(next(b"1\tab", false, &f, 2), Next::NeedMore);
        let f2 = Format {
            line_end: b"\r\n".to_vec(),
            ..Format::default()
        };
        assert_eq!(next(b"1\tab\r", false, &f2, 2), Next::NeedMore);
        match next(b"1\tab\r\n2", false, &f2, 2) {
            Next::Record(r) => assert_eq!(r.len, 6),
            other => panic!("{other:?}"),
        }
        assert_eq!(skip_line(b"header\tline", false, &f), None);
        assert_eq!(skip_line(b"header\\\nline\nrest", false, &f), Some(13));
    }

    #[test]
    fn formats_the_proxy_does_not_cut_are_refused() {
        let mut f = Format::default();
        f.field_end.clear();
        assert!(f.check().is_err());
        let f = Format {
            field_end: b"\n".to_vec(),
            ..Format::default()
        };
        assert!(f.check().is_err());
        assert!(Format::default().check().is_ok());
    }
}
