//! The worker's second look at a doubtful root cause (`deja_domain::second_look`), through
//! RabbitMQ, the worker, the fake LLM over HTTP and Neo4j.

use deja_fake_llm::{Reply, RequestKind};
use deja_tests::worker_app::{TurnBuilder, WorkerApp};
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);
// Eight words or more: a thinner cause gets a second look of its own (`second_look::is_thin`).
const GUESS: &str = "clock skew on the API server broke token checks";

/// An extraction reply whose root cause is `cause`.
fn extraction(cause: &str) -> Value {
    json!({
        "root_cause": cause,
        "resolved": true,
        "issue_type": "webhook-failure",
        "issue_description": "argo syncs fail on the admission webhook",
        "components": [{"type": "service", "name": "argocd"}],
        "key_findings": ["x509: certificate has expired"],
        "ruled_out": [],
        "summary": "syncs failed on the admission webhook."
    })
}

/// Turn 1 concludes the guess; turn 2's answer rules it out and names another cause, but the
/// model keeps the guess (scripted).
async fn kept_guess(app: &WorkerApp, conversation: &str) {
    first_guess(app, conversation).await;
    app.fake.push(Reply::Json(extraction(GUESS)));
}

/// Turn 1 concludes the guess (scripted).
async fn first_guess(app: &WorkerApp, conversation: &str) {
    first_guess_ruling_out(app, conversation, &[]).await;
}

/// Turn 1 concludes the guess and lists `ruled_out` (scripted).
async fn first_guess_ruling_out(app: &WorkerApp, conversation: &str, ruled_out: &[&str]) {
    let mut reply = extraction(GUESS);
    reply["ruled_out"] = json!(ruled_out);
    app.fake.push(Reply::Json(reply));
    let first = TurnBuilder::new(&app.org, "platform", conversation, 1)
        .answer(
            "Syncs fail on the webhook. My first guess is clock skew on the API server \
             breaking token checks.",
        )
        .build();
    app.publish(&first).await;
    app.wait_for_episode(conversation, WAIT, |e| e.turn_count == 1)
        .await;
    assert_eq!(
        app.fake.calls(),
        1,
        "a plain first conclusion needs no second look"
    );
}

/// Publishes [`second_turn`] and waits until the worker merged it.
async fn publish_second_turn(app: &WorkerApp, conversation: &str) -> deja_domain::Episode {
    app.publish(&second_turn(app, conversation)).await;
    app.wait_for_episode(conversation, WAIT, |e| e.turn_count == 2)
        .await
}

/// The kinds of the requests the fake LLM answered, in order.
fn request_kinds(app: &WorkerApp) -> Vec<RequestKind> {
    app.fake.requests().iter().map(|r| r.kind).collect()
}

fn second_turn(app: &WorkerApp, conversation: &str) -> deja_domain::TurnEvent {
    TurnBuilder::new(&app.org, "platform", conversation, 2)
        .answer(
            "Resolved: syncs succeed again. Root cause: the webhook certificate created at \
             install expired. Clock skew ruled out.",
        )
        .build()
}

#[tokio::test]
async fn an_abandoned_guess_kept_by_the_model_is_replaced_by_the_answers_own_cause() {
    let app = WorkerApp::start().await;
    kept_guess(&app, "conv-kept").await;
    let episode = publish_second_turn(&app, "conv-kept").await;

    let root_cause = episode.root_cause.as_deref().unwrap_or_default();
    assert!(root_cause.contains("webhook certificate"), "{episode:#?}");
    assert!(!root_cause.contains("API server"), "{root_cause}");
    assert!(
        episode.ruled_out.iter().any(|r| r == GUESS),
        "the abandoned guess is ruled out: {:?}",
        episode.ruled_out
    );
    assert!(episode.resolved);
    // Extraction, extraction, and one second look that read the answer and what it denies.
    let requests = app.fake.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[2].kind, RequestKind::Cause);
    let asked = requests[2].message("user").unwrap_or_default();
    assert!(asked.contains("<agent-final-answer>"), "{asked}");
    assert!(
        asked.contains("The answer rules out: clock skew."),
        "{asked}"
    );
    assert!(
        !asked.contains("<stored-episode>"),
        "the answer alone: {asked}"
    );
    app.cleanup().await;
}

#[tokio::test]
async fn a_failed_second_look_loses_nothing_and_stores_no_abandoned_guess() {
    let app = WorkerApp::start().await;
    kept_guess(&app, "conv-look-fails").await;
    // The second look is refused twice (a reply and its repair that still name the guess).
    let guess_again = Reply::Json(json!({ "root_cause": GUESS }));
    app.fake.push(guess_again.clone());
    app.fake.push(guess_again);
    let episode = publish_second_turn(&app, "conv-look-fails").await;

    assert_eq!(
        app.fake.calls(),
        4,
        "one extraction, one second look and its repair"
    );
    let repair = app.fake.requests()[3].messages();
    assert!(
        repair
            .iter()
            .any(|(_, text)| text.contains("names `clock skew`, which the answer rules out")),
        "{repair:?}"
    );
    // The merge rule decides on the first extraction: the guess is not the conclusion.
    assert_eq!(episode.root_cause, None, "{episode:#?}");
    assert!(episode.ruled_out.iter().any(|r| r == GUESS));
    assert_eq!(episode.last_turn_index, 2);
    assert_eq!(episode.extraction_status, deja_domain::ExtractionStatus::Ok);
    app.cleanup().await;
}

#[tokio::test]
async fn a_thin_cause_is_replaced_by_the_answers_fuller_reading_and_not_ruled_out() {
    let app = WorkerApp::start().await;
    app.fake
        .push(Reply::Json(extraction("the failed deliveries")));
    // The second look is answered by the fake's reading of the answer: its `Root cause:`
    // sentence.
    let turn = TurnBuilder::new(&app.org, "platform", "conv-thin", 1)
        .answer(
            "Fixed. Root cause: the merchant-webhook client never closed response bodies, so \
             sockets piled up in CLOSE_WAIT until checkout hit its descriptor limit.",
        )
        .build();
    app.publish(&turn).await;
    let episode = app.wait_for_episode("conv-thin", WAIT, |_| true).await;

    let requests = app.fake.requests();
    assert_eq!(requests.len(), 2, "one extraction, one second look");
    assert_eq!(requests[1].kind, RequestKind::Cause);
    assert_eq!(
        episode.root_cause.as_deref(),
        Some(
            "the merchant-webhook client never closed response bodies, so sockets piled up in \
             CLOSE_WAIT until checkout hit its descriptor limit"
        ),
        "{episode:#?}"
    );
    assert!(
        episode.ruled_out.is_empty(),
        "a thin cause is the same conclusion, not a ruled-out one: {:?}",
        episode.ruled_out
    );
    app.cleanup().await;
}

#[tokio::test]
async fn a_cause_that_affirms_a_ruled_out_phrase_is_read_again_and_not_ruled_out() {
    let app = WorkerApp::start().await;
    // The model lists "clock skew" as ruled out and writes a cause that affirms it among more
    // words (scripted).
    let mut reply = extraction(GUESS);
    reply["ruled_out"] = json!(["clock skew"]);
    app.fake.push(Reply::Json(reply));
    let turn = TurnBuilder::new(&app.org, "platform", "conv-affirms", 1)
        .answer(
            "Resolved: syncs succeed again. Root cause: the webhook certificate created at \
             install expired. Clock skew ruled out.",
        )
        .build();
    app.publish(&turn).await;
    let episode = app.wait_for_episode("conv-affirms", WAIT, |_| true).await;

    let requests = app.fake.requests();
    assert_eq!(requests.len(), 2, "one extraction, one second look");
    assert_eq!(requests[1].kind, RequestKind::Cause);
    let asked = requests[1].message("user").unwrap_or_default();
    assert!(
        asked.contains("The answer rules out: clock skew."),
        "{asked}"
    );
    assert_eq!(
        episode.root_cause.as_deref(),
        Some("the webhook certificate created at install expired"),
        "{episode:#?}"
    );
    assert_eq!(
        episode.ruled_out,
        vec!["clock skew".to_owned()],
        "the replaced cause may have said more than the guess: it is not listed as ruled out"
    );
    app.cleanup().await;
}

#[tokio::test]
async fn a_guess_an_earlier_turn_ruled_out_is_not_revived_by_a_later_silent_turn() {
    let app = WorkerApp::start().await;
    let cause = "the admission webhook certificate created at install expired last night";
    first_guess(&app, "conv-revived").await;
    // Turn 2 is read right: its own cause, the guess ruled out.
    let mut revised = extraction(cause);
    revised["ruled_out"] = json!([GUESS]);
    app.fake.push(Reply::Json(revised));
    let second = publish_second_turn(&app, "conv-revived").await;
    assert_eq!(second.root_cause.as_deref(), Some(cause), "{second:#?}");

    // Turn 3 only reports that all is well; the model carries the guess back as the cause.
    app.fake.push(Reply::Json(extraction(GUESS)));
    let third = TurnBuilder::new(&app.org, "platform", "conv-revived", 3)
        .answer("Syncs have stayed green for an hour after the rotation; closing this.")
        .build();
    app.publish(&third).await;
    let episode = app
        .wait_for_episode("conv-revived", WAIT, |e| e.turn_count == 3)
        .await;

    assert_eq!(episode.root_cause.as_deref(), Some(cause), "{episode:#?}");
    assert_eq!(episode.ruled_out, vec![GUESS], "the guess stays ruled out");
    assert_eq!(episode.last_turn_index, 3);
    // No second look: the answer is silent on the guess, the merge keeps the earlier cause.
    assert_eq!(request_kinds(&app), vec![RequestKind::Extraction; 3]);
    app.cleanup().await;
}

#[tokio::test]
async fn a_revived_guess_is_read_again_when_the_answer_denies_the_earlier_cause_too() {
    let app = WorkerApp::start().await;
    // Turn 1: the guess, and an observation the model misfiled as ruled out.
    let observation = "stale admission webhook configuration";
    first_guess_ruling_out(&app, "conv-revived-denied", &[observation]).await;

    // Turn 2 rules the guess out and concludes another cause; the model revives the
    // observation, on which the answer is silent. Neither is the answer's conclusion.
    app.fake.push(Reply::Json(extraction(observation)));
    let episode = publish_second_turn(&app, "conv-revived-denied").await;

    let root_cause = episode.root_cause.as_deref().unwrap_or_default();
    assert!(root_cause.contains("webhook certificate"), "{episode:#?}");
    assert!(!root_cause.contains("clock skew"), "{root_cause}");
    assert!(
        episode.ruled_out.iter().any(|r| r == observation),
        "{:?}",
        episode.ruled_out
    );
    assert_eq!(
        request_kinds(&app),
        vec![
            RequestKind::Extraction,
            RequestKind::Extraction,
            RequestKind::Cause
        ]
    );
    let asked = app.fake.requests()[2].message("user").unwrap_or_default();
    assert!(asked.contains("clock skew"), "{asked}");
    assert!(asked.contains(observation), "{asked}");
    app.cleanup().await;
}

#[tokio::test]
async fn a_cause_that_misses_the_one_the_answer_states_is_read_again_and_not_ruled_out() {
    let app = WorkerApp::start().await;
    first_guess(&app, "conv-stated").await;
    // The answer states its cause after "Root cause:"; the model writes how it was fixed.
    let deploy = "syncs recovered after Monday's platform release shipped the rotation";
    app.fake.push(Reply::Json(extraction(deploy)));
    let episode = publish_second_turn(&app, "conv-stated").await;

    let root_cause = episode.root_cause.as_deref().unwrap_or_default();
    assert!(
        root_cause.contains("created at install expired"),
        "{episode:#?}"
    );
    assert!(
        !episode.ruled_out.iter().any(|r| r == deploy),
        "a cause that missed the statement is not ruled out: {:?}",
        episode.ruled_out
    );
    assert_eq!(
        request_kinds(&app),
        vec![
            RequestKind::Extraction,
            RequestKind::Extraction,
            RequestKind::Cause
        ]
    );
    app.cleanup().await;
}

#[tokio::test]
async fn what_the_answer_affirms_is_not_stored_as_ruled_out_nor_doubts_the_cause() {
    let app = WorkerApp::start().await;
    // The model files a finding the answer states and the answer's own cause under ruled_out,
    // next to the hypothesis the answer does rule out (scripted).
    // Eight words: no thin cause.
    let cause = "the webhook certificate created at install expired after a year";
    let mut reply = extraction(cause);
    reply["ruled_out"] = json!([
        "every sync since 09:00 failed on the admission webhook",
        "webhook certificate expired at install",
        "clock skew"
    ]);
    app.fake.push(Reply::Json(reply));
    let turn = TurnBuilder::new(&app.org, "platform", "conv-affirmed", 1)
        .answer(
            "Every sync since 09:00 failed on the admission webhook. Root cause: the webhook \
             certificate created at install expired after a year. Clock skew ruled out; the \
             renewed certificate fixed it.",
        )
        .build();
    app.publish(&turn).await;
    let episode = app.wait_for_episode("conv-affirmed", WAIT, |_| true).await;

    assert_eq!(episode.ruled_out, vec!["clock skew".to_owned()]);
    assert_eq!(episode.root_cause.as_deref(), Some(cause), "{episode:#?}");
    assert_eq!(
        request_kinds(&app),
        [RequestKind::Extraction],
        "a cause restated by an item the answer affirms is no doubtful cause"
    );
    app.cleanup().await;
}

#[tokio::test]
async fn the_standing_conclusion_filed_as_ruled_out_by_a_turn_that_revises_nothing_stays_the_cause()
{
    let app = WorkerApp::start().await;
    // Eight words: no thin cause.
    let cause = "the webhook certificate created at install expired after a year";
    app.fake.push(Reply::Json(extraction(cause)));
    let first = TurnBuilder::new(&app.org, "platform", "conv-standing", 1)
        .answer("The webhook certificate created at install expired after a year.")
        .build();
    app.publish(&first).await;
    app.wait_for_episode("conv-standing", WAIT, |e| e.turn_count == 1)
        .await;
    // Turn 2 only checks the fix; the model files the standing cause in both fields
    // (inc-dev-043), next to the earlier turn's cause with the prompt's field name (-062).
    let mut reply = extraction(cause);
    reply["ruled_out"] = json!([
        cause,
        format!("earlier_conclusion: {cause}"),
        "clock skew on the API servers"
    ]);
    app.fake.push(Reply::Json(reply));
    let second = TurnBuilder::new(&app.org, "platform", "conv-standing", 2)
        .answer("Syncs succeed again since the renewed certificate went out at 10:02.")
        .build();
    app.publish(&second).await;
    let episode = app
        .wait_for_episode("conv-standing", WAIT, |e| e.turn_count == 2)
        .await;

    assert_eq!(episode.root_cause.as_deref(), Some(cause), "{episode:#?}");
    assert_eq!(
        episode.ruled_out,
        vec!["clock skew on the API servers".to_owned()]
    );
    assert_eq!(
        request_kinds(&app),
        [RequestKind::Extraction, RequestKind::Extraction],
        "a cause only the model's misfiled copy restates gets no second look"
    );
    app.cleanup().await;
}

/// inc-dev-047: turn 1 explains the failure, turn 2 only checks the fix and names the cause in
/// a few words while the model files turn 1's explanation as ruled out. The episode keeps the
/// brief cause followed by the explanation it confirms, without the misfiled copy
/// (`deja_domain::confirmed`).
#[tokio::test]
async fn a_turn_that_only_confirms_keeps_the_explanation_it_confirms() {
    let app = WorkerApp::start().await;
    let explanation = "node-local dnsmasq sets min-cache-ttl=3600, which overrides the \
                       record's 60 s TTL, so client nodes keep the old address for an hour";
    app.fake.push(Reply::Json(extraction(explanation)));
    let first = TurnBuilder::new(&app.org, "platform", "conv-confirmed", 1)
        .answer(
            "The VPC resolver returns the new address, but node-local dnsmasq still answers \
             with the old one: its min-cache-ttl=3600 overrides the record's 60 s TTL.",
        )
        .build();
    app.publish(&first).await;
    app.wait_for_episode("conv-confirmed", WAIT, |e| e.turn_count == 1)
        .await;
    // Eleven words: no thin cause, but brief.
    let brief = "a resolver-side minimum TTL was pinning clients to the old address";
    let mut reply = extraction(brief);
    reply["ruled_out"] = json!([explanation]);
    app.fake.push(Reply::Json(reply));
    let second = TurnBuilder::new(&app.org, "platform", "conv-confirmed", 2)
        .answer(
            "In the repeat drill the drained balancer's new flows dropped to ~1% within 90 \
             seconds. Resolved: a resolver-side minimum TTL was pinning clients to the old \
             address.",
        )
        .build();
    app.publish(&second).await;
    let episode = app
        .wait_for_episode("conv-confirmed", WAIT, |e| e.turn_count == 2)
        .await;

    assert_eq!(
        episode.root_cause.as_deref(),
        Some(format!("{brief}: {explanation}").as_str()),
        "{episode:#?}"
    );
    assert!(episode.ruled_out.is_empty(), "{:?}", episode.ruled_out);
    assert_eq!(
        request_kinds(&app),
        [RequestKind::Extraction, RequestKind::Extraction]
    );
    app.cleanup().await;
}

/// Turn 1 files its guess under the guess's type; turn 2's answer rules the guess out and
/// names another cause while the extraction keeps the type (the fake falls back to the stored
/// episode's, as the local model does). The episode once turn 2 is merged, with its new cause.
async fn type_of_the_ruled_out_guess(app: &WorkerApp, conversation: &str) -> deja_domain::Episode {
    let first = TurnBuilder::new(&app.org, "platform", conversation, 1)
        .user_message("[FIRING] TokenRejections service=idp #time-drift")
        .answer("My first guess is time drift between the hosts.")
        .build();
    app.publish(&first).await;
    app.wait_for_episode(conversation, WAIT, |e| e.turn_count == 1)
        .await;
    let second = TurnBuilder::new(&app.org, "platform", conversation, 2)
        .user_message("Any progress?")
        .answer(
            "Root cause: the key-retirement job removed the signing key while tokens signed \
             with it were still valid, confirmed. Ruled out: time drift between the hosts.",
        )
        .build();
    app.publish(&second).await;
    let episode = app
        .wait_for_episode(conversation, WAIT, |e| e.turn_count == 2)
        .await;
    assert!(
        episode
            .root_cause
            .as_deref()
            .is_some_and(|c| c.contains("key-retirement job")),
        "{episode:#?}"
    );
    episode
}

#[tokio::test]
async fn an_issue_type_naming_the_ruled_out_guess_is_renamed_after_the_new_cause() {
    let app = WorkerApp::start().await;
    let episode = type_of_the_ruled_out_guess(&app, "conv-type").await;

    assert_eq!(
        request_kinds(&app),
        [
            RequestKind::Extraction,
            RequestKind::Extraction,
            RequestKind::IssueType
        ]
    );
    assert_eq!(
        episode.issue_type, "key-retirement-job-removed",
        "{episode:#?}"
    );
    assert!(
        episode
            .ruled_out
            .iter()
            .any(|r| r == "time drift between the hosts"),
        "{:?}",
        episode.ruled_out
    );
    app.cleanup().await;
}

#[tokio::test]
async fn a_rename_that_keeps_naming_the_guess_leaves_the_type_and_still_stores_the_turn() {
    let app = WorkerApp::start().await;
    // Turn 1 and turn 2's extraction answer as usual; both type replies name the guess.
    app.fake.push(Reply::Auto);
    app.fake.push(Reply::Auto);
    app.fake
        .push(Reply::Json(json!({"issue_type": "time-drift"})));
    app.fake
        .push(Reply::Json(json!({"issue_type": "clock-time-drift"})));
    let episode = type_of_the_ruled_out_guess(&app, "conv-kept-type").await;

    assert_eq!(
        request_kinds(&app),
        [
            RequestKind::Extraction,
            RequestKind::Extraction,
            RequestKind::IssueType,
            RequestKind::IssueType
        ],
        "one repair, no more"
    );
    assert_eq!(episode.issue_type, "time-drift", "kept as extracted");
    assert_eq!(episode.extraction_status, deja_domain::ExtractionStatus::Ok);
    app.cleanup().await;
}
