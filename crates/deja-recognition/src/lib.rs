//! The IO stages of recognition (the rules are in `deja_domain::recognition`):
//!
//! 1. candidates: the vector search and the full-text search of the scope, concurrently;
//! 2. fuse: reciprocal-rank fusion, the best `search.rerank_candidates` kept;
//! 3. rerank: the cross-encoder scores each (query, episode) pair, within
//!    `search.rerank_budget_ms` and the caller's deadline — past either, recognition goes
//!    on without it and says so;
//! 4. evidence: components, issue type and literals shared with the query (and, loaded while
//!    the cross-encoder runs, the kept candidates' embeddings for the decision's family order).
//!
//! One path for everything that recognizes: memory-search (`deja_api::SearchService`, which
//! then decides with `deja_domain::recognition::decide`), `deja eval retrieval` (which
//! decides the same candidates with each fold's calibration) and the worker's recurrence
//! linking (`deja_worker::recurrence`, which decides a new episode against older ones).
//! It lives in its own crate because both the API and the worker wire it, and adapters
//! (graph, embed) never depend on each other.
//!
//! Metrics stay with the callers: this crate reports the time each stage took and why a
//! stage was skipped, and the caller counts them under its own names.

use deja_config::{SearchSettings, Settings};
use deja_domain::recognition::{annotate, fuse, Candidate, QueryText};
use deja_domain::{Component, Scope};
use deja_embed::{rerank_blocking, LocalReranker, Reranker, RerankerPaths};
use deja_graph::{GraphError, GraphStore, SearchFilters, SearchPlanSettings};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What is being recognized: the text and components of a query (or of a new episode),
/// within one scope.
#[derive(Debug, Clone, Copy)]
pub struct RecognitionQuery<'a> {
    pub scope: &'a Scope,
    pub text: &'a str,
    pub components: &'a [Component],
    pub filters: &'a SearchFilters,
    /// How many decided results the caller will keep (the candidate pools are at least
    /// this deep).
    pub limit: usize,
    /// The decision will order leads by their resemblance to the first
    /// ([`deja_domain::recognition::FamilyOrder`]): fetch the kept candidates' embeddings.
    pub family_order: bool,
}

/// What the candidate stages produced for one query.
#[derive(Debug, Clone)]
pub struct CandidateSet {
    /// The query's side of the lexical evidence, for the decision.
    pub query: QueryText,
    /// Fused, best first; `evidence.rerank` set when reranking ran.
    pub candidates: Vec<Candidate>,
    pub timings: StageTimings,
    /// Why reranking was skipped though configured (`None` = every stage ran).
    pub degraded: Option<Degraded>,
}

/// Milliseconds each stage took (0 when skipped).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct StageTimings {
    /// The query's embedding (filled by callers that embed).
    pub embed_ms: f64,
    /// Vector search and full-text search, run concurrently.
    pub retrieve_ms: f64,
    pub rerank_ms: f64,
}

/// A stage that did not run as configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Degraded {
    RerankFailed,
    RerankTimeout,
}

impl Degraded {
    /// The metric label.
    pub fn reason(self) -> &'static str {
        match self {
            Degraded::RerankFailed => "rerank_failed",
            Degraded::RerankTimeout => "rerank_timeout",
        }
    }

    /// In words for the agent.
    pub fn message(self) -> &'static str {
        match self {
            Degraded::RerankFailed => {
                "reranking failed for this search; match labels come from the \
                 similarity-only calibration"
            }
            Degraded::RerankTimeout => {
                "reranking ran out of time for this search; match labels come from the \
                 similarity-only calibration"
            }
        }
    }
}

/// Kept free at the end of the deadline for the decision and whatever follows it.
const DEADLINE_MARGIN: Duration = Duration::from_millis(200);

/// The candidate stages over one store, with an optional cross-encoder. Cheap to clone.
#[derive(Clone)]
pub struct Recognizer {
    store: GraphStore,
    reranker: Option<Arc<dyn Reranker>>,
}

impl std::fmt::Debug for Recognizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recognizer")
            .field("reranker", &self.reranker.as_ref().map(|r| r.model_id()))
            .finish()
    }
}

impl Recognizer {
    /// `reranker: None` = every decision uses the similarity-only calibration.
    pub fn new(store: GraphStore, reranker: Option<Arc<dyn Reranker>>) -> Self {
        Recognizer { store, reranker }
    }

    pub fn store(&self) -> &GraphStore {
        &self.store
    }

    pub fn reranker(&self) -> Option<&Arc<dyn Reranker>> {
        self.reranker.as_ref()
    }

    /// Stages 1–4 for `query` with its vector, under `deadline`.
    pub async fn candidate_set(
        &self,
        settings: &SearchSettings,
        query: &RecognitionQuery<'_>,
        vector: &[f32],
        deadline: Instant,
    ) -> Result<CandidateSet, GraphError> {
        let store = &self.store;
        let pool = settings.candidates.max(query.limit + 1);
        let started = Instant::now();
        let plan = SearchPlanSettings::from(settings);
        let (semantic, text) = tokio::join!(
            store.semantic_search(query.scope, vector, pool, query.filters, &plan),
            store.text_search(query.scope, query.text, pool, query.filters),
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

        // Not `limit + 1`: searches with limits up to `rerank_candidates` then decide the very
        // same candidates, so a deeper list only extends a shorter one.
        let keep = settings.rerank_candidates.max(query.limit);
        let mut candidates = fuse(semantic, text, keep);
        let query_text = QueryText::new(query.text, query.components);
        let ids: Vec<String> = candidates.iter().map(|c| c.episode.id.clone()).collect();
        // The embeddings load while the cross-encoder runs: no time added to a reranked search.
        let ((rerank, degraded), mut embeddings) = tokio::join!(
            self.rerank(settings, query.text, &mut candidates, deadline),
            self.embeddings(query, &ids, deadline),
        );
        for candidate in &mut candidates {
            candidate.episode.embedding = embeddings.remove(&candidate.episode.id);
        }
        annotate(&query_text, &mut candidates);
        Ok(CandidateSet {
            query: query_text,
            candidates,
            timings: StageTimings {
                embed_ms: 0.0,
                retrieve_ms: millis(retrieve),
                rerank_ms: millis(rerank),
            },
            degraded,
        })
    }

    /// The stored embeddings of the kept candidates when the decision orders by family, within
    /// the deadline. Losing them loses only that order (the decision then keeps the
    /// confidence order and cut), never the search.
    async fn embeddings(
        &self,
        query: &RecognitionQuery<'_>,
        ids: &[String],
        deadline: Instant,
    ) -> HashMap<String, Vec<f32>> {
        if !query.family_order || ids.len() < 2 {
            return HashMap::new();
        }
        let until = deadline
            .checked_sub(DEADLINE_MARGIN)
            .unwrap_or_else(Instant::now);
        let fetch = self.store.embeddings(&query.scope.org, ids);
        match tokio::time::timeout_at(until.into(), fetch).await {
            Ok(Ok(embeddings)) => embeddings,
            Ok(Err(error)) => {
                tracing::warn!(error = %deja_domain::error_chain(&error),
                    "the leads' embeddings did not load; ordering leads by confidence alone");
                HashMap::new()
            }
            Err(_) => {
                tracing::warn!("the leads' embeddings ran out of time; ordering by confidence");
                HashMap::new()
            }
        }
    }

    /// Scores the candidates with the cross-encoder in place. Returns the time spent and,
    /// when reranking did not happen though it is configured, why.
    async fn rerank(
        &self,
        settings: &SearchSettings,
        query: &str,
        candidates: &mut [Candidate],
        deadline: Instant,
    ) -> (Duration, Option<Degraded>) {
        let Some(reranker) = self.reranker.clone() else {
            return (Duration::ZERO, None);
        };
        if !settings.rerank || candidates.is_empty() {
            return (Duration::ZERO, None);
        }
        let started = Instant::now();
        let budget = Duration::from_millis(settings.rerank_budget_ms);
        let until =
            (started + budget).min(deadline.checked_sub(DEADLINE_MARGIN).unwrap_or(started));
        let documents: Vec<String> = candidates.iter().map(|c| rerank_text(&c.episode)).collect();
        let scoring = rerank_blocking(reranker, query.to_owned(), documents);
        let outcome = tokio::time::timeout_at(until.into(), scoring).await;
        let spent = started.elapsed();
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
                (spent, Some(Degraded::RerankFailed))
            }
            Ok(Err(error)) => {
                tracing::warn!(%error, "reranking failed; deciding without it");
                (spent, Some(Degraded::RerankFailed))
            }
            Err(_) => (spent, Some(Degraded::RerankTimeout)),
        }
    }
}

/// The cross-encoder of the rerank stage when `search.rerank` is on; a model that fails to
/// load is logged and left out (recognition is then decided by the similarity-only
/// calibration) rather than stopping the caller. Used by `deja serve` and `deja worker`.
pub async fn load_reranker(settings: &Settings) -> Option<Arc<dyn Reranker>> {
    if !settings.search.rerank {
        return None;
    }
    let paths = RerankerPaths {
        model_dir: settings.reranker.model_dir.clone(),
        ort_dylib_path: settings.embedding.ort_dylib_path.clone(),
        max_length: settings.reranker.max_length,
    };
    match tokio::task::spawn_blocking(move || LocalReranker::load(&paths)).await {
        Ok(Ok(reranker)) => Some(Arc::new(reranker) as Arc<dyn Reranker>),
        Ok(Err(error)) => {
            tracing::warn!(error = %deja_domain::error_chain(&error),
                "reranker not loaded; recognition decides without it");
            None
        }
        Err(error) => {
            tracing::warn!(%error, "reranker loader crashed; recognition decides without it");
            None
        }
    }
}

/// What the cross-encoder reads of an episode: the embedded text (issue type, description,
/// summary, root cause). Its tokenizer truncates past the model's maximum length.
pub fn rerank_text(episode: &deja_domain::Episode) -> String {
    episode.embedding_text()
}

pub fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
