//! One turn event in, one outcome out: the unit of work of the extractor worker. The run loop
//! (`run.rs`) only maps an [`Outcome`] onto the delivery; tests drive this step directly.

use crate::health::{Dependency, Readiness, ServiceProbe};
use crate::metrics as m;
use crate::recurrence::RecurrenceLinker;
use chrono::Utc;
use deja_config::{Settings, WorkerSettings};
use deja_domain::affirmed;
use deja_domain::poisoning::{scrub_copied, CopyGuard};
use deja_domain::second_look;
use deja_domain::type_look;
use deja_domain::{
    error_chain, is_redelivery, is_superseded, merge_failed_turn, merge_superseded_turn,
    merge_turn, Episode, EpisodeKey, ExtractedEpisode, ExtractionLimits, ExtractionStatus,
    TurnEvent, TurnUpdate,
};
use deja_embed::{BatchSettings, BatchingEmbedder, EmbedError, Embedder, LateEncoder, Reranker};
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
        status: ExtractionStatus,
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

/// For people: `deja retry` prints the outcomes that stored nothing this way.
impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Stored {
                episode_id, status, ..
            } => write!(f, "stored {episode_id} ({})", status.as_str()),
            Outcome::Retry { reason, detail } => write!(f, "failed for now ({reason}): {detail}"),
            Outcome::DeadLetter { reason, detail } => write!(f, "refused ({reason}): {detail}"),
            Outcome::Unavailable { dependency, detail } => {
                write!(f, "{} unavailable: {detail}", dependency.as_str())
            }
        }
    }
}

#[derive(Clone)]
pub struct Extractor {
    store: GraphStore,
    llm: Arc<LlmClient>,
    /// Embeds on the blocking pool; with `embedding.batch_window_ms` set, concurrent
    /// deliveries' episode texts share model calls (worth it only where a batch costs less
    /// CPU per text than single texts: docs/BENCHMARKS.md).
    embedder: BatchingEmbedder,
    worker: WorkerSettings,
    max_attempts: u32,
    limits: ExtractionLimits,
    readiness: Readiness,
    /// Links each committed episode to the older one it recurs (`recurrence.rs`); `None`
    /// when `worker.link_recurrences` is off.
    linker: Option<RecurrenceLinker>,
    /// Stores each committed episode's late-interaction token vectors when its text changed;
    /// `None` when late interaction is off or its model did not load.
    late: Option<Arc<dyn LateEncoder>>,
}

/// A committed step.
struct Stored {
    episode_id: String,
    /// Whether anything was written (`false`: the event was already merged).
    changed: bool,
    status: ExtractionStatus,
    /// The episode as written, when it was.
    saved: Option<Episode>,
}

impl Stored {
    /// What an upsert of `key` came to: the episode it wrote, or, when the merge had
    /// nothing to write, the status of the episode the merge saw (`seen`).
    fn from_upsert(
        key: &EpisodeKey,
        saved: Option<Episode>,
        seen: Option<ExtractionStatus>,
    ) -> Stored {
        match saved {
            Some(episode) => Stored {
                episode_id: episode.id.clone(),
                changed: true,
                status: episode.extraction_status,
                saved: Some(episode),
            },
            None => Stored {
                episode_id: key.episode_id(),
                changed: false,
                status: seen.unwrap_or(ExtractionStatus::Ok),
                saved: None,
            },
        }
    }
}

/// Why a step failed, sorted by what to do about it.
enum StepError {
    Llm(LlmError),
    Graph(GraphError),
    Embed(EmbedError),
    Conflicts,
    /// The event's team is not the team of the conversation's episode: permanent.
    TeamMismatch {
        episode_team: String,
    },
    /// The episode changed (another turn committed) since it was given to the LLM: the
    /// extraction must be redone on the new base. Carries the episode as now stored.
    BaseChanged(Box<Option<Episode>>),
    /// The event's conclusion block does not make a valid episode: permanent.
    Conclusion(String),
}

impl StepError {
    fn reason(&self) -> &'static str {
        match self {
            StepError::Llm(_) => "llm_failed",
            StepError::Graph(_) => "neo4j_failed",
            StepError::Embed(_) => "embedding_failed",
            StepError::Conflicts | StepError::BaseChanged(_) => "write_conflicts",
            StepError::TeamMismatch { .. } => "team_mismatch",
            // The block breaks the turn-event contract's bounds, as a check before the LLM
            // finds for a complete one: the reason the README documents for both.
            StepError::Conclusion(_) => "schema_violation",
        }
    }

    /// The dependency at fault when this is an infrastructure failure rather than one
    /// attributable to the message. A Neo4j failure no statement can cause (the store down,
    /// refusing the credentials or the database, failing inside) is an outage; its health
    /// probe then confirms it, or, answering every time, blames the message after all.
    fn outage(&self) -> Option<Dependency> {
        match self {
            StepError::Llm(e) if e.is_transient() => Some(Dependency::Llm),
            StepError::Graph(e) if e.is_store_fault() => Some(Dependency::Neo4j),
            _ => None,
        }
    }

    fn detail(&self) -> String {
        match self {
            StepError::Llm(e) => error_chain(e),
            StepError::Graph(e) => error_chain(e),
            StepError::Embed(e) => error_chain(e),
            StepError::Conflicts | StepError::BaseChanged(_) => {
                "too many concurrent writes to one episode".to_owned()
            }
            StepError::TeamMismatch { episode_team } => format!(
                "the conversation's episode belongs to team `{episode_team}`; \
                 an event of another team is not merged into it"
            ),
            StepError::Conclusion(detail) => detail.clone(),
        }
    }

    /// Dead-lettered at once, whatever the attempt.
    fn is_permanent(&self) -> bool {
        matches!(
            self,
            StepError::TeamMismatch { .. } | StepError::Conclusion(_)
        )
    }
}

/// How many times one delivery re-extracts because another turn committed meanwhile, before
/// it merges its last extraction anyway (the merge rules still keep the newest conclusion).
const MAX_REEXTRACTIONS: u32 = 3;

/// Whether the stored episode moved on from the one the extraction was made against, in a way
/// that matters: the turn will become the conclusion and the episode now holds turns the LLM
/// did not see.
fn base_changed(base_version: Option<i64>, current: Option<&Episode>, update: &TurnUpdate) -> bool {
    let Some(current) = current else {
        return base_version.is_some();
    };
    base_version != Some(current.version) && update.turn_index >= current.last_turn_index
}

/// The conversation's episode belongs to another team than the event.
fn team_mismatch(existing: Option<&Episode>, update: &TurnUpdate) -> Option<StepError> {
    existing
        .filter(|e| e.team != update.team)
        .map(|e| StepError::TeamMismatch {
            episode_team: e.team.clone(),
        })
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
    /// Must be called inside a tokio runtime: it starts the embedding micro-batcher's task,
    /// which lives as long as a clone of this extractor does.
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
            linker: settings
                .worker
                .link_recurrences
                .then(|| RecurrenceLinker::new(store.clone(), None, &settings.search)),
            store,
            llm,
            embedder: BatchingEmbedder::new(embedder, batch_settings(settings)),
            worker: settings.worker.clone(),
            max_attempts: settings.rabbitmq.max_attempts,
            limits: ExtractionLimits::default(),
            late: None,
        }
    }

    /// The same extractor storing each committed episode's token vectors with `late`, and
    /// recognizing recurrences with it as memory-search does.
    pub fn with_late(mut self, late: Option<Arc<dyn LateEncoder>>) -> Self {
        self.linker = self.linker.map(|linker| linker.with_late(late.clone()));
        self.late = late;
        self
    }

    /// The same extractor whose recurrence linking reranks with `reranker`, the cross-encoder
    /// memory-search uses when `search.rerank` is on.
    pub fn with_reranker(mut self, reranker: Option<Arc<dyn Reranker>>) -> Self {
        self.linker = self.linker.map(|linker| linker.with_reranker(reranker));
        self
    }

    pub fn store(&self) -> &GraphStore {
        &self.store
    }

    /// Whether the worker is taking deliveries, and why not (`/readyz`, see `health.rs`).
    pub fn readiness(&self) -> Readiness {
        self.readiness.clone()
    }

    /// Handles one delivery body; `attempt` starts at 1. Does not check the routing key:
    /// consumers of the turn exchange use [`Extractor::process_routed`].
    pub async fn process(&self, body: &[u8], attempt: u32) -> Outcome {
        self.process_routed(body, None, attempt).await
    }

    /// Handles one delivery body that arrived with `routing_key` (the original
    /// `turn.<org>.<team>` key): an event whose org or team is not the key's is dead-lettered
    /// as `tenant_mismatch`, so that a publisher the broker allows only `turn.acme.*` cannot
    /// write into another org's memory.
    pub async fn process_routed(
        &self,
        body: &[u8],
        routing_key: Option<&str>,
        attempt: u32,
    ) -> Outcome {
        let event = match TurnEvent::parse(body, self.worker.max_event_bytes) {
            Ok(event) => event,
            Err(error) => {
                return Outcome::DeadLetter {
                    reason: error.reason_code().to_owned(),
                    detail: error.to_string(),
                }
            }
        };
        if let Some(routing_key) = routing_key {
            if routing_key != deja_bus::turn_routing_key(&event.org, &event.team) {
                let error = deja_domain::EventError::TenantMismatch {
                    org: event.org.clone(),
                    team: event.team.clone(),
                    routing_key: routing_key.to_owned(),
                };
                tracing::error!(%error, "turn dead-lettered");
                return Outcome::DeadLetter {
                    reason: error.reason_code().to_owned(),
                    detail: error.to_string(),
                };
            }
        }
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

    /// The LLM kept failing for this delivery while it answered its health probe (a prompt
    /// that times out every time, a rate limit only large prompts hit): on the turn's last
    /// attempt that is this turn's failed extraction, recorded on the episode like any other
    /// (listed, `deja retry`), not a dead letter without an episode; before it, a retry. A
    /// Neo4j failure cannot be recorded in Neo4j: it is retried, then dead-lettered.
    pub(crate) async fn blamed(
        &self,
        body: &[u8],
        dependency: Dependency,
        attempt: u32,
        detail: String,
    ) -> Outcome {
        let retry = |detail: String| Outcome::Retry {
            reason: dependency.failure_reason().to_owned(),
            detail,
        };
        if dependency != Dependency::Llm || attempt < self.max_attempts {
            return retry(detail);
        }
        // It parsed and passed the tenant check before its processing reported the outage.
        let Ok(event) = TurnEvent::parse(body, self.worker.max_event_bytes) else {
            return retry(detail);
        };
        let key = EpisodeKey::new(&event.org, &event.correlation_id);
        let update = TurnUpdate::from_event(&event);
        let message = format!(
            "extraction failed: the LLM failed on this turn on every attempt while it answered \
             its health probe: {detail}"
        );
        let recorded = match self.store.get_by_key(&key).await {
            Ok(existing) => self.merge_failed(&key, existing, &update, &message).await,
            Err(error) => Err(StepError::Graph(error)),
        };
        match recorded {
            Ok(stored) => {
                m::extraction_failed();
                tracing::warn!(episode_id = %stored.episode_id, %detail,
                    "the LLM failed on every attempt of this turn; failed extraction recorded");
                Outcome::Stored {
                    episode_id: stored.episode_id,
                    changed: stored.changed,
                    status: stored.status,
                }
            }
            Err(error) => retry(format!(
                "{detail}; recording the failure: {}",
                error.detail()
            )),
        }
    }

    /// Extracts and merges one parsed event. On the last attempt (`final_attempt`), an LLM
    /// failure is recorded as a failed extraction instead of being retried; so is, at once,
    /// one that retrying cannot fix (a permanent 4xx, a prompt over the context window).
    pub async fn process_event(&self, event: &TurnEvent, final_attempt: bool) -> Outcome {
        let bounded = event.bounded(self.worker.tool_output_budget);
        let key = EpisodeKey::new(&event.org, &event.correlation_id);
        let update = TurnUpdate::from_event(event);
        let result = async {
            let mut existing = self
                .store
                .get_by_key(&key)
                .await
                .map_err(StepError::Graph)?;
            if let Some(error) = team_mismatch(existing.as_ref(), &update) {
                return Err(error);
            }
            // Kept apart from the episode (which stays a derived summary) so that `deja retry`
            // can re-extract the latest turn later: whole (at most `max_event_bytes`), so that
            // the retry's copy guard reads every tool output as this pass's does.
            let input = serde_json::to_string(event).unwrap_or_default();
            // Across turns, the tools' outputs: what the agent read, not the queries it wrote
            // (which a later conclusion may quote; this turn's inputs are guarded below).
            let untrusted = event
                .tool_calls
                .iter()
                .map(|c| c.output.as_str())
                .collect::<Vec<_>>()
                .join("\n");
            let (_, conversation_untrusted) = self
                .store
                .save_turn_input_with_untrusted(
                    &key,
                    &event.team,
                    event.turn_index,
                    &input,
                    &untrusted,
                )
                .await
                .map_err(StepError::Graph)?;
            // The copy guard: this turn's tool texts from the whole event, not the prompt's
            // cut copy (an injection in the part of a long output the prompt left out can
            // still be echoed by the answer, which the model reads in full), and the
            // conversation's earlier turns' outputs (the agent still has them in its context).
            let guard = CopyGuard::of_tool_calls(&event.tool_calls).with(&conversation_untrusted);
            if let Some(e) = &existing {
                if is_redelivery(e, &update) {
                    // A redelivery: nothing to ask the LLM.
                    return Ok(Stored {
                        episode_id: e.id.clone(),
                        changed: false,
                        status: e.extraction_status,
                        saved: None,
                    });
                }
            }
            // A turn older than the stored conclusion (a delayed retry) adds its skills and
            // nothing it concludes: no LLM call. Another turn committing meanwhile can only
            // keep it superseded, unless the episode went (then it is extracted after all).
            if is_superseded(existing.as_ref(), &update) {
                match self.merge_superseded(&key, existing, &update).await {
                    Ok(stored) => {
                        if stored.changed {
                            m::superseded();
                        }
                        return Ok(stored);
                    }
                    Err(StepError::BaseChanged(current)) => existing = *current,
                    Err(error) => return Err(error),
                }
            }
            // A runtime that already knows the conclusion spares the LLM call.
            if let Some(conclusion) = &event.conclusion {
                m::conclusion_given(conclusion.is_complete());
                let fallback = existing
                    .as_ref()
                    .map(|e| e.issue_description.clone())
                    .filter(|d| !d.trim().is_empty())
                    .unwrap_or_else(|| first_line(&event.user_message));
                if let Some(given) = conclusion.to_extraction(&fallback, &self.limits) {
                    let mut extracted =
                        given.map_err(|v| StepError::Conclusion(format!("conclusion: {v}")))?;
                    self.scrub(&guard, &mut extracted);
                    return self
                        .merge_ok(&key, existing, &update, &extracted, None)
                        .await;
                }
            }
            // The whole org's vocabulary, so that teams share issue types.
            let vocabulary = self
                .store
                .vocabulary_offered_to(&key, deja_graph::ORG_VOCABULARY_LIMIT)
                .await
                .map_err(StepError::Graph)?
                .for_prompt();
            let mut round = 0;
            loop {
                let request = ExtractionRequest {
                    event: &bounded,
                    existing: existing.as_ref(),
                    vocabulary: &vocabulary,
                    limits: &self.limits,
                    given: event.conclusion.as_ref(),
                };
                let merged = match self.llm.extract(&request).await {
                    Ok(extraction) => {
                        let mut extracted = match &event.conclusion {
                            Some(given) => given
                                .overlay(extraction.episode, &self.limits)
                                .map_err(|v| StepError::Conclusion(format!("conclusion: {v}")))?,
                            None => extraction.episode,
                        };
                        self.scrub(&guard, &mut extracted);
                        // What this turn's extraction concluded, before any second look and
                        // the merge rules: how an evaluation run tells which turn wrote what.
                        tracing::debug!(
                            root_cause = extracted.root_cause.as_deref().unwrap_or(""),
                            ruled_out = ?extracted.ruled_out,
                            resolved = extracted.resolved,
                            issue_type = extracted.issue_type.as_str(),
                            issue_description = extracted.issue_description.as_str(),
                            summary = extracted.summary.as_str(),
                            "extracted conclusion"
                        );
                        // Ruled-out items the runtime gave are the runtime's.
                        if event
                            .conclusion
                            .as_ref()
                            .is_none_or(|c| c.ruled_out.is_none())
                        {
                            drop_affirmed(&bounded, existing.as_ref(), &update, &mut extracted);
                        }
                        // A cause the runtime gave is the runtime's: no second look at it.
                        if event
                            .conclusion
                            .as_ref()
                            .is_none_or(|c| c.root_cause.is_none())
                        {
                            self.second_look(
                                &bounded,
                                &guard,
                                existing.as_ref(),
                                &update,
                                &mut extracted,
                            )
                            .await;
                        }
                        // Likewise a type the runtime gave.
                        if event
                            .conclusion
                            .as_ref()
                            .is_none_or(|c| c.issue_type.is_none())
                        {
                            self.type_look(existing.as_ref(), &vocabulary, &mut extracted)
                                .await;
                        }
                        // The last round merges whatever the base: the merge rules still keep
                        // the newest conclusion, and the delivery must end.
                        let base = (round < MAX_REEXTRACTIONS)
                            .then(|| existing.as_ref().map(|e| e.version));
                        self.merge_ok(&key, existing, &update, &extracted, base)
                            .await
                    }
                    Err(error) => {
                        // A refusal (401/403/404) that the probe does not share is this
                        // request's (a provider's moderation refusing one prompt): the turn's
                        // failure at once, not a pause of every turn.
                        let refused_here = matches!(error, LlmError::Refused { .. })
                            && self.llm.probe().await.is_ok();
                        if error.is_transient() && !refused_here {
                            // An unreachable endpoint is not this turn's failure, even on its
                            // last attempt: the worker pauses instead (`health.rs`).
                            Err(StepError::Llm(error))
                        } else if refused_here || final_attempt || !error.is_retryable() {
                            m::extraction_failed();
                            let message = format!("extraction failed: {}", error_chain(&error));
                            self.merge_failed(&key, existing, &update, &message).await
                        } else {
                            Err(StepError::Llm(error))
                        }
                    }
                };
                match merged {
                    Err(StepError::BaseChanged(current)) => {
                        tracing::info!(round, "another turn committed meanwhile; re-extracting");
                        m::reextracted();
                        existing = *current;
                        round += 1;
                    }
                    other => return other,
                }
            }
        }
        .await;
        match result {
            Ok(stored) => {
                // After the commit, and never a reason to retry the turn: without them the
                // episode is decided by the similarity-only calibration until `deja reembed`.
                if let (Some(encoder), Some(episode)) = (&self.late, stored.saved.as_ref()) {
                    self.store_tokens(encoder, episode).await;
                }
                // After the commit, and never a reason to retry the turn (`recurrence.rs`).
                if let (Some(linker), Some(episode)) = (&self.linker, stored.saved.as_ref()) {
                    linker.link(episode).await;
                }
                Outcome::Stored {
                    episode_id: stored.episode_id,
                    changed: stored.changed,
                    status: stored.status,
                }
            }
            Err(error) => match (
                self.outage_of(&error).await,
                final_attempt || error.is_permanent(),
            ) {
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

    /// [`StepError::outage`], and any other Neo4j failure when the store fails its health
    /// check too: only a store that answers lets a Neo4j error be blamed on the message.
    async fn outage_of(&self, error: &StepError) -> Option<Dependency> {
        match error.outage() {
            Some(dependency) => Some(dependency),
            None if matches!(error, StepError::Graph(_)) => self
                .store
                .ping()
                .await
                .is_err()
                .then_some(Dependency::Neo4j),
            None => None,
        }
    }

    /// Asks once more, about the final answer alone, when the extracted root cause is
    /// doubtful (`deja_domain::second_look`): the cause it concludes replaces the doubtful one.
    /// Never a reason to fail or retry the turn: without a usable reply the merge rules decide
    /// on the first extraction, as they would have.
    async fn second_look(
        &self,
        bounded: &TurnEvent,
        guard: &CopyGuard,
        existing: Option<&Episode>,
        update: &TurnUpdate,
        extracted: &mut ExtractedEpisode,
    ) {
        let Some(doubt) = second_look::doubt(existing, update, extracted) else {
            return;
        };
        let outcome = match self.llm.restate_cause(&bounded.final_answer, &doubt).await {
            Ok(Some(cause)) => match second_look::restated(extracted, doubt.reason, cause) {
                None => "same",
                Some(mut restated) => {
                    restated.bound_ruled_out(&self.limits);
                    self.scrub(guard, &mut restated);
                    if restated.root_cause.is_none() {
                        "copied"
                    } else {
                        *extracted = restated;
                        "restated"
                    }
                }
            },
            Ok(None) => "none",
            Err(error) => {
                tracing::warn!(error = %error_chain(&error), "second look at the root cause failed");
                "failed"
            }
        };
        m::second_look(doubt.reason.as_str(), outcome);
        tracing::info!(
            reason = doubt.reason.as_str(),
            outcome,
            "second look at a doubtful root cause"
        );
        tracing::debug!(
            root_cause = extracted.root_cause.as_deref().unwrap_or(""),
            "root cause after the second look"
        );
    }

    /// When the extracted issue type names a hypothesis the conversation ruled out
    /// (`deja_domain::type_look`), one narrow call names the root cause's mechanism instead.
    /// On failure the type stays as extracted: never a reason to retry the turn.
    async fn type_look(
        &self,
        existing: Option<&Episode>,
        vocabulary: &deja_domain::Vocabulary,
        extracted: &mut ExtractedEpisode,
    ) {
        let Some(doubt) = type_look::doubt(existing, extracted, &self.limits) else {
            return;
        };
        let outcome = match self.llm.rename_issue_type(&doubt, vocabulary).await {
            Ok(renamed) => {
                tracing::info!(
                    from = %doubt.issue_type,
                    to = %renamed,
                    names = %doubt.names,
                    "issue type named a ruled-out hypothesis; renamed"
                );
                extracted.issue_type = renamed;
                "renamed"
            }
            Err(error) => {
                tracing::warn!(
                    issue_type = %doubt.issue_type,
                    error = %error_chain(&error),
                    "second look at an issue type failed; kept as extracted"
                );
                "failed"
            }
        };
        m::type_look(outcome);
    }

    /// Drops what the conclusion copied from tool output or input (`deja_domain::poisoning`).
    fn scrub(&self, guard: &CopyGuard, extracted: &mut ExtractedEpisode) {
        let dropped = scrub_copied(extracted, guard);
        if dropped > 0 {
            m::copies_dropped(dropped);
            tracing::warn!(
                dropped,
                "dropped conclusion text copied from tool output or input"
            );
        }
    }

    /// Merges a successful extraction into the episode, starting from `read` (the episode as
    /// this delivery read it). With `base` (the version the extraction saw, `None` for a new
    /// episode), a stored episode that moved on meanwhile is returned as
    /// [`StepError::BaseChanged`] instead of merged.
    async fn merge_ok(
        &self,
        key: &EpisodeKey,
        read: Option<Episode>,
        update: &TurnUpdate,
        extracted: &ExtractedEpisode,
        base: Option<Option<i64>>,
    ) -> Result<Stored, StepError> {
        self.commit(key, read, update, |existing| match base {
            Some(base) if base_changed(base, existing, update) => {
                Err(StepError::BaseChanged(Box::new(existing.cloned())))
            }
            _ => Ok(merge_turn(existing, update, extracted, Utc::now())),
        })
        .await
    }

    /// Merges a superseded turn ([`is_superseded`]) without its extraction, starting from `read`
    /// like [`Self::merge_ok`]; an episode no longer superseding it comes back as
    /// [`StepError::BaseChanged`].
    async fn merge_superseded(
        &self,
        key: &EpisodeKey,
        read: Option<Episode>,
        update: &TurnUpdate,
    ) -> Result<Stored, StepError> {
        // A copy of this turn that committed first (two deliveries racing) writes nothing.
        self.commit(key, read, update, |existing| match existing {
            Some(e) if is_superseded(Some(e), update) => {
                Ok(merge_superseded_turn(e, update, Utc::now()))
            }
            other => Err(StepError::BaseChanged(Box::new(other.cloned()))),
        })
        .await
    }

    /// Records a failed extraction on the episode, starting from `read` like [`Self::merge_ok`].
    async fn merge_failed(
        &self,
        key: &EpisodeKey,
        read: Option<Episode>,
        update: &TurnUpdate,
        message: &str,
    ) -> Result<Stored, StepError> {
        self.commit(key, read, update, |existing| {
            Ok(merge_failed_turn(existing, update, message, Utc::now()))
        })
        .await
    }

    /// Commits what `merge` makes of the stored episode, starting from `read`: a stale read
    /// costs one more attempt (the store's compare-and-set), never a lost write. A
    /// conversation of another team is refused, and an episode whose embedded text changed
    /// is embedded before the write.
    async fn commit(
        &self,
        key: &EpisodeKey,
        read: Option<Episode>,
        update: &TurnUpdate,
        mut merge: impl FnMut(Option<&Episode>) -> Result<Option<Episode>, StepError>,
    ) -> Result<Stored, StepError> {
        let mut seen = None;
        let saved = self
            .store
            .upsert_from(key, read, |existing: Option<Episode>| {
                seen = existing.as_ref().map(|e| e.extraction_status);
                let merged = match team_mismatch(existing.as_ref(), update) {
                    Some(error) => Err(error),
                    None => merge(existing.as_ref()),
                };
                async move {
                    match merged? {
                        Some(episode) => self.with_embedding(episode).await.map(Some),
                        None => Ok(None),
                    }
                }
            })
            .await?;
        Ok(Stored::from_upsert(key, saved, seen))
    }

    /// The committed episode's token vectors, when its text changed (see `process_event`).
    async fn store_tokens(&self, encoder: &Arc<dyn LateEncoder>, episode: &Episode) {
        match deja_recognition::ensure_tokens(
            &self.store,
            encoder,
            Some(self.embedder.inner()),
            episode,
        )
        .await
        {
            Ok(true) => m::token_vectors("stored"),
            Ok(false) => m::token_vectors("current"),
            Err(error) => {
                m::token_vectors("failed");
                tracing::warn!(episode_id = %episode.id, error = %error_chain(&error),
                    "token vectors not stored; the episode is decided without them until \
                     `deja reembed`");
            }
        }
    }

    /// Embeds the episode when its embedded text changed (merge drops a stale vector).
    async fn with_embedding(&self, mut episode: Episode) -> Result<Episode, StepError> {
        if episode.extraction_status != ExtractionStatus::Ok || episode.embedding.is_some() {
            return Ok(episode);
        }
        let started = Instant::now();
        let mut vectors = self
            .embedder
            .embed(vec![episode.embedding_text()])
            .await
            .map_err(StepError::Embed)?;
        m::embedding_latency(started.elapsed());
        episode.embedding = vectors.pop();
        episode.embedding_model = Some(self.embedder.model_id().to_owned());
        Ok(episode)
    }

    /// Re-extracts the stored latest turn input of an episode (`deja retry`), and says which
    /// turn that was (`None`: none is stored). Runs as a last attempt: a failure is recorded
    /// on the episode, not retried.
    pub async fn retry_stored(
        &self,
        key: &EpisodeKey,
    ) -> Result<(Option<u32>, Outcome), GraphError> {
        let Some((turn_index, input)) = self.store.get_turn_input(key).await? else {
            return Ok((
                None,
                Outcome::DeadLetter {
                    reason: "no_stored_input".to_owned(),
                    detail: format!(
                        "no stored turn input for conversation {}",
                        key.correlation_id
                    ),
                },
            ));
        };
        let event: TurnEvent = match serde_json::from_str(&input) {
            Ok(event) => event,
            Err(error) => {
                return Ok((
                    Some(turn_index),
                    Outcome::DeadLetter {
                        reason: "invalid_stored_input".to_owned(),
                        detail: error.to_string(),
                    },
                ))
            }
        };
        Ok((Some(turn_index), self.process_event(&event, true).await))
    }
}

/// Drops the ruled-out items this turn's own answer affirms (`deja_domain::affirmed`): a
/// finding, the fix or the conclusion filed as an abandoned hypothesis.
fn drop_affirmed(
    bounded: &TurnEvent,
    existing: Option<&Episode>,
    update: &TurnUpdate,
    extracted: &mut ExtractedEpisode,
) {
    let dropped = affirmed::drop_affirmed(extracted, existing, &bounded.final_answer, update);
    if !dropped.is_empty() {
        m::affirmed_dropped(dropped.len());
        tracing::debug!(?dropped, "ruled-out items the answer affirms dropped");
    }
}

/// The worker's micro-batching, from `[embedding]`.
fn batch_settings(settings: &Settings) -> BatchSettings {
    BatchSettings {
        window: std::time::Duration::from_millis(settings.embedding.batch_window_ms),
        max_batch: settings.embedding.max_batch,
    }
}

/// The first non-empty line of `text`, bounded.
fn first_line(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    line.chars().take(300).collect()
}
