//! Strategy synthesis driven by searches: one job per (key, fingerprint) however many
//! searches race, zero LLM calls for a current strategy, regeneration when stale, and a
//! person's edit that regeneration never overwrites.

use deja_domain::strategy::StrategyKey;
use deja_fake_llm::{Reply, RequestKind};
use deja_graph::SynthesisClaim;
use deja_tests::api_app::{maven_oom, ApiApp, MAVEN_QUERY};
use deja_worker::SynthesisOutcome;
use reqwest::Method;
use serde_json::{json, Value};
use std::time::Duration;

fn org_wide_key(app: &ApiApp) -> StrategyKey {
    app.maven_strategy_key()
}

fn query() -> Value {
    json!({"query": MAVEN_QUERY})
}

/// Waits until the strategy step's background claims settle: the depth must reach `depth`
/// and stay there.
async fn settled_depth(app: &ApiApp, depth: u32) {
    app.wait_for_depth(depth, Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(app.synthesis_depth().await, depth, "more jobs arrived late");
}

#[tokio::test]
async fn concurrent_qualifying_searches_enqueue_one_job_and_the_stored_strategy_then_costs_no_llm_call(
) {
    let app = ApiApp::start().await;
    app.seed("checkout", "conv-1", &maven_oom(0)).await;
    app.seed("surveys", "conv-2", &maven_oom(1)).await;

    // Five agents hit the same pattern at once: exactly one synthesis job.
    let body = query();
    let searches = (0..5).map(|_| app.search_ok(&body));
    let results = futures::future::join_all(searches).await;
    for result in &results {
        assert_eq!(result["episodes"].as_array().unwrap().len(), 2, "{result}");
        assert_eq!(result["strategy"], Value::Null, "{result}");
        assert!(
            result["notice"]
                .as_str()
                .unwrap_or("")
                .contains("being synthesized"),
            "{result}"
        );
    }
    settled_depth(&app, 1).await;
    assert_eq!(app.fake.calls(), 0, "search never calls the LLM");

    let job = app.run_one_synthesis_job().await;
    assert_eq!(job.key, org_wide_key(&app));
    assert_eq!(app.fake.calls(), 1);
    let stored = app
        .store
        .get_strategy(&job.key)
        .await
        .unwrap()
        .expect("strategy stored");
    assert_eq!(stored.source_ids.len(), 2);
    assert_eq!(stored.fingerprint, job.fingerprint);

    // Current: returned from the store, no job, no LLM call.
    let result = app.search_ok(&query()).await;
    assert_eq!(result["strategy"], json!(stored.markdown), "{result}");
    assert!(result["notice"].is_null(), "{result}");
    settled_depth(&app, 0).await;
    assert_eq!(app.fake.calls(), 1);

    // A third similar episode makes it stale: the old one is served while a new one is made.
    app.seed("checkout", "conv-3", &maven_oom(2)).await;
    let result = app.search_ok(&query()).await;
    assert_eq!(
        result["strategy"],
        json!(stored.markdown),
        "stale one still served"
    );
    assert!(
        result["notice"]
            .as_str()
            .unwrap_or("")
            .contains("refreshed"),
        "{result}"
    );
    settled_depth(&app, 1).await;
    app.run_one_synthesis_job().await;
    assert_eq!(app.fake.calls(), 2);
    let regenerated = app.store.get_strategy(&job.key).await.unwrap().unwrap();
    assert_eq!(regenerated.source_ids.len(), 3);
    assert_ne!(regenerated.fingerprint, stored.fingerprint);
    assert!(regenerated.version > stored.version);
    let result = app.search_ok(&query()).await;
    assert_eq!(result["strategy"], json!(regenerated.markdown));
    assert_eq!(app.fake.calls(), 2);
    app.cleanup().await;
}

#[tokio::test]
async fn a_strategy_edited_by_a_person_survives_regeneration_as_a_proposal() {
    let app = ApiApp::start().await;
    app.seed("checkout", "conv-1", &maven_oom(0)).await;
    app.seed("checkout", "conv-2", &maven_oom(1)).await;
    let key = org_wide_key(&app);
    assert_eq!(app.synthesize(&key).await, SynthesisOutcome::Stored);

    let edited = "### Strategy (reviewed by ana)\n\n1. check the surefire heap first\n";
    let version = app.store.edit_strategy(&key, edited, "ana").await.unwrap();
    assert!(version.is_some());

    app.seed("checkout", "conv-3", &maven_oom(3)).await;
    let result = app.search_ok(&query()).await;
    assert_eq!(result["strategy"], json!(edited));
    settled_depth(&app, 1).await;
    app.run_one_synthesis_job().await;

    let stored = app.store.get_strategy(&key).await.unwrap().unwrap();
    assert_eq!(
        stored.markdown, edited,
        "the person's text is never overwritten"
    );
    assert_eq!(stored.edited_by.as_deref(), Some("ana"));
    let proposal = stored
        .proposed_markdown
        .clone()
        .expect("regeneration was proposed");
    assert!(proposal.contains("3 past episodes"), "{proposal}");

    // The proposal covers the current sources: the search serves the edit and asks nothing.
    let calls = app.fake.calls();
    let result = app.search_ok(&query()).await;
    assert_eq!(result["strategy"], json!(edited));
    assert!(result["notice"].is_null(), "{result}");
    settled_depth(&app, 0).await;
    assert_eq!(app.fake.calls(), calls);

    // A reviewer accepts it: it becomes current and machine-written again.
    assert!(app
        .store
        .accept_proposal(&key, "bob")
        .await
        .unwrap()
        .is_some());
    let accepted = app.store.get_strategy(&key).await.unwrap().unwrap();
    assert_eq!(accepted.markdown, proposal);
    assert_eq!(accepted.edited_by, None);
    assert_eq!(accepted.reviewed_by.as_deref(), Some("bob"));
    assert_eq!(accepted.source_ids.len(), 3);
    let result = app.search_ok(&query()).await;
    assert_eq!(result["strategy"], json!(proposal));
    app.cleanup().await;
}

/// A person marks a source of the synthesized strategy wrong: search stops serving that text
/// at once (it may repeat the wrong conclusion) and asks for one without it.
#[tokio::test]
async fn a_strategy_made_from_an_episode_marked_wrong_is_withheld_until_rebuilt() {
    let app = ApiApp::start().await;
    let wrong = app.seed("checkout", "conv-1", &maven_oom(0)).await;
    app.seed("checkout", "conv-2", &maven_oom(1)).await;
    app.seed("checkout", "conv-3", &maven_oom(2)).await;
    let key = org_wide_key(&app);
    assert_eq!(app.synthesize(&key).await, SynthesisOutcome::Stored);
    let first = app.store.get_strategy(&key).await.unwrap().unwrap();
    assert_eq!(
        app.search_ok(&query()).await["strategy"],
        json!(first.markdown)
    );

    let (status, _, marked) = app
        .call(
            Method::POST,
            &format!("/v1/review/episodes/{}/mark-wrong", wrong.id),
            Some(&app.tokens.review_only),
            &[],
            Some(&json!({"note": "the heap was fine; a flaky test runner"})),
        )
        .await;
    assert_eq!(status, 200, "{marked}");
    let result = app.search_ok(&query()).await;
    assert_eq!(result["strategy"], Value::Null, "{result}");
    assert!(
        result["notice"]
            .as_str()
            .unwrap_or("")
            .contains("is being synthesized"),
        "{result}"
    );

    settled_depth(&app, 1).await;
    app.run_one_synthesis_job().await;
    let rebuilt = app.store.get_strategy(&key).await.unwrap().unwrap();
    assert_eq!(rebuilt.source_ids.len(), 2);
    assert!(!rebuilt.source_ids.contains(&wrong.id));
    assert_eq!(
        app.search_ok(&query()).await["strategy"],
        json!(rebuilt.markdown)
    );
    app.cleanup().await;
}

#[tokio::test]
async fn a_team_search_gets_the_team_strategy_from_the_team_episodes_only() {
    let app = ApiApp::start().await;
    app.seed("checkout", "conv-1", &maven_oom(0)).await;
    app.seed("checkout", "conv-2", &maven_oom(1)).await;
    app.seed("surveys", "conv-3", &maven_oom(2)).await;
    let (status, json) = app
        .search(
            Some(&app.tokens.checkout),
            &json!({"query": MAVEN_QUERY, "team": "checkout"}),
        )
        .await;
    assert_eq!(status, 200, "{json}");
    assert_eq!(json["result"]["episodes"].as_array().unwrap().len(), 2);
    settled_depth(&app, 1).await;
    let job = app.run_one_synthesis_job().await;
    assert_eq!(job.key.team, "checkout");
    let stored = app.store.get_strategy(&job.key).await.unwrap().unwrap();
    assert_eq!(
        stored.source_ids.len(),
        2,
        "the surveys team's episode is not a source"
    );
    app.cleanup().await;
}

#[tokio::test]
async fn search_answers_while_the_llm_is_down_and_the_strategy_stays_absent() {
    let app = ApiApp::start().await;
    app.seed("checkout", "conv-1", &maven_oom(0)).await;
    app.seed("checkout", "conv-2", &maven_oom(1)).await;
    app.fake.shutdown();
    let result = app.search_ok(&query()).await;
    assert_eq!(result["episodes"].as_array().unwrap().len(), 2);
    assert_eq!(result["strategy"], Value::Null);
    settled_depth(&app, 1).await;
    // The synthesizer fails (transiently) and schedules a retry; no strategy appears.
    app.run_one_synthesis_job().await;
    assert!(app
        .store
        .get_strategy(&org_wide_key(&app))
        .await
        .unwrap()
        .is_none());
    let result = app.search_ok(&query()).await;
    assert_eq!(result["episodes"].as_array().unwrap().len(), 2);
    assert_eq!(result["strategy"], Value::Null);
    app.cleanup().await;
}

#[tokio::test]
async fn an_unrelated_query_returns_no_episodes_and_no_strategy() {
    let app = ApiApp::start().await;
    app.seed("checkout", "conv-1", &maven_oom(0)).await;
    app.seed("checkout", "conv-2", &maven_oom(1)).await;
    let result = app
        .search_ok(&json!({"query": "quarterly marketing newsletter font colours look wrong"}))
        .await;
    assert_eq!(result["episodes"], json!([]), "{result}");
    assert_eq!(result["strategy"], Value::Null);
    assert_eq!(result["more_available"], false);
    settled_depth(&app, 0).await;
    app.cleanup().await;
}

#[tokio::test]
async fn a_strategy_step_out_of_time_leaves_the_strategy_out_and_still_returns_the_episodes() {
    let app = ApiApp::start_tuned(|s| s.search.strategy_timeout_ms = 0, true).await;
    app.seed("checkout", "conv-1", &maven_oom(0)).await;
    app.seed("checkout", "conv-2", &maven_oom(1)).await;
    let result = app.search_ok(&query()).await;
    assert_eq!(result["episodes"].as_array().unwrap().len(), 2, "{result}");
    assert_eq!(result["strategy"], Value::Null, "{result}");
    assert!(
        result["notice"]
            .as_str()
            .unwrap_or("")
            .contains("ran out of time"),
        "{result}"
    );
    app.cleanup().await;
}

/// An app whose two Maven episodes qualify a search for a strategy, whose LLM answers 503,
/// and whose one synthesis job is queued.
async fn app_with_a_failing_synthesis_job() -> ApiApp {
    let app = ApiApp::start().await;
    app.seed("checkout", "conv-1", &maven_oom(0)).await;
    app.seed("checkout", "conv-2", &maven_oom(1)).await;
    app.fake.set_default(Reply::Status(503));
    app.search_ok(&query()).await;
    settled_depth(&app, 1).await;
    app
}

#[tokio::test]
async fn a_synthesis_job_that_keeps_failing_is_dead_lettered_as_synthesis_failed_and_never_reaches_the_extraction_queue(
) {
    let app = app_with_a_failing_synthesis_job().await;
    app.run_one_synthesis_job().await;
    assert_eq!(
        app.fake.calls(),
        app.settings.rabbitmq.max_attempts as usize,
        "one LLM call per attempt"
    );
    let topology = app.bus.topology().clone();
    let letter = app
        .bus
        .get_one(&topology.dead_letter_queue)
        .await
        .unwrap()
        .expect("the job is dead-lettered");
    letter.ack().await.unwrap();
    assert_eq!(
        letter.header_str(deja_bus::HEADER_REASON).as_deref(),
        Some("synthesis_failed")
    );
    let job: deja_domain::strategy::SynthesisJob =
        serde_json::from_slice(letter.body()).expect("the dead letter is the job");
    assert_eq!(job.key, org_wide_key(&app));
    // Nothing was parked on the extraction queue's retry levels.
    tokio::time::sleep(Duration::from_millis(
        app.settings.rabbitmq.retry_max_ms + 200,
    ))
    .await;
    assert!(app
        .bus
        .get_one(&topology.extract_queue)
        .await
        .unwrap()
        .is_none());
    app.cleanup().await;
}

/// A job's claim is held until the job is settled, through the backoff between its attempts:
/// were it released after each failed attempt, the next qualifying search would claim the same
/// sources again and publish a duplicate job while the first one is still retrying.
#[tokio::test]
async fn a_retrying_synthesis_job_keeps_its_claim_between_attempts() {
    let app = app_with_a_failing_synthesis_job().await;
    let delivery = app
        .bus
        .get_one(&app.settings.rabbitmq.synthesis_queue())
        .await
        .unwrap()
        .expect("a synthesis job is queued");
    let job: deja_domain::strategy::SynthesisJob = serde_json::from_slice(delivery.body()).unwrap();
    let synthesizer = app.synthesizer();
    // The first backoff lasts at least 50 ms (100 ms base, equal jitter) and the first attempt,
    // a 503 from the fake, a few: 25 ms in, the job is between attempts.
    let claim = |cooldown: Duration| {
        app.store.claim_synthesis(
            &job.key,
            &job.fingerprint,
            Duration::from_secs(60),
            cooldown,
        )
    };
    let (_, claimed_between) = tokio::join!(synthesizer.handle(&app.bus, &delivery), async {
        tokio::time::sleep(Duration::from_millis(25)).await;
        claim(Duration::ZERO).await.unwrap()
    });
    assert_eq!(
        claimed_between,
        SynthesisClaim::Held,
        "the retrying job still holds its claim"
    );
    // Settled (dead-lettered): released, with the failure recorded for the cool-down.
    assert_eq!(
        claim(Duration::from_secs(3600)).await.unwrap(),
        SynthesisClaim::CoolingDown
    );
    assert_eq!(
        claim(Duration::ZERO).await.unwrap(),
        SynthesisClaim::Won,
        "released once the job is settled"
    );
    app.store
        .release_synthesis_claim(&job.key, &[job.fingerprint.as_str()])
        .await
        .unwrap();
    app.cleanup().await;
}

/// A source set the model cannot write a playbook for (here: it keeps replying with something
/// that is not JSON) costs one job, not one per qualifying search: the failed job's claim is
/// released with the failure recorded, and searches do not publish a job for the same sources
/// during `search.strategy_failure_cooldown_secs`. A changed source set gets a job at once.
#[tokio::test]
async fn a_failed_synthesis_is_not_requested_again_for_the_same_sources_during_the_cool_down() {
    let app = ApiApp::start().await;
    assert_eq!(app.settings.search.strategy_failure_cooldown_secs, 3600);
    app.seed("checkout", "conv-1", &maven_oom(0)).await;
    app.seed("checkout", "conv-2", &maven_oom(1)).await;
    app.fake
        .set_default_of(RequestKind::Synthesis, Reply::Garbage);
    let first = app.search_ok(&query()).await;
    assert!(
        first["notice"]
            .as_str()
            .is_some_and(|n| n.contains("is being synthesized")),
        "{first}"
    );
    settled_depth(&app, 1).await;
    let failed = app.run_one_synthesis_job().await;
    assert_eq!(
        app.fake.calls(),
        2,
        "one request and its repair, then given up"
    );
    let topology = app.bus.topology().clone();
    let letter = app
        .bus
        .get_one(&topology.dead_letter_queue)
        .await
        .unwrap()
        .expect("the job is dead-lettered");
    letter.ack().await.unwrap();
    assert_eq!(
        letter.header_str(deja_bus::HEADER_REASON).as_deref(),
        Some("synthesis_failed")
    );

    // The same sources: no claim, no job, no LLM call, however many searches qualify; and
    // the agent is told that none is coming rather than to search again for it.
    for _ in 0..3 {
        let result = app.search_ok(&query()).await;
        assert_eq!(result["episodes"].as_array().unwrap().len(), 2, "{result}");
        assert_eq!(result["strategy"], Value::Null, "{result}");
        let notice = result["notice"].as_str().unwrap_or_default();
        assert!(
            notice.contains("failed recently") && !notice.contains("being synthesized"),
            "{result}"
        );
    }
    settled_depth(&app, 0).await;
    assert_eq!(app.fake.calls(), 2);

    // A job for the same sources that was already queued (a backlog outlived its claim and a
    // search took the claim again) is acked without a call during the cool-down.
    app.bus
        .publish_synthesis_job(&serde_json::to_vec(&failed).unwrap(), "a-queued-duplicate")
        .await
        .unwrap();
    settled_depth(&app, 1).await;
    app.run_one_synthesis_job().await;
    assert_eq!(app.fake.calls(), 2, "the duplicate asked the LLM again");
    assert_eq!(app.synthesis_depth().await, 0);
    assert!(
        app.bus
            .get_one(&topology.dead_letter_queue)
            .await
            .unwrap()
            .is_none(),
        "a skipped duplicate is no dead letter"
    );
    assert_eq!(
        app.store
            .claim_synthesis(
                &failed.key,
                &failed.fingerprint,
                deja_api::synthesis_claim_lease(&app.settings),
                Duration::from_secs(app.settings.search.strategy_failure_cooldown_secs),
            )
            .await
            .unwrap(),
        SynthesisClaim::CoolingDown
    );

    // People see the failure: in the store's review listing and in `deja strategy list`.
    let failures = app
        .store
        .synthesis_failures(&app.org, None, true, 10)
        .await
        .unwrap();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(
        (
            failures[0].issue_type.as_str(),
            failures[0].component_name.as_str()
        ),
        (
            failed.key.issue_type.as_str(),
            failed.key.component.name.as_str()
        )
    );
    assert!(!failures[0].has_strategy && !failures[0].reason.is_empty());
    assert_eq!(
        failures[0].asked_again_at, None,
        "refused during the cool-down"
    );
    let listed = tokio::process::Command::from(deja_tests::deja_command(&app.settings))
        .args(["strategy", "list", "--org", &app.org])
        .output()
        .await
        .unwrap();
    assert!(listed.status.success());
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains("0 strategies")
            && listed.contains("last synthesis failed (1;")
            && listed.contains(&failed.key.issue_type),
        "{listed}"
    );

    // A new episode changes the source set: it is asked for at once, and this time it works.
    app.fake.set_default_of(RequestKind::Synthesis, Reply::Auto);
    app.seed("checkout", "conv-3", &maven_oom(2)).await;
    app.search_ok(&query()).await;
    settled_depth(&app, 1).await;
    // Listed as asked for again while that job runs: the failure is not the last word.
    let failures = app
        .store
        .synthesis_failures(&app.org, None, true, 10)
        .await
        .unwrap();
    assert!(
        failures[0]
            .asked_again_at
            .is_some_and(|at| at > failures[0].failed_at),
        "{failures:?}"
    );
    let retried = app.run_one_synthesis_job().await;
    assert_eq!(retried.key, failed.key);
    assert_ne!(retried.fingerprint, failed.fingerprint);
    let stored = app
        .store
        .get_strategy(&failed.key)
        .await
        .unwrap()
        .expect("the changed sources' strategy is stored");
    assert_eq!(stored.fingerprint, retried.fingerprint);
    assert_eq!(stored.source_ids.len(), 3);
    assert!(
        app.store
            .synthesis_failures(&app.org, None, true, 10)
            .await
            .unwrap()
            .is_empty(),
        "a synthesis that succeeds clears the failure"
    );
    app.cleanup().await;
}

/// A log sink for one test: every formatted line, in memory.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn the_synthesis_span_never_labels_another_tasks_log_lines() {
    let app = ApiApp::start().await;
    app.seed("checkout", "conv-1", &maven_oom(0)).await;
    app.seed("checkout", "conv-2", &maven_oom(1)).await;
    let captured = Captured::default();
    let sink = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    // This test's runtime is single-threaded: both tasks below share the thread, and the
    // subscriber is this thread's default.
    let _default = tracing::subscriber::set_default(subscriber);
    app.fake.push(Reply::Stall(Duration::from_millis(500)));
    let synthesizer = app.synthesizer();
    let key = org_wide_key(&app);
    let synthesis = synthesizer.synthesize(&key);
    let other_task = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        tracing::info!("unrelated-task-line");
    };
    let (outcome, ()) = tokio::join!(synthesis, other_task);
    assert_eq!(outcome, SynthesisOutcome::Stored);
    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let line = logs
        .lines()
        .find(|l| l.contains("unrelated-task-line"))
        .unwrap_or_else(|| panic!("the other task's line was not logged: {logs}"));
    assert!(
        !line.contains("synthesis"),
        "the synthesizer's span leaked onto another task: {line}"
    );
    app.cleanup().await;
}
