//! Request guards in front of the protected routes, besides authentication (`auth.rs`):
//!
//! - **Host check** when the API serves without credentials (dev mode, no tokens): a page on
//!   another site that rebinds its DNS name to 127.0.0.1 must not reach `/v1/*` through the
//!   victim's browser, so only loopback host names are accepted, as rmcp already does for
//!   `/mcp`. With tokens, a rebinding page cannot forge a bearer token; no check is needed.
//! - **MCP body limit**: `/mcp` reads its body itself (not through axum's extractors), so the
//!   `/v1` limit is applied here explicitly.
//! - **MCP session binding**: the session rmcp creates on `initialize` is bound to the
//!   credential that opened it; a request of that session with another credential is
//!   answered as if the session did not exist.

use crate::auth::{bearer_token, digest};
use crate::error::SearchError;
use crate::http::{ApiError, AppState, BODY_LIMIT};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// The header rmcp's streamable HTTP transport keys sessions by.
const SESSION_HEADER: &str = "mcp-session-id";
/// Host names accepted without credentials.
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Whether a `Host` header value (with or without port) names a loopback host.
pub(crate) fn is_loopback_host(value: &str) -> bool {
    let host = match value.strip_prefix('[') {
        // `[::1]:8080`
        Some(rest) => rest.split(']').next().unwrap_or(""),
        // A bare IPv6 address has several colons and no port.
        None if value.matches(':').count() > 1 => value,
        None => value.rsplit_once(':').map_or(value, |(host, port)| {
            if port.chars().all(|c| c.is_ascii_digit()) {
                host
            } else {
                value
            }
        }),
    };
    LOOPBACK_HOSTS
        .iter()
        .any(|allowed| host.eq_ignore_ascii_case(allowed))
}

/// Refuses a request whose `Host` is not loopback, when serving without credentials.
pub(crate) async fn check_host(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    if state.auth.is_open() {
        let host = request
            .headers()
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .or_else(|| request.uri().authority().map(|a| a.as_str()))
            .unwrap_or("");
        if !is_loopback_host(host) {
            tracing::warn!(%host, "refused a request with a non-loopback Host header in dev mode");
            return ApiError(SearchError::Forbidden(
                "the Host header must name a loopback address in dev mode".into(),
            ))
            .into_response();
        }
    }
    next.run(request).await
}

/// MCP sessions and the digest of the credential that opened each.
#[derive(Debug)]
pub(crate) struct McpSessions {
    owners: Mutex<HashMap<String, [u8; 32]>>,
    /// rmcp's sessions: one it ended (idle for its keep-alive, or closed) has no owner to keep.
    live: Arc<LocalSessionManager>,
}

impl McpSessions {
    pub(crate) fn new(live: Arc<LocalSessionManager>) -> Self {
        McpSessions {
            owners: Mutex::default(),
            live,
        }
    }

    fn owners(&self) -> std::sync::MutexGuard<'_, HashMap<String, [u8; 32]>> {
        // The map holds no invariant a panic elsewhere could break.
        self.owners.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records who opened session `id`, and forgets the owners of sessions rmcp has ended:
    /// most clients never send the closing DELETE, so without this the map would grow by one
    /// entry per session for the life of the process.
    async fn opened(&self, id: &str, credential: [u8; 32]) {
        let live: HashSet<String> = self
            .live
            .sessions
            .read()
            .await
            .keys()
            .map(|id| id.to_string())
            .collect();
        let mut owners = self.owners();
        owners.retain(|id, _| live.contains(id));
        owners.insert(id.to_owned(), credential);
    }
}

/// The body limit and the session binding of `/mcp` (runs after authentication).
pub(crate) async fn guard_mcp(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let too_large = || ApiError(SearchError::PayloadTooLarge(BODY_LIMIT)).into_response();
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > BODY_LIMIT) {
        return too_large();
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, BODY_LIMIT).await {
        Ok(bytes) => bytes,
        Err(_) => return too_large(),
    };
    let request = Request::from_parts(parts, Body::from(bytes));

    let credential = digest(
        request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer_token)
            .unwrap_or(""),
    );
    let session = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Some(id) = &session {
        let owner = state.mcp_sessions.owners().get(id).copied();
        if owner.is_some_and(|owner| owner != credential) {
            tracing::warn!("refused an mcp request of a session opened with other credentials");
            return (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response();
        }
    }
    let closing = request.method() == Method::DELETE;
    let response = next.run(request).await;
    match &session {
        None => {
            if let Some(id) = response
                .headers()
                .get(SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
            {
                state.mcp_sessions.opened(id, credential).await;
            }
        }
        Some(id) if closing && response.status().is_success() => {
            state.mcp_sessions.owners().remove(id);
        }
        Some(_) => {}
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::transport::streamable_http_server::session::SessionManager;

    #[tokio::test]
    async fn the_owner_of_a_session_rmcp_ended_is_forgotten_when_another_opens() {
        let live = Arc::new(LocalSessionManager::default());
        let sessions = McpSessions::new(live.clone());
        let (first, _transport) = live.create_session().await.expect("session");
        sessions.opened(&first, [1; 32]).await;
        sessions.opened("ended-long-ago", [2; 32]).await;
        let (second, _transport) = live.create_session().await.expect("session");
        sessions.opened(&second, [3; 32]).await;
        let mut owned: Vec<String> = sessions.owners().keys().cloned().collect();
        owned.sort();
        let mut expected = vec![first.to_string(), second.to_string()];
        expected.sort();
        assert_eq!(owned, expected, "the ended session's owner is gone");
        assert_eq!(sessions.owners().get(first.as_ref()), Some(&[1; 32]));
    }

    #[test]
    fn only_loopback_host_names_pass_with_or_without_a_port() {
        for ok in [
            "localhost",
            "LOCALHOST:8080",
            "127.0.0.1",
            "127.0.0.1:80",
            "[::1]:8080",
            "::1",
        ] {
            assert!(is_loopback_host(ok), "{ok}");
        }
        for refused in [
            "evil.example",
            "evil.example:8080",
            "127.0.0.1.evil.example",
            "",
            "[::2]:80",
            "localhost.evil:1",
        ] {
            assert!(!is_loopback_host(refused), "{refused}");
        }
    }
}
