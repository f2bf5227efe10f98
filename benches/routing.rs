//! Baseline microbenchmarks of the per-statement work: decoding an order id, analysing a
//! statement (the SQL parser, paid once per shape), and the hot path for a statement whose
//! shape is known: lex + shape lookup + route + rewrite.
//!
//! `cargo bench --bench routing`

use std::sync::Arc;

use criterion::{Criterion, black_box, criterion_group, criterion_main};
use routekey_proxy::config::Config;
use routekey_proxy::id::{IdFields, IdLayout, SNOWFLAKE_EPOCH_MS};
use routekey_proxy::plan::{Inputs, ScatterPolicy, Text, plan};
use routekey_proxy::rewrite::SessionValues;
use routekey_proxy::route::Router;
use routekey_proxy::route::index::{IndexError, IndexTable};
use routekey_proxy::route::value::StatementValues;
use routekey_proxy::sql::analyze::{AnalyzeContext, analyze};
use routekey_proxy::sql::charset::Decoding;
use routekey_proxy::sql::hints::route_hints;
use routekey_proxy::sql::lexer::{LexMode, lex};
use routekey_proxy::sql::shape::{AnalysisCache, shape_key};

/// The benchmarks route decodable ids only: the index is never asked.
struct NoIndex;

impl IndexTable for NoIndex {
    async fn lookup(&self, _: u64) -> Result<Option<String>, IndexError> {
        Err(IndexError("not used in benchmarks".into()))
    }
    async fn insert(&self, _: u64, _: &str) -> Result<String, IndexError> {
        Err(IndexError("not used in benchmarks".into()))
    }
}

const NOW: u64 = 1_795_000_000_000;

fn config() -> Config {
    Config::from_toml(include_str!("../config/demo.toml"), "demo.toml").unwrap()
}

fn eu_id(seq: u64) -> u64 {
    IdLayout::default()
        .compose(IdFields {
            timestamp: NOW - 86_400_000 - SNOWFLAKE_EPOCH_MS,
            worker: 3,
            route_key: 5,
            sequence: seq,
        })
        .unwrap()
}

/// The demo's statement shapes.
fn statements() -> Vec<(&'static str, String)> {
    let id = eu_id(1234);
    vec![
        (
            "point_select",
            format!("SELECT * FROM t_order WHERE order_id = {id}"),
        ),
        (
            "aliased_select_with_channel",
            format!(
                "SELECT o.order_id, o.amount, o.status FROM orders.t_order AS o WHERE o.order_id = {id} AND o.channel = 'EU_CHANNEL' /*region='GB'*/"
            ),
        ),
        (
            "join_items",
            format!(
                "SELECT o.order_id, i.sku, i.qty FROM t_order o JOIN t_order_item i ON i.order_id = o.order_id WHERE o.order_id = {id}"
            ),
        ),
        (
            "update",
            format!("UPDATE t_order SET status = 'PAID' WHERE order_id = {id}"),
        ),
        (
            "insert",
            format!(
                "INSERT INTO t_order (order_id, channel, region, user_id, amount, status, created_at) VALUES ({id}, 'EU_CHANNEL', 'GB', 42, 19.99, 'CREATED', NOW(3))"
            ),
        ),
    ]
}

fn decode(c: &mut Criterion) {
    let config = config();
    let decoder = config.route_key_decoder();
    let id = eu_id(77);
    c.bench_function("decode_route_key", |b| {
        b.iter(|| decoder.decode(black_box(id), NOW))
    });
}

fn analyse_and_route(c: &mut Criterion) {
    let config = Arc::new(config());
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let router = Router::new(config.clone(), NoIndex);
    let cache = AnalysisCache::new(1000);
    let mode = LexMode::default();
    for (name, sql) in statements() {
        let sql = sql.into_bytes();
        let cx = AnalyzeContext {
            config: &config,
            db_is_logical: true,
            decoding: Decoding::Utf8,
            pipes_as_concat: false,
        };
        c.bench_function(&format!("analyse_cold/{name}"), |b| {
            b.iter(|| {
                let lexed = lex(black_box(&sql), mode);
                analyze(&sql, &lexed, cx).unwrap()
            })
        });
        let lexed = lex(&sql, mode);
        let analysis = Arc::new(analyze(&sql, &lexed, cx).unwrap().analysis);
        cache.insert(shape_key(&sql, &lexed, mode, true), analysis);
        let session = SessionValues::default();
        c.bench_function(&format!("hot_path/{name}"), |b| {
            b.iter(|| {
                let lexed = lex(black_box(&sql), mode);
                let analysis = cache.get(&shape_key(&sql, &lexed, mode, true)).unwrap();
                let hints = route_hints(&sql, &lexed.comments).unwrap();
                let values = StatementValues {
                    sql: &sql,
                    tokens: &lexed.tokens,
                    mode,
                    params: &[],
                    last_insert_id: 0,
                    generated: &[],
                };
                let inputs = Inputs {
                    text: Text {
                        sql: &sql,
                        tokens: &lexed.tokens,
                        prefix: b"",
                    },
                    analysis: &analysis,
                    values,
                    hints: &hints,
                    session: &session,
                    binary: false,
                    scatter: ScatterPolicy {
                        reads: true,
                        writes: false,
                    },
                    now_ms: NOW,
                    scope: None,
                };
                // Planning renders each shard's statement.
                rt.block_on(plan(&router, &inputs)).unwrap()
            })
        });
    }
}

criterion_group!(benches, decode, analyse_and_route);
criterion_main!(benches);
