//! Review tools for strategies: people list, read, correct and accept them. An edited
//! strategy is never overwritten by regeneration; new syntheses become proposals.

use crate::table::Listing;
use crate::terminal::say;
use anyhow::Context;
use deja_api::{Principal, Review, StrategyRef};
use deja_config::Settings;
use std::path::PathBuf;

#[derive(clap::Subcommand)]
pub enum StrategyCommand {
    /// List the strategies of an org (or one team).
    List {
        /// The org (tenant).
        #[arg(long, value_parser = super::org_name)]
        org: String,
        /// Only this team's strategies and the org-wide ones (default: the whole org).
        #[arg(long)]
        team: Option<String>,
        /// At most this many strategies, pending proposals first (past it: says so).
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Print one strategy, its pending proposal if any, and its review history.
    Show(KeyArgs),
    /// Replace a strategy's markdown with a reviewed version from a file.
    Edit {
        #[command(flatten)]
        key: KeyArgs,
        /// The corrected markdown.
        #[arg(long)]
        file: PathBuf,
        /// Who edited it, recorded on the strategy and in its audit record (default: $USER,
        /// else "cli"; `--editor` is the older name).
        #[arg(long, alias = "editor")]
        by: Option<String>,
        /// The version you read (`deja strategy show`): refused if it moved on meanwhile.
        #[arg(long)]
        if_match: Option<i64>,
    },
    /// Make the pending proposal the current strategy.
    Accept {
        #[command(flatten)]
        key: KeyArgs,
        /// Who accepted it, recorded on the strategy and in its audit record (default: $USER,
        /// else "cli"; `--reviewer` is the older name).
        #[arg(long, alias = "reviewer")]
        by: Option<String>,
        /// The version you read (`deja strategy show`): refused if it moved on meanwhile
        /// (an edit, or a newer proposal than the one you read).
        #[arg(long)]
        if_match: Option<i64>,
    },
}

#[derive(clap::Args)]
pub struct KeyArgs {
    /// The org (tenant).
    #[arg(long, value_parser = super::org_name)]
    org: String,
    /// Omit for an org-wide strategy.
    #[arg(long)]
    team: Option<String>,
    #[arg(long)]
    issue_type: String,
    /// The component, as type:name.
    #[arg(long)]
    component: String,
}

impl KeyArgs {
    /// The strategy as the review use cases name it (`deja_api::strategy_review`).
    fn strategy(&self) -> anyhow::Result<StrategyRef> {
        Ok(StrategyRef::new(
            self.team.clone(),
            &self.issue_type,
            &self.component,
        )?)
    }
}

pub async fn run(settings: &Settings, command: StrategyCommand) -> anyhow::Result<()> {
    let store = super::connect_store(settings).await?;
    match command {
        StrategyCommand::List { org, team, limit } => {
            let limit = limit.max(1);
            let mut strategies = store
                .list_strategies(&org, team.as_deref(), true, limit + 1)
                .await?;
            let more = strategies.len() > limit;
            strategies.truncate(limit);
            let mut listing =
                Listing::new(["TEAM", "ISSUE TYPE", "COMPONENT", "EDITED", "PROPOSAL"]);
            for s in &strategies {
                listing.row(vec![
                    s.key.team.clone(),
                    s.key.issue_type.clone(),
                    format!("{}:{}", s.key.component.kind, s.key.component.name),
                    if s.edited_by.is_some() { "yes" } else { "no" }.to_owned(),
                    if s.proposed_markdown.is_some() {
                        "pending"
                    } else {
                        "-"
                    }
                    .to_owned(),
                ]);
            }
            listing.print();
            if more {
                println!(
                    "{} strategies shown; more exist: raise --limit",
                    strategies.len()
                );
            } else {
                println!("{} strategies", strategies.len());
            }
            let failures = store
                .synthesis_failures(&org, team.as_deref(), true, limit)
                .await?;
            if !failures.is_empty() {
                println!(
                    "\nlast synthesis failed ({}; retried once the cool-down ends or the \
                     sources change, the job is in `deja dlq list`):",
                    failures.len()
                );
                let mut listing = Listing::new([
                    "TEAM",
                    "ISSUE TYPE",
                    "COMPONENT",
                    "FAILED AT",
                    "SERVED",
                    "ASKED AGAIN",
                    "REASON",
                ]);
                for f in &failures {
                    listing.row(vec![
                        f.team.clone(),
                        f.issue_type.clone(),
                        format!("{}:{}", f.component_type, f.component_name),
                        f.failed_at.format("%Y-%m-%d %H:%M").to_string(),
                        if f.has_strategy {
                            "earlier version"
                        } else {
                            "none"
                        }
                        .to_owned(),
                        f.asked_again_at.map_or_else(
                            || "-".to_owned(),
                            |at| at.format("%Y-%m-%d %H:%M").to_string(),
                        ),
                        f.reason.clone(),
                    ]);
                }
                listing.print();
            }
        }
        StrategyCommand::Show(args) => {
            let principal = Principal::local_reviewer(&args.org, "cli");
            let stored = Review::new(store, None)
                .strategy(&principal, Some(args.org.clone()), &args.strategy()?)
                .await?;
            say!("{}", stored.markdown);
            say!("\n(version {})", stored.version);
            if let Some(editor) = &stored.edited_by {
                say!("\n(edited by {editor})");
            }
            if let Some(proposal) = &stored.proposed_markdown {
                say!("\n--- pending proposal (deja strategy accept ...) ---\n{proposal}");
            }
            if !stored.history.is_empty() {
                say!("\nhistory:");
            }
            for h in &stored.history {
                say!("{}  {:<16} {}  {}", h.at, h.action, h.by, h.changes);
            }
        }
        // The same use cases as the hub's strategy page.
        StrategyCommand::Edit {
            key,
            file,
            by,
            if_match,
        } => {
            let markdown = std::fs::read_to_string(&file)
                .with_context(|| format!("could not read {}", file.display()))?;
            let principal = Principal::local_reviewer(&key.org, super::reviewer_name(by));
            let version = Review::new(store, None)
                .edit_strategy(
                    &principal,
                    Some(key.org.clone()),
                    &key.strategy()?,
                    &markdown,
                    if_match,
                )
                .await?;
            println!("strategy updated (version {version}); regeneration will now propose instead of overwrite");
        }
        StrategyCommand::Accept { key, by, if_match } => {
            let principal = Principal::local_reviewer(&key.org, super::reviewer_name(by));
            let version = Review::new(store, None)
                .accept_strategy(
                    &principal,
                    Some(key.org.clone()),
                    &key.strategy()?,
                    if_match,
                )
                .await?;
            println!("proposal accepted (version {version})");
        }
    }
    Ok(())
}
