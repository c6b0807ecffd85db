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
//! - **MCP sessions per credential**: a credential holds [`MCP_SESSIONS_PER_TOKEN`] sessions
//!   at most; opening one more ends its oldest, so a client that opens a session per call
//!   and never closes any keeps a bounded number alive, whatever its rate (rmcp has no
//!   limit of its own; each idle one would otherwise live for its keep-alive).

use crate::auth::{bearer_token, digest};
use crate::error::SearchError;
use crate::http::{ApiError, AppState, BODY_LIMIT};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::SessionManager;
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

/// MCP sessions one credential may hold at once (see the module documentation). Well above
/// what an agent runtime keeps open (a session per agent in flight), far below a leak.
pub(crate) const MCP_SESSIONS_PER_TOKEN: usize = 128;

/// Who opened a session, and when relative to the others.
#[derive(Debug, Clone, Copy)]
struct Owner {
    credential: [u8; 32],
    opened: u64,
}

/// MCP sessions and the digest of the credential that opened each.
#[derive(Debug)]
pub(crate) struct McpSessions {
    owners: Mutex<Owners>,
    /// rmcp's sessions: one it ended (idle for its keep-alive, or closed) has no owner to keep.
    live: Arc<LocalSessionManager>,
    per_credential: usize,
}

#[derive(Debug, Default)]
struct Owners {
    by_session: HashMap<String, Owner>,
    opened: u64,
}

impl McpSessions {
    pub(crate) fn new(live: Arc<LocalSessionManager>) -> Self {
        McpSessions::with_limit(live, MCP_SESSIONS_PER_TOKEN)
    }

    fn with_limit(live: Arc<LocalSessionManager>, per_credential: usize) -> Self {
        McpSessions {
            owners: Mutex::default(),
            live,
            per_credential: per_credential.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Owners> {
        // The map holds no invariant a panic elsewhere could break.
        self.owners.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn owner(&self, id: &str) -> Option<[u8; 32]> {
        self.lock().by_session.get(id).map(|owner| owner.credential)
    }

    fn closed(&self, id: &str) {
        self.lock().by_session.remove(id);
    }

    /// Records who opened session `id`, and forgets the owners of sessions rmcp has ended:
    /// most clients never send the closing DELETE, so without this the map would grow by one
    /// entry per session for the life of the process. Past [`MCP_SESSIONS_PER_TOKEN`] sessions
    /// of that credential, its oldest ones end.
    async fn opened(&self, id: &str, credential: [u8; 32]) {
        // Owners recorded from here on may be missing from the snapshot of live sessions
        // (another session opening meanwhile): only older ones are forgotten for that.
        let recorded_before = self.lock().opened;
        let live = self.live_sessions().await;
        let surplus = self.record(id, credential, &live, recorded_before);
        for id in surplus {
            tracing::info!(
                limit = self.per_credential,
                "ended the oldest mcp session of a credential that opened one more than its limit"
            );
            if let Err(error) = self.live.close_session(&Arc::from(id.as_str())).await {
                tracing::warn!(%error, "could not end an mcp session over its credential's limit");
            }
        }
    }
    async fn live_sessions(&self) -> HashSet<String> {
        self.live
            .sessions
            .read()
            .await
            .keys()
            .map(|id| id.to_string())
            .collect()
    }

    /// Records `id`'s owner, forgets those recorded up to `recorded_before` whose session is
    /// not in `live`, and returns the sessions of `credential` past its limit (forgotten too).
    fn record(
        &self,
        id: &str,
        credential: [u8; 32],
        live: &HashSet<String>,
        recorded_before: u64,
    ) -> Vec<String> {
        let mut owners = self.lock();
        owners
            .by_session
            .retain(|id, owner| owner.opened > recorded_before || live.contains(id));
        owners.opened += 1;
        let opened = owners.opened;
        owners
            .by_session
            .insert(id.to_owned(), Owner { credential, opened });
        let mut own: Vec<(u64, &String)> = owners
            .by_session
            .iter()
            .filter(|(_, owner)| owner.credential == credential)
            .map(|(id, owner)| (owner.opened, id))
            .collect();
        let over = own.len().saturating_sub(self.per_credential);
        own.sort_unstable();
        let surplus: Vec<String> = own.iter().take(over).map(|(_, id)| (*id).clone()).collect();
        for id in &surplus {
            owners.by_session.remove(id);
        }
        surplus
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
        // A session without a recorded owner was not opened through this guard, or ended:
        // refused like one of other credentials, never served to whoever names it.
        if state.mcp_sessions.owner(id) != Some(credential) {
            tracing::warn!(
                "refused an mcp request of a session opened with other credentials or ended"
            );
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
            state.mcp_sessions.closed(id);
        }
        Some(_) => {}
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_owner_of_a_session_rmcp_ended_is_forgotten_when_another_opens() {
        let live = Arc::new(LocalSessionManager::default());
        let sessions = McpSessions::new(live.clone());
        let (first, _transport) = live.create_session().await.expect("session");
        sessions.opened(&first, [1; 32]).await;
        sessions.opened("ended-long-ago", [2; 32]).await;
        let (second, _transport) = live.create_session().await.expect("session");
        sessions.opened(&second, [3; 32]).await;
        let mut owned: Vec<String> = sessions.lock().by_session.keys().cloned().collect();
        owned.sort();
        let mut expected = vec![first.to_string(), second.to_string()];
        expected.sort();
        assert_eq!(owned, expected, "the ended session's owner is gone");
        assert_eq!(sessions.owner(first.as_ref()), Some([1; 32]));
    }

    /// Another session opening between a session's snapshot of the live ones and its
    /// record keeps its owner: a session without one would be refused to its own client.
    #[tokio::test]
    async fn a_session_opened_while_another_records_its_owner_keeps_its_own() {
        let live = Arc::new(LocalSessionManager::default());
        let sessions = McpSessions::new(live.clone());
        let (first, _first) = live.create_session().await.expect("session");
        let recorded_before = sessions.lock().opened;
        let snapshot = sessions.live_sessions().await;
        let (second, _second) = live.create_session().await.expect("session");
        sessions.opened(&second, [2; 32]).await;
        sessions.record(&first, [1; 32], &snapshot, recorded_before);
        assert_eq!(sessions.owner(second.as_ref()), Some([2; 32]));
        assert_eq!(sessions.owner(first.as_ref()), Some([1; 32]));
    }

    #[tokio::test]
    async fn a_credential_opening_sessions_past_its_limit_ends_its_oldest_and_nobody_elses() {
        let live = Arc::new(crate::mcp::mcp_session_manager());
        let sessions = McpSessions::with_limit(live.clone(), 2);
        let mut transports = Vec::new();
        let open = |credential: [u8; 32]| {
            let (live, sessions) = (live.clone(), &sessions);
            async move {
                let (id, transport) = live.create_session().await.expect("session");
                sessions.opened(&id, credential).await;
                (id, transport)
            }
        };
        let mut mine = Vec::new();
        let (theirs, transport) = open([8; 32]).await;
        transports.push(transport);
        for _ in 0..4 {
            let (id, transport) = open([7; 32]).await;
            mine.push(id);
            transports.push(transport);
        }
        for ended in &mine[..2] {
            assert!(
                !live.has_session(ended).await.unwrap(),
                "the oldest two ended"
            );
            assert_eq!(sessions.owner(ended), None);
        }
        for kept in mine[2..].iter().chain([&theirs]) {
            assert!(live.has_session(kept).await.unwrap(), "{kept} lives on");
            assert!(sessions.owner(kept).is_some());
        }
        assert_eq!(
            live.sessions.read().await.len(),
            3,
            "two of mine, one of theirs"
        );
    }

    #[test]
    fn the_mcp_session_store_is_bounded_in_time() {
        let config = crate::mcp::mcp_session_manager().session_config;
        assert_eq!(config.keep_alive, Some(crate::mcp::MCP_SESSION_KEEP_ALIVE));
        assert!(config.completed_cache_ttl < std::time::Duration::from_secs(60));
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
