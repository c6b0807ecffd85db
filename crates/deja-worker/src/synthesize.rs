//! The strategy synthesizer: consumes deduplicated synthesis jobs published by qualifying
//! searches, asks the LLM for a playbook over the source episodes, and stores it as a
//! `:Strategy` linked to them. A job whose strategy is already current costs no LLM call.
//!
//! Retries: a transient failure (LLM or Neo4j unavailable) is retried in process, with the
//! bus's backoff, up to `rabbitmq.max_attempts` times; then the job is dead-lettered with
//! reason `synthesis_failed`. Jobs never go through the extraction queue's retry levels,
//! whose requeue exchange feeds only the extraction queue (where a job is no turn event).
//!
//! A failed job's claim is released with the failure recorded on the strategy node (the
//! fingerprint of the sources it tried, when, why), in one statement: searches do not claim
//! that source set again for `search.strategy_failure_cooldown_secs`, so a source set the
//! model cannot write a playbook for costs one job, not one per qualifying search. A job for
//! that source set that was already queued (its claim outlived by a backlog, then taken again
//! by a search) is acked without a call for the same cool-down. Replaying the dead letter
//! (`deja dlq replay`) runs it again regardless.

use crate::metrics as m;
use backon::Retryable;
use chrono::Utc;
use deja_bus::{Bus, Delivery, HEADER_REPLAYED_AT};
use deja_domain::error_chain;
use deja_domain::strategy::{source_fingerprint, StrategyKey, SynthesisJob};
use deja_graph::{GraphStore, SavedStrategy, StrategyWrite};
use deja_llm::LlmClient;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument;

#[derive(Debug, Clone, PartialEq)]
pub enum SynthesisOutcome {
    /// Written as the current strategy.
    Stored,
    /// The current strategy was edited by a person: the new text is kept as a proposal.
    Proposed,
    /// Already current, or no longer qualifying: nothing to do, no LLM call.
    Skipped(&'static str),
    /// Not written: a strategy made from a newer read of the sources was stored meanwhile.
    Stale,
    Failed {
        reason: String,
        transient: bool,
    },
}

#[derive(Clone)]
pub struct Synthesizer {
    store: GraphStore,
    llm: Arc<LlmClient>,
    model: String,
    max_sources: usize,
    failure_cooldown: Duration,
}

impl Synthesizer {
    pub fn new(store: GraphStore, llm: Arc<LlmClient>, model: impl Into<String>) -> Self {
        Synthesizer {
            store,
            llm,
            model: model.into(),
            max_sources: deja_domain::strategy::MAX_STRATEGY_SOURCES,
            failure_cooldown: Duration::ZERO,
        }
    }

    /// How long after a failed synthesis of a source set a queued job for the same set is
    /// skipped (`search.strategy_failure_cooldown_secs`; zero, the default, never skips).
    pub fn with_failure_cooldown(mut self, cooldown: Duration) -> Self {
        self.failure_cooldown = cooldown;
        self
    }

    /// True when the synthesis of the job's source set failed within the cool-down and the
    /// job is not a person's replay: running it would repeat the failed attempts.
    async fn failed_recently(&self, job: &SynthesisJob, delivery: &Delivery) -> bool {
        if self.failure_cooldown.is_zero() || delivery.header(HEADER_REPLAYED_AT).is_some() {
            return false;
        }
        match self.store.strategy_and_failure(&job.key).await {
            Ok((_, failed)) => failed.is_some_and(|failed| {
                failed.cools_down(&job.fingerprint, self.failure_cooldown, Utc::now())
            }),
            // The attempt itself reads the store and fails or retries as it should.
            Err(_) => false,
        }
    }

    /// Handles one job delivery end to end, settling it.
    pub async fn handle(&self, bus: &Bus, delivery: &Delivery) {
        let job = match serde_json::from_slice::<SynthesisJob>(delivery.body()) {
            Ok(job) => job,
            Err(error) => {
                if let Err(error) = delivery
                    .dead_letter(bus, "invalid_synthesis_job", &error.to_string())
                    .await
                {
                    unsettled(&error).await;
                }
                return;
            }
        };
        if self.failed_recently(&job, delivery).await {
            m::strategy_skipped();
            tracing::info!(org = %job.key.org, team = %job.key.team,
                issue_type = %job.key.issue_type, fingerprint = %job.fingerprint,
                "synthesis job skipped: these sources' synthesis failed recently");
            let skipped = SynthesisOutcome::Skipped("its sources' synthesis failed recently");
            self.settle(&job.key, &[job.fingerprint.as_str()], &skipped, None)
                .await;
            if let Err(error) = delivery.ack().await {
                unsettled(&error).await;
            }
            return;
        }
        let max_attempts = bus.topology().max_attempts.max(1);
        let attempts = AtomicU32::new(1);
        // The fingerprints the attempts computed: their claims are released with the job's
        // once the job is settled, not between attempts, when a qualifying search would take
        // the claim again and publish a duplicate job.
        let computed = std::sync::Mutex::new(Vec::new());
        // A transient failure comes back as `Err` so that backon retries it; any other
        // outcome, or the last failure, settles the job. Boxed: the nested future types are
        // otherwise too deep for the compiler's layout queries.
        let retried = (|| async {
            let (outcome, fingerprint) = self.run_once(&job.key).await;
            computed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(fingerprint);
            match outcome {
                failed @ SynthesisOutcome::Failed {
                    transient: true, ..
                } => Err(failed),
                outcome => Ok(outcome),
            }
        })
        .retry(bus.retry_policy().with_max_retries(max_attempts - 1))
        .notify(|failed, delay| {
            let attempt = attempts.fetch_add(1, Ordering::Relaxed);
            if let SynthesisOutcome::Failed { reason, .. } = failed {
                tracing::warn!(%reason, attempt, ?delay, "synthesis failed; retrying");
            }
        });
        let outcome = Box::pin(retried).await.unwrap_or_else(|failed| failed);
        let computed = computed.into_inner().unwrap_or_else(|p| p.into_inner());
        let claims: Vec<&str> = std::iter::once(job.fingerprint.as_str())
            .chain(computed.iter().map(String::as_str))
            .collect();
        // The sources the last attempt read (what the next search fingerprints too), else the
        // job's: a failure is recorded for them.
        let tried = computed.last().unwrap_or(&job.fingerprint);
        self.settle(&job.key, &claims, &outcome, Some(tried)).await;
        let attempt = attempts.load(Ordering::Relaxed);
        tracing::info!(?outcome, attempt, "synthesis job handled");
        let settled = match outcome {
            SynthesisOutcome::Failed { reason, .. } => {
                delivery.dead_letter(bus, "synthesis_failed", &reason).await
            }
            _ => delivery.ack().await,
        };
        if let Err(error) = settled {
            unsettled(&error).await;
        }
    }

    /// Synthesizes the strategy of `key` unless it is current, and releases the claim of the
    /// fingerprint it synthesized (recording a failure, as [`Synthesizer::handle`] does).
    pub async fn synthesize(&self, key: &StrategyKey) -> SynthesisOutcome {
        let (outcome, fingerprint) = self.run_once(key).await;
        let claims: Vec<&str> = fingerprint.as_deref().into_iter().collect();
        self.settle(key, &claims, &outcome, fingerprint.as_deref())
            .await;
        outcome
    }

    /// One synthesis attempt, and the fingerprint of the sources it read (when it got that
    /// far). Releases nothing: the caller does, once it is done with the key.
    async fn run_once(&self, key: &StrategyKey) -> (SynthesisOutcome, Option<String>) {
        let span = tracing::info_span!("synthesis", org = %key.org, team = %key.team,
            issue_type = %key.issue_type, component = %key.component.name);
        async {
            let mut fingerprint = None;
            let outcome = match self.synthesize_inner(key, &mut fingerprint).await {
                Ok(outcome) => outcome,
                Err(outcome) => outcome,
            };
            (outcome, fingerprint)
        }
        .instrument(span)
        .await
    }

    /// Releases the claims of `fingerprints` (the job's and those synthesized), never a newer
    /// claim. After a failure, records it for `tried` (the sources it read) in the same
    /// statement, so that no search claims those sources again during the cool-down.
    async fn settle(
        &self,
        key: &StrategyKey,
        fingerprints: &[&str],
        outcome: &SynthesisOutcome,
        tried: Option<&str>,
    ) {
        let settled = match (outcome, tried) {
            (SynthesisOutcome::Failed { reason, .. }, Some(tried)) => {
                tracing::warn!(fingerprint = tried, %reason,
                    "synthesis failed; searches will not ask for these sources again until \
                     search.strategy_failure_cooldown_secs has passed or they change");
                self.store
                    .fail_synthesis_claim(key, fingerprints, tried, reason)
                    .await
            }
            _ if fingerprints.is_empty() => return,
            _ => self.store.release_synthesis_claim(key, fingerprints).await,
        };
        if let Err(error) = settled {
            tracing::warn!(%error, "could not release the synthesis claim; it expires on its own");
        }
    }

    async fn synthesize_inner(
        &self,
        key: &StrategyKey,
        computed: &mut Option<String>,
    ) -> Result<SynthesisOutcome, SynthesisOutcome> {
        let graph_failed = |e: deja_graph::GraphError| SynthesisOutcome::Failed {
            transient: e.is_transient(),
            reason: error_chain(&e),
        };
        let sources_read_at = Utc::now();
        let sources = self
            .store
            .strategy_sources(key, self.max_sources)
            .await
            .map_err(graph_failed)?;
        if sources.len() < 2 {
            return Ok(SynthesisOutcome::Skipped("fewer than two source episodes"));
        }
        let stamps: Vec<_> = sources
            .iter()
            .map(|e| (e.id.clone(), e.updated_at))
            .collect();
        let fingerprint = source_fingerprint(&stamps);
        *computed = Some(fingerprint.clone());
        if let Some(stored) = self.store.get_strategy(key).await.map_err(graph_failed)? {
            if stored.fingerprint == fingerprint
                || stored.proposed_fingerprint.as_deref() == Some(&fingerprint)
            {
                m::strategy_skipped();
                return Ok(SynthesisOutcome::Skipped("strategy already current"));
            }
        }
        let (playbook, _usage) =
            self.llm
                .synthesize(key, &sources)
                .await
                .map_err(|e| SynthesisOutcome::Failed {
                    transient: e.is_transient(),
                    reason: error_chain(&e),
                })?;
        let write = StrategyWrite {
            key: key.clone(),
            markdown: playbook.to_markdown(key, sources.len()),
            playbook_json: serde_json::to_string(&playbook).unwrap_or_default(),
            fingerprint,
            source_ids: sources.iter().map(|e| e.id.clone()).collect(),
            model: self.model.clone(),
            generated_at: Utc::now(),
            sources_read_at,
        };
        let saved = self
            .store
            .save_strategy(&write)
            .await
            .map_err(graph_failed)?;
        Ok(match saved {
            SavedStrategy::Stored => {
                m::strategy_synthesized();
                SynthesisOutcome::Stored
            }
            SavedStrategy::Proposed => {
                m::strategy_synthesized();
                SynthesisOutcome::Proposed
            }
            SavedStrategy::Stale => {
                tracing::info!("a strategy from newer sources was stored meanwhile; dropped");
                SynthesisOutcome::Stale
            }
        })
    }
}

/// A job that could not be settled (its dead-letter copy refused, its channel gone) is
/// requeued when its delivery is dropped: held a moment first, as a turn is, so that a
/// refusal that repeats costs a try every few seconds, not a loop as fast as the broker goes.
async fn unsettled(error: &deja_bus::BusError) {
    tracing::warn!(%error, "could not settle synthesis job; it will be redelivered");
    tokio::time::sleep(crate::run::UNSETTLED_PAUSE).await;
}
