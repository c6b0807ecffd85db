use crate::terminal::say;
use anyhow::Context;
use chrono::Utc;
use deja_config::Settings;
use deja_domain::import::{check_org, parse_records, IncidentRecord};
use deja_worker::jobs::{import_record, ImportError, Imported};
use indicatif::{ProgressBar, ProgressStyle};
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, Write};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct ImportArgs {
    /// Reviewed incident records, one JSON object per line (docs/import.md).
    file: PathBuf,
    /// Write every valid record without asking.
    #[arg(long)]
    yes: bool,
    /// Import into this org instead of each record's own (evaluation namespaces).
    #[arg(long, value_parser = super::org_name)]
    org: Option<String>,
    /// Import records whose episode a person deleted, too (by default a re-import leaves a
    /// deletion standing, as it leaves every other review).
    #[arg(long)]
    restore_deleted: bool,
}

pub async fn run(settings: &Settings, args: ImportArgs) -> anyhow::Result<()> {
    // Blank is refused while parsing (`org_name`); the rest as a record's own org is.
    if let Some(org) = &args.org {
        check_org(org)?;
    }
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("could not read {}", args.file.display()))?;
    let (records, invalid) = parse_records(&text, args.org.as_deref());
    for (line, error) in &invalid {
        eprintln!("{}:{line}: skipped: {error}", args.file.display());
    }
    let store = super::connect_store(settings).await?;
    let embedder = super::load_embedder(settings)?;
    // As the worker and `deja reembed` refuse to: vectors of another dimension than the
    // index's would be written, and never found by its searches.
    deja_worker::check_dimensions(store.vector_index_dimensions().await?, embedder.as_ref())?;
    let late = deja_api::load_late_encoder(settings).await;
    if settings.late_interaction.enabled && late.is_none() {
        anyhow::bail!(
            "late_interaction.enabled is on but its model did not load (see the log); run \
             deploy/embeddings.sh fetch, or set late_interaction.enabled = false"
        );
    }
    let mut answers = std::io::stdin().lock().lines();
    let mut yes_to_all = args.yes;
    let (mut written, mut declined, mut unusable) = (0usize, 0usize, 0usize);
    let (mut unchanged, mut refused, mut unanswered) = (0usize, 0usize, 0usize);
    let mut deleted_kept = 0usize;
    // The episodes people deleted, per org, read once each: a re-import must not undo them.
    let mut deleted_of: HashMap<String, HashSet<String>> = HashMap::new();
    // Only when nothing is asked: a bar would draw over the questions. On a terminal only
    // (it hides itself elsewhere).
    let bar = if args.yes {
        ProgressBar::new(records.len() as u64).with_style(
            ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} records")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        )
    } else {
        ProgressBar::hidden()
    };
    let total = records.len();
    for (index, (line, record)) in records.into_iter().enumerate() {
        if !yes_to_all {
            show(&record, line);
            print!("import this record? [y]es / [n]o / [a]ll / [q]uit: ");
            std::io::stdout().flush()?;
            // Input that ends before every record is answered (a script without `--yes`)
            // says nothing about the rest: they are not imported, and the exit says so.
            let Some(answer) = answers.next().transpose()? else {
                // No more input: this record and every one after it, without showing each.
                println!();
                unanswered += total - index;
                break;
            };
            match answer.trim().to_lowercase().as_str() {
                "y" | "yes" => {}
                "a" | "all" => yes_to_all = true,
                "q" | "quit" => break,
                _ => {
                    declined += 1;
                    continue;
                }
            }
        }
        // Skipped like a line that does not parse (docs/import.md): the records before it are
        // written already, and the ones after it still import.
        let now = Utc::now();
        let episode = match record
            .check_created_by(now)
            .and_then(|()| record.to_episode(now))
        {
            Ok(episode) => episode,
            Err(error) => {
                eprintln!("{}:{line}: skipped: {error}", args.file.display());
                unusable += 1;
                continue;
            }
        };
        if !args.restore_deleted {
            let deleted = match deleted_of.entry(episode.org.clone()) {
                Entry::Occupied(known) => known.into_mut(),
                Entry::Vacant(unread) => {
                    unread.insert(store.deleted_episode_ids(&episode.org).await?)
                }
            };
            if deleted.contains(&episode.id) {
                eprintln!(
                    "{}:{line}: skipped: {} was deleted by a person (pass --restore-deleted \
                     to import it again)",
                    args.file.display(),
                    record.id
                );
                deleted_kept += 1;
                bar.inc(1);
                continue;
            }
        }
        match import_record(&store, &embedder, late.as_ref(), episode).await {
            Ok(Imported::Written(_)) => written += 1,
            Ok(Imported::Unchanged(_)) => unchanged += 1,
            // Nothing was written for it; the other records still import.
            Err(error @ ImportError::Conversation(_)) => {
                eprintln!("{}:{line}: skipped: {error}", args.file.display());
                refused += 1;
            }
            Err(error) => {
                // Stopped mid-file: what the earlier lines did is written and stays, and a
                // person re-running the file needs to know it (unchanged records cost nothing).
                bar.finish_and_clear();
                return Err(error).with_context(|| {
                    format!(
                        "line {line}: {} (before it: imported {written}, unchanged {unchanged}, \
                         declined {declined}, refused {refused}; the import stopped here — \
                         running it again re-checks the records already written)",
                        record.id
                    )
                });
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let skipped = invalid.len() + unusable;
    println!(
        "imported {written}, declined {declined}, invalid {skipped}, unchanged {unchanged}, \
         refused {refused}, deleted by a person {deleted_kept}"
    );
    if unanswered > 0 {
        anyhow::bail!(
            "{unanswered} records not imported: the input ended before they were answered \
             (pass --yes to import every valid record without asking)"
        );
    }
    // The valid records are written; a script must still see that some were not.
    match (skipped, refused) {
        (0, 0) => {}
        (skipped, 0) => anyhow::bail!("{skipped} invalid records skipped (see above)"),
        (0, refused) => anyhow::bail!(
            "{refused} records refused: their id names an agent conversation's episode (see above)"
        ),
        (skipped, refused) => anyhow::bail!(
            "{skipped} invalid records skipped and {refused} refused: their id names an agent \
             conversation's episode (see above)"
        ),
    }
    Ok(())
}

fn show(record: &IncidentRecord, line: usize) {
    say!(
        "\n── line {line}: {} ({} / {})",
        record.id,
        record.org,
        record.team
    );
    if let Some(title) = &record.title {
        say!("   title:       {title}");
    }
    say!("   issue type:  {}", record.issue_type);
    say!(
        "   root cause:  {}",
        record.root_cause.as_deref().unwrap_or("(none)")
    );
    say!(
        "   resolved:    {} ({})",
        record.resolved,
        record.root_cause_confidence.as_deref().unwrap_or("-")
    );
    say!("   summary:     {}", record.summary);
}
