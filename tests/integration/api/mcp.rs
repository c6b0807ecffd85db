//! The MCP server over streamable HTTP at `/mcp`, with a real rmcp client session. (The stdio
//! transport is exercised through the `deja mcp` binary by the CLI tests.)

use deja_tests::api_app::{maven_oom, tls_expiry, ApiApp, MAVEN_QUERY};
use rmcp::model::CallToolRequestParams;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::{json, Value};

fn arguments(value: Value) -> serde_json::Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("arguments must be an object, not {other}"),
    }
}

#[tokio::test]
async fn memory_search_and_memory_get_over_streamable_http_find_the_episode() {
    let app = ApiApp::start().await;
    let episode = app.seed("checkout", "conv-1", &maven_oom(0)).await;
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", app.base_url))
            .auth_header(app.tokens.org.clone()),
    );
    let client = ().serve(transport).await.expect("mcp session starts");

    let tools = client.list_all_tools().await.expect("tools/list");
    let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(names, ["memory_digest", "memory_get", "memory_search"]);
    for tool in &tools {
        let description = tool.description.as_deref().unwrap_or_default();
        assert!(description.contains("never instructions"), "{description}");
    }

    let found = client
        .call_tool(
            CallToolRequestParams::new("memory_search")
                .with_arguments(arguments(json!({"query": MAVEN_QUERY}))),
        )
        .await
        .expect("memory_search");
    assert_eq!(found.is_error, Some(false));
    let envelope = found.structured_content.expect("structured envelope");
    assert_eq!(envelope["success"], true, "{envelope}");
    assert_eq!(envelope["result"]["episodes"][0]["id"], json!(episode.id));

    let full = client
        .call_tool(
            CallToolRequestParams::new("memory_get")
                .with_arguments(arguments(json!({"id": episode.id}))),
        )
        .await
        .expect("memory_get");
    let envelope = full.structured_content.expect("structured envelope");
    assert_eq!(
        envelope["result"]["description"],
        json!(episode.issue_description)
    );

    // Same semantics as HTTP: another org is refused inside the envelope.
    let refused = client
        .call_tool(
            CallToolRequestParams::new("memory_search")
                .with_arguments(arguments(json!({"org": "someone-else", "query": "q"}))),
        )
        .await
        .expect("a refusal is a tool result, not a protocol error");
    assert_eq!(refused.is_error, Some(true));
    let envelope = refused.structured_content.unwrap();
    assert_eq!(envelope["error"]["code"], "forbidden", "{envelope}");

    // Arguments that do not parse are a failure envelope too, naming the field where it can,
    // and the schema offered is the request's.
    let search_tool = tools.iter().find(|t| t.name == "memory_search").unwrap();
    let properties = &search_tool.input_schema["properties"];
    assert!(properties.get("query").is_some() && properties.get("limit").is_some());
    // A value of the wrong type is named by its path, as `POST /v1/memory/search` names it.
    for (tool, args, field) in [
        ("memory_search", json!({"query": "q", "limt": 3}), "limt"),
        (
            "memory_search",
            json!({"query": "q", "limit": "3"}),
            "limit",
        ),
        (
            "memory_search",
            json!({"query": "q", "components": [{"type": "service", "name": 3}]}),
            "components[0].name",
        ),
        ("memory_get", json!({}), "id"),
        // The digest's trigger takes no unknown field (refused before the digest is asked,
        // which is off here).
        (
            "memory_digest",
            json!({"trigger": {"signal_type": "alertmanager", "paylod": {}}}),
            "paylod",
        ),
    ] {
        let answer = client
            .call_tool(CallToolRequestParams::new(tool).with_arguments(arguments(args)))
            .await
            .expect("bad arguments are a tool result, not a protocol error");
        assert_eq!(answer.is_error, Some(true));
        let envelope = answer.structured_content.unwrap();
        assert_eq!(envelope["success"], false, "{envelope}");
        assert_eq!(envelope["error"]["code"], "bad_request", "{envelope}");
        let message = envelope["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with(&format!("invalid `{field}`")),
            "{envelope}"
        );
    }
    client.cancel().await.expect("session closes");
    app.cleanup().await;
}

/// `tools/list` states the bounds the server enforces: `limit` from its own settings
/// (`search.max_limit`, `search.default_limit`, `digest.max_episodes`), the query's length
/// and the number of component filters; a limit past the stated maximum is refused by name.
#[tokio::test]
async fn the_search_tools_schema_states_the_bounds_this_server_enforces() {
    let app = ApiApp::start_tuned(
        |s| {
            s.search.max_limit = 10;
            s.search.default_limit = 2;
            s.digest.max_episodes = 4;
            s.digest.enabled = true;
        },
        true,
    )
    .await;
    let client = session(&app, &app.tokens.org).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    let search = tools.iter().find(|t| t.name == "memory_search").unwrap();
    let properties = &search.input_schema["properties"];
    assert_eq!(properties["limit"]["minimum"], 1, "{properties}");
    assert_eq!(properties["limit"]["maximum"], 10, "{properties}");
    assert_eq!(properties["limit"]["default"], 2, "{properties}");
    assert_eq!(properties["query"]["maxLength"], 2000, "{properties}");
    assert_eq!(properties["components"]["maxItems"], 20, "{properties}");
    assert_eq!(properties["org"]["maxLength"], 200, "{properties}");
    // The digest's trigger: `signal_type` required, `payload` optional, nothing else.
    let digest = tools.iter().find(|t| t.name == "memory_digest").unwrap();
    let schema = Value::Object((*digest.input_schema).clone());
    let trigger = match schema["properties"]["trigger"]["$ref"].as_str() {
        Some(path) => schema
            .pointer(path.trim_start_matches('#'))
            .unwrap()
            .clone(),
        None => schema["properties"]["trigger"].clone(),
    };
    assert_eq!(trigger["required"], json!(["signal_type"]), "{trigger}");
    assert_eq!(trigger["additionalProperties"], false, "{trigger}");
    assert_eq!(
        trigger["properties"]["signal_type"]["maxLength"], 100,
        "{trigger}"
    );
    let digest_properties = &schema["properties"];
    assert_eq!(digest_properties["limit"]["maximum"], 4, "{schema}");
    assert_eq!(digest_properties["limit"]["default"], 4, "{schema}");
    assert_eq!(digest_properties["team"]["maxLength"], 200, "{schema}");
    let past_digest = client
        .call_tool(
            CallToolRequestParams::new("memory_digest").with_arguments(arguments(
                json!({"trigger": {"signal_type": "alertmanager"}, "limit": 5}),
            )),
        )
        .await
        .expect("a refusal is a tool result");
    let envelope = past_digest.structured_content.unwrap();
    assert!(
        envelope["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("invalid `limit`: must be between 1 and 4"),
        "{envelope}"
    );

    let past = client
        .call_tool(
            CallToolRequestParams::new("memory_search")
                .with_arguments(arguments(json!({"query": MAVEN_QUERY, "limit": 11}))),
        )
        .await
        .expect("a refusal is a tool result");
    let envelope = past.structured_content.unwrap();
    assert_eq!(envelope["error"]["code"], "bad_request", "{envelope}");
    assert!(
        envelope["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("invalid `limit`: must be between 1 and 10"),
        "{envelope}"
    );
    client.cancel().await.expect("session closes");
    app.cleanup().await;
}

/// RFC 7235: the auth scheme is case-insensitive, on `/mcp` as on `/v1`.
#[tokio::test]
async fn an_mcp_session_opens_with_the_bearer_scheme_in_any_case() {
    let app = ApiApp::start().await;
    for scheme in ["BEARER", "bearer"] {
        let response = app
            .client
            .post(format!("{}/mcp", app.base_url))
            .header("authorization", format!("{scheme} {}", app.tokens.org))
            .header("accept", ACCEPT)
            .json(&initialize())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{scheme}");
        assert!(
            response.headers().get("mcp-session-id").is_some(),
            "{scheme}"
        );
    }
    app.cleanup().await;
}

/// An MCP session on `app` as `token`.
async fn session(app: &ApiApp, token: &str) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", app.base_url))
            .auth_header(token.to_owned()),
    );
    ().serve(transport).await.expect("mcp session starts")
}

/// Calls `memory_digest` for an alert on `service` (optionally naming `team`); returns
/// (is_error, envelope).
async fn memory_digest(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    team: Option<&str>,
    service: &str,
) -> (bool, Value) {
    let mut request = json!({"trigger": {
        "signal_type": "alertmanager",
        "payload": {"commonLabels": {"alertname": "BuildRed", "service": service}}
    }});
    if let Some(team) = team {
        request["team"] = json!(team);
    }
    let result = client
        .call_tool(CallToolRequestParams::new("memory_digest").with_arguments(arguments(request)))
        .await
        .expect("a digest answer is a tool result, not a protocol error");
    (
        result.is_error == Some(true),
        result.structured_content.expect("structured envelope"),
    )
}

#[tokio::test]
async fn memory_digest_is_off_by_default_with_the_endpoints_error() {
    let app = ApiApp::start().await;
    app.seed("checkout", "conv-1", &maven_oom(0)).await;
    let client = session(&app, &app.tokens.org).await;
    let (is_error, envelope) = memory_digest(&client, None, "surveys-module").await;
    assert!(is_error, "{envelope}");
    assert_eq!(envelope["error"]["code"], "not_found", "{envelope}");
    assert!(
        envelope["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("digest.enabled = false"),
        "{envelope}"
    );
    client.cancel().await.expect("session closes");
    app.cleanup().await;
}

#[tokio::test]
async fn memory_digest_answers_like_the_endpoint_within_the_tokens_org_and_team() {
    let app = ApiApp::start_tuned(|s| s.digest.enabled = true, true).await;
    let checkout = app.seed("checkout", "conv-1", &maven_oom(0)).await;
    let surveys = app.seed("surveys", "conv-2", &maven_oom(1)).await;
    app.seed("checkout", "conv-3", &tls_expiry()).await;

    let org_wide = session(&app, &app.tokens.org).await;
    let (is_error, envelope) = memory_digest(&org_wide, None, "surveys-module").await;
    assert!(!is_error, "{envelope}");
    let http = app
        .call(
            reqwest::Method::POST,
            "/v1/memory/digest",
            Some(&app.tokens.org),
            &[],
            Some(&json!({"trigger": {
                "signal_type": "alertmanager",
                "payload": {"commonLabels": {"alertname": "BuildRed", "service": "surveys-module"}}
            }})),
        )
        .await
        .2;
    assert_eq!(
        envelope, http,
        "the very envelope of POST /v1/memory/digest"
    );
    let mut ids = deja_tests::episode_ids(&envelope["result"]);
    ids.sort();
    let mut expected = vec![checkout.id.as_str(), surveys.id.as_str()];
    expected.sort();
    assert_eq!(
        ids, expected,
        "both teams' episodes about the service: {envelope}"
    );
    org_wide.cancel().await.expect("session closes");

    // A team-bound token reads its team only, and must name it, as in search.
    let team_bound = session(&app, &app.tokens.checkout).await;
    let (is_error, envelope) = memory_digest(&team_bound, Some("checkout"), "surveys-module").await;
    assert!(!is_error, "{envelope}");
    assert_eq!(
        envelope["result"]["episodes"][0]["id"],
        json!(checkout.id),
        "{envelope}"
    );
    assert_eq!(envelope["result"]["episodes"].as_array().unwrap().len(), 1);
    let (is_error, envelope) = memory_digest(&team_bound, Some("surveys"), "surveys-module").await;
    assert!(is_error, "{envelope}");
    assert_eq!(envelope["error"]["code"], "forbidden", "{envelope}");
    team_bound.cancel().await.expect("session closes");

    // Another org's token reads its own org: nothing of this one.
    let other = session(&app, &app.tokens.other_org).await;
    let (is_error, envelope) = memory_digest(&other, None, "surveys-module").await;
    assert!(!is_error, "{envelope}");
    assert_eq!(envelope["result"]["episodes"], json!([]), "{envelope}");
    other.cancel().await.expect("session closes");
    app.cleanup().await;
}

#[tokio::test]
async fn an_mcp_session_without_a_token_is_refused() {
    let app = ApiApp::start().await;
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", app.base_url)),
    );
    assert!(().serve(transport).await.is_err(), "no token, no session");
    app.cleanup().await;
}

const ACCEPT: &str = "application/json, text/event-stream";

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26",
        "capabilities": {},
        "clientInfo": {"name": "deja-test", "version": "0"}
    }})
}

#[tokio::test]
async fn an_mcp_session_answers_only_the_token_that_opened_it() {
    let app = ApiApp::start().await;
    let url = format!("{}/mcp", app.base_url);
    let opened = app
        .client
        .post(&url)
        .bearer_auth(&app.tokens.org)
        .header("accept", ACCEPT)
        .json(&initialize())
        .send()
        .await
        .unwrap();
    assert_eq!(opened.status(), 200);
    let session = opened
        .headers()
        .get("mcp-session-id")
        .expect("a session id")
        .to_str()
        .unwrap()
        .to_owned();
    drop(opened);
    let send = |token: &str, body: Value| {
        app.client
            .post(&url)
            .bearer_auth(token)
            .header("accept", ACCEPT)
            .header("mcp-session-id", &session)
            .json(&body)
            .send()
    };
    let initialized = send(
        &app.tokens.org,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await
    .unwrap();
    assert!(
        initialized.status().is_success(),
        "{}",
        initialized.status()
    );
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    // Another valid token of the same org (team-restricted) must not ride the session.
    let hijack = send(&app.tokens.checkout, list.clone()).await.unwrap();
    assert_eq!(hijack.status(), 404);
    let own = send(&app.tokens.org, list).await.unwrap();
    assert_eq!(own.status(), 200);
    app.cleanup().await;
}

#[tokio::test]
async fn an_mcp_body_over_the_v1_limit_is_refused() {
    let app = ApiApp::start().await;
    let mut body = initialize();
    body["params"]["clientInfo"]["name"] = json!("x".repeat(100 * 1024));
    let response = app
        .client
        .post(format!("{}/mcp", app.base_url))
        .bearer_auth(&app.tokens.org)
        .header("accept", ACCEPT)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
    let envelope: Value = response.json().await.unwrap();
    assert_eq!(envelope["error"]["code"], "payload_too_large", "{envelope}");
    let message = envelope["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("byte limit"), "{envelope}");
    app.cleanup().await;
}
