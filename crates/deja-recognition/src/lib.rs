//! The IO stages of recognition (the rules are in `deja_domain::recognition`):
//!
//! 1. candidates: the vector search and the full-text search of the scope, concurrently;
//! 2. fuse: reciprocal-rank fusion, the best `search.rerank_candidates` kept;
//! 3. rerank: late interaction scores each candidate against the query's word pieces with
//!    the vectors stored for it (the query is encoded while the retrievals run), and,
//!    when configured, the cross-encoder scores each (query, episode) pair, within
//!    `search.rerank_budget_ms` and the caller's deadline — past either, recognition goes
//!    on without it and says so;
//! 4. evidence: components, issue type and literals shared with the query (and, read with
//!    the token vectors, the kept candidates' stored cause vectors for the decision's family
//!    order).
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
use deja_domain::recognition::{
    annotate, fuse, max_sim, source_stamp, Candidate, QueryText, TokenVectors,
};
use deja_domain::{Component, Episode, Scope};
use deja_embed::{
    embed_blocking, encode_blocking, rerank_blocking, EmbedError, Embedder, LateEncoder, LatePaths,
    LocalLateEncoder, LocalReranker, Reranker, RerankerPaths,
};
use deja_graph::{
    CauseVector, GraphError, GraphStore, SearchFilters, SearchPlanSettings, StoredTokens,
};
use serde::Serialize;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What is being recognized: the text and components of a query (or of a new episode),
/// within one scope.
#[derive(Debug, Clone, Copy)]
pub struct RecognitionQuery<'a> {
    pub scope: &'a Scope,
    pub text: &'a str,
    pub components: &'a [Component],
    /// Hypotheses denied beyond the text (a new episode's `ruled_out`): the contradiction
    /// rule reads them, nothing else does.
    pub ruled_out: &'a [String],
    pub filters: &'a SearchFilters,
    /// How many decided results the caller will keep (the candidate pools are at least
    /// this deep).
    pub limit: usize,
    /// The decision will order leads by their resemblance to the first
    /// ([`deja_domain::recognition::FamilyOrder`]): attach the kept candidates' cause vectors.
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
    /// The stages that did not run though configured, each said in the answer's notice
    /// (empty = every stage ran).
    pub degraded: Vec<Degraded>,
}

/// Milliseconds each stage took (0 when skipped).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct StageTimings {
    /// The query's embedding (filled by callers that embed).
    pub embed_ms: f64,
    /// Vector search and full-text search, run concurrently.
    pub retrieve_ms: f64,
    pub rerank_ms: f64,
    /// Loading the candidates' token vectors and scoring them (the query's encoding runs
    /// during the retrievals and is not counted here).
    pub late_ms: f64,
}

/// A stage that did not run as configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Degraded {
    RerankFailed,
    RerankTimeout,
    LateFailed,
    /// The full-text candidates did not come in time: recognized from the vector search.
    TextTimeout,
    /// The full-text search failed (a store error): recognized from the vector search.
    TextFailed,
}

impl Degraded {
    /// The metric label.
    pub fn reason(self) -> &'static str {
        match self {
            Degraded::RerankFailed => "rerank_failed",
            Degraded::RerankTimeout => "rerank_timeout",
            Degraded::LateFailed => "late_failed",
            Degraded::TextTimeout => "text_timeout",
            Degraded::TextFailed => "text_failed",
        }
    }

    /// In words for the agent.
    pub fn message(self) -> &'static str {
        match self {
            Degraded::RerankFailed => {
                "reranking with the cross-encoder failed for this search; it was decided \
                 without it"
            }
            Degraded::RerankTimeout => {
                "reranking with the cross-encoder ran out of time for this search; it was \
                 decided without it"
            }
            Degraded::LateFailed => {
                "the token-level comparison failed for this search; match labels come from \
                 the similarity-only calibration"
            }
            Degraded::TextTimeout => {
                "the full-text candidates ran out of time for this search; it was recognized \
                 from the vector search alone"
            }
            Degraded::TextFailed => {
                "the full-text candidates failed for this search; it was recognized from the \
                 vector search alone"
            }
        }
    }
}

/// What one candidate's stored recognition vectors gave (nothing without current ones).
#[derive(Debug, Default)]
struct LateRead {
    score: Option<f64>,
    cause_vector: Option<Vec<f32>>,
}

/// Kept free at the end of the deadline for the decision and whatever follows it.
const DEADLINE_MARGIN: Duration = Duration::from_millis(200);

/// Multiply-adds of MaxSim (query pieces × dimensions × the candidates' pieces) scored on the
/// async worker itself; more go to the blocking pool. 2^21 is ~0.1–0.3 ms on the reference
/// machine: a search of the default depth (10 candidates of ~150 pieces, a query of ~30)
/// is ~17 million and goes there, a one-hop handoff (tens of microseconds) for ~1 ms of
/// arithmetic; a tiny query against a few short candidates does not pay the hop.
const MAXSIM_INLINE_WORK: usize = 1 << 21;

/// The candidate stages over one store, with an optional cross-encoder and an optional
/// late-interaction encoder. Cheap to clone.
#[derive(Clone)]
pub struct Recognizer {
    store: GraphStore,
    reranker: Option<Arc<dyn Reranker>>,
    late: Option<Arc<dyn LateEncoder>>,
    /// The embedding model whose stored cause vectors the family order compares (the
    /// search's own model; vectors of another model are not comparable).
    cause_model: Option<String>,
}

impl std::fmt::Debug for Recognizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recognizer")
            .field("reranker", &self.reranker.as_ref().map(|r| r.model_id()))
            .field("late", &self.late.as_ref().map(|l| l.model_id()))
            .field("cause_model", &self.cause_model)
            .finish()
    }
}

impl Recognizer {
    /// `reranker: None` and no late encoder = every decision uses the similarity-only
    /// calibration.
    pub fn new(store: GraphStore, reranker: Option<Arc<dyn Reranker>>) -> Self {
        Recognizer {
            store,
            reranker,
            late: None,
            cause_model: None,
        }
    }

    /// The same recognizer comparing, for the family order, the cause vectors `model`
    /// computed (stored beside the token vectors by [`ensure_tokens`]; without a model, or
    /// without late interaction, leads keep the confidence's order and cut).
    pub fn with_cause_model(mut self, model: Option<String>) -> Self {
        self.cause_model = model;
        self
    }

    /// The same recognizer scoring candidates by late interaction with `late`.
    pub fn with_late(mut self, late: Option<Arc<dyn LateEncoder>>) -> Self {
        self.late = late;
        self
    }

    pub fn store(&self) -> &GraphStore {
        &self.store
    }

    pub fn reranker(&self) -> Option<&Arc<dyn Reranker>> {
        self.reranker.as_ref()
    }

    /// The same recognizer with `reranker` as its cross-encoder.
    pub fn with_reranker(mut self, reranker: Option<Arc<dyn Reranker>>) -> Self {
        self.reranker = reranker;
        self
    }

    pub fn late(&self) -> Option<&Arc<dyn LateEncoder>> {
        self.late.as_ref()
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
        // The optional retrievals get the time the deadline leaves past its margin; the vector
        // search, without which there is no answer, has the search's own deadline.
        let optional_until = tokio::time::Instant::from_std(
            deadline
                .checked_sub(DEADLINE_MARGIN)
                .unwrap_or_else(Instant::now),
        );
        // The query's word pieces are encoded while the store searches.
        let (semantic, text, query_tokens) = tokio::join!(
            store.semantic_search(query.scope, vector, pool, query.filters, &plan),
            tokio::time::timeout_at(
                optional_until,
                store.text_search(query.scope, query.text, pool, query.filters)
            ),
            tokio::time::timeout_at(optional_until, self.query_tokens(query)),
        );
        let semantic = semantic?;
        // Full text adds candidates; losing it (e.g. a query Lucene cannot parse, or a slow
        // one) must not lose the semantic answer.
        let mut text_degraded = None;
        let text = match text {
            Ok(Ok(text)) => text,
            Ok(Err(error)) => {
                tracing::warn!(error = %deja_domain::error_chain(&error),
                    "full-text candidates failed; recognizing from the vector search alone");
                text_degraded = Some(Degraded::TextFailed);
                Vec::new()
            }
            Err(_) => {
                tracing::warn!("full-text candidates ran out of time; recognizing from the vector search alone");
                text_degraded = Some(Degraded::TextTimeout);
                Vec::new()
            }
        };
        let query_tokens = query_tokens.unwrap_or_else(|_| {
            Err(EmbedError::Inference(
                "encoding the query's word pieces ran out of time".to_owned(),
            ))
        });
        let retrieve = started.elapsed();

        // Searches with limits under `rerank_candidates` decide the very same candidates, so a
        // deeper list only extends a shorter one; a deeper limit decides one more than it shows,
        // so that `more_available` can say so.
        let keep = settings.rerank_candidates.max(query.limit + 1);
        let mut candidates = fuse(semantic, text, keep);
        let query_text =
            QueryText::new(query.text, query.components).with_ruled_out(query.ruled_out);
        let ids: Vec<String> = candidates.iter().map(|c| c.episode.id.clone()).collect();
        let texts: Vec<String> = match self.late {
            Some(_) => candidates
                .iter()
                .map(|c| c.episode.embedding_text())
                .collect(),
            None => Vec::new(),
        };
        let ((rerank, rerank_degraded), late) = tokio::join!(
            self.rerank(settings, query.text, &mut candidates, deadline),
            self.late_scores(query, query_tokens, &ids, &texts, deadline),
        );
        let (late, late_spent) = late;
        let late_degraded = match late {
            Ok(read) => {
                for (candidate, read) in candidates.iter_mut().zip(read) {
                    candidate.evidence.late = read.score;
                    candidate.evidence.cause_vector = read.cause_vector;
                }
                None
            }
            Err(degraded) => degraded,
        };
        annotate(&query_text, &mut candidates);
        Ok(CandidateSet {
            query: query_text,
            candidates,
            timings: StageTimings {
                embed_ms: 0.0,
                retrieve_ms: millis(retrieve),
                rerank_ms: millis(rerank),
                late_ms: millis(late_spent),
            },
            // Every stage that did not run, not the first: a full-text timeout comes with the
            // token load's (they share a cutoff), and the agent is told of both.
            degraded: [rerank_degraded, late_degraded, text_degraded]
                .into_iter()
                .flatten()
                .collect(),
        })
    }

    /// The query's token vectors when late interaction is on (`Ok(None)`: it is off). An
    /// encoding failure is the search's to report (it then decides without late
    /// interaction), never its end.
    async fn query_tokens(
        &self,
        query: &RecognitionQuery<'_>,
    ) -> Result<Option<TokenVectors>, EmbedError> {
        let Some(encoder) = self.late.clone() else {
            return Ok(None);
        };
        let mut encoded = encode_blocking(encoder, vec![query.text.to_owned()]).await?;
        Ok(encoded.pop())
    }

    /// What the stored recognition vectors give each candidate (candidates as `ids` with
    /// their current embedded `texts`), in order: its late-interaction score, and with the
    /// family order its cause vector; `None` for one without current vectors (none stored,
    /// or stored for an older text or another model), which the decision then decides with
    /// the similarity-only calibration (and orders by confidence alone). `Err(None)`: late
    /// interaction is off; `Err(Some(_))`: it failed for this search. With the time it took
    /// (zero when off).
    async fn late_scores(
        &self,
        query: &RecognitionQuery<'_>,
        query_tokens: Result<Option<TokenVectors>, EmbedError>,
        ids: &[String],
        texts: &[String],
        deadline: Instant,
    ) -> (Result<Vec<LateRead>, Option<Degraded>>, Duration) {
        if self.late.is_none() {
            return (Err(None), Duration::ZERO);
        }
        let started = Instant::now();
        let scores = self
            .score_late(query, query_tokens, ids, texts, deadline)
            .await;
        (scores, started.elapsed())
    }

    async fn score_late(
        &self,
        query: &RecognitionQuery<'_>,
        query_tokens: Result<Option<TokenVectors>, EmbedError>,
        ids: &[String],
        texts: &[String],
        deadline: Instant,
    ) -> Result<Vec<LateRead>, Option<Degraded>> {
        let Some(encoder) = &self.late else {
            return Err(None);
        };
        let query_tokens = match query_tokens {
            Ok(Some(tokens)) => tokens,
            Ok(None) => return Err(None),
            Err(error) => {
                tracing::warn!(error = %deja_domain::error_chain(&error),
                    "the query's token vectors failed; deciding without late interaction");
                return Err(Some(Degraded::LateFailed));
            }
        };
        let until = deadline
            .checked_sub(DEADLINE_MARGIN)
            .unwrap_or_else(Instant::now);
        let fetch = self.store.tokens(&query.scope.org, ids);
        let stored = match tokio::time::timeout_at(until.into(), fetch).await {
            Ok(Ok(stored)) => stored,
            Ok(Err(error)) => {
                tracing::warn!(error = %deja_domain::error_chain(&error),
                    "the candidates' token vectors did not load; deciding without late interaction");
                return Err(Some(Degraded::LateFailed));
            }
            Err(_) => {
                tracing::warn!("the candidates' token vectors ran out of time");
                return Err(Some(Degraded::LateFailed));
            }
        };
        let model = encoder.model_id();
        let cause_model = self.cause_model.clone().filter(|_| query.family_order);
        // Only vectors of a candidate's current text and of this model count; the others are
        // decided without late interaction.
        let mut stored = stored;
        let current: Vec<Option<StoredTokens>> = ids
            .iter()
            .zip(texts)
            .map(|(id, text)| {
                stored.remove(id).filter(|tokens| {
                    tokens.model == model && tokens.stamp == source_stamp(model, text)
                })
            })
            .collect();
        let work = query_tokens.len()
            * query_tokens.dims()
            * current
                .iter()
                .flatten()
                .map(|tokens| tokens.vectors.len())
                .sum::<usize>();
        let score = move || {
            current
                .into_iter()
                .map(|tokens| match tokens {
                    None => LateRead::default(),
                    Some(tokens) => LateRead {
                        score: max_sim(&query_tokens, &tokens.vectors),
                        cause_vector: tokens
                            .cause
                            .filter(|cause| Some(&cause.model) == cause_model.as_ref())
                            .map(|cause| cause.vector),
                    },
                })
                .collect::<Vec<_>>()
        };
        if work <= MAXSIM_INLINE_WORK {
            return Ok(score());
        }
        // Past a few hundred microseconds of arithmetic (a long query against 50 candidates
        // is tens of milliseconds) the scoring leaves the async workers, which serve every
        // other request meanwhile.
        tokio::task::spawn_blocking(score).await.map_err(|error| {
            tracing::warn!(%error, "scoring by late interaction crashed; deciding without it");
            Some(Degraded::LateFailed)
        })
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
        // A recognizer has a cross-encoder only where it should use one: when `search.rerank`
        // is on (`load_reranker`), or in the search bench's comparison (`load_cross_encoder`).
        let Some(reranker) = self.reranker.clone() else {
            return (Duration::ZERO, None);
        };
        if candidates.is_empty() {
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

/// The cross-encoder of memory-search's rerank stage when `search.rerank` is on (see
/// [`load_cross_encoder`]). Used by `deja serve`.
pub async fn load_reranker(settings: &Settings) -> Option<Arc<dyn Reranker>> {
    if !settings.search.rerank {
        return None;
    }
    load_cross_encoder(settings).await
}

/// The cross-encoder of `[reranker]`, whatever `search.rerank` says (the search bench
/// compares it with late interaction). A model that fails to load is logged and left out
/// (recognition is then decided by the similarity-only calibration) rather than stopping
/// the caller.
pub async fn load_cross_encoder(settings: &Settings) -> Option<Arc<dyn Reranker>> {
    let paths = RerankerPaths::from_settings(&settings.reranker, &settings.embedding);
    let reranker = load_blocking("reranker", move || LocalReranker::load(&paths)).await?;
    Some(Arc::new(reranker))
}

/// The late-interaction encoder when `late_interaction.enabled` is on; a model that fails to
/// load is logged and left out (searches then decide without it, writers store no token
/// vectors) rather than stopping the caller. Used by `deja serve`, `deja worker` and the CLI
/// jobs that write episodes.
pub async fn load_late_encoder(settings: &Settings) -> Option<Arc<dyn LateEncoder>> {
    if !settings.late_interaction.enabled {
        return None;
    }
    let paths = LatePaths::from_settings(&settings.late_interaction, &settings.embedding);
    let model_id = settings.late_interaction.model_id.clone();
    let encoder = load_blocking("late-interaction encoder", move || {
        LocalLateEncoder::load(&paths, &model_id)
    })
    .await?;
    Some(Arc::new(encoder))
}

/// Loads a model on the blocking pool; a failure (or a crashed loader) is logged, naming
/// `what`, and gives `None`: recognition then decides without that model.
async fn load_blocking<T: Send + 'static>(
    what: &str,
    load: impl FnOnce() -> Result<T, EmbedError> + Send + 'static,
) -> Option<T> {
    match tokio::task::spawn_blocking(load).await {
        Ok(Ok(model)) => Some(model),
        Ok(Err(error)) => {
            tracing::warn!(error = %deja_domain::error_chain(&error),
                "{what} not loaded; recognition decides without it");
            None
        }
        Err(error) => {
            tracing::warn!(%error, "{what} loader crashed; recognition decides without it");
            None
        }
    }
}

/// Why an episode's token vectors were not stored.
#[derive(Debug, thiserror::Error)]
pub enum TokensError {
    #[error("encoding the episode's word pieces failed: {0}")]
    Encode(EmbedError),
    #[error("embedding the episode's cause text failed: {0}")]
    Embed(EmbedError),
    #[error("storing the episode's token vectors failed: {0}")]
    Store(#[from] GraphError),
}

/// Makes `episode`'s stored recognition vectors those of its current text: its token vectors
/// and, with `embedder`, its cause vector ([`Episode::cause_text`] embedded, for the family
/// order). Encodes and stores them unless the stored ones already are (same stamp and model,
/// and with `embedder` a cause vector of its model); without `embedder` a text that changed
/// loses its cause vector (it would be of the older text). Returns whether it encoded.
/// A failed extraction (never searched semantically) is left alone, as is an episode deleted
/// meanwhile. Writers call it after their own write commits: a reader ignores vectors of any
/// other text, so the two writes need no shared transaction. Two writers of one episode (two
/// turns committing close together) may store in either order; so after storing, the episode
/// is read again, and when its text moved on meanwhile, the vectors of the text it has now
/// are stored in their place (at most a few times), so the last store is never the older
/// text's.
pub async fn ensure_tokens(
    store: &GraphStore,
    encoder: &Arc<dyn LateEncoder>,
    embedder: Option<&Arc<dyn Embedder>>,
    episode: &Episode,
) -> Result<bool, TokensError> {
    /// Re-reads after a store before giving up on catching up with a text that keeps moving
    /// (each newer writer stores its own anyway).
    const CATCH_UPS: usize = 3;
    let mut encoded_any = false;
    let mut current = std::borrow::Cow::Borrowed(episode);
    for _ in 0..=CATCH_UPS {
        let text = current.embedding_text();
        if !store_tokens_of(store, encoder, embedder, &current, &text).await? {
            return Ok(encoded_any);
        }
        encoded_any = true;
        match store.get_by_id(Some(&current.org), &current.id).await? {
            Some(now) if now.embedding_text() != text => current = std::borrow::Cow::Owned(now),
            _ => return Ok(true),
        }
    }
    Ok(encoded_any)
}

/// One pass of [`ensure_tokens`] over `text`, `episode`'s embedded text: whether it encoded
/// and stored.
async fn store_tokens_of(
    store: &GraphStore,
    encoder: &Arc<dyn LateEncoder>,
    embedder: Option<&Arc<dyn Embedder>>,
    episode: &Episode,
    text: &str,
) -> Result<bool, TokensError> {
    if episode.extraction_status != deja_domain::ExtractionStatus::Ok {
        return Ok(false);
    }
    let model = encoder.model_id();
    let stamp = source_stamp(model, text);
    let cause_model = embedder.map(|e| e.model_id());
    if let Some(stored) = store.tokens_source(&episode.org, &episode.id).await? {
        // A writer without an embedder cannot judge the cause vector: it keeps whatever the
        // current text has.
        if stored.model == model
            && stored.stamp == stamp
            && (cause_model.is_none() || stored.cause_model.as_deref() == cause_model)
        {
            return Ok(false);
        }
    }
    let encoded = encode_blocking(encoder.clone(), vec![text.to_owned()]).await;
    let Some(vectors) = encoded.map_err(TokensError::Encode)?.pop() else {
        return Ok(false);
    };
    let cause = match embedder {
        Some(embedder) => embed_blocking(embedder.clone(), vec![episode.cause_text()])
            .await
            .map_err(TokensError::Embed)?
            .pop()
            .map(|vector| CauseVector {
                model: embedder.model_id().to_owned(),
                vector,
            }),
        None => None,
    };
    Ok(store
        .save_tokens(
            &episode.org,
            &episode.id,
            model,
            &stamp,
            &vectors,
            cause.as_ref(),
        )
        .await?)
}

/// What the cross-encoder reads of an episode: the embedded text (issue type, description,
/// opening message, summary, root cause). Its tokenizer truncates past the model's maximum
/// length.
pub fn rerank_text(episode: &deja_domain::Episode) -> String {
    episode.embedding_text()
}

pub fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
