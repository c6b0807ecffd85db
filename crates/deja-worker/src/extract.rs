//! One turn event in, one outcome out: the unit of work of the extractor worker. The run loop
//! (`run.rs`) only maps an [`Outcome`] onto the delivery; tests drive this step directly.

use crate::health::{Dependency, Readiness, ServiceProbe};
use crate::metrics as m;
use chrono::Utc;
use deja_config::{Settings, WorkerSettings};
use deja_domain::{
    merge_failed_turn, merge_turn, Episode, EpisodeKey, ExtractedEpisode, ExtractionLimits,
    TurnEvent, TurnUpdate,
};
use deja_embed::{embed_blocking, EmbedError, Embedder};
use deja_graph::{GraphError, GraphStore, UpsertError};
use deja_llm::{ExtractionRequest, LlmClient, LlmError};
use std::sync::Arc;
use std::time::Instant;
use tracing::Instrument;

/// What became of one delivery.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The episode is committed (or the event was already merged: `changed` is false).
    Stored {
        episode_id: String,
        changed: bool,
        status: deja_domain::ExtractionStatus,
    },
    /// A transient failure: try again later through the delayed-retry path.
    Retry { reason: String, detail: String },
    /// Nothing more can be done with this message; it goes to the dead-letter queue.
    DeadLetter { reason: String, detail: String },
    /// Neo4j or the LLM endpoint is unreachable (connection refused, timeout, 5xx, 429): not
    /// the message's fault. The run loop pauses consumption and processes the message again
    /// once the dependency answers, without spending an attempt (`health.rs`).
    Unavailable {
        dependency: Dependency,
        detail: String,
    },
}

#[derive(Clone)]
pub struct Extractor {
    store: GraphStore,
    llm: Arc<LlmClient>,
    embedder: Arc<dyn Embedder>,
    worker: WorkerSettings,
    max_attempts: u32,
    limits: ExtractionLimits,
    readiness: Readiness,
}

/// Why a step failed, sorted by what to do about it.
enum StepError {
    Llm(LlmError),
    Graph(GraphError),
    Embed(EmbedError),
    Conflicts,
}

impl StepError {
    fn reason(&self) -> &'static str {
        match self {
            StepError::Llm(_) => "llm_failed",
            StepError::Graph(_) => "neo4j_failed",
            StepError::Embed(_) => "embedding_failed",
            StepError::Conflicts => "write_conflicts",
        }
    }

    /// The dependency at fault when this is an infrastructure failure rather than one
    /// attributable to the message.
    fn outage(&self) -> Option<Dependency> {
        match self {
            StepError::Llm(e) if e.is_transient() => Some(Dependency::Llm),
            StepError::Graph(e) if e.is_transient() => Some(Dependency::Neo4j),
            _ => None,
        }
    }

    fn detail(&self) -> String {
        match self {
            StepError::Llm(e) => error_chain(e),
            StepError::Graph(e) => error_chain(e),
            StepError::Embed(e) => error_chain(e),
            StepError::Conflicts => "too many concurrent writes to one episode".to_owned(),
        }
    }
}

impl From<UpsertError<StepError>> for StepError {
    fn from(error: UpsertError<StepError>) -> Self {
        match error {
            UpsertError::Graph(e) => StepError::Graph(e),
            UpsertError::Merge(e) => e,
            UpsertError::TooManyConflicts { .. } => StepError::Conflicts,
        }
    }
}

impl Extractor {
    pub fn new(
        store: GraphStore,
        llm: Arc<LlmClient>,
        embedder: Arc<dyn Embedder>,
        settings: &Settings,
    ) -> Self {
        let probe = ServiceProbe {
            store: store.clone(),
            llm: llm.clone(),
        };
        Extractor {
            readiness: Readiness::new(
                Arc::new(probe),
                std::time::Duration::from_millis(settings.worker.probe_max_ms),
            ),
            store,
            llm,
            embedder,
            worker: settings.worker.clone(),
            max_attempts: settings.rabbitmq.max_attempts,
            limits: ExtractionLimits::default(),
        }
    }

    pub fn store(&self) -> &GraphStore {
        &self.store
    }

    /// Whether the worker is taking deliveries, and why not (`/readyz`, see `health.rs`).
    pub fn readiness(&self) -> Readiness {
        self.readiness.clone()
    }

    /// Handles one delivery body; `attempt` starts at 1.
    pub async fn process(&self, body: &[u8], attempt: u32) -> Outcome {
        let event = match TurnEvent::parse(body, self.worker.max_event_bytes) {
            Ok(event) => event,
            Err(error) => {
                return Outcome::DeadLetter {
                    reason: error.reason_code().to_owned(),
                    detail: error.to_string(),
                }
            }
        };
        let span = tracing::info_span!(
            "turn_event",
            event_id = %event.event_id,
            correlation_id = %event.correlation_id,
            org = %event.org,
            team = %event.team,
            turn_index = event.turn_index,
            attempt,
        );
        let outcome = self
            .process_event(&event, attempt >= self.max_attempts)
            .instrument(span.clone())
            .await;
        let _entered = span.enter();
        match &outcome {
            Outcome::Stored {
                episode_id,
                changed,
                status,
            } => {
                tracing::info!(%episode_id, changed, status = status.as_str(), "turn merged")
            }
            Outcome::Retry { reason, detail } => {
                tracing::warn!(%reason, %detail, "turn will be retried")
            }
            Outcome::DeadLetter { reason, detail } => {
                tracing::error!(%reason, %detail, "turn dead-lettered")
            }
            Outcome::Unavailable { dependency, detail } => {
                tracing::warn!(dependency = dependency.as_str(), %detail, "dependency unavailable; turn waits without spending an attempt")
            }
        }
        outcome
    }

    /// Extracts and merges one parsed event. On the last attempt (`final_attempt`), an LLM
    /// failure is recorded as a failed extraction instead of being retried.
    pub async fn process_event(&self, event: &TurnEvent, final_attempt: bool) -> Outcome {
        let bounded = event.bounded(self.worker.tool_output_budget);
        let key = EpisodeKey::new(&event.org, &event.correlation_id);
        let update = TurnUpdate::from_event(event);
        let result = async {
            // Kept apart from the episode (which stays a derived summary) so that `deja retry`
            // can re-extract the latest turn later.
            let input = serde_json::to_string(&bounded).unwrap_or_default();
            self.store
                .save_turn_input(&key, event.turn_index, &input)
                .await
                .map_err(StepError::Graph)?;
            let existing = self
                .store
                .get_by_key(&key)
                .await
                .map_err(StepError::Graph)?;
            if let Some(e) = &existing {
                if e.event_ids.contains(&event.event_id)
                    && e.extraction_error.is_none()
                    && e.extraction_status == deja_domain::ExtractionStatus::Ok
                {
                    // A redelivery: nothing to ask the LLM.
                    return Ok((e.id.clone(), false, e.extraction_status));
                }
            }
            let vocabulary = self
                .store
                .team_vocabulary(&event.org, &event.team)
                .await
                .map_err(StepError::Graph)?;
            let request = ExtractionRequest {
                event: &bounded,
                existing: existing.as_ref(),
                vocabulary: &vocabulary,
                limits: &self.limits,
            };
            match self.llm.extract(&request).await {
                Ok(extraction) => self.merge_ok(&key, &update, &extraction.episode).await,
                // An unreachable endpoint is not this turn's failure, even on its last attempt.
                Err(error) if error.is_transient() => Err(StepError::Llm(error)),
                Err(error) if final_attempt => {
                    m::extraction_failed();
                    let message = format!("extraction failed: {}", error_chain(&error));
                    self.merge_failed(&key, &update, &message).await
                }
                Err(error) => Err(StepError::Llm(error)),
            }
        }
        .await;
        match result {
            Ok((episode_id, changed, status)) => Outcome::Stored {
                episode_id,
                changed,
                status,
            },
            Err(error) => match (error.outage(), final_attempt) {
                (Some(dependency), _) => Outcome::Unavailable {
                    dependency,
                    detail: error.detail(),
                },
                (None, true) => Outcome::DeadLetter {
                    reason: error.reason().to_owned(),
                    detail: error.detail(),
                },
                (None, false) => Outcome::Retry {
                    reason: error.reason().to_owned(),
                    detail: error.detail(),
                },
            },
        }
    }

    async fn merge_ok(
        &self,
        key: &EpisodeKey,
        update: &TurnUpdate,
        extracted: &ExtractedEpisode,
    ) -> Result<(String, bool, deja_domain::ExtractionStatus), StepError> {
        let saved = self
            .store
            .upsert_with(key, |existing: Option<Episode>| {
                let merged = merge_turn(existing.as_ref(), update, extracted, Utc::now());
                async move {
                    match merged {
                        Some(episode) => self.with_embedding(episode).await.map(Some),
                        None => Ok(None),
                    }
                }
            })
            .await?;
        self.stored(key, saved).await
    }

    async fn merge_failed(
        &self,
        key: &EpisodeKey,
        update: &TurnUpdate,
        message: &str,
    ) -> Result<(String, bool, deja_domain::ExtractionStatus), StepError> {
        let saved = self
            .store
            .upsert_with(key, |existing: Option<Episode>| {
                let merged = merge_failed_turn(existing.as_ref(), update, message, Utc::now());
                async move { Ok::<_, StepError>(merged) }
            })
            .await?;
        self.stored(key, saved).await
    }

    async fn stored(
        &self,
        key: &EpisodeKey,
        saved: Option<Episode>,
    ) -> Result<(String, bool, deja_domain::ExtractionStatus), StepError> {
        match saved {
            Some(e) => Ok((e.id, true, e.extraction_status)),
            None => {
                let existing = self.store.get_by_key(key).await.map_err(StepError::Graph)?;
                let status = existing
                    .map(|e| e.extraction_status)
                    .unwrap_or(deja_domain::ExtractionStatus::Ok);
                Ok((key.episode_id(), false, status))
            }
        }
    }

    /// Embeds the episode when its embedded text changed (merge drops a stale vector).
    async fn with_embedding(&self, mut episode: Episode) -> Result<Episode, StepError> {
        if episode.extraction_status != deja_domain::ExtractionStatus::Ok
            || episode.embedding.is_some()
        {
            return Ok(episode);
        }
        let started = Instant::now();
        let mut vectors = embed_blocking(self.embedder.clone(), vec![episode.embedding_text()])
            .await
            .map_err(StepError::Embed)?;
        m::embedding_latency(started.elapsed());
        episode.embedding = vectors.pop();
        episode.embedding_model = Some(self.embedder.model_id().to_owned());
        Ok(episode)
    }

    /// Re-extracts the stored latest turn input of an episode (`deja retry`). Runs as a last
    /// attempt: a failure is recorded on the episode, not retried.
    pub async fn retry_stored(&self, key: &EpisodeKey) -> Result<Outcome, GraphError> {
        let Some((_, input)) = self.store.get_turn_input(key).await? else {
            return Ok(Outcome::DeadLetter {
                reason: "no_stored_input".to_owned(),
                detail: format!(
                    "no stored turn input for conversation {}",
                    key.correlation_id
                ),
            });
        };
        let event: TurnEvent = match serde_json::from_str(&input) {
            Ok(event) => event,
            Err(error) => {
                return Ok(Outcome::DeadLetter {
                    reason: "invalid_stored_input".to_owned(),
                    detail: error.to_string(),
                })
            }
        };
        Ok(self.process_event(&event, true).await)
    }
}

/// An error and its causes on one line.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
