//! The HTTP API: the envelope, modes, access control, bad requests and failures within the
//! deadline.

use deja_api::{Application, Dependencies};
use deja_tests::api_app::{api_settings, maven_oom, tls_expiry, ApiApp, MAVEN_QUERY};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

#[tokio::test]
async fn a_semantic_search_returns_compact_episodes_best_first_in_the_envelope() {
    let app = ApiApp::start().await;
    let maven = app.seed("checkout", "conv-1", &maven_oom(0)).await;
    app.seed("checkout", "conv-2", &tls_expiry()).await;
    let (status, json) = app
        .search(
            Some(&app.tokens.org),
            &json!({"query": MAVEN_QUERY, "limit": 1}),
        )
        .await;
    assert_eq!(status, 200, "{json}");
    let keys: Vec<&String> = json.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["result", "success"]);
    let result = &json["result"];
    let episode = &result["episodes"][0];
    assert_eq!(episode["id"], json!(maven.id));
    for field in [
        "id",
        "issue_type",
        "root_cause",
        "resolved",
        "summary",
        "skills_used",
        "components",
        "score",
        "similarity",
        "updated_at",
        "correlation_id",
        "agent_run_id",
    ] {
        assert!(
            episode.get(field).is_some(),
            "compact episode lacks {field}: {episode}"
        );
    }
    assert!(episode.get("description").is_none(), "compact by default");
    assert!(episode["similarity"].as_f64().unwrap() >= 0.45);
    // The TLS episode is below the floor, so nothing more is available.
    assert_eq!(result["more_available"], false);

    let detailed = app
        .search_ok(&json!({"query": MAVEN_QUERY, "details": true}))
        .await;
    let episode = &detailed["episodes"][0];
    assert_eq!(episode["description"], json!(maven.issue_description));
    assert!(episode["score_breakdown"]["score"].is_number(), "{episode}");
    assert_eq!(episode["provenance"], "extracted");

    let (status, full) = app
        .get(
            Some(&app.tokens.org),
            &format!("/v1/memory/episodes/{}", maven.id),
        )
        .await;
    assert_eq!(status, 200, "{full}");
    assert_eq!(full["result"]["key_findings"], json!(maven.key_findings));
    app.cleanup().await;
}

/// A limit at or above the candidates the decision keeps (`search.rerank_candidates`, 10) still
/// says when memory holds more.
#[tokio::test]
async fn a_deep_limit_says_when_more_is_available() {
    let app = ApiApp::start().await;
    for i in 0..12 {
        app.seed("checkout", &format!("conv-{i}"), &maven_oom(i % 4))
            .await;
    }
    let deep = app
        .search_ok(&json!({"query": MAVEN_QUERY, "limit": 10}))
        .await;
    assert_eq!(deep["episodes"].as_array().unwrap().len(), 10, "{deep}");
    assert_eq!(deep["more_available"], true, "{deep}");
    let all = app
        .search_ok(&json!({"query": MAVEN_QUERY, "limit": 20}))
        .await;
    assert_eq!(all["episodes"].as_array().unwrap().len(), 12, "{all}");
    assert_eq!(all["more_available"], false, "{all}");
    app.cleanup().await;
}

/// A person may link episodes across teams; a team's search counts only the chain members it
/// may read, reached through its own episodes: a checkout episode linked to checkout's first
/// only through a payments episode is not counted for checkout.
#[tokio::test]
async fn a_team_search_counts_only_its_teams_recurrences() {
    let app = ApiApp::start().await;
    let checkout = app.seed("checkout", "conv-1", &maven_oom(0)).await;
    let payments = app.seed("payments", "conv-2", &maven_oom(1)).await;
    let later = app.seed("checkout", "conv-3", &maven_oom(2)).await;
    app.store
        .link_recurrence(&app.org, &payments.id, &checkout.id, 0.9)
        .await
        .unwrap();
    app.store
        .link_recurrence(&app.org, &later.id, &payments.id, 0.9)
        .await
        .unwrap();
    for (team, expected) in [(None, 2), (Some("checkout"), 0)] {
        let mut query = json!({"query": MAVEN_QUERY, "mode": "text"});
        if let Some(team) = team {
            query["team"] = json!(team);
        }
        let result = app.search_ok(&query).await;
        let answer = result["episodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["id"] == json!(checkout.id))
            .unwrap_or_else(|| panic!("{result:#}"))
            .clone();
        assert_eq!(answer["recurrence_count"], expected, "{team:?}: {answer:#}");
    }
    app.cleanup().await;
}

/// `deja search` prints how often an episode recurred under that episode's row, not above the
/// table where no one can tell which episode it is about.
#[tokio::test]
async fn the_cli_search_table_shows_a_recurrence_under_its_episode() {
    let app = ApiApp::start().await;
    let first = app.seed("checkout", "conv-1", &maven_oom(0)).await;
    let again = app.seed("checkout", "conv-2", &maven_oom(1)).await;
    app.store
        .link_recurrence(&app.org, &again.id, &first.id, 0.9)
        .await
        .unwrap();
    let output = tokio::process::Command::from(deja_tests::deja_command(&app.settings))
        .args(["search", "--org", &app.org, "--mode", "text", MAVEN_QUERY])
        .output()
        .await
        .expect("run deja search");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    let header = lines
        .iter()
        .position(|l| l.starts_with("RANK"))
        .expect(&stdout);
    for id in [&first.id, &again.id] {
        let row = lines
            .iter()
            .position(|l| l.contains(id.as_str()))
            .expect(&stdout);
        assert!(row > header, "{stdout}");
        // The episode's own lines (its check, its recurrence) before the next episode's.
        let own: Vec<&&str> = lines[row + 1..]
            .iter()
            .take_while(|l| !l.contains("ep_") && !l.trim().is_empty())
            .collect();
        assert!(
            own.iter().any(|l| l.contains("seen 2 times")),
            "{id}: {stdout}"
        );
    }
    app.cleanup().await;
}

#[tokio::test]
async fn text_and_timeline_modes_find_literal_strings_and_the_newest_episodes() {
    let app = ApiApp::start().await;
    let maven = app.seed("checkout", "conv-1", &maven_oom(1)).await;
    let tls = app.seed("checkout", "conv-2", &tls_expiry()).await;
    let text = app
        .search_ok(&json!({"query": "x509: certificate has expired", "mode": "text"}))
        .await;
    assert_eq!(text["episodes"][0]["id"], json!(tls.id), "{text}");
    assert_eq!(text["episodes"][0]["similarity"], Value::Null);

    let timeline = app
        .search_ok(&json!({"mode": "timeline", "limit": 1}))
        .await;
    assert_eq!(
        timeline["episodes"][0]["id"],
        json!(tls.id),
        "newest first: {timeline}"
    );
    assert_eq!(timeline["more_available"], true);
    let by_component = app
        .search_ok(&json!({"mode": "timeline",
            "components": [{"type": "pipeline", "name": "jenkins"}]}))
        .await;
    assert_eq!(by_component["episodes"].as_array().unwrap().len(), 1);
    assert_eq!(by_component["episodes"][0]["id"], json!(maven.id));
    // A filter is read in the vocabulary's normal form, as the graph stores names.
    let spelled = app
        .search_ok(&json!({"query": MAVEN_QUERY,
            "components": [{"type": "Pipeline", "name": "JENKINS"}]}))
        .await;
    assert_eq!(spelled["episodes"][0]["id"], json!(maven.id), "{spelled}");

    let excluded = app
        .search_ok(&json!({"query": MAVEN_QUERY, "exclude_correlation_id": "conv-1"}))
        .await;
    assert_eq!(excluded["episodes"], json!([]), "{excluded}");
    app.cleanup().await;
}

#[tokio::test]
async fn cross_org_and_cross_team_requests_are_forbidden_and_missing_tokens_unauthorized() {
    let app = ApiApp::start().await;
    let episode = app.seed("payments", "conv-1", &maven_oom(0)).await;
    let org = app.org.clone();
    let cases: Vec<(Option<&str>, Value, u16, &str)> = vec![
        (None, json!({"query": "q"}), 401, "unauthorized"),
        (
            Some("not-a-token-at-all"),
            json!({"query": "q"}),
            401,
            "unauthorized",
        ),
        (
            Some(&app.tokens.other_org),
            json!({"org": org, "query": "q"}),
            403,
            "forbidden",
        ),
        (
            Some(&app.tokens.org),
            json!({"org": "someone-else", "query": "q"}),
            403,
            "forbidden",
        ),
        (
            Some(&app.tokens.checkout),
            json!({"team": "payments", "query": "q"}),
            403,
            "forbidden",
        ),
        (
            Some(&app.tokens.checkout),
            json!({"query": "q"}),
            403,
            "forbidden",
        ),
        (
            Some(&app.tokens.review_only),
            json!({"query": "q"}),
            403,
            "forbidden",
        ),
    ];
    for (token, body, status, code) in cases {
        let (got, json) = app.search(token, &body).await;
        assert_eq!(got, status, "{body} -> {json}");
        assert_eq!(json["success"], false);
        assert_eq!(json["error"]["code"], code, "{json}");
    }
    let path = format!("/v1/memory/episodes/{}", episode.id);
    let (status, headers, json) = app.call(reqwest::Method::GET, &path, None, &[], None).await;
    assert_eq!(
        (status, &json["error"]["code"]),
        (401, &json!("unauthorized"))
    );
    assert_eq!(
        headers
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok()),
        Some("Bearer"),
        "a 401 says which scheme to use"
    );
    assert_eq!(app.get(Some(&app.tokens.org), &path).await.0, 200);
    let (status, json) = app.get(Some(&app.tokens.checkout), &path).await;
    assert_eq!(
        (status, json["error"]["code"].clone()),
        (404, json!("not_found"))
    );
    let (status, _) = app
        .get(Some(&app.tokens.org), &format!("{path}?org=someone-else"))
        .await;
    assert_eq!(status, 403);
    let (status, _) = app.get(Some(&app.tokens.other_org), &path).await;
    assert_eq!(
        status, 404,
        "another org's episode does not exist for this token"
    );
    app.cleanup().await;
}

#[tokio::test]
async fn bad_requests_get_a_4xx_envelope_naming_the_field() {
    let app = ApiApp::start().await;
    let cases: Vec<(Value, &str)> = vec![
        (json!({"query": "q", "limit": 51}), "limit"),
        (json!({"query": "q", "limit": 0}), "limit"),
        (json!({"query": "q", "limit": "three"}), "limit"),
        (json!({"query": "q", "mode": "fuzzy"}), "mode"),
        (json!({"query": "q", "limt": 3}), "limt"),
        (json!({"limit": 3}), "query"),
        (
            json!({"query": "q", "components": [{"type": "service"}]}),
            "name",
        ),
        (json!({"query": "q", "resolved": "yes"}), "resolved"),
    ];
    for (body, field) in cases {
        let (status, json) = app.search(Some(&app.tokens.org), &body).await;
        assert_eq!(status, 400, "{body} -> {json}");
        assert_eq!(json["error"]["code"], "bad_request", "{json}");
        let message = json["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(field),
            "{body}: `{message}` does not name {field}"
        );
    }
    let response = app
        .client
        .post(format!("{}/v1/memory/search", app.base_url))
        .bearer_auth(&app.tokens.org)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let json: Value = response.json().await.unwrap();
    assert_eq!(json["error"]["code"], "bad_request");
    let (status, json) = app
        .get(Some(&app.tokens.org), "/v1/memory/nothing-here")
        .await;
    assert_eq!((status, json["success"].clone()), (404, json!(false)));
    // An id that is not UTF-8 once decoded: the envelope naming the path, not a plain-text 400.
    let (status, json) = app
        .get(Some(&app.tokens.org), "/v1/memory/episodes/%FF")
        .await;
    assert_eq!(
        (status, json["error"]["code"].clone()),
        (400, json!("bad_request"))
    );
    assert!(
        json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`path`"),
        "{json}"
    );
    // The search asked with GET: 405 with the envelope and the Allow header.
    let response = app
        .client
        .get(format!("{}/v1/memory/search", app.base_url))
        .bearer_auth(&app.tokens.org)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 405);
    assert_eq!(response.headers()["allow"], "POST");
    let json: Value = response.json().await.unwrap();
    assert_eq!(json["error"]["code"], "method_not_allowed", "{json}");
    assert!(
        json["error"]["message"].as_str().unwrap().contains("GET"),
        "{json}"
    );
    // A body over the limit: 413, not a 400 about the body.
    let (status, json) = app
        .search(
            Some(&app.tokens.org),
            &json!({"query": "q".repeat(100 * 1024)}),
        )
        .await;
    assert_eq!(
        (status, json["error"]["code"].clone()),
        (413, json!("payload_too_large"))
    );
    app.cleanup().await;
}

/// The real embedder, slowed down past any deadline (a machine whose cores are busy).
struct Stalling(std::sync::Arc<dyn deja_embed::Embedder>);

impl deja_embed::Embedder for Stalling {
    fn model_id(&self) -> &str {
        self.0.model_id()
    }

    fn dimensions(&self) -> usize {
        self.0.dimensions()
    }

    fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, deja_embed::EmbedError> {
        std::thread::sleep(Duration::from_secs(5));
        self.0.embed(texts)
    }
}

#[tokio::test]
async fn a_search_whose_embedding_stalls_answers_from_full_text_within_the_deadline() {
    let stalling = Stalling(deja_tests::embedder());
    // The production deadline: the tests' own is long enough for a loaded CI machine.
    let app = ApiApp::start_with(
        |s| s.search.deadline_ms = 2_000,
        Some(std::sync::Arc::new(stalling)),
    )
    .await;
    let maven = app.seed("checkout", "conv-1", &maven_oom(0)).await;
    // Answered, not `deadline_exceeded`: the embedding's half of the deadline ran out and the
    // search fell back to full text in the other half.
    let (status, json) = app
        .search(
            Some(&app.tokens.org),
            &json!({"query": "surveys-module OutOfMemoryError"}),
        )
        .await;
    assert_eq!(status, 200, "{json}");
    assert_eq!(
        json["result"]["episodes"][0]["id"],
        json!(maven.id),
        "{json}"
    );
    let notice = json["result"]["notice"].as_str().unwrap_or_default();
    assert!(notice.contains("full-text results"), "{json}");
    app.cleanup().await;
}

#[tokio::test]
async fn search_answers_success_false_within_the_deadline_when_neo4j_is_unreachable() {
    let app = ApiApp::start_tuned(|s| s.neo4j.uri = "bolt://127.0.0.1:1".to_owned(), true).await;
    let started = Instant::now();
    let (status, json) = app
        .search(Some(&app.tokens.org), &json!({"query": MAVEN_QUERY}))
        .await;
    let elapsed = started.elapsed();
    assert_eq!(json["success"], false, "{json}");
    assert_eq!(json["error"]["code"], "neo4j_unavailable", "{json}");
    assert_eq!(status, 503);
    let deadline = Duration::from_millis(app.settings.search.deadline_ms);
    assert!(
        elapsed < deadline + Duration::from_millis(500),
        "took {elapsed:?}"
    );
    let (status, ready) = app.get(None, "/readyz").await;
    assert_eq!(status, 503, "{ready}");
    assert_eq!(ready["checks"]["neo4j"], false);
    assert_eq!(ready["checks"]["embedder"], true);
    app.cleanup().await;
}

#[tokio::test]
async fn a_search_that_outlives_the_deadline_answers_deadline_exceeded() {
    let app = ApiApp::start_tuned(|s| s.search.deadline_ms = 1, true).await;
    let (status, json) = app
        .search(Some(&app.tokens.org), &json!({"query": MAVEN_QUERY}))
        .await;
    assert_eq!(
        (status, json["error"]["code"].clone()),
        (504, json!("deadline_exceeded")),
        "{json}"
    );
    app.cleanup().await;
}

#[tokio::test]
async fn without_an_embedder_a_default_search_falls_back_to_text_and_says_so() {
    let app = ApiApp::start_tuned(|_| {}, false).await;
    let tls = app.seed("checkout", "conv-1", &tls_expiry()).await;
    let result = app
        .search_ok(&json!({"query": "certificate expired"}))
        .await;
    assert_eq!(result["episodes"][0]["id"], json!(tls.id), "{result}");
    assert!(
        result["notice"].as_str().unwrap().contains("full-text"),
        "{result}"
    );
    // Nothing found by full text either: the notice an empty answer always starts with.
    let empty = app
        .search_ok(&json!({"query": "zookeeper quorum lost"}))
        .await;
    assert_eq!(empty["episodes"], json!([]), "{empty}");
    let notice = empty["notice"].as_str().unwrap_or_default();
    assert!(
        notice.starts_with("nothing similar in memory")
            && notice.contains("semantic search is unavailable"),
        "{empty}"
    );
    let (status, json) = app
        .search(
            Some(&app.tokens.org),
            &json!({"query": "certificate expired", "mode": "semantic"}),
        )
        .await;
    assert_eq!(
        (status, json["error"]["code"].clone()),
        (503, json!("embedder_unavailable"))
    );
    let (status, ready) = app.get(None, "/readyz").await;
    assert_eq!(
        (status, ready["checks"]["embedder"].clone()),
        (503, json!(false))
    );
    app.cleanup().await;
}

#[tokio::test]
async fn health_readiness_and_metrics_endpoints_answer() {
    let app = ApiApp::start().await;
    assert_eq!(app.get(None, "/healthz").await.0, 200);
    let (status, ready) = app.get(None, "/readyz").await;
    assert_eq!(status, 200, "{ready}");
    app.search_ok(&json!({"query": MAVEN_QUERY})).await;
    let metrics = app
        .client
        .get(format!("{}/metrics", app.base_url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("deja_api_request_duration_seconds"),
        "{metrics}"
    );
    assert!(metrics.contains("deja_api_search_results"), "{metrics}");
    // Where a search spends its time: each stage, and each Cypher round trip by statement.
    for stage in ["embed", "retrieve", "decide", "strategy"] {
        assert!(
            metrics.contains(&format!("deja_api_search_stage_seconds{{stage=\"{stage}\"")),
            "{stage}: {metrics}"
        );
    }
    assert!(
        metrics.contains("deja_graph_query_duration_seconds{query=\"search/"),
        "{metrics}"
    );
    assert!(
        metrics.contains("deja_embed_cache_lookups_total"),
        "{metrics}"
    );
    app.cleanup().await;
}

#[tokio::test]
async fn the_preamble_endpoint_exists_only_when_enabled() {
    let app = ApiApp::start_tuned(|s| s.api.preamble_enabled = true, true).await;
    app.seed("checkout", "conv-1", &maven_oom(0)).await;
    let response = app
        .client
        .post(format!("{}/v1/memory/preamble", app.base_url))
        .bearer_auth(&app.tokens.org)
        .json(&json!({"query": MAVEN_QUERY}))
        .send()
        .await
        .unwrap();
    let json: Value = response.json().await.unwrap();
    assert!(
        json["result"]["preamble"]
            .as_str()
            .unwrap()
            .contains("surveys-module"),
        "{json}"
    );
    app.cleanup().await;

    let app = ApiApp::start().await;
    let response = app
        .client
        .post(format!("{}/v1/memory/preamble", app.base_url))
        .bearer_auth(&app.tokens.org)
        .json(&json!({"query": MAVEN_QUERY}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    app.cleanup().await;
}

#[tokio::test]
async fn the_api_refuses_to_start_without_tokens_or_with_dev_mode_off_loopback() {
    let store = deja_tests::store().await;
    let deps = || Dependencies {
        store: store.clone(),
        embedder: None,
        reranker: None,
        late: None,
        verifier: None,
        jobs: None,
    };
    let (mut settings, _) = api_settings("acme", "http://127.0.0.1:9/v1");
    settings.api.tokens.clear();
    let error = Application::build(&settings, deps())
        .await
        .err()
        .expect("refused");
    assert!(error.to_string().contains("api.tokens"), "{error}");
    settings.api.dev = true;
    settings.api.bind = "0.0.0.0:0".to_owned();
    let error = Application::build(&settings, deps())
        .await
        .err()
        .expect("refused");
    assert!(error.to_string().contains("loopback"), "{error}");
    settings.api.bind = "127.0.0.1:0".to_owned();
    assert!(Application::build(&settings, deps()).await.is_ok());
}

#[tokio::test]
async fn in_dev_mode_without_tokens_v1_refuses_a_host_header_that_is_not_loopback() {
    let app = ApiApp::start_tuned(
        |s| {
            s.api.dev = true;
            s.api.tokens.clear();
        },
        true,
    )
    .await;
    let url = format!("{}/v1/memory/search", app.base_url);
    let body = json!({"org": app.org, "query": MAVEN_QUERY});
    let rebound = app
        .client
        .post(&url)
        .header(reqwest::header::HOST, "attacker.example:8080")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403, "a DNS-rebound page is refused");
    let local = app
        .client
        .post(&url)
        .header(reqwest::header::HOST, "localhost")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(local.status(), 200);
    // The hub is as open in dev mode, so the same check guards its pages and forms.
    let hub = format!("{}/hub?org={}", app.base_url, app.org);
    let rebound = app
        .client
        .get(&hub)
        .header(reqwest::header::HOST, "attacker.example:8080")
        .send()
        .await
        .unwrap();
    assert_eq!(
        rebound.status(),
        403,
        "a DNS-rebound page cannot read the hub"
    );
    let rebound_post = app
        .client
        .post(format!("{}/hub/episodes/ep_x/delete", app.base_url))
        .header(reqwest::header::HOST, "attacker.example:8080")
        .form(&[("really", "yes")])
        .send()
        .await
        .unwrap();
    assert_eq!(rebound_post.status(), 403, "nor post its forms");
    let local = app
        .client
        .get(&hub)
        .header(reqwest::header::HOST, "127.0.0.1")
        .send()
        .await
        .unwrap();
    assert_eq!(local.status(), 200);
    app.cleanup().await;
}

#[tokio::test]
async fn with_tokens_configured_a_request_without_a_token_is_unauthorized_even_in_dev_mode() {
    let app = ApiApp::start_tuned(|s| s.api.dev = true, true).await;
    let (status, body) = app.search(None, &json!({"query": MAVEN_QUERY})).await;
    assert_eq!(status, 401, "{body}");
    let (status, _) = app
        .search(Some(&app.tokens.org), &json!({"query": MAVEN_QUERY}))
        .await;
    assert_eq!(status, 200);
    // The hub asks for a login just the same rather than serving every org without one.
    let hub = app
        .client
        .get(format!("{}/hub?org={}", app.base_url, app.org))
        .send()
        .await
        .unwrap();
    assert!(
        hub.url().path().starts_with("/hub/login"),
        "sent to the login form, not served: {}",
        hub.url()
    );
    app.cleanup().await;
}

#[tokio::test]
async fn a_team_named_star_cannot_read_the_org_wide_strategy_scope() {
    let app = ApiApp::start().await;
    let (status, body) = app
        .search(
            Some(&app.tokens.org),
            &json!({"team": "*", "query": MAVEN_QUERY}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "bad_request", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or("");
    assert!(
        message.contains("team") && message.contains("reserved"),
        "{body}"
    );
    app.cleanup().await;
}

/// RFC 7235: the auth scheme is case-insensitive (`BEARER`, `bearer`); another scheme, or
/// none, is still refused.
#[tokio::test]
async fn the_bearer_scheme_is_accepted_in_any_case() {
    let app = ApiApp::start().await;
    let search = |authorization: String| {
        app.client
            .post(format!("{}/v1/memory/search", app.base_url))
            .header("authorization", authorization)
            .json(&json!({"query": MAVEN_QUERY}))
            .send()
    };
    for scheme in ["BEARER", "bearer", "Bearer"] {
        let response = search(format!("{scheme} {}", app.tokens.org))
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{scheme}");
        let json: Value = response.json().await.unwrap();
        assert_eq!(json["success"], true, "{scheme}: {json}");
    }
    for refused in [
        format!("Basic {}", app.tokens.org),
        app.tokens.org.clone(),
        "BEARER ".to_owned(),
    ] {
        let response = search(refused.clone()).await.unwrap();
        assert_eq!(response.status(), 401, "{refused}");
        let json: Value = response.json().await.unwrap();
        assert_eq!(json["error"]["code"], "unauthorized", "{json}");
    }
    app.cleanup().await;
}

/// The digest's `trigger` refuses an unknown field by name, as the rest of the request does
/// (a misspelt `payload` would otherwise answer an empty digest), and `payload` may be left
/// out, as its schema says.
#[tokio::test]
async fn a_digest_trigger_refuses_unknown_fields_and_may_omit_its_payload() {
    let app = ApiApp::start_tuned(|s| s.digest.enabled = true, true).await;
    let digest = |body: Value| {
        let app = &app;
        async move {
            app.call(
                reqwest::Method::POST,
                "/v1/memory/digest",
                Some(&app.tokens.org),
                &[],
                Some(&body),
            )
            .await
        }
    };
    let (status, _, json) = digest(json!({"trigger": {
        "signal_type": "alertmanager", "paylod": {"commonLabels": {"service": "x"}}
    }}))
    .await;
    assert_eq!(status, 400, "{json}");
    assert_eq!(json["error"]["code"], "bad_request", "{json}");
    let message = json["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("invalid `paylod`") && message.contains("trigger"),
        "{json}"
    );
    let (status, _, json) = digest(json!({"trigger": {"signal_type": "alertmanager"}})).await;
    assert_eq!(status, 200, "{json}");
    assert_eq!(json["result"]["episodes"], json!([]), "{json}");
    app.cleanup().await;
}

/// The skill file is what agents (and the code generated from it) read an answer by: every
/// field a search answer carries is in its output schema, the labels and the verdict
/// included.
#[tokio::test]
async fn every_field_of_a_search_answer_is_in_the_skill_files_output_schema() {
    let skill: Value =
        serde_json::from_str(include_str!("../../../docs/agent/memory-search.skill.json")).unwrap();
    let documented = skill["output_schema"]["properties"]["result"]["properties"]["episodes"]
        ["items"]["properties"]
        .as_object()
        .unwrap()
        .clone();
    let app = ApiApp::start().await;
    let wrong = app.seed("checkout", "conv-1", &maven_oom(0)).await;
    app.seed("checkout", "conv-2", &maven_oom(1)).await;
    app.seed("checkout", "conv-3", &maven_oom(2)).await;
    let (status, _, marked) = app
        .call(
            reqwest::Method::POST,
            &format!("/v1/review/episodes/{}/mark-wrong", wrong.id),
            Some(&app.tokens.review_only),
            &[],
            Some(&json!({"note": "a test leaked threads"})),
        )
        .await;
    assert_eq!(status, 200, "{marked}");

    let result = app
        .search_ok(&json!({"query": MAVEN_QUERY, "limit": 10}))
        .await;
    let episodes = result["episodes"].as_array().unwrap();
    assert!(!episodes.is_empty(), "{result}");
    let mut seen = std::collections::BTreeSet::new();
    for episode in episodes {
        for field in episode.as_object().unwrap().keys() {
            assert!(
                documented.contains_key(field),
                "`{field}` is not in the skill file's output schema: {episode}"
            );
            seen.insert(field.clone());
        }
    }
    for field in [
        "match",
        "confidence",
        "verdict",
        "verdict_note",
        "recurrence_count",
        "first_seen",
        "last_seen",
    ] {
        assert!(
            seen.contains(field),
            "no answer carried `{field}`: {result}"
        );
    }
    app.cleanup().await;
}
