//! The IO stages of recognition (the rules are in `deja_domain::recognition`):
//!
//! 1. candidates: the vector search and the full-text search of the scope, concurrently;
//! 2. fuse: reciprocal-rank fusion, the best `search.rerank_candidates` kept;
//! 3. rerank: the cross-encoder scores each (query, episode) pair, within
//!    `search.rerank_budget_ms` and the search deadline — past either, the search goes on
//!    without it and says so;
//! 4. evidence: components, issue type and literals shared with the query.
//!
//! [`SearchService::recognition_candidates`] stops there: the production search then calls
//! `deja_domain::recognition::decide`, and `deja eval retrieval` decides the same candidates
//! with each cross-validation fold's calibration. One path for both.

use crate::error::SearchError;
use crate::metrics as m;
use crate::request::ValidSearch;
use crate::service::SearchService;
use deja_domain::recognition::{annotate, fuse, Candidate, QueryText};
use deja_embed::rerank_blocking;
use deja_graph::SearchPlanSettings;
use serde::Serialize;
use std::time::{Duration, Instant};

/// What the candidate stages produced for one query.
#[derive(Debug, Clone)]
pub struct CandidateSet {
    /// The query's side of the lexical evidence, for the decision.
    pub query: QueryText,
    /// Fused, best first; `evidence.rerank` set when reranking ran.
    pub candidates: Vec<Candidate>,
    pub timings: StageTimings,
    /// Why a stage was skipped, in words for the agent (`None` = every stage ran).
    pub degraded: Option<String>,
}

/// Milliseconds each stage took (0 when skipped).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct StageTimings {
    /// The query's embedding (filled by `recognition_candidates`).
    pub embed_ms: f64,
    /// Vector search and full-text search, run concurrently.
    pub retrieve_ms: f64,
    pub rerank_ms: f64,
}

impl SearchService {
    /// Stages 1–3 for a validated semantic search with its query vector.
    pub(crate) async fn candidate_set(
        &self,
        valid: &ValidSearch,
        vector: &[f32],
        deadline: Instant,
    ) -> Result<CandidateSet, SearchError> {
        let settings = self.settings();
        let store = self.store();
        let pool = settings.candidates.max(valid.limit + 1);
        let started = Instant::now();
        let plan = SearchPlanSettings::from(settings);
        let (semantic, text) = tokio::join!(
            store.semantic_search(&valid.scope, vector, pool, &valid.filters, &plan),
            store.text_search(&valid.scope, &valid.query, pool, &valid.filters),
        );
        let semantic = semantic?;
        // Full text adds candidates; losing it (e.g. a query Lucene cannot parse) must not
        // lose the semantic answer.
        let text = text.unwrap_or_else(|error| {
            tracing::warn!(error = %deja_domain::error_chain(&error),
                "full-text candidates failed; recognizing from the vector search alone");
            Vec::new()
        });
        let retrieve = started.elapsed();
        m::stage_duration("retrieve", retrieve);

        // Not `limit + 1`: searches with limits up to `rerank_candidates` then decide the very
        // same candidates, so a deeper list only extends a shorter one.
        let keep = settings.rerank_candidates.max(valid.limit);
        let mut candidates = fuse(semantic, text, keep);
        let query = QueryText::new(&valid.query, &valid.components);
        let (rerank, degraded) = self.rerank(&valid.query, &mut candidates, deadline).await;
        annotate(&query, &mut candidates);
        Ok(CandidateSet {
            query,
            candidates,
            timings: StageTimings {
                embed_ms: 0.0,
                retrieve_ms: millis(retrieve),
                rerank_ms: millis(rerank),
            },
            degraded,
        })
    }

    /// Scores the candidates with the cross-encoder in place. Returns the time spent and,
    /// when reranking did not happen though it is configured, why.
    async fn rerank(
        &self,
        query: &str,
        candidates: &mut [Candidate],
        deadline: Instant,
    ) -> (Duration, Option<String>) {
        let settings = self.settings();
        let Some(reranker) = self.reranker() else {
            return (Duration::ZERO, None);
        };
        if !settings.rerank || candidates.is_empty() {
            return (Duration::ZERO, None);
        }
        let started = Instant::now();
        let budget = Duration::from_millis(settings.rerank_budget_ms);
        // Keep a little of the deadline for the decision, the strategy and the answer.
        let until =
            (started + budget).min(deadline.checked_sub(DEADLINE_MARGIN).unwrap_or(started));
        let documents: Vec<String> = candidates.iter().map(|c| rerank_text(&c.episode)).collect();
        let scoring = rerank_blocking(reranker, query.to_owned(), documents);
        let outcome = tokio::time::timeout_at(until.into(), scoring).await;
        let spent = started.elapsed();
        m::stage_duration("rerank", spent);
        match outcome {
            Ok(Ok(scores)) if scores.len() == candidates.len() => {
                for (candidate, score) in candidates.iter_mut().zip(scores) {
                    candidate.evidence.rerank = Some(f64::from(score));
                }
                (spent, None)
            }
            Ok(Ok(scores)) => {
                tracing::warn!(
                    expected = candidates.len(),
                    got = scores.len(),
                    "the reranker returned a wrong number of scores; skipping it"
                );
                m::fallback("rerank_failed");
                (spent, Some(RERANK_FAILED.to_owned()))
            }
            Ok(Err(error)) => {
                tracing::warn!(%error, "reranking failed; deciding without it");
                m::fallback("rerank_failed");
                (spent, Some(RERANK_FAILED.to_owned()))
            }
            Err(_) => {
                m::fallback("rerank_timeout");
                (spent, Some(RERANK_TIMEOUT.to_owned()))
            }
        }
    }
}

const DEADLINE_MARGIN: Duration = Duration::from_millis(200);
const RERANK_FAILED: &str = "reranking failed for this search; match labels come from the \
                             similarity-only calibration";
const RERANK_TIMEOUT: &str = "reranking ran out of time for this search; match labels come \
                              from the similarity-only calibration";

/// What the cross-encoder reads of an episode: the embedded text (issue type, description,
/// summary, root cause). Its tokenizer truncates past the model's maximum length.
pub(crate) fn rerank_text(episode: &deja_domain::Episode) -> String {
    episode.embedding_text()
}

pub(crate) fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
