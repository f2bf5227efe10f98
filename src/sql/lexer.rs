//! A byte-level MySQL lexer: fast enough to run on every statement.
//!
//! It does not build a syntax tree. It finds statement boundaries (`;` outside strings and
//! comments), the byte range of every token, the literals (so statements that differ only in
//! literals share one analysis, see `super::shape`), and the comments (sqlcommenter hints).
//! It works on the client's bytes directly: every character set the proxy accepts keeps
//! ASCII bytes out of its multibyte characters, so quotes, backslashes and `;` are found
//! without decoding.

use std::ops::Range;

/// How strings and quotes are read, from the session's `sql_mode`, and which executable
/// comments the server runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LexMode {
    /// `NO_BACKSLASH_ESCAPES`: a backslash in a string is an ordinary character.
    pub no_backslash_escapes: bool,
    /// `ANSI_QUOTES`: `"` quotes identifiers, not strings.
    pub ansi_quotes: bool,
    /// `PIPES_AS_CONCAT`: `||` concatenates; otherwise it is OR. The lexer reads both the
    /// same; the analysis depends on it.
    pub pipes_as_concat: bool,
    /// The backends' version as MariaDB numbers it (10.11.19 is 101119): a versioned
    /// executable comment the server skips is a plain comment here too.
    pub server_version: u32,
}

impl Default for LexMode {
    fn default() -> Self {
        Self {
            no_backslash_escapes: false,
            ansi_quotes: false,
            pipes_as_concat: false,
            server_version: 101100,
        }
    }
}

impl LexMode {
    /// This mode under the session's `sql_mode` as the server reads it back (mode names,
    /// comma-separated, combination modes such as `ANSI` expanded; `ANSI` itself counts
    /// too): its escaping, quoting and `||`; the server version stays.
    pub fn with_sql_mode(self, sql_mode: &str) -> LexMode {
        let has = |name: &str| {
            sql_mode
                .split(',')
                .any(|m| m.trim().eq_ignore_ascii_case(name))
        };
        LexMode {
            no_backslash_escapes: has("NO_BACKSLASH_ESCAPES"),
            ansi_quotes: has("ANSI_QUOTES") || has("ANSI"),
            pipes_as_concat: has("PIPES_AS_CONCAT") || has("ANSI"),
            server_version: self.server_version,
        }
    }

    /// Whether MariaDB runs the content of `/*!NNNNN ...*/` or `/*M!NNNNNN ...*/`: always
    /// without a version; else when the version is at most the server's, except `/*!`
    /// versions 50700-99999 (MySQL's, skipped). As MariaDB's lexer (sql_lex.cc) reads it:
    /// 5 digits, or 6 when the sixth is a digit, as a number, so `/*!050800` is 50800.
    pub fn runs_versioned_comment(&self, mariadb_only: bool, version: Option<u32>) -> bool {
        match version {
            None => true,
            Some(v) if !mariadb_only && (50700..=99999).contains(&v) => false,
            Some(v) => v <= self.server_version,
        }
    }
}

/// Where the `*/` closing a comment body starts, as MariaDB's `consume_comment` finds it:
/// with `nesting` left, a `/*` inside opens a nested comment that its own `*/` closes.
fn comment_close(body: &[u8], nesting: usize) -> Option<usize> {
    let mut i = 0;
    while i + 1 < body.len() {
        if nesting > 0 && body[i] == b'/' && body[i + 1] == b'*' {
            let nested = comment_close(&body[i + 2..], nesting - 1)?;
            i += 2 + nested + 2;
            continue;
        }
        if body[i] == b'*' && body[i + 1] == b'/' {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// A bare word: keyword or identifier.
    Word,
    /// A quoted identifier (`` `x` ``, or `"x"` under ANSI_QUOTES).
    QuotedIdent,
    /// A number: `12`, `1.5`, `1e3`, `.5`.
    Number,
    /// A quoted string, `N'..'` included.
    String,
    /// A hexadecimal or bit literal: `0x1F`, `X'1F'`, `0b101`, `B'101'`.
    HexOrBit,
    /// `@name` or `@'name'`.
    UserVariable,
    /// `@@name`, `@@session.name`.
    SystemVariable,
    /// `?`.
    Placeholder,
    /// One punctuation or operator character, or `:=`.
    Punct,
    /// The opening of an executable comment: `/*!50001` or `/*M!100100`.
    ExecCommentOpen,
    /// The `*/` closing an executable comment.
    ExecCommentClose,
}

/// One token: its kind and byte range in the statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// What it is.
    pub kind: TokenKind,
    /// Byte range in the statement text.
    pub range: Range<usize>,
}

impl Token {
    /// Whether this is the opening or closing marker of an executable comment (`/*!`,
    /// `*/`): the server reads what stands between as code, so readers of a statement's
    /// words skip the markers themselves.
    pub fn is_exec_marker(&self) -> bool {
        matches!(
            self.kind,
            TokenKind::ExecCommentOpen | TokenKind::ExecCommentClose
        )
    }

    /// The token's bytes.
    pub fn bytes<'a>(&self, sql: &'a [u8]) -> &'a [u8] {
        &sql[self.range.clone()]
    }

    /// True for a word equal to `keyword` (ASCII case-insensitive).
    pub fn is_word(&self, sql: &[u8], keyword: &str) -> bool {
        self.kind == TokenKind::Word && self.bytes(sql).eq_ignore_ascii_case(keyword.as_bytes())
    }

    /// True for the punctuation `p`.
    pub fn is_punct(&self, sql: &[u8], p: &str) -> bool {
        self.kind == TokenKind::Punct && self.bytes(sql) == p.as_bytes()
    }

    /// True for literals: the parts of a statement that do not change its shape.
    pub fn is_literal(&self) -> bool {
        matches!(
            self.kind,
            TokenKind::Number | TokenKind::String | TokenKind::HexOrBit
        )
    }
}

/// A comment that is not executable: `/* .. */`, `-- ..`, `# ..`. Hints live here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    /// Byte range of the comment body, delimiters excluded.
    pub body: Range<usize>,
    /// `/*+ .. */`: a MySQL optimizer hint, part of the statement's shape.
    pub optimizer_hint: bool,
}

/// The lexed form of one statement.
#[derive(Debug, Clone, Default)]
pub struct Lexed {
    /// Tokens in order (whitespace and plain comments left out).
    pub tokens: Vec<Token>,
    /// Plain comments and optimizer hints, in order.
    pub comments: Vec<Comment>,
    /// For each token, whether whitespace or a comment precedes it.
    pub spaced: Vec<bool>,
    /// A string, quoted identifier or comment that never closes.
    pub unterminated: bool,
    /// Its strings were read with a backslash as an ordinary character
    /// (`NO_BACKSLASH_ESCAPES`).
    pub no_backslash_escapes: bool,
}

/// Splits text into statements at `;` outside strings, comments and compound bodies
/// (`CREATE PROCEDURE ... BEGIN ...; ... END`). Returns byte ranges, each without its `;`,
/// blank statements (only whitespace or comments) dropped.
pub fn split_statements(sql: &[u8], mode: LexMode) -> Vec<Range<usize>> {
    split_query(sql, mode)
        .into_iter()
        .filter_map(|p| match p {
            Piece::Statement(r) => Some(r),
            _ => None,
        })
        .collect()
}

/// One piece of a query of several statements, as MariaDB reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// A statement (its range, without its `;`).
    Statement(Range<usize>),
    /// Nothing but whitespace or comments before a `;`, with a statement after it
    /// (`SELECT 1;; SELECT 2`): MariaDB answers it with a syntax error (after the last
    /// statement, `SELECT 1;;`, it is nothing).
    Empty,
    /// Comments, and nothing else, after the last statement (`SELECT 1; -- c`, `SELECT 1;
    /// /* c */ ;`): MariaDB answers them with an OK.
    TrailingComment,
}

/// Splits a query into its pieces at `;` (see [`split_statements`]): statements, and the
/// empty pieces MariaDB answers too ([`Piece`]). Whitespace after the last `;` is no piece.
pub fn split_query(sql: &[u8], mode: LexMode) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut lexer = Lexer::new(sql, mode);
    let mut start = 0;
    let mut tokens_in_statement = 0usize;
    let mut compound = false;
    let mut commented = false;
    // Comments since the last statement (in empty pieces or after the last `;`).
    let mut comments_after = false;
    // The first words of the statement (no allocation: this runs for every query).
    let mut first_words: [Range<usize>; 4] = Default::default();
    let mut words_seen = 0;
    while let Some(token) = lexer.next_token(&mut |_| commented = true) {
        if token.is_punct(sql, ";") && !compound {
            out.push(if tokens_in_statement > 0 {
                comments_after = false;
                Piece::Statement(start..token.range.start)
            } else {
                comments_after |= commented;
                Piece::Empty
            });
            start = token.range.end;
            tokens_in_statement = 0;
            words_seen = 0;
            commented = false;
            continue;
        }
        tokens_in_statement += 1;
        if words_seen < first_words.len() && token.kind == TokenKind::Word {
            first_words[words_seen] = token.range.clone();
            words_seen += 1;
            // CREATE [DEFINER=..] PROCEDURE|FUNCTION|TRIGGER|EVENT keeps its `;` inside.
            let word = |i: usize| &sql[first_words[i].clone()];
            if word(0).eq_ignore_ascii_case(b"create")
                && (1..words_seen).any(|i| {
                    [&b"procedure"[..], b"function", b"trigger", b"event"]
                        .iter()
                        .any(|k| word(i).eq_ignore_ascii_case(k))
                })
            {
                compound = true;
            }
        }
    }
    if tokens_in_statement > 0 {
        out.push(Piece::Statement(start..sql.len()));
    } else {
        let last = out
            .iter()
            .rposition(|p| matches!(p, Piece::Statement(_)))
            .map_or(0, |i| i + 1);
        out.truncate(last);
        if (commented || comments_after) && !out.is_empty() {
            out.push(Piece::TrailingComment);
        }
    }
    out
}

/// Lexes one statement.
pub fn lex(sql: &[u8], mode: LexMode) -> Lexed {
    let mut lexer = Lexer::new(sql, mode);
    // About one token per 4 bytes of SQL (`SELECT * FROM t_order WHERE order_id = 1`: 8
    // tokens in 39 bytes), so a typical statement grows neither vector.
    let guess = sql.len() / 4 + 4;
    let mut lexed = Lexed {
        tokens: Vec::with_capacity(guess),
        spaced: Vec::with_capacity(guess),
        ..Lexed::default()
    };
    let mut comments = Vec::new();
    while let Some(token) = lexer.next_token(&mut |c| comments.push(c)) {
        lexed.spaced.push(lexer.take_spaced());
        lexed.tokens.push(token);
    }
    lexed.comments = comments;
    lexed.unterminated = lexer.unterminated;
    lexed.no_backslash_escapes = mode.no_backslash_escapes;
    lexed
}

struct Lexer<'a> {
    sql: &'a [u8],
    pos: usize,
    mode: LexMode,
    in_exec_comment: bool,
    spaced: bool,
    unterminated: bool,
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

impl<'a> Lexer<'a> {
    fn new(sql: &'a [u8], mode: LexMode) -> Self {
        Self {
            sql,
            pos: 0,
            mode,
            in_exec_comment: false,
            spaced: false,
            unterminated: false,
        }
    }

    fn take_spaced(&mut self) -> bool {
        std::mem::replace(&mut self.spaced, false)
    }

    fn peek(&self, ahead: usize) -> Option<u8> {
        self.sql.get(self.pos + ahead).copied()
    }

    /// The next token; comments are reported to `on_comment` and skipped.
    fn next_token(&mut self, on_comment: &mut dyn FnMut(Comment)) -> Option<Token> {
        loop {
            let b = self.peek(0)?;
            let start = self.pos;
            match b {
                b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c => {
                    self.pos += 1;
                    self.spaced = true;
                }
                b'#' => {
                    self.skip_line_comment(start, 1, on_comment);
                }
                // `--` then a space or a control character (MariaDB's my_isspace/my_iscntrl:
                // DEL included) starts a comment.
                b'-' if self.peek(1) == Some(b'-')
                    && self.peek(2).is_none_or(|c| c <= b' ' || c == 0x7f) =>
                {
                    self.skip_line_comment(start, 2, on_comment);
                }
                b'/' if self.peek(1) == Some(b'*') => {
                    if let Some(token) = self.block_comment(start, on_comment) {
                        return Some(token);
                    }
                }
                b'*' if self.in_exec_comment && self.peek(1) == Some(b'/') => {
                    self.pos += 2;
                    self.in_exec_comment = false;
                    return Some(self.token(TokenKind::ExecCommentClose, start));
                }
                _ => return Some(self.token_at(b, start)),
            }
        }
    }

    fn skip_line_comment(
        &mut self,
        start: usize,
        prefix: usize,
        on_comment: &mut dyn FnMut(Comment),
    ) {
        let end = self.sql[start..]
            .iter()
            .position(|&c| c == b'\n')
            .map_or(self.sql.len(), |p| start + p);
        on_comment(Comment {
            body: start + prefix..end,
            optimizer_hint: false,
        });
        self.pos = end;
        self.spaced = true;
    }

    /// A `/* */` comment; returns a token for the opening of an executable comment.
    fn block_comment(
        &mut self,
        start: usize,
        on_comment: &mut dyn FnMut(Comment),
    ) -> Option<Token> {
        let after = start + 2;
        let exec_prefix = match (self.sql.get(after), self.sql.get(after + 1)) {
            (Some(b'!'), _) => Some(1),
            (Some(b'M'), Some(b'!')) => Some(2),
            _ => None,
        };
        if let Some(prefix) = exec_prefix {
            // Inside a running executable comment MariaDB reads another `/*!` the same way
            // (its content runs too; the next `*/` ends both): `/*! /*! FROM db.t -- */
            // */` runs `FROM db.t`.
            let digits_start = after + prefix;
            let mut end = digits_start;
            while self.sql.get(end).is_some_and(u8::is_ascii_digit) && end - digits_start < 6 {
                end += 1;
            }
            // Fewer than 5 digits are no version: MariaDB runs them as text
            // (`/*!12where*/` is the alias `12where`).
            if end - digits_start < 5 {
                end = digits_start;
            }
            let version = std::str::from_utf8(&self.sql[digits_start..end])
                .ok()
                .and_then(|v| v.parse().ok());
            if self.mode.runs_versioned_comment(prefix == 2, version) {
                self.pos = end;
                if self.in_exec_comment {
                    // The marker is dropped; the text after it is read as code.
                    return None;
                }
                self.in_exec_comment = true;
                return Some(self.token(TokenKind::ExecCommentOpen, start));
            }
            // A version the server skips: a comment in which MariaDB allows one nested
            // `/* */` (consume_comment(lip, 1)).
        }
        let skipped_versioned = exec_prefix.is_some();
        let close =
            comment_close(&self.sql[after..], usize::from(skipped_versioned)).map(|p| after + p);
        let (body_end, end) = match close {
            Some(c) => (c, c + 2),
            None => {
                self.unterminated = true;
                (self.sql.len(), self.sql.len())
            }
        };
        on_comment(Comment {
            body: after..body_end,
            optimizer_hint: self.sql.get(after) == Some(&b'+'),
        });
        self.pos = end;
        self.spaced = true;
        None
    }

    fn token(&self, kind: TokenKind, start: usize) -> Token {
        Token {
            kind,
            range: start..self.pos,
        }
    }

    fn token_at(&mut self, b: u8, start: usize) -> Token {
        match b {
            b'\'' => {
                self.quoted(b'\'', true);
                self.token(TokenKind::String, start)
            }
            b'"' if !self.mode.ansi_quotes => {
                self.quoted(b'"', true);
                self.token(TokenKind::String, start)
            }
            b'"' => {
                self.quoted(b'"', false);
                self.token(TokenKind::QuotedIdent, start)
            }
            b'`' => {
                self.quoted(b'`', false);
                self.token(TokenKind::QuotedIdent, start)
            }
            b'@' => self.variable(start),
            b'?' => {
                self.pos += 1;
                self.token(TokenKind::Placeholder, start)
            }
            b'0'..=b'9' => self.number_or_word(start),
            b'.' if self.peek(1).is_some_and(|c| c.is_ascii_digit()) => self.number_or_word(start),
            b':' if self.peek(1) == Some(b'=') => {
                self.pos += 2;
                self.token(TokenKind::Punct, start)
            }
            c if is_ident_byte(c) => self.word(start),
            _ => {
                self.pos += 1;
                self.token(TokenKind::Punct, start)
            }
        }
    }

    /// Moves past a quoted run starting at `self.pos`; the quote doubled stands for itself.
    fn quoted(&mut self, quote: u8, backslash: bool) {
        let escapes = backslash && !self.mode.no_backslash_escapes;
        self.pos += 1;
        loop {
            match self.peek(0) {
                None => {
                    self.unterminated = true;
                    return;
                }
                // A backslash as the last byte escapes nothing: the run ends with the text
                // (tokens never reach past it).
                Some(b'\\') if escapes => self.pos = (self.pos + 2).min(self.sql.len()),
                Some(c) if c == quote => {
                    self.pos += 1;
                    if self.peek(0) == Some(quote) {
                        self.pos += 1;
                    } else {
                        return;
                    }
                }
                Some(_) => self.pos += 1,
            }
        }
        // unreachable: the loop returns
    }

    fn variable(&mut self, start: usize) -> Token {
        self.pos += 1;
        if self.peek(0) == Some(b'@') {
            self.pos += 1;
            // @@session.name, @@global.name, @@name
            while self.peek(0).is_some_and(|c| is_ident_byte(c) || c == b'.') {
                self.pos += 1;
            }
            return self.token(TokenKind::SystemVariable, start);
        }
        match self.peek(0) {
            Some(q @ (b'\'' | b'"' | b'`')) => self.quoted(q, q != b'`'),
            _ => {
                while self.peek(0).is_some_and(|c| is_ident_byte(c) || c == b'.') {
                    self.pos += 1;
                }
            }
        }
        self.token(TokenKind::UserVariable, start)
    }

    fn word(&mut self, start: usize) -> Token {
        // X'..', B'..', N'..' literals.
        if self.peek(1) == Some(b'\'') {
            match self.sql[start].to_ascii_lowercase() {
                b'x' | b'b' => {
                    self.pos += 1;
                    self.quoted(b'\'', false);
                    return self.token(TokenKind::HexOrBit, start);
                }
                b'n' => {
                    self.pos += 1;
                    self.quoted(b'\'', true);
                    return self.token(TokenKind::String, start);
                }
                _ => {}
            }
        }
        while self.peek(0).is_some_and(is_ident_byte) {
            self.pos += 1;
        }
        self.token(TokenKind::Word, start)
    }

    /// Numbers; MySQL identifiers may start with digits (`1abc`), so a run of digits that
    /// continues with identifier bytes is a word.
    fn number_or_word(&mut self, start: usize) -> Token {
        let sql = self.sql;
        if sql[start] == b'0' && matches!(sql.get(start + 1), Some(b'x' | b'b')) {
            let hex = sql[start + 1] == b'x';
            let mut end = start + 2;
            while sql.get(end).is_some_and(|c| {
                if hex {
                    c.is_ascii_hexdigit()
                } else {
                    *c == b'0' || *c == b'1'
                }
            }) {
                end += 1;
            }
            if end > start + 2 && !sql.get(end).is_some_and(|c| is_ident_byte(*c)) {
                self.pos = end;
                return self.token(TokenKind::HexOrBit, start);
            }
            return self.word(start);
        }
        let mut end = start;
        while sql.get(end).is_some_and(u8::is_ascii_digit) {
            end += 1;
        }
        // A fraction or an exponent makes a number that ends at its last digit, whatever
        // follows, as MariaDB's lexer reads it (`1e1from` is 1e1 and FROM, `1.5from` is
        // 1.5 and FROM); only digits followed by name bytes are a name (`1abc`).
        let mut real = false;
        if sql.get(end) == Some(&b'.') {
            end += 1;
            real = true;
            while sql.get(end).is_some_and(u8::is_ascii_digit) {
                end += 1;
            }
        }
        if matches!(sql.get(end), Some(b'e' | b'E')) {
            let mut e = end + 1;
            if matches!(sql.get(e), Some(b'+' | b'-')) {
                e += 1;
            }
            if sql.get(e).is_some_and(u8::is_ascii_digit) {
                while sql.get(e).is_some_and(u8::is_ascii_digit) {
                    e += 1;
                }
                end = e;
                real = true;
            }
        }
        let ident_follows = sql.get(end).is_some_and(|c| is_ident_byte(*c));
        if ident_follows && sql[start] != b'.' && !real {
            return self.word(start);
        }
        self.pos = end;
        self.token(TokenKind::Number, start)
    }
}

/// Unescapes a string literal token (quotes included in `raw`) as MySQL does. Returns the
/// bytes in the client's character set.
pub fn unescape_string(raw: &[u8], mode: LexMode) -> Vec<u8> {
    let raw = if raw.first().is_some_and(|c| c.eq_ignore_ascii_case(&b'n')) {
        &raw[1..]
    } else {
        raw
    };
    let Some((&quote, rest)) = raw.split_first() else {
        return Vec::new();
    };
    let body = rest.strip_suffix(&[quote]).unwrap_or(rest);
    let mut out = Vec::with_capacity(body.len());
    let mut i = 0;
    while i < body.len() {
        let c = body[i];
        if c == b'\\' && !mode.no_backslash_escapes && i + 1 < body.len() {
            i += 1;
            let unescaped = match body[i] {
                b'0' => 0,
                b'b' => 8,
                b'n' => b'\n',
                b'r' => b'\r',
                b't' => b'\t',
                b'Z' => 26,
                // `\%` and `\_` keep their backslash (they matter to LIKE).
                b'%' | b'_' => {
                    out.push(b'\\');
                    body[i]
                }
                other => other,
            };
            out.push(unescaped);
        } else if c == quote && body.get(i + 1) == Some(&quote) {
            out.push(quote);
            i += 1;
        } else {
            out.push(c);
        }
        i += 1;
    }
    out
}

/// An identifier's text: backquotes and quotes removed.
pub fn ident_text(sql: &[u8], token: &Token, mode: LexMode) -> String {
    let raw = token.bytes(sql);
    match token.kind {
        TokenKind::QuotedIdent => {
            let q = raw[0];
            let inner = &raw[1..raw.len().saturating_sub(1).max(1)];
            let doubled = [q, q];
            let mut out = Vec::with_capacity(inner.len());
            let mut i = 0;
            while i < inner.len() {
                if inner[i..].starts_with(&doubled) {
                    out.push(q);
                    i += 2;
                } else {
                    out.push(inner[i]);
                    i += 1;
                }
            }
            String::from_utf8_lossy(&out).into_owned()
        }
        TokenKind::String => String::from_utf8_lossy(&unescape_string(raw, mode)).into_owned(),
        _ => String::from_utf8_lossy(raw).into_owned(),
    }
}

/// `sql` with each byte range replaced by its text (ranges apart from one another, in any
/// order).
pub fn splice(sql: &[u8], mut edits: Vec<(std::ops::Range<usize>, Vec<u8>)>) -> Vec<u8> {
    edits.sort_by_key(|(r, _)| r.start);
    let mut out = Vec::with_capacity(sql.len() + 64);
    let mut at = 0;
    for (range, text) in edits {
        out.extend_from_slice(&sql[at..range.start]);
        out.extend_from_slice(&text);
        at = range.end;
    }
    out.extend_from_slice(&sql[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(sql: &str) -> Vec<(TokenKind, String)> {
        let lexed = lex(sql.as_bytes(), LexMode::default());
        lexed
            .tokens
            .iter()
            .map(|t| {
                (
                    t.kind,
                    String::from_utf8_lossy(t.bytes(sql.as_bytes())).into_owned(),
                )
            })
            .collect()
    }

    #[test]
    fn tokens_of_a_select() {
        use TokenKind::*;
        let got = kinds(
            "SELECT `a``b`, 'it''s', \"x\\\"y\", 1.5e3, 0x1F, X'AB', @v, @@session.sql_mode, ? FROM t_order",
        );
        let want = [
            (Word, "SELECT"),
            (QuotedIdent, "`a``b`"),
            (Punct, ","),
            (String, "'it''s'"),
            (Punct, ","),
            (String, "\"x\\\"y\""),
            (Punct, ","),
            (Number, "1.5e3"),
            (Punct, ","),
            (HexOrBit, "0x1F"),
            (Punct, ","),
            (HexOrBit, "X'AB'"),
            (Punct, ","),
            (UserVariable, "@v"),
            (Punct, ","),
            (SystemVariable, "@@session.sql_mode"),
            (Punct, ","),
            (Placeholder, "?"),
            (Word, "FROM"),
            (Word, "t_order"),
        ];
        let want: Vec<_> = want.iter().map(|(k, s)| (*k, s.to_string())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn identifiers_may_start_with_digits() {
        let got = kinds("SELECT 1abc, 12, 1e5x");
        assert_eq!(got[1], (TokenKind::Word, "1abc".into()));
        assert_eq!(got[3], (TokenKind::Number, "12".into()));
        // As MariaDB reads it: the number 1e5, then the alias x (`SELECT 1e5x` answers
        // a column x of 100000).
        assert_eq!(got[5], (TokenKind::Number, "1e5".into()));
        assert_eq!(got[6], (TokenKind::Word, "x".into()));
    }

    #[test]
    fn comments_are_reported_and_skipped() {
        let sql = b"SELECT /*route_key='EU_CHANNEL'*/ 1 -- tail\n# hash\n/*+ BKA(t) */";
        let lexed = lex(sql, LexMode::default());
        assert_eq!(lexed.tokens.len(), 2);
        let bodies: Vec<_> = lexed
            .comments
            .iter()
            .map(|c| String::from_utf8_lossy(&sql[c.body.clone()]).into_owned())
            .collect();
        assert_eq!(
            bodies,
            ["route_key='EU_CHANNEL'", " tail", " hash", "+ BKA(t) "]
        );
        assert!(lexed.comments[3].optimizer_hint);
        // `--` without a following space is two minus signs.
        assert_eq!(kinds("SELECT 1--1").len(), 5);
    }

    #[test]
    fn versioned_comments_the_server_skips_are_plain_comments() {
        let skipped = |sql: &str| lex(sql.as_bytes(), LexMode::default()).tokens.len() == 1;
        assert!(!skipped("1 /*!50000 AND x */"));
        assert!(skipped("1 /*!80000 AND x */"));
        assert!(skipped("1 /*!50700 AND x */"));
        assert!(!skipped("1 /*!100100 AND x */"));
        assert!(skipped("1 /*!999999 AND x */"));
        assert!(!skipped("1 /*M!100100 AND x */"));
        assert!(skipped("1 /*M!110000 AND x */"));
        assert!(!skipped("1 /*! AND x */"));
        // Six digits read as a number: 050800 is MySQL's 5.8, skipped like 50800.
        assert!(skipped("1 /*!050800 AND x */"));
        assert!(!skipped("1 /*!050000 AND x */"));
    }

    #[test]
    fn a_number_with_a_fraction_or_an_exponent_ends_at_its_last_digit() {
        // Found by attacking the scope: `1e1from` hid FROM in one word.
        for (sql, number) in [
            ("SELECT 1e1from t", "1e1"),
            ("SELECT 1e+1from t", "1e+1"),
            ("SELECT 1.5from t", "1.5"),
        ] {
            let k = kinds(sql);
            assert_eq!(k[1], (TokenKind::Number, number.to_owned()), "{sql}: {k:?}");
            assert_eq!(k[2].1, "from", "{sql}: {k:?}");
        }
        // Digits then name bytes are a name.
        assert_eq!(
            kinds("SELECT 1abc")[1],
            (TokenKind::Word, "1abc".to_owned())
        );
    }

    #[test]
    fn an_executable_comment_inside_one_runs_as_mariadb_runs_it() {
        // Found by attacking the scope: the inner `/*!` was read as a plain comment,
        // hiding `FROM mysql.user` (MariaDB runs it; the first `*/` ends both).
        let k = kinds("SELECT COUNT(*) /*! /*! FROM mysql.user -- */ */\n */");
        let words: Vec<&str> = k.iter().map(|(_, s)| s.as_str()).collect();
        assert!(
            words.contains(&"FROM") && words.contains(&"mysql"),
            "{words:?}"
        );
        // A nested version the server skips stays a comment.
        let k = kinds("SELECT 1 /*! /*!999999 FROM mysql.user */ */");
        assert!(!k.iter().any(|(_, s)| s == "mysql"), "{k:?}");
    }

    #[test]
    fn fewer_than_five_digits_are_the_comments_text_not_a_version() {
        // Found by attacking the scope: `/*!12where*/` hid `where` behind a version.
        let k = kinds("SELECT 1 FROM t /*!12where*/, mysql.user");
        let words: Vec<&str> = k.iter().map(|(_, text)| text.as_str()).collect();
        assert!(words.contains(&"12where"), "{words:?}");
        assert!(!words.contains(&"where"), "{words:?}");
        let k = kinds("SELECT 1 /*M!1where*/");
        assert!(k.iter().any(|(_, text)| text == "1where"), "{k:?}");
    }

    #[test]
    fn comments_end_where_mariadb_ends_them() {
        // A skipped versioned comment holds one nested `/* */`: the quote is inside it.
        let sql = "SELECT 1 /*M!999999 /* */ ' */ , 2 -- '";
        let k = kinds(sql);
        assert_eq!(k.len(), 4, "{k:?}");
        assert!(
            k.iter().all(|(kind, _)| *kind != TokenKind::String),
            "{k:?}"
        );
        // A plain comment does not nest.
        assert_eq!(kinds("SELECT /* /* */ 1").len(), 2);
        // `--` then DEL is a comment, as MariaDB's my_iscntrl says.
        let sql = b"SELECT 1 --\x7f '\n, 2 -- '";
        let lexed = lex(sql, LexMode::default());
        assert_eq!(lexed.tokens.len(), 4, "SELECT 1 , 2");
    }

    #[test]
    fn executable_comments_are_transparent() {
        let got = kinds("/*!40101 SET NAMES utf8 */");
        assert_eq!(got[0], (TokenKind::ExecCommentOpen, "/*!40101".into()));
        assert_eq!(got[1].1, "SET");
        assert_eq!(got.last().unwrap().0, TokenKind::ExecCommentClose);
    }

    #[test]
    fn statements_split_outside_strings_and_comments() {
        let sql = b"SELECT ';' ; /* ; */ SELECT 2;; -- ;\n  ; SELECT `;`";
        let parts: Vec<_> = split_statements(sql, LexMode::default())
            .into_iter()
            .map(|r| String::from_utf8_lossy(&sql[r]).trim().to_owned())
            .collect();
        assert_eq!(parts, ["SELECT ';'", "/* ; */ SELECT 2", "SELECT `;`"]);
    }

    #[test]
    fn a_query_splits_into_the_pieces_mariadb_answers() {
        let pieces = |sql: &str| split_query(sql.as_bytes(), LexMode::default());
        assert_eq!(
            pieces("SELECT 1; -- c"),
            [Piece::Statement(0..8), Piece::TrailingComment]
        );
        assert_eq!(pieces("SELECT 1;  "), [Piece::Statement(0..8)]);
        assert_eq!(
            pieces("SELECT 1;; SELECT 2"),
            [
                Piece::Statement(0..8),
                Piece::Empty,
                Piece::Statement(10..19)
            ]
        );
        assert_eq!(pieces("/* c */; SELECT 1")[0], Piece::Empty);
        assert_eq!(pieces("SELECT 1;;"), [Piece::Statement(0..8)]);
        assert_eq!(
            pieces("SELECT 1; /* c */ ;"),
            [Piece::Statement(0..8), Piece::TrailingComment]
        );
    }

    #[test]
    fn procedure_bodies_are_not_split() {
        let sql = b"CREATE PROCEDURE p() BEGIN SELECT 1; SELECT 2; END";
        assert_eq!(split_statements(sql, LexMode::default()).len(), 1);
    }

    #[test]
    fn backslashes_follow_the_sql_mode() {
        let sql = br"SELECT 'a\' , order_id FROM t";
        let normal = lex(sql, LexMode::default());
        assert!(normal.unterminated);
        let nbe = lex(
            sql,
            LexMode {
                no_backslash_escapes: true,
                ..LexMode::default()
            },
        );
        assert!(!nbe.unterminated);
        assert_eq!(nbe.tokens.len(), 6);
    }

    #[test]
    fn a_backslash_ending_an_unterminated_string_stays_inside_the_text() {
        // Found by the sql_analysis fuzz target: the token ended one byte past the text.
        for sql in [
            &br"SELECT N'x\"[..],
            br"SELECT 'ab\",
            br"SELECT `a\",
            br"'\",
        ] {
            let lexed = lex(sql, LexMode::default());
            assert!(lexed.unterminated);
            for t in &lexed.tokens {
                assert!(t.range.end <= sql.len(), "{t:?} in {} bytes", sql.len());
                let _ = t.bytes(sql);
            }
        }
    }

    #[test]
    fn binary_bytes_inside_strings_do_not_confuse_the_lexer() {
        let mut sql = b"INSERT INTO t VALUES (_binary'".to_vec();
        sql.extend_from_slice(&[0xff, 0x00, 0x5c, 0x27, 0x80, 0x3b]);
        sql.extend_from_slice(b"'); SELECT 1");
        let parts = split_statements(&sql, LexMode::default());
        assert_eq!(parts.len(), 2);
    }

    #[test]
    fn unescape_handles_mysql_escapes() {
        let m = LexMode::default();
        assert_eq!(unescape_string(br"'a\'b''c\n'", m), b"a'b'c\n");
        assert_eq!(unescape_string(br#""x""y""#, m), b"x\"y");
        assert_eq!(unescape_string(br"'\%'", m), br"\%");
        assert_eq!(unescape_string(b"N'abc'", m), b"abc");
    }
}
