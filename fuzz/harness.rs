//! The fuzz targets' bodies, shared by the cargo-fuzz targets (`fuzz/fuzz_targets/`, nightly)
//! and the corpus replay test (`tests/fuzz_corpus.rs`, stable): each function feeds
//! arbitrary bytes through the decoding the proxy does on that input, and must return
//! without panicking, whatever the bytes. Results are discarded: the property checked is
//! "no panic, no hang" (libFuzzer's `-timeout` catches the hangs).
//!
//! Several inputs are read as a sequence of packets: [`packets`] cuts the bytes into
//! chunks, each a 2-byte little-endian length and that many bytes (a short last chunk
//! keeps what is left), so the fuzzer can build multi-packet exchanges.

use std::sync::OnceLock;

use mysql_common::io::ParseBuf;
use mysql_common::packets::AuthSwitchRequest;

use routekey_proxy::config::Config;
use routekey_proxy::config::ResultNames;
use routekey_proxy::merge::value::decode;
use routekey_proxy::plan::scope::{Scope, check_text};
use routekey_proxy::protocol::binary::{
    BoundParam, SentParam, build_execute, param_value, parse_execute, parse_long_data,
};
use routekey_proxy::protocol::packets::{
    column_info, is_eof, parse_eof, parse_err, parse_greeting, parse_ok, parse_text_row,
    read_lenenc_int, rewrite_column_definition, server_version_numbers,
};
use routekey_proxy::protocol::row::{
    ColumnMeta, Protocol, build_row, split_row, truncate_text_row,
};
use routekey_proxy::sql::analyze::{AnalyzeContext, analyze, token_mentions_sharded_table};
use routekey_proxy::sql::charset::{Decoding, collation_names, decoding_for};
use routekey_proxy::sql::command::classify;
use routekey_proxy::sql::hints::route_hints;
use routekey_proxy::sql::lexer::{LexMode, TokenKind, lex, split_statements, unescape_string};
use routekey_proxy::sql::shape::{digest, shape_key};
use routekey_proxy::wire::handshake::parse_response;

/// A fuzz target: the name of its folder under `fuzz/corpus/`, and its body.
pub type Target = (&'static str, fn(&[u8]));

/// The fuzz targets.
pub const TARGETS: [Target; 3] = [
    ("client_packets", client_packets),
    ("sql_analysis", sql_analysis),
    ("backend_packets", backend_packets),
];

/// Cuts `data` into packets: a 2-byte little-endian length, then that many bytes.
pub fn packets(mut data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while data.len() >= 2 {
        let len = usize::from(u16::from_le_bytes([data[0], data[1]]));
        let end = (2 + len).min(data.len());
        out.push(&data[2..end]);
        data = &data[end..];
    }
    out
}

/// What a client sends: the handshake response (and the character set check on its
/// collation) read from the whole input; then the input as a prepared statement's
/// packets: byte 0 is the statement's parameter count, the rest [`packets`], each a
/// COM_STMT_SEND_LONG_DATA (first byte 0x18) or a COM_STMT_EXECUTE (anything else; the
/// first byte is dropped as the command byte), executed with the types the last execution
/// sent and the long data sent since, as a session does.
pub fn client_packets(data: &[u8]) {
    if let Some(hello) = parse_response(data) {
        if let Some((charset, _)) = collation_names(hello.collation) {
            let _ = decoding_for(&charset);
        }
    }
    let Some((&param_count, rest)) = data.split_first() else {
        return;
    };
    let param_count = usize::from(param_count);
    let mut long = vec![false; param_count];
    let mut remembered: Option<Vec<(u8, u8)>> = None;
    for packet in packets(rest) {
        let Some((&command, body)) = packet.split_first() else {
            continue;
        };
        if command == 0x18 {
            if let Some(chunk) = parse_long_data(body) {
                if let Some(slot) = long.get_mut(chunk.param) {
                    *slot = true;
                }
            }
            continue;
        }
        if let Ok(execute) = parse_execute(body, param_count, remembered.as_deref(), &long) {
            if execute.types_sent {
                remembered = Some(execute.params.iter().map(|p| p.kind).collect());
            }
            for p in &execute.params {
                let _ = param_value(body, p);
            }
            let mut sent: Vec<SentParam<'_>> = execute
                .params
                .iter()
                .map(SentParam::Bound)
                .collect::<Vec<_>>();
            sent.push(SentParam::UInt(u64::from(command)));
            let _ = build_execute(1, body, &sent);
            check_bound_ranges(body, &execute.params);
        }
        long.iter_mut().for_each(|l| *l = false);
    }
}

/// Every value range a parsed execution hands out lies inside its packet (the rewrite
/// slices the packet with them).
fn check_bound_ranges(body: &[u8], params: &[BoundParam]) {
    for p in params {
        assert!(
            p.value.start <= p.value.end && p.value.end <= body.len(),
            "parameter range {:?} outside a {}-byte packet",
            p.value,
            body.len()
        );
    }
}

/// The demo configuration: sharded tables `t_order` and `t_order_item` in the logical
/// database `orders`.
fn config() -> &'static Config {
    static CONFIG: OnceLock<Config> = OnceLock::new();
    CONFIG.get_or_init(|| {
        Config::from_toml(include_str!("../config/demo.toml"), "demo.toml")
            .expect("the demo configuration is valid")
    })
}

/// The demo user `app`'s scope (the logical database and `orders_ref`).
fn scope() -> &'static Scope {
    static SCOPE: OnceLock<Scope> = OnceLock::new();
    SCOPE.get_or_init(|| Scope::of(config(), "app", "127.0.0.1"))
}

/// A COM_QUERY's text: byte 0 chooses the session (bit 0 NO_BACKSLASH_ESCAPES, bit 1
/// ANSI_QUOTES, bit 2 PIPES_AS_CONCAT, bit 3 a database other than the logical one, bit 4
/// a single-byte character set, bit 5 `information_schema` as the current database), the
/// rest is the text. It is split into statements, and each is checked against the demo
/// user's scope, lexed, classified, read for routing hints, keyed by shape, digested and
/// analysed (sqlparser) as the engine does; string literals are unescaped.
pub fn sql_analysis(data: &[u8]) {
    let Some((&flags, sql)) = data.split_first() else {
        return;
    };
    let mode = LexMode {
        no_backslash_escapes: flags & 1 != 0,
        ansi_quotes: flags & 2 != 0,
        pipes_as_concat: flags & 4 != 0,
        ..LexMode::default()
    };
    let cx = AnalyzeContext {
        config: config(),
        db_is_logical: flags & 8 == 0,
        decoding: if flags & 16 == 0 {
            Decoding::Utf8
        } else {
            Decoding::SingleByte
        },
        pipes_as_concat: mode.pipes_as_concat,
    };
    let current = Some(if flags & 32 != 0 {
        "information_schema"
    } else if cx.db_is_logical {
        "orders"
    } else {
        "orders_ref"
    });
    for range in split_statements(sql, mode) {
        let statement = &sql[range];
        let lexed = lex(statement, mode);
        let _ = check_text(scope(), statement, &lexed.tokens, mode, current);
        let _ = classify(statement, &lexed.tokens, mode);
        let _ = route_hints(statement, &lexed.comments);
        let _ = shape_key(statement, &lexed, mode, cx.db_is_logical);
        let _ = digest(statement, &lexed);
        for token in &lexed.tokens {
            if matches!(token.kind, TokenKind::String) {
                let _ = unescape_string(token.bytes(statement), mode);
            }
        }
        if analyze(statement, &lexed, cx).is_err() {
            let _ = token_mentions_sharded_table(statement, &lexed.tokens, cx);
        }
    }
}

/// What a backend sends: the input whole as a greeting (`parse_greeting`, as
/// `BackendConn::connect` reads it), an auth switch request (mysql_common's parser, which
/// `BackendConn::connect` calls), an OK, an ERR and an EOF; then
/// as [`packets`]: the first a result set header (column count, capped at 64), then that
/// many column definitions, then rows, each split in the text and the binary protocol
/// against the columns, every value decoded and the row built again, as the merge does.
pub fn backend_packets(data: &[u8]) {
    if let Ok(greeting) = parse_greeting(data) {
        let _ = greeting.nonce();
        let _ = server_version_numbers(greeting.server_version_ref());
        let _ = greeting.server_version_str();
        let _ = greeting.capabilities();
        let _ = greeting.connection_id();
    }
    if let Ok(switch) = ParseBuf(data).parse::<AuthSwitchRequest<'_>>(()) {
        let _ = switch.auth_plugin();
        let _ = switch.plugin_data();
    }
    let _ = parse_ok(data);
    let _ = parse_err(data);
    if is_eof(data) {
        let _ = parse_eof(data);
    }
    let mut packets = packets(data).into_iter();
    let Some(header) = packets.next() else {
        return;
    };
    let mut pos = 0;
    let Some(count) = read_lenenc_int(header, &mut pos) else {
        return;
    };
    let names = ResultNames {
        physical_database: "orders_0".to_owned(),
        logical_database: "orders".to_owned(),
        tables: vec![("t_order_0".to_owned(), "t_order".to_owned())],
    };
    let mut metas = Vec::new();
    for definition in packets.by_ref().take(count.min(64) as usize) {
        let _ = column_info(definition);
        let _ = rewrite_column_definition(definition, &names);
        metas.extend(ColumnMeta::parse(definition));
    }
    let mut values = Vec::new();
    for row in packets {
        let _ = parse_text_row(row, metas.len());
        let _ = truncate_text_row(row, metas.len() / 2);
        for protocol in [Protocol::Text, Protocol::Binary] {
            if split_row(row, &metas, protocol, &mut values).is_err() {
                continue;
            }
            for (value, meta) in values.iter().zip(&metas) {
                if let Some(raw) = value {
                    let _ = decode(raw, meta, protocol);
                }
            }
            let _ = build_row(&values, &metas, protocol);
        }
    }
}
