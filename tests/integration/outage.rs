//! Outage-aware consumption with the LLM endpoint failing (issue 10, item 1), and `deja dlq`
//! through the real binary. Neo4j outages are in the disruptive suite (they stop a service).

use deja_fake_llm::{FakeLlm, Reply, RequestKind};
use deja_tests::worker_app::{worker_settings, TurnBuilder, WorkerApp};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(60);

/// Polls `ready` every 50 ms; panics with `what` after `WAIT`.
async fn until(what: &str, ready: impl Fn() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn an_llm_refusing_then_answering_500_then_429_costs_no_attempts_and_dead_letters_nothing() {
    let fake = FakeLlm::start().await;
    // An expired key first: every request refused, no turn's fault.
    fake.set_default(Reply::Status(401));
    let mut settings = worker_settings(&fake.base_url());
    // One attempt only: any attempt spent on the outage would dead-letter or fail the turn.
    settings.rabbitmq.max_attempts = 1;
    settings.worker.probe_max_ms = 400;
    let app = WorkerApp::start_with(settings, fake).await;
    let conversations: Vec<String> = (0..6).map(|i| format!("conv-llm-outage-{i}")).collect();
    for id in &conversations {
        let event = TurnBuilder::new(&app.org, "checkout", id, 1)
            .answer("Root cause: a stale DNS record after the failover, confirmed.")
            .build();
        app.publish(&event).await;
    }
    let readiness = app.readiness();
    until("the worker to pause on the 401s", || readiness.is_paused()).await;

    // `/readyz` says why.
    let addr = app.status_address();
    let response = reqwest::get(format!("http://{addr}/readyz"))
        .await
        .expect("GET /readyz");
    assert_eq!(response.status().as_u16(), 503);
    let body: serde_json::Value = response.json().await.expect("json body");
    assert_eq!(body["paused"], "llm down", "{body}");

    // Several failed probes of 401, of 500, then of 429, then the endpoint recovers.
    let calls = app.fake.calls();
    until("probes to see 401s", || app.fake.calls() >= calls + 3).await;
    app.fake.set_default(Reply::Status(500));
    let calls = app.fake.calls();
    until("probes to see 500s", || app.fake.calls() >= calls + 3).await;
    app.fake.set_default(Reply::Status(429));
    let calls = app.fake.calls();
    until("probes to see 429s", || app.fake.calls() >= calls + 3).await;
    assert!(readiness.is_paused(), "still paused while rate-limited");
    app.fake.set_default(Reply::Auto);

    for id in &conversations {
        let episode = app
            .wait_for_episode(id, WAIT, |e| e.embedding.is_some())
            .await;
        assert_eq!(episode.extraction_status, deja_domain::ExtractionStatus::Ok);
        assert!(episode.extraction_error.is_none(), "{episode:?}");
        assert!(episode
            .root_cause
            .as_deref()
            .unwrap_or("")
            .contains("stale DNS record"));
    }
    let t = app.bus.topology().clone();
    assert_eq!(app.bus.queue_depth(&t.dead_letter_queue).await.unwrap(), 0);
    assert_eq!(app.bus.queue_depth(&t.extract_queue).await.unwrap(), 0);
    until("the pause to clear", || !readiness.is_paused()).await;
    let response = reqwest::get(format!("http://{addr}/readyz"))
        .await
        .expect("GET /readyz");
    assert_eq!(response.status().as_u16(), 200);
    app.cleanup().await;
}

async fn deja(settings: &deja_config::Settings, args: &[&str]) -> (bool, String, String) {
    let output = tokio::process::Command::from(deja_tests::deja_command(settings))
        .args(args)
        .output()
        .await
        .expect("run deja");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn deja_dlq_lists_filters_and_replays_the_invalid_turns_the_worker_dead_lettered() {
    let mut app = WorkerApp::start().await;
    app.publish_raw(b"{not json").await;
    app.publish_raw(b"[1, 2]").await;
    let t = app.bus.topology().clone();
    let deadline = Instant::now() + WAIT;
    while app.bus.queue_depth(&t.dead_letter_queue).await.unwrap() < 2 {
        assert!(Instant::now() < deadline, "two dead letters");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Stop the worker so that replayed letters stay in the extraction queue to be looked at.
    app.stop_worker().await;

    let (ok, out, err) = deja(&app.settings, &["dlq", "list", "--json"]).await;
    assert!(ok, "{err}");
    let letters: serde_json::Value = serde_json::from_str(&out).expect("json list");
    let letters = letters.as_array().expect("an array");
    assert_eq!(letters.len(), 2, "{out}");
    let reason = letters[0]["reason"].as_str().expect("a reason").to_owned();
    assert!(
        letters.iter().all(|l| l["org"] == app.org.as_str()),
        "{out}"
    );

    let (ok, out, _) = deja(
        &app.settings,
        &["dlq", "list", "--reason", "no-such-reason"],
    )
    .await;
    assert!(ok);
    assert!(out.contains("0 dead letters"), "{out}");
    let (ok, out, _) = deja(&app.settings, &["dlq", "show", "1"]).await;
    assert!(ok);
    assert!(out.contains(&reason), "{out}");

    let (ok, _, err) = deja(&app.settings, &["dlq", "replay"]).await;
    assert!(!ok, "replaying everything needs --all");
    assert!(err.contains("--all"), "{err}");
    let (ok, out, _) = deja(&app.settings, &["dlq", "list", "--limit", "1"]).await;
    assert!(ok);
    assert!(
        out.contains("read the first 1 dead letters (--limit); more may wait"),
        "{out}"
    );
    let (ok, out, _) = deja(
        &app.settings,
        &["dlq", "replay", "--all", "--dry-run", "--limit", "1"],
    )
    .await;
    assert!(ok);
    // A dry run leaves every letter where it was: only a higher limit reads further.
    assert!(
        out.contains("would replay 1")
            && out.contains("stopped at --limit 1")
            && out.contains("raise --limit past 1"),
        "{out}"
    );
    let (ok, out, _) = deja(&app.settings, &["dlq", "replay", "--all", "--dry-run"]).await;
    assert!(ok);
    assert!(
        out.contains("would replay 2") && !out.contains("stopped at --limit"),
        "{out}"
    );
    assert_eq!(app.bus.queue_depth(&t.dead_letter_queue).await.unwrap(), 2);

    let (ok, out, err) = deja(&app.settings, &["dlq", "replay", "--org", &app.org]).await;
    assert!(ok, "{err}");
    assert!(out.contains("replayed 2"), "{out}");
    assert_eq!(app.bus.queue_depth(&t.dead_letter_queue).await.unwrap(), 0);
    assert_eq!(app.bus.queue_depth(&t.extract_queue).await.unwrap(), 2);
    app.cleanup().await;
}

/// An LLM that answers its health probe but fails every extraction of one turn (a prompt that
/// times out each time, a rate limit only large prompts hit) is not an outage: each attempt
/// gives up after a few unconfirmed pauses, and the last one records the turn's failed
/// extraction on its episode (listed, retryable with `deja retry`), not a dead letter
/// without an episode.
#[tokio::test]
async fn a_turn_the_llm_fails_on_every_attempt_while_answering_its_probe_is_a_failed_extraction() {
    let fake = FakeLlm::start().await;
    fake.set_default_of(RequestKind::Extraction, Reply::Status(500));
    let mut settings = worker_settings(&fake.base_url());
    settings.rabbitmq.max_attempts = 2;
    settings.worker.probe_max_ms = 400;
    let app = WorkerApp::start_with(settings, fake).await;
    let event = TurnBuilder::new(&app.org, "checkout", "conv-llm-fails-this-turn", 1)
        .answer("Root cause: a stale DNS record after the failover, confirmed.")
        .build();
    app.publish(&event).await;
    let episode = app
        .wait_for_episode("conv-llm-fails-this-turn", WAIT, |e| {
            e.extraction_status == deja_domain::ExtractionStatus::Failed
        })
        .await;
    let error = episode.extraction_error.as_deref().unwrap_or_default();
    assert!(
        error.contains("the LLM failed on this turn on every attempt"),
        "{error}"
    );
    assert_eq!(episode.failed_turn(), Some(1), "{episode:?}");
    let t = app.bus.topology().clone();
    assert_eq!(app.bus.queue_depth(&t.dead_letter_queue).await.unwrap(), 0);
    assert_eq!(app.bus.queue_depth(&t.extract_queue).await.unwrap(), 0);
    // Both attempts asked, and the probes in between answered.
    let requests = app.fake.requests();
    let extractions = requests
        .iter()
        .filter(|r| r.kind == RequestKind::Extraction)
        .count();
    assert!(extractions >= 2, "{extractions} extraction requests");
    assert!(
        requests.iter().any(|r| r.kind == RequestKind::Other),
        "no probe was answered"
    );
    app.cleanup().await;
}

/// A refusal the health probe does not share (a provider's moderation answering 403 to one
/// prompt) is that turn's failed extraction at once: no pause of every turn, no retries.
#[tokio::test]
async fn a_refusal_of_one_prompt_that_the_probe_does_not_share_fails_that_turn_at_once() {
    let fake = FakeLlm::start().await;
    fake.set_default_of(RequestKind::Extraction, Reply::Status(403));
    let app = WorkerApp::start_with(worker_settings(&fake.base_url()), fake).await;
    let event = TurnBuilder::new(&app.org, "checkout", "conv-refused-prompt", 1)
        .answer("Root cause: a stale DNS record after the failover, confirmed.")
        .build();
    app.publish(&event).await;
    let episode = app
        .wait_for_episode("conv-refused-prompt", WAIT, |e| {
            e.extraction_status == deja_domain::ExtractionStatus::Failed
        })
        .await;
    let error = episode.extraction_error.as_deref().unwrap_or_default();
    assert!(error.contains("http 403"), "{error}");
    let requests = app.fake.requests();
    let extractions = requests
        .iter()
        .filter(|r| r.kind == RequestKind::Extraction)
        .count();
    assert_eq!(extractions, 1, "asked once, not retried: {requests:#?}");
    assert!(
        !app.readiness().is_paused(),
        "no pause for one prompt's refusal"
    );
    app.cleanup().await;
}
