//! A worker running in-process against the real Neo4j and RabbitMQ, with its own queue
//! names (one topology per test) and its own fake LLM, plus helpers to publish turns and
//! wait for their episodes.

use chrono::{DateTime, Duration as ChronoDuration, Utc};
use deja_bus::{Bus, Delivery, PublishMeta};
use deja_config::Settings;
use deja_domain::{Episode, EpisodeKey, ToolCall, TurnEvent};
use deja_fake_llm::FakeLlm;
use deja_graph::GraphStore;
use deja_worker::{Application, Dependencies, Readiness};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Settings for one test: shared services, unique queue names, fast retries.
pub fn worker_settings(fake_llm_url: &str) -> Settings {
    let mut settings = crate::test_settings();
    settings.embedding = crate::embedding_settings();
    let prefix = format!("deja.test.{}", crate::unique_suffix());
    settings.rabbitmq.exchange = format!("{prefix}.turns");
    settings.rabbitmq.name_prefix = prefix;
    settings.rabbitmq.max_attempts = 3;
    settings.rabbitmq.retry_base_ms = 100;
    settings.rabbitmq.retry_max_ms = 400;
    settings.rabbitmq.reconnect_max_ms = 1000;
    settings.llm.base_url = fake_llm_url.to_owned();
    settings.llm.model = "fake".to_owned();
    settings.llm.timeout_secs = 5;
    settings.worker.shutdown_grace_secs = 10;
    // Status routes on a free port: every test worker serves its own `/readyz`.
    settings.worker.metrics_addr = "127.0.0.1:0".to_owned();
    settings
}

pub struct WorkerApp {
    pub settings: Settings,
    pub org: String,
    pub fake: FakeLlm,
    pub store: GraphStore,
    pub bus: Bus,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
    readiness: Option<Readiness>,
    status_address: Option<SocketAddr>,
}

impl WorkerApp {
    /// Starts a worker with its own org, queues and fake LLM.
    pub async fn start() -> WorkerApp {
        let fake = FakeLlm::start().await;
        let settings = worker_settings(&fake.base_url());
        WorkerApp::start_with(settings, fake).await
    }

    pub async fn start_with(settings: Settings, fake: FakeLlm) -> WorkerApp {
        let store = crate::store_for(&settings).await;
        let bus = Bus::connect_named(&settings.rabbitmq, "deja-test")
            .await
            .expect("rabbitmq is up (deploy/services.sh up)");
        bus.declare_topology().await.expect("topology");
        let mut app = WorkerApp {
            settings,
            org: crate::unique_org(),
            fake,
            store,
            bus,
            stop: None,
            task: None,
            readiness: None,
            status_address: None,
        };
        app.spawn_worker().await;
        app
    }

    /// (Re)starts the in-process worker, built as `deja worker` builds it.
    pub async fn spawn_worker(&mut self) {
        let deps = Dependencies {
            store: self.store.clone(),
            embedder: crate::embedder(),
            // Recurrence links are decided with the similarity-only calibration here: the
            // cross-encoder would add its cost to every turn of every worker test;
            // api::recurrence covers linking with it.
            reranker: None,
            late: self
                .settings
                .late_interaction
                .enabled
                .then(crate::late_encoder),
        };
        let worker = Application::build(&self.settings, deps)
            .await
            .unwrap_or_else(|e| panic!("worker startup: {}", deja_domain::error_chain(&e)));
        self.readiness = Some(worker.readiness());
        self.status_address = worker.status_address();
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        self.task = Some(tokio::spawn(async move {
            let shutdown = async {
                let _ = stop_rx.await;
            };
            if let Err(error) = worker.run_until_stopped(shutdown).await {
                panic!("worker failed: {error}");
            }
        }));
        self.stop = Some(stop_tx);
    }

    /// The running worker's readiness (what its `/readyz` answers).
    pub fn readiness(&self) -> Readiness {
        self.readiness.clone().expect("the worker was started")
    }

    /// Where the running worker serves `/metrics` and `/readyz`.
    pub fn status_address(&self) -> SocketAddr {
        self.status_address
            .expect("the worker was started with worker.metrics_addr set")
    }

    /// Signals shutdown and waits for the drain.
    pub async fn stop_worker(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.expect("worker task ended cleanly");
        }
    }

    pub fn key(&self, correlation_id: &str) -> EpisodeKey {
        EpisodeKey::new(&self.org, correlation_id)
    }

    pub async fn publish(&self, event: &TurnEvent) {
        let body = serde_json::to_vec(event).expect("event serialises");
        let meta = PublishMeta::turn(&event.org, &event.team).with_message_id(&event.event_id);
        self.bus
            .publish_turn(&body, &meta)
            .await
            .expect("publish confirmed");
    }

    pub async fn publish_raw(&self, body: &[u8]) {
        let meta = PublishMeta::turn(&self.org, "raw");
        self.bus
            .publish_turn(body, &meta)
            .await
            .expect("publish confirmed");
    }

    /// Polls the store until the conversation's episode satisfies `ready`.
    pub async fn wait_for_episode(
        &self,
        correlation_id: &str,
        timeout: Duration,
        ready: impl Fn(&Episode) -> bool,
    ) -> Episode {
        let key = self.key(correlation_id);
        let deadline = Instant::now() + timeout;
        let mut last = None;
        while Instant::now() < deadline {
            if let Ok(Some(episode)) = self.store.get_by_key(&key).await {
                if ready(&episode) {
                    return episode;
                }
                last = Some(episode);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("episode {correlation_id} not ready after {timeout:?}; last seen: {last:#?}");
    }

    /// Waits until `count` dead letters are in the DLQ and takes them (acked).
    pub async fn take_dead_letters(&self, count: usize, timeout: Duration) -> Vec<Delivery> {
        let queue = self.bus.topology().dead_letter_queue.clone();
        let deadline = Instant::now() + timeout;
        let mut letters = Vec::new();
        while letters.len() < count && Instant::now() < deadline {
            match self
                .bus
                .get_one(&queue)
                .await
                .expect("basic.get on the DLQ")
            {
                Some(letter) => {
                    letter.ack().await.expect("ack dead letter");
                    letters.push(letter);
                }
                None => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
        letters
    }

    /// Deletes the test's queues and exchanges.
    pub async fn cleanup(mut self) {
        self.stop_worker().await;
        let _ = self.bus.delete_topology().await;
    }
}

/// A turn event of `app.org`; `final_answer` drives the fake LLM's extraction (see
/// crates/deja-fake-llm: `Root cause:` sentences, `#issue-type` tags, `key=value` components).
pub struct TurnBuilder {
    event: TurnEvent,
}

impl TurnBuilder {
    pub fn new(org: &str, team: &str, correlation_id: &str, turn_index: u32) -> TurnBuilder {
        let started: DateTime<Utc> =
            deja_domain::testing::fixed_time() + ChronoDuration::minutes(i64::from(turn_index) * 5);
        TurnBuilder {
            event: TurnEvent {
                org: org.to_owned(),
                team: team.to_owned(),
                started_at: started,
                ended_at: started + ChronoDuration::minutes(4),
                user_message: "[FIRING] CheckoutErrors service=checkout #cache-eviction".to_owned(),
                final_answer: format!("Turn {turn_index}: still investigating."),
                ..deja_domain::testing::turn_event(correlation_id, turn_index)
            },
        }
    }

    pub fn user_message(mut self, text: &str) -> Self {
        self.event.user_message = text.to_owned();
        self
    }

    pub fn answer(mut self, text: &str) -> Self {
        self.event.final_answer = text.to_owned();
        self
    }

    pub fn tool(mut self, name: &str, skill: &str, output: &str) -> Self {
        self.event.tool_calls.push(ToolCall {
            name: name.to_owned(),
            skill: Some(skill.to_owned()),
            input: serde_json::json!({"query": name}),
            output: output.to_owned(),
            status: "ok".to_owned(),
        });
        self
    }

    /// A tool call with an explicit input.
    pub fn tool_with_input(
        mut self,
        name: &str,
        skill: &str,
        input: serde_json::Value,
        output: &str,
    ) -> Self {
        self.event.tool_calls.push(ToolCall {
            name: name.to_owned(),
            skill: Some(skill.to_owned()),
            input,
            output: output.to_owned(),
            status: "ok".to_owned(),
        });
        self
    }

    /// The event's `conclusion` block, as the JSON a runtime would send.
    pub fn conclusion(mut self, block: serde_json::Value) -> Self {
        self.event.conclusion =
            Some(serde_json::from_value(block).expect("a conclusion block of the contract"));
        self
    }

    pub fn build(self) -> TurnEvent {
        self.event
    }
}
