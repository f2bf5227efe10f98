//! `LOAD DATA LOCAL INFILE`: the statement as its tokens give it ([`parse`]), and the
//! client's file cut into records and fields exactly as MariaDB cuts them ([`rows`]).
//!
//! Grammar (MariaDB 10.11, `sql_yacc.yy`):
//!
//! ```text
//! LOAD DATA [LOW_PRIORITY | CONCURRENT] [LOCAL] INFILE 'file_name'
//!     [REPLACE | IGNORE]
//!     INTO TABLE tbl_name [PARTITION (p, ...)]
//!     [CHARACTER SET charset_name]
//!     [{FIELDS | COLUMNS} [TERMINATED BY 'string'] [[OPTIONALLY] ENCLOSED BY 'char']
//!         [ESCAPED BY 'char']]
//!     [LINES [STARTING BY 'string'] [TERMINATED BY 'string']]
//!     [IGNORE number {LINES | ROWS}]
//!     [(col_name_or_user_var, ...)]
//!     [SET col_name = expr, ...]
//! ```
//!
//! The sub-clauses of `FIELDS` and of `LINES` may come in any order. Byte ranges are kept
//! so that the statement each shard receives is the client's own text with its table
//! replaced, its `IGNORE n LINES` dropped (the proxy skips those lines once, for the whole
//! file) and, when the proxy issues order ids, the shard key added to its column list.

pub mod rows;

use std::ops::Range;

use super::lexer::{LexMode, Token, TokenKind, splice, unescape_string};

/// A parsed `LOAD DATA LOCAL INFILE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadData {
    /// The file name as the client wrote it (the string's value): the name the client is
    /// asked for.
    pub file_name: Vec<u8>,
    /// The table, unquoted: `(database, name)`.
    pub database: Option<String>,
    /// The table's name.
    pub table: String,
    /// Where the table reference (`db.t` included) stands in the statement.
    pub table_span: Range<usize>,
    /// `PARTITION (...)` follows the table.
    pub partition: bool,
    /// `CHARACTER SET name`, when given.
    pub charset: Option<String>,
    /// How fields and lines are delimited.
    pub format: rows::Format,
    /// `IGNORE n LINES`: lines skipped at the start of the file.
    pub ignore_lines: u64,
    /// Where `IGNORE n LINES` stands.
    pub ignore_span: Option<Range<usize>>,
    /// The column list, when given.
    pub columns: Option<ColumnList>,
    /// The columns the `SET` clause assigns (lower case).
    pub set_columns: Vec<String>,
    /// Executable-comment markers in the statement.
    pub in_executable_comment: bool,
}

/// The column list of a `LOAD DATA`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnList {
    /// Its entries, in order.
    pub items: Vec<Column>,
    /// Where its opening parenthesis stands.
    pub open: usize,
}

/// One entry of the column list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Column {
    /// A column (lower case).
    Name(String),
    /// `@variable` (the field goes to a user variable, for the `SET` clause).
    Variable,
}

impl LoadData {
    /// The field positions of `names` (lower case) in the file, given the table's columns
    /// (`table_columns`, lower case, in order) for a statement without a column list;
    /// `None` for a column no field fills. A column the list names twice takes the last
    /// field, as the server assigns it.
    pub fn positions(&self, table_columns: &[String], names: &[&str]) -> Vec<Option<usize>> {
        names
            .iter()
            .map(|name| match &self.columns {
                Some(list) => list
                    .items
                    .iter()
                    .rposition(|c| matches!(c, Column::Name(n) if n == name)),
                None => table_columns.iter().position(|c| c == name),
            })
            .collect()
    }

    /// How many fields a record fills: the column list's length, else the table's.
    pub fn field_count(&self, table_columns: &[String]) -> usize {
        self.columns
            .as_ref()
            .map_or(table_columns.len(), |c| c.items.len())
    }

    /// The client's text with the table replaced by `physical` (quoted): the statement for
    /// a table that is not sharded, whose file goes to the server as it is.
    pub fn with_table(&self, sql: &[u8], physical: &str) -> Vec<u8> {
        splice(
            sql,
            vec![(self.table_span.clone(), physical.as_bytes().to_vec())],
        )
    }

    /// The statement for one shard: the client's text with the table replaced by
    /// `physical` (quoted), `IGNORE n LINES` dropped, and `prepend` (`order_id`, quoted)
    /// put first in the column list (the proxy puts the issued id first in each record).
    pub fn for_shard(&self, sql: &[u8], physical: &str, prepend: Option<&str>) -> Vec<u8> {
        let mut edits: Vec<(Range<usize>, Vec<u8>)> =
            vec![(self.table_span.clone(), physical.as_bytes().to_vec())];
        if let Some(span) = &self.ignore_span {
            edits.push((span.clone(), b" ".to_vec()));
        }
        if let (Some(list), Some(column)) = (&self.columns, prepend) {
            let mut with = column.as_bytes().to_vec();
            with.extend_from_slice(if list.items.is_empty() { b"" } else { b", " });
            edits.push((list.open + 1..list.open + 1, with));
        }
        splice(sql, edits)
    }
}

/// Whether a statement's tokens begin `LOAD DATA [LOW_PRIORITY | CONCURRENT] LOCAL`:
/// the client's file, which the proxy may load; `LOAD DATA INFILE` reads one on the
/// server's host.
pub fn is_local(sql: &[u8], tokens: &[Token]) -> bool {
    let words: Vec<&Token> = tokens.iter().filter(|t| !t.is_exec_marker()).collect();
    let word = |i: usize, w: &str| words.get(i).is_some_and(|t| t.is_word(sql, w));
    if !(word(0, "load") && word(1, "data")) {
        return false;
    }
    let at = if word(2, "low_priority") || word(2, "concurrent") {
        3
    } else {
        2
    };
    word(at, "local")
}

/// Reads a `LOAD DATA LOCAL INFILE` statement. `Err` holds what is wrong (a syntax error
/// for the client).
pub fn parse(sql: &[u8], tokens: &[Token], mode: LexMode) -> Result<LoadData, String> {
    let in_executable_comment = tokens.iter().any(Token::is_exec_marker);
    let t: Vec<&Token> = tokens.iter().filter(|t| !t.is_exec_marker()).collect();
    let mut p = Parser {
        sql,
        t: &t,
        i: 0,
        mode,
    };
    p.expect("load")?;
    p.expect("data")?;
    let _ = p.eat("low_priority") || p.eat("concurrent");
    p.expect("local")?;
    p.expect("infile")?;
    let file_name = p.string()?;
    let _ = p.eat("replace") || p.eat("ignore");
    p.expect("into")?;
    p.expect("table")?;
    let (database, table, table_span) = p.table()?;
    let partition = p.eat("partition");
    if partition {
        p.skip_parenthesized()?;
    }
    let mut charset = None;
    if p.at("character") || p.at("charset") {
        if !p.eat("charset") {
            p.expect("character")?;
            p.expect("set")?;
        }
        charset = Some(p.name()?.to_ascii_lowercase());
    }
    let mut format = rows::Format::default();
    if p.eat("fields") || p.eat("columns") {
        let mut any = false;
        loop {
            if p.eat("terminated") {
                p.expect("by")?;
                format.field_end = p.string()?;
            } else if p.at("optionally") || p.at("enclosed") {
                let _ = p.eat("optionally");
                p.expect("enclosed")?;
                p.expect("by")?;
                format.enclosure = one_byte(&p.string()?, "ENCLOSED BY")?;
            } else if p.eat("escaped") {
                p.expect("by")?;
                format.escape = one_byte(&p.string()?, "ESCAPED BY")?;
            } else {
                break;
            }
            any = true;
        }
        if !any {
            return Err("FIELDS takes TERMINATED BY, ENCLOSED BY or ESCAPED BY".into());
        }
    }
    if p.eat("lines") {
        let mut any = false;
        loop {
            if p.eat("starting") {
                p.expect("by")?;
                format.line_start = p.string()?;
            } else if p.eat("terminated") {
                p.expect("by")?;
                format.line_end = p.string()?;
            } else {
                break;
            }
            any = true;
        }
        if !any {
            return Err("LINES takes STARTING BY or TERMINATED BY".into());
        }
    }
    let mut ignore_lines = 0;
    let mut ignore_span = None;
    if p.at("ignore") {
        let start = p.t[p.i].range.start;
        p.i += 1;
        let n = p.t.get(p.i).filter(|t| t.kind == TokenKind::Number);
        ignore_lines = n
            .and_then(|t| std::str::from_utf8(t.bytes(sql)).ok()?.parse().ok())
            .ok_or("IGNORE takes a number of lines")?;
        p.i += 1;
        if !(p.eat("lines") || p.eat("rows")) {
            return Err("IGNORE n takes LINES or ROWS".into());
        }
        ignore_span = Some(start..p.t[p.i - 1].range.end);
    }
    let mut columns = None;
    if p.at_punct("(") {
        columns = Some(p.column_list()?);
    }
    let mut set_columns = Vec::new();
    if p.eat("set") {
        set_columns = p.assignments()?;
    }
    if p.i != p.t.len() {
        return Err(format!(
            "unexpected '{}' in LOAD DATA",
            String::from_utf8_lossy(p.t[p.i].bytes(sql))
        ));
    }
    Ok(LoadData {
        file_name,
        database,
        table,
        table_span,
        partition,
        charset,
        format,
        ignore_lines,
        ignore_span,
        columns,
        set_columns,
        in_executable_comment,
    })
}

fn one_byte(value: &[u8], what: &str) -> Result<Option<u8>, String> {
    match value {
        [] => Ok(None),
        [b] => Ok(Some(*b)),
        _ => Err(format!("{what} takes one character")),
    }
}

struct Parser<'a> {
    sql: &'a [u8],
    t: &'a [&'a Token],
    i: usize,
    mode: LexMode,
}

impl Parser<'_> {
    fn at(&self, word: &str) -> bool {
        self.t
            .get(self.i)
            .is_some_and(|t| t.is_word(self.sql, word))
    }

    fn at_punct(&self, p: &str) -> bool {
        self.t.get(self.i).is_some_and(|t| t.is_punct(self.sql, p))
    }

    fn eat(&mut self, word: &str) -> bool {
        let at = self.at(word);
        if at {
            self.i += 1;
        }
        at
    }

    fn expect(&mut self, word: &str) -> Result<(), String> {
        if self.eat(word) {
            Ok(())
        } else {
            Err(format!(
                "LOAD DATA: expected {} here",
                word.to_ascii_uppercase()
            ))
        }
    }

    /// A string literal's value (or a hexadecimal literal's bytes).
    fn string(&mut self) -> Result<Vec<u8>, String> {
        let Some(t) = self.t.get(self.i) else {
            return Err("LOAD DATA: expected a string".into());
        };
        let raw = t.bytes(self.sql);
        let value = match t.kind {
            TokenKind::String => unescape_string(raw, self.mode),
            TokenKind::HexOrBit => hex_literal(raw).ok_or("LOAD DATA: a bit literal here")?,
            _ => return Err("LOAD DATA: expected a string".into()),
        };
        self.i += 1;
        Ok(value)
    }

    /// A name (bare, quoted, or a string: `CHARACTER SET 'utf8mb4'`).
    fn name(&mut self) -> Result<String, String> {
        let Some(t) = self.t.get(self.i) else {
            return Err("LOAD DATA: expected a name".into());
        };
        let name = match t.kind {
            TokenKind::Word | TokenKind::QuotedIdent => {
                super::lexer::ident_text(self.sql, t, self.mode)
            }
            TokenKind::String => {
                String::from_utf8_lossy(&unescape_string(t.bytes(self.sql), self.mode)).into_owned()
            }
            _ => return Err("LOAD DATA: expected a name".into()),
        };
        self.i += 1;
        Ok(name)
    }

    /// `[db.]table`: names and the span of the whole reference.
    fn table(&mut self) -> Result<(Option<String>, String, Range<usize>), String> {
        let start = self
            .t
            .get(self.i)
            .map(|t| t.range.start)
            .ok_or("LOAD DATA: expected a table")?;
        let first = self.name()?;
        if self.at_punct(".") {
            self.i += 1;
            let second = self.name()?;
            let end = self.t[self.i - 1].range.end;
            return Ok((Some(first), second, start..end));
        }
        Ok((None, first, start..self.t[self.i - 1].range.end))
    }

    fn skip_parenthesized(&mut self) -> Result<(), String> {
        if !self.at_punct("(") {
            return Err("PARTITION takes a list in parentheses".into());
        }
        let mut depth = 0;
        while let Some(t) = self.t.get(self.i) {
            self.i += 1;
            if t.is_punct(self.sql, "(") {
                depth += 1;
            } else if t.is_punct(self.sql, ")") {
                depth -= 1;
                if depth == 0 {
                    return Ok(());
                }
            }
        }
        Err("an unclosed parenthesis".into())
    }

    fn column_list(&mut self) -> Result<ColumnList, String> {
        let open = self.t[self.i].range.start;
        self.i += 1;
        let mut items = Vec::new();
        if self.at_punct(")") {
            self.i += 1;
            return Ok(ColumnList { items, open });
        }
        loop {
            let Some(t) = self.t.get(self.i) else {
                return Err("an unclosed column list".into());
            };
            if t.kind == TokenKind::UserVariable {
                self.i += 1;
                items.push(Column::Variable);
            } else {
                let mut name = self.name()?;
                // `t.col`: the column's name is the last part.
                while self.at_punct(".") {
                    self.i += 1;
                    name = self.name()?;
                }
                items.push(Column::Name(name.to_ascii_lowercase()));
            }
            if self.at_punct(",") {
                self.i += 1;
                continue;
            }
            if self.at_punct(")") {
                self.i += 1;
                return Ok(ColumnList { items, open });
            }
            return Err("the column list: expected ',' or ')'".into());
        }
    }

    /// `col = expr, ...` to the end: the columns assigned.
    fn assignments(&mut self) -> Result<Vec<String>, String> {
        let mut columns = Vec::new();
        loop {
            let mut name = self.name()?;
            while self.at_punct(".") {
                self.i += 1;
                name = self.name()?;
            }
            columns.push(name.to_ascii_lowercase());
            if !(self.at_punct("=") || self.at_punct(":=")) {
                return Err("SET: expected '=' after the column".into());
            }
            self.i += 1;
            // The expression runs to the next comma outside parentheses.
            let mut depth = 0i32;
            let mut any = false;
            while let Some(t) = self.t.get(self.i) {
                if t.is_punct(self.sql, "(") {
                    depth += 1;
                } else if t.is_punct(self.sql, ")") {
                    depth -= 1;
                } else if depth == 0 && t.is_punct(self.sql, ",") {
                    break;
                }
                any = true;
                self.i += 1;
            }
            if !any {
                return Err("SET: an assignment without a value".into());
            }
            if self.i == self.t.len() {
                return Ok(columns);
            }
            self.i += 1;
        }
    }
}

/// The bytes of `X'0A'` or `0x0A`.
fn hex_literal(raw: &[u8]) -> Option<Vec<u8>> {
    let digits = if raw.len() >= 3 && (raw[0] == b'x' || raw[0] == b'X') && raw[1] == b'\'' {
        &raw[2..raw.len() - 1]
    } else if raw.len() >= 2 && raw[0] == b'0' && (raw[1] == b'x' || raw[1] == b'X') {
        &raw[2..]
    } else {
        return None;
    };
    let text = std::str::from_utf8(digits).ok()?;
    let padded = if text.len() % 2 == 1 {
        format!("0{text}")
    } else {
        text.to_owned()
    };
    (0..padded.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&padded[i..i + 2], 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::lexer::lex;

    fn load(text: &str) -> Result<LoadData, String> {
        let lexed = lex(text.as_bytes(), LexMode::default());
        parse(text.as_bytes(), &lexed.tokens, LexMode::default())
    }

    #[test]
    fn the_whole_grammar_is_read() {
        let sql = "LOAD DATA LOW_PRIORITY LOCAL INFILE '/tmp/o.csv' REPLACE INTO TABLE orders.`t_order` CHARACTER SET utf8mb4 FIELDS ESCAPED BY '' OPTIONALLY ENCLOSED BY '\"' TERMINATED BY ',' LINES TERMINATED BY '\\r\\n' STARTING BY 'x' IGNORE 1 LINES (order_id, @skip, Channel, t.region) SET note = CONCAT('a', ','), status = 'NEW'";
        let l = load(sql).unwrap();
        assert_eq!(l.file_name, b"/tmp/o.csv");
        assert_eq!(l.database.as_deref(), Some("orders"));
        assert_eq!(l.table, "t_order");
        assert_eq!(&sql[l.table_span.clone()], "orders.`t_order`");
        assert_eq!(l.charset.as_deref(), Some("utf8mb4"));
        assert_eq!(
            l.format,
            rows::Format {
                field_end: b",".to_vec(),
                enclosure: Some(b'"'),
                escape: None,
                line_start: b"x".to_vec(),
                line_end: b"\r\n".to_vec(),
            }
        );
        assert_eq!(l.ignore_lines, 1);
        assert_eq!(&sql[l.ignore_span.clone().unwrap()], "IGNORE 1 LINES");
        assert_eq!(
            l.columns.as_ref().unwrap().items,
            vec![
                Column::Name("order_id".into()),
                Column::Variable,
                Column::Name("channel".into()),
                Column::Name("region".into()),
            ]
        );
        assert_eq!(l.set_columns, vec!["note", "status"]);
        // A column named twice: the server assigns the last field.
        let twice =
            load("LOAD DATA LOCAL INFILE 'f' INTO TABLE t (order_id, note, order_id)").unwrap();
        assert_eq!(
            twice.positions(&[], &["order_id", "note"]),
            vec![Some(2), Some(1)]
        );
        let shard = String::from_utf8(l.for_shard(
            sql.as_bytes(),
            "`order_shards`.`t_order_3`",
            Some("`order_id`"),
        ))
        .unwrap();
        assert!(shard.contains("INTO TABLE `order_shards`.`t_order_3` CHARACTER SET"));
        assert!(!shard.contains("IGNORE 1"));
        assert!(shard.contains("(`order_id`, order_id, @skip"));
    }

    #[test]
    fn defaults_and_refusals() {
        let l = load("load data local infile 'f' into table t_order").unwrap();
        assert_eq!(l.format, rows::Format::default());
        assert_eq!(l.columns, None);
        assert_eq!(l.ignore_lines, 0);
        assert!(load("LOAD DATA LOCAL INFILE 'f' INTO TABLE t FIELDS ENCLOSED BY 'ab'").is_err());
        assert!(load("LOAD DATA LOCAL INFILE 'f' INTO TABLE t FIELDS").is_err());
        assert!(load("LOAD DATA LOCAL INFILE f INTO TABLE t").is_err());
        assert!(load("LOAD DATA LOCAL INFILE 'f' INTO TABLE t (a, b").is_err());
        assert!(load("LOAD DATA LOCAL INFILE 'f' INTO TABLE t extra").is_err());
        let hex =
            load("LOAD DATA LOCAL INFILE 'f' INTO TABLE t LINES TERMINATED BY X'0D0A'").unwrap();
        assert_eq!(hex.format.line_end, b"\r\n");
        assert!(
            load("LOAD DATA LOCAL INFILE 'f' INTO TABLE t PARTITION (p0)")
                .unwrap()
                .partition
        );
    }

    #[test]
    fn only_local_loads_are_local() {
        let local = |text: &str| {
            let lexed = lex(text.as_bytes(), LexMode::default());
            is_local(text.as_bytes(), &lexed.tokens)
        };
        assert!(local("LOAD DATA LOCAL INFILE 'f' INTO TABLE t"));
        assert!(local("load data concurrent local infile 'f' into table t"));
        assert!(!local("LOAD DATA INFILE '/etc/passwd' INTO TABLE t"));
        assert!(!local("LOAD XML LOCAL INFILE 'f' INTO TABLE t"));
    }
}
