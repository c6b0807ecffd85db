//! The HTTP API (axum). Every answer of `/v1` is the envelope of [`crate::response`]; errors,
//! including axum's own extractor rejections, go through [`ApiError`] so that no plain-text
//! rejection leaks.

use crate::auth::{Authenticator, Principal};
use crate::error::SearchError;
use crate::guard::{check_host, guard_mcp, McpSessions};
use crate::mcp::MemoryMcp;
use crate::request::{GetRequest, SearchRequest};
use crate::response::Envelope;
use crate::service::SearchService;
use crate::{get_as, preamble, search_as};
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::StreamableHttpService;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Requests are a few hundred bytes; anything near this is not a search. `/v1` and `/mcp`.
pub(crate) const BODY_LIMIT: usize = 64 * 1024;

#[derive(Clone)]
pub(crate) struct AppState {
    pub service: SearchService,
    pub auth: Arc<Authenticator>,
    pub mcp_sessions: Arc<McpSessions>,
    pub review: crate::review::Review,
    /// Where the hub links to Neo4j Browser (`None`: no link).
    pub neo4j_browser: Option<String>,
    /// Shown on the hub's failed-extractions page.
    pub dead_letter_queue: String,
    /// `[digest]`: whether `/v1/memory/digest` answers, and its mappings.
    pub digest: Arc<deja_config::DigestSettings>,
}

/// Routes: `/v1/*` and `/mcp` behind the guards of `guard.rs` and authentication;
/// `/healthz`, `/readyz`, `/metrics` open.
pub(crate) fn router(
    state: AppState,
    mcp: StreamableHttpService<MemoryMcp, LocalSessionManager>,
    preamble_enabled: bool,
) -> Router {
    let mut protected = Router::new()
        .route("/v1/memory/search", post(search))
        .route("/v1/memory/episodes/{id}", get(get_episode))
        .route("/v1/memory/digest", post(digest))
        .merge(crate::http_review::routes());
    if preamble_enabled {
        protected = protected.route("/v1/memory/preamble", post(preamble_handler));
    }
    let mcp = Router::new()
        .nest_service("/mcp", mcp)
        .route_layer(middleware::from_fn_with_state(state.clone(), guard_mcp));
    // Layers run outside in: the Host check, then authentication, then the MCP guard.
    let protected = protected
        .merge(mcp)
        .route_layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .route_layer(middleware::from_fn_with_state(state.clone(), check_host));
    // The hub authenticates by its own cookie, but is as open as `/v1` in dev mode without
    // tokens: the same Host check keeps a DNS-rebound page from reading or posting its forms.
    let hub =
        crate::hub::routes().route_layer(middleware::from_fn_with_state(state.clone(), check_host));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .merge(protected)
        .merge(hub)
        .merge(deja_telemetry::metrics_router())
        .fallback(not_found)
        .layer(middleware::map_response(method_not_allowed_envelope))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(middleware::from_fn(contain_panics))
        .with_state(state)
}

/// A handler that panics (a bug) answers the failure envelope (`internal`, 500) instead of
/// dropping the connection: the agent is told search failed and goes on.
async fn contain_panics(request: Request, next: Next) -> Response {
    let path = request.uri().path().to_owned();
    let served = async { Ok::<_, SearchError>(next.run(request).await) };
    match crate::error::answering_panics(&path, served).await {
        Ok(response) => response,
        Err(error) => ApiError(error).into_response(),
    }
}

/// A failure rendered as the envelope with the status of its code.
pub(crate) struct ApiError(pub SearchError);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = self.0.code();
        let status =
            StatusCode::from_u16(code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (status, Json(Envelope::<()>::failed(&self.0))).into_response();
        if status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

fn respond<T: Serialize>(result: Result<T, SearchError>) -> Response {
    match result {
        Ok(value) => Json(Envelope::ok(value)).into_response(),
        Err(error) => ApiError(error).into_response(),
    }
}

/// `Json<T>` whose rejection is a `bad_request` envelope naming the field.
pub(crate) struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        match Json::<T>::from_request(request, state).await {
            Ok(Json(value)) => Ok(ApiJson(value)),
            Err(rejection) => Err(ApiError(json_rejection(&rejection))),
        }
    }
}

/// `Path<T>` whose rejection (a segment that is not UTF-8 once decoded, not of `T`'s type) is
/// a `bad_request` envelope naming the path, not axum's plain text.
pub(crate) struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(ApiPath(value)),
            Err(rejection) => Err(ApiError(SearchError::bad_request(
                "path",
                rejection.body_text(),
            ))),
        }
    }
}

fn json_rejection(rejection: &JsonRejection) -> SearchError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return SearchError::PayloadTooLarge(BODY_LIMIT);
    }
    match rejection {
        JsonRejection::JsonDataError(_) => {
            let text = rejection.body_text();
            let detail = text
                .split_once("target type: ")
                .map_or(text.as_str(), |(_, rest)| rest)
                .to_owned();
            SearchError::bad_request(field_of(&detail), detail)
        }
        JsonRejection::MissingJsonContentType(_) => {
            SearchError::bad_request("content-type", "must be `application/json`")
        }
        _ => SearchError::bad_request("body", rejection.body_text()),
    }
}

/// The field a serde error is about: `unknown field `x``, `missing field `x``, or the
/// `path: problem` form of `serde_path_to_error` that axum uses.
pub(crate) fn field_of(detail: &str) -> String {
    for marker in ["unknown field `", "missing field `"] {
        if let Some(rest) = detail.split_once(marker).map(|(_, r)| r) {
            if let Some((field, _)) = rest.split_once('`') {
                return field.to_owned();
            }
        }
    }
    match detail.split_once(": ") {
        Some((path, _)) if !path.is_empty() && !path.contains(' ') => path.to_owned(),
        _ => "body".to_owned(),
    }
}

/// Establishes the [`Principal`] of `/v1` and `/mcp` requests.
async fn authenticate(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    // A header that is not visible ASCII is present but unusable: unauthorized, not absent.
    let header = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(|value| value.to_str().unwrap_or(""));
    match state.auth.authenticate(header) {
        Ok(principal) => {
            request.extensions_mut().insert(principal);
            next.run(request).await
        }
        Err(error) => {
            error.log();
            ApiError(error).into_response()
        }
    }
}

async fn search(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiJson(request): ApiJson<SearchRequest>,
) -> Response {
    respond(search_as(&state.service, &principal, request).await)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GetQuery {
    org: Option<String>,
}

async fn get_episode(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(id): ApiPath<String>,
    query: Result<Query<GetQuery>, QueryRejection>,
) -> Response {
    let org = match query {
        Ok(Query(q)) => q.org,
        Err(rejection) => {
            return ApiError(SearchError::bad_request(
                "query string",
                rejection.body_text(),
            ))
            .into_response()
        }
    };
    respond(get_as(&state.service, &principal, GetRequest { id, org }).await)
}

async fn digest(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiJson(request): ApiJson<crate::digest::DigestRequest>,
) -> Response {
    respond(crate::digest::digest_as(&state.service, &state.digest, &principal, request).await)
}

async fn preamble_handler(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiJson(request): ApiJson<SearchRequest>,
) -> Response {
    let result = search_as(&state.service, &principal, request).await;
    respond(result.map(|response| preamble::render(&response)))
}

async fn healthz() -> Json<serde_json::Value> {
    Json(serde_json::json!({"status": "ok"}))
}

async fn readyz(State(state): State<AppState>) -> Response {
    let readiness = state.service.readiness().await;
    let status = if readiness.is_ready() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = serde_json::json!({"ready": readiness.is_ready(), "checks": readiness});
    (status, Json(body)).into_response()
}

async fn not_found() -> Response {
    ApiError(SearchError::NotFound("no such endpoint".into())).into_response()
}

/// axum answers a known path asked with another method with an empty 405: the failure
/// envelope instead (axum adds the `Allow` header, which lists the methods the path takes, to
/// whatever this returns). A 405 with a body of its own (rmcp's at `/mcp`) is left as it is.
async fn method_not_allowed_envelope(method: axum::http::Method, response: Response) -> Response {
    use axum::body::HttpBody;
    if response.status() != StatusCode::METHOD_NOT_ALLOWED
        || response.body().size_hint().exact() != Some(0)
    {
        return response;
    }
    ApiError(SearchError::MethodNotAllowed(format!(
        "this endpoint does not take {method}; the Allow header lists the methods it takes"
    )))
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::{contain_panics, field_of};
    use axum::routing::get;
    use axum::{middleware, Router};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A handler that panics answers 500 with the failure envelope, and the server goes on.
    #[tokio::test]
    async fn a_panicking_handler_answers_the_internal_failure_envelope() {
        let router = Router::new()
            .route("/boom", get(|| async { panic!("a bug") as &'static str }))
            .route("/fine", get(|| async { "fine" }))
            .layer(middleware::from_fn(contain_panics));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await });
        let fetch = |path: &'static str| async move {
            let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
            let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
            stream.write_all(request.as_bytes()).await.unwrap();
            let mut response = String::new();
            stream.read_to_string(&mut response).await.unwrap();
            response
        };
        let response = fetch("/boom").await;
        assert!(response.starts_with("HTTP/1.1 500"), "{response}");
        assert!(
            response.contains(r#""success":false"#) && response.contains(r#""code":"internal""#),
            "{response}"
        );
        assert!(fetch("/fine").await.ends_with("fine"));
    }

    #[test]
    fn the_field_is_found_in_each_serde_message_form() {
        assert_eq!(
            field_of("unknown field `limt`, expected one of `org`"),
            "limt"
        );
        assert_eq!(field_of("missing field `id` at line 1 column 2"), "id");
        assert_eq!(
            field_of("limit: invalid type: string \"x\", expected usize at line 1 column 12"),
            "limit"
        );
        assert_eq!(
            field_of("components[0].type: invalid type"),
            "components[0].type"
        );
        assert_eq!(field_of("expected value at line 1 column 1"), "body");
    }
}
