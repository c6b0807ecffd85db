//! `deja dlq`: look at and replay the dead-letter queue. The work is in `deja_bus::dlq`; this
//! module parses, connects and prints.

use crate::table::Listing;
use anyhow::Context;
use deja_bus::{Bus, DeadLetter, DlqFilter};
use deja_config::Settings;

#[derive(clap::Subcommand)]
pub enum DlqCommand {
    /// List dead letters (nothing leaves the queue).
    List {
        #[command(flatten)]
        filter: FilterArgs,
        #[arg(long)]
        json: bool,
    },
    /// Show dead letter N (its position in `deja dlq list`) with its headers and body.
    Show { position: usize },
    /// Re-publish dead letters to where they came from, with attempts reset.
    Replay {
        #[command(flatten)]
        filter: FilterArgs,
        /// Replay every dead letter (required when neither --reason nor --org is given).
        #[arg(long)]
        all: bool,
        /// Only count what would be replayed.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(clap::Args)]
pub struct FilterArgs {
    /// Only letters with this `x-deja-reason`, e.g. `schema_violation`.
    #[arg(long)]
    reason: Option<String>,
    /// Only letters of this org.
    #[arg(long)]
    org: Option<String>,
    /// Read at most this many letters from the queue.
    #[arg(long, default_value_t = 10_000)]
    limit: usize,
}

impl FilterArgs {
    fn filter(&self) -> DlqFilter {
        DlqFilter {
            reason: self.reason.clone(),
            org: self.org.clone(),
        }
    }
}

pub async fn run(settings: &Settings, command: DlqCommand) -> anyhow::Result<()> {
    let bus = Bus::connect_named(&settings.rabbitmq, "deja-dlq")
        .await
        .context("could not connect to rabbitmq")?;
    let dlq = bus.topology().dead_letter_queue.clone();
    let result = match command {
        DlqCommand::List { filter, json } => {
            let read = bus
                .dead_letters(filter.limit)
                .await
                .with_context(|| format!("could not read {dlq}"))?;
            let capped = read.len() >= filter.limit;
            let letters: Vec<DeadLetter> = read
                .into_iter()
                .filter(|l| filter.filter().matches(l))
                .collect();
            if json {
                let rows: Vec<_> = letters.iter().map(letter_json).collect();
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                print_table(&letters);
                if capped {
                    println!(
                        "read the first {} dead letters (--limit); more may wait in {dlq}",
                        filter.limit
                    );
                }
            }
            Ok(())
        }
        DlqCommand::Show { position } => {
            let letters = bus
                .dead_letters(position)
                .await
                .with_context(|| format!("could not read {dlq}"))?;
            match letters.into_iter().find(|l| l.position == position) {
                Some(letter) => {
                    let mut json = letter_json(&letter);
                    json["body"] = match serde_json::from_slice(&letter.body) {
                        Ok(value) => value,
                        Err(_) => String::from_utf8_lossy(&letter.body).into_owned().into(),
                    };
                    println!("{}", serde_json::to_string_pretty(&json)?);
                    Ok(())
                }
                None => Err(anyhow::anyhow!(
                    "there is no dead letter {position} in {dlq}"
                )),
            }
        }
        DlqCommand::Replay {
            filter,
            all,
            dry_run,
        } => {
            let wanted = filter.filter();
            if wanted.is_empty() && !all {
                anyhow::bail!(
                    "name --reason and/or --org, or pass --all to replay every dead letter"
                );
            }
            let report = bus
                .replay_dead_letters(&wanted, dry_run, filter.limit)
                .await
                .with_context(|| format!("could not replay from {dlq}"))?;
            let verb = if dry_run { "would replay" } else { "replayed" };
            let shown = if dry_run {
                report.matched
            } else {
                report.replayed
            };
            println!(
                "scanned {}, matched {}, {verb} {shown}, failed {}",
                report.scanned, report.matched, report.failed
            );
            if report.scanned >= filter.limit {
                // Letters not replayed go back to the head of the queue: a second run reads
                // the same ones first, so only one that replayed them all gets further.
                let next = if dry_run || report.replayed < report.scanned {
                    format!("raise --limit past {} to read further", filter.limit)
                } else {
                    "run it again".to_owned()
                };
                println!(
                    "stopped at --limit {}: more dead letters may wait in {dlq}; {next}",
                    filter.limit
                );
            }
            match (report.failed, report.not_removed) {
                (0, 0) => Ok(()),
                (failed, 0) => Err(anyhow::anyhow!(
                    "{failed} dead letters could not be replayed and stay in {dlq}"
                )),
                // The held channel failed between a publish and its ack; the replay stopped
                // there, so no later letter was published without being removed.
                (failed, replayed_but_kept) => Err(anyhow::anyhow!(
                    "the replay stopped when its channel failed: {replayed_but_kept} dead \
                     letter(s) were replayed but stay in {dlq} (a later replay delivers them \
                     again), {failed} were not replayed and stay in {dlq}"
                )),
            }
        }
    };
    let _ = bus.close().await;
    result
}

fn letter_json(letter: &DeadLetter) -> serde_json::Value {
    serde_json::json!({
        "position": letter.position,
        "reason": letter.reason,
        "detail": letter.detail,
        "org": letter.org,
        "team": letter.team,
        "routing_key": letter.routing_key,
        "attempts": letter.attempts,
        "dead_lettered_at": letter.dead_lettered_at,
        "source_queue": letter.source_queue,
        "message_id": letter.message_id,
        "bytes": letter.body.len(),
    })
}

fn print_table(letters: &[DeadLetter]) {
    let mut listing = Listing::new([
        "N",
        "REASON",
        "ORG",
        "ATTEMPTS",
        "DEAD-LETTERED AT",
        "DETAIL",
    ])
    .right_aligned(0);
    for l in letters {
        listing.row(vec![
            l.position.to_string(),
            l.reason.clone(),
            l.org.as_deref().unwrap_or("-").to_owned(),
            l.attempts
                .map(|a| a.to_string())
                .unwrap_or_else(|| "-".into()),
            l.dead_lettered_at.as_deref().unwrap_or("-").to_owned(),
            l.detail.chars().take(80).collect(),
        ]);
    }
    listing.print();
    println!("{} dead letters", letters.len());
}
