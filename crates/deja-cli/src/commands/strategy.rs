//! Review tools for strategies: people list, read, correct and accept them. An edited
//! strategy is never overwritten by regeneration; new syntheses become proposals.

use crate::table::Listing;
use deja_config::Settings;
use deja_domain::strategy::{StrategyKey, ORG_WIDE_TEAM};
use deja_domain::Component;
use std::path::PathBuf;

#[derive(clap::Subcommand)]
pub enum StrategyCommand {
    /// List the strategies of an org (or one team).
    List {
        #[arg(long)]
        org: String,
        #[arg(long)]
        team: Option<String>,
    },
    /// Print one strategy, and its pending proposal if any.
    Show(KeyArgs),
    /// Replace a strategy's markdown with a reviewed version from a file.
    Edit {
        #[command(flatten)]
        key: KeyArgs,
        /// The corrected markdown.
        #[arg(long)]
        file: PathBuf,
        /// Who edited it (recorded on the strategy).
        #[arg(long)]
        editor: String,
    },
    /// Make the pending proposal the current strategy.
    Accept {
        #[command(flatten)]
        key: KeyArgs,
        #[arg(long)]
        reviewer: String,
    },
}

#[derive(clap::Args)]
pub struct KeyArgs {
    #[arg(long)]
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
    fn key(&self) -> anyhow::Result<StrategyKey> {
        let (kind, name) = self
            .component
            .split_once(':')
            .ok_or_else(|| anyhow::anyhow!("--component must be type:name"))?;
        Ok(StrategyKey {
            org: self.org.clone(),
            team: self
                .team
                .clone()
                .unwrap_or_else(|| ORG_WIDE_TEAM.to_owned()),
            issue_type: self.issue_type.clone(),
            component: Component::new(kind, name),
        })
    }
}

pub async fn run(settings: &Settings, command: StrategyCommand) -> anyhow::Result<()> {
    let store = super::connect_store(settings).await?;
    match command {
        StrategyCommand::List { org, team } => {
            let strategies = store.list_strategies(&org, team.as_deref(), 100).await?;
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
            println!("{} strategies", strategies.len());
        }
        StrategyCommand::Show(args) => {
            let key = args.key()?;
            let stored = store
                .get_strategy(&key)
                .await?
                .ok_or_else(|| anyhow::anyhow!("no strategy for that key"))?;
            println!("{}", stored.markdown);
            if let Some(editor) = &stored.edited_by {
                println!("\n(edited by {editor})");
            }
            if let Some(proposal) = &stored.proposed_markdown {
                println!("\n--- pending proposal (deja strategy accept ...) ---\n{proposal}");
            }
        }
        StrategyCommand::Edit { key, file, editor } => {
            let markdown = std::fs::read_to_string(&file)?;
            let version = store
                .edit_strategy(&key.key()?, &markdown, &editor)
                .await?
                .ok_or_else(|| anyhow::anyhow!("no strategy for that key"))?;
            println!("strategy updated (version {version}); regeneration will now propose instead of overwrite");
        }
        StrategyCommand::Accept { key, reviewer } => {
            let version = store
                .accept_proposal(&key.key()?, &reviewer)
                .await?
                .ok_or_else(|| anyhow::anyhow!("no pending proposal for that key"))?;
            println!("proposal accepted (version {version})");
        }
    }
    Ok(())
}
