//! The memory-search API running in-process on a random port against the real Neo4j and
//! RabbitMQ, with its own org, bearer tokens, synthesis queue and fake LLM (for the
//! synthesizer the tests step by hand), plus helpers to seed embedded episodes and call it.

use deja_api::{Application, Dependencies, SynthesisQueue};
use deja_bus::Bus;
use deja_config::{ApiToken, Secret, Settings};
use deja_domain::{Component, Episode};
use deja_fake_llm::FakeLlm;
use deja_graph::{GraphStore, SaveOutcome};
use deja_llm::LlmClient;
use deja_worker::{SynthesisOutcome, Synthesizer};
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Bearer tokens of one test app (each at least 16 characters, as validation requires).
#[derive(Debug, Clone)]
pub struct Tokens {
    /// The whole org.
    pub org: String,
    /// Team `checkout` only.
    pub checkout: String,
    /// Another org.
    pub other_org: String,
    /// The org, but only the `review` scope (named `review-holder` in audit records).
    pub review_only: String,
    /// Team `checkout` only, `review` scope (named `reviewcheckout-holder`).
    pub review_checkout: String,
    /// Teams `checkout` and `payments`, `review` scope (named `reviewteams-holder`).
    pub review_teams: String,
}

/// Settings for one API test: unique queue prefix, loopback port 0, tokens for `org`.
pub fn api_settings(org: &str, fake_llm_url: &str) -> (Settings, Tokens) {
    let mut settings = crate::test_settings();
    let suffix = crate::unique_suffix();
    settings.rabbitmq.exchange = format!("deja.test.{suffix}.turns");
    settings.rabbitmq.name_prefix = format!("deja.test.{suffix}");
    // Fast synthesis retries (in process, see deja_worker::Synthesizer::handle).
    settings.rabbitmq.max_attempts = 3;
    settings.rabbitmq.retry_base_ms = 100;
    settings.rabbitmq.retry_max_ms = 400;
    settings.llm.base_url = fake_llm_url.to_owned();
    settings.llm.model = "fake".to_owned();
    settings.llm.timeout_secs = 5;
    settings.embedding = crate::embedding_settings();
    settings.api.bind = "127.0.0.1:0".to_owned();
    settings.api.dev = false;
    // Tests run many searches at once on two cores: give reranking and the strategy step all
    // the time they need, so that answers do not depend on the machine's load (a loaded run
    // saw the strategy step's 500 ms lapse). The degraded paths (reranking or the strategy
    // out of time) have tests of their own.
    settings.search.deadline_ms = 20_000;
    settings.search.rerank_budget_ms = 20_000;
    settings.search.strategy_timeout_ms = 10_000;
    let tokens = Tokens {
        org: format!("tok-org-{suffix}"),
        checkout: format!("tok-checkout-{suffix}"),
        other_org: format!("tok-other-{suffix}"),
        review_only: format!("tok-review-{suffix}"),
        review_checkout: format!("tok-reviewcheckout-{suffix}"),
        review_teams: format!("tok-reviewteams-{suffix}"),
    };
    let token = |value: &str, org: &str, teams: &[&str], scopes: &[&str]| ApiToken {
        token: Secret::new(value),
        org: org.to_owned(),
        teams: teams.iter().map(|t| t.to_string()).collect(),
        scopes: scopes.iter().map(|s| s.to_string()).collect(),
        name: Some(format!(
            "{}-holder",
            value.split('-').nth(1).unwrap_or("token")
        )),
    };
    settings.api.tokens = vec![
        token(&tokens.org, org, &[], &["search"]),
        token(&tokens.checkout, org, &["checkout"], &["search"]),
        token(&tokens.other_org, &format!("{org}-other"), &[], &["search"]),
        token(&tokens.review_only, org, &[], &["review"]),
        token(&tokens.review_checkout, org, &["checkout"], &["review"]),
        token(
            &tokens.review_teams,
            org,
            &["checkout", "payments"],
            &["review"],
        ),
    ];
    (settings, tokens)
}

pub struct ApiApp {
    pub settings: Settings,
    pub org: String,
    pub tokens: Tokens,
    pub base_url: String,
    pub client: reqwest::Client,
    pub store: GraphStore,
    pub bus: Bus,
    pub fake: FakeLlm,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl ApiApp {
    /// An API with the real embedder and a synthesis queue of its own.
    pub async fn start() -> ApiApp {
        ApiApp::start_tuned(|_| {}, true).await
    }

    /// Like [`ApiApp::start`], with settings adjusted by `tune` and optionally no embedder.
    pub async fn start_tuned(tune: impl FnOnce(&mut Settings), with_embedder: bool) -> ApiApp {
        ApiApp::start_with(tune, with_embedder.then(crate::embedder)).await
    }

    /// Like [`ApiApp::start_tuned`], with this `embedder` (`None`: none loaded).
    pub async fn start_with(
        tune: impl FnOnce(&mut Settings),
        embedder: Option<Arc<dyn deja_embed::Embedder>>,
    ) -> ApiApp {
        let with_embedder = embedder.is_some();
        let fake = FakeLlm::start().await;
        let org = crate::unique_org();
        let (mut settings, tokens) = api_settings(&org, &fake.base_url());
        tune(&mut settings);
        // The shared Neo4j for seeding and checks, even when the API's own points elsewhere.
        let store = crate::store_for(&crate::test_settings()).await;
        // The shared RabbitMQ for the test's topology and checks, even when the API's own
        // points elsewhere (a broker that is down).
        let mut shared_broker = settings.rabbitmq.clone();
        shared_broker.uri = crate::test_settings().rabbitmq.uri;
        let bus = Bus::connect_named(&shared_broker, "deja-test-api")
            .await
            .expect("rabbitmq is up (deploy/services.sh up)");
        bus.declare_topology().await.expect("topology");
        let deps = Dependencies {
            store: GraphStore::connect(&settings.neo4j)
                .await
                .expect("neo4j settings"),
            embedder,
            reranker: (with_embedder && settings.search.rerank).then(crate::reranker),
            late: (with_embedder && settings.late_interaction.enabled).then(crate::late_encoder),
            verifier: deja_api::verifier(&settings).expect("verifier settings"),
            jobs: Some(Arc::new(SynthesisQueue::new(&settings))),
        };
        let app = Application::build(&settings, deps)
            .await
            .expect("api builds");
        let base_url = format!("http://127.0.0.1:{}", app.port());
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let task = tokio::spawn(app.run_until_stopped(async {
            let _ = stop_rx.await;
        }));
        ApiApp {
            settings,
            org,
            tokens,
            base_url,
            client: reqwest::Client::new(),
            store,
            bus,
            fake,
            stop: Some(stop_tx),
            task: Some(task),
        }
    }

    /// `POST /v1/memory/search` with `body`; returns (status, JSON body).
    pub async fn search(&self, token: Option<&str>, body: &Value) -> (u16, Value) {
        let mut request = self
            .client
            .post(format!("{}/v1/memory/search", self.base_url))
            .json(body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        read(request.send().await.expect("search request")).await
    }

    /// A search of the whole org with the org token that must succeed; returns `result`.
    pub async fn search_ok(&self, body: &Value) -> Value {
        let (status, json) = self.search(Some(&self.tokens.org), body).await;
        assert_eq!(status, 200, "{json}");
        assert_eq!(json["success"], true, "{json}");
        json["result"].clone()
    }

    pub async fn get(&self, token: Option<&str>, path: &str) -> (u16, Value) {
        let mut request = self.client.get(format!("{}{path}", self.base_url));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        read(request.send().await.expect("get request")).await
    }

    /// The late-interaction encoder when this app's settings enable it.
    pub fn late(&self) -> Option<Arc<dyn deja_embed::LateEncoder>> {
        self.settings
            .late_interaction
            .enabled
            .then(crate::late_encoder)
    }

    /// Saves an `ok` episode of `team` embedded with the real model (and its token vectors
    /// when late interaction is on) and returns it.
    pub async fn seed(&self, team: &str, correlation_id: &str, spec: &Seed) -> Episode {
        let mut episode = crate::sample_episode(&self.org, team, correlation_id, Vec::new());
        episode.issue_type = spec.issue_type.to_owned();
        episode.issue_description = spec.description.to_owned();
        episode.summary = spec.summary.to_owned();
        episode.root_cause = spec.root_cause.map(str::to_owned);
        episode.components = spec.components.clone();
        episode.key_findings = vec![spec.finding.to_owned()];
        let now = chrono::Utc::now();
        episode.created_at = now;
        episode.updated_at = now;
        episode.last_confirmed_at = now;
        let text = episode.embedding_text();
        let vectors = deja_embed::embed_blocking(crate::embedder(), vec![text])
            .await
            .expect("embedding");
        episode.embedding = vectors.into_iter().next();
        episode.embedding_model = Some(crate::embedder().model_id().to_owned());
        // A deadlock with another test's write (shared component and skill nodes) comes
        // back as a conflict too: retry it; a conflict over an existing episode is a bug.
        for _ in 0..5 {
            match self.store.save(&episode, None).await.expect("save episode") {
                SaveOutcome::Saved { version } => {
                    episode.version = version;
                    if let Some(encoder) = self.late() {
                        deja_recognition::ensure_tokens(
                            &self.store,
                            &encoder,
                            Some(&crate::embedder()),
                            &episode,
                        )
                        .await
                        .expect("token vectors");
                    }
                    return episode;
                }
                SaveOutcome::Conflict => {
                    let key = deja_domain::EpisodeKey::new(&self.org, correlation_id);
                    let existing = self.store.get_by_key(&key).await.expect("read episode");
                    assert!(
                        existing.is_none(),
                        "episode {correlation_id} already exists"
                    );
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            }
        }
        panic!("episode {correlation_id} could not be saved after 5 deadlocks")
    }

    /// Imports the records of `tests/fixtures/eval/incidents.jsonl` with these ids into
    /// this app's org, through the import code path (`deja_worker::jobs::import_one`).
    pub async fn import_eval_incidents(&self, ids: &[&str]) -> Vec<Episode> {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/eval/incidents.jsonl");
        let text = std::fs::read_to_string(&path).expect("eval incidents");
        let mut episodes = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let mut record = deja_domain::import::IncidentRecord::parse(line).expect("record");
            if !ids.contains(&record.id.as_str()) {
                continue;
            }
            record.org = self.org.clone();
            let episode = record.to_episode(chrono::Utc::now()).expect("valid record");
            let late = self.late();
            let saved = deja_worker::jobs::import_one(
                &self.store,
                &crate::embedder(),
                late.as_ref(),
                episode,
            )
            .await
            .expect("import");
            episodes.push(saved);
        }
        assert_eq!(episodes.len(), ids.len(), "every id names an eval incident");
        episodes
    }

    /// The org-wide strategy key the Maven seeds (`maven_oom`) qualify for.
    pub fn maven_strategy_key(&self) -> deja_domain::strategy::StrategyKey {
        deja_domain::strategy::StrategyKey {
            org: self.org.clone(),
            team: deja_domain::strategy::ORG_WIDE_TEAM.to_owned(),
            issue_type: "build-failure".to_owned(),
            component: Component::new("pipeline", "jenkins"),
        }
    }

    /// Messages waiting in this app's synthesis queue.
    pub async fn synthesis_depth(&self) -> u32 {
        self.bus
            .queue_depth(&self.settings.rabbitmq.synthesis_queue())
            .await
            .expect("queue depth")
    }

    /// Polls until the synthesis queue holds `depth` messages; panics after `timeout`.
    pub async fn wait_for_depth(&self, depth: u32, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let now = self.synthesis_depth().await;
            if now == depth {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "synthesis queue depth {now}, expected {depth}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The worker's synthesizer, on this app's fake LLM.
    pub fn synthesizer(&self) -> Synthesizer {
        let llm = Arc::new(LlmClient::new(&self.settings.llm).expect("llm client"));
        Synthesizer::new(self.store.clone(), llm, "fake").with_failure_cooldown(
            Duration::from_secs(self.settings.search.strategy_failure_cooldown_secs),
        )
    }

    /// The worker's extraction step on this app's store and fake LLM (auto mode: the root
    /// cause is the answer's `Root cause: ...` sentence).
    pub fn extractor(&self) -> deja_worker::Extractor {
        let llm = Arc::new(LlmClient::new(&self.settings.llm).expect("llm client"));
        // Recurrence links decide with the cross-encoder, as `deja worker` loads it.
        deja_worker::Extractor::new(self.store.clone(), llm, crate::embedder(), &self.settings)
            .with_reranker(self.settings.worker.link_recurrences.then(crate::reranker))
            .with_late(self.late())
    }

    /// One agent turn through the worker's own step (parse, keep the input, extract, merge,
    /// embed, write), as a delivery of `event` would be.
    pub async fn agent_turn(&self, event: &deja_domain::TurnEvent) -> deja_worker::Outcome {
        let body = serde_json::to_vec(event).expect("event json");
        self.extractor().process(&body, 1).await
    }

    /// A request with `method` on `path`, optional bearer token, headers and JSON body.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, String)],
        body: Option<&Value>,
    ) -> (u16, reqwest::header::HeaderMap, Value) {
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.base_url));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.expect("request");
        let headers = response.headers().clone();
        let (status, json) = read(response).await;
        (status, headers, json)
    }

    /// Takes one job off the synthesis queue and lets the synthesizer handle (and settle) it,
    /// as the worker would; returns the job.
    pub async fn run_one_synthesis_job(&self) -> deja_domain::strategy::SynthesisJob {
        let queue = self.settings.rabbitmq.synthesis_queue();
        let delivery = self
            .bus
            .get_one(&queue)
            .await
            .expect("basic.get")
            .expect("a synthesis job is queued");
        let job: deja_domain::strategy::SynthesisJob =
            serde_json::from_slice(delivery.body()).expect("the job body is a SynthesisJob");
        self.synthesizer().handle(&self.bus, &delivery).await;
        job
    }

    /// Synthesizes `key` directly, bypassing the queue.
    pub async fn synthesize(&self, key: &deja_domain::strategy::StrategyKey) -> SynthesisOutcome {
        self.synthesizer().synthesize(key).await
    }

    /// Stops the server and deletes the test's queues and exchanges.
    pub async fn cleanup(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
        }
        let _ = self.bus.delete_topology().await;
    }
}

async fn read(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let text = response.text().await.expect("response body");
    let json = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("status {status}: body is not json ({e}): {text}"));
    (status, json)
}

/// What a seeded episode is about.
#[derive(Debug, Clone)]
pub struct Seed {
    pub issue_type: &'static str,
    pub description: &'static str,
    pub summary: &'static str,
    pub root_cause: Option<&'static str>,
    pub finding: &'static str,
    pub components: Vec<Component>,
}

/// Maven builds of the surveys module running out of heap on Jenkins: the recurring pattern.
pub fn maven_oom(variant: usize) -> Seed {
    const DESCRIPTIONS: [&str; 4] = [
        "Jenkins build of surveys-module fails: Maven surefire tests die with OutOfMemoryError",
        "surveys-module test stage on Jenkins crashes, java.lang.OutOfMemoryError: Java heap space in Maven",
        "Maven test run for surveys-module killed on the Jenkins agent, heap exhausted",
        "Jenkins pipeline red: surveys-module Maven tests out of memory during surefire fork",
    ];
    const ROOT_CAUSES: [&str; 4] = [
        "surefire forked JVM heap too small for the surveys-module tests",
        "a test fixture in surveys-module loads the whole survey dataset into memory",
        "MAVEN_OPTS heap lowered on the Jenkins agents, surveys-module tests need more",
        "parallel surefire forks on the Jenkins agent exhaust the surveys-module test heap",
    ];
    Seed {
        issue_type: "build-failure",
        description: DESCRIPTIONS[variant % 4],
        summary: "surveys-module Maven tests ran out of heap on Jenkins; raised the surefire heap",
        root_cause: Some(ROOT_CAUSES[variant % 4]),
        finding: "java.lang.OutOfMemoryError: Java heap space in surefire fork",
        components: vec![
            Component::new("pipeline", "jenkins"),
            Component::new("service", "surveys-module"),
        ],
    }
}

/// An unrelated incident.
pub fn tls_expiry() -> Seed {
    Seed {
        issue_type: "certificate-expiry",
        description: "payments gateway rejects TLS handshakes, certificate expired",
        summary: "the payments gateway certificate expired; renewed it and fixed cert-manager",
        root_cause: Some("cert-manager renewal failed silently"),
        finding: "x509: certificate has expired or is not yet valid",
        components: vec![Component::new("service", "payments-gateway")],
    }
}

pub const MAVEN_QUERY: &str = "Maven OOM surveys-module test failure Jenkins";
