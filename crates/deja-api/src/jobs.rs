//! Publishing synthesis jobs. The RabbitMQ connection is opened on first use and reopened
//! after a failure, so the API starts and searches while RabbitMQ is down; only strategy
//! refreshes wait for it.
//!
//! A caller with a live connection never waits for anything: the connection is read from a
//! slot that no connect holds. Only callers without one wait for the one connect in flight
//! (each connect bounded by deja-bus's connect timeout, a publish by its confirm timeout);
//! the hub's dead-letter count waits [`DEPTH_WAIT`] at most and shows no count past it.

use deja_bus::{Bus, BusError};
use deja_config::{RabbitSettings, Settings};
use deja_domain::strategy::SynthesisJob;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// How long the hub's dead-letter count waits for RabbitMQ (a connect included): a page a
/// person opens must not stall on a broker that is down or slow to accept.
const DEPTH_WAIT: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error("could not encode the synthesis job")]
    Encode(#[from] serde_json::Error),
    #[error(transparent)]
    Bus(#[from] BusError),
    #[error("rabbitmq did not answer within {} ms", .0.as_millis())]
    TimedOut(Duration),
}

/// Where qualifying searches enqueue synthesis jobs (`{rabbitmq.name_prefix}.synthesize`).
pub struct SynthesisQueue {
    settings: RabbitSettings,
    claim_lease: Duration,
    /// The current connection, if any: read and replaced without waiting for a connect.
    bus: Mutex<Option<Bus>>,
    /// Held by the one caller opening a connection, so that callers arriving meanwhile use
    /// it rather than open one each.
    connecting: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for SynthesisQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SynthesisQueue")
            .field("queue", &self.settings.synthesis_queue())
            .field("claim_lease", &self.claim_lease)
            .finish()
    }
}

impl SynthesisQueue {
    /// Connects lazily, on the first job. The whole settings: a job's claim lasts as long as
    /// the synthesizer may take over it ([`synthesis_claim_lease`]).
    pub fn new(settings: &Settings) -> Self {
        SynthesisQueue {
            settings: settings.rabbitmq.clone(),
            claim_lease: synthesis_claim_lease(settings),
            bus: Mutex::new(None),
            connecting: tokio::sync::Mutex::new(()),
        }
    }

    /// How long the claim of a published job stands before another search may take it over.
    pub fn claim_lease(&self) -> Duration {
        self.claim_lease
    }

    /// Publishes one job and waits for the broker's confirm. The message id derives from the
    /// key and fingerprint ([`SynthesisJob::message_id`]).
    pub async fn publish(&self, job: &SynthesisJob) -> Result<(), JobError> {
        let body = serde_json::to_vec(job)?;
        let bus = self.connected().await?;
        let result = bus.publish_synthesis_job(&body, &job.message_id()).await;
        if result.as_ref().is_err_and(BusError::is_connection_lost) {
            // The next job reconnects instead of failing on the dead connection.
            *self.slot() = None;
        }
        Ok(result?)
    }

    /// Publishes a conversation's stored turn event again, to the turn exchange: the worker
    /// re-extracts it exactly as it does every turn (a seen event is merged again only while
    /// its extraction is failed). What the review API's retry does.
    pub async fn republish_turn(
        &self,
        org: &str,
        team: &str,
        correlation_id: &str,
        event_json: &str,
    ) -> Result<(), JobError> {
        let bus = self.connected().await?;
        let meta = deja_bus::PublishMeta::turn(org, team).with_correlation_id(correlation_id);
        Ok(bus.publish_turn(event_json.as_bytes(), &meta).await?)
    }

    /// Messages waiting in the dead-letter queue (`{rabbitmq.name_prefix}.dlq`): turns that could
    /// not be processed at all. Shown by the Memory hub; within [`DEPTH_WAIT`], connect
    /// included, else [`JobError::TimedOut`].
    pub async fn dead_letter_depth(&self) -> Result<u32, JobError> {
        let depth = async {
            let bus = self.connected().await?;
            Ok::<_, JobError>(bus.queue_depth(&self.settings.dead_letter_queue()).await?)
        };
        tokio::time::timeout(DEPTH_WAIT, depth)
            .await
            .map_err(|_| JobError::TimedOut(DEPTH_WAIT))?
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Bus>> {
        // Holds a handle, replaced whole: a panic elsewhere cannot leave it half written.
        self.bus.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The live connection, if there is one.
    fn current(&self) -> Option<Bus> {
        self.slot().clone().filter(Bus::is_connected)
    }

    async fn connected(&self) -> Result<Bus, BusError> {
        if let Some(bus) = self.current() {
            return Ok(bus);
        }
        let _connecting = self.connecting.lock().await;
        // Whoever held it before may have connected meanwhile.
        if let Some(bus) = self.current() {
            return Ok(bus);
        }
        let bus = Bus::connect_named(&self.settings, "deja-api").await?;
        // Idempotent; makes sure the synthesis queue exists even when the API starts before
        // any worker, so a published job is never unroutable.
        bus.declare_topology().await?;
        *self.slot() = Some(bus.clone());
        Ok(bus)
    }
}

/// LLM calls one synthesis attempt may make: the request and its one repair (deja-llm).
const LLM_CALLS_PER_ATTEMPT: u64 = 2;
/// Beyond the synthesizer's longest run: its Neo4j reads and write, and the job's wait for the
/// synthesizer to take it.
const CLAIM_LEASE_MARGIN: Duration = Duration::from_secs(60);

/// How long a synthesis claim stands: the longest the worker's synthesizer may spend on its
/// job with these settings (`deja_worker::Synthesizer::handle`) — `rabbitmq.max_attempts`
/// attempts of up to [`LLM_CALLS_PER_ATTEMPT`] calls bounded by `llm.timeout_secs` each, the
/// backoff between attempts (`rabbitmq.retry_max_ms` at most each) — plus a margin. A
/// shorter lease lapses while the job still runs, and the next qualifying search publishes
/// a duplicate; a claim whose job was lost (a worker died) is retaken after it.
pub fn synthesis_claim_lease(settings: &Settings) -> Duration {
    let attempts = u64::from(settings.rabbitmq.max_attempts.max(1));
    let calls = Duration::from_secs(
        attempts
            .saturating_mul(LLM_CALLS_PER_ATTEMPT)
            .saturating_mul(settings.llm.timeout_secs),
    );
    let backoff =
        Duration::from_millis((attempts - 1).saturating_mul(settings.rabbitmq.retry_max_ms));
    calls
        .saturating_add(backoff)
        .saturating_add(CLAIM_LEASE_MARGIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_claim_lease_outlasts_every_attempt_of_the_job_and_its_backoff() {
        let settings = Settings::defaults();
        // 5 attempts × 2 calls × 120 s, 4 backoffs of at most 60 s, 60 s of margin.
        assert_eq!(
            synthesis_claim_lease(&settings),
            Duration::from_secs(1200 + 240 + 60)
        );
        let mut slow = Settings::defaults();
        slow.llm.timeout_secs = 600;
        slow.rabbitmq.max_attempts = 8;
        assert_eq!(
            synthesis_claim_lease(&slow),
            Duration::from_secs(8 * 2 * 600 + 7 * 60 + 60)
        );
        let mut once = Settings::defaults();
        once.rabbitmq.max_attempts = 1;
        assert_eq!(
            synthesis_claim_lease(&once),
            Duration::from_secs(2 * 120 + 60)
        );
    }
}
