use deja_config::Settings;
use deja_domain::{ExtractionStatus, Scope};
use deja_graph::ListFilter;

#[derive(clap::Args)]
pub struct ListArgs {
    #[arg(long)]
    org: String,
    #[arg(long)]
    team: Option<String>,
    /// Only failed extractions (and episodes whose newest turn failed).
    #[arg(long)]
    failed: bool,
    #[arg(long, default_value_t = 20)]
    limit: usize,
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
    let episodes = store.list(&scope, &filter, args.limit, 0).await?;
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
    println!(
        "{:<28} {:<14} {:<8} {:<24} SUMMARY / ERROR",
        "ID", "TEAM", "STATUS", "ISSUE TYPE"
    );
    for e in &episodes {
        let status = match (e.extraction_status, &e.extraction_error) {
            (ExtractionStatus::Failed, _) => "failed",
            (ExtractionStatus::Ok, Some(_)) => "ok*",
            _ => "ok",
        };
        let text = e.extraction_error.as_deref().unwrap_or(&e.summary);
        println!(
            "{:<28} {:<14} {:<8} {:<24} {}",
            e.id,
            truncate(&e.team, 14),
            status,
            truncate(&e.issue_type, 24),
            truncate(text, 70)
        );
    }
    println!("{} episodes", episodes.len());
    Ok(())
}

pub fn truncate(text: &str, max: usize) -> String {
    let text = text.replace('\n', " ");
    if text.chars().count() <= max {
        text
    } else {
        format!(
            "{}…",
            text.chars().take(max.saturating_sub(1)).collect::<String>()
        )
    }
}
