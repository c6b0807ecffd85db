//! Shared setup for the integration tests: real RabbitMQ, a unique name prefix per test.
#![allow(dead_code)] // each test binary uses a different subset

use deja_bus::{Bus, Deliveries, Delivery};
use deja_config::{QueueType, RabbitSettings, Secret};
use futures::StreamExt;
use std::time::Duration;

/// Settings whose exchange and queues are unique to one test: `deja.test.<uuid>`.
pub fn settings() -> RabbitSettings {
    let mut settings = deja_config::Settings::defaults().rabbitmq;
    if let Ok(uri) = std::env::var("DEJA__RABBITMQ__URI") {
        settings.uri = Secret::new(uri);
    }
    let prefix = format!("deja.test.{}", uuid::Uuid::new_v4().simple());
    settings.exchange = format!("{prefix}.turns");
    settings.name_prefix = prefix;
    settings.queue_type = QueueType::Classic;
    settings.max_attempts = 6;
    // Levels: 250, 500, 1000, 2000, 4000 ms.
    settings.retry_base_ms = 250;
    settings.retry_max_ms = 4000;
    settings.reconnect_max_ms = 1000;
    settings
}

/// Connects and declares the topology; panics with a hint when RabbitMQ is not running.
pub async fn bus(settings: &RabbitSettings) -> Bus {
    let bus = Bus::connect_named(settings, "deja-bus-test")
        .await
        .unwrap_or_else(|e| {
            panic!(
                "{}; start RabbitMQ with deploy/services.sh up",
                deja_domain::error_chain(&e)
            )
        });
    bus.declare_topology().await.expect("declare topology");
    bus
}

/// The next delivery, or a panic after `within`.
pub async fn next(stream: &mut Deliveries, within: Duration) -> Delivery {
    tokio::time::timeout(within, stream.next())
        .await
        .expect("no delivery in time")
        .expect("stream ended")
        .expect("delivery error")
}

pub fn event(event_id: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({"schema_version": 1, "event_id": event_id}))
        .expect("json")
}

pub async fn cleanup(bus: &Bus) {
    if let Err(e) = bus.delete_topology().await {
        eprintln!("cleanup failed: {e}");
    }
}
