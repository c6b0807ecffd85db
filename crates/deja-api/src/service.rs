//! `SearchService`: the one search code path behind HTTP, MCP, the CLI and the eval command.
//!
//! Architecture invariant: search never depends on the LLM. A strategy is either read from
//! the store or requested from the worker through a synthesis job, so the LLM being down can
//! only make a strategy absent or stale, never a search failed. The optional verification
//! stage (`search.verify = "llm"`) runs within its own budget and the deadline, and its
//! failure leaves the calibrated labels as they were.
//!
//! A semantic search is the recognition pipeline: candidates (vector + full text, fused),
//! rerank, evidence (`deja-recognition`, through `recognize.rs`), then the calibrated decision and, optionally, the LLM
//! verification; only `strong` matches feed the strategy step.
//!
//! Every search runs under the server-side deadline (`search.deadline_ms`): past it, the
//! caller gets `deadline_exceeded` and whatever was in flight is dropped, except a claimed
//! synthesis job, which is published from its own task so that a claim is never left
//! without its job. A model inference the search was still waiting to be admitted to
//! (`deja_embed::Admission`) never runs; one already running ends on its own.

use crate::error::SearchError;
use crate::jobs::SynthesisQueue;
use crate::metrics as m;
use crate::recognize::CandidateSet;
use crate::request::{GetRequest, Mode, SearchRequest, ValidSearch};
use crate::response::{EpisodeView, SearchResponse, NOTHING_SIMILAR};
use crate::verify::{Verified, Verifier};
use chrono::Utc;
use deja_config::{SearchSettings, VerifyMode};
use deja_domain::recognition::{decide, MatchStrength};
use deja_embed::{embed_blocking, Embedder, LateEncoder, Reranker};
use deja_graph::GraphStore;
use deja_recognition::Recognizer;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tracing::Instrument;

/// Kept free at the end of the deadline when verifying, for the strategy and the answer.
const VERIFY_MARGIN: Duration = Duration::from_millis(250);

/// The search service. Cheap to clone.
#[derive(Clone)]
pub struct SearchService {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Clone)]
pub(crate) struct Inner {
    pub store: GraphStore,
    /// `store` over one connection of its own, for `/readyz` ([`SearchService::readiness`]).
    pub probe: GraphStore,
    pub embedder: Option<Arc<dyn Embedder>>,
    /// The candidate stages over `store`, with the late-interaction encoder and the
    /// cross-encoder when loaded.
    pub recognizer: Recognizer,
    pub verifier: Option<Arc<Verifier>>,
    pub jobs: Option<Arc<SynthesisQueue>>,
    pub settings: SearchSettings,
    /// Bounds the recall stamps in flight (`stamp_recalled`).
    pub recall_stamps: Arc<Semaphore>,
}

/// Recall stamps writing at once; past it a search's stamp is skipped (and counted) rather
/// than queued, so a burst of searches never builds a backlog of writes.
const RECALL_STAMPS_IN_FLIGHT: usize = 4;
/// Connections of `/readyz`'s own pool: one probe at a time is plenty, and none of them
/// waits behind searches that saturate the shared pool (`neo4j.max_connections`) — a
/// replica busy answering is not unready.
const PROBE_CONNECTIONS: usize = 1;

impl std::fmt::Debug for SearchService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchService")
            .field(
                "embedder",
                &self
                    .inner
                    .embedder
                    .as_ref()
                    .map(|e| e.model_id().to_owned()),
            )
            .field(
                "reranker",
                &self
                    .inner
                    .recognizer
                    .reranker()
                    .map(|r| r.model_id().to_owned()),
            )
            .field(
                "late",
                &self
                    .inner
                    .recognizer
                    .late()
                    .map(|l| l.model_id().to_owned()),
            )
            .field("jobs", &self.inner.jobs)
            .finish()
    }
}

/// What `/readyz` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Readiness {
    pub neo4j: bool,
    pub migrated: bool,
    pub embedder: bool,
    /// Informational: the cross-encoder is loaded (only with `search.rerank`).
    pub reranker: bool,
    /// Informational: without it searches are decided by the similarity-only calibration.
    pub late_interaction: bool,
}

impl Readiness {
    pub fn is_ready(&self) -> bool {
        self.neo4j && self.migrated && self.embedder
    }
}

impl SearchService {
    /// `embedder: None` = no model loaded: semantic searches fall back to text.
    /// `jobs: None` = strategies are served when stored but never requested (read-only
    /// tools such as the eval command).
    pub fn new(
        store: GraphStore,
        embedder: Option<Arc<dyn Embedder>>,
        jobs: Option<Arc<SynthesisQueue>>,
        settings: &SearchSettings,
    ) -> Self {
        // Lazily connected: a process that never asks `/readyz` never opens it. The settings
        // built the shared pool already, so building another from them does not fail; if it
        // did, readiness would share the searches' pool, as before it had its own.
        let probe = store
            .with_own_pool(PROBE_CONNECTIONS)
            .unwrap_or_else(|error| {
                tracing::warn!(error = %deja_domain::error_chain(&error),
                    "no connection of its own for /readyz; it shares the searches' pool");
                store.clone()
            });
        SearchService {
            inner: Arc::new(Inner {
                // The family order compares cause vectors of the query's embedding model.
                recognizer: Recognizer::new(store.clone(), None)
                    .with_cause_model(embedder.as_ref().map(|e| e.model_id().to_owned())),
                store,
                probe,
                embedder,
                verifier: None,
                jobs,
                settings: settings.clone(),
                recall_stamps: Arc::new(Semaphore::new(RECALL_STAMPS_IN_FLIGHT)),
            }),
        }
    }

    /// The same service with a cross-encoder for the rerank stage (`None` = the
    /// similarity-only calibration decides every search).
    pub fn with_reranker(self, reranker: Option<Arc<dyn Reranker>>) -> Self {
        let inner = Arc::unwrap_or_clone(self.inner);
        SearchService {
            inner: Arc::new(Inner {
                recognizer: inner.recognizer.clone().with_reranker(reranker),
                ..inner
            }),
        }
    }

    /// The same service scoring candidates by late interaction with `late` (`None` = not).
    pub fn with_late(self, late: Option<Arc<dyn LateEncoder>>) -> Self {
        let inner = Arc::unwrap_or_clone(self.inner);
        SearchService {
            inner: Arc::new(Inner {
                recognizer: inner.recognizer.clone().with_late(late),
                ..inner
            }),
        }
    }

    /// The same service with the optional LLM verification stage (used only when
    /// `search.verify = "llm"`).
    pub fn with_verifier(self, verifier: Option<Arc<Verifier>>) -> Self {
        let inner = Arc::unwrap_or_clone(self.inner);
        SearchService {
            inner: Arc::new(Inner { verifier, ..inner }),
        }
    }

    pub(crate) fn recognizer(&self) -> &Recognizer {
        &self.inner.recognizer
    }

    pub fn reranker_loaded(&self) -> bool {
        self.inner.recognizer.reranker().is_some()
    }

    pub fn late_loaded(&self) -> bool {
        self.inner.recognizer.late().is_some()
    }

    pub fn store(&self) -> &GraphStore {
        &self.inner.store
    }

    pub fn settings(&self) -> &SearchSettings {
        &self.inner.settings
    }

    pub fn embedder_loaded(&self) -> bool {
        self.inner.embedder.is_some()
    }

    fn deadline(&self) -> Duration {
        Duration::from_millis(self.inner.settings.deadline_ms)
    }

    /// Runs one search (the request must already be authorized; see [`crate::search_as`]).
    pub async fn search(&self, request: &SearchRequest) -> Result<SearchResponse, SearchError> {
        let started = Instant::now();
        let span = tracing::info_span!(
            "search",
            org = request.org.as_deref().unwrap_or(""),
            team = request.team.as_deref().unwrap_or("*"),
            mode = request.mode.map_or("default", Mode::as_str)
        );
        let outcome = async {
            let valid = request.validate(&self.inner.settings)?;
            let deadline = started + self.deadline();
            match tokio::time::timeout_at(deadline.into(), self.run(&valid, deadline)).await {
                Ok(result) => result,
                Err(_) => Err(SearchError::DeadlineExceeded(
                    self.inner.settings.deadline_ms,
                )),
            }
        }
        .instrument(span)
        .await;
        let elapsed = started.elapsed();
        match outcome {
            Ok((response, mode)) => {
                if let Some(org) = request.org.as_deref() {
                    self.stamp_recalled(org, &response);
                }
                m::request_duration(mode.as_str(), elapsed);
                m::result_count(mode.as_str(), response.episodes.len());
                tracing::debug!(
                    mode = mode.as_str(),
                    results = response.episodes.len(),
                    elapsed_ms = elapsed.as_millis() as u64,
                    "search answered"
                );
                Ok(response)
            }
            Err(error) => {
                m::request_duration(request.mode.unwrap_or(Mode::Semantic).as_str(), elapsed);
                m::error(error.code().as_str());
                error.log();
                Err(error)
            }
        }
    }

    /// Records `last_recalled_at` on the episodes an answer returned (the review listing's
    /// "most recently recalled first"), off the search's path: a detached task, bounded in
    /// number and time, whose failure is logged and counted and never reaches the caller.
    fn stamp_recalled(&self, org: &str, response: &SearchResponse) {
        if response.episodes.is_empty() {
            return;
        }
        let Ok(permit) = self.inner.recall_stamps.clone().try_acquire_owned() else {
            m::recall_stamp("skipped");
            return;
        };
        let ids: Vec<String> = response.episodes.iter().map(|e| e.id.clone()).collect();
        let (store, org) = (self.inner.store.clone(), org.to_owned());
        let limit = self.deadline();
        tokio::spawn(async move {
            let stamping = store.mark_recalled(&org, &ids, Utc::now());
            match tokio::time::timeout(limit, stamping).await {
                Ok(Ok(_)) => m::recall_stamp("stamped"),
                Ok(Err(error)) => {
                    m::recall_stamp("failed");
                    tracing::warn!(error = %deja_domain::error_chain(&error),
                        "could not record which episodes were recalled");
                }
                Err(_) => {
                    m::recall_stamp("failed");
                    tracing::warn!("recording which episodes were recalled timed out");
                }
            }
            drop(permit);
        });
    }

    /// The search itself, returning the mode that actually answered.
    async fn run(
        &self,
        valid: &ValidSearch,
        deadline: Instant,
    ) -> Result<(SearchResponse, Mode), SearchError> {
        match valid.mode {
            Some(Mode::Text) => Ok((self.text(valid).await?, Mode::Text)),
            Some(Mode::Timeline) => Ok((self.timeline(valid).await?, Mode::Timeline)),
            Some(Mode::Semantic) => {
                let vector = self
                    .embed(&valid.query, deadline)
                    .await
                    .map_err(SearchError::EmbedderUnavailable)?;
                Ok((
                    self.semantic(valid, vector, deadline).await?,
                    Mode::Semantic,
                ))
            }
            None => match self.embed(&valid.query, deadline).await {
                Ok(vector) => Ok((
                    self.semantic(valid, vector, deadline).await?,
                    Mode::Semantic,
                )),
                Err(reason) => {
                    tracing::warn!(%reason, "embedder unavailable; answering with text search");
                    m::fallback("embedder_unavailable");
                    let mut response = self.text(valid).await?;
                    let unavailable = format!("semantic search is unavailable ({reason})");
                    // "No episode" reads as the agent is told to expect it.
                    response.notice = Some(if response.episodes.is_empty() {
                        format!("{NOTHING_SIMILAR} by full-text search; {unavailable}")
                    } else {
                        format!("{unavailable}; these are full-text results for the same query")
                    });
                    Ok((response, Mode::Text))
                }
            },
        }
    }

    /// The query's vector, or why there is none. Bounded by half the time left before
    /// `deadline`: an embedder slowed down (both cores busy) leaves the other half for the
    /// full-text answer it falls back to, rather than running the search out of time.
    async fn embed(&self, query: &str, deadline: Instant) -> Result<Vec<f32>, String> {
        let embedder = self
            .inner
            .embedder
            .clone()
            .ok_or_else(|| "no embedding model is loaded".to_owned())?;
        let started = Instant::now();
        let budget = deadline.saturating_duration_since(started) / 2;
        let embedding = embed_blocking(embedder, vec![query.to_owned()]);
        let mut vectors = tokio::time::timeout(budget, embedding)
            .await
            .map_err(|_| format!("the query's embedding took over {} ms", budget.as_millis()))?
            .map_err(|error| {
                // The model's own text (ONNX Runtime's, a caught panic's) is for the log: the
                // caller gets a fixed reason, as for every other internal failure.
                tracing::warn!(error = %deja_domain::error_chain(&error), "query embedding failed");
                "the embedding model failed on the query".to_owned()
            })?;
        m::stage_duration("embed", started.elapsed());
        vectors
            .pop()
            .filter(|v| !v.is_empty())
            .ok_or_else(|| "the embedder returned no vector".to_owned())
    }

    async fn semantic(
        &self,
        valid: &ValidSearch,
        vector: Vec<f32>,
        deadline: Instant,
    ) -> Result<SearchResponse, SearchError> {
        let settings = &self.inner.settings;
        let CandidateSet {
            query,
            candidates,
            degraded,
            ..
        } = self.candidate_set(valid, &vector, deadline).await?;
        let started = Instant::now();
        let (mut decided, more_available) = decide(
            candidates,
            &query,
            &settings.recognition,
            &settings.ranking,
            valid.limit,
            Utc::now(),
        );
        m::stage_duration("decide", started.elapsed());
        let verified = match (&self.inner.verifier, settings.verify) {
            (Some(verifier), VerifyMode::Llm) => {
                let budget = Duration::from_millis(settings.verify_budget_ms);
                let until = deadline.checked_sub(VERIFY_MARGIN).unwrap_or(deadline);
                verifier
                    .verify(
                        &valid.query,
                        &mut decided,
                        &settings.recognition,
                        budget,
                        until,
                    )
                    .await
            }
            _ => Verified::Skipped,
        };
        for d in &decided {
            m::match_strength(d.strength.as_str());
        }
        // Only recognized recurrences qualify for a strategy: a playbook built from
        // look-alikes would send the agent down someone else's incident.
        let strong: Vec<_> = decided
            .iter()
            .filter(|d| d.strength == MatchStrength::Strong)
            .map(|d| (d.breakdown, d.episode.clone()))
            .collect();
        let started = Instant::now();
        let strategy = self.strategy_for(&valid.scope, &strong, deadline).await;
        m::stage_duration("strategy", started.elapsed());
        let episodes: Vec<EpisodeView> = decided
            .iter()
            .map(|d| EpisodeView::recognized(d, valid.details))
            .collect();
        let unverified = match verified {
            Verified::Unavailable(why) => Some(why),
            Verified::Applied { .. } | Verified::Skipped => None,
        };
        let notices: Vec<String> = episodes
            .is_empty()
            .then(|| NOTHING_SIMILAR.to_owned())
            .into_iter()
            .chain(degraded.iter().map(|d| d.message().to_owned()))
            .chain(unverified)
            .chain(strategy.notice)
            .collect();
        Ok(SearchResponse {
            episodes,
            strategy: strategy.markdown,
            more_available,
            notice: (!notices.is_empty()).then(|| notices.join("; ")),
        })
    }

    /// The candidate stages of a semantic search (retrieve, fuse, rerank) without the
    /// decision: what `deja eval retrieval` calibrates on. The request must be authorized
    /// (org set); it runs under the same deadline as a search.
    pub async fn recognition_candidates(
        &self,
        request: &SearchRequest,
    ) -> Result<CandidateSet, SearchError> {
        let started = Instant::now();
        let valid = request.validate(&self.inner.settings)?;
        let deadline = started + self.deadline();
        let work = async {
            let embedding = Instant::now();
            let vector = self
                .embed(&valid.query, deadline)
                .await
                .map_err(SearchError::EmbedderUnavailable)?;
            let embed_ms = crate::recognize::millis(embedding.elapsed());
            let mut set = self.candidate_set(&valid, &vector, deadline).await?;
            set.timings.embed_ms = embed_ms;
            Ok(set)
        };
        tokio::time::timeout_at(deadline.into(), work)
            .await
            .unwrap_or(Err(SearchError::DeadlineExceeded(
                self.inner.settings.deadline_ms,
            )))
    }

    async fn text(&self, valid: &ValidSearch) -> Result<SearchResponse, SearchError> {
        let mut hits = self
            .inner
            .store
            .text_search(&valid.scope, &valid.query, valid.limit + 1, &valid.filters)
            .await?;
        let more_available = hits.len() > valid.limit;
        hits.truncate(valid.limit);
        let episodes = hits
            .iter()
            .map(|(episode, score)| view(episode, Some(*score), valid.details))
            .collect();
        Ok(SearchResponse {
            episodes,
            strategy: None,
            more_available,
            notice: None,
        })
    }

    async fn timeline(&self, valid: &ValidSearch) -> Result<SearchResponse, SearchError> {
        let mut hits = self
            .inner
            .store
            .timeline(
                &valid.scope,
                &valid.components,
                valid.limit + 1,
                &valid.filters,
            )
            .await?;
        let more_available = hits.len() > valid.limit;
        hits.truncate(valid.limit);
        let episodes = hits
            .iter()
            .map(|episode| view(episode, None, valid.details))
            .collect();
        Ok(SearchResponse {
            episodes,
            strategy: None,
            more_available,
            notice: None,
        })
    }

    /// One episode in full, within the deadline. `request.org` must be set (authorized).
    pub async fn get_episode(&self, request: &GetRequest) -> Result<EpisodeView, SearchError> {
        let started = Instant::now();
        let (org, id) = request.validate()?;
        let lookup = self.inner.store.get_by_id(Some(&org), &id);
        let result = match tokio::time::timeout(self.deadline(), lookup).await {
            Ok(Ok(Some(episode))) => Ok(EpisodeView::full(&episode)),
            Ok(Ok(None)) => Err(SearchError::NotFound(format!(
                "episode `{id}` was not found"
            ))),
            Ok(Err(error)) => Err(SearchError::from(error)),
            Err(_) => Err(SearchError::DeadlineExceeded(
                self.inner.settings.deadline_ms,
            )),
        };
        m::request_duration("get", started.elapsed());
        if let Err(error) = &result {
            m::error(error.code().as_str());
            error.log();
        }
        result
    }

    /// Neo4j reachable, schema migrated, embedder loaded; each check bounded by the deadline.
    /// The checks run on a connection of their own, never waiting for the searches' pool:
    /// under a load that holds every pooled connection the replica answers ready (it is
    /// serving), where sharing the pool would answer 503 and get a busy replica pulled.
    pub async fn readiness(&self) -> Readiness {
        let store = &self.inner.probe;
        let neo4j = matches!(
            tokio::time::timeout(self.deadline(), store.ping()).await,
            Ok(Ok(()))
        );
        let migrated = neo4j
            && matches!(
                tokio::time::timeout(self.deadline(), store.is_migrated()).await,
                Ok(Ok(true))
            );
        Readiness {
            neo4j,
            migrated,
            embedder: self.embedder_loaded(),
            reranker: self.reranker_loaded(),
            late_interaction: self.late_loaded(),
        }
    }
}

fn view(episode: &deja_domain::Episode, score: Option<f64>, details: bool) -> EpisodeView {
    let view = EpisodeView::compact(episode, score, None);
    if details {
        view.with_details(episode, None)
    } else {
        view
    }
}
