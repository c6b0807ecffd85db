//! Running the real `deja` binary as a child process, configured like an in-process test.

use deja_config::Settings;
use std::path::PathBuf;
use std::process::Command;

/// The `deja` binary built by `cargo build -p deja-cli` (deploy/test.sh builds it first).
pub fn deja_binary() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let binary = target.join("debug/deja");
    assert!(
        binary.exists(),
        "{} is missing: run `cargo build -p deja-cli` first (deploy/test.sh does)",
        binary.display()
    );
    binary
}

/// A `deja` command whose environment carries `settings`, so that the child talks to the
/// same queues, org namespace and fake LLM as the test.
pub fn deja_command(settings: &Settings) -> Command {
    let mut command = Command::new(deja_binary());
    command.env_clear();
    for (key, value) in std::env::vars() {
        // Keep PATH, HOME and the like, drop any DEJA__ override the test does not set.
        if !key.starts_with("DEJA__") && !key.starts_with("DEJA_CONFIG") {
            command.env(key, value);
        }
    }
    let env = [
        ("DEJA__NEO4J__URI", settings.neo4j.uri.clone()),
        ("DEJA__NEO4J__USER", settings.neo4j.user.clone()),
        (
            "DEJA__NEO4J__PASSWORD",
            settings.neo4j.password.expose().to_owned(),
        ),
        (
            "DEJA__RABBITMQ__URI",
            settings.rabbitmq.uri.expose().to_owned(),
        ),
        (
            "DEJA__RABBITMQ__EXCHANGE",
            settings.rabbitmq.exchange.clone(),
        ),
        (
            "DEJA__RABBITMQ__NAME_PREFIX",
            settings.rabbitmq.name_prefix.clone(),
        ),
        (
            "DEJA__RABBITMQ__MAX_ATTEMPTS",
            settings.rabbitmq.max_attempts.to_string(),
        ),
        (
            "DEJA__RABBITMQ__RETRY_BASE_MS",
            settings.rabbitmq.retry_base_ms.to_string(),
        ),
        (
            "DEJA__RABBITMQ__RETRY_MAX_MS",
            settings.rabbitmq.retry_max_ms.to_string(),
        ),
        (
            "DEJA__RABBITMQ__PREFETCH",
            settings.rabbitmq.prefetch.to_string(),
        ),
        (
            "DEJA__WORKER__CONCURRENCY",
            settings.worker.concurrency.to_string(),
        ),
        ("DEJA__WORKER__METRICS_ADDR", "127.0.0.1:0".to_owned()),
        (
            "DEJA__WORKER__PROBE_MAX_MS",
            settings.worker.probe_max_ms.to_string(),
        ),
        ("DEJA__LLM__BASE_URL", settings.llm.base_url.clone()),
        ("DEJA__LLM__MODEL", settings.llm.model.clone()),
        (
            "DEJA__LLM__TIMEOUT_SECS",
            settings.llm.timeout_secs.to_string(),
        ),
        (
            "DEJA__EMBEDDING__MODEL_DIR",
            settings.embedding.model_dir.display().to_string(),
        ),
        (
            "DEJA__EMBEDDING__ORT_DYLIB_PATH",
            settings.embedding.ort_dylib_path.display().to_string(),
        ),
        (
            "DEJA__RERANKER__MODEL_DIR",
            crate::reranker_settings().model_dir.display().to_string(),
        ),
        (
            "DEJA__LATE_INTERACTION__MODEL_DIR",
            crate::late_settings().model_dir.display().to_string(),
        ),
        (
            "DEJA__SEARCH__RANKING__SIMILARITY_FLOOR",
            settings.search.ranking.similarity_floor.to_string(),
        ),
        ("DEJA__LOG__FILTER", "warn".to_owned()),
    ];
    for (key, value) in env {
        command.env(key, value);
    }
    command
}

/// The first user message of a recorded chat-completions request.
pub fn user_prompt(body: &serde_json::Value) -> String {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}
