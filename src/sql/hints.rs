//! Route hints in SQL comments, in the sqlcommenter form (SPEC §4.2):
//! `/*route_key='EU_CHANNEL'*/`, `/*region='GB',action='refund'*/`. Keys and values are
//! URL-encoded; pairs are comma-separated; a hint may stand anywhere in the statement.
//! Other keys (traceparent, framework, ...) are ignored.
//!
//! Two keys choose the member a read goes to on a datasource with replicas (issue 26):
//! `/*read='primary'*/` or `/*read='replica'*/`, and `/*after='TOKEN'*/` with a token of
//! `SELECT ROUTEKEY_WRITE_TOKEN()` (the read sees the writes it names).

use percent_encoding::percent_decode;

use super::lexer::Comment;

/// The route hints of one statement.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouteHints {
    /// `route_key='EU_CHANNEL'`: a channel name.
    pub route_key: Option<String>,
    /// `region='GB'`: a region code.
    pub region: Option<String>,
    /// `scatter='allow'` or `scatter='refuse'`: overrides the user's `scatter` setting for
    /// this statement (true: allow).
    pub scatter: Option<bool>,
    /// `read='primary'` or `read='replica'`: overrides the user's `reads` for this
    /// statement.
    pub read: Option<crate::config::Reads>,
    /// `after='TOKEN'`: a write token whose positions this statement's reads must have
    /// applied.
    pub after: Option<String>,
}

impl RouteHints {
    /// No hint given.
    pub fn is_empty(&self) -> bool {
        self.route_key.is_none()
            && self.region.is_none()
            && self.scatter.is_none()
            && self.read.is_none()
            && self.after.is_none()
    }
}

/// Reads the hints from a statement's comments. Optimizer hints (`/*+ */`) are skipped. A
/// key given twice with different values is an error (the statement contradicts itself).
pub fn route_hints(sql: &[u8], comments: &[Comment]) -> Result<RouteHints, String> {
    let mut hints = RouteHints::default();
    for comment in comments.iter().filter(|c| !c.optimizer_hint) {
        let body = &sql[comment.body.clone()];
        // Cheap test first: most comments carry no hint.
        if !contains(body, b"route_key")
            && !contains(body, b"region")
            && !contains(body, b"scatter")
            && !contains_ci(body, b"read")
            && !contains_ci(body, b"after")
        {
            continue;
        }
        for (key, value) in pairs(body) {
            // `read` and `after` in any case: a read's guarantee must not be dropped for
            // the spelling of its key.
            let key = match key.to_ascii_lowercase().as_str() {
                k @ ("read" | "after") => k.to_owned(),
                _ => key,
            };
            if key == "scatter" {
                let allow = match value.to_ascii_lowercase().as_str() {
                    "allow" => true,
                    "refuse" => false,
                    _ => {
                        return Err(format!(
                            "scatter hint: '{value}' is neither 'allow' nor 'refuse'"
                        ));
                    }
                };
                match hints.scatter {
                    Some(old) if old != allow => {
                        return Err("conflicting scatter hints".to_owned());
                    }
                    _ => hints.scatter = Some(allow),
                }
                continue;
            }
            if key == "read" {
                let read = match value.to_ascii_lowercase().as_str() {
                    "primary" => crate::config::Reads::Primary,
                    "replica" => crate::config::Reads::Replica,
                    _ => {
                        return Err(format!(
                            "read hint: '{value}' is neither 'primary' nor 'replica'"
                        ));
                    }
                };
                match hints.read {
                    Some(old) if old != read => return Err("conflicting read hints".to_owned()),
                    _ => hints.read = Some(read),
                }
                continue;
            }
            let slot = match key.as_str() {
                "route_key" => &mut hints.route_key,
                "region" => &mut hints.region,
                "after" => &mut hints.after,
                _ => continue,
            };
            match slot {
                Some(old) if *old != value => {
                    return Err(format!(
                        "conflicting route hints: {key}='{old}' and {key}='{value}'"
                    ));
                }
                _ => *slot = Some(value),
            }
        }
    }
    Ok(hints)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn contains_ci(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}

/// `key='value'` pairs of a sqlcommenter comment, separated by commas (or whitespace);
/// malformed pieces are skipped.
fn pairs(body: &[u8]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = body;
    loop {
        rest = trim_start(rest);
        let Some(eq) = rest.iter().position(|&b| b == b'=') else {
            break;
        };
        let key = decode(trim(&rest[..eq]));
        rest = trim_start(&rest[eq + 1..]);
        let value = if rest.first() == Some(&b'\'') {
            let Some(end) = rest[1..].iter().position(|&b| b == b'\'') else {
                break;
            };
            let v = &rest[1..1 + end];
            rest = &rest[end + 2..];
            decode(v)
        } else {
            let end = rest.iter().position(|&b| b == b',').unwrap_or(rest.len());
            let v = trim(&rest[..end]);
            rest = &rest[end..];
            decode(v)
        };
        out.push((key, value));
        rest = trim_start(rest);
        match rest.first() {
            Some(b',') => rest = &rest[1..],
            Some(_) => {}
            None => break,
        }
    }
    out
}

fn decode(bytes: &[u8]) -> String {
    percent_decode(bytes).decode_utf8_lossy().trim().to_owned()
}

fn trim_start(b: &[u8]) -> &[u8] {
    let n = b.iter().take_while(|c| c.is_ascii_whitespace()).count();
    &b[n..]
}

fn trim(b: &[u8]) -> &[u8] {
    let b = trim_start(b);
    let n = b
        .iter()
        .rev()
        .take_while(|c| c.is_ascii_whitespace())
        .count();
    &b[..b.len() - n]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::lexer::{LexMode, lex};

    fn hints(sql: &str) -> Result<RouteHints, String> {
        let lexed = lex(sql.as_bytes(), LexMode::default());
        route_hints(sql.as_bytes(), &lexed.comments)
    }

    #[test]
    fn hints_anywhere_in_the_statement() {
        let h =
            hints("SELECT /*route_key='EU_CHANNEL'*/ * FROM t_order WHERE order_id = 1").unwrap();
        assert_eq!(h.route_key.as_deref(), Some("EU_CHANNEL"));
        let h = hints("SELECT * FROM t_order WHERE order_id = 1 /*action='x',region='GB',traceparent='00-ab-cd-01'*/").unwrap();
        assert_eq!(h.region.as_deref(), Some("GB"));
        assert_eq!(h.route_key, None);
    }

    #[test]
    fn values_are_url_decoded() {
        let h = hints("SELECT 1 /*route_key='EU%5FCHANNEL', region='G%42'*/").unwrap();
        assert_eq!(h.route_key.as_deref(), Some("EU_CHANNEL"));
        assert_eq!(h.region.as_deref(), Some("GB"));
    }

    #[test]
    fn strings_and_optimizer_hints_are_not_hints() {
        assert!(hints("SELECT '/*region=''GB''*/'").unwrap().is_empty());
        assert!(hints("SELECT /*+ region='GB' */ 1").unwrap().is_empty());
        assert!(hints("SELECT 1 -- region='GB'\n").unwrap().region.is_some());
    }

    #[test]
    fn read_and_after_keys_in_any_case_and_pairs_apart_by_spaces() {
        let h = hints("SELECT /*AFTER='ds0:0-1-5'*/ 1").unwrap();
        assert_eq!(h.after.as_deref(), Some("ds0:0-1-5"));
        let h = hints("SELECT /*read='primary' after='ds0:0-1-5'*/ 1").unwrap();
        assert_eq!(h.read, Some(crate::config::Reads::Primary));
        assert_eq!(h.after.as_deref(), Some("ds0:0-1-5"));
    }

    #[test]
    fn read_and_after_hints() {
        let h = hints("SELECT /*read='replica'*/ 1 /*after='ds0:0-1-5'*/").unwrap();
        assert_eq!(h.read, Some(crate::config::Reads::Replica));
        assert_eq!(h.after.as_deref(), Some("ds0:0-1-5"));
        assert_eq!(
            hints("SELECT /*read='PRIMARY'*/ 1").unwrap().read,
            Some(crate::config::Reads::Primary)
        );
        assert!(hints("SELECT /*read='nearest'*/ 1").is_err());
        assert!(hints("SELECT /*read='primary'*/ 1 /*read='replica'*/").is_err());
    }

    #[test]
    fn contradicting_hints_are_an_error() {
        assert!(hints("SELECT /*region='GB'*/ 1 /*region='CN'*/").is_err());
        assert!(hints("SELECT /*region='GB'*/ 1 /*region='GB'*/").is_ok());
    }
}
