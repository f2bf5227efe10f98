//! One debug line per client statement (SPEC §7: "SQL literals are not logged by
//! default"): its digest ([`crate::sql::shape::digest`]) unless `log.statements = "full"`,
//! its kind, outcome and duration, and for a failure the error code and message, with the
//! quoted parts of backend messages that echo values (duplicate key, bad value) replaced.

use std::time::Instant;

use crate::config::StatementLog;
use crate::error::ProxyError;
use crate::sql::lexer::{LexMode, lex};

/// ER_SIGNAL_EXCEPTION and ER_SIGNAL_WARN: the whole message is the application's text.
const SIGNAL_CODES: &[u16] = &[1644, 1642];

/// An error message fit for the log: everything from its first single quote to its last
/// replaced by `'?'` (servers and the proxy quote the values they echo — duplicate keys,
/// bad values, the statement near a syntax error — and a value may itself hold quotes, so
/// the quoted parts cannot be told apart reliably); an apostrophe between two letters
/// ("doesn't") is not a quote; a `SIGNAL` message is replaced entirely.
pub fn redact(code: u16, message: &str) -> String {
    if SIGNAL_CODES.contains(&code) {
        return "(message set by SIGNAL, redacted)".to_owned();
    }
    let bytes = message.as_bytes();
    let quote = |i: usize| {
        bytes[i] == b'\''
            && !(i > 0
                && bytes[i - 1].is_ascii_alphabetic()
                && bytes.get(i + 1).is_some_and(u8::is_ascii_alphabetic))
    };
    let first = (0..bytes.len()).find(|&i| quote(i));
    let last = (0..bytes.len()).rev().find(|&i| quote(i));
    match (first, last) {
        (Some(first), Some(last)) if last > first => {
            format!("{}'?'{}", &message[..first], &message[last + 1..])
        }
        (Some(first), _) => format!("{}'?", &message[..first]),
        _ => message.to_owned(),
    }
}

impl super::session::Session {
    /// Counts a client statement that began at `started` in the metrics, and logs it.
    pub(super) fn statement_done(
        &self,
        sql: &[u8],
        result: &Result<(), ProxyError>,
        started: Instant,
    ) {
        let kind = crate::metrics::statement_kind(sql);
        self.proxy
            .metrics
            .count_statement(kind, result.is_ok(), started);
        let log = self.rt.config.log.statements;
        log_statement(
            self.id,
            log,
            self.state.lex_mode,
            sql,
            kind,
            result,
            started,
        );
    }
}

/// Logs one statement at debug level (nothing is built when debug is off).
pub fn log_statement(
    connection: u32,
    mode: StatementLog,
    lex_mode: LexMode,
    sql: &[u8],
    kind: &'static str,
    result: &Result<(), ProxyError>,
    started: Instant,
) {
    if !tracing::enabled!(tracing::Level::DEBUG) {
        return;
    }
    let text = match mode {
        StatementLog::Full => String::from_utf8_lossy(sql).into_owned(),
        StatementLog::Digest => crate::sql::shape::digest(sql, &lex(sql, lex_mode)),
    };
    let micros = started.elapsed().as_micros() as u64;
    match result {
        Ok(()) => tracing::debug!(connection, kind, statement = %text, micros, "statement"),
        Err(e) => {
            let (code, _, message) = e.to_packet_parts();
            let message = String::from_utf8_lossy(&message).into_owned();
            let message = if mode == StatementLog::Digest {
                redact(code, &message)
            } else {
                message
            };
            tracing::debug!(connection, kind, statement = %text, micros, code, error = %message, "statement failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_values_are_redacted() {
        assert_eq!(
            redact(
                1062,
                "Duplicate entry 'ann@example.com' for key 'buyer_email'"
            ),
            "Duplicate entry '?'"
        );
        // A value holding quotes does not leak its middle.
        assert_eq!(
            redact(1062, "Duplicate entry 'it's SECRET o'k' for key 'PRIMARY'"),
            "Duplicate entry '?'"
        );
        assert_eq!(
            redact(
                1064,
                "You have an error in your SQL syntax; check the manual ... near 'AND note='SECRET'' at line 1"
            ),
            "You have an error in your SQL syntax; check the manual ... near '?' at line 1"
        );
        assert_eq!(
            redact(1644, "card 4111 declined"),
            "(message set by SIGNAL, redacted)"
        );
        assert_eq!(redact(1146, "no quotes"), "no quotes");
        assert_eq!(
            redact(1146, "Table 'orders.t_x' doesn't exist"),
            "Table '?' doesn't exist"
        );
        assert_eq!(
            redact(
                1292,
                "Truncated incorrect DECIMAL value: 'SECRET' (order_id must be a decimal integer)"
            ),
            "Truncated incorrect DECIMAL value: '?' (order_id must be a decimal integer)"
        );
        assert_eq!(redact(1366, "open 'quote"), "open '?");
    }
}
