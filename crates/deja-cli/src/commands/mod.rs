//! One module per subcommand. Shared wiring (connecting to Neo4j, loading the embedder)
//! lives here so every command reports the same clear errors.

pub mod digest;
pub mod dlq;
pub mod episode;
pub mod eval;
pub mod import;
pub mod list;
pub mod mcp;
pub mod migrate;
pub mod publish;
pub mod reembed;
pub mod retry;
pub mod search;
pub mod serve;
pub mod strategy;
pub mod vocab;
pub mod worker;

/// `--org` as clap parses it: a blank org is refused, since the store reads an empty org as
/// "every org" where a command may range over all of them (`deja reembed --org "$ORG"` with
/// `ORG` unset would re-embed every tenant).
pub fn org_name(value: &str) -> Result<String, String> {
    if value.trim().is_empty() {
        Err("must name an org (it is empty)".to_owned())
    } else {
        Ok(value.to_owned())
    }
}

/// Who a CLI review is recorded as: `--by`, else `$USER`, else "cli".
pub fn reviewer_name(by: Option<String>) -> String {
    by.or_else(|| std::env::var("USER").ok())
        .unwrap_or_else(|| "cli".to_owned())
}

use anyhow::Context;
use deja_config::Settings;
use deja_embed::{Embedder, LocalEmbedder};
use deja_graph::GraphStore;
use std::sync::Arc;

pub async fn connect_store(settings: &Settings) -> anyhow::Result<GraphStore> {
    GraphStore::connect(&settings.neo4j)
        .await
        .with_context(|| format!("could not connect to neo4j at {}", settings.neo4j.uri))
}

/// What a command could not set up before its use case ran, as the failure it is to a
/// caller, so that `--json` prints it as an envelope too: the store's connection as a search
/// answers it (`neo4j_unavailable`), anything else `internal` (the cause chain goes to
/// stderr).
pub fn setup_failure(error: deja_api::StartupError) -> deja_api::SearchError {
    match error {
        deja_api::StartupError::Graph(error) => error.into(),
        other => deja_api::SearchError::Internal(Box::new(other)),
    }
}

/// `--json`: prints the API's envelope of `result` and fails the command when it failed.
/// Commands with `--json` give it every failure of theirs, bad arguments and setup included
/// (`bad_request`, [`setup_failure`]): stdout is always one envelope once the command line
/// parses (clap's usage errors come before, on stderr, exit status 2).
pub fn print_envelope<T: serde::Serialize>(
    result: Result<T, deja_api::SearchError>,
) -> anyhow::Result<()> {
    // The API's own type, so that the fields come in the order HTTP and MCP write them.
    let envelope = match &result {
        Ok(value) => deja_api::Envelope::ok(value),
        Err(error) => deja_api::Envelope::failed(error),
    };
    println!("{}", serde_json::to_string_pretty(&envelope)?);
    result.map(|_| ()).map_err(Into::into)
}

pub fn load_embedder(settings: &Settings) -> anyhow::Result<Arc<dyn Embedder>> {
    let embedder =
        LocalEmbedder::load(&settings.embedding).context("could not load the embedding model")?;
    Ok(Arc::new(embedder))
}
