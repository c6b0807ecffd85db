//! The related-history digest (`POST /v1/memory/digest`, issue 11) against real Neo4j: off by
//! default, and when on, the trigger's entities (mapped per signal type) matched against
//! components and issue types of the window's episodes.

use chrono::{Duration, Utc};
use deja_domain::Component;
use deja_graph::SaveOutcome;
use deja_tests::api_app::ApiApp;
use reqwest::Method;
use serde_json::{json, Value};

async fn digest(app: &ApiApp, token: &str, body: &Value) -> (u16, Value) {
    let (status, _, json) = app
        .call(
            Method::POST,
            "/v1/memory/digest",
            Some(token),
            &[],
            Some(body),
        )
        .await;
    (status, json)
}

/// An `ok` episode of `team` affecting `component`, last confirmed `days_ago`.
async fn episode(
    app: &ApiApp,
    team: &str,
    conversation: &str,
    component: &str,
    days_ago: i64,
) -> String {
    let mut e = deja_tests::sample_episode(&app.org, team, conversation, Vec::new());
    let at = Utc::now() - Duration::days(days_ago);
    e.embedding = None;
    e.components = vec![Component::new("service", component)];
    e.issue_type = "connection-pool-exhaustion".into();
    e.summary = format!("{component} ran out of pooled connections");
    e.created_at = at;
    e.updated_at = at;
    e.last_confirmed_at = at;
    match app.store.save(&e, None).await.expect("save") {
        SaveOutcome::Saved { .. } => e.id,
        SaveOutcome::Conflict => panic!("{conversation} exists"),
    }
}

fn alert(service: &str) -> Value {
    json!({
        "trigger": {
            "signal_type": "alertmanager",
            "payload": {
                "status": "firing",
                "commonLabels": {"alertname": "HighLatency", "service": service},
                "alerts": [{"labels": {"service": service, "job": "api"}}]
            }
        }
    })
}

#[tokio::test]
async fn the_digest_is_off_by_default_and_says_so() {
    let app = ApiApp::start().await;
    let (status, json) = digest(&app, &app.tokens.org, &alert("payments-gateway")).await;
    assert_eq!(status, 404, "{json}");
    assert_eq!(json["error"]["code"], "not_found");
    let message = json["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("digest.enabled"), "{message}");
    app.cleanup().await;
}

#[tokio::test]
async fn the_digest_returns_the_windows_episodes_about_the_triggers_component() {
    let app = ApiApp::start_tuned(|s| s.digest.enabled = true, true).await;
    let recent = episode(&app, "checkout", "conv-recent", "payments-gateway", 2).await;
    let older = episode(&app, "checkout", "conv-older", "Payments-Gateway", 9).await;
    let outside = episode(&app, "checkout", "conv-outside", "payments-gateway", 20).await;
    let unrelated = episode(&app, "checkout", "conv-unrelated", "search-api", 1).await;
    let other_team = episode(&app, "payments", "conv-other-team", "payments-gateway", 1).await;

    let (status, json) = digest(&app, &app.tokens.org, &alert("payments-gateway")).await;
    assert_eq!(status, 200, "{json}");
    let result = &json["result"];
    assert_eq!(
        result["entities"],
        json!(["payments-gateway"]),
        "{result:#}"
    );
    assert_eq!(result["window_days"], 14);
    let ids: Vec<&str> = result["episodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    // Matching ignores case; most recently confirmed first; 20 days ago is outside the
    // 14-day window; another component never matches.
    assert_eq!(
        ids,
        vec![other_team.as_str(), recent.as_str(), older.as_str()],
        "{result:#}"
    );
    assert!(!ids.contains(&outside.as_str()) && !ids.contains(&unrelated.as_str()));
    assert_eq!(result["episodes"][0]["recurrence_count"], 0);

    // A wider window reaches the older episode; a team-bound token names its team, as in
    // search, and sees that team only.
    let mut wide = alert("payments-gateway");
    wide["window_days"] = json!(30);
    wide["limit"] = json!(5);
    let (_, json) = digest(&app, &app.tokens.org, &wide).await;
    assert_eq!(
        json["result"]["episodes"].as_array().unwrap().len(),
        4,
        "{json:#}"
    );
    let (status, _) = digest(&app, &app.tokens.checkout, &alert("payments-gateway")).await;
    assert_eq!(status, 403, "a team-bound token must name its team");
    let mut own_team = alert("payments-gateway");
    own_team["team"] = json!("checkout");
    let (status, json) = digest(&app, &app.tokens.checkout, &own_team).await;
    assert_eq!(status, 200, "{json}");
    let ids: Vec<&str> = json["result"]["episodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![recent.as_str(), older.as_str()], "{json:#}");
    let mut foreign = alert("payments-gateway");
    foreign["team"] = json!("payments");
    let (status, _) = digest(&app, &app.tokens.checkout, &foreign).await;
    assert_eq!(status, 403);
    let (status, json) = digest(&app, &app.tokens.other_org, &alert("payments-gateway")).await;
    assert_eq!(status, 200, "{json}");
    assert_eq!(
        json["result"]["episodes"],
        json!([]),
        "another org's token reads its own org"
    );

    // A payload the mapping finds nothing in: no episodes, and a notice naming the paths.
    let (status, json) = digest(
        &app,
        &app.tokens.org,
        &json!({"trigger": {"signal_type": "alertmanager", "payload": {"labels": {}}}}),
    )
    .await;
    assert_eq!(status, 200, "{json}");
    assert_eq!(json["result"]["episodes"], json!([]));
    assert!(json["result"]["notice"]
        .as_str()
        .is_some_and(|n| n.contains("$.commonLabels.service")));
    let mut too_many = alert("payments-gateway");
    too_many["limit"] = json!(6);
    let (status, json) = digest(&app, &app.tokens.org, &too_many).await;
    assert_eq!(status, 400, "{json}");
    // Names as the search checks them: no team named like the org-wide scope, no control
    // characters, no org past the length bound.
    for (field, value) in [
        ("team", json!("*")),
        ("team", json!("check\u{1f}out")),
        ("org", json!("o".repeat(300))),
    ] {
        let mut named = alert("payments-gateway");
        named[field] = value;
        let (status, json) = digest(&app, &app.tokens.org, &named).await;
        assert_eq!(status, 400, "{json}");
        let message = json["error"]["message"].as_str().unwrap_or_default();
        assert!(message.starts_with(&format!("invalid `{field}`")), "{json}");
    }
    app.cleanup().await;
}

/// A person may link across teams: a team's digest counts only that team's episodes of the
/// chain, as search does, so it shows no other team's dates.
#[tokio::test]
async fn a_teams_digest_counts_only_its_teams_part_of_a_recurrence_chain() {
    let app = ApiApp::start_tuned(|s| s.digest.enabled = true, true).await;
    let checkout = episode(&app, "checkout", "conv-checkout", "payments-gateway", 1).await;
    let payments = episode(&app, "payments", "conv-payments", "billing-api", 5).await;
    assert_eq!(
        app.store
            .link_recurrence(&app.org, &checkout, &payments, 1.0)
            .await
            .unwrap(),
        Some(true)
    );
    let (status, json) = digest(&app, &app.tokens.org, &alert("payments-gateway")).await;
    assert_eq!(status, 200, "{json}");
    let org_wide = &json["result"]["episodes"][0];
    assert_eq!(org_wide["id"], json!(checkout));
    assert_eq!(org_wide["recurrence_count"], 1, "{org_wide:#}");
    assert_ne!(org_wide["first_seen"], org_wide["last_seen"]);

    let mut own_team = alert("payments-gateway");
    own_team["team"] = json!("checkout");
    let (status, json) = digest(&app, &app.tokens.checkout, &own_team).await;
    assert_eq!(status, 200, "{json}");
    let team = &json["result"]["episodes"][0];
    assert_eq!(team["id"], json!(checkout));
    assert_eq!(team["recurrence_count"], 0, "{team:#}");
    assert_eq!(team["first_seen"], team["last_seen"], "{team:#}");
    app.cleanup().await;
}
