//! `deja episode list|show|edit|mark-wrong|clear-verdict|confirm|link|unlink|delete`: the review API's
//! use cases (`deja_api::review`) from the command line, recorded in the audit trail as
//! `--by` (default: $USER).

use crate::table::{truncate, Listing};
use crate::terminal::say;
use deja_api::review::{Action, ListQuery, ReviewedEpisode};
use deja_api::{Envelope, Principal, Review, SearchError};
use deja_config::Settings;
use deja_domain::{Component, EpisodeEdit};
use serde::Serialize;

#[derive(clap::Subcommand)]
pub enum EpisodeCommand {
    /// List episodes for review, newest first.
    List(ListArgs),
    /// One episode with its provenance (turns, stored input, strategies, history).
    Show(Target),
    /// Correct fields (only the ones given). Needs the version you read (--if-match).
    Edit(EditArgs),
    /// Mark the episode wrong: its root cause becomes a ruled-out lead for agents.
    MarkWrong {
        #[command(flatten)]
        target: Target,
        #[arg(long, default_value = "")]
        note: String,
        #[arg(long)]
        if_match: Option<i64>,
    },
    /// Remove a verdict.
    ClearVerdict {
        #[command(flatten)]
        target: Target,
        #[arg(long)]
        if_match: Option<i64>,
    },
    /// Confirm the episode still holds (recency counts from now).
    Confirm {
        #[command(flatten)]
        target: Target,
        #[arg(long)]
        if_match: Option<i64>,
    },
    /// Link the episode as a recurrence of an older one (or confirm a detected link).
    Link {
        #[command(flatten)]
        target: Target,
        /// The older episode it recurs.
        #[arg(long)]
        of: String,
        #[arg(long, default_value_t = 1.0)]
        confidence: f64,
    },
    /// Remove a recurrence link.
    Unlink {
        #[command(flatten)]
        target: Target,
        #[arg(long)]
        of: String,
    },
    /// Delete the episode, its edges and stored turn input (strategies from it go stale).
    Delete {
        #[command(flatten)]
        target: Target,
        #[arg(long)]
        if_match: Option<i64>,
    },
}

impl EpisodeCommand {
    /// Whether `--json` was asked for: every failure is then printed as an envelope.
    pub fn json(&self) -> bool {
        match self {
            EpisodeCommand::List(args) => args.common.json,
            EpisodeCommand::Show(target)
            | EpisodeCommand::MarkWrong { target, .. }
            | EpisodeCommand::ClearVerdict { target, .. }
            | EpisodeCommand::Confirm { target, .. }
            | EpisodeCommand::Link { target, .. }
            | EpisodeCommand::Unlink { target, .. }
            | EpisodeCommand::Delete { target, .. } => target.common.json,
            EpisodeCommand::Edit(args) => args.target.common.json,
        }
    }
}

#[derive(clap::Args)]
pub struct Common {
    /// The org (tenant) the episodes belong to.
    #[arg(long, value_parser = super::org_name)]
    org: String,
    /// Who you are in the audit records (default: $USER).
    #[arg(long)]
    by: Option<String>,
    /// Print the API's JSON envelope.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct Target {
    /// The episode id (ep_...).
    id: String,
    #[command(flatten)]
    common: Common,
}

#[derive(clap::Args)]
pub struct ListArgs {
    #[command(flatten)]
    common: Common,
    /// Only this team (default: the whole org).
    #[arg(long)]
    team: Option<String>,
    /// type:name, or a name.
    #[arg(long)]
    component: Option<String>,
    /// An issue type (as `deja vocab list` shows them).
    #[arg(long)]
    issue_type: Option<String>,
    /// Free text, e.g. incident, observation or benign.
    #[arg(long)]
    significance: Option<String>,
    #[arg(long)]
    resolved: Option<bool>,
    /// ok, failed or pending_error.
    #[arg(long)]
    status: Option<String>,
    /// wrong, none (no verdict) or any (the default).
    #[arg(long)]
    verdict: Option<String>,
    /// Free text.
    #[arg(long)]
    q: Option<String>,
    /// updated (default), created, confirmed or recalled (most recently returned by a
    /// memory-search first).
    #[arg(long)]
    order: Option<String>,
    /// At most this many.
    #[arg(long, default_value_t = 20)]
    limit: usize,
    /// Skip this many (paging).
    #[arg(long, default_value_t = 0)]
    offset: usize,
}

#[derive(clap::Args)]
pub struct EditArgs {
    #[command(flatten)]
    target: Target,
    /// The version you read (`deja episode show` prints it); a newer one is a conflict.
    #[arg(long)]
    if_match: i64,
    /// An issue type (as `deja vocab list` shows them).
    #[arg(long)]
    issue_type: Option<String>,
    /// What was observed (the issue description).
    #[arg(long)]
    description: Option<String>,
    /// type:name (repeatable; replaces the list).
    #[arg(long = "component")]
    components: Vec<String>,
    /// An empty value clears it.
    #[arg(long)]
    root_cause: Option<String>,
    /// The root cause's confidence: free text, e.g. confirmed or suspected.
    #[arg(long)]
    confidence: Option<String>,
    /// Repeatable; replaces the list.
    #[arg(long = "ruled-out")]
    ruled_out: Vec<String>,
    /// Repeatable; replaces the list.
    #[arg(long = "key-finding")]
    key_findings: Vec<String>,
    /// How it was fixed (free text).
    #[arg(long)]
    resolution: Option<String>,
    /// Free text, e.g. incident, observation or benign.
    #[arg(long)]
    significance: Option<String>,
    /// The one-paragraph summary.
    #[arg(long)]
    summary: Option<String>,
}

impl Common {
    fn principal(&self) -> Principal {
        Principal::local_reviewer(&self.org, super::reviewer_name(self.by.clone()))
    }
}

/// The review use cases over the configured store. Writes that may change the embedded text
/// load the model; without it the old vector stays. A store that does not answer fails as a
/// review request would (`neo4j_unavailable`), so `--json` prints it as an envelope too.
async fn review(settings: &Settings, embed: bool) -> Result<Review, SearchError> {
    let store = deja_graph::GraphStore::connect(&settings.neo4j)
        .await
        .map_err(SearchError::from)?;
    let embedder = if embed {
        match super::load_embedder(settings) {
            Ok(embedder) => Some(embedder),
            Err(error) => {
                eprintln!(
                    "warning: {error:#}; an edit that changes the embedded text keeps the old \
                     vector until `deja reembed` refreshes it"
                );
                None
            }
        }
    } else {
        None
    };
    let late = if embed {
        deja_api::load_late_encoder(settings).await
    } else {
        None
    };
    Ok(Review::new(store, embedder).with_late(late))
}

pub async fn run(settings: &Settings, command: EpisodeCommand) -> anyhow::Result<()> {
    match command {
        EpisodeCommand::List(args) => {
            let principal = args.common.principal();
            let query = ListQuery {
                org: Some(args.common.org.clone()),
                team: args.team,
                component: args.component,
                issue_type: args.issue_type,
                significance: args.significance,
                resolved: args.resolved,
                status: args.status,
                verdict: args.verdict,
                q: args.q,
                order: args.order,
                limit: Some(args.limit),
                offset: Some(args.offset),
            };
            let result =
                async { review(settings, false).await?.list(&principal, query).await }.await;
            print(args.common.json, result, |page| {
                let mut listing = Listing::new([
                    "ID",
                    "TEAM",
                    "VER",
                    "STATUS",
                    "VERDCT",
                    "RECALLED",
                    "ISSUE TYPE",
                    "SUMMARY",
                ]);
                for e in &page.episodes {
                    let details = e.view.details.as_ref();
                    listing.row(vec![
                        e.view.id.clone(),
                        truncate(details.map_or("", |d| d.team.as_str()), 12),
                        e.version.to_string(),
                        details
                            .map_or("", |d| d.extraction_status.as_str())
                            .to_owned(),
                        e.view.verdict.as_deref().unwrap_or("-").to_owned(),
                        e.last_recalled_at
                            .map_or("-".to_owned(), |t| t.format("%Y-%m-%d %H:%M").to_string()),
                        truncate(&e.view.issue_type, 22),
                        truncate(&e.view.summary, 60),
                    ]);
                }
                listing.print();
                match page.next_offset {
                    Some(next) => println!("more: --offset {next}"),
                    None => println!("{} episodes", page.episodes.len()),
                }
            })
        }
        EpisodeCommand::Show(target) => {
            let result = async {
                review(settings, false)
                    .await?
                    .get(
                        &target.common.principal(),
                        Some(target.common.org.clone()),
                        &target.id,
                    )
                    .await
            }
            .await;
            print(target.common.json, result, print_episode)
        }
        EpisodeCommand::Edit(args) => {
            let components = args
                .components
                .iter()
                .map(|spec| {
                    spec.split_once(':')
                        .map(|(kind, name)| Component::new(kind, name))
                        .ok_or_else(|| {
                            SearchError::bad_request(
                                "--component",
                                format!("must be type:name, got {spec:?}"),
                            )
                        })
                })
                .collect::<Result<Vec<_>, _>>();
            let components = match components {
                Ok(components) => components,
                Err(error) => return print(args.target.common.json, Err(error), print_episode),
            };
            let edit = EpisodeEdit {
                issue_type: args.issue_type,
                issue_description: args.description,
                components: (!components.is_empty()).then_some(components),
                root_cause: args.root_cause,
                root_cause_confidence: args.confidence,
                ruled_out: (!args.ruled_out.is_empty()).then_some(args.ruled_out),
                key_findings: (!args.key_findings.is_empty()).then_some(args.key_findings),
                resolution: args.resolution,
                significance: args.significance,
                summary: args.summary,
            };
            act(
                settings,
                &args.target,
                Some(args.if_match),
                Action::Edit(Box::new(edit)),
            )
            .await
        }
        EpisodeCommand::MarkWrong {
            target,
            note,
            if_match,
        } => act(settings, &target, if_match, Action::MarkWrong(note)).await,
        EpisodeCommand::ClearVerdict { target, if_match } => {
            act(settings, &target, if_match, Action::ClearVerdict).await
        }
        EpisodeCommand::Confirm { target, if_match } => {
            act(settings, &target, if_match, Action::Confirm).await
        }
        EpisodeCommand::Link {
            target,
            of,
            confidence,
        } => {
            let link = deja_api::review::LinkRecurrence { of, confidence };
            let result = async {
                review(settings, false)
                    .await?
                    .link(
                        &target.common.principal(),
                        Some(target.common.org.clone()),
                        &target.id,
                        &link,
                        None,
                    )
                    .await
            }
            .await;
            print(target.common.json, result, print_episode)
        }
        EpisodeCommand::Unlink { target, of } => {
            let result = async {
                review(settings, false)
                    .await?
                    .unlink(
                        &target.common.principal(),
                        Some(target.common.org.clone()),
                        &target.id,
                        &of,
                        None,
                    )
                    .await
            }
            .await;
            print(target.common.json, result, print_episode)
        }
        EpisodeCommand::Delete { target, if_match } => {
            let result = async {
                review(settings, false)
                    .await?
                    .delete(
                        &target.common.principal(),
                        Some(target.common.org.clone()),
                        &target.id,
                        if_match,
                    )
                    .await
            }
            .await;
            print(target.common.json, result, |d| {
                println!(
                    "deleted {} ({} review records, {} turn inputs; {} strategies now stale)",
                    d.id, d.reviews, d.turn_inputs, d.stale_strategies
                )
            })
        }
    }
}

async fn act(
    settings: &Settings,
    target: &Target,
    if_match: Option<i64>,
    action: Action,
) -> anyhow::Result<()> {
    let embed = matches!(action, Action::Edit(_) | Action::MarkWrong(_));
    let result = async {
        review(settings, embed)
            .await?
            .apply(
                &target.common.principal(),
                Some(target.common.org.clone()),
                &target.id,
                if_match,
                action,
            )
            .await
    }
    .await;
    print(target.common.json, result, print_episode)
}

/// `--json`: the envelope (also on failure); otherwise `human`. A failure is an error exit.
fn print<T: Serialize>(
    json: bool,
    result: Result<T, SearchError>,
    human: impl FnOnce(&T),
) -> anyhow::Result<()> {
    if json {
        let envelope = Envelope::from_result(result);
        println!("{}", serde_json::to_string_pretty(&envelope)?);
        return match envelope.error {
            Some(error) => Err(anyhow::anyhow!("{}", error.message)),
            None => Ok(()),
        };
    }
    match result {
        Ok(value) => {
            human(&value);
            Ok(())
        }
        // With its cause chain (the store's address when it did not answer).
        Err(error) => Err(anyhow::Error::new(error)),
    }
}

fn print_episode(e: &ReviewedEpisode) {
    let v = &e.view;
    say!("{}  version {}  ({})", v.id, e.version, v.correlation_id);
    if let Some(d) = &v.details {
        say!(
            "team {}  status {}  provenance {}",
            d.team,
            d.extraction_status,
            d.provenance
        );
        say!("issue type   {}", v.issue_type);
        say!("description  {}", d.description);
        if let Some(opening) = &e.opening_message {
            // Verbatim input: one line, so a pasted alert cannot fake the fields below it.
            say!("opened by    {}", opening.replace(['\n', '\r'], " "));
        }
        say!("root cause   {}", v.root_cause.as_deref().unwrap_or("-"));
        say!(
            "confidence   {}",
            d.root_cause_confidence.as_deref().unwrap_or("-")
        );
        say!("ruled out    {}", d.ruled_out.join("; "));
        say!("resolution   {}", d.resolution.as_deref().unwrap_or("-"));
        say!("significance {}", d.significance.as_deref().unwrap_or("-"));
    }
    say!("summary      {}", v.summary);
    let components: Vec<String> = v
        .components
        .iter()
        .map(|c| format!("{}:{}", c.kind, c.name))
        .collect();
    say!("components   {}", components.join(", "));
    if let Some(verdict) = &v.verdict {
        say!(
            "VERDICT      {verdict}: {}",
            v.verdict_note.as_deref().unwrap_or("")
        );
    }
    if !e.human_pinned.is_empty() {
        say!("pinned       {}", e.human_pinned.join(", "));
    }
    for (field, value) in &e.proposals {
        say!("proposed {field}: {value}");
    }
    for t in &e.turns {
        say!(
            "turn {:>3}  run {}  {}",
            t.turn_index,
            t.agent_run_id,
            t.ended_at
        );
    }
    if let Some(input) = &e.turn_input {
        say!(
            "stored turn input: turn {} ({} bytes)",
            input.turn_index,
            input.event_json.len()
        );
    }
    for s in &e.strategies {
        say!(
            "feeds strategy {}/{}/{}:{}{}",
            s.team,
            s.issue_type,
            s.component.kind,
            s.component.name,
            if s.stale { " (stale)" } else { "" }
        );
    }
    if let (Some(count), Some(first), Some(last)) =
        (e.view.recurrence_count, e.view.first_seen, e.view.last_seen)
    {
        say!("recurrences  {count} (first seen {first}, last seen {last})");
    }
    for r in &e.recurrences {
        say!(
            "  {} {} ({}, confidence {:.2}, by {}{})",
            r.direction,
            r.id,
            r.issue_type,
            r.confidence,
            r.by,
            r.confirmed_by
                .as_deref()
                .map(|c| format!(", confirmed by {c}"))
                .unwrap_or_default()
        );
    }
    for r in &e.rejected {
        let other = format!("{} ({})", r.id, r.issue_type);
        say!(
            "  {}; unlinked by {} at {}",
            deja_api::review::rejected_pair(r, &other),
            r.by,
            r.at
        );
    }
    for h in &e.history {
        say!("{}  {:<14} {}  {}", h.at, h.action, h.by, h.changes);
    }
}
