//! Tests that stop and restart the shared Neo4j and RabbitMQ. They are `#[ignore]`d so that
//! the main suite never runs them alongside other tests; deploy/test.sh runs them alone with
//! `--ignored --test-threads=1`.

use deja_fake_llm::FakeLlm;
use deja_tests::worker_app::{worker_settings, TurnBuilder, WorkerApp};
use std::process::Command;
use std::time::Duration;

fn deploy(script: &str, args: &[&str]) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/");
    let status = Command::new(format!("{path}{script}"))
        .args(args)
        .status()
        .unwrap_or_else(|e| panic!("run deploy/{script}: {e}"));
    assert!(status.success(), "deploy/{script} {args:?} failed");
}

/// Settings that ride out an outage of several seconds on the retry path.
fn patient_settings(fake: &FakeLlm) -> deja_config::Settings {
    let mut settings = worker_settings(&fake.base_url());
    settings.rabbitmq.max_attempts = 30;
    settings.rabbitmq.retry_base_ms = 500;
    settings.rabbitmq.retry_max_ms = 2000;
    settings
}

async fn publish_batch(app: &WorkerApp, prefix: &str, count: usize) {
    for i in 0..count {
        let event = TurnBuilder::new(&app.org, "sre-platform", &format!("{prefix}-{i}"), 1)
            .answer(&format!(
                "Root cause: disk pressure on node {prefix}-{i}, confirmed."
            ))
            .build();
        app.publish(&event).await;
    }
}

async fn wait_batch(app: &WorkerApp, prefix: &str, count: usize) {
    for i in 0..count {
        app.wait_for_episode(&format!("{prefix}-{i}"), Duration::from_secs(120), |e| {
            e.embedding.is_some()
        })
        .await;
    }
}

#[tokio::test]
#[ignore = "stops the shared Neo4j; run alone by deploy/test.sh"]
async fn a_neo4j_outage_of_half_a_minute_costs_no_attempts_and_dead_letters_nothing() {
    let fake = FakeLlm::start().await;
    let mut settings = worker_settings(&fake.base_url());
    // One attempt per turn: any attempt spent on the outage would dead-letter the turn.
    settings.rabbitmq.max_attempts = 1;
    settings.worker.probe_max_ms = 2000;
    let app = WorkerApp::start_with(settings, fake).await;
    publish_batch(&app, "before", 3).await;
    wait_batch(&app, "before", 3).await;

    deploy("neo4j/neo4j.sh", &["stop"]);
    publish_batch(&app, "during", 12).await;
    let readiness = app.readiness();
    while !readiness.is_paused() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let reason = readiness.not_ready().expect("not ready while paused");
    assert_eq!(reason["paused"], "neo4j down", "{reason}");
    // Keep the database down for a while: far longer than the retry budget used to last.
    tokio::time::sleep(Duration::from_secs(25)).await;
    let dlq = app.bus.topology().dead_letter_queue.clone();
    assert_eq!(
        app.bus.queue_depth(&dlq).await.unwrap(),
        0,
        "nothing dead-lettered during the outage"
    );
    assert!(readiness.is_paused(), "still paused while neo4j is down");
    deploy("neo4j/neo4j.sh", &["start"]);

    wait_batch(&app, "during", 12).await;
    assert_eq!(app.bus.queue_depth(&dlq).await.unwrap(), 0);
    let queue = app.bus.topology().extract_queue.clone();
    assert_eq!(
        app.bus.queue_depth(&queue).await.unwrap(),
        0,
        "every turn acked"
    );
    app.cleanup().await;
}

#[tokio::test]
#[ignore = "restarts the shared RabbitMQ; run alone by deploy/test.sh"]
async fn the_worker_reconnects_after_a_rabbitmq_restart_and_continues() {
    let fake = FakeLlm::start().await;
    let app = WorkerApp::start_with(patient_settings(&fake), fake).await;
    publish_batch(&app, "pre", 3).await;
    wait_batch(&app, "pre", 3).await;

    deploy("rabbitmq/rabbitmq.sh", &["restart-app"]);
    // The test's own publisher connection died with the broker: reconnect it.
    let bus = deja_bus::Bus::connect_named(&app.settings.rabbitmq, "deja-test-2")
        .await
        .expect("reconnect test publisher");
    for i in 0..4 {
        let event = TurnBuilder::new(&app.org, "sre-platform", &format!("post-{i}"), 1)
            .answer(&format!(
                "Root cause: disk pressure on node post-{i}, confirmed."
            ))
            .build();
        let meta =
            deja_bus::PublishMeta::turn(&app.org, "sre-platform").with_message_id(&event.event_id);
        bus.publish_turn(&serde_json::to_vec(&event).unwrap(), &meta)
            .await
            .expect("publish after restart");
    }
    wait_batch(&app, "post", 4).await;
    let _ = bus.delete_topology().await;
    app.cleanup().await;
}
