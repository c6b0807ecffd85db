//! Outage-aware consumption: when Neo4j or the LLM endpoint is unreachable, the failure is
//! not the message's fault, so it must not cost the message an attempt.
//!
//! A delivery that hits an outage reports it here ([`Readiness::report_down`]) and waits
//! ([`Readiness::wait_ready`]) with its message unacked; the run loop stops taking new
//! deliveries while anything is down. One prober task per dependency checks it with capped
//! exponential backoff (`worker.probe_max_ms`) and clears the pause when it answers; then the
//! waiting deliveries are processed again with the same attempt number. An outage of any
//! length therefore costs no attempts and produces no dead letters.
//!
//! The state is what `/readyz` answers and what the `deja_worker_paused{reason}` gauge shows.

use crate::metrics as m;
use backon::BackoffBuilder;
use deja_bus::{Exponential, Jitter};
use futures::future::BoxFuture;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// First probe delay; it doubles up to `worker.probe_max_ms`.
const PROBE_BASE_MS: u64 = 250;

/// A dependency whose outage pauses consumption.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dependency {
    Neo4j,
    Llm,
}

impl Dependency {
    pub fn as_str(self) -> &'static str {
        match self {
            Dependency::Neo4j => "neo4j",
            Dependency::Llm => "llm",
        }
    }

    /// The reason recorded when an outage is, after all, blamed on the message.
    pub fn failure_reason(self) -> &'static str {
        match self {
            Dependency::Neo4j => "neo4j_failed",
            Dependency::Llm => "llm_failed",
        }
    }
}

/// Answers "is it back?" for one dependency; `Err` carries a one-line reason.
pub trait Probe: Send + Sync + 'static {
    fn probe(&self, dependency: Dependency) -> BoxFuture<'_, Result<(), String>>;
}

/// The production probes: `RETURN 1` on Neo4j, a tiny chat completion on the LLM endpoint.
pub struct ServiceProbe {
    pub store: deja_graph::GraphStore,
    pub llm: Arc<deja_llm::LlmClient>,
}

impl Probe for ServiceProbe {
    fn probe(&self, dependency: Dependency) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            match dependency {
                Dependency::Neo4j => self
                    .store
                    .ping()
                    .await
                    .map_err(|e| deja_domain::error_chain(&e)),
                Dependency::Llm => self
                    .llm
                    .probe()
                    .await
                    .map_err(|e| deja_domain::error_chain(&e)),
            }
        })
    }
}

/// Why the worker is not taking deliveries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pause {
    pub dependency: Dependency,
    /// The last error seen (the failed delivery's, then the last failed probe's).
    pub detail: String,
    pub since: Instant,
    pub failed_probes: u32,
}

#[derive(Default)]
struct State {
    down: BTreeMap<Dependency, Pause>,
    /// Whether the last outage of each dependency was confirmed by a failed probe. One that
    /// was not (the first probe succeeded) may have been the message's fault after all.
    last_confirmed: BTreeMap<Dependency, bool>,
    /// False while the worker has no RabbitMQ consumer (connecting, reconnecting).
    consuming: bool,
}

/// The worker's readiness: shared by the run loop, every delivery task and `/readyz`.
/// Cheap to clone.
#[derive(Clone)]
pub struct Readiness {
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<State>,
    /// Bumped on every change; waiters re-check the state.
    changed: watch::Sender<u64>,
    probe: Arc<dyn Probe>,
    probe_max_ms: u64,
}

impl Readiness {
    pub fn new(probe: Arc<dyn Probe>, probe_max: Duration) -> Readiness {
        let (changed, _) = watch::channel(0);
        Readiness {
            inner: Arc::new(Inner {
                state: Mutex::new(State::default()),
                changed,
                probe,
                probe_max_ms: u64::try_from(probe_max.as_millis())
                    .unwrap_or(u64::MAX)
                    .max(PROBE_BASE_MS),
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Plain data; a panic elsewhere cannot leave it half-updated.
        self.inner
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn notify(&self) {
        self.inner.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Records that `dependency` failed for infrastructure reasons. The first report pauses
    /// consumption and starts a prober; later ones only refresh the detail.
    pub fn report_down(&self, dependency: Dependency, detail: &str) {
        {
            let mut state = self.state();
            if let Some(pause) = state.down.get_mut(&dependency) {
                pause.detail = detail.to_owned();
                return;
            }
            state.down.insert(
                dependency,
                Pause {
                    dependency,
                    detail: detail.to_owned(),
                    since: Instant::now(),
                    failed_probes: 0,
                },
            );
        }
        m::paused(dependency.as_str(), true);
        tracing::warn!(
            dependency = dependency.as_str(),
            %detail,
            "dependency unavailable; pausing consumption (no attempts are spent)"
        );
        self.notify();
        let this = self.clone();
        tokio::spawn(async move { this.probe_until_healthy(dependency).await });
    }

    async fn probe_until_healthy(&self, dependency: Dependency) {
        // Unbounded: the pause lasts as long as the outage.
        let delays =
            Exponential::new(PROBE_BASE_MS, self.inner.probe_max_ms, Jitter::Equal).build();
        for (attempt, delay) in (1u32..).zip(delays) {
            tokio::time::sleep(delay).await;
            match self.inner.probe.probe(dependency).await {
                Ok(()) => break,
                Err(detail) => {
                    tracing::debug!(dependency = dependency.as_str(), %detail, attempt, "still unavailable");
                    if let Some(pause) = self.state().down.get_mut(&dependency) {
                        pause.failed_probes += 1;
                        pause.detail = detail;
                    }
                }
            }
        }
        let ended = {
            let mut state = self.state();
            let ended = state.down.remove(&dependency);
            if let Some(pause) = &ended {
                state
                    .last_confirmed
                    .insert(dependency, pause.failed_probes > 0);
            }
            ended
        };
        m::paused(dependency.as_str(), false);
        if let Some(pause) = ended {
            tracing::info!(
                dependency = dependency.as_str(),
                paused_secs = pause.since.elapsed().as_secs(),
                failed_probes = pause.failed_probes,
                "dependency answers again; resuming consumption"
            );
        }
        self.notify();
    }

    /// Returns once nothing is down (at once when nothing is).
    pub async fn wait_ready(&self) {
        let mut changes = self.inner.changed.subscribe();
        loop {
            if self.state().down.is_empty() {
                return;
            }
            if changes.changed().await.is_err() {
                return;
            }
        }
    }

    /// Whether the last outage of `dependency` was confirmed by at least one failed probe.
    pub fn last_outage_confirmed(&self, dependency: Dependency) -> bool {
        self.state()
            .last_confirmed
            .get(&dependency)
            .copied()
            .unwrap_or(false)
    }

    /// The current pauses, by dependency.
    pub fn pauses(&self) -> Vec<Pause> {
        self.state().down.values().cloned().collect()
    }

    pub fn is_paused(&self) -> bool {
        !self.state().down.is_empty()
    }

    /// Set by the run loop: true while a RabbitMQ consumer is active.
    pub(crate) fn set_consuming(&self, consuming: bool) {
        self.state().consuming = consuming;
        m::paused("rabbitmq", !consuming);
    }

    /// `None` when ready; otherwise the body `/readyz` answers with its 503, e.g.
    /// `{"paused": "neo4j down", "detail": {"neo4j": "..."}, "paused_secs": 12}`.
    pub fn not_ready(&self) -> Option<serde_json::Value> {
        let state = self.state();
        if state.down.is_empty() && state.consuming {
            return None;
        }
        let mut reasons: Vec<String> = state
            .down
            .keys()
            .map(|d| format!("{} down", d.as_str()))
            .collect();
        if !state.consuming {
            reasons.push("rabbitmq not consuming".to_owned());
        }
        let detail: serde_json::Map<String, serde_json::Value> = state
            .down
            .values()
            .map(|p| (p.dependency.as_str().to_owned(), p.detail.clone().into()))
            .collect();
        let paused_secs = state
            .down
            .values()
            .map(|p| p.since.elapsed().as_secs())
            .max()
            .unwrap_or(0);
        Some(serde_json::json!({
            "paused": reasons.join(", "),
            "detail": detail,
            "paused_secs": paused_secs,
        }))
    }
}

/// The worker's HTTP status routes: `/metrics` and `/readyz` (200 `{"ready": true}` or 503
/// with the pause reason).
pub fn status_router(readiness: Readiness) -> axum::Router {
    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    let readyz = move || {
        let readiness = readiness.clone();
        async move {
            match readiness.not_ready() {
                None => (
                    StatusCode::OK,
                    axum::Json(serde_json::json!({"ready": true})),
                )
                    .into_response(),
                Some(body) => (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response(),
            }
        }
    };
    deja_telemetry::metrics_router().route("/readyz", axum::routing::get(readyz))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Fails `failures` times, then answers.
    struct Flaky {
        failures: u32,
        calls: AtomicU32,
    }

    impl Probe for Flaky {
        fn probe(&self, _: Dependency) -> BoxFuture<'_, Result<(), String>> {
            Box::pin(async move {
                let call = self.calls.fetch_add(1, Ordering::SeqCst);
                if call < self.failures {
                    Err("connection refused".to_owned())
                } else {
                    Ok(())
                }
            })
        }
    }

    fn readiness(failures: u32) -> (Readiness, Arc<Flaky>) {
        let probe = Arc::new(Flaky {
            failures,
            calls: AtomicU32::new(0),
        });
        let readiness = Readiness::new(probe.clone(), Duration::from_millis(300));
        readiness.set_consuming(true);
        (readiness, probe)
    }

    #[tokio::test]
    async fn an_outage_pauses_until_a_probe_succeeds_and_is_then_marked_confirmed() {
        let (readiness, probe) = readiness(2);
        assert!(readiness.not_ready().is_none());
        readiness.report_down(Dependency::Neo4j, "connection refused");
        readiness.report_down(Dependency::Neo4j, "again");
        let body = readiness.not_ready().expect("paused");
        assert_eq!(body["paused"], "neo4j down");
        assert!(readiness.is_paused());
        readiness.wait_ready().await;
        assert!(!readiness.is_paused());
        assert_eq!(probe.calls.load(Ordering::SeqCst), 3, "one prober only");
        assert!(readiness.last_outage_confirmed(Dependency::Neo4j));
        assert!(readiness.not_ready().is_none());
    }

    #[tokio::test]
    async fn an_outage_whose_first_probe_succeeds_is_not_confirmed() {
        let (readiness, _) = readiness(0);
        readiness.report_down(Dependency::Llm, "http 503");
        readiness.wait_ready().await;
        assert!(!readiness.last_outage_confirmed(Dependency::Llm));
    }

    #[tokio::test]
    async fn a_worker_without_a_consumer_is_not_ready() {
        let (readiness, _) = readiness(0);
        readiness.set_consuming(false);
        let body = readiness.not_ready().expect("not ready");
        assert_eq!(body["paused"], "rabbitmq not consuming");
    }
}
