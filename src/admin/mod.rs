//! The HTTP admin port (SPEC §7): what an orchestrator and Prometheus ask, and order ids
//! for services that do not speak MySQL.
//!
//! - `GET /metrics`: every counter in the Prometheus text format ([`crate::metrics`]).
//! - `GET /healthz`: 200 while the process serves.
//! - `GET /readyz`: 200 when the configuration is loaded, the MySQL listener is bound (the
//!   admin port starts after it) and every datasource answers a ping on a pooled connection
//!   (when every pooled connection is in use, on a connection of its own: busy is not down,
//!   but a hung server is); 503 with the reason otherwise, and from the start of a drain.
//! - `POST /quitquitquit`: starts a drain, as SIGTERM does; loopback callers only (403
//!   otherwise), since the port may listen on the pod address for probes.
//! - `POST /v1/order-ids` with `{"region": "GB", "count": 3}` (both optional: no region
//!   issues route key 0 and counts the caller; `count` 1 to [`MAX_IDS_PER_REQUEST`], default
//!   1; any content type, an empty body is `{}`) answers
//!   `{"ids": ["4254...", ...], "channel": "EU_CHANNEL", "route_key": 5}`. Ids are JSON
//!   strings: a JavaScript number loses precision above 2^53. Errors are
//!   `{"error": "..."}` with 400 (bad request) or 503 (cannot issue now: no lease, clock).
//!
//! When the port listens on an address that is not loopback (`0.0.0.0` for probes on the
//! pod address), `POST /v1/order-ids` asks every caller, loopback ones included, for
//! `Authorization: Bearer <token>` with the token of `admin.token_file`: 401 (with
//! `WWW-Authenticate: Bearer`) without it, 403 with another token. The probes and
//! `/metrics` stay open; `/quitquitquit` stays for loopback callers.
//!
//! At most [`MAX_CONNECTIONS`] connections are served at once (more wait in the listen
//! backlog), a request's headers must arrive within [`HEADER_TIMEOUT`] and the whole
//! request within [`REQUEST_TIMEOUT`], so slow or idle HTTP clients cannot take the file
//! descriptors the MySQL port needs, and hold the port for seconds at most. The probes
//! and `/metrics` tell anyone who reaches the port how the proxy fares: keep it off other
//! pods (a NetworkPolicy) where that matters.

pub mod exposition;

use std::future::Future;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;

use crate::config::Admin;
use crate::execute::Target;
use crate::execute::control::Source;
use crate::issuance::Caller;
use crate::proxy::Proxy;

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

/// Connections the admin port serves at once.
pub const MAX_CONNECTIONS: usize = 1024;

/// How long `/readyz` waits for each datasource (probes time out after 1 s by default).
pub const READY_CHECK_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(900);

/// Time a client has to send a request's headers (an idle keep-alive connection gets as
/// long for its next request).
pub const HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Largest `/v1/order-ids` request body, in bytes.
pub const MAX_BODY: usize = 64 * 1024;

/// Time a probe, `/metrics` or `/quitquitquit` request has from its headers to its answer,
/// and an id request for its body.
pub const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Serves the admin port until `shutdown` completes. Whether `POST /v1/order-ids` asks for
/// the bearer token follows the address `listener` is bound to
/// ([`crate::config::Admin::needs_token`]); the token is the configuration's in force.
pub async fn serve(
    listener: TcpListener,
    proxy: Arc<Proxy>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    // Probes and metrics answer at once: their whole request is bounded. An id request
    // may wait for a worker id lease (up to a lease time after the lease rows were first
    // created): only its body is bounded.
    let bounded_routes = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .route("/quitquitquit", post(quit))
        .layer(axum::middleware::from_fn(bounded));
    let token_required = Admin::needs_token(listener.local_addr()?);
    let app = Router::new()
        .route("/v1/order-ids", post(order_ids))
        .route_layer(axum::middleware::from_fn_with_state(
            (proxy.clone(), token_required),
            bearer,
        ))
        .merge(bounded_routes)
        .with_state(proxy);
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let mut connections = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            permit = slots.clone().acquire_owned() => permit.expect("never closed"),
            () = &mut shutdown => break,
        };
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "admin port: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            () = &mut shutdown => break,
        };
        let service = hyper_util::service::TowerToHyperService::new(
            app.clone().layer(axum::Extension(ConnectInfo(peer))),
        );
        connections.spawn(async move {
            let served = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                .await;
            if let Err(e) = served {
                tracing::debug!(%peer, error = %e, "admin port: connection ended");
            }
            drop(permit);
        });
        while connections.try_join_next().is_some() {}
    }
    connections.shutdown().await;
    Ok(())
}

/// Answers 408 to a request (body included) not done within [`REQUEST_TIMEOUT`].
async fn bounded(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    match tokio::time::timeout(REQUEST_TIMEOUT, next.run(request)).await {
        Ok(response) => response,
        Err(_) => error(
            StatusCode::REQUEST_TIMEOUT,
            format!("request not complete within {REQUEST_TIMEOUT:?}"),
        )
        .into_response(),
    }
}

/// Lets a request through when the listener is loopback, or when it carries
/// `Authorization: Bearer <token>` with the configured token (compared in constant time).
async fn bearer(
    State((proxy, required)): State<(Arc<Proxy>, bool)>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    if !required {
        return next.run(request).await;
    }
    let runtime = proxy.runtime();
    let Some(token) = &runtime.config.admin.token else {
        // Only a test can get here: a configuration without a token refuses to start
        // with a listener that is not loopback (Admin::check).
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the admin port is not on loopback and admin.token_file is not set",
        )
        .into_response();
    };
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| bearer_token(v.as_bytes()));
    match given {
        None => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer realm=\"routekey-proxy\"")],
            Json(serde_json::json!({
                "error": "this port asks for `Authorization: Bearer <token>` (the token of admin.token_file)"
            })),
        )
            .into_response(),
        Some(given) if token.matches(given) => next.run(request).await,
        Some(_) => error(StatusCode::FORBIDDEN, "wrong bearer token").into_response(),
    }
}

/// The token of an `Authorization` header value `Bearer <token>` (scheme case-insensitive,
/// RFC 6750 §2.1); `None` for another scheme or an empty token.
fn bearer_token(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at_checked(7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    let token = rest.trim_ascii();
    (!token.is_empty()).then_some(token)
}

async fn metrics(State(proxy): State<Arc<Proxy>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)],
        exposition::render(&proxy),
    )
}

async fn quit(
    State(proxy): State<Arc<Proxy>>,
    ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>,
) -> Reply {
    // `::ffff:127.0.0.1` when the port listens on `[::]`.
    if !peer.ip().to_canonical().is_loopback() {
        return error(
            StatusCode::FORBIDDEN,
            "/quitquitquit answers loopback callers only",
        );
    }
    tracing::info!(%peer, "drain asked for over /quitquitquit");
    proxy.request_drain();
    (
        StatusCode::OK,
        Json(serde_json::json!({ "draining": true })),
    )
}

async fn order_ids(
    State(proxy): State<Arc<Proxy>>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Result<Json<IdResponse>, Reply> {
    let body =
        match tokio::time::timeout(REQUEST_TIMEOUT, axum::body::to_bytes(body, MAX_BODY)).await {
            Ok(Ok(bytes)) => bytes,
            Ok(Err(e)) => {
                return Err(error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("request body: {e} (at most {MAX_BODY} bytes)"),
                ));
            }
            Err(_) => {
                return Err(error(
                    StatusCode::REQUEST_TIMEOUT,
                    format!("request body not complete within {REQUEST_TIMEOUT:?}"),
                ));
            }
        };
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
    let runtime = proxy.runtime();
    let config = &runtime.config;
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
    if proxy.metrics.draining() {
        return error(StatusCode::SERVICE_UNAVAILABLE, "draining");
    }
    // Every datasource, at once; a pooled connection proves it answers.
    let runtime = proxy.runtime();
    let checks = runtime
        .config
        .datasources
        .iter()
        .enumerate()
        .map(|(i, ds)| {
            let runtime = runtime.clone();
            async move {
                let id = crate::config::DatasourceId(i as u16);
                let check = async {
                    // Every pooled connection serving a statement is busy, not down, but a
                    // hung server looks busy too: then it is asked on a connection of its own.
                    let mut conn = runtime
                        .control_connection(Target::read(id), Source::PoolUnlessBusy)
                        .await?;
                    conn.ping(READY_CHECK_TIMEOUT).await
                };
                match tokio::time::timeout(READY_CHECK_TIMEOUT, check).await {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(e)) => Err(format!("datasource {}: {e}", ds.name)),
                    Err(_) => Err(format!(
                        "datasource {}: no connection within {READY_CHECK_TIMEOUT:?}",
                        ds.name
                    )),
                }
            }
        });
    let failures: Vec<String> = futures_util::future::join_all(checks)
        .await
        .into_iter()
        .filter_map(Result::err)
        .collect();
    if failures.is_empty() {
        (StatusCode::OK, Json(serde_json::json!({ "ready": true })))
    } else {
        error(StatusCode::SERVICE_UNAVAILABLE, failures.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::bearer_token;

    #[test]
    fn the_bearer_scheme_is_read_case_insensitively() {
        assert_eq!(bearer_token(b"Bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"bearer  abc "), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"BEARER abc"), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"Bearer "), None);
        assert_eq!(bearer_token(b"Basic YWJj"), None);
        assert_eq!(bearer_token(b"Bearer"), None);
        assert_eq!(bearer_token(b""), None);
    }
}
