//! One debug line per client statement (SPEC §7: "SQL literals are not logged by
//! default"): its digest ([`crate::sql::shape::digest`]) unless `log.statements = "full"`,
//! its kind, outcome and duration, and for a failure the error code and message, with the
//! quoted parts of backend messages that echo values (duplicate key, bad value) replaced.

use std::time::Instant;

use crate::config::StatementLog;
use crate::error::ProxyError;
use crate::sql::lexer::{LexMode, lex};

/// Backend errors whose message quotes a value the client sent: ER_DUP_ENTRY (1062),
/// ER_DUP_ENTRY_WITH_KEY_NAME (1586), ER_DUP_UNKNOWN_IN_INDEX (1859), data truncated or
/// too long (1265, 1406), ER_TRUNCATED_WRONG_VALUE (1292), ER_WARN_DATA_OUT_OF_RANGE
/// (1264), ER_TRUNCATED_WRONG_VALUE_FOR_FIELD (1366), ER_WRONG_VALUE (1525), foreign key
/// failures that print the row (1451, 1452).
const ECHOING_CODES: &[u16] = &[
    1062, 1586, 1859, 1265, 1406, 1292, 1264, 1366, 1525, 1451, 1452,
];

/// `message` with every single-quoted part replaced by `'?'`.
pub fn redact(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut inside = false;
    for c in message.chars() {
        match (c, inside) {
            ('\'', false) => {
                inside = true;
                out.push_str("'?");
            }
            ('\'', true) => {
                inside = false;
                out.push('\'');
            }
            (_, true) => {}
            (c, false) => out.push(c),
        }
    }
    if inside {
        out.push('\'');
    }
    out
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
            let message = if mode == StatementLog::Digest && ECHOING_CODES.contains(&code) {
                redact(&message)
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
            redact("Duplicate entry 'ann@example.com' for key 'buyer_email'"),
            "Duplicate entry '?' for key '?'"
        );
        assert_eq!(redact("no quotes"), "no quotes");
        assert_eq!(redact("open 'quote"), "open '?'");
    }
}
