//! Against the real RabbitMQ started by `deploy/services.sh up`. Each test owns a unique
//! `deja.test.<uuid>` topology and deletes it at the end.

mod common;

use common::{bus, cleanup, event, next, settings};
use deja_bus::{Bus, BusError, PublishMeta, HEADER_ATTEMPTS, HEADER_DETAIL};
use deja_config::QueueType;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn declaring_the_topology_twice_is_harmless_and_creates_every_queue() {
    let settings = settings();
    let bus = bus(&settings).await;
    bus.declare_topology().await.expect("second declare");
    let topology = bus.topology().clone();
    assert_eq!(topology.retry_ttls_ms, vec![250, 500, 1000, 2000, 4000]);
    for queue in topology.all_queues() {
        assert_eq!(bus.queue_depth(&queue).await.expect(&queue), 0, "{queue}");
    }
    cleanup(&bus).await;
}

#[tokio::test]
async fn a_quorum_topology_can_be_declared_twice() {
    let mut settings = settings();
    settings.queue_type = QueueType::Quorum;
    let bus = bus(&settings).await;
    bus.declare_topology().await.expect("second declare");
    cleanup(&bus).await;
}

#[tokio::test]
async fn a_confirmed_turn_is_consumed_acked_and_gone_from_the_queue() {
    let settings = settings();
    let bus = bus(&settings).await;
    let meta = PublishMeta::turn("acme", "check.out").with_message_id("evt-1");
    bus.publish_turn(&event("evt-1"), &meta)
        .await
        .expect("publish");
    assert_eq!(bus.queue_depth(&settings.extract_queue()).await.unwrap(), 1);

    let mut stream = bus
        .consume(&settings.extract_queue(), 4, "t1")
        .await
        .unwrap();
    let delivery = next(&mut stream, WAIT).await;
    assert_eq!(delivery.body(), event("evt-1").as_slice());
    assert_eq!(delivery.message_id(), Some("evt-1"));
    assert_eq!(delivery.routing_key(), "turn.acme.check_out");
    assert_eq!(delivery.original_routing_key(), "turn.acme.check_out");
    assert_eq!(delivery.attempt(), 1);
    let props = delivery.properties();
    assert_eq!(props.delivery_mode(), &Some(2));
    assert_eq!(
        props.content_type().as_ref().map(|c| c.as_str()),
        Some("application/json")
    );
    delivery.ack().await.expect("ack");
    assert!(matches!(
        delivery.ack().await,
        Err(BusError::NotSettled { .. })
    ));
    drop(stream);
    drop(delivery);
    bus.close().await.expect("close");

    // Had the ack been lost, closing the connection would have requeued the message.
    let bus = Bus::connect(&settings).await.unwrap();
    assert_eq!(bus.queue_depth(&settings.extract_queue()).await.unwrap(), 0);
    cleanup(&bus).await;
}

#[tokio::test]
async fn a_retried_message_comes_back_after_its_delay_with_attempt_two_and_the_same_body() {
    let settings = settings();
    let bus = bus(&settings).await;
    let meta = PublishMeta::turn("acme", "checkout").with_message_id("evt-r");
    bus.publish_turn(&event("evt-r"), &meta).await.unwrap();
    let mut stream = bus
        .consume(&settings.extract_queue(), 4, "t1")
        .await
        .unwrap();

    let first = next(&mut stream, WAIT).await;
    let started = Instant::now();
    let scheduled = first
        .retry(&bus, Duration::from_millis(700))
        .await
        .expect("retry");
    assert_eq!(scheduled.next_attempt, 2);
    assert_eq!(
        scheduled.retry_queue,
        format!("{}.retry.3", settings.name_prefix)
    );
    assert_eq!(scheduled.delay, Duration::from_millis(700));

    let second = next(&mut stream, WAIT).await;
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(650),
        "came back after {waited:?}"
    );
    assert_eq!(second.attempt(), 2);
    assert_eq!(second.body(), first.body());
    assert_eq!(second.message_id(), Some("evt-r"));
    assert_eq!(second.original_routing_key(), "turn.acme.checkout");
    assert!(
        second.header("x-death").is_some(),
        "broker bookkeeping kept on arrival"
    );
    second.ack().await.unwrap();

    for level in 1..=5 {
        let queue = format!("{}.retry.{level}", settings.name_prefix);
        assert_eq!(bus.queue_depth(&queue).await.unwrap(), 0, "{queue}");
    }
    cleanup(&bus).await;
}

#[tokio::test]
async fn short_retries_are_not_blocked_behind_a_long_one() {
    let settings = settings();
    let bus = bus(&settings).await;
    for id in ["long", "short-1", "short-2"] {
        let meta = PublishMeta::turn("acme", "checkout").with_message_id(id);
        bus.publish_turn(&event(id), &meta).await.unwrap();
    }
    let mut stream = bus
        .consume(&settings.extract_queue(), 8, "t1")
        .await
        .unwrap();
    let started = Instant::now();
    for _ in 0..3 {
        let delivery = next(&mut stream, WAIT).await;
        let delay = if delivery.message_id() == Some("long") {
            Duration::from_millis(3500)
        } else {
            Duration::from_millis(200)
        };
        delivery.retry(&bus, delay).await.unwrap();
    }

    let mut order = Vec::new();
    for _ in 0..3 {
        let delivery = next(&mut stream, WAIT).await;
        order.push((delivery.message_id().map(str::to_owned), started.elapsed()));
        delivery.ack().await.unwrap();
    }
    let ids: Vec<_> = order.iter().map(|(id, _)| id.as_deref()).collect();
    assert_eq!(ids[2], Some("long"), "order: {order:?}");
    assert!(
        order[1].1 < Duration::from_millis(2000),
        "short retries waited: {order:?}"
    );
    assert!(
        order[2].1 >= Duration::from_millis(3400),
        "long retry too early: {order:?}"
    );
    cleanup(&bus).await;
}

#[tokio::test]
async fn a_dead_lettered_message_sits_in_the_dlq_with_all_headers() {
    let settings = settings();
    let bus = bus(&settings).await;
    let meta = PublishMeta::turn("acme", "checkout").with_message_id("evt-d");
    bus.publish_turn(&event("evt-d"), &meta).await.unwrap();
    let mut stream = bus
        .consume(&settings.extract_queue(), 4, "t1")
        .await
        .unwrap();
    let delivery = next(&mut stream, WAIT).await;
    let detail = format!("field `org` must not be empty {}", "é".repeat(2000));
    delivery
        .dead_letter(&bus, "schema_violation", &detail)
        .await
        .expect("dead letter");

    let dlq = &settings.dead_letter_queue();
    let dead = bus.get_one(dlq).await.unwrap().expect("message in the dlq");
    assert_eq!(dead.body(), event("evt-d").as_slice());
    assert_eq!(dead.message_id(), Some("evt-d"));
    assert_eq!(
        dead.header_str("x-deja-reason").as_deref(),
        Some("schema_violation")
    );
    let kept = dead.header_str(HEADER_DETAIL).expect("detail");
    assert!(
        kept.starts_with("field `org`") && kept.len() <= 1024,
        "{}",
        kept.len()
    );
    assert_eq!(dead.header_u64(HEADER_ATTEMPTS), Some(1));
    assert_eq!(
        dead.header_str("x-deja-original-routing-key").as_deref(),
        Some("turn.acme.checkout")
    );
    assert_eq!(dead.routing_key(), "turn.acme.checkout");
    assert_eq!(
        dead.header_str("x-deja-source-queue").as_deref(),
        Some(settings.name_prefix.as_str())
    );
    let at = dead
        .header_str("x-deja-dead-lettered-at")
        .expect("timestamp");
    assert!(chrono::DateTime::parse_from_rfc3339(&at).is_ok(), "{at}");
    dead.ack().await.unwrap();
    assert_eq!(bus.queue_depth(&settings.extract_queue()).await.unwrap(), 0);
    assert!(bus.get_one(dlq).await.unwrap().is_none());
    cleanup(&bus).await;
}

/// Broker permissions confine a publisher's routing key, not its headers: a publisher's own
/// `x-deja-original-routing-key` (another org's key, or one too long to publish with) is never
/// taken for the key its turn was published with, and the turn dead-letters under its real key.
#[tokio::test]
async fn a_publishers_own_original_routing_key_header_is_not_believed() {
    use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
    use lapin::types::{AMQPValue, FieldTable, LongString};
    let settings = settings();
    let bus = bus(&settings).await;
    let connection = lapin::Connection::connect(
        settings.uri.expose(),
        lapin::ConnectionProperties::default(),
    )
    .await
    .expect("connect");
    let channel = connection.create_channel().await.expect("channel");
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .expect("confirms");
    for forged in [
        "turn.victim.ops".to_owned(),
        format!("turn.{}.ops", "v".repeat(300)),
    ] {
        let mut headers = FieldTable::default();
        headers.insert(
            deja_bus::HEADER_ORIGINAL_ROUTING_KEY.into(),
            AMQPValue::LongString(LongString::from(forged.as_str())),
        );
        channel
            .basic_publish(
                settings.exchange.as_str().into(),
                "turn.acme.checkout".into(),
                BasicPublishOptions::default(),
                &event("evt-forged"),
                lapin::BasicProperties::default().with_headers(headers),
            )
            .await
            .expect("publish")
            .await
            .expect("confirm");
    }
    let mut stream = bus
        .consume(&settings.extract_queue(), 4, "t1")
        .await
        .unwrap();
    for _ in 0..2 {
        let delivery = next(&mut stream, WAIT).await;
        assert_eq!(delivery.original_routing_key(), "turn.acme.checkout");
        delivery
            .dead_letter(&bus, "tenant_mismatch", "forged header")
            .await
            .expect("dead letter under the real key");
        let dead = bus
            .get_one(&settings.dead_letter_queue())
            .await
            .unwrap()
            .expect("message in the dlq");
        assert_eq!(dead.routing_key(), "turn.acme.checkout");
        assert_eq!(dead.original_routing_key(), "turn.acme.checkout");
        dead.ack().await.unwrap();
    }
    assert_eq!(bus.queue_depth(&settings.extract_queue()).await.unwrap(), 0);
    cleanup(&bus).await;
}

#[tokio::test]
async fn the_last_attempt_cannot_be_retried_and_stays_unsettled_for_dead_lettering() {
    let mut settings = settings();
    settings.max_attempts = 2;
    let bus = bus(&settings).await;
    let meta = PublishMeta::turn("acme", "checkout").with_message_id("evt-x");
    bus.publish_turn(&event("evt-x"), &meta).await.unwrap();
    let mut stream = bus
        .consume(&settings.extract_queue(), 4, "t1")
        .await
        .unwrap();
    next(&mut stream, WAIT)
        .await
        .retry(&bus, Duration::from_millis(50))
        .await
        .unwrap();
    let last = next(&mut stream, WAIT).await;
    assert_eq!(last.attempt(), 2);
    let err = last
        .retry(&bus, Duration::from_millis(50))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            BusError::AttemptsExhausted {
                attempt: 2,
                max_attempts: 2
            }
        ),
        "{err}"
    );
    assert!(!err.is_transient());
    last.dead_letter(&bus, "retries_exhausted", "llm timed out")
        .await
        .unwrap();
    let dead = bus
        .get_one(&settings.dead_letter_queue())
        .await
        .unwrap()
        .expect("dlq");
    assert_eq!(dead.header_u64(HEADER_ATTEMPTS), Some(2));
    assert!(
        dead.header("x-death").is_none(),
        "broker bookkeeping is not forwarded"
    );
    dead.ack().await.unwrap();
    cleanup(&bus).await;
}

#[tokio::test]
async fn nack_requeue_returns_the_message_unchanged() {
    let settings = settings();
    let bus = bus(&settings).await;
    let meta = PublishMeta::turn("acme", "checkout").with_message_id("evt-n");
    bus.publish_turn(&event("evt-n"), &meta).await.unwrap();
    let mut stream = bus
        .consume(&settings.extract_queue(), 4, "t1")
        .await
        .unwrap();
    let first = next(&mut stream, WAIT).await;
    first.nack_requeue().await.unwrap();
    let again = next(&mut stream, WAIT).await;
    assert_eq!(again.message_id(), Some("evt-n"));
    assert!(again.redelivered());
    assert_eq!(again.attempt(), 1);
    again.ack().await.unwrap();
    cleanup(&bus).await;
}

#[tokio::test]
async fn a_dropped_unsettled_delivery_is_requeued() {
    let settings = settings();
    let bus = bus(&settings).await;
    let meta = PublishMeta::turn("acme", "checkout").with_message_id("evt-drop");
    bus.publish_turn(&event("evt-drop"), &meta).await.unwrap();
    let mut stream = bus
        .consume(&settings.extract_queue(), 4, "t1")
        .await
        .unwrap();
    drop(next(&mut stream, WAIT).await);
    let again = next(&mut stream, WAIT).await;
    assert_eq!(again.message_id(), Some("evt-drop"));
    again.ack().await.unwrap();
    cleanup(&bus).await;
}

#[tokio::test]
async fn a_publish_to_a_missing_exchange_fails_and_the_next_publish_still_works() {
    let settings = settings();
    let bus = bus(&settings).await;
    bus.delete_exchange(&settings.exchange).await.unwrap();
    let meta = PublishMeta::turn("acme", "checkout");
    let err = bus.publish_turn(b"{}", &meta).await.unwrap_err();
    assert!(
        !err.is_transient(),
        "a 404 needs the topology, not a retry: {err}"
    );

    bus.declare_topology().await.unwrap();
    bus.publish_turn(b"{}", &meta)
        .await
        .expect("publisher channel reopened");
    assert_eq!(bus.queue_depth(&settings.extract_queue()).await.unwrap(), 1);
    cleanup(&bus).await;
}

#[tokio::test]
async fn an_unroutable_turn_is_an_error_not_a_silent_loss() {
    let settings = settings();
    let bus = bus(&settings).await;
    bus.delete_queue(&settings.extract_queue()).await.unwrap();
    let err = bus
        .publish_turn(b"{}", &PublishMeta::turn("acme", "checkout"))
        .await
        .unwrap_err();
    assert!(matches!(err, BusError::Unroutable { .. }), "{err}");
    cleanup(&bus).await;
}

#[tokio::test]
async fn a_synthesis_job_lands_on_the_synthesis_queue() {
    let settings = settings();
    let bus = bus(&settings).await;
    bus.publish_synthesis_job(b"{\"episode\":\"e1\"}", "synth-e1")
        .await
        .unwrap();
    let job = bus
        .get_one(&settings.synthesis_queue())
        .await
        .unwrap()
        .expect("job");
    assert_eq!(job.message_id(), Some("synth-e1"));
    assert_eq!(job.body(), b"{\"episode\":\"e1\"}");
    job.ack().await.unwrap();
    assert_eq!(bus.purge(&settings.synthesis_queue()).await.unwrap(), 0);
    cleanup(&bus).await;
}

#[tokio::test]
async fn connecting_to_a_closed_port_is_a_transient_error() {
    let mut settings = settings();
    settings.uri = deja_config::Secret::new("amqp://guest:guest@127.0.0.1:1/%2f");
    let err = Bus::connect(&settings).await.unwrap_err();
    assert!(err.is_transient() && err.is_connection_lost(), "{err}");
    assert!(!err.to_string().contains("guest:guest"), "{err}");

    let shutdown = tokio::time::sleep(Duration::from_millis(300));
    let outcome = Bus::connect_with_retry(&settings, "t", shutdown)
        .await
        .unwrap();
    assert!(outcome.is_none(), "shutdown ends the retry loop");
}

#[tokio::test]
async fn dropping_the_stream_returns_prefetched_messages_and_keeps_in_flight_ones_ackable() {
    let settings = settings();
    let bus = bus(&settings).await;
    for id in ["a", "b", "c"] {
        let meta = PublishMeta::turn("acme", "checkout").with_message_id(id);
        bus.publish_turn(&event(id), &meta).await.unwrap();
    }
    let mut stream = bus
        .consume(&settings.extract_queue(), 8, "t1")
        .await
        .unwrap();
    let in_flight = next(&mut stream, WAIT).await;
    // Let the other two arrive in the client's prefetch buffer, unseen.
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(stream);
    in_flight
        .ack()
        .await
        .expect("in-flight work can still be acked");
    drop(in_flight);

    let deadline = Instant::now() + WAIT;
    let mut depth = 0;
    while Instant::now() < deadline {
        depth = bus.queue_depth(&settings.extract_queue()).await.unwrap();
        if depth == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        depth, 2,
        "the unseen prefetched messages are back in the queue"
    );
    cleanup(&bus).await;
}

/// A tool's cleanup (`deja eval extraction` deleting its queues) leaves the topology alone
/// while another process consumes it: what that process is sent after a delete would be lost.
/// Once nobody consumes, it deletes everything.
#[tokio::test]
async fn cleanup_if_unused_spares_a_topology_another_process_consumes() {
    let settings = settings();
    let other = bus(&settings).await;
    let mut stream = other
        .consume(&settings.extract_queue(), 4, "t1")
        .await
        .unwrap();
    let tool = Bus::connect(&settings).await.unwrap();
    assert!(!tool.delete_topology_if_unused().await.expect("cleanup"));

    // Still there: a turn published now reaches the other process.
    let meta = PublishMeta::turn("acme", "checkout").with_message_id("evt-1");
    tool.publish_turn(&event("evt-1"), &meta)
        .await
        .expect("publish");
    let delivery = next(&mut stream, WAIT).await;
    assert_eq!(delivery.message_id(), Some("evt-1"));
    delivery.ack().await.expect("ack");
    drop(stream);
    drop(delivery);
    other.close().await.expect("close");

    assert!(tool.delete_topology_if_unused().await.expect("cleanup"));
    for queue in tool.topology().all_queues() {
        assert!(tool.queue_depth(&queue).await.is_err(), "{queue} deleted");
    }
}

/// Only deja's retry copies say which attempt a turn is on: a publisher's own
/// `x-deja-attempt` would spend (or reset) the attempts of its turn.
#[tokio::test]
async fn an_attempt_header_a_publisher_sets_is_ignored() {
    use lapin::types::{AMQPValue, FieldTable};
    let settings = settings();
    let bus = bus(&settings).await;
    // A publisher's own connection, as an agent runtime's.
    let publisher = lapin::Connection::connect(
        settings.uri.expose(),
        lapin::ConnectionProperties::default(),
    )
    .await
    .expect("publisher connection");
    let channel = publisher.create_channel().await.expect("channel");
    let mut headers = FieldTable::default();
    headers.insert(deja_bus::HEADER_ATTEMPT.into(), AMQPValue::LongLongInt(5));
    channel
        .basic_publish(
            settings.exchange.as_str().into(),
            "turn.acme.checkout".into(),
            lapin::options::BasicPublishOptions::default(),
            &event("evt-forged"),
            lapin::BasicProperties::default().with_headers(headers),
        )
        .await
        .expect("publish")
        .await
        .expect("published");

    let mut stream = bus
        .consume(&settings.extract_queue(), 4, "t1")
        .await
        .unwrap();
    let first = next(&mut stream, WAIT).await;
    assert_eq!(first.attempt(), 1, "the publisher's header is not believed");
    let scheduled = first
        .retry(&bus, Duration::from_millis(50))
        .await
        .expect("retry");
    assert_eq!(scheduled.next_attempt, 2);
    let second = next(&mut stream, WAIT).await;
    assert_eq!(second.attempt(), 2, "deja's own copy is");
    second.ack().await.unwrap();
    let _ = publisher.close(200, "done".into()).await;
    cleanup(&bus).await;
}
