//! `deja dlq`'s use case against the real broker: list without losing anything, filter by
//! reason and org, replay with attempts reset, dry runs that move nothing.

mod common;

use deja_bus::{Bus, DlqFilter, PublishMeta, HEADER_ATTEMPT, HEADER_REASON};
use std::time::Duration;

fn turn(org: &str, team: &str, event_id: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({"event_id": event_id, "org": org, "team": team}))
        .expect("json")
}

/// Publishes a turn and dead-letters it with `reason`; when `retried`, the turn first goes
/// through one retry level so that its copy carries `x-deja-attempt: 2`.
async fn dead_letter(bus: &Bus, org: &str, event_id: &str, reason: &str, retried: bool) {
    let queue = bus.topology().extract_queue.clone();
    let meta = PublishMeta::turn(org, "sre").with_message_id(event_id);
    bus.publish_turn(&turn(org, "sre", event_id), &meta)
        .await
        .expect("publish");
    let mut delivery = take(bus, &queue).await;
    if retried {
        delivery
            .retry(bus, Duration::from_millis(1))
            .await
            .expect("retry");
        delivery = take(bus, &queue).await;
        assert_eq!(delivery.attempt(), 2);
    }
    delivery
        .dead_letter(bus, reason, "test detail")
        .await
        .expect("dead letter");
}

/// The next message of `queue`, waiting for it to arrive.
async fn take(bus: &Bus, queue: &str) -> deja_bus::Delivery {
    for _ in 0..200 {
        if let Some(delivery) = bus.get_one(queue).await.expect("basic.get") {
            return delivery;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("nothing arrived in {queue}");
}

#[tokio::test]
async fn dead_letters_are_listed_by_reason_and_org_and_replayed_with_attempts_reset() {
    let settings = common::settings();
    let bus = common::bus(&settings).await;
    let t = bus.topology().clone();
    dead_letter(&bus, "acme", "evt-1", "neo4j_failed", true).await;
    dead_letter(&bus, "acme", "evt-2", "schema_violation", false).await;
    dead_letter(&bus, "globex", "evt-3", "neo4j_failed", false).await;

    // Listing reads every letter and puts every one back, in order.
    let letters = bus.dead_letters(100).await.expect("list");
    let summary: Vec<_> = letters
        .iter()
        .map(|l| {
            (
                l.position,
                l.reason.as_str(),
                l.org.as_deref(),
                l.message_id.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (1, "neo4j_failed", Some("acme"), Some("evt-1")),
            (2, "schema_violation", Some("acme"), Some("evt-2")),
            (3, "neo4j_failed", Some("globex"), Some("evt-3")),
        ]
    );
    assert_eq!(letters[0].attempts, Some(2));
    assert_eq!(letters[0].routing_key, "turn.acme.sre");
    assert_eq!(bus.queue_depth(&t.dead_letter_queue).await.unwrap(), 3);
    let counts = bus.dead_letter_counts(100, 1 << 20).await.expect("counts");
    assert_eq!(counts.get("neo4j_failed"), Some(&2));
    assert_eq!(counts.get("schema_violation"), Some(&1));
    assert_eq!(counts.get(deja_bus::UNREAD_REASON), None);
    // A pass that may hold one letter's bytes only: what it did not read is `unread`, and
    // every letter is still there, in order.
    let counts = bus.dead_letter_counts(100, 1).await.expect("counts");
    assert_eq!(counts.get("neo4j_failed"), Some(&1), "{counts:?}");
    assert_eq!(counts.get(deja_bus::UNREAD_REASON), Some(&2), "{counts:?}");
    let counts = bus.dead_letter_counts(2, 1 << 20).await.expect("counts");
    assert_eq!(counts.get(deja_bus::UNREAD_REASON), Some(&1), "{counts:?}");
    assert_eq!(bus.queue_depth(&t.dead_letter_queue).await.unwrap(), 3);
    let again: Vec<_> = bus
        .dead_letters(100)
        .await
        .expect("list")
        .into_iter()
        .map(|l| l.message_id)
        .collect();
    assert_eq!(
        again,
        ["evt-1", "evt-2", "evt-3"].map(|id| Some(id.to_owned()))
    );

    let by_reason = DlqFilter {
        reason: Some("neo4j_failed".into()),
        org: None,
    };
    let by_org = DlqFilter {
        reason: None,
        org: Some("acme".into()),
    };
    assert_eq!(letters.iter().filter(|l| by_reason.matches(l)).count(), 2);
    assert_eq!(letters.iter().filter(|l| by_org.matches(l)).count(), 2);

    // A dry run counts and moves nothing.
    let dry = bus
        .replay_dead_letters(&by_reason, true, 100)
        .await
        .expect("dry run");
    assert_eq!((dry.scanned, dry.matched, dry.replayed), (3, 2, 0));
    assert_eq!(bus.queue_depth(&t.dead_letter_queue).await.unwrap(), 3);
    assert_eq!(bus.queue_depth(&t.extract_queue).await.unwrap(), 0);

    // Replaying one reason moves exactly those, back to the extraction queue, attempts reset.
    let report = bus
        .replay_dead_letters(&by_reason, false, 100)
        .await
        .expect("replay");
    assert_eq!((report.matched, report.replayed, report.failed), (2, 2, 0));
    assert_eq!(bus.queue_depth(&t.dead_letter_queue).await.unwrap(), 1);
    let mut replayed = Vec::new();
    for _ in 0..2 {
        let delivery = take(&bus, &t.extract_queue).await;
        assert_eq!(delivery.attempt(), 1, "attempts reset");
        assert!(delivery.header(HEADER_ATTEMPT).is_none());
        assert!(delivery.header(HEADER_REASON).is_none());
        assert!(
            delivery.routing_key().starts_with("turn."),
            "published to the turn exchange with the original key, got {}",
            delivery.routing_key()
        );
        replayed.push(delivery.message_id().unwrap_or_default().to_owned());
        delivery.ack().await.expect("ack");
    }
    replayed.sort();
    assert_eq!(replayed, vec!["evt-1", "evt-3"]);
    let left = bus.dead_letters(100).await.expect("list");
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].reason, "schema_violation");
    common::cleanup(&bus).await;
}

#[tokio::test]
async fn a_quorum_queue_dead_letters_a_message_redelivered_past_its_delivery_limit() {
    let mut settings = common::settings();
    settings.queue_type = deja_config::QueueType::Quorum;
    settings.delivery_limit = 2;
    let bus = common::bus(&settings).await;
    let t = bus.topology().clone();
    let meta = PublishMeta::turn("acme", "sre").with_message_id("evt-crash");
    bus.publish_turn(&turn("acme", "sre", "evt-crash"), &meta)
        .await
        .expect("publish");
    // Each return models a worker process that died holding the message.
    let mut deliveries = 0;
    for _ in 0..200 {
        if bus.queue_depth(&t.dead_letter_queue).await.unwrap() > 0 {
            break;
        }
        match bus.get_one(&t.extract_queue).await.expect("basic.get") {
            Some(delivery) => {
                deliveries += 1;
                delivery.nack_requeue().await.expect("return it");
            }
            None => tokio::time::sleep(Duration::from_millis(25)).await,
        }
    }
    assert_eq!(
        deliveries, 3,
        "delivered once plus `delivery_limit` redeliveries"
    );
    let letters = bus.dead_letters(10).await.expect("list");
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].reason, "delivery_limit");
    assert_eq!(letters[0].routing_key, "turn.acme.sre");
    assert_eq!(letters[0].message_id.as_deref(), Some("evt-crash"));
    common::cleanup(&bus).await;
}
