//! memory-search: the search service, its HTTP API and MCP server.
//!
//! Layers: [`request`] and [`response`] are the wire types shared by every transport;
//! [`SearchService`] is the one search code path (HTTP, MCP, CLI, eval); [`auth`] decides
//! who may read what; `http` and [`mcp`] are thin transports over [`search_as`] and
//! [`get_as`]; [`review`] holds the review use cases (list, edit, mark wrong, confirm,
//! delete) behind `/v1/review` and `deja episode`; [`Application`] binds and serves them.
//!
//! Architecture invariant: search never depends on the LLM. Strategies are read from the
//! store or requested from the worker through a queue; the optional verification stage
//! (`search.verify = "llm"`, off by default) is bounded in time and its failure only leaves
//! the calibrated labels as they were.
//!
//! Architecture invariant: every failure becomes a wire error code in one place,
//! [`SearchError::code`], and every answer is the envelope of [`response::Envelope`].

mod app;
pub mod auth;
pub mod digest;
mod error;
mod guard;
mod http;
mod http_review;
mod hub;
mod jobs;
pub mod mcp;
pub mod metrics;
pub mod preamble;
mod recognize;
pub mod request;
#[cfg(test)]
mod request_fuzz;
pub mod response;
pub mod review;
mod service;
mod strategy;
pub mod strategy_review;
mod verify;

pub use app::{verifier, Application, Dependencies, StartupError};
pub use auth::{Authenticator, Principal};
pub use deja_recognition::{load_late_encoder, load_reranker};
pub use error::{ErrorBody, ErrorCode, SearchError};
pub use jobs::{synthesis_claim_lease, JobError, SynthesisQueue};
pub use mcp::{mcp_http_service, serve_mcp_stdio, McpError, MemoryMcp, ADVISORY};
pub use recognize::{CandidateSet, StageTimings};
pub use request::{ComponentRef, GetRequest, Mode, SearchRequest};
pub use response::{Envelope, EpisodeDetails, EpisodeView, SearchResponse};
pub use review::{Review, ReviewedEpisode};
pub use service::{Readiness, SearchService};
pub use strategy_review::{ReviewedStrategy, StrategyRef};
pub use verify::{Verified, Verifier};

/// Authorizes `request` for `principal` (filling in the org and bound team it implies),
/// then searches. What HTTP and MCP call.
pub async fn search_as(
    service: &SearchService,
    principal: &Principal,
    mut request: SearchRequest,
) -> Result<SearchResponse, SearchError> {
    if let Err(error) = principal.authorize_search(&mut request) {
        metrics::error(error.code().as_str());
        error.log();
        return Err(error);
    }
    service.search(&request).await
}

/// Authorizes and reads one episode. An episode of a team the principal may not read is
/// reported as not found, like one of another org: ids do not reveal what exists.
pub async fn get_as(
    service: &SearchService,
    principal: &Principal,
    mut request: GetRequest,
) -> Result<EpisodeView, SearchError> {
    if let Err(error) = principal.authorize_get(&mut request) {
        metrics::error(error.code().as_str());
        error.log();
        return Err(error);
    }
    let view = service.get_episode(&request).await?;
    let team = view.details.as_ref().map(|d| d.team.as_str()).unwrap_or("");
    if principal.may_read_team(team) {
        Ok(view)
    } else {
        Err(SearchError::NotFound(format!(
            "episode `{}` was not found",
            request.id.trim()
        )))
    }
}
