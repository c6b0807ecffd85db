//! Publishing synthesis jobs. The RabbitMQ connection is opened on first use and reopened
//! after a failure, so the API starts and searches while RabbitMQ is down; only strategy
//! refreshes wait for it.

use deja_bus::{Bus, BusError};
use deja_config::RabbitSettings;
use deja_domain::strategy::SynthesisJob;
use tokio::sync::Mutex;

#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error("could not encode the synthesis job")]
    Encode(#[from] serde_json::Error),
    #[error(transparent)]
    Bus(#[from] BusError),
}

/// Where qualifying searches enqueue synthesis jobs (`{rabbitmq.name_prefix}.synthesize`).
pub struct SynthesisQueue {
    settings: RabbitSettings,
    bus: Mutex<Option<Bus>>,
}

impl std::fmt::Debug for SynthesisQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SynthesisQueue")
            .field("queue", &self.settings.synthesis_queue())
            .finish()
    }
}

impl SynthesisQueue {
    /// Connects lazily, on the first job.
    pub fn new(settings: &RabbitSettings) -> Self {
        SynthesisQueue {
            settings: settings.clone(),
            bus: Mutex::new(None),
        }
    }

    /// Publishes one job and waits for the broker's confirm. The message id derives from the
    /// key and fingerprint ([`SynthesisJob::message_id`]).
    pub async fn publish(&self, job: &SynthesisJob) -> Result<(), JobError> {
        let body = serde_json::to_vec(job)?;
        let bus = self.connected().await?;
        let result = bus.publish_synthesis_job(&body, &job.message_id()).await;
        if result.as_ref().is_err_and(BusError::is_connection_lost) {
            // The next job reconnects instead of failing on the dead connection.
            *self.bus.lock().await = None;
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
    /// not be processed at all. Shown by the Memory hub.
    pub async fn dead_letter_depth(&self) -> Result<u32, JobError> {
        let bus = self.connected().await?;
        Ok(bus.queue_depth(&self.settings.dead_letter_queue()).await?)
    }

    async fn connected(&self) -> Result<Bus, BusError> {
        let mut slot = self.bus.lock().await;
        if let Some(bus) = slot.as_ref().filter(|b| b.is_connected()) {
            return Ok(bus.clone());
        }
        let bus = Bus::connect_named(&self.settings, "deja-api").await?;
        // Idempotent; makes sure the synthesis queue exists even when the API starts before
        // any worker, so a published job is never unroutable.
        bus.declare_topology().await?;
        *slot = Some(bus.clone());
        Ok(bus)
    }
}
