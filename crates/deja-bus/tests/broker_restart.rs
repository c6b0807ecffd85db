//! Restarts the shared RabbitMQ (`rabbitmqctl stop_app` / `start_app` through
//! `deploy/rabbitmq/rabbitmq.sh`), so it is ignored by default: it would break anyone else's
//! tests running against the same broker. Run it alone:
//!
//! `cargo test -p deja-bus --test broker_restart -- --ignored`

mod common;

use common::{bus, cleanup, event, next, settings};
use deja_bus::{Bus, PublishMeta};
use futures::StreamExt;
use std::process::Command;
use std::time::Duration;

fn rabbitmq(action: &str) {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/rabbitmq/rabbitmq.sh"
    );
    let status = Command::new(script)
        .arg(action)
        .status()
        .expect("run deploy/rabbitmq/rabbitmq.sh");
    assert!(status.success(), "rabbitmq.sh {action} failed");
}

#[tokio::test]
#[ignore = "restarts the shared broker; run alone with --ignored"]
async fn after_a_broker_restart_the_stream_reports_it_and_a_reconnect_resumes_work() {
    let settings = settings();
    let bus = bus(&settings).await;
    let meta = PublishMeta::turn("acme", "checkout").with_message_id("before");
    bus.publish_turn(&event("before"), &meta).await.unwrap();
    let mut stream = bus
        .consume(&settings.extract_queue(), 4, "restart")
        .await
        .unwrap();
    // Held unacked across the outage: the broker must redeliver it afterwards.
    let held = next(&mut stream, Duration::from_secs(10)).await;

    rabbitmq("stop-app");
    let ended = tokio::time::timeout(Duration::from_secs(30), stream.next())
        .await
        .expect("the stream notices the outage");
    eprintln!("stream after stop_app: {ended:?}");
    match ended {
        None => {}
        Some(Err(e)) => assert!(e.is_transient() && e.is_connection_lost(), "{e}"),
        Some(Ok(d)) => panic!("unexpected delivery {d:?}"),
    }
    assert!(!bus.is_connected());
    let err = bus.publish_turn(b"{}", &meta).await.unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(
        held.ack().await.is_err(),
        "an ack on a dead channel is reported"
    );

    let restarter = tokio::task::spawn_blocking(|| {
        std::thread::sleep(Duration::from_secs(2));
        rabbitmq("start-app");
    });
    let bus = Bus::connect_with_retry(&settings, "deja-bus-test", std::future::pending())
        .await
        .expect("reconnects")
        .expect("no shutdown");
    restarter.await.unwrap();
    bus.declare_topology().await.unwrap();

    let mut stream = bus
        .consume(&settings.extract_queue(), 4, "restart")
        .await
        .unwrap();
    let again = next(&mut stream, Duration::from_secs(10)).await;
    assert_eq!(
        again.message_id(),
        Some("before"),
        "durable message survived"
    );
    again.ack().await.unwrap();
    let meta = PublishMeta::turn("acme", "checkout").with_message_id("after");
    bus.publish_turn(&event("after"), &meta).await.unwrap();
    let after = next(&mut stream, Duration::from_secs(10)).await;
    assert_eq!(after.message_id(), Some("after"));
    after.ack().await.unwrap();
    drop(stream);
    cleanup(&bus).await;
}
