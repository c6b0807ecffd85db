//! The strategy step of a semantic search.
//!
//! A search *qualifies* when two or more returned episodes (all above the floor) share an
//! (issue type, component). Its key is (org, team or `*`, issue type, component). The
//! current source set of the key is fingerprinted; a stored strategy with that fingerprint
//! is returned at no LLM cost. Otherwise a synthesis job is claimed (one per key and
//! fingerprint across every concurrent search) and published, and the search returns at
//! once, or after waiting up to `search.strategy_wait_ms` for the new strategy.
//!
//! A claim stands for as long as its job may run ([`crate::synthesis_claim_lease`]). A source
//! set whose synthesis failed (the job was dead-lettered) is not claimed again for
//! `search.strategy_failure_cooldown_secs` (`deja_api_synthesis_jobs_total{outcome=
//! "cooling_down"}`); a changed source set is claimed at once.
//!
//! While a strategy is being refreshed, the previous (stale) one is still returned, with a
//! notice: its leads remain useful, and a person-edited one is only ever replaced by review.
//! A failure anywhere in this step leaves the strategy out; it never fails the search. The
//! step has its own time limit (`search.strategy_timeout_ms` + `strategy_wait_ms`, within
//! the search deadline): past it the episodes are returned without a strategy, and the
//! lookup goes on in the background until the search deadline at most. Only the claim and
//! publication of a job outlive the deadline: a claim is never left without its job.

use crate::jobs::SynthesisQueue;
use crate::metrics as m;
use crate::service::SearchService;
use deja_domain::ranking::ScoreBreakdown;
use deja_domain::strategy::{
    qualifying_pair, source_fingerprint, QualifyingHit, StrategyKey, SynthesisJob,
    MAX_STRATEGY_SOURCES, ORG_WIDE_TEAM,
};
use deja_domain::{Episode, Scope};
use deja_graph::{GraphError, GraphStore, SynthesisClaim};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;
use tracing::Instrument;

/// Kept free at the end of the deadline when waiting for a strategy, for the rest of the
/// answer.
const WAIT_MARGIN: Duration = Duration::from_millis(150);
const POLL_EVERY: Duration = Duration::from_millis(50);
/// Kept free at the end of the deadline by the whole strategy step, so that the episodes
/// already found are always returned in time.
const STEP_MARGIN: Duration = Duration::from_millis(50);

#[derive(Debug, Default)]
pub(crate) struct StrategyAnswer {
    pub markdown: Option<String>,
    pub notice: Option<String>,
}

impl SearchService {
    pub(crate) async fn strategy_for(
        &self,
        scope: &Scope,
        ranked: &[(ScoreBreakdown, Episode)],
        deadline: Instant,
    ) -> StrategyAnswer {
        let hits: Vec<QualifyingHit<'_>> = ranked
            .iter()
            .map(|(_, e)| QualifyingHit {
                issue_type: &e.issue_type,
                components: &e.components,
            })
            .collect();
        let Some((issue_type, component)) = qualifying_pair(&hits) else {
            return StrategyAnswer::default();
        };
        let key = StrategyKey {
            org: scope.org.clone(),
            team: scope
                .team
                .clone()
                .unwrap_or_else(|| ORG_WIDE_TEAM.to_owned()),
            issue_type,
            component,
        };
        // The step's own limit, inside the search deadline: the episodes are already found,
        // and a slow strategy must never turn them into a deadline error.
        let settings = &self.inner.settings;
        let limit = Duration::from_millis(
            settings
                .strategy_timeout_ms
                .saturating_add(settings.strategy_wait_ms),
        )
        .min(
            deadline
                .saturating_duration_since(Instant::now())
                .saturating_sub(STEP_MARGIN),
        );
        // In a task of its own: past the limit the search answers, while the lookup may still
        // finish in the background, so a missing or stale strategy is still requested — until
        // the search's deadline, where its reads stop (under a load that keeps it waiting for
        // the store it would only add to that load). A synthesis job it claimed is published
        // whatever happens to it (`spawn_enqueue`).
        let service = self.clone();
        let lookup = tokio::spawn(
            async move {
                match tokio::time::timeout_at(deadline.into(), service.lookup(&key, deadline)).await
                {
                    Ok(answer) => answer,
                    Err(_) => {
                        tracing::debug!("strategy lookup stopped at the search deadline");
                        Ok(StrategyAnswer::default())
                    }
                }
            }
            .in_current_span(),
        );
        // No time at all (the search deadline is spent, or `strategy_timeout_ms` and
        // `strategy_wait_ms` are 0) leaves the step out outright: a timer of zero still lets a
        // lookup that answers before the timer's first tick decide, which is a race.
        let finished = if limit.is_zero() {
            None
        } else {
            tokio::time::timeout(limit, lookup).await.ok()
        };
        match finished {
            Some(Ok(Ok(answer))) => answer,
            Some(Ok(Err(error))) => {
                tracing::warn!(error = %deja_domain::error_chain(&error),
                    "strategy lookup failed; answering without a strategy");
                StrategyAnswer::default()
            }
            Some(Err(error)) => {
                tracing::error!(%error, "strategy lookup crashed; answering without a strategy");
                StrategyAnswer::default()
            }
            None => {
                m::strategy_timeout();
                tracing::warn!(
                    limit_ms = limit.as_millis() as u64,
                    "strategy step timed out; answering without a strategy"
                );
                StrategyAnswer {
                    markdown: None,
                    notice: Some(
                        "the strategy step ran out of time and was left out; \
                         search again to get it"
                            .to_owned(),
                    ),
                }
            }
        }
    }

    async fn lookup(
        &self,
        key: &StrategyKey,
        deadline: Instant,
    ) -> Result<StrategyAnswer, GraphError> {
        let store = &self.inner.store;
        // Both reads at once: the stored strategy does not depend on the sources, and a
        // qualifying search nearly always has the two sources that make it needed.
        let (sources, stored) = tokio::join!(
            store.strategy_sources(key, MAX_STRATEGY_SOURCES),
            store.strategy_and_failure(key)
        );
        let sources = sources?;
        if sources.len() < 2 {
            return Ok(StrategyAnswer::default());
        }
        let stamps: Vec<_> = sources
            .iter()
            .map(|e| (e.id.clone(), e.updated_at))
            .collect();
        let fingerprint = source_fingerprint(&stamps);
        let (stored, failed) = stored?;
        if let Some(current) = stored.as_ref().filter(|s| s.is_current(&fingerprint)) {
            m::strategy_cache(true);
            return Ok(StrategyAnswer {
                markdown: Some(current.markdown.clone()),
                notice: None,
            });
        }
        m::strategy_cache(false);
        let cooldown = Duration::from_secs(self.inner.settings.strategy_failure_cooldown_secs);
        // A source set whose synthesis failed recently is not being synthesized (the claim
        // below refuses it): saying it is would send the agent back for a strategy that will
        // not come.
        let cooling_down = failed
            .as_ref()
            .is_some_and(|f| f.cools_down(&fingerprint, cooldown, chrono::Utc::now()));
        let enqueued = self.inner.jobs.clone().map(|jobs| {
            spawn_enqueue(
                store.clone(),
                jobs,
                key.clone(),
                fingerprint.clone(),
                cooldown,
            )
        });
        let budget = Duration::from_millis(self.inner.settings.strategy_wait_ms).min(
            deadline
                .saturating_duration_since(Instant::now())
                .saturating_sub(WAIT_MARGIN),
        );
        if let (Some(task), false, false) = (enqueued, budget.is_zero(), cooling_down) {
            if let Some(fresh) = wait_for_current(store, key, &fingerprint, task, budget).await {
                return Ok(StrategyAnswer {
                    markdown: Some(fresh),
                    notice: None,
                });
            }
        }
        Ok(not_current_answer(key, stored, cooling_down))
    }
}

/// The answer of a search whose strategy is missing or older than its sources: the stored
/// one if any (its leads remain useful) — unless a person has since deleted or marked wrong
/// a source of its synthesized text —, and a notice of what happens next.
fn not_current_answer(
    key: &StrategyKey,
    stored: Option<deja_graph::StoredStrategy>,
    cooling_down: bool,
) -> StrategyAnswer {
    let stored = stored.filter(|s| !s.made_from_corrected_sources());
    let what = format!(
        "`{}` on {} `{}`",
        key.issue_type, key.component.kind, key.component.name
    );
    let retried = "it is asked for again once the cool-down ends or its episodes change";
    let (markdown, notice) = match (stored, cooling_down) {
        (Some(stale), false) => (
            Some(stale.markdown),
            format!(
                "the strategy for {what} predates some of its episodes and is being \
                 refreshed; search again later for the new version"
            ),
        ),
        (Some(stale), true) => (
            Some(stale.markdown),
            format!(
                "the strategy for {what} predates some of its episodes; synthesizing its new \
                 version failed recently, and {retried}"
            ),
        ),
        (None, false) => (
            None,
            format!("a strategy for {what} is being synthesized; search again later to see it"),
        ),
        (None, true) => (
            None,
            format!("no strategy for {what}: synthesizing one failed recently, and {retried}"),
        ),
    };
    StrategyAnswer {
        markdown,
        notice: Some(notice),
    }
}

/// Claims the synthesis of (key, fingerprint) and, if this search won, publishes the job.
/// Runs in its own task: the search's deadline must not cut between claim and publish.
fn spawn_enqueue(
    store: GraphStore,
    jobs: Arc<SynthesisQueue>,
    key: StrategyKey,
    fingerprint: String,
    failure_cooldown: Duration,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        match store
            .claim_synthesis(&key, &fingerprint, jobs.claim_lease(), failure_cooldown)
            .await
        {
            Ok(SynthesisClaim::Won) => {
                let job = SynthesisJob {
                    key: key.clone(),
                    fingerprint,
                };
                match jobs.publish(&job).await {
                    Ok(()) => {
                        m::synthesis_job("published");
                        tracing::info!(org = %key.org, team = %key.team,
                            issue_type = %key.issue_type, component = %key.component.name,
                            "synthesis job published");
                    }
                    Err(error) => {
                        m::synthesis_job("failed");
                        tracing::warn!(error = %deja_domain::error_chain(&error),
                            "could not publish a synthesis job; releasing the claim");
                        // Without its job the claim would block refreshes until the lease
                        // ends; released, the next qualifying search tries again.
                        if let Err(error) = store
                            .release_synthesis_claim(&key, &[&job.fingerprint])
                            .await
                        {
                            tracing::warn!(%error, "could not release the synthesis claim");
                        }
                    }
                }
            }
            Ok(SynthesisClaim::Held) => m::synthesis_job("deduplicated"),
            Ok(SynthesisClaim::CoolingDown) => {
                m::synthesis_job("cooling_down");
                tracing::debug!(org = %key.org, team = %key.team,
                    issue_type = %key.issue_type, component = %key.component.name,
                    cooldown_secs = failure_cooldown.as_secs(),
                    "the synthesis of these sources failed recently; not asked for again \
                     until the cool-down ends or the sources change");
            }
            Err(error) => {
                m::synthesis_job("failed");
                tracing::warn!(error = %deja_domain::error_chain(&error),
                    "could not claim a synthesis job");
            }
        }
    })
}

/// Waits up to `budget` for the strategy of `key` to become current: first for the enqueue
/// task, then polling the store. `None` when it did not arrive in time.
async fn wait_for_current(
    store: &GraphStore,
    key: &StrategyKey,
    fingerprint: &str,
    enqueue: JoinHandle<()>,
    budget: Duration,
) -> Option<String> {
    let until = tokio::time::Instant::now() + budget;
    // Dropping the handle on timeout detaches the task; it still finishes.
    let _ = tokio::time::timeout_at(until, enqueue).await;
    loop {
        if let Ok(Some(stored)) = store.get_strategy(key).await {
            if stored.is_current(fingerprint) {
                return Some(stored.markdown);
            }
        }
        if tokio::time::Instant::now() + POLL_EVERY >= until {
            return None;
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use deja_domain::Component;
    use deja_graph::StoredStrategy;

    fn stored(key: &StrategyKey) -> StoredStrategy {
        StoredStrategy {
            key: key.clone(),
            markdown: "## Steps\n1. check the heap".to_owned(),
            playbook_json: "{}".to_owned(),
            fingerprint: "old".to_owned(),
            model: "m".to_owned(),
            generated_at: None,
            version: 1,
            source_ids: vec!["a".to_owned(), "b".to_owned()],
            edited_by: None,
            edited_at: None,
            reviewed_by: None,
            reviewed_at: None,
            proposed_markdown: None,
            proposed_fingerprint: None,
            proposed_model: None,
            proposed_at: None,
            proposed_source_ids: Vec::new(),
            changed_source_ids: Vec::new(),
            corrected_source_ids: Vec::new(),
        }
    }

    /// A synthesized text made from an episode a person deleted or marked wrong is not
    /// served meanwhile; a person's own edit is.
    #[test]
    fn a_strategy_made_from_a_corrected_source_is_not_served_unless_a_person_wrote_it() {
        let key = StrategyKey {
            org: "acme".to_owned(),
            team: "checkout".to_owned(),
            issue_type: "oom".to_owned(),
            component: Component::new("service", "cart-api"),
        };
        let marked_wrong = StoredStrategy {
            corrected_source_ids: vec!["a".to_owned()],
            ..stored(&key)
        };
        let deleted = StoredStrategy {
            fingerprint: "stale:source-deleted".to_owned(),
            ..stored(&key)
        };
        for corrected in [marked_wrong.clone(), deleted] {
            let answer = not_current_answer(&key, Some(corrected), false);
            assert_eq!(answer.markdown, None);
            assert!(answer.notice.unwrap().contains("is being synthesized"));
        }
        let edited = StoredStrategy {
            edited_by: Some("ana".to_owned()),
            ..marked_wrong
        };
        let answer = not_current_answer(&key, Some(edited), false);
        assert_eq!(
            answer.markdown.as_deref(),
            Some("## Steps\n1. check the heap")
        );
        assert!(answer.notice.unwrap().contains("is being refreshed"));
    }

    /// Every notice of a strategy that is not current is one the skill file documents, and
    /// a failed synthesis is never announced as one on its way.
    #[test]
    fn a_missing_or_stale_strategy_says_what_happens_next_in_a_documented_notice() {
        let skill: serde_json::Value =
            serde_json::from_str(include_str!("../../../docs/agent/memory-search.skill.json"))
                .unwrap();
        let kinds: Vec<&str> = skill["output_schema"]["properties"]["result"]["properties"]
            ["notice"]["x-notice-kinds"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|k| k["contains"].as_str())
            .collect();
        let key = StrategyKey {
            org: "acme".to_owned(),
            team: "checkout".to_owned(),
            issue_type: "oom".to_owned(),
            component: Component::new("service", "cart-api"),
        };
        for (has_stored, cooling_down) in
            [(false, false), (true, false), (false, true), (true, true)]
        {
            let answer = not_current_answer(&key, has_stored.then(|| stored(&key)), cooling_down);
            assert_eq!(answer.markdown.is_some(), has_stored);
            let notice = answer.notice.unwrap();
            let matched: Vec<&&str> = kinds.iter().filter(|k| notice.contains(**k)).collect();
            assert!(!matched.is_empty(), "no documented kind matches `{notice}`");
            assert!(notice.contains("`oom` on service `cart-api`"), "{notice}");
            if cooling_down {
                assert_eq!(matched, vec![&"failed recently"], "{notice}");
            } else {
                assert!(!notice.contains("failed"), "{notice}");
            }
        }
    }
}
