//! Dead-letter tools: list what is in `{queue}.dlq` without losing it, and replay chosen
//! letters to where they came from with their attempts reset (`deja dlq`).
//!
//! Reading a queue without consuming it: every letter is taken with `basic.get` (manual ack)
//! on one channel and held unacked until the pass ends; the ones not replayed are then
//! returned with `basic.nack(requeue)`, which puts them back in their original order on a
//! classic queue. While a pass runs, the held letters are invisible to other readers (another
//! `deja dlq` or a worker's depth gauge); nothing is lost if the process dies meanwhile, since
//! the broker requeues unacked messages when the channel closes.

use crate::bus::{short, Bus};
use crate::delivery::{
    Delivery, HEADER_ATTEMPT, HEADER_ATTEMPTS, HEADER_DEAD_LETTERED_AT, HEADER_DETAIL,
    HEADER_ORIGINAL_ROUTING_KEY, HEADER_REASON, HEADER_SOURCE_QUEUE,
};
use crate::error::BusError;
use lapin::options::BasicGetOptions;
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{BasicProperties, Channel};
use std::collections::BTreeMap;

/// Header added to a replayed message: when it was replayed (RFC 3339).
pub const HEADER_REPLAYED_AT: &str = "x-deja-replayed-at";

/// The reason shown for a letter without `x-deja-reason` (dead-lettered by hand or by the
/// broker itself).
pub const UNKNOWN_REASON: &str = "unknown";
/// [`Bus::dead_letter_counts`]' reason for the letters past what one pass reads.
pub const UNREAD_REASON: &str = "unread";

/// One dead letter, as read from the dead-letter queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// 1-based position in the queue when it was read (`deja dlq show N`).
    pub position: usize,
    pub reason: String,
    pub detail: String,
    /// From the body's `org`/`team` when it is JSON with them, else from the routing key.
    pub org: Option<String>,
    pub team: Option<String>,
    /// The routing key it was first published with (`turn.<org>.<team>`).
    pub routing_key: String,
    pub attempts: Option<u64>,
    pub dead_lettered_at: Option<String>,
    pub source_queue: Option<String>,
    pub message_id: Option<String>,
    pub body: Vec<u8>,
}

/// Which letters a command applies to; an empty filter matches every letter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DlqFilter {
    pub reason: Option<String>,
    pub org: Option<String>,
}

impl DlqFilter {
    pub fn is_empty(&self) -> bool {
        self.reason.is_none() && self.org.is_none()
    }

    pub fn matches(&self, letter: &DeadLetter) -> bool {
        self.reason.as_ref().is_none_or(|r| *r == letter.reason)
            && self
                .org
                .as_ref()
                .is_none_or(|o| letter.org.as_deref() == Some(o.as_str()))
    }
}

/// What a replay did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayReport {
    /// Letters read from the queue.
    pub scanned: usize,
    /// Letters the filter selected.
    pub matched: usize,
    /// Letters re-published (confirmed) and removed from the dead-letter queue.
    pub replayed: usize,
    /// Selected letters whose re-publish failed, or that were not tried after the held
    /// channel or the connection failed; they stay in the dead-letter queue.
    pub failed: usize,
    /// Letters re-published whose dead letter could not then be removed (the held channel
    /// failed before the ack): they are replayed and still in the dead-letter queue, so a
    /// later replay delivers them again. At most one: the pass stops there.
    pub not_removed: usize,
}

impl Bus {
    /// Reads up to `limit` dead letters and puts every one back: nothing leaves the queue.
    pub async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, BusError> {
        let (channel, held) = self.hold_dead_letters(limit).await?;
        let letters = held.iter().map(|(letter, _)| letter.clone()).collect();
        give_back(channel, held.into_iter().map(|(_, d)| d)).await;
        Ok(letters)
    }

    /// Dead letters by reason; nothing leaves the queue. A pass holds what it reads until it
    /// ends (a letter given back at once would be read again), so it counts by the headers
    /// (no body is copied or parsed) and stops at `limit` letters or `max_bytes` of their bodies, whichever comes first:
    /// a worker counting a queue of large letters (oversized turns are dead-lettered whole)
    /// must not hold gigabytes. The letters it did not read are counted as
    /// [`UNREAD_REASON`], from the queue's depth.
    pub async fn dead_letter_counts(
        &self,
        limit: usize,
        max_bytes: usize,
    ) -> Result<BTreeMap<String, u64>, BusError> {
        let queue = self.topology().dead_letter_queue.clone();
        let channel = self.channel().await?;
        let mut counts = BTreeMap::new();
        let mut held = Vec::new();
        let mut bytes = 0usize;
        let read = async {
            while held.len() < limit && bytes < max_bytes {
                let Some(delivery) = self.next_letter(&channel).await? else {
                    break;
                };
                bytes = bytes.saturating_add(delivery.body().len());
                *counts.entry(letter_reason(&delivery)).or_insert(0) += 1;
                held.push(delivery);
            }
            // What is still ready now is what this pass did not read (held ones are unacked).
            self.queue_depth(&queue).await
        }
        .await;
        give_back(channel, held.into_iter()).await;
        let unread = read?;
        if unread > 0 {
            counts.insert(UNREAD_REASON.to_owned(), u64::from(unread));
        }
        Ok(counts)
    }

    /// Re-publishes the dead letters `filter` selects (at most `limit` read) to where they came
    /// from — the turn exchange with their original routing key, or the synthesis queue — with
    /// the attempt count reset and the dead-letter headers removed. Each publish is confirmed
    /// before its letter is acked; the rest go back to the queue. `dry_run` moves nothing and
    /// reports what would be replayed.
    pub async fn replay_dead_letters(
        &self,
        filter: &DlqFilter,
        dry_run: bool,
        limit: usize,
    ) -> Result<ReplayReport, BusError> {
        let (channel, held) = self.hold_dead_letters(limit).await?;
        let mut report = ReplayReport {
            scanned: held.len(),
            ..ReplayReport::default()
        };
        let mut keep = Vec::new();
        // Set once the held channel or the connection failed: every later letter stays.
        // Publishing one would go on (on the publisher's channel) but its ack could not
        // follow, so each would be delivered and still be a dead letter: a duplicate.
        let mut stopped = false;
        for (letter, delivery) in held {
            if !filter.matches(&letter) {
                keep.push(delivery);
                continue;
            }
            report.matched += 1;
            if dry_run {
                keep.push(delivery);
                continue;
            }
            // A channel the broker closed (a channel-level error) holds no letter any more:
            // it returned them all to the queue.
            stopped = stopped || !channel.status().connected();
            if stopped {
                report.failed += 1;
                keep.push(delivery);
                continue;
            }
            match self.replay_one(&letter, &delivery).await {
                Ok(()) => report.replayed += 1,
                Err(Replay::NotPublished(error)) => {
                    tracing::warn!(%error, position = letter.position, "could not replay a dead letter; it stays in the queue");
                    report.failed += 1;
                    // Without a connection nothing more can be published; the broker returns
                    // every unacked letter to the queue when the channel closes.
                    stopped = error.is_connection_lost();
                    keep.push(delivery);
                }
                Err(Replay::NotRemoved(error)) => {
                    tracing::warn!(%error, position = letter.position, "replayed a dead letter but could not remove it from the queue (its channel failed); stopping: the rest stay in the queue");
                    report.not_removed += 1;
                    stopped = true;
                    keep.push(delivery);
                }
            }
        }
        give_back(channel, keep.into_iter()).await;
        Ok(report)
    }

    async fn replay_one(&self, letter: &DeadLetter, delivery: &Delivery) -> Result<(), Replay> {
        let t = self.topology();
        let to_synthesis = letter.source_queue.as_deref() == Some(t.synthesis_queue.as_str());
        let (exchange, key) = if to_synthesis {
            (String::new(), t.synthesis_queue.clone())
        } else {
            (t.turn_exchange.clone(), letter.routing_key.clone())
        };
        let properties = replay_properties(delivery.properties());
        self.publish_confirmed(&exchange, &key, delivery.body(), properties)
            .await
            .map_err(Replay::NotPublished)?;
        delivery.ack().await.map_err(Replay::NotRemoved)
    }

    /// Takes up to `limit` letters off the dead-letter queue, unacked, on a channel of their
    /// own (returned: [`give_back`] closes it).
    async fn hold_dead_letters(
        &self,
        limit: usize,
    ) -> Result<(Channel, Vec<(DeadLetter, Delivery)>), BusError> {
        let channel = self.channel().await?;
        let mut held = Vec::new();
        while held.len() < limit {
            let Some(delivery) = self.next_letter(&channel).await? else {
                break;
            };
            let letter = read_letter(held.len() + 1, &delivery);
            held.push((letter, delivery));
        }
        Ok((channel, held))
    }

    /// The next dead letter, unacked on `channel` (`None`: the queue is empty).
    async fn next_letter(&self, channel: &Channel) -> Result<Option<Delivery>, BusError> {
        let queue = self.topology().dead_letter_queue.clone();
        let message = channel
            .basic_get(
                short("queue name", &queue)?,
                BasicGetOptions { no_ack: false },
            )
            .await
            .map_err(|e| BusError::amqp(format!("basic.get {queue:?}"), e))?;
        Ok(message.map(|message| {
            Delivery::new(message.delivery, channel.clone(), queue, self.topology())
        }))
    }
}

/// How replaying one letter failed.
enum Replay {
    /// Nothing was published; the letter stays.
    NotPublished(BusError),
    /// Published, but its ack failed: its channel is gone, and the letter with it (back in
    /// the queue, though it was replayed).
    NotRemoved(BusError),
}

/// Puts the held letters back in their order and closes their channel. `basic.nack` has no
/// reply; closing waits for the broker's close-ok, which it sends only after the nacks before
/// it, so the letters are back in the queue when this returns (a depth read right after a
/// listing once found 0 of 3 without it).
async fn give_back(channel: Channel, deliveries: impl Iterator<Item = Delivery>) {
    for delivery in deliveries {
        if let Err(error) = delivery.nack_requeue().await {
            // The channel is gone: the broker requeues its unacked messages by itself.
            tracing::debug!(%error, "could not return a dead letter; the broker requeues it");
        }
    }
    if let Err(error) = channel.close(200, "dead letters read".into()).await {
        tracing::debug!(%error, "dead-letter channel already closed; the broker requeues its letters");
    }
}

fn read_letter(position: usize, delivery: &Delivery) -> DeadLetter {
    let routing_key = delivery.original_routing_key();
    let (key_org, key_team) = org_team_of_key(&routing_key);
    let (body_org, body_team) = org_team_of_body(delivery.body());
    DeadLetter {
        position,
        reason: letter_reason(delivery),
        detail: delivery.header_str(HEADER_DETAIL).unwrap_or_default(),
        org: body_org.or(key_org),
        team: body_team.or(key_team),
        routing_key,
        attempts: delivery.header_u64(HEADER_ATTEMPTS),
        dead_lettered_at: delivery.header_str(HEADER_DEAD_LETTERED_AT),
        source_queue: delivery.header_str(HEADER_SOURCE_QUEUE),
        message_id: delivery.message_id().map(str::to_owned),
        body: delivery.body().to_vec(),
    }
}

/// Why a letter was dead-lettered: deja's reason, else the broker's (a quorum queue's
/// delivery limit has no deja reason, only `delivery_limit`, `rejected`, `expired`).
fn letter_reason(delivery: &Delivery) -> String {
    delivery
        .header_str(HEADER_REASON)
        .or_else(|| delivery.header_str("x-first-death-reason"))
        .unwrap_or_else(|| UNKNOWN_REASON.to_owned())
}

/// `turn.<org>.<team>` → its org and team (as the key spells them: sanitised, see README).
fn org_team_of_key(key: &str) -> (Option<String>, Option<String>) {
    let mut parts = key.splitn(3, '.');
    match (parts.next(), parts.next(), parts.next()) {
        (Some("turn"), Some(org), team) => (Some(org.to_owned()), team.map(str::to_owned)),
        _ => (None, None),
    }
}

fn org_team_of_body(body: &[u8]) -> (Option<String>, Option<String>) {
    let Ok(serde_json::Value::Object(map)) = serde_json::from_slice::<serde_json::Value>(body)
    else {
        return (None, None);
    };
    let text = |k: &str| map.get(k).and_then(|v| v.as_str()).map(str::to_owned);
    (text("org"), text("team"))
}

/// The replayed copy: the publisher's properties and headers, without deja's attempt and
/// dead-letter bookkeeping nor the broker's `x-death`, plus `x-deja-replayed-at`.
fn replay_properties(original: &BasicProperties) -> BasicProperties {
    const DROPPED: [&str; 7] = [
        HEADER_ATTEMPT,
        HEADER_ATTEMPTS,
        HEADER_REASON,
        HEADER_DETAIL,
        HEADER_DEAD_LETTERED_AT,
        HEADER_SOURCE_QUEUE,
        HEADER_ORIGINAL_ROUTING_KEY,
    ];
    let mut headers = FieldTable::default();
    if let Some(existing) = original.headers() {
        for (key, value) in existing.inner() {
            let k = key.as_str();
            if DROPPED.contains(&k)
                || k == "x-death"
                || k.starts_with("x-first-death")
                || k.starts_with("x-last-death")
            {
                continue;
            }
            headers.insert(key.clone(), value.clone());
        }
    }
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    headers.insert(
        HEADER_REPLAYED_AT.into(),
        AMQPValue::LongString(LongString::from(now.as_str())),
    );
    let mut properties = BasicProperties::default()
        .with_headers(headers)
        .with_delivery_mode(2);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn letter(reason: &str, org: Option<&str>) -> DeadLetter {
        DeadLetter {
            position: 1,
            reason: reason.to_owned(),
            detail: String::new(),
            org: org.map(str::to_owned),
            team: None,
            routing_key: "turn.a.b".to_owned(),
            attempts: None,
            dead_lettered_at: None,
            source_queue: None,
            message_id: None,
            body: Vec::new(),
        }
    }

    #[test]
    fn a_filter_matches_on_every_field_it_names_and_an_empty_one_on_everything() {
        let filter = DlqFilter {
            reason: Some("schema_violation".into()),
            org: Some("acme".into()),
        };
        assert!(filter.matches(&letter("schema_violation", Some("acme"))));
        assert!(!filter.matches(&letter("schema_violation", Some("other"))));
        assert!(!filter.matches(&letter("neo4j_failed", Some("acme"))));
        assert!(!filter.matches(&letter("schema_violation", None)));
        assert!(DlqFilter::default().matches(&letter("x", None)));
    }

    #[test]
    fn org_and_team_come_from_the_body_and_else_from_the_routing_key() {
        assert_eq!(
            org_team_of_key("turn.acme.sre"),
            (Some("acme".into()), Some("sre".into()))
        );
        assert_eq!(org_team_of_key("deja.extract.retry.1"), (None, None));
        assert_eq!(
            org_team_of_body(br#"{"org":"acme","team":"sre"}"#),
            (Some("acme".into()), Some("sre".into()))
        );
        assert_eq!(org_team_of_body(b"not json"), (None, None));
    }

    #[test]
    fn a_replayed_copy_loses_the_attempt_and_dead_letter_headers_and_keeps_the_rest() {
        let mut headers = FieldTable::default();
        for name in [HEADER_ATTEMPT, HEADER_REASON, "x-death", "x-custom"] {
            headers.insert(name.into(), AMQPValue::LongString(LongString::from("v")));
        }
        let original = BasicProperties::default()
            .with_headers(headers)
            .with_message_id("evt-1".into());
        let copy = replay_properties(&original);
        let kept = copy.headers().as_ref().expect("headers");
        assert!(kept.inner().get(HEADER_ATTEMPT).is_none());
        assert!(kept.inner().get(HEADER_REASON).is_none());
        assert!(kept.inner().get("x-death").is_none());
        assert!(kept.inner().get("x-custom").is_some());
        assert!(kept.inner().get(HEADER_REPLAYED_AT).is_some());
        assert_eq!(
            copy.message_id().as_ref().map(|m| m.as_str()),
            Some("evt-1")
        );
        assert_eq!(*copy.delivery_mode(), Some(2));
    }
}
