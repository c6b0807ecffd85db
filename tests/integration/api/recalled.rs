//! "Most recently recalled first" (issue 11): memory-search stamps `last_recalled_at` on the
//! episodes it returns, off its own path, and the review listing orders by it.

use deja_tests::api_app::{maven_oom, tls_expiry, ApiApp};
use reqwest::Method;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

async fn listing(app: &ApiApp, order: &str) -> Vec<Value> {
    let (status, _, json) = app
        .call(
            Method::GET,
            &format!("/v1/review/episodes?order={order}"),
            Some(&app.tokens.review_only),
            &[],
            None,
        )
        .await;
    assert_eq!(status, 200, "{json}");
    json["result"]["episodes"].as_array().unwrap().clone()
}

/// Polls the recalled listing until `ready` holds (the stamp is written after the answer,
/// by a detached task). Bounded by the stamp's own time limit (the search deadline, 20 s in
/// tests) plus the retries neo4rs makes on a transient error (a lock held by a concurrent
/// test's write): a stamp that is lost still fails, a slow one on a loaded CI machine not.
async fn recalled_listing(app: &ApiApp, ready: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let episodes = listing(app, "recalled").await;
        if ready(&episodes) {
            return episodes;
        }
        assert!(Instant::now() < deadline, "never stamped: {episodes:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `id` heads the listing with a recall stamp. Before any stamp every episode ties (never
/// recalled) and the listing falls back to id order, so `id` can head it unstamped.
fn first_and_stamped(episodes: &[Value], id: &str) -> bool {
    episodes
        .first()
        .is_some_and(|e| e["id"] == id && e["last_recalled_at"].is_string())
}

fn ids(episodes: &[Value]) -> Vec<&str> {
    episodes.iter().map(|e| e["id"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn the_review_listing_puts_the_most_recently_recalled_episodes_first() {
    let app = ApiApp::start().await;
    let tls = app.seed("checkout", "conv-tls", &tls_expiry()).await;
    let maven = app.seed("checkout", "conv-maven", &maven_oom(0)).await;
    let never = app.seed("payments", "conv-never", &maven_oom(1)).await;
    // Newest first by update: nothing recalled yet.
    assert!(listing(&app, "recalled")
        .await
        .iter()
        .all(|e| e.get("last_recalled_at").is_none()));

    let answer = app
        .search_ok(
            &json!({"query": "payments gateway certificate expired", "mode": "text",
                           "team": "checkout", "limit": 1}),
        )
        .await;
    assert_eq!(answer["episodes"][0]["id"], tls.id.as_str(), "{answer:#}");
    let first = recalled_listing(&app, |e| first_and_stamped(e, &tls.id)).await;
    assert!(first[0]["last_recalled_at"].is_string(), "{first:#?}");

    let answer = app
        .search_ok(
            &json!({"query": "surveys-module Maven OutOfMemoryError", "mode": "text",
                           "team": "checkout", "limit": 1}),
        )
        .await;
    assert_eq!(answer["episodes"][0]["id"], maven.id.as_str(), "{answer:#}");
    let second = recalled_listing(&app, |e| first_and_stamped(e, &maven.id)).await;
    // Most recently recalled first, then the earlier one, never-recalled episodes last.
    assert_eq!(
        ids(&second),
        vec![maven.id.as_str(), tls.id.as_str(), never.id.as_str()]
    );
    assert!(second[2].get("last_recalled_at").is_none());
    let (status, _, json) = app
        .call(
            Method::GET,
            "/v1/review/episodes?order=sideways",
            Some(&app.tokens.review_only),
            &[],
            None,
        )
        .await;
    assert_eq!(status, 400);
    assert!(json["error"]["message"]
        .as_str()
        .unwrap()
        .contains("recalled"));
    app.cleanup().await;
}
