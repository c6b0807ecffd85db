//! Every failure of memory-search, and the ONE place where it becomes a wire error code and
//! an HTTP status. HTTP, MCP and the CLI all render errors through [`SearchError::code`].

use deja_domain::error_chain;
use deja_graph::GraphError;
use serde::{Deserialize, Serialize};

/// The `error.code` of a failure envelope. Stable: agents and scripts match on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    Neo4jUnavailable,
    /// The message broker did not take what a review action publishes (HTTP 503).
    BrokerUnavailable,
    EmbedderUnavailable,
    DeadlineExceeded,
    BadRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    /// `If-Match` named a version that is no longer the stored one (HTTP 412).
    VersionConflict,
    /// A write that must say which version it changes did not (HTTP 428).
    PreconditionRequired,
    /// The endpoint exists but not with this HTTP method (HTTP 405).
    MethodNotAllowed,
    /// The request body is over the API's limit (HTTP 413).
    PayloadTooLarge,
    Internal,
}

impl ErrorCode {
    /// Every code, for the documents that list them (`docs/agent/memory-search.skill.json`).
    pub const ALL: [ErrorCode; 13] = [
        ErrorCode::Neo4jUnavailable,
        ErrorCode::BrokerUnavailable,
        ErrorCode::EmbedderUnavailable,
        ErrorCode::DeadlineExceeded,
        ErrorCode::BadRequest,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::NotFound,
        ErrorCode::VersionConflict,
        ErrorCode::PreconditionRequired,
        ErrorCode::MethodNotAllowed,
        ErrorCode::PayloadTooLarge,
        ErrorCode::Internal,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Neo4jUnavailable => "neo4j_unavailable",
            ErrorCode::BrokerUnavailable => "broker_unavailable",
            ErrorCode::EmbedderUnavailable => "embedder_unavailable",
            ErrorCode::DeadlineExceeded => "deadline_exceeded",
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotFound => "not_found",
            ErrorCode::VersionConflict => "version_conflict",
            ErrorCode::PreconditionRequired => "precondition_required",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::Internal => "internal",
        }
    }

    /// The HTTP status that carries this code. Service-side failures are 5xx so that
    /// proxies and dashboards see them, but the body is always the failure envelope.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::BadRequest => 400,
            ErrorCode::Unauthorized => 401,
            ErrorCode::Forbidden => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::PayloadTooLarge => 413,
            ErrorCode::VersionConflict => 412,
            ErrorCode::PreconditionRequired => 428,
            ErrorCode::Internal => 500,
            ErrorCode::Neo4jUnavailable
            | ErrorCode::BrokerUnavailable
            | ErrorCode::EmbedderUnavailable => 503,
            ErrorCode::DeadlineExceeded => 504,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// The request is wrong; `field` names the offending field (`body` for unparsable JSON).
    #[error("invalid `{field}`: {problem}")]
    BadRequest { field: String, problem: String },
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    /// The message says what was not found.
    #[error("{0}")]
    NotFound(String),
    /// Somebody changed the episode or strategy since the caller read it: re-read,
    /// re-apply, retry. `subject` names it with its kind (see [`SearchError::conflict`]).
    #[error("{subject} changed since version {expected}: it is now at version {current}; reload it and apply your change again")]
    VersionConflict {
        subject: String,
        expected: i64,
        current: i64,
    },
    #[error("{0}")]
    PreconditionRequired(String),
    /// The message names the methods the endpoint takes.
    #[error("{0}")]
    MethodNotAllowed(String),
    /// The body limit in bytes.
    #[error("the request body is over the {0} byte limit")]
    PayloadTooLarge(usize),
    #[error("memory search did not answer within {0} ms; continue without it")]
    DeadlineExceeded(u64),
    #[error("the episode store (neo4j) is unavailable; continue without memory")]
    Neo4jUnavailable(#[source] GraphError),
    /// The message broker did not take what a review action publishes (a retried turn):
    /// nothing was queued. Transient like a Neo4j outage: try again later. (Boxed: every
    /// search result carries this enum.)
    #[error("the message broker (rabbitmq) is unavailable: nothing was queued; try again later")]
    BrokerUnavailable(#[source] Box<deja_bus::BusError>),
    /// Semantic mode was asked for explicitly and the embedding model cannot run. (With the
    /// mode omitted, search falls back to text instead.)
    #[error("the embedding model is unavailable ({0}); retry with mode \"text\"")]
    EmbedderUnavailable(String),
    /// Something that should not happen (a bad query, undecodable data). Details are logged,
    /// not returned.
    #[error("internal error in memory search")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl SearchError {
    pub fn bad_request(field: impl Into<String>, problem: impl Into<String>) -> SearchError {
        SearchError::BadRequest {
            field: field.into(),
            problem: problem.into(),
        }
    }

    /// A `version_conflict` on the `kind` (`episode`, `strategy`) named `name`.
    pub fn conflict(kind: &str, name: &str, expected: i64, current: i64) -> SearchError {
        SearchError::VersionConflict {
            subject: format!("{kind} `{}`", name.trim()),
            expected,
            current,
        }
    }

    /// The single mapping from failures to wire codes.
    pub fn code(&self) -> ErrorCode {
        match self {
            SearchError::BadRequest { .. } => ErrorCode::BadRequest,
            SearchError::Unauthorized(_) => ErrorCode::Unauthorized,
            SearchError::Forbidden(_) => ErrorCode::Forbidden,
            SearchError::NotFound(_) => ErrorCode::NotFound,
            SearchError::VersionConflict { .. } => ErrorCode::VersionConflict,
            SearchError::PreconditionRequired(_) => ErrorCode::PreconditionRequired,
            SearchError::MethodNotAllowed(_) => ErrorCode::MethodNotAllowed,
            SearchError::PayloadTooLarge(_) => ErrorCode::PayloadTooLarge,
            SearchError::DeadlineExceeded(_) => ErrorCode::DeadlineExceeded,
            SearchError::Neo4jUnavailable(_) => ErrorCode::Neo4jUnavailable,
            SearchError::BrokerUnavailable(_) => ErrorCode::BrokerUnavailable,
            SearchError::EmbedderUnavailable(_) => ErrorCode::EmbedderUnavailable,
            SearchError::Internal(_) => ErrorCode::Internal,
        }
    }

    /// The wire form: `{"code": ..., "message": ...}`.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            code: self.code(),
            message: self.to_string(),
        }
    }

    /// Logs what the wire message leaves out (the cause chain), at a level that matches
    /// whose fault it is.
    pub fn log(&self) {
        let chain = error_chain(self);
        match self.code() {
            ErrorCode::Internal => tracing::error!(error = %chain, "memory search failed"),
            ErrorCode::Neo4jUnavailable
            | ErrorCode::EmbedderUnavailable
            | ErrorCode::DeadlineExceeded => {
                tracing::warn!(error = %chain, "memory search degraded")
            }
            _ => tracing::debug!(error = %chain, "memory search refused"),
        }
    }
}

/// `work` (what serves `what`: a route, a tool) with a panic in it (a bug) answered as an
/// `internal` failure, logged with the panic's message: the caller is told the call failed
/// rather than left without an answer (HTTP would drop the connection; rmcp runs each request
/// in a task of its own, and one that panics never answers).
pub(crate) async fn answering_panics<T>(
    what: &str,
    work: impl std::future::Future<Output = Result<T, SearchError>>,
) -> Result<T, SearchError> {
    use futures::FutureExt;
    std::panic::AssertUnwindSafe(work)
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_owned());
            tracing::error!(%what, panic = %message, "a handler panicked");
            Err(SearchError::Internal(
                format!("{what} panicked: {message}").into(),
            ))
        })
}

impl From<GraphError> for SearchError {
    fn from(error: GraphError) -> Self {
        match error {
            // A connection that cannot be configured is as unavailable as one refused, and a
            // query stopped before it answered (shutdown) as transient. So is a store that
            // refuses every query whatever it is (credentials rejected, a database missing,
            // read-only or failing): the store's fault, not a bug of the request.
            e @ GraphError::Config { .. } => SearchError::Neo4jUnavailable(e),
            e if e.is_store_fault() => SearchError::Neo4jUnavailable(e),
            e => SearchError::Internal(Box::new(e)),
        }
    }
}

/// `error` of a failure envelope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub code: ErrorCode,
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_serialize_as_their_wire_names() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_value(code).unwrap();
            assert_eq!(json, serde_json::json!(code.as_str()));
        }
    }

    #[test]
    fn a_broker_outage_is_transient_and_says_it_is_the_broker() {
        let error = SearchError::BrokerUnavailable(Box::new(deja_bus::BusError::TooLong {
            what: "routing key",
            len: 300,
        }));
        assert_eq!(error.code(), ErrorCode::BrokerUnavailable);
        assert_eq!(error.code().http_status(), 503);
        assert!(error.to_string().contains("rabbitmq"), "{error}");
    }

    /// Rejected credentials fail every query: the store is unavailable to search (503), not
    /// a bug of this request (500); data the store cannot decode still is one.
    #[test]
    fn a_store_that_refuses_every_query_is_unavailable_not_internal() {
        let refused = SearchError::from(deja_graph::GraphError::Query {
            query: "search/semantic_exact_team",
            source: neo4rs::Error::AuthenticationError("the password was rotated".into()),
        });
        assert_eq!(refused.code(), ErrorCode::Neo4jUnavailable);
        assert_eq!(refused.code().http_status(), 503);
        let undecodable = SearchError::from(deja_graph::GraphError::Decode {
            query: "search/semantic_exact_team",
            detail: "no id".into(),
        });
        assert_eq!(undecodable.code(), ErrorCode::Internal);
    }

    /// Work that panics answers an `internal` failure instead of never answering.
    #[tokio::test]
    async fn a_tool_that_panics_answers_an_internal_failure() {
        let answer: Result<(), SearchError> =
            answering_panics("memory_search", async { panic!("a bug") }).await;
        assert!(
            matches!(answer, Err(SearchError::Internal(_))),
            "{answer:?}"
        );
        let fine = answering_panics("memory_search", async { Ok::<_, SearchError>(3) }).await;
        assert_eq!(fine.ok(), Some(3));
    }

    #[test]
    fn a_bad_request_message_names_the_field() {
        let error = SearchError::bad_request("limit", "must be between 1 and 50");
        assert_eq!(error.code().http_status(), 400);
        assert!(error.body().message.contains("`limit`"));
    }
}
