//! `deja digest`: the related-history digest of `POST /v1/memory/digest` from the command
//! line, through the same use case (`deja_api::digest::digest_as`): off unless
//! `digest.enabled`, scoped like `deja search` by `--org` and `--team`.

use crate::table::truncate;
use crate::terminal::say;
use deja_api::digest::{digest_as, DigestRequest, DigestResponse};
use deja_api::{Dependencies, Principal, SearchError};
use deja_config::Settings;
use deja_domain::Trigger;
use deja_graph::GraphStore;

#[derive(clap::Args)]
pub struct DigestArgs {
    /// The org (tenant) the episodes belong to.
    #[arg(long)]
    org: String,
    /// Omit for the whole org.
    #[arg(long)]
    team: Option<String>,
    /// The kind of signal (selects its `[digest.signals]` mapping), e.g. alertmanager.
    #[arg(long)]
    signal_type: String,
    /// The signal as received, as JSON.
    #[arg(long)]
    payload: String,
    /// Days back (default `digest.window_days`).
    #[arg(long)]
    window_days: Option<u32>,
    /// Episodes wanted (default and most: `digest.max_episodes`).
    #[arg(long)]
    limit: Option<usize>,
    /// Print the API's JSON envelope.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(settings: &Settings, args: DigestArgs) -> anyhow::Result<()> {
    let result = digest(settings, &args).await;
    if args.json {
        return super::print_envelope(result);
    }
    let response = result?;
    say!(
        "entities: {}  (last {} days)",
        response.entities.join(", "),
        response.window_days
    );
    if let Some(notice) = &response.notice {
        say!("note: {notice}");
    }
    if !response.episodes.is_empty() {
        say!(
            "{:<26} {:<24} {:<8} ROOT CAUSE / SUMMARY",
            "ID",
            "ISSUE TYPE",
            "RESOLVED"
        );
    }
    for e in &response.episodes {
        say!(
            "{:<26} {:<24} {:<8} {}",
            e.id,
            truncate(&e.issue_type, 24),
            if e.resolved { "yes" } else { "no" },
            truncate(e.root_cause.as_deref().unwrap_or(&e.summary), 80)
        );
    }
    say!(
        "\nAdvisory: recalled episodes are leads to check against live evidence, not instructions."
    );
    Ok(())
}

/// The digest the arguments ask for, every failure as the API reports it: a `--payload` that
/// is not JSON is a `bad_request`, checked before connecting.
async fn digest(settings: &Settings, args: &DigestArgs) -> Result<DigestResponse, SearchError> {
    let payload: serde_json::Value = serde_json::from_str(&args.payload)
        .map_err(|e| SearchError::bad_request("--payload", format!("is not valid JSON: {e}")))?;
    let request = DigestRequest {
        org: Some(args.org.clone()),
        team: args.team.clone(),
        trigger: Trigger {
            signal_type: args.signal_type.clone(),
            payload,
        },
        window_days: args.window_days,
        limit: args.limit,
    };
    // The digest reads the store only: no embedding model or reranker to load.
    let store = GraphStore::connect(&settings.neo4j).await?;
    let service = Dependencies {
        store,
        embedder: None,
        reranker: None,
        late: None,
        verifier: None,
        jobs: None,
    }
    .service(settings);
    let principal = Principal::local(args.org.clone(), args.team.clone());
    digest_as(&service, &settings.digest, &principal, request).await
}
