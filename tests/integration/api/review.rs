//! The review API (issue 11) over real HTTP against real Neo4j: listing filters, optimistic
//! concurrency (412), a person's edit surviving later agent turns, verdicts in memory-search
//! answers, deletion leaving nothing orphaned, and the `review` scope.

use deja_domain::strategy::StrategyKey;
use deja_domain::{Component, EpisodeKey, ExtractionStatus};
use deja_tests::api_app::{maven_oom, tls_expiry, ApiApp, MAVEN_QUERY};
use deja_tests::worker_app::TurnBuilder;
use deja_worker::{Outcome, SynthesisOutcome};

use reqwest::Method;
use serde_json::{json, Value};

const LEFTOVERS: &str = include_str!("../../../cypher/queries/testing/review_leftovers.cypher");

fn path(id: &str) -> String {
    format!("/v1/review/episodes/{id}")
}

/// `GET /v1/review/episodes/{id}` with the reviewer token: (result, ETag).
async fn show(app: &ApiApp, id: &str) -> (Value, String) {
    let (status, headers, json) = app
        .call(
            Method::GET,
            &path(id),
            Some(&app.tokens.review_only),
            &[],
            None,
        )
        .await;
    assert_eq!(status, 200, "{json}");
    let etag = headers["etag"].to_str().unwrap().to_owned();
    (json["result"].clone(), etag)
}

async fn list(app: &ApiApp, query: &str) -> Vec<String> {
    let (status, _, json) = app
        .call(
            Method::GET,
            &format!("/v1/review/episodes?{query}"),
            Some(&app.tokens.review_only),
            &[],
            None,
        )
        .await;
    assert_eq!(status, 200, "{query}: {json}");
    let mut ids: Vec<String> = json["result"]["episodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids
}

fn sorted(ids: &[&String]) -> Vec<String> {
    let mut ids: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
    ids.sort();
    ids
}

async fn post(app: &ApiApp, id: &str, action: &str, body: Value) -> (u16, Value) {
    let (status, _, json) = app
        .call(
            Method::POST,
            &format!("{}/{action}", path(id)),
            Some(&app.tokens.review_only),
            &[],
            Some(&body),
        )
        .await;
    (status, json)
}

#[tokio::test]
async fn the_review_listing_filters_by_every_field_and_pages_newest_first() {
    let app = ApiApp::start().await;
    let maven = app.seed("checkout", "conv-1", &maven_oom(0)).await;
    let tls = app.seed("checkout", "conv-2", &tls_expiry()).await;
    let payments = app.seed("payments", "conv-3", &maven_oom(1)).await;
    let mut failed = deja_tests::sample_episode(&app.org, "checkout", "conv-4", Vec::new());
    failed.extraction_status = ExtractionStatus::Failed;
    failed.extraction_error = Some("llm returned garbage".into());
    failed.embedding = None;
    failed.significance = Some("incident".into());
    app.store
        .save(&failed, None)
        .await
        .expect("save failed episode");
    let (status, _) = post(&app, &tls.id, "mark-wrong", json!({"note": "not TLS"})).await;
    assert_eq!(status, 200);

    let all = sorted(&[&maven.id, &tls.id, &payments.id, &failed.id]);
    assert_eq!(list(&app, "").await, all);
    assert_eq!(list(&app, "team=payments").await, sorted(&[&payments.id]));
    assert_eq!(
        list(&app, "component=service:surveys-module").await,
        sorted(&[&maven.id, &payments.id])
    );
    assert_eq!(
        list(&app, "component=JENKINS&team=checkout").await,
        sorted(&[&maven.id])
    );
    assert_eq!(
        list(&app, "issue_type=certificate-expiry").await,
        sorted(&[&tls.id])
    );
    assert_eq!(
        list(&app, "significance=incident").await,
        sorted(&[&failed.id])
    );
    assert_eq!(list(&app, "status=failed").await, sorted(&[&failed.id]));
    assert_eq!(
        list(&app, "status=pending_error").await,
        sorted(&[&failed.id])
    );
    assert_eq!(list(&app, "verdict=wrong").await, sorted(&[&tls.id]));
    assert_eq!(list(&app, "verdict=none").await.len(), 3);
    assert_eq!(list(&app, "q=CERT-MANAGER").await, sorted(&[&tls.id]));
    assert_eq!(
        list(&app, "resolved=true&q=heap").await,
        sorted(&[&maven.id, &payments.id])
    );

    // Pages of two, newest update first: the TLS episode was just reviewed.
    let (_, _, first) = app
        .call(
            Method::GET,
            "/v1/review/episodes?limit=2&order=updated",
            Some(&app.tokens.review_only),
            &[],
            None,
        )
        .await;
    let page = &first["result"];
    assert_eq!(page["episodes"][0]["id"], json!(tls.id), "{page}");
    assert_eq!(page["episodes"].as_array().unwrap().len(), 2);
    assert_eq!(page["next_offset"], 2);
    let (_, _, second) = app
        .call(
            Method::GET,
            "/v1/review/episodes?limit=2&offset=2",
            Some(&app.tokens.review_only),
            &[],
            None,
        )
        .await;
    assert_eq!(second["result"]["episodes"].as_array().unwrap().len(), 2);
    assert_eq!(second["result"]["next_offset"], Value::Null);

    let (status, _, bad) = app
        .call(
            Method::GET,
            "/v1/review/episodes?verdict=maybe",
            Some(&app.tokens.review_only),
            &[],
            None,
        )
        .await;
    assert_eq!(status, 400, "{bad}");
    app.cleanup().await;
}

#[tokio::test]
async fn an_edit_with_a_stale_if_match_is_refused_with_412_and_changes_nothing() {
    let app = ApiApp::start().await;
    let maven = app.seed("checkout", "conv-1", &maven_oom(0)).await;
    let (before, etag) = show(&app, &maven.id).await;
    assert_eq!(etag, format!("\"{}\"", before["version"]));

    let edit = json!({"root_cause": "surefire fork count doubled by a pom change",
                      "root_cause_confidence": "confirmed",
                      "key_findings": ["forkCount=2C in the parent pom since Tuesday",
                                       "exit code 137 on every surefire fork"]});
    let (status, headers, edited) = app
        .call(
            Method::PATCH,
            &path(&maven.id),
            Some(&app.tokens.review_only),
            &[("If-Match", etag.clone())],
            Some(&edit),
        )
        .await;
    assert_eq!(status, 200, "{edited}");
    let new_etag = headers["etag"].to_str().unwrap().to_owned();
    assert_ne!(new_etag, etag);
    assert_eq!(
        edited["result"]["root_cause"],
        "surefire fork count doubled by a pom change"
    );
    assert_eq!(
        edited["result"]["human_pinned"],
        json!(["key_findings", "root_cause", "root_cause_confidence"])
    );
    // The edited text's token vectors replace the old ones, so late interaction compares
    // queries with what the person wrote.
    let late = deja_tests::late_encoder();
    let edited_episode = app
        .store
        .get_by_id(Some(&app.org), &maven.id)
        .await
        .unwrap()
        .expect("episode");
    assert_eq!(
        app.store.tokens_stamp(&app.org, &maven.id).await.unwrap(),
        Some((
            late.model_id().to_owned(),
            deja_domain::recognition::source_stamp(
                late.model_id(),
                &edited_episode.embedding_text()
            )
        )),
        "the token vectors are of the edited text"
    );
    // The findings a person wrote are embedded: the vector is of the edited text.
    assert_eq!(
        edited_episode.key_findings,
        vec![
            "forkCount=2C in the parent pom since Tuesday",
            "exit code 137 on every surefire fork"
        ]
    );
    assert!(edited_episode
        .embedding_text()
        .contains("exit code 137 on every surefire fork"));
    deja_tests::assert_embedding_of(&edited_episode);

    // Somebody who read the old version edits: 412, and the first edit stands.
    let stale = json!({"root_cause": "something else"});
    let (status, _, conflict) = app
        .call(
            Method::PATCH,
            &path(&maven.id),
            Some(&app.tokens.review_only),
            &[("If-Match", etag.clone())],
            Some(&stale),
        )
        .await;
    assert_eq!(status, 412, "{conflict}");
    assert_eq!(conflict["error"]["code"], "version_conflict");
    let (after, after_etag) = show(&app, &maven.id).await;
    assert_eq!(after_etag, new_etag);
    assert_eq!(
        after["root_cause"],
        "surefire fork count doubled by a pom change"
    );

    // No If-Match at all: refused too (428), never a silent overwrite.
    let (status, _, missing) = app
        .call(
            Method::PATCH,
            &path(&maven.id),
            Some(&app.tokens.review_only),
            &[],
            Some(&stale),
        )
        .await;
    assert_eq!(status, 428, "{missing}");
    assert_eq!(
        missing["error"]["code"], "precondition_required",
        "{missing}"
    );

    // One audit record: who, what changed.
    let history = after["history"].as_array().unwrap();
    assert_eq!(history.len(), 1, "{after}");
    assert_eq!(history[0]["action"], "edit");
    assert_eq!(history[0]["by"], "review-holder");
    assert_eq!(history[0]["changes"][0]["field"], "root_cause");
    assert_eq!(
        history[0]["changes"][0]["from"],
        json!(maven.root_cause.unwrap())
    );
    app.cleanup().await;
}

#[tokio::test]
async fn a_persons_edit_survives_a_later_agent_turn_whose_conclusion_becomes_a_proposal() {
    let app = ApiApp::start().await;
    let turn = |index: u32, answer: &str| {
        TurnBuilder::new(&app.org, "checkout", "conv-pin", index)
            .answer(answer)
            .tool("redis_cli_info", "database-redis", "evicted_keys:81234")
            .build()
    };
    let first = app
        .agent_turn(&turn(
            1,
            "Root cause: redis maxmemory too low. Confirmed by evicted_keys.",
        ))
        .await;
    let Outcome::Stored { episode_id, .. } = first else {
        panic!("turn 1 not stored: {first:?}");
    };
    let (_, etag) = show(&app, &episode_id).await;
    let (status, _, _) = app
        .call(
            Method::PATCH,
            &path(&episode_id),
            Some(&app.tokens.review_only),
            &[("If-Match", etag)],
            Some(&json!({"root_cause": "a session-key TTL bug in the checkout release"})),
        )
        .await;
    assert_eq!(status, 200);

    let second = app
        .agent_turn(&turn(
            2,
            "Root cause: a noisy neighbour on the redis node. Confirmed.",
        ))
        .await;
    assert!(
        matches!(second, Outcome::Stored { changed: true, .. }),
        "{second:?}"
    );
    let (after, _) = show(&app, &episode_id).await;
    assert_eq!(
        after["root_cause"],
        "a session-key TTL bug in the checkout release"
    );
    let proposal = after["proposals"]["root_cause"].as_str().unwrap_or("");
    assert!(proposal.contains("noisy neighbour"), "{after}");
    // The turn's other conclusions do land, and the provenance lists both turns.
    assert_eq!(after["turn_count"], 2);
    let turns = after["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2, "{after}");
    assert_eq!(turns[1]["agent_run_id"], "run-conv-pin-2");
    assert_eq!(after["turn_input"]["turn_index"], 2);
    app.cleanup().await;
}

#[tokio::test]
async fn marking_wrong_puts_the_verdict_in_memory_search_answers_until_cleared() {
    let app = ApiApp::start().await;
    let maven = app.seed("checkout", "conv-1", &maven_oom(0)).await;
    let old_root_cause = maven.root_cause.clone().unwrap();
    let (status, marked) = post(
        &app,
        &maven.id,
        "mark-wrong",
        json!({"note": "the heap was fine; a test leaked threads"}),
    )
    .await;
    assert_eq!(status, 200, "{marked}");

    let answer = app
        .search_ok(&json!({"query": MAVEN_QUERY, "details": true}))
        .await;
    let hit = &answer["episodes"][0];
    assert_eq!(hit["id"], json!(maven.id), "{answer}");
    assert_eq!(hit["verdict"], "wrong");
    assert_eq!(
        hit["verdict_note"],
        "the heap was fine; a test leaked threads"
    );
    assert_eq!(hit["root_cause"], Value::Null);
    assert_eq!(hit["ruled_out"], json!([old_root_cause]));

    // No longer a strategy source.
    let key = StrategyKey {
        org: app.org.clone(),
        team: "checkout".into(),
        issue_type: "build-failure".into(),
        component: Component::new("pipeline", "jenkins"),
    };
    assert!(app
        .store
        .strategy_sources(&key, 10)
        .await
        .unwrap()
        .is_empty());

    let (status, _) = post(&app, &maven.id, "clear-verdict", json!({})).await;
    assert_eq!(status, 200);
    let answer = app.search_ok(&json!({"query": MAVEN_QUERY})).await;
    assert!(answer["episodes"][0].get("verdict").is_none(), "{answer}");
    assert_eq!(app.store.strategy_sources(&key, 10).await.unwrap().len(), 1);

    let (before, _) = show(&app, &maven.id).await;
    let (status, confirmed) = post(&app, &maven.id, "confirm", json!({})).await;
    assert_eq!(status, 200);
    let time = |v: &Value| {
        chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap()).expect("rfc3339 time")
    };
    assert!(
        time(&confirmed["result"]["last_confirmed_at"]) > time(&before["last_confirmed_at"]),
        "{confirmed}"
    );
    let actions: Vec<&str> = confirmed["result"]["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["confirm", "clear_verdict", "mark_wrong"]);
    app.cleanup().await;
}

#[tokio::test]
async fn deleting_an_episode_leaves_nothing_orphaned_and_its_strategies_stale() {
    let app = ApiApp::start().await;
    let doomed = app.seed("checkout", "conv-1", &maven_oom(0)).await;
    let other = app.seed("checkout", "conv-2", &maven_oom(1)).await;
    // The worker keeps each conversation's newest turn input for retries.
    let input = TurnBuilder::new(&app.org, "checkout", "conv-1", 1).build();
    app.store
        .save_turn_input(
            &doomed.key(),
            "checkout",
            1,
            &serde_json::to_string(&input).unwrap(),
        )
        .await
        .expect("turn input");
    let key = StrategyKey {
        org: app.org.clone(),
        team: "checkout".into(),
        issue_type: "build-failure".into(),
        component: Component::new("pipeline", "jenkins"),
    };
    // A review record of its own, before the strategy is made (an edit after it would show
    // the strategy stale already: a source changed).
    let (_, etag) = show(&app, &doomed.id).await;
    let (status, _, _) = app
        .call(
            Method::PATCH,
            &path(&doomed.id),
            Some(&app.tokens.review_only),
            &[("If-Match", etag)],
            Some(&json!({"significance": "incident"})),
        )
        .await;
    assert_eq!(status, 200);
    let outcome = app.synthesize(&key).await;
    assert!(matches!(outcome, SynthesisOutcome::Stored), "{outcome:?}");
    let (with_strategy, _) = show(&app, &doomed.id).await;
    assert_eq!(
        with_strategy["strategies"][0]["stale"], false,
        "{with_strategy}"
    );

    let (status, _, deleted) = app
        .call(
            Method::DELETE,
            &path(&doomed.id),
            Some(&app.tokens.review_only),
            &[],
            None,
        )
        .await;
    assert_eq!(status, 200, "{deleted}");
    assert_eq!(deleted["result"]["stale_strategies"], 1);
    assert_eq!(deleted["result"]["reviews"], 1);

    let graph = deja_tests::raw_graph(&app.settings);
    let key_of = EpisodeKey::new(&app.org, &doomed.correlation_id).composite();
    let mut rows = graph
        .execute(
            neo4rs::query(LEFTOVERS)
                .param("id", doomed.id.as_str())
                .param("key", key_of),
        )
        .await
        .expect("leftovers query");
    let row = rows.next().await.unwrap().expect("one row");
    assert_eq!(row.get::<i64>("episodes").unwrap(), 0);
    assert_eq!(
        app.store.tokens_stamp(&app.org, &doomed.id).await.unwrap(),
        None,
        "its token vectors went with it"
    );
    assert_eq!(row.get::<i64>("turn_inputs").unwrap(), 0);
    assert_eq!(row.get::<i64>("orphan_reviews").unwrap(), 0);
    assert_eq!(row.get::<i64>("deletion_records").unwrap(), 1);
    let (status, _, _) = app
        .call(
            Method::GET,
            &path(&doomed.id),
            Some(&app.tokens.review_only),
            &[],
            None,
        )
        .await;
    assert_eq!(status, 404);

    // The strategy is stale for the episodes it still has.
    let (remaining, _) = show(&app, &other.id).await;
    let strategies = remaining["strategies"].as_array().unwrap();
    assert_eq!(strategies.len(), 1, "{remaining}");
    assert_eq!(strategies[0]["stale"], true, "{remaining}");
    let stored = app.store.get_strategy(&key).await.unwrap().unwrap();
    assert!(!stored.source_ids.contains(&doomed.id));
    app.cleanup().await;
}

#[tokio::test]
async fn review_needs_the_review_scope_and_respects_org_and_team() {
    let app = ApiApp::start().await;
    let payments = app.seed("payments", "conv-1", &maven_oom(0)).await;
    let (_, etag) = show(&app, &payments.id).await;
    // A search-only token: 403 on every review endpoint, and nothing changes.
    let (status, _, json) = app
        .call(
            Method::GET,
            "/v1/review/episodes",
            Some(&app.tokens.org),
            &[],
            None,
        )
        .await;
    assert_eq!(status, 403, "{json}");
    let (status, _, _) = app
        .call(
            Method::PATCH,
            &path(&payments.id),
            Some(&app.tokens.org),
            &[("If-Match", etag.clone())],
            Some(&json!({"summary": "hijacked"})),
        )
        .await;
    assert_eq!(status, 403);
    let (status, _, _) = app
        .call(
            Method::DELETE,
            &path(&payments.id),
            Some(&app.tokens.org),
            &[],
            None,
        )
        .await;
    assert_eq!(status, 403);
    // No token: 401. A checkout-only reviewer: the payments episode does not exist for it,
    // and an org-wide listing is refused.
    let (status, _, _) = app
        .call(Method::GET, "/v1/review/episodes", None, &[], None)
        .await;
    assert_eq!(status, 401);
    let (status, _, _) = app
        .call(
            Method::GET,
            &path(&payments.id),
            Some(&app.tokens.review_checkout),
            &[],
            None,
        )
        .await;
    assert_eq!(status, 404);
    let (status, _, _) = app
        .call(
            Method::GET,
            "/v1/review/episodes",
            Some(&app.tokens.review_checkout),
            &[],
            None,
        )
        .await;
    assert_eq!(status, 403);
    let (status, _, _) = app
        .call(
            Method::GET,
            &format!("/v1/review/episodes?org={}-other", app.org),
            Some(&app.tokens.review_only),
            &[],
            None,
        )
        .await;
    assert_eq!(status, 403);
    let (after, after_etag) = show(&app, &payments.id).await;
    assert_eq!(after_etag, etag);
    assert_ne!(after["summary"], "hijacked");
    app.cleanup().await;
}

#[tokio::test]
async fn recurrences_are_linked_once_per_conversation_shown_as_a_chain_and_unlinked_by_people() {
    let app = ApiApp::start().await;
    let first = app.seed("checkout", "conv-1", &maven_oom(0)).await;
    let second = app.seed("checkout", "conv-2", &maven_oom(1)).await;
    let third = app.seed("checkout", "conv-3", &maven_oom(2)).await;
    // The recognition decision detects the same recurrence on every turn: counted once.
    let store = &app.store;
    assert_eq!(
        store
            .link_recurrence(&app.org, &second.id, &first.id, 0.82)
            .await
            .unwrap(),
        Some(true)
    );
    assert_eq!(
        store
            .link_recurrence(&app.org, &second.id, &first.id, 0.9)
            .await
            .unwrap(),
        Some(false)
    );
    assert_eq!(
        store
            .link_recurrence(&app.org, &second.id, "ep_missing", 0.9)
            .await
            .unwrap(),
        None
    );
    // A person links the third conversation to the second.
    let (status, linked) = post(&app, &third.id, "recurrences", json!({"of": second.id})).await;
    assert_eq!(status, 200, "{linked}");
    let view = &linked["result"];
    assert_eq!(view["recurrence_count"], 2, "{view}");
    assert_eq!(view["recurrences"][0]["direction"], "of");
    assert_eq!(view["recurrences"][0]["confirmed_by"], "review-holder");
    assert_eq!(view["history"][0]["action"], "link_recurrence");

    let (middle, _) = show(&app, &second.id).await;
    assert_eq!(middle["recurrence_count"], 2, "{middle}");
    let links = middle["recurrences"].as_array().unwrap();
    assert_eq!(links.len(), 2);
    let detected = links.iter().find(|l| l["direction"] == "of").unwrap();
    assert_eq!(detected["id"], json!(first.id));
    assert_eq!(detected["by"], "recognition");
    assert_eq!(detected["confidence"], 0.82);
    let time = |v: &Value| chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap()).unwrap();
    assert!(time(&middle["first_seen"]) <= time(&middle["last_seen"]));
    assert_eq!(time(&middle["first_seen"]), first.created_at);

    // A link to an episode of another org is refused; unlinking removes it.
    let (status, _) = post(&app, &third.id, "recurrences", json!({"of": "ep_nope"})).await;
    assert_eq!(status, 404);
    let (status, _, unlinked) = app
        .call(
            Method::DELETE,
            &format!("{}/recurrences/{}", path(&third.id), second.id),
            Some(&app.tokens.review_only),
            &[],
            None,
        )
        .await;
    assert_eq!(status, 200, "{unlinked}");
    assert_eq!(unlinked["result"]["recurrence_count"], 0);
    assert_eq!(
        unlinked["result"]["history"][0]["action"],
        "unlink_recurrence"
    );
    // The rejection is shown on both episodes, with who made it.
    let rejected = unlinked["result"]["rejected"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(rejected.len(), 1, "{unlinked:#}");
    assert_eq!(rejected[0]["direction"], "of");
    assert_eq!(rejected[0]["id"], json!(second.id));
    assert!(rejected[0]["by"].as_str().is_some_and(|by| !by.is_empty()));
    let (middle, _) = show(&app, &second.id).await;
    assert!(
        middle["rejected"].as_array().is_some_and(|r| r
            .iter()
            .any(|l| l["direction"] == "recurred_in" && l["id"] == json!(third.id))),
        "{middle:#}"
    );
    // A person's link of the pair lifts the rejection.
    let (status, relinked) = post(&app, &third.id, "recurrences", json!({"of": second.id})).await;
    assert_eq!(status, 200, "{relinked}");
    assert_eq!(relinked["result"]["recurrence_count"], 2);
    assert!(relinked["result"].get("rejected").is_none(), "{relinked:#}");
    app.cleanup().await;
}

#[tokio::test]
async fn retrying_a_failed_extraction_sends_its_stored_turn_back_through_the_worker() {
    let app = ApiApp::start().await;
    let event = TurnBuilder::new(&app.org, "checkout", "conv-retry", 1)
        .answer("Root cause: redis maxmemory too low. Confirmed by evicted_keys.")
        .build();
    let key = EpisodeKey::new(&app.org, "conv-retry");
    let mut failed = deja_tests::sample_episode(&app.org, "checkout", "conv-retry", Vec::new());
    failed.extraction_status = ExtractionStatus::Failed;
    failed.extraction_error = Some("the llm timed out".into());
    failed.embedding = None;
    failed.event_ids = vec![event.event_id.clone()];
    failed.last_turn_index = 1;
    app.store.save(&failed, None).await.unwrap();
    app.store
        .save_turn_input(&key, "checkout", 1, &serde_json::to_string(&event).unwrap())
        .await
        .unwrap();
    let ok = app.seed("checkout", "conv-ok", &maven_oom(0)).await;
    let (status, refused) = post(&app, &ok.id, "retry", json!({})).await;
    assert_eq!(status, 400, "{refused}");

    let (status, retried) = post(&app, &failed.id, "retry", json!({})).await;
    assert_eq!(status, 200, "{retried}");
    assert_eq!(retried["result"]["turn_index"], 1);
    // The worker's own step takes it off the extract queue and repairs the episode.
    let delivery = app
        .bus
        .get_one(&app.settings.rabbitmq.extract_queue())
        .await
        .expect("basic.get")
        .expect("the stored turn was republished");
    let outcome = app.extractor().process(delivery.body(), 1).await;
    assert!(matches!(outcome, Outcome::Stored { .. }), "{outcome:?}");
    let repaired = app.store.get_by_key(&key).await.unwrap().unwrap();
    assert_eq!(repaired.extraction_status, ExtractionStatus::Ok);
    assert!(repaired
        .root_cause
        .unwrap_or_default()
        .contains("maxmemory"));
    // Who asked for the retry is in the episode's history.
    let (shown, _) = show(&app, &failed.id).await;
    let retry = shown["history"]
        .as_array()
        .and_then(|h| h.iter().find(|r| r["action"] == "retry"))
        .unwrap_or_else(|| panic!("no retry in the history: {shown:#}"));
    assert!(
        !retry["by"].as_str().unwrap_or_default().is_empty(),
        "{retry}"
    );
    app.cleanup().await;
}

/// `GET /v1/review/episodes/{id}` with `token`: the result.
async fn show_as(app: &ApiApp, token: &str, id: &str) -> Value {
    let (status, _, json) = app
        .call(Method::GET, &path(id), Some(token), &[], None)
        .await;
    assert_eq!(status, 200, "{json}");
    json["result"].clone()
}

/// The ids of an episode view's `chain` and `recurrences`.
fn linked_ids(view: &Value) -> Vec<String> {
    ["chain", "recurrences"]
        .iter()
        .flat_map(|field| view[field].as_array().cloned().unwrap_or_default())
        .map(|e| e["id"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// A person may link across teams; a reviewer bound to one team opening its own episode sees
/// its team's part of the chain only (as search counts it) and none of the org-wide
/// strategies, which it may not review: an org-wide reviewer sees it all.
#[tokio::test]
async fn a_team_reviewer_sees_only_its_teams_part_of_a_cross_team_recurrence_chain() {
    let app = ApiApp::start().await;
    let payments = app.seed("payments", "conv-1", &maven_oom(0)).await;
    let checkout = app.seed("checkout", "conv-2", &maven_oom(1)).await;
    app.seed("checkout", "conv-3", &maven_oom(2)).await;
    let key = app.maven_strategy_key();
    assert_eq!(app.synthesize(&key).await, SynthesisOutcome::Stored);
    // An org-wide reviewer links the checkout episode to the payments one.
    let (status, linked) = post(
        &app,
        &checkout.id,
        "recurrences",
        json!({"of": payments.id}),
    )
    .await;
    assert_eq!(status, 200, "{linked}");

    let org_wide = show_as(&app, &app.tokens.review_only, &checkout.id).await;
    assert_eq!(org_wide["recurrence_count"], 1, "{org_wide:#}");
    assert!(linked_ids(&org_wide).contains(&payments.id), "{org_wide:#}");
    assert_eq!(org_wide["strategies"][0]["team"], "*", "{org_wide:#}");

    let team = show_as(&app, &app.tokens.review_checkout, &checkout.id).await;
    assert_eq!(team["recurrence_count"], 0, "{team:#}");
    assert!(linked_ids(&team).is_empty(), "{team:#}");
    // Nor does the history of the link name it.
    assert_eq!(team["history"][0]["action"], "link_recurrence", "{team:#}");
    assert!(
        !team.to_string().contains(&payments.id),
        "the payments episode is named: {team:#}"
    );
    assert!(org_wide["history"].to_string().contains(&payments.id));
    // The chain's dates are the team's own: the payments episode is older.
    assert_eq!(team["first_seen"], team["last_seen"], "{team:#}");
    assert!(
        team["strategies"].as_array().is_none_or(|s| s.is_empty()),
        "{team:#}"
    );
    // Nor may it remove the link to the episode it cannot read: to it, that episode does not
    // exist, as when it links.
    let (status, _, refused) = app
        .call(
            Method::DELETE,
            &format!("{}/recurrences/{}", path(&checkout.id), payments.id),
            Some(&app.tokens.review_checkout),
            &[],
            None,
        )
        .await;
    assert_eq!(status, 404, "{refused}");
    let still = show_as(&app, &app.tokens.review_only, &checkout.id).await;
    assert_eq!(still["recurrence_count"], 1, "{still:#}");

    // The org-wide reviewer unlinks the pair: the rejection names the payments episode to
    // it, and to the team-bound reviewer not at all.
    let (status, _, unlinked) = app
        .call(
            Method::DELETE,
            &format!("{}/recurrences/{}", path(&checkout.id), payments.id),
            Some(&app.tokens.review_only),
            &[],
            None,
        )
        .await;
    assert_eq!(status, 200, "{unlinked}");
    assert_eq!(
        unlinked["result"]["rejected"][0]["id"],
        json!(payments.id),
        "{unlinked:#}"
    );
    let team = show_as(&app, &app.tokens.review_checkout, &checkout.id).await;
    assert!(
        team["rejected"].as_array().is_none_or(|r| r.is_empty()),
        "{team:#}"
    );
    assert!(
        !team.to_string().contains(&payments.id),
        "the payments episode is named: {team:#}"
    );

    // Deleting its episode, the team-bound reviewer is not told of the org-wide strategy
    // built from it, which is marked stale all the same.
    let (status, _, deleted) = app
        .call(
            Method::DELETE,
            &path(&checkout.id),
            Some(&app.tokens.review_checkout),
            &[],
            None,
        )
        .await;
    assert_eq!(status, 200, "{deleted}");
    assert_eq!(deleted["result"]["stale_strategies"], 0, "{deleted:#}");
    let strategy = app
        .store
        .get_strategy(&key)
        .await
        .unwrap()
        .expect("the org-wide strategy");
    assert!(strategy.fingerprint.starts_with("stale:"), "{strategy:?}");
    app.cleanup().await;
}

/// `POST .../recurrences` with an `If-Match` header: (status, body).
async fn link_if_match(app: &ApiApp, id: &str, of: &str, version: &str) -> (u16, Value) {
    let (status, _, json) = app
        .call(
            Method::POST,
            &format!("{}/recurrences", path(id)),
            Some(&app.tokens.review_only),
            &[("If-Match", version.to_owned())],
            Some(&json!({"of": of})),
        )
        .await;
    (status, json)
}

#[tokio::test]
async fn linking_unlinking_and_retrying_check_if_match_when_it_is_sent() {
    let app = ApiApp::start().await;
    let old = app.seed("checkout", "conv-1", &maven_oom(0)).await;
    let new = app.seed("checkout", "conv-2", &maven_oom(1)).await;
    let (_, etag) = show(&app, &new.id).await;
    // Someone confirms the episode meanwhile: the version read is stale.
    let (status, _) = post(&app, &new.id, "confirm", json!({})).await;
    assert_eq!(status, 200);
    let (status, stale) = link_if_match(&app, &new.id, &old.id, &etag).await;
    assert_eq!(status, 412, "{stale}");
    assert_eq!(stale["error"]["code"], "version_conflict");
    let (view, _) = show(&app, &new.id).await;
    assert_eq!(view["recurrence_count"], 0, "nothing linked: {view:#}");

    let (_, current) = show(&app, &new.id).await;
    let (status, linked) = link_if_match(&app, &new.id, &old.id, &current).await;
    assert_eq!(status, 200, "{linked}");
    assert_eq!(linked["result"]["recurrence_count"], 1);

    let unlink = format!("{}/recurrences/{}", path(&new.id), old.id);
    let stale = [("If-Match", "\"0\"".to_owned())];
    let (status, _, json) = app
        .call(
            Method::DELETE,
            &unlink,
            Some(&app.tokens.review_only),
            &stale,
            None,
        )
        .await;
    assert_eq!(status, 412, "{json}");
    let (_, current) = show(&app, &new.id).await;
    let (status, _, json) = app
        .call(
            Method::DELETE,
            &unlink,
            Some(&app.tokens.review_only),
            &[("If-Match", current)],
            None,
        )
        .await;
    assert_eq!(status, 200, "{json}");

    let (status, _, json) = app
        .call(
            Method::POST,
            &format!("{}/retry", path(&new.id)),
            Some(&app.tokens.review_only),
            &[("If-Match", "\"0\"".to_owned())],
            None,
        )
        .await;
    assert_eq!(status, 412, "{json}");
    app.cleanup().await;
}

/// A retry whose broker cannot be reached queues nothing and says so with a transient code
/// (503), not as a bug (500).
#[tokio::test]
async fn retrying_while_the_broker_is_unreachable_is_a_503() {
    let app = ApiApp::start_tuned(
        |s| s.rabbitmq.uri = deja_config::Secret::new("amqp://guest:guest@127.0.0.1:9/%2f"),
        false,
    )
    .await;
    let event = TurnBuilder::new(&app.org, "checkout", "conv-retry", 1).build();
    let key = EpisodeKey::new(&app.org, "conv-retry");
    let mut failed = deja_tests::sample_episode(&app.org, "checkout", "conv-retry", Vec::new());
    failed.extraction_status = ExtractionStatus::Failed;
    failed.extraction_error = Some("the llm timed out".into());
    failed.embedding = None;
    app.store.save(&failed, None).await.unwrap();
    app.store
        .save_turn_input(&key, "checkout", 1, &serde_json::to_string(&event).unwrap())
        .await
        .unwrap();
    let (status, json) = post(&app, &failed.id, "retry", json!({})).await;
    assert_eq!(status, 503, "{json}");
    assert_eq!(json["error"]["code"], "broker_unavailable", "{json}");
    let message = json["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("rabbitmq"), "{message}");
    app.cleanup().await;
}

/// An id pasted with blanks around it names the same episode in every step of an action, not
/// only in the read that finds it: its history shows and it deletes.
#[tokio::test]
async fn an_id_with_surrounding_blanks_names_the_same_episode_throughout() {
    let app = ApiApp::start().await;
    let maven = app.seed("checkout", "conv-1", &maven_oom(0)).await;
    let padded = format!("%20{}%20", maven.id);
    let (status, marked) = post(&app, &padded, "mark-wrong", json!({"note": "not this"})).await;
    assert_eq!(status, 200, "{marked}");
    let (shown, _) = show(&app, &padded).await;
    assert_eq!(shown["id"], json!(maven.id), "{shown:#}");
    assert_eq!(shown["history"][0]["action"], "mark_wrong", "{shown:#}");
    let (status, _, deleted) = app
        .call(
            Method::DELETE,
            &path(&padded),
            Some(&app.tokens.review_only),
            &[],
            None,
        )
        .await;
    assert_eq!(status, 200, "{deleted}");
    assert!(app
        .store
        .get_by_id(Some(&app.org), &maven.id)
        .await
        .unwrap()
        .is_none());
    app.cleanup().await;
}

/// `GET /v1/review/strategy` of the org-wide Maven strategy, with the reviewer token.
async fn maven_strategy_view(app: &ApiApp) -> Value {
    let (status, _, json) = app
        .call(
            Method::GET,
            "/v1/review/strategy?team=*&issue_type=build-failure&component=pipeline:jenkins",
            Some(&app.tokens.review_only),
            &[],
            None,
        )
        .await;
    assert_eq!(status, 200, "{json}");
    json["result"].clone()
}

/// Review shows a strategy stale as soon as what it was made from changed — not only when a
/// source is deleted: here a person marks a source wrong.
#[tokio::test]
async fn a_strategy_whose_source_changed_is_shown_stale() {
    let app = ApiApp::start().await;
    let first = app.seed("checkout", "conv-1", &maven_oom(0)).await;
    app.seed("checkout", "conv-2", &maven_oom(1)).await;
    let key = app.maven_strategy_key();
    assert_eq!(app.synthesize(&key).await, SynthesisOutcome::Stored);
    let fresh = maven_strategy_view(&app).await;
    assert_eq!(fresh["stale"], Value::Null, "{fresh:#}");
    let (shown, _) = show(&app, &first.id).await;
    assert_eq!(shown["strategies"][0]["stale"], false, "{shown:#}");

    let (status, marked) = post(&app, &first.id, "mark-wrong", json!({"note": "not this"})).await;
    assert_eq!(status, 200, "{marked}");
    let changed = maven_strategy_view(&app).await;
    assert_eq!(
        changed["stale"], "a source episode changed since it was written",
        "{changed:#}"
    );
    let (shown, _) = show(&app, &first.id).await;
    assert_eq!(shown["strategies"][0]["stale"], true, "{shown:#}");
    app.cleanup().await;
}

/// An edit of the embedded text while no embedding model is loaded keeps the old vector, so
/// the episode stays searchable, and marks it for `deja reembed`: the vector no longer reads
/// the text, and nothing else would ever refresh it.
#[tokio::test]
async fn an_edit_without_an_embedding_model_keeps_the_old_vector_for_deja_reembed() {
    let app = ApiApp::start_tuned(|_| {}, false).await;
    let episode = app.seed("checkout", "conv-1", &maven_oom(0)).await;
    let model = deja_tests::embedder().model_id().to_owned();
    let needing = |store: deja_graph::GraphStore, org: String, model: String| async move {
        store
            .episodes_for_reembed(Some(&org), &model, false, None, 10)
            .await
            .unwrap()
            .len()
    };
    assert_eq!(
        needing(app.store.clone(), app.org.clone(), model.clone()).await,
        0
    );
    let (_, etag) = show(&app, &episode.id).await;
    let (status, _, edited) = app
        .call(
            Method::PATCH,
            &path(&episode.id),
            Some(&app.tokens.review_only),
            &[("If-Match", etag)],
            Some(&json!({"root_cause": "the Maven JVM heap was capped at 512 MiB"})),
        )
        .await;
    assert_eq!(status, 200, "{edited}");
    let stored = app
        .store
        .get_by_id(Some(&app.org), &episode.id)
        .await
        .unwrap()
        .expect("the episode");
    assert_eq!(stored.embedding, episode.embedding, "still searchable");
    assert_eq!(stored.embedding_model, None);
    assert_eq!(
        needing(app.store.clone(), app.org.clone(), model).await,
        1,
        "deja reembed picks it up"
    );
    app.cleanup().await;
}
