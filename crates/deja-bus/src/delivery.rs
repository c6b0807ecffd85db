//! One received message and the ways to settle it: ack, requeue, retry later, dead-letter.
//!
//! Delivery guarantee: at least once. `retry` and `dead_letter` publish the copy (and wait
//! for the broker's confirm) *before* acking the original, so a crash in between leaves both
//! the copy and the original, never neither. The worker is idempotent by event id, so the
//! duplicate is harmless.

use crate::backoff::level_for_delay;
use crate::bus::Bus;
use crate::error::BusError;
use crate::topology::Topology;
use lapin::options::{BasicAckOptions, BasicNackOptions};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel};
use std::time::Duration;

/// Header: which attempt this delivery is (1 for the first delivery).
pub const HEADER_ATTEMPT: &str = "x-deja-attempt";
/// Header: the routing key the message was first published with.
pub const HEADER_ORIGINAL_ROUTING_KEY: &str = "x-deja-original-routing-key";
/// Dead-letter headers.
pub const HEADER_REASON: &str = "x-deja-reason";
pub const HEADER_DETAIL: &str = "x-deja-detail";
pub const HEADER_ATTEMPTS: &str = "x-deja-attempts";
pub const HEADER_DEAD_LETTERED_AT: &str = "x-deja-dead-lettered-at";
pub const HEADER_SOURCE_QUEUE: &str = "x-deja-source-queue";
/// `x-deja-detail` is cut to this many bytes: headers travel with every frame.
pub const MAX_DETAIL_BYTES: usize = 1024;

/// A message taken from a queue, with manual acknowledgement.
///
/// Settle it exactly once. If it is dropped unsettled it is requeued (see `Drop`).
pub struct Delivery {
    inner: lapin::message::Delivery,
    /// Held so that the channel, and with it the right to ack, outlives the consumer stream.
    channel: Channel,
    queue: String,
    /// The message came through an exchange only deja publishes to (a retry level's requeue,
    /// the dead-letter exchange), so its `x-deja-original-routing-key` is deja's own.
    forwarded_by_deja: bool,
}

/// Where a retried message went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryScheduled {
    /// The attempt number the message will carry when it comes back.
    pub next_attempt: u32,
    /// The retry queue it waits in.
    pub retry_queue: String,
    /// How long it waits (the requested delay, capped at that queue's TTL).
    pub delay: Duration,
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("queue", &self.queue)
            .field("delivery_tag", &self.inner.delivery_tag)
            .field("routing_key", &self.routing_key())
            .field("message_id", &self.message_id())
            .field("attempt", &self.attempt())
            .field("bytes", &self.inner.data.len())
            .finish()
    }
}

impl Delivery {
    pub(crate) fn new(
        inner: lapin::message::Delivery,
        channel: Channel,
        queue: String,
        topology: &Topology,
    ) -> Self {
        let exchange = inner.exchange.as_str();
        let forwarded_by_deja =
            exchange == topology.requeue_exchange || exchange == topology.dead_letter_exchange;
        Delivery {
            inner,
            channel,
            queue,
            forwarded_by_deja,
        }
    }

    pub fn body(&self) -> &[u8] {
        &self.inner.data
    }

    /// The queue this delivery came from.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// The attempt number from `x-deja-attempt` when deja forwarded this copy (a retry, a
    /// dead letter); 1 when absent or unreadable, and always 1 for a publisher's own message:
    /// a header it sets would otherwise spend, or reset, the attempts of its turn.
    pub fn attempt(&self) -> u32 {
        self.forwarded_by_deja
            .then(|| self.header(HEADER_ATTEMPT))
            .flatten()
            .and_then(value_as_u64)
            .and_then(|n| u32::try_from(n).ok())
            .filter(|&n| n >= 1)
            .unwrap_or(1)
    }

    /// The routing key of this delivery: `turn.<org>.<team>` on first delivery, the retry
    /// level's name (`{queue}.retry.{n}`) after a retry. See `original_routing_key`.
    pub fn routing_key(&self) -> &str {
        self.inner.routing_key.as_str()
    }

    /// The key the turn was published with: `x-deja-original-routing-key` when deja forwarded
    /// this copy (a retry, a dead letter), else the routing key. A publisher's own header is
    /// never read: broker permissions confine the routing key, not the headers, and the tenant
    /// check compares the event's org and team with this key.
    pub fn original_routing_key(&self) -> String {
        let forwarded = self
            .forwarded_by_deja
            .then(|| self.header_str(HEADER_ORIGINAL_ROUTING_KEY))
            .flatten();
        forwarded.unwrap_or_else(|| self.routing_key().to_owned())
    }

    pub fn message_id(&self) -> Option<&str> {
        self.inner
            .properties
            .message_id()
            .as_ref()
            .map(ShortString::as_str)
    }

    /// The broker delivered this before and it was not acked (e.g. after a worker crash).
    pub fn redelivered(&self) -> bool {
        self.inner.redelivered
    }

    pub fn properties(&self) -> &BasicProperties {
        &self.inner.properties
    }

    pub fn header(&self, name: &str) -> Option<&AMQPValue> {
        self.inner
            .properties
            .headers()
            .as_ref()
            .and_then(|h| h.inner().get(name))
    }

    /// A header as text (string headers, and numbers printed), if present.
    pub fn header_str(&self, name: &str) -> Option<String> {
        match self.header(name)? {
            AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
            AMQPValue::ShortString(s) => Some(s.as_str().to_owned()),
            other => value_as_u64(other).map(|n| n.to_string()),
        }
    }

    /// A header as an unsigned number, if present and numeric.
    pub fn header_u64(&self, name: &str) -> Option<u64> {
        self.header(name).and_then(value_as_u64)
    }

    pub async fn ack(&self) -> Result<(), BusError> {
        let settled = self
            .inner
            .acker
            .ack(BasicAckOptions::default())
            .await
            .map_err(|e| BusError::amqp("basic.ack", e))?;
        self.settled(settled)
    }

    /// Puts the message back on its queue unchanged (same attempt), for work interrupted by
    /// shutdown or a long outage. Not for failures: that would loop without delay; use `retry`.
    pub async fn nack_requeue(&self) -> Result<(), BusError> {
        let options = BasicNackOptions {
            requeue: true,
            multiple: false,
        };
        let settled = self
            .inner
            .acker
            .nack(options)
            .await
            .map_err(|e| BusError::amqp("basic.nack", e))?;
        self.settled(settled)
    }

    /// Sends a copy with `x-deja-attempt + 1` through retry level for `delay` (confirmed),
    /// then acks this one. The copy comes back to the extraction queue after the delay.
    ///
    /// Errors with [`BusError::AttemptsExhausted`] (nothing published, nothing acked) when this
    /// was the last allowed attempt; the caller then dead-letters.
    pub async fn retry(&self, bus: &Bus, delay: Duration) -> Result<RetryScheduled, BusError> {
        let t = bus.topology();
        let attempt = self.attempt();
        let exhausted = BusError::AttemptsExhausted {
            attempt,
            max_attempts: t.max_attempts,
        };
        if attempt >= t.max_attempts {
            return Err(exhausted);
        }
        let Some((level, expiration_ms)) = level_for_delay(&t.retry_ttls_ms, delay) else {
            return Err(exhausted);
        };
        let mut headers = self.forwarded_headers();
        headers.insert(
            HEADER_ATTEMPT.into(),
            AMQPValue::LongLongInt(i64::from(attempt) + 1),
        );
        let properties = self
            .forwarded_properties(headers)
            .with_expiration(expiration_ms.to_string().into());
        let retry_queue = t.retry_queue(level);
        // Each level is bound to the retry exchange by its own name; the turn key travels in
        // `x-deja-original-routing-key`.
        let exchange = t.retry_exchange.clone();
        bus.publish_confirmed(&exchange, &retry_queue, self.body(), properties)
            .await?;
        self.ack().await?;
        Ok(RetryScheduled {
            next_attempt: attempt + 1,
            retry_queue,
            delay: Duration::from_millis(expiration_ms),
        })
    }

    /// Publishes a copy to `{queue}.dlx` (confirmed) with the reason headers, then acks this
    /// one. `reason_code` is short and machine-readable (e.g. `schema_violation`); `detail`
    /// is cut to 1024 bytes.
    pub async fn dead_letter(
        &self,
        bus: &Bus,
        reason_code: &str,
        detail: &str,
    ) -> Result<(), BusError> {
        let t = bus.topology();
        let original_key = self.original_routing_key();
        let mut headers = self.forwarded_headers();
        let text = |s: &str| AMQPValue::LongString(LongString::from(s));
        headers.insert(HEADER_REASON.into(), text(reason_code));
        headers.insert(
            HEADER_DETAIL.into(),
            text(truncate(detail, MAX_DETAIL_BYTES)),
        );
        headers.insert(
            HEADER_ATTEMPTS.into(),
            AMQPValue::LongLongInt(i64::from(self.attempt())),
        );
        headers.insert(HEADER_DEAD_LETTERED_AT.into(), text(&rfc3339_now()));
        headers.insert(HEADER_SOURCE_QUEUE.into(), text(&self.queue));
        let properties = self.forwarded_properties(headers);
        let exchange = t.dead_letter_exchange.clone();
        bus.publish_confirmed(&exchange, &original_key, self.body(), properties)
            .await?;
        self.ack().await
    }

    /// The properties of a re-published copy (retry or dead letter): persistent, `headers`,
    /// and the publisher's content type, message id, correlation id and timestamp. Nothing the
    /// broker checks against the publishing connection is copied: RabbitMQ refuses a `user_id`
    /// that is not the connected user (406, closing the channel), and deja's user is rarely
    /// the publisher's, so a copy carrying one could never be published.
    fn forwarded_properties(&self, headers: FieldTable) -> BasicProperties {
        let mut properties = BasicProperties::default()
            .with_headers(headers)
            .with_delivery_mode(2);
        let original = &self.inner.properties;
        if let Some(v) = original.content_type() {
            properties = properties.with_content_type(v.clone());
        }
        if let Some(v) = original.message_id() {
            properties = properties.with_message_id(v.clone());
        }
        if let Some(v) = original.correlation_id() {
            properties = properties.with_correlation_id(v.clone());
        }
        if let Some(v) = original.timestamp() {
            properties = properties.with_timestamp(*v);
        }
        properties
    }

    /// The headers a re-published copy carries: ours and the publisher's, without the
    /// broker's `x-death` bookkeeping (it would otherwise grow on every retry) and without an
    /// `x-deja-attempt` deja did not set.
    fn forwarded_headers(&self) -> FieldTable {
        let mut headers = FieldTable::default();
        if let Some(existing) = self.inner.properties.headers() {
            for (key, value) in existing.inner() {
                let k = key.as_str();
                if k == "x-death" || k.starts_with("x-first-death") || k.starts_with("x-last-death")
                {
                    continue;
                }
                // A publisher's own attempt header is not believed (see `attempt`), nor passed on.
                if k == HEADER_ATTEMPT && !self.forwarded_by_deja {
                    continue;
                }
                headers.insert(key.clone(), value.clone());
            }
        }
        let original_key = self.original_routing_key();
        headers.insert(
            HEADER_ORIGINAL_ROUTING_KEY.into(),
            AMQPValue::LongString(LongString::from(original_key.as_str())),
        );
        headers
    }

    fn settled(&self, settled: bool) -> Result<(), BusError> {
        if settled {
            Ok(())
        } else {
            Err(BusError::NotSettled {
                delivery_tag: self.inner.delivery_tag,
            })
        }
    }
}

impl Drop for Delivery {
    /// An unsettled delivery would hold a prefetch slot until its channel closes (possibly
    /// never, for a long-lived consumer), so a dropped one is requeued. This covers panics
    /// and forgotten branches; normal code settles explicitly.
    fn drop(&mut self) {
        if !self.inner.acker.usable() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        tracing::warn!(queue = %self.queue, delivery_tag = self.inner.delivery_tag, "delivery dropped unsettled; requeueing it");
        let acker = self.inner.acker.clone();
        let channel = self.channel.clone();
        runtime.spawn(async move {
            let options = BasicNackOptions {
                requeue: true,
                multiple: false,
            };
            let _ = acker.nack(options).await;
            drop(channel);
        });
    }
}

fn value_as_u64(value: &AMQPValue) -> Option<u64> {
    match value {
        AMQPValue::ShortShortUInt(n) => Some(u64::from(*n)),
        AMQPValue::ShortUInt(n) => Some(u64::from(*n)),
        AMQPValue::LongUInt(n) => Some(u64::from(*n)),
        AMQPValue::ShortShortInt(n) => u64::try_from(*n).ok(),
        AMQPValue::ShortInt(n) => u64::try_from(*n).ok(),
        AMQPValue::LongInt(n) => u64::try_from(*n).ok(),
        AMQPValue::LongLongInt(n) => u64::try_from(*n).ok(),
        AMQPValue::Timestamp(n) => Some(*n),
        AMQPValue::LongString(s) => std::str::from_utf8(s.as_bytes()).ok()?.trim().parse().ok(),
        _ => None,
    }
}

/// Cuts `text` to at most `max` bytes on a char boundary.
fn truncate(text: &str, max: usize) -> &str {
    &text[..text.floor_char_boundary(max)]
}

fn rfc3339_now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_respects_char_boundaries() {
        let text = "é".repeat(1000);
        let cut = truncate(&text, 1023);
        assert_eq!(cut.len(), 1022);
        assert_eq!(truncate("short", 1024), "short");
    }

    #[test]
    fn numeric_headers_of_any_integer_type_are_read() {
        assert_eq!(value_as_u64(&AMQPValue::LongInt(3)), Some(3));
        assert_eq!(value_as_u64(&AMQPValue::LongLongInt(-1)), None);
        assert_eq!(
            value_as_u64(&AMQPValue::LongString(LongString::from("7"))),
            Some(7)
        );
        assert_eq!(value_as_u64(&AMQPValue::Boolean(true)), None);
    }
}
