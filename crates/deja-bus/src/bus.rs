//! The connection, the confirmed publisher and the consumer streams.
//!
//! A `Bus` never reconnects by itself: when the connection drops, every operation and every
//! consumer stream reports a transient error, and the owner (the worker's run loop) drops the
//! `Bus` and calls [`Bus::connect_with_retry`] again. Keeping reconnection in one visible
//! place is simpler to reason about than lapin's implicit topology replay.

use crate::backoff::{backoff, Exponential, Jitter};
use crate::delivery::Delivery;
use crate::error::BusError;
use crate::topology::{turn_routing_key, Topology};
use backon::Retryable;
use deja_config::RabbitSettings;
use futures::Stream;
use lapin::options::{
    BasicConsumeOptions, BasicPublishOptions, BasicQosOptions, ConfirmSelectOptions,
};
use lapin::types::{FieldTable, ShortString};
use lapin::{BasicProperties, Channel, Confirmation, Connection, ConnectionProperties};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

/// A connect that hangs (a half-open TCP peer, a broker still booting) must not stall the
/// reconnect loop forever.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// A publish whose confirm does not come (a memory or disk alarm blocks publishing
/// connections until it clears; a broker that stopped answering) fails after this, as a
/// lost connection: an API publisher then releases its synthesis claim instead of holding it
/// for the claim's whole lease, and a worker's unsettled delivery is redelivered. A confirm
/// normally takes milliseconds.
const PUBLISH_CONFIRM_TIMEOUT: Duration = Duration::from_secs(15);
/// First reconnect delay; it doubles up to `reconnect_max_ms`.
const RECONNECT_BASE_MS: u64 = 100;

/// A connection to RabbitMQ with a publisher-confirm channel. Cheap to clone (an `Arc`).
#[derive(Clone)]
pub struct Bus {
    inner: Arc<Inner>,
}

struct Inner {
    connection: Connection,
    /// Replaced when the broker closes it (e.g. after a 404 on publish), so that one bad
    /// publish does not poison every later one.
    publisher: Mutex<Channel>,
    topology: Topology,
    reconnect_max_ms: u64,
    endpoint: String,
}

impl std::fmt::Debug for Bus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bus")
            .field("endpoint", &self.inner.endpoint)
            .field("connected", &self.is_connected())
            .finish()
    }
}

/// Routing and identity of a published turn event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishMeta {
    /// `turn.<org>.<team>`; see [`turn_routing_key`].
    pub routing_key: String,
    /// The event id; consumers deduplicate by it.
    pub message_id: Option<String>,
    pub correlation_id: Option<String>,
}

impl PublishMeta {
    pub fn turn(org: &str, team: &str) -> PublishMeta {
        PublishMeta {
            routing_key: turn_routing_key(org, team),
            message_id: None,
            correlation_id: None,
        }
    }

    pub fn with_message_id(mut self, id: impl Into<String>) -> PublishMeta {
        self.message_id = Some(id.into());
        self
    }

    pub fn with_correlation_id(mut self, id: impl Into<String>) -> PublishMeta {
        self.correlation_id = Some(id.into());
        self
    }
}

/// AMQP short strings (names, keys, ids) are limited to 255 bytes; lapin panics beyond that,
/// so every externally supplied one goes through here.
pub(crate) fn short(what: &'static str, text: &str) -> Result<ShortString, BusError> {
    ShortString::try_new(text).map_err(|_| BusError::TooLong {
        what,
        len: text.len(),
    })
}

/// `amqp://user:pass@host:port/vhost` → `amqp://host:port/vhost`, for error messages and logs.
fn redact(uri: &str) -> String {
    match (uri.find("://"), uri.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            format!("{}{}", &uri[..scheme_end + 3], &uri[at + 1..])
        }
        _ => uri.to_owned(),
    }
}

pub(crate) fn now_unix_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Bus {
    /// Connects with the connection name `deja-<pid>`.
    pub async fn connect(settings: &RabbitSettings) -> Result<Bus, BusError> {
        Bus::connect_named(settings, &format!("deja-{}", std::process::id())).await
    }

    /// Connects; `connection_name` is what the management UI shows (e.g. `deja-worker`).
    pub async fn connect_named(
        settings: &RabbitSettings,
        connection_name: &str,
    ) -> Result<Bus, BusError> {
        let endpoint = redact(settings.uri.expose());
        let connect_error = |source| BusError::Connect {
            endpoint: endpoint.clone(),
            source,
        };
        let properties =
            ConnectionProperties::default().with_connection_name(connection_name.into());
        let connection = tokio::time::timeout(
            CONNECT_TIMEOUT,
            Connection::connect(settings.uri.expose(), properties),
        )
        .await
        .map_err(|_| {
            connect_error(lapin::Error::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "connection attempt timed out",
            )))
        })?
        .map_err(connect_error)?;
        let publisher = confirm_channel(&connection).await?;
        tracing::debug!(endpoint = %endpoint, connection_name, "connected to rabbitmq");
        Ok(Bus {
            inner: Arc::new(Inner {
                connection,
                publisher: Mutex::new(publisher),
                topology: Topology::from_settings(settings),
                reconnect_max_ms: settings.reconnect_max_ms,
                endpoint,
            }),
        })
    }

    /// Connects, retrying transient failures with capped exponential backoff (up to
    /// `reconnect_max_ms`) until it succeeds, a permanent error occurs (bad credentials, bad
    /// URI), or `shutdown` completes, in which case it returns `Ok(None)`.
    pub async fn connect_with_retry(
        settings: &RabbitSettings,
        connection_name: &str,
        shutdown: impl Future<Output = ()>,
    ) -> Result<Option<Bus>, BusError> {
        let max_ms = settings.reconnect_max_ms.max(RECONNECT_BASE_MS);
        let failures = AtomicU32::new(0);
        let connect = (|| Bus::connect_named(settings, connection_name))
            .retry(Exponential::new(RECONNECT_BASE_MS, max_ms, Jitter::Equal))
            .when(BusError::is_transient)
            .notify(|error, delay| {
                let attempt = failures.fetch_add(1, Ordering::Relaxed) + 1;
                tracing::warn!(
                    attempt,
                    retry_in_ms = delay.as_millis() as u64,
                    error = %deja_domain::error_chain(error),
                    "rabbitmq unavailable; retrying"
                );
            });
        let bus = tokio::select! {
            () = shutdown => return Ok(None),
            result = connect => result?,
        };
        let attempt = failures.load(Ordering::Relaxed) + 1;
        if attempt > 1 {
            tracing::info!(attempt, endpoint = %bus.inner.endpoint, "reconnected to rabbitmq");
        }
        Ok(Some(bus))
    }

    pub fn topology(&self) -> &Topology {
        &self.inner.topology
    }

    /// The configured upper bound of reconnect delays, for callers that run their own loop.
    pub fn reconnect_max(&self) -> Duration {
        Duration::from_millis(self.inner.reconnect_max_ms)
    }

    pub fn is_connected(&self) -> bool {
        self.inner.connection.status().connected()
    }

    /// The retry schedule of the queue's retry levels (equal jitter), for retries in process.
    pub fn retry_policy(&self) -> Exponential {
        let t = &self.inner.topology;
        Exponential::new(t.retry_base_ms, t.retry_max_ms, Jitter::Equal)
    }

    /// A jittered delay (equal jitter) before retrying after failed attempt `attempt`.
    pub fn retry_delay(&self, attempt: u32) -> Duration {
        let t = &self.inner.topology;
        backoff(
            attempt,
            t.retry_base_ms,
            t.retry_max_ms,
            Jitter::Equal,
            rand::random(),
        )
    }

    /// Closes the connection politely; unsettled deliveries go back to their queues.
    pub async fn close(&self) -> Result<(), BusError> {
        self.inner
            .connection
            .close(200, "deja closing".into())
            .await
            .map_err(|e| BusError::amqp("connection.close", e))
    }

    pub(crate) async fn channel(&self) -> Result<Channel, BusError> {
        self.inner
            .connection
            .create_channel()
            .await
            .map_err(|e| BusError::amqp("channel.open", e))
    }

    /// The publisher channel, reopened if the broker closed it.
    async fn publisher(&self) -> Result<Channel, BusError> {
        let current = lock(&self.inner.publisher).clone();
        if current.status().connected() {
            return Ok(current);
        }
        let fresh = confirm_channel(&self.inner.connection).await?;
        let mut slot = lock(&self.inner.publisher);
        // Another task may have replaced it meanwhile; keep theirs if it is healthy.
        if slot.status().connected() {
            return Ok(slot.clone());
        }
        *slot = fresh.clone();
        Ok(fresh)
    }

    /// Publishes with `mandatory` and waits for the broker's confirm, for
    /// [`PUBLISH_CONFIRM_TIMEOUT`] at most. Errors on nack, on an unroutable message and on
    /// a confirm that does not come, so "Ok" means a queue has the message.
    pub(crate) async fn publish_confirmed(
        &self,
        exchange: &str,
        routing_key: &str,
        body: &[u8],
        properties: BasicProperties,
    ) -> Result<(), BusError> {
        let exchange_name = short("exchange name", exchange)?;
        let key = short("routing key", routing_key)?;
        let channel = self.publisher().await?;
        let op = || format!("basic.publish to {exchange:?} with key {routing_key:?}");
        let options = BasicPublishOptions {
            mandatory: true,
            ..BasicPublishOptions::default()
        };
        let publishing = async {
            channel
                .basic_publish(exchange_name, key, options, body, properties)
                .await?
                .await
        };
        let confirmation = tokio::time::timeout(PUBLISH_CONFIRM_TIMEOUT, publishing)
            .await
            .map_err(|_| {
                // Transient and the connection's end: the caller reconnects (or redelivers)
                // rather than wait on a broker that holds its publishers.
                BusError::amqp(
                    op(),
                    lapin::Error::from(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!(
                            "no publisher confirm within {} s (a resource alarm blocking \
                             publishers, or a broker that stopped answering)",
                            PUBLISH_CONFIRM_TIMEOUT.as_secs()
                        ),
                    )),
                )
            })?
            .map_err(|e| BusError::amqp(op(), e))?;
        match confirmation {
            Confirmation::Ack(None) => Ok(()),
            Confirmation::Ack(Some(returned)) => Err(BusError::Unroutable {
                exchange: exchange.to_owned(),
                routing_key: routing_key.to_owned(),
                reply: format!("{} {}", returned.reply_code, returned.reply_text),
            }),
            // `NotRequested` cannot happen on a confirm channel; treating it as a nack keeps
            // "Ok means the broker has it" true even if it did.
            Confirmation::Nack(_) | Confirmation::NotRequested => Err(BusError::Nacked {
                exchange: exchange.to_owned(),
                routing_key: routing_key.to_owned(),
            }),
        }
    }

    /// Publishes one turn event to the turn exchange and waits for the confirm. Persistent,
    /// `application/json`, message id = the event id when given.
    pub async fn publish_turn(
        &self,
        event_body: &[u8],
        meta: &PublishMeta,
    ) -> Result<(), BusError> {
        let mut properties = persistent_json();
        if let Some(id) = &meta.message_id {
            properties = properties.with_message_id(short("message id", id)?);
        }
        if let Some(id) = &meta.correlation_id {
            properties = properties.with_correlation_id(short("correlation id", id)?);
        }
        let exchange = self.inner.topology.turn_exchange.clone();
        self.publish_confirmed(&exchange, &meta.routing_key, event_body, properties)
            .await
    }

    /// Enqueues one synthesis job on `{queue}.synthesize` and waits for the confirm.
    pub async fn publish_synthesis_job(
        &self,
        body: &[u8],
        message_id: &str,
    ) -> Result<(), BusError> {
        let properties = persistent_json().with_message_id(short("message id", message_id)?);
        let queue = self.inner.topology.synthesis_queue.clone();
        // The default exchange routes by queue name.
        self.publish_confirmed("", &queue, body, properties).await
    }

    /// Starts a manual-ack consumer on its own channel with `prefetch` unacked messages at
    /// most. The stream ends after yielding one error (connection or channel lost) or when
    /// the broker cancels the consumer (queue deleted); either way, reconnect.
    ///
    /// Dropping the stream cancels the consumer but deliveries already handed out stay
    /// settleable: each keeps its channel open until it is acked, retried or dropped.
    pub async fn consume(
        &self,
        queue: &str,
        prefetch: u16,
        consumer_tag: &str,
    ) -> Result<Deliveries, BusError> {
        let queue_name = short("queue name", queue)?;
        let tag = short("consumer tag", consumer_tag)?;
        let channel = self.channel().await?;
        channel
            .basic_qos(prefetch, BasicQosOptions::default())
            .await
            .map_err(|e| BusError::amqp("basic.qos", e))?;
        let consumer = channel
            .basic_consume(
                queue_name,
                tag,
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(|e| BusError::amqp(format!("basic.consume on {queue:?}"), e))?;
        Ok(Deliveries {
            consumer,
            channel,
            queue: queue.to_owned(),
            topology: self.topology().clone(),
            done: false,
        })
    }
}

/// The stream returned by [`Bus::consume`].
pub struct Deliveries {
    consumer: lapin::Consumer,
    channel: Channel,
    queue: String,
    topology: Topology,
    done: bool,
}

impl std::fmt::Debug for Deliveries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deliveries")
            .field("queue", &self.queue)
            .field("done", &self.done)
            .finish()
    }
}

impl Stream for Deliveries {
    type Item = Result<Delivery, BusError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        match Pin::new(&mut self.consumer).poll_next(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Ok(delivery))) => Poll::Ready(Some(Ok(Delivery::new(
                delivery,
                self.channel.clone(),
                self.queue.clone(),
                &self.topology,
            )))),
            Poll::Ready(Some(Err(error))) => {
                // After an error lapin's consumer is finished; ending here spares callers
                // from polling a dead stream.
                self.done = true;
                let op = format!("consuming from {:?}", self.queue);
                Poll::Ready(Some(Err(BusError::amqp(op, error))))
            }
            Poll::Ready(None) => {
                self.done = true;
                Poll::Ready(None)
            }
        }
    }
}

async fn confirm_channel(connection: &Connection) -> Result<Channel, BusError> {
    let channel = connection
        .create_channel()
        .await
        .map_err(|e| BusError::amqp("channel.open", e))?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .map_err(|e| BusError::amqp("confirm.select", e))?;
    Ok(channel)
}

fn persistent_json() -> BasicProperties {
    BasicProperties::default()
        .with_delivery_mode(2)
        .with_content_type("application/json".into())
        .with_timestamp(now_unix_secs())
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The guarded value is a channel handle; a panic elsewhere cannot leave it half-updated.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_never_reach_the_endpoint_text() {
        assert_eq!(
            redact("amqp://guest:s3cret@127.0.0.1:5672/%2f"),
            "amqp://127.0.0.1:5672/%2f"
        );
        assert_eq!(redact("amqp://host/vh"), "amqp://host/vh");
    }

    #[test]
    fn names_over_255_bytes_are_an_error_not_a_panic() {
        let err = short("queue name", &"q".repeat(256)).unwrap_err();
        assert!(matches!(err, BusError::TooLong { len: 256, .. }));
        assert!(short("queue name", "deja.extract").is_ok());
    }
}
