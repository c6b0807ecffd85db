//! The whole path an agent relies on: turn events through RabbitMQ and the worker into Neo4j,
//! then found again through every door of memory-search — HTTP, MCP over stdio (the real
//! `deja mcp` binary) and the CLI.

use deja_api::{Application, Dependencies, SynthesisQueue};
use deja_tests::worker_app::{TurnBuilder, WorkerApp};
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

const QUERY: &str = "checkout 500s, redis sessions evicted, users logged out";

#[tokio::test]
async fn an_episode_ingested_by_the_worker_is_found_over_http_mcp_stdio_and_the_cli() {
    let app = WorkerApp::start().await;
    for (turn, answer) in [
        (1, "Checkout fails with 500s; sessions are missing in redis."),
        (2, "Root cause: redis session cache hit maxmemory and evicted live session keys, confirmed by evicted_keys. Fixed by raising maxmemory."),
    ] {
        let event = TurnBuilder::new(&app.org, "checkout", "conv-e2e", turn)
            .user_message("[FIRING] CheckoutErrors service=checkout cache=redis-sessions #cache-eviction")
            .answer(answer)
            .tool("redis_cli_info", "database-redis", "evicted_keys:184220")
            .build();
        app.publish(&event).await;
    }
    let episode = app
        .wait_for_episode("conv-e2e", Duration::from_secs(30), |e| e.turn_count == 2)
        .await;

    // HTTP, in dev mode on loopback.
    let mut settings = app.settings.clone();
    settings.api.bind = "127.0.0.1:0".to_owned();
    settings.api.dev = true;
    let deps = Dependencies {
        store: app.store.clone(),
        embedder: Some(deja_tests::embedder()),
        reranker: None,
        late: Some(deja_tests::late_encoder()),
        verifier: None,
        jobs: Some(Arc::new(SynthesisQueue::new(&settings))),
    };
    let api = Application::build(&settings, deps)
        .await
        .expect("api builds");
    let url = format!("http://127.0.0.1:{}/v1/memory/search", api.port());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(api.run_until_stopped(async {
        let _ = stopped.await;
    }));
    let body: Value = reqwest::Client::new()
        .post(&url)
        .json(&json!({"org": app.org, "team": "checkout", "query": QUERY}))
        .send()
        .await
        .expect("http search")
        .json()
        .await
        .expect("json envelope");
    assert_eq!(body["success"], true, "{body}");
    assert_eq!(
        body["result"]["episodes"][0]["id"],
        json!(episode.id),
        "{body}"
    );
    assert_eq!(
        body["result"]["episodes"][0]["agent_run_id"],
        "run-conv-e2e-2"
    );
    let _ = stop.send(());
    let _ = server.await;

    // MCP over stdio: a real rmcp client session with the `deja mcp` binary.
    let mut command = tokio::process::Command::from(deja_tests::deja_command(&app.settings));
    command.args(["mcp", "--org", &app.org, "--team", "checkout"]);
    let transport = TokioChildProcess::new(command).expect("spawn deja mcp");
    let client = ().serve(transport).await.expect("mcp session over stdio");
    let arguments = match json!({"query": QUERY}) {
        Value::Object(map) => map,
        _ => unreachable!("a json object literal"),
    };
    let found = client
        .call_tool(CallToolRequestParams::new("memory_search").with_arguments(arguments))
        .await
        .expect("memory_search over stdio");
    let envelope = found.structured_content.expect("structured envelope");
    assert_eq!(envelope["success"], true, "{envelope}");
    assert_eq!(
        envelope["result"]["episodes"][0]["id"],
        json!(episode.id),
        "{envelope}"
    );
    client.cancel().await.expect("close the mcp session");

    // The CLI.
    let output = tokio::process::Command::from(deja_tests::deja_command(&app.settings))
        .args([
            "search", "--org", &app.org, "--team", "checkout", "--json", QUERY,
        ])
        .output()
        .await
        .expect("run deja search");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let envelope: Value =
        serde_json::from_slice(&output.stdout).expect("the CLI prints the envelope");
    assert_eq!(
        envelope["result"]["episodes"][0]["id"],
        json!(episode.id),
        "{envelope}"
    );
    let table = tokio::process::Command::from(deja_tests::deja_command(&app.settings))
        .args(["search", "--org", &app.org, QUERY])
        .output()
        .await
        .expect("run deja search");
    assert!(String::from_utf8_lossy(&table.stdout).contains(&episode.id));
    app.cleanup().await;
}
