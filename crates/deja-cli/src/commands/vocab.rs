//! `deja vocab`: an org's issue types and component names, and merging two spellings of one
//! name. The use cases live in `deja-graph` (`org_vocabulary`, `merge_vocabulary`); this only
//! parses and prints.

use crate::table::Listing;
use anyhow::Context;
use deja_config::Settings;
use deja_domain::VocabKind;
use deja_embed::Embedder;
use std::sync::Arc;

#[derive(clap::Subcommand)]
pub enum VocabCommand {
    /// List an org's issue types (with a short description) and components, most used first.
    List {
        /// The org (tenant).
        #[arg(long, value_parser = super::org_name)]
        org: String,
        /// At most this many.
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Fold name FROM into name INTO for every episode of the org, in one transaction.
    Merge {
        /// The name to retire, exactly as stored (see `deja vocab list`).
        from: String,
        /// The name to keep (normalised: lowercase, separators unified).
        into: String,
        /// The org (tenant).
        #[arg(long, value_parser = super::org_name)]
        org: String,
        #[arg(long, value_enum, default_value_t = Kind::IssueType)]
        kind: Kind,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Kind {
    IssueType,
    Component,
}

impl From<Kind> for VocabKind {
    fn from(kind: Kind) -> Self {
        match kind {
            Kind::IssueType => VocabKind::IssueType,
            Kind::Component => VocabKind::Component,
        }
    }
}

pub async fn run(settings: &Settings, command: VocabCommand) -> anyhow::Result<()> {
    let store = super::connect_store(settings).await?;
    match command {
        VocabCommand::List { org, limit, json } => {
            let vocabulary = store.org_vocabulary(&org, limit).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&vocabulary)?);
                return Ok(());
            }
            let mut issue_types = Listing::new(["USES", "ISSUE TYPE", "DESCRIPTION"]);
            for entry in &vocabulary.issue_types {
                let description: String = entry
                    .description
                    .as_deref()
                    .unwrap_or("")
                    .chars()
                    .take(80)
                    .collect();
                issue_types.row(vec![
                    entry.uses.to_string(),
                    entry.name.clone(),
                    description,
                ]);
            }
            issue_types.print();
            println!();
            let mut components = Listing::new(["USES", "TYPE", "COMPONENT"]);
            for entry in &vocabulary.components {
                components.row(vec![
                    entry.uses.to_string(),
                    entry.component_type.as_deref().unwrap_or("").to_owned(),
                    entry.name.clone(),
                ]);
            }
            components.print();
        }
        VocabCommand::Merge {
            from,
            into,
            org,
            kind,
        } => {
            let kind = VocabKind::from(kind);
            let merged = store.merge_vocabulary(&org, kind, &from, &into).await?;
            // A mistyped name, org or --kind rewrites nothing: said as a failure, so that a
            // script (or a person) does not take it for a merge.
            if merged.episodes == 0 && merged.components_deleted == 0 {
                anyhow::bail!(
                    "no episode of org `{org}` uses the {} `{from}` (or it is already `{}`): \
                     nothing merged; `deja vocab list --org {org}` shows the names in use",
                    kind.as_str(),
                    kind.normalize(&into)
                );
            }
            println!(
                "merged {} `{from}` into `{}`: {} episodes rewritten, {} components deleted",
                kind.as_str(),
                kind.normalize(&into),
                merged.episodes,
                merged.components_deleted
            );
            // An issue type is part of the embedded text and of the cause text: the renamed
            // episodes' search embedding (marked stale by the merge), token and cause vectors
            // are now of an older text, and searches would decide them without late
            // interaction until they are re-encoded.
            if kind == VocabKind::IssueType && merged.episodes > 0 {
                // The merge is committed: running it again finds nothing to rename and would
                // not re-embed, so a failure from here on says what finishes the job.
                let finish = || {
                    format!(
                        "the merge is saved, but the renamed episodes are not re-encoded yet: \
                         run `deja reembed --org {org}`"
                    )
                };
                let embedder = super::load_embedder(settings).with_context(finish)?;
                let done = deja_worker::jobs::reembed(
                    &store,
                    &embedder,
                    Some(&org),
                    deja_worker::jobs::ReembedTarget::Stale,
                    64,
                    |_| {},
                )
                .await
                .with_context(finish)?;
                // Every episode of the org without a current vector, the renamed ones among
                // them (an earlier stale one is refreshed on the way).
                println!("re-embedded {done} episodes of the org (the renamed ones included)");
                retokenize(settings, &store, &org, &embedder)
                    .await
                    .with_context(finish)?;
            }
        }
    }
    Ok(())
}

async fn retokenize(
    settings: &Settings,
    store: &deja_graph::GraphStore,
    org: &str,
    embedder: &Arc<dyn Embedder>,
) -> anyhow::Result<()> {
    match deja_api::load_late_encoder(settings).await {
        Some(encoder) => {
            let done =
                deja_worker::jobs::retokenize(store, &encoder, embedder, Some(org), 64, |_| {})
                    .await?;
            println!(
                "stored token vectors of {done} episodes of the org (the renamed ones included)"
            );
        }
        None if settings.late_interaction.enabled => {
            anyhow::bail!("the late-interaction model did not load (see the log)")
        }
        None => {}
    }
    Ok(())
}
