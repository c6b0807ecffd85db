//! Automatic recurrence links. After a turn commits, the conversation's episode is recognized
//! against the older episodes of its org and team with memory-search's own pipeline: the
//! candidate stages of `deja_recognition` and the calibrated decision of
//! `deja_domain::recognition::decide`, the episode's stored vector, its cause (issue type and
//! root cause) and what it ruled out standing for the query (no LLM call, no new embedding;
//! late interaction encodes the cause's word pieces). The best `strong` match created before
//! it (`recurrence_target`) becomes `(new)-[:RECURRENCE_OF {detected_at, confidence}]->(old)`;
//! a look-alike the decision calls `possible` links nothing. The decision is the search's
//! calibration (`search.recognition`) with a higher bar for `strong` (`search.recurrence`,
//! `deja_domain::recognition::links`): a link is written with no person looking.
//!
//! Only an episode with a root cause is recognized: a recurrence is the same failure
//! *mechanism*, and symptoms alone cannot tell it from a look-alike (docs/EVALUATION.md). A
//! conclusion without one links nothing and retracts an earlier automatic link, without
//! running the recognizer — which also spares the early turns of an investigation the
//! rerank stage (docs/BENCHMARKS.md, "Ingest").
//!
//! Counted once per conversation: the store keeps at most one automatic link per episode
//! (`review/auto_link_recurrence.cypher`). A later turn that recognizes the same episode
//! changes nothing; one whose newer conclusion recognizes another episode moves the link
//! there; one that recognizes nothing retracts it. A link a person made or confirmed is never
//! touched, and a pair a person unlinked (`NOT_RECURRENCE_OF`) or a target marked wrong is
//! never linked: the store treats such a match as recognizing nothing.
//!
//! Two turns of one conversation committing close together link from their own copies in
//! either order: after linking, the episode is read again, and when a newer version committed
//! meanwhile, it is linked from that (`link_current`).
//!
//! It never changes a turn's outcome: it runs after the commit, within `search.deadline_ms`;
//! an error or a timeout is logged and counted (`deja_worker_recurrence_links_total`,
//! `outcome="failed"`), and the turn is acked as stored.

use crate::metrics as m;
use chrono::Utc;
use deja_config::SearchSettings;
use deja_domain::recognition::{decide, recurrence_target};
use deja_domain::{Episode, ExtractionStatus, Scope};
use deja_embed::{LateEncoder, Reranker};
use deja_graph::{GraphStore, SearchFilters};
use deja_recognition::{CandidateSet, RecognitionQuery, Recognizer};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The query's limit for the candidate stages (which keep `search.rerank_candidates` at least);
/// the decision then looks at every candidate they kept.
const LINK_CANDIDATES: usize = 5;
/// Re-reads after a link before giving up on catching up with an episode that keeps moving
/// (each newer turn links from its own copy anyway).
const CATCH_UPS: usize = 2;
/// The episode text standing for the query is bounded like a search query.
const MAX_QUERY_CHARS: usize = 2000;

/// What linking did for one committed turn.
#[derive(Debug, Clone, PartialEq)]
pub enum LinkOutcome {
    /// A new link to `of`.
    Linked { of: String, confidence: f64 },
    /// Nothing to change (the same link exists, or nothing recognized and nothing to retract).
    Unchanged,
    /// An earlier automatic link was removed: the newest conclusion recognizes nothing.
    Retracted,
    /// Not linkable (failed extraction, no vector, missing episode).
    Skipped,
    /// An error or the deadline: logged and counted, the turn is unaffected.
    Failed(String),
}

impl LinkOutcome {
    fn label(&self) -> &'static str {
        match self {
            LinkOutcome::Linked { .. } => "linked",
            LinkOutcome::Unchanged => "unchanged",
            LinkOutcome::Retracted => "retracted",
            LinkOutcome::Skipped => "skipped",
            LinkOutcome::Failed(_) => "failed",
        }
    }
}

/// Links a new episode to the older one it recurs. Cheap to clone.
#[derive(Clone)]
pub struct RecurrenceLinker {
    recognizer: Recognizer,
    settings: Arc<SearchSettings>,
}

impl std::fmt::Debug for RecurrenceLinker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecurrenceLinker")
            .field("recognizer", &self.recognizer)
            .finish()
    }
}

impl RecurrenceLinker {
    /// Recognizes with the stages memory-search runs: `reranker` is the cross-encoder when
    /// `search.rerank` is on (else `None`), and [`RecurrenceLinker::with_late`] adds late
    /// interaction. Without either, the similarity-only calibration decides.
    pub fn new(
        store: GraphStore,
        reranker: Option<Arc<dyn Reranker>>,
        settings: &SearchSettings,
    ) -> Self {
        RecurrenceLinker {
            recognizer: Recognizer::new(store, reranker),
            settings: Arc::new(settings.clone()),
        }
    }

    /// The same linker with `reranker` as its cross-encoder.
    pub fn with_reranker(self, reranker: Option<Arc<dyn Reranker>>) -> Self {
        RecurrenceLinker {
            recognizer: self.recognizer.with_reranker(reranker),
            settings: self.settings,
        }
    }

    /// The same linker scoring candidates by late interaction with `late` (the encoder the
    /// worker stores token vectors with).
    pub fn with_late(self, late: Option<Arc<dyn LateEncoder>>) -> Self {
        RecurrenceLinker {
            recognizer: self.recognizer.with_late(late),
            settings: self.settings,
        }
    }

    /// Recognizes `episode` (as just committed, with its vector) and updates its automatic
    /// link. Never fails: see the module documentation.
    pub async fn link(&self, episode: &Episode) -> LinkOutcome {
        let deadline = Instant::now() + Duration::from_millis(self.settings.deadline_ms);
        let outcome =
            match tokio::time::timeout_at(deadline.into(), self.link_current(episode, deadline))
                .await
            {
                Ok(Ok(outcome)) => outcome,
                Ok(Err(error)) => LinkOutcome::Failed(error.to_string()),
                Err(_) => LinkOutcome::Failed(format!(
                    "recurrence linking ran past {} ms",
                    self.settings.deadline_ms
                )),
            };
        m::recurrence_link(outcome.label());
        match &outcome {
            LinkOutcome::Failed(error) => {
                tracing::warn!(episode_id = %episode.id, %error,
                    "recurrence linking failed; the turn is stored all the same")
            }
            LinkOutcome::Linked { of, confidence } => {
                tracing::info!(episode_id = %episode.id, of = %of, confidence,
                    "recurrence linked")
            }
            other => tracing::debug!(episode_id = %episode.id, outcome = other.label(),
                "recurrence linking"),
        }
        outcome
    }

    /// [`Self::try_link`] of `episode`, then of the episode as stored when a newer version
    /// committed meanwhile: two turns of one conversation link from their own copies in
    /// either order, and the older copy's decision must not be the one left standing.
    async fn link_current(
        &self,
        episode: &Episode,
        deadline: Instant,
    ) -> Result<LinkOutcome, deja_graph::GraphError> {
        let mut current = std::borrow::Cow::Borrowed(episode);
        let mut outcome = self.try_link(&current, deadline).await?;
        for _ in 0..CATCH_UPS {
            let stored = self
                .recognizer
                .store()
                .get_by_id(Some(&current.org), &current.id)
                .await?;
            match stored {
                Some(now) if now.version > current.version => {
                    current = std::borrow::Cow::Owned(now);
                    outcome = self.try_link(&current, deadline).await?;
                }
                _ => break,
            }
        }
        Ok(outcome)
    }

    async fn try_link(
        &self,
        episode: &Episode,
        deadline: Instant,
    ) -> Result<LinkOutcome, deja_graph::GraphError> {
        let Some(vector) = episode
            .embedding
            .as_deref()
            .filter(|_| episode.extraction_status == ExtractionStatus::Ok)
        else {
            return Ok(LinkOutcome::Skipped);
        };
        let has_mechanism = episode
            .root_cause
            .as_deref()
            .is_some_and(|cause| !cause.trim().is_empty());
        if !has_mechanism {
            return self.store_link(episode, None).await;
        }
        let scope = Scope {
            org: episode.org.clone(),
            team: Some(episode.team.clone()),
        };
        let set = self
            .candidate_set(episode, vector, &scope, deadline)
            .await?;
        // Every decided candidate, not the first few: newer conversations that match (an
        // outage's other threads) must not crowd out the older recurrence the link is for.
        let every = set.candidates.len();
        let (decided, _) = decide(
            set.candidates,
            &set.query,
            &self.settings.recurrence.over(&self.settings.recognition),
            &self.settings.ranking,
            every,
            Utc::now(),
        );
        let target =
            recurrence_target(episode, &decided).map(|d| (d.episode.id.as_str(), d.confidence));
        self.store_link(episode, target).await
    }

    /// The candidates `episode` is recognized against in `scope` (its org and team when
    /// linking): memory-search's candidate stages with the episode's stored `vector`, its
    /// cause and its ruled-out hypotheses standing for the query, the episode itself
    /// excluded. `deja eval retrieval` measures links on the same candidates.
    pub async fn candidate_set(
        &self,
        episode: &Episode,
        vector: &[f32],
        scope: &Scope,
        deadline: Instant,
    ) -> Result<CandidateSet, deja_graph::GraphError> {
        let filters = SearchFilters {
            exclude_correlation_id: Some(episode.correlation_id.clone()),
            ..SearchFilters::default()
        };
        // The episode's mechanism, not its symptoms: its description and summary name far more
        // of a look-alike's vocabulary than its cause does (docs/EVALUATION.md, "Recurrence
        // links": as the query they linked 0.77 of incidents to a look-alike once their family
        // was out of memory, the cause 0.33). What its conversation ruled out is read as
        // denied, never as words (as words, it linked more look-alikes than it kept out).
        let text: String = episode.cause_text().chars().take(MAX_QUERY_CHARS).collect();
        let query = RecognitionQuery {
            scope,
            text: &text,
            components: &episode.components,
            ruled_out: &episode.ruled_out,
            filters: &filters,
            limit: LINK_CANDIDATES,
            family_order: false,
        };
        self.recognizer
            .candidate_set(&self.settings, &query, vector, deadline)
            .await
    }

    /// Makes `target` (or nothing) the episode's automatic link.
    async fn store_link(
        &self,
        episode: &Episode,
        target: Option<(&str, f64)>,
    ) -> Result<LinkOutcome, deja_graph::GraphError> {
        let linked = self
            .recognizer
            .store()
            .auto_link_recurrence(&episode.org, &episode.id, target)
            .await?;
        Ok(match (linked, target) {
            (None, _) => LinkOutcome::Skipped,
            (Some(link), Some((of, confidence))) if link.created => LinkOutcome::Linked {
                of: of.to_owned(),
                confidence,
            },
            (Some(link), _) if link.retracted > 0 => LinkOutcome::Retracted,
            (Some(_), _) => LinkOutcome::Unchanged,
        })
    }
}
