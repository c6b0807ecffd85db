use crate::table::{truncate, Listing};
use deja_config::Settings;
use deja_domain::{ExtractionStatus, Scope};
use deja_graph::ListFilter;

#[derive(clap::Args)]
pub struct ListArgs {
    /// The org (tenant) the episodes belong to.
    #[arg(long, value_parser = super::org_name)]
    org: String,
    /// Only this team (default: the whole org).
    #[arg(long)]
    team: Option<String>,
    /// Only failed extractions (and episodes whose newest turn failed).
    #[arg(long)]
    failed: bool,
    /// At most this many.
    #[arg(long, default_value_t = 20)]
    limit: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub async fn run(settings: &Settings, args: ListArgs) -> anyhow::Result<()> {
    let store = super::connect_store(settings).await?;
    let scope = Scope {
        org: args.org.clone(),
        team: args.team.clone(),
    };
    let filter = ListFilter {
        status: None,
        pending_error: args.failed,
        provenance: None,
    };
    // One more than asked for: whether the listing is whole.
    let mut episodes = store
        .list(&scope, &filter, args.limit.saturating_add(1), 0)
        .await?;
    let more = episodes.len() > args.limit;
    episodes.truncate(args.limit);
    if args.json {
        let compact: Vec<_> = episodes
            .iter()
            .map(|e| {
                serde_json::json!({
                    "id": e.id, "team": e.team, "correlation_id": e.correlation_id,
                    "issue_type": e.issue_type, "summary": e.summary, "root_cause": e.root_cause,
                    "turn_count": e.turn_count, "last_turn_index": e.last_turn_index,
                    "extraction_status": e.extraction_status, "extraction_error": e.extraction_error,
                    "updated_at": e.updated_at,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&compact)?);
        return Ok(());
    }
    let mut listing = Listing::new(["ID", "TEAM", "STATUS", "ISSUE TYPE", "SUMMARY / ERROR"]);
    for e in &episodes {
        let status = match (e.extraction_status, &e.extraction_error) {
            (ExtractionStatus::Failed, _) => "failed",
            (ExtractionStatus::Ok, Some(_)) => "ok*",
            _ => "ok",
        };
        let text = e.extraction_error.as_deref().unwrap_or(&e.summary);
        listing.row(vec![
            e.id.clone(),
            truncate(&e.team, 14),
            status.to_owned(),
            truncate(&e.issue_type, 24),
            truncate(text, 70),
        ]);
    }
    listing.print();
    if more {
        println!(
            "the newest {} episodes (more: raise --limit, or page with deja episode list)",
            episodes.len()
        );
    } else {
        println!("{} episodes", episodes.len());
    }
    Ok(())
}
