use anyhow::Context;
use deja_config::Settings;
use deja_domain::EpisodeKey;
use deja_worker::jobs::{keys_to_retry, RetryError, RetryTarget};
use deja_worker::Outcome;

#[derive(clap::Args)]
pub struct RetryArgs {
    /// An episode id (ep_...) or a correlation id (then --org is required). With --org, an
    /// ep_... that is no episode id is taken for a correlation id.
    target: Option<String>,
    #[arg(long, value_parser = super::org_name)]
    org: Option<String>,
    /// Retry every failed extraction (of --org, or of every org).
    #[arg(long, conflicts_with = "target")]
    all_failed: bool,
    /// Failed conversations read at first by --all-failed (then twice as many while a read
    /// comes back full): every one is retried whatever this is. For tests.
    #[arg(long, default_value_t = 10_000, hide = true)]
    page_size: usize,
    /// Who retried, in each episode's review history (default: $USER, else "cli").
    #[arg(long)]
    by: Option<String>,
}

pub async fn run(settings: &Settings, args: RetryArgs) -> anyhow::Result<()> {
    let org = args.org.as_deref();
    let target = match (&args.target, args.all_failed) {
        (_, true) => RetryTarget::AllFailed {
            org,
            page: args.page_size,
        },
        (Some(target), false) if target.starts_with("ep_") => RetryTarget::Episode {
            id: target.as_str(),
            org,
        },
        (Some(target), false) => {
            let org = org.context("--org is required with a correlation id")?;
            RetryTarget::Conversation(EpisodeKey::new(org, target.clone()))
        }
        (None, false) => {
            anyhow::bail!("name an episode id or correlation id, or pass --all-failed")
        }
    };
    let store = super::connect_store(settings).await?;
    let keys = match (keys_to_retry(&store, target).await, &args.target, org) {
        (Err(RetryError::NoEpisode(_)), Some(id), Some(org)) => {
            vec![EpisodeKey::new(org, id.clone())]
        }
        (keys, _, _) => keys?,
    };
    if keys.is_empty() {
        println!("nothing to retry");
        return Ok(());
    }
    // A named conversation without a stored turn is a mistyped id or org, or not one of
    // deja's: said before the models load, not reported as a retry that failed.
    if !args.all_failed {
        for key in &keys {
            if store.get_turn_input(key).await?.is_none() {
                anyhow::bail!(
                    "no conversation `{}` with a stored turn in org `{}`: check the id (an ep_... \
                     episode id, or a correlation id with --org) and the org",
                    key.correlation_id,
                    key.org
                );
            }
        }
    }
    if args.all_failed {
        eprintln!("retrying {} failed conversation(s)", keys.len());
    }
    let by = super::reviewer_name(args.by.clone());
    let summary =
        deja_worker::jobs::retry(settings, store, &keys, &by, |key, outcome| match outcome {
            Outcome::Stored {
                episode_id, status, ..
            } => println!("{episode_id}\t{}\t{}", key.correlation_id, status.as_str()),
            other => println!("{}\tnot retried: {other}", key.correlation_id),
        })
        .await?;
    println!(
        "retried {}, still failing {}",
        summary.retried, summary.still_failing
    );
    // A script (or a person chaining commands) must not read "still failing" as done.
    if summary.still_failing > 0 {
        anyhow::bail!("{} conversation(s) still failing", summary.still_failing);
    }
    Ok(())
}
