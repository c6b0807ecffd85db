//! The strategy synthesizer: consumes deduplicated synthesis jobs published by qualifying
//! searches, asks the LLM for a playbook over the source episodes, and stores it as a
//! `:Strategy` linked to them. A job whose strategy is already current costs no LLM call.

use crate::extract::error_chain;
use crate::metrics as m;
use chrono::Utc;
use deja_bus::{Bus, Delivery};
use deja_domain::strategy::{source_fingerprint, StrategyKey, SynthesisJob};
use deja_graph::{GraphStore, StrategyWrite};
use deja_llm::LlmClient;
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq)]
pub enum SynthesisOutcome {
    /// Written as the current strategy.
    Stored,
    /// The current strategy was edited by a person: the new text is kept as a proposal.
    Proposed,
    /// Already current, or no longer qualifying: nothing to do, no LLM call.
    Skipped(&'static str),
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
}

impl Synthesizer {
    pub fn new(store: GraphStore, llm: Arc<LlmClient>, model: impl Into<String>) -> Self {
        Synthesizer {
            store,
            llm,
            model: model.into(),
            max_sources: deja_domain::strategy::MAX_STRATEGY_SOURCES,
        }
    }

    /// Handles one job delivery end to end, settling it.
    pub async fn handle(&self, bus: &Bus, delivery: &Delivery) {
        let outcome = match serde_json::from_slice::<SynthesisJob>(delivery.body()) {
            Ok(job) => self.synthesize(&job.key).await,
            Err(error) => {
                let _ = delivery
                    .dead_letter(bus, "invalid_synthesis_job", &error.to_string())
                    .await;
                return;
            }
        };
        tracing::info!(?outcome, "synthesis job handled");
        let settled = match outcome {
            SynthesisOutcome::Failed {
                reason,
                transient: true,
            } => {
                match delivery
                    .retry(bus, bus.retry_delay(delivery.attempt()))
                    .await
                {
                    Ok(_) => Ok(()),
                    Err(_) => delivery.dead_letter(bus, "synthesis_failed", &reason).await,
                }
            }
            SynthesisOutcome::Failed {
                reason,
                transient: false,
            } => delivery.dead_letter(bus, "synthesis_failed", &reason).await,
            _ => delivery.ack().await,
        };
        if let Err(error) = settled {
            tracing::warn!(%error, "could not settle synthesis job; it will be redelivered");
        }
    }

    /// Synthesizes the strategy of `key` unless it is current.
    pub async fn synthesize(&self, key: &StrategyKey) -> SynthesisOutcome {
        let span = tracing::info_span!("synthesis", org = %key.org, team = %key.team,
            issue_type = %key.issue_type, component = %key.component.name);
        let _entered = span.enter();
        let result = self.synthesize_inner(key).await;
        if let Err(error) = self.store.release_synthesis_claim(key).await {
            tracing::warn!(%error, "could not release the synthesis claim; it expires on its own");
        }
        match result {
            Ok(outcome) => outcome,
            Err(outcome) => outcome,
        }
    }

    async fn synthesize_inner(
        &self,
        key: &StrategyKey,
    ) -> Result<SynthesisOutcome, SynthesisOutcome> {
        let graph_failed = |e: deja_graph::GraphError| SynthesisOutcome::Failed {
            transient: e.is_transient(),
            reason: error_chain(&e),
        };
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
        };
        let proposed = self
            .store
            .save_strategy(&write)
            .await
            .map_err(graph_failed)?;
        m::strategy_synthesized();
        Ok(if proposed {
            SynthesisOutcome::Proposed
        } else {
            SynthesisOutcome::Stored
        })
    }
}
