//! The API under a burst: searches that give up on a busy model leave no inference behind,
//! identical concurrent queries cost one inference, and `/readyz` does not wait behind the
//! searches' connection pool.

use deja_embed::{Admission, CachingEmbedder, EmbedError, Embedder};
use deja_tests::api_app::{maven_oom, ApiApp};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The real model with one session, as `LocalEmbedder` has (its admission of one is checked
/// in crates/deja-embed/tests/real_model.rs), on a machine whose cores are busy: each
/// inference holds the session for `busy`. Records the texts of the inferences that reached
/// it (entered, waiting for the session or running).
struct BusyModel {
    real: Arc<dyn Embedder>,
    admission: Admission,
    session: Mutex<()>,
    busy: Duration,
    reached: Arc<Mutex<Vec<String>>>,
}

impl BusyModel {
    /// The model behind the query LRU, as `deja serve` builds it, and what reached it.
    fn behind_the_cache(busy: Duration) -> (Arc<dyn Embedder>, Arc<Mutex<Vec<String>>>) {
        let reached = Arc::default();
        let model = BusyModel {
            real: deja_tests::embedder(),
            admission: Admission::new(1),
            session: Mutex::new(()),
            busy,
            reached: Arc::clone(&reached),
        };
        (Arc::new(CachingEmbedder::new(model, 1024)), reached)
    }
}

impl Embedder for BusyModel {
    fn model_id(&self) -> &str {
        self.real.model_id()
    }

    fn dimensions(&self) -> usize {
        self.real.dimensions()
    }

    fn admission(&self) -> Option<&Admission> {
        Some(&self.admission)
    }

    fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.reached
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(texts.iter().cloned());
        let _session = self.session.lock().unwrap_or_else(|e| e.into_inner());
        std::thread::sleep(self.busy);
        self.real.embed(texts)
    }
}

fn reached(texts: &Mutex<Vec<String>>) -> Vec<String> {
    texts.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

#[tokio::test]
async fn searches_that_gave_up_on_a_busy_model_leave_no_inference_behind() {
    // One inference takes a second; each search waits half of its 400 ms deadline for its
    // query's vector, then answers from full text (or runs out of time).
    let (embedder, texts) = BusyModel::behind_the_cache(Duration::from_secs(1));
    let app = ApiApp::start_with(|s| s.search.deadline_ms = 400, Some(embedder)).await;
    let searches = (0..12).map(|k| {
        let body = json!({"query": format!("checkout latency spike number {k}")});
        let app = &app;
        async move { app.search(Some(&app.tokens.org), &body).await }
    });
    for (status, json) in futures::future::join_all(searches).await {
        assert!(status == 200 || status == 504, "{status} {json}");
    }
    // Every search has answered. Past the one inference admitted first, nothing runs for
    // searches that stopped waiting: before the admission each of them had a blocking thread
    // waiting for the model's session, and ran its inference in turn (12 s of backlog).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let reached = reached(&texts);
    assert!(
        (1..=2).contains(&reached.len()),
        "inferences for searches that gave up: {reached:?}"
    );
    app.cleanup().await;
}

#[tokio::test]
async fn identical_queries_searched_at_once_cost_one_inference() {
    let (embedder, texts) = BusyModel::behind_the_cache(Duration::from_millis(200));
    let app = ApiApp::start_with(|_| {}, Some(embedder)).await;
    let query = "payments pods crashloop after the redis failover";
    let body = json!({ "query": query });
    let searches = (0..10).map(|_| app.search_ok(&body));
    futures::future::join_all(searches).await;
    // Fifty agents paged by one alert search its text at once: the first embeds it, the
    // others, admitted after it, find it remembered.
    assert_eq!(reached(&texts), vec![query.to_owned()]);
    app.cleanup().await;
}

#[tokio::test]
async fn readyz_answers_ready_while_every_pooled_connection_is_held() {
    // One pooled connection, and a short deadline so that a wait for it shows.
    let app = ApiApp::start_tuned(
        |s| {
            s.neo4j.max_connections = 1;
            s.search.deadline_ms = 1_000;
        },
        true,
    )
    .await;
    let episode = app.seed("checkout", "conv-1", &maven_oom(0)).await;
    let (status, ready) = app.get(None, "/readyz").await;
    assert_eq!(status, 200, "{ready}");

    // Another client holds the episode's write lock; reading the episode (a locked read)
    // holds the API's only pooled connection until that lock is released.
    let graph = deja_tests::raw_graph(&app.settings);
    let mut holder = graph.start_txn().await.expect("transaction");
    holder
        .run(
            neo4rs::query("MATCH (e:Episode {id: $id}) SET e._lock = true")
                .param("id", episode.id.as_str()),
        )
        .await
        .expect("lock the episode");
    let (status, json) = app
        .get(
            Some(&app.tokens.org),
            &format!("/v1/memory/episodes/{}", episode.id),
        )
        .await;
    assert_eq!(
        (status, json["error"]["code"].clone()),
        (504, json!("deadline_exceeded")),
        "{json}"
    );
    // The read still waits for the lock on the pool's one connection (its transaction runs
    // to completion): a search now would wait for it too. The replica is busy, not unready.
    let (status, ready) = app.get(None, "/readyz").await;
    assert_eq!(status, 200, "{ready}");
    assert_eq!(ready["checks"]["neo4j"], true, "{ready}");
    assert_eq!(ready["checks"]["migrated"], true, "{ready}");

    holder.rollback().await.expect("release the lock");
    app.cleanup().await;
}

#[tokio::test]
async fn the_dead_letter_count_gives_up_on_a_broker_that_never_answers() {
    // A broker that accepts connections and never says a word (a half-open peer, a broker
    // still booting): a connect to it runs into deja-bus's 15 s connect timeout.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = silent.local_addr().expect("address").port();
    let held = tokio::spawn(async move {
        let mut peers = Vec::new();
        while let Ok((peer, _)) = silent.accept().await {
            peers.push(peer);
        }
    });
    let mut settings = deja_tests::test_settings();
    settings.rabbitmq.uri =
        deja_config::Secret::new(format!("amqp://guest:guest@127.0.0.1:{port}/%2f"));
    let queue = deja_api::SynthesisQueue::new(&settings);
    // Two hub pages at once: neither waits out the connect, nor one behind the other's.
    let both = futures::future::join(queue.dead_letter_depth(), queue.dead_letter_depth());
    let (first, second) = tokio::time::timeout(Duration::from_secs(8), both)
        .await
        .expect("the hub's count waits a few seconds at most, not a connect timeout each");
    for depth in [first, second] {
        let error = depth.expect_err("no broker answered");
        assert!(matches!(error, deja_api::JobError::TimedOut(_)), "{error}");
    }
    held.abort();
}
