//! Structured turns and poisoning, end to end through the real worker with the fake LLM:
//! a complete `conclusion` block needs no LLM call, a partial one asks only for what is
//! missing, and injected text never reaches a stored field.

use deja_domain::poisoning::leaks;
use deja_fake_llm::Reply;
use deja_llm::prompt::{block_close, block_open, GIVEN_FIELDS_BLOCK, MISSING_FIELDS_BLOCK};
use deja_tests::worker_app::{TurnBuilder, WorkerApp};
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

fn block(text: &str, name: &str) -> Value {
    let open = block_open(name);
    let start = text
        .find(&open)
        .unwrap_or_else(|| panic!("no {open} in {text}"))
        + open.len();
    let end = start
        + text[start..]
            .find(&block_close(name))
            .expect("block closed");
    serde_json::from_str(text[start..end].trim()).expect("block is json")
}

#[tokio::test]
async fn a_complete_conclusion_is_stored_without_any_llm_call() {
    let app = WorkerApp::start().await;
    let event = TurnBuilder::new(&app.org, "checkout", "conv-given", 1)
        .answer("Root cause: something else entirely, confirmed.")
        .tool("redis_cli_info", "database-redis", "evicted_keys:81234")
        .conclusion(json!({
            "root_cause": "Redis maxmemory was too low for the session keys.",
            "resolved": true,
            "issue_type": "Cache Eviction",
            "components": [{"type": "svc", "name": "Checkout"}, {"type": "cache", "name": "Redis_Sessions"}],
            "key_findings": ["evicted_keys climbing since 04:12"],
            "ruled_out": ["a bad deploy"],
            "summary": "Redis evicted session keys; raising maxmemory stopped the errors."
        }))
        .build();
    app.publish(&event).await;
    let episode = app.wait_for_episode("conv-given", WAIT, |_| true).await;
    assert_eq!(app.fake.calls(), 0, "no llm call for a complete conclusion");
    assert_eq!(
        episode.root_cause.as_deref(),
        Some("Redis maxmemory was too low for the session keys.")
    );
    assert!(episode.resolved);
    assert_eq!(episode.issue_type, "cache-eviction");
    assert_eq!(
        episode.components,
        [
            deja_domain::Component::new("service", "checkout"),
            deja_domain::Component::new("cache", "redis-sessions")
        ]
    );
    assert_eq!(episode.ruled_out, ["a bad deploy"]);
    assert_eq!(
        episode.issue_description, "[FIRING] CheckoutErrors service=checkout #cache-eviction",
        "no description given: the opening message's first line"
    );
    assert!(episode.skills_used.contains("database-redis"));
    assert_eq!(episode.embedding.as_ref().map(Vec::len), Some(384));
    app.cleanup().await;
}

#[tokio::test]
async fn a_partial_conclusion_asks_only_for_the_missing_fields_and_the_given_ones_win() {
    let app = WorkerApp::start().await;
    // The model disagrees with the runtime on the given fields: the runtime wins.
    app.fake.push(Reply::Json(json!({
        "root_cause": "A network partition.",
        "resolved": false,
        "issue_type": "network-partition",
        "issue_description": "writes to orders-db fail",
        "components": [{"type": "database", "name": "orders-db"}],
        "key_findings": ["write errors since 04:12"],
        "ruled_out": ["a bad deploy"],
        "summary": "orders-db writes failed until the disk was cleaned."
    })));
    let event = TurnBuilder::new(&app.org, "orders", "conv-partial", 1)
        .answer("Root cause: a network partition. Writes fail.")
        .conclusion(json!({
            "root_cause": "The orders-db data disk filled up with WAL files.",
            "resolved": true,
            "issue_type": "disk-full"
        }))
        .build();
    app.publish(&event).await;
    let episode = app.wait_for_episode("conv-partial", WAIT, |_| true).await;
    assert_eq!(app.fake.calls(), 1);
    let user = app.fake.requests()[0].message("user").unwrap();
    assert_eq!(
        block(&user, MISSING_FIELDS_BLOCK),
        json!([
            "components",
            "key_findings",
            "ruled_out",
            "summary",
            "issue_description"
        ])
    );
    let given = block(&user, GIVEN_FIELDS_BLOCK);
    assert_eq!(given["issue_type"], "disk-full");
    assert_eq!(given.as_object().unwrap().len(), 3);

    assert_eq!(
        episode.root_cause.as_deref(),
        Some("The orders-db data disk filled up with WAL files.")
    );
    assert!(episode.resolved);
    assert_eq!(episode.issue_type, "disk-full");
    assert_eq!(
        episode.summary,
        "orders-db writes failed until the disk was cleaned."
    );
    assert_eq!(episode.ruled_out, ["a bad deploy"]);
    app.cleanup().await;
}

#[tokio::test]
async fn a_conclusion_out_of_bounds_is_dead_lettered_with_the_reason() {
    let app = WorkerApp::start().await;
    let mut event =
        serde_json::to_value(TurnBuilder::new(&app.org, "t", "conv-bad-conclusion", 1).build())
            .unwrap();
    event["conclusion"] = json!({"resolved": true, "root_cause": null});
    app.publish_raw(event.to_string().as_bytes()).await;
    let letters = app.take_dead_letters(1, WAIT).await;
    assert_eq!(letters.len(), 1);
    assert_eq!(
        letters[0].header_str("x-deja-reason").as_deref(),
        Some("schema_violation")
    );
    assert!(letters[0]
        .header_str("x-deja-detail")
        .unwrap_or_default()
        .contains("conclusion"));
    assert_eq!(app.fake.calls(), 0);
    app.cleanup().await;
}

/// The injection came in turn 1's tool output; turn 2 has no tool call, and its answer echoes
/// it: the guard reads the conversation's earlier tool texts too.
#[tokio::test]
async fn an_injection_an_earlier_turns_tool_printed_and_a_later_answer_echoes_stays_out() {
    let app = WorkerApp::start().await;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/poisoning/echoed-in-the-final-answer.json");
    let fixture: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let injected = fixture["injected_text"].as_str().unwrap();
    let call = &fixture["tool_calls"][0];
    let first = TurnBuilder::new(&app.org, "sre", "conv-two-turns", 1)
        .user_message(fixture["user_message"].as_str().unwrap())
        .tool_with_input(
            call["name"].as_str().unwrap(),
            call["skill"].as_str().unwrap(),
            call["input"].clone(),
            call["output"].as_str().unwrap(),
        )
        .answer("Reading the consumer logs; the backlog is still growing.")
        .build();
    app.publish(&first).await;
    app.wait_for_episode("conv-two-turns", WAIT, |e| e.turn_count == 1)
        .await;
    let second = TurnBuilder::new(&app.org, "sre", "conv-two-turns", 2)
        .user_message("what was it?")
        .answer(fixture["final_answer"].as_str().unwrap())
        .build();
    assert!(second.tool_calls.is_empty());
    assert!(leaks(injected, &second.final_answer));
    app.publish(&second).await;
    let mut episode = app
        .wait_for_episode("conv-two-turns", WAIT, |e| e.turn_count == 2)
        .await;
    episode.embedding = None;
    let stored = serde_json::to_string(&episode).unwrap();
    assert!(!leaks(injected, &stored), "injected text stored: {stored}");
    assert!(
        episode
            .root_cause
            .as_deref()
            .unwrap_or("")
            .contains("prefetch"),
        "the real conclusion survives: {episode:#?}"
    );
    app.cleanup().await;
}

#[tokio::test]
async fn injected_text_echoed_by_the_answer_or_carried_by_a_tool_input_never_reaches_the_episode() {
    let app = WorkerApp::start().await;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/poisoning");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    assert_eq!(names.len(), 3);
    for path in names {
        let fixture: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let injected = fixture["injected_text"].as_str().unwrap();
        let mut turn = TurnBuilder::new(&app.org, "sre", &name, 1)
            .user_message(fixture["user_message"].as_str().unwrap())
            .answer(fixture["final_answer"].as_str().unwrap());
        for call in fixture["tool_calls"].as_array().unwrap() {
            turn = turn.tool_with_input(
                call["name"].as_str().unwrap(),
                call["skill"].as_str().unwrap(),
                call["input"].clone(),
                call["output"].as_str().unwrap(),
            );
        }
        let event = turn.build();
        // The guard is what keeps it out: the answer the fake reads does carry the text.
        assert!(
            leaks(injected, &event.final_answer),
            "{name}: fixture echoes nothing"
        );
        app.publish(&event).await;
        let mut episode = app.wait_for_episode(&name, WAIT, |_| true).await;
        episode.embedding = None;
        let stored = serde_json::to_string(&episode).unwrap();
        assert!(
            !leaks(injected, &stored),
            "{name}: injected text stored: {stored}"
        );
        match fixture["expect_root_cause_contains"].as_str() {
            Some(expected) => assert!(
                episode
                    .root_cause
                    .as_deref()
                    .unwrap_or("")
                    .contains(expected),
                "{name}: the real conclusion survives: {episode:#?}"
            ),
            None => {
                assert_eq!(episode.root_cause, None, "{name}");
                assert!(
                    !episode.resolved,
                    "{name}: an injected cause resolves nothing"
                );
            }
        }
    }
    app.cleanup().await;
}
