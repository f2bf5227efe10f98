//! A statement as edits over the client's bytes, and its rendering for one shard.

use std::ops::Range;

use crate::sql::TokSpan;
use crate::sql::lexer::{Token, TokenKind};

/// A string literal that reads the same under any `sql_mode`.
pub fn quote_string(value: &[u8]) -> Vec<u8> {
    if value.contains(&b'\\') || value.iter().any(|b| *b < 0x20) {
        let mut out = b"X'".to_vec();
        for b in value {
            out.extend_from_slice(format!("{b:02X}").as_bytes());
        }
        out.push(b'\'');
        return out;
    }
    let mut out = Vec::with_capacity(value.len() + 2);
    out.push(b'\'');
    for &b in value {
        if b == b'\'' {
            out.push(b'\'');
        }
        out.push(b);
    }
    out.push(b'\'');
    out
}

/// A parameter of a backend statement's execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Param {
    /// The client's parameter with this index (0-based), as it was bound.
    Client(usize),
    /// A value of the proxy's own: an order id it issued, as BIGINT UNSIGNED.
    Value(u64),
}

/// A piece of replacement text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frag {
    /// These bytes.
    Bytes(Vec<u8>),
    /// A copy of these tokens of the statement, with the edits inside them applied.
    Tokens(TokSpan),
    /// A `?` bound to this parameter.
    Param(Param),
}

impl Frag {
    /// Bytes from text.
    pub fn text(s: impl Into<Vec<u8>>) -> Self {
        Frag::Bytes(s.into())
    }
}

/// One edit: the bytes `at` of the statement are replaced by `with` (an empty range
/// inserts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    /// Byte range replaced.
    pub at: Range<usize>,
    /// What replaces it.
    pub with: Vec<Frag>,
}

/// A part of the output: a range of the statement (edits inside applied) or bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// These bytes of the statement.
    Original(Range<usize>),
    /// These bytes.
    Bytes(Vec<u8>),
}

/// A statement as one backend receives it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rendered {
    /// The text.
    pub sql: Vec<u8>,
    /// What its `?` placeholders take, in order.
    pub params: Vec<Param>,
}

/// A statement with its tokens, ready to render variants of.
pub struct Statement<'a> {
    /// The client's bytes.
    pub sql: &'a [u8],
    /// Its tokens.
    pub tokens: &'a [Token],
}

impl Statement<'_> {
    /// Byte range of a token span.
    pub fn bytes_of(&self, span: TokSpan) -> Range<usize> {
        self.tokens[span.first as usize].range.start..self.tokens[span.last as usize].range.end
    }

    /// The whole statement with `edits` applied.
    pub fn render(&self, edits: Vec<Edit>) -> Rendered {
        self.render_segments(&[Segment::Original(0..self.sql.len())], edits)
    }

    /// `segments` in order, with `edits` applied inside the original ranges. Edits may not
    /// overlap; an edit reaching outside every segment is not applied.
    pub fn render_segments(&self, segments: &[Segment], mut edits: Vec<Edit>) -> Rendered {
        edits.sort_by_key(|e| (e.at.start, e.at.end));
        let placeholders: Vec<(usize, usize)> = self
            .tokens
            .iter()
            .filter(|t| t.kind == TokenKind::Placeholder)
            .enumerate()
            .map(|(i, t)| (t.range.start, i))
            .collect();
        let mut out = Rendered {
            sql: Vec::with_capacity(self.sql.len() + 64),
            params: Vec::new(),
        };
        let r = Renderer {
            st: self,
            edits: &edits,
            placeholders: &placeholders,
        };
        for segment in segments {
            match segment {
                Segment::Original(range) => r.range(range.clone(), None, &mut out),
                Segment::Bytes(b) => out.sql.extend_from_slice(b),
            }
        }
        out
    }
}

struct Renderer<'a, 'b> {
    st: &'a Statement<'b>,
    edits: &'a [Edit],
    placeholders: &'a [(usize, usize)],
}

impl Renderer<'_, '_> {
    /// Copies `range`, applying the edits inside it (but `skip`, the edit being expanded).
    fn range(&self, range: Range<usize>, skip: Option<usize>, out: &mut Rendered) {
        let mut at = range.start;
        for (i, e) in self.edits.iter().enumerate() {
            if Some(i) == skip || e.at.start < at || e.at.end > range.end {
                continue;
            }
            if e.at.start < range.start {
                continue;
            }
            self.copy(at..e.at.start, out);
            for frag in &e.with {
                match frag {
                    Frag::Bytes(b) => out.sql.extend_from_slice(b),
                    Frag::Param(p) => {
                        out.sql.push(b'?');
                        out.params.push(*p);
                    }
                    Frag::Tokens(span) => self.range(self.st.bytes_of(*span), Some(i), out),
                }
            }
            at = e.at.end;
        }
        self.copy(at..range.end, out);
    }

    /// Copies original bytes; the placeholders among them keep their parameters.
    fn copy(&self, range: Range<usize>, out: &mut Rendered) {
        out.sql.extend_from_slice(&self.st.sql[range.clone()]);
        let first = self
            .placeholders
            .partition_point(|(start, _)| *start < range.start);
        for (start, index) in &self.placeholders[first..] {
            if *start >= range.end {
                break;
            }
            out.params.push(Param::Client(*index));
        }
    }
}
