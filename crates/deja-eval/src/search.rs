//! Running eval queries through the production search path: `deja_api::search_as` on a
//! `SearchService`, exactly what HTTP, MCP and the skill call. Only the service's settings
//! differ between variants (floor, recency), never the code.

use super::corpus::EvalQuery;
use crate::EvalError;
use deja_api::{search_as, CandidateSet, Mode, Principal, SearchRequest, SearchService};
use deja_config::SearchSettings;
use deja_domain::recognition::MatchStrength;
use deja_embed::Embedder;
use deja_graph::GraphStore;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;

/// The deadline of eval searches: a search that would answer in production is never cut
/// short because a build or the worker shares the machine's two cores. Results do not
/// depend on it; only the chance of a spurious `deadline_exceeded` does.
const EVAL_DEADLINE_MS: u64 = 60_000;

/// One returned episode, named by the incident it stands for.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    pub incident: String,
    /// Raw cosine (semantic modes only).
    pub similarity: Option<f64>,
    /// Ranking score (semantic) or Lucene relevance (text).
    pub score: Option<f64>,
    /// `strong` or `possible` (semantic mode).
    #[serde(skip_serializing_if = "Option::is_none", rename = "match")]
    pub strength: Option<MatchStrength>,
    /// Calibrated confidence (semantic mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
}

pub fn ids(hits: &[Hit]) -> Vec<String> {
    hits.iter().map(|h| h.incident.clone()).collect()
}

/// The ids of the hits labelled `strong`.
pub fn strong_ids(hits: &[Hit]) -> Vec<String> {
    hits.iter()
        .filter(|h| h.strength == Some(MatchStrength::Strong))
        .map(|h| h.incident.clone())
        .collect()
}

/// A search service over `store` with `settings` (plus the eval deadline) and no synthesis
/// queue: the eval reads, it never asks the worker for strategies.
pub fn service(
    store: &GraphStore,
    embedder: &Arc<dyn Embedder>,
    settings: &SearchSettings,
) -> SearchService {
    let mut settings = settings.clone();
    settings.deadline_ms = settings.deadline_ms.max(EVAL_DEADLINE_MS);
    // Reranking must not be skipped for time on a busy machine: the figures would then mix
    // the two calibrations.
    settings.rerank_budget_ms = settings.rerank_budget_ms.max(EVAL_DEADLINE_MS);
    SearchService::new(store.clone(), Some(embedder.clone()), None, &settings)
}

/// Searches `org` for `query` as a local caller bound to that org: `team: null` stays
/// org-wide, a team narrows the scope. `mode: None` is what the skill sends (semantic).
/// `incident_of` maps an episode's correlation id to the incident it stands for.
pub async fn run(
    service: &SearchService,
    org: &str,
    query: &EvalQuery,
    mode: Option<Mode>,
    limit: Option<usize>,
    incident_of: &HashMap<String, String>,
) -> Result<Vec<Hit>, EvalError> {
    let request = SearchRequest {
        team: query.team.clone(),
        query: query.query.clone(),
        mode,
        limit,
        ..SearchRequest::default()
    };
    let response = search_as(service, &Principal::local(org, None), request)
        .await
        .map_err(|source| EvalError::Query {
            id: query.id.clone(),
            source,
        })?;
    let hits: Vec<Hit> = response
        .episodes
        .into_iter()
        .map(|episode| Hit {
            incident: incident_of
                .get(&episode.correlation_id)
                .cloned()
                .unwrap_or(episode.correlation_id),
            similarity: episode.similarity,
            score: episode.score,
            strength: episode.match_strength,
            confidence: episode.confidence,
        })
        .collect();
    // Without its model the service answers a semantic request with text search; scoring
    // that as semantic would be a lie.
    if mode != Some(Mode::Text) && hits.iter().any(|h| h.similarity.is_none()) {
        return Err(EvalError::Input(format!(
            "query {}: semantic search fell back to text ({})",
            query.id,
            response.notice.unwrap_or_default()
        )));
    }
    Ok(hits)
}

/// What the skill sees for one query (`answer`, the default limit) and a deeper list of the
/// same ranking for the reciprocal rank.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    pub answer: Vec<Hit>,
    pub deeper: Vec<Hit>,
}

/// Every query through the production settings: once with the default limit (what the
/// skill shows), once with `MRR_DEPTH`.
pub async fn production_answers(
    service: &SearchService,
    org: &str,
    queries: &[EvalQuery],
    incident_of: &HashMap<String, String>,
) -> Result<Vec<Answer>, EvalError> {
    let mut answers = Vec::with_capacity(queries.len());
    for query in queries {
        answers.push(production_answer(service, org, query, incident_of).await?);
    }
    Ok(answers)
}

/// One query's [`Answer`]: the default limit, then `MRR_DEPTH`.
pub async fn production_answer(
    service: &SearchService,
    org: &str,
    query: &EvalQuery,
    incident_of: &HashMap<String, String>,
) -> Result<Answer, EvalError> {
    let answer = run(service, org, query, None, None, incident_of).await?;
    let deeper = run(
        service,
        org,
        query,
        None,
        Some(crate::metrics::MRR_DEPTH),
        incident_of,
    )
    .await?;
    Ok(Answer { answer, deeper })
}

/// The recognition candidates of one query (retrieve, fuse, rerank, evidence; no decision),
/// with the deepest limit so that every variant can rank `MRR_DEPTH` of them.
pub async fn candidates(
    service: &SearchService,
    org: &str,
    query: &EvalQuery,
) -> Result<CandidateSet, EvalError> {
    let mut request = SearchRequest {
        team: query.team.clone(),
        query: query.query.clone(),
        limit: Some(crate::metrics::MRR_DEPTH),
        ..SearchRequest::default()
    };
    Principal::local(org, None)
        .authorize_search(&mut request)
        .map_err(|source| EvalError::Query {
            id: query.id.clone(),
            source,
        })?;
    service
        .recognition_candidates(&request)
        .await
        .map_err(|source| EvalError::Query {
            id: query.id.clone(),
            source,
        })
}
