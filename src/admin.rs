//! The HTTP admin port (SPEC §7): order ids for services that do not speak MySQL, and the
//! probes an orchestrator asks.
//!
//! - `POST /v1/order-ids` with `{"region": "GB", "count": 3}` (both optional: no region
//!   issues route key 0 and counts the caller; `count` 1 to [`MAX_IDS_PER_REQUEST`], default
//!   1; any content type, an empty body is `{}`) answers `{"ids": ["4254...", ...], "channel": "EU_CHANNEL", "route_key": 5}`. Ids are
//!   JSON strings: a JavaScript number loses precision above 2^53. Errors are
//!   `{"error": "..."}` with 400 (bad request) or 503 (cannot issue now: no lease, clock).
//! - `GET /healthz`: 200 while the process serves.
//! - `GET /readyz`: 200 when the default datasource answers, else 503.

use std::future::Future;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;

use crate::id::issuer::Caller;
use crate::server::Proxy;

/// The most ids one HTTP request may ask for.
pub const MAX_IDS_PER_REQUEST: usize = 10_000;

/// The body of `POST /v1/order-ids`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdRequest {
    /// A region code of the configuration's region table (`GB`, `CN`, ...); missing or
    /// unknown: route key 0.
    pub region: Option<String>,
    /// How many ids (default 1).
    pub count: Option<usize>,
}

/// The answer of `POST /v1/order-ids`.
#[derive(Debug, Serialize, Deserialize)]
pub struct IdResponse {
    /// The ids, as decimal strings.
    pub ids: Vec<String>,
    /// The channel the ids were issued for; `null` for route key 0.
    pub channel: Option<String>,
    /// The route key they carry (0 when no channel, or a channel not switched on yet: its
    /// ids are classic ones).
    pub route_key: u8,
}

type Reply = (StatusCode, Json<serde_json::Value>);

fn error(status: StatusCode, message: impl Into<String>) -> Reply {
    (status, Json(serde_json::json!({ "error": message.into() })))
}

/// Serves the admin port until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    proxy: Arc<Proxy>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = Router::new()
        .route("/v1/order-ids", post(order_ids))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .with_state(proxy);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}

async fn order_ids(
    State(proxy): State<Arc<Proxy>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Json<IdResponse>, Reply> {
    // Any content type (curl -d sends a form's): the body is JSON, or empty for one id
    // without a region.
    let request: IdRequest = if body.iter().all(u8::is_ascii_whitespace) {
        IdRequest::default()
    } else {
        let value: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|e| error(StatusCode::BAD_REQUEST, format!("request body: {e}")))?;
        // serde reads a struct from an array too; the API takes an object only.
        if !value.is_object() {
            return Err(error(
                StatusCode::BAD_REQUEST,
                "request body: expected a JSON object such as {\"region\": \"GB\", \"count\": 1}",
            ));
        }
        serde_json::from_value(value)
            .map_err(|e| error(StatusCode::BAD_REQUEST, format!("request body: {e}")))?
    };
    let count = request.count.unwrap_or(1);
    if !(1..=MAX_IDS_PER_REQUEST).contains(&count) {
        return Err(error(
            StatusCode::BAD_REQUEST,
            format!("count must be between 1 and {MAX_IDS_PER_REQUEST}"),
        ));
    }
    let config = &proxy.config;
    let channel = request
        .region
        .as_deref()
        .and_then(|r| config.channel_by_region(r));
    let agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok());
    let caller = Caller {
        user: "http",
        program: agent,
    };
    let ids = proxy
        .issuer
        .issue(channel, &caller, count)
        .await
        .map_err(|e| error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?;
    Ok(Json(IdResponse {
        ids: ids.iter().map(u64::to_string).collect(),
        channel: channel.map(|c| config.channel(c).name.clone()),
        route_key: channel
            .filter(|c| config.issuance.route_key_channels[usize::from(c.0)])
            .map_or(0, |c| config.channel(c).code),
    }))
}

async fn ready(State(proxy): State<Arc<Proxy>>) -> Reply {
    let ds = proxy.config.sharding.default_datasource;
    match proxy.pools.get(ds, false).await {
        Ok(_) => (StatusCode::OK, Json(serde_json::json!({ "ready": true }))),
        Err(e) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("default datasource: {e}"),
        ),
    }
}
