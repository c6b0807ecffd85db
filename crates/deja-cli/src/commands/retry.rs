use anyhow::Context;
use deja_config::Settings;
use deja_domain::EpisodeKey;
use deja_llm::LlmClient;
use deja_worker::{Extractor, Outcome};
use std::sync::Arc;

#[derive(clap::Args)]
pub struct RetryArgs {
    /// An episode id (ep_...) or a correlation id (then --org is required).
    target: Option<String>,
    #[arg(long)]
    org: Option<String>,
    /// Retry every failed extraction (of --org, or of every org).
    #[arg(long, conflicts_with = "target")]
    all_failed: bool,
}

pub async fn run(settings: &Settings, args: RetryArgs) -> anyhow::Result<()> {
    let store = super::connect_store(settings).await?;
    let keys: Vec<EpisodeKey> = match (&args.target, args.all_failed) {
        (_, true) => {
            store
                .keys_needing_retry(args.org.as_deref(), 10_000)
                .await?
        }
        (Some(target), false) if target.starts_with("ep_") => {
            let episode = store
                .get_by_id(args.org.as_deref(), target)
                .await?
                .with_context(|| format!("no episode {target}"))?;
            vec![episode.key()]
        }
        (Some(target), false) => {
            let org = args
                .org
                .clone()
                .context("--org is required with a correlation id")?;
            vec![EpisodeKey::new(org, target.clone())]
        }
        (None, false) => {
            anyhow::bail!("name an episode id or correlation id, or pass --all-failed")
        }
    };
    if keys.is_empty() {
        println!("nothing to retry");
        return Ok(());
    }
    let embedder = super::load_embedder(settings)?;
    let llm = Arc::new(LlmClient::new(&settings.llm).context("could not set up the LLM client")?);
    let extractor = Extractor::new(store, llm, embedder, settings);
    let mut failed = 0;
    for key in &keys {
        match extractor.retry_stored(key).await? {
            Outcome::Stored {
                episode_id, status, ..
            } => {
                println!("{episode_id}\t{}\t{}", key.correlation_id, status.as_str());
                if status != deja_domain::ExtractionStatus::Ok {
                    failed += 1;
                }
            }
            other => {
                println!("{}\tnot retried: {other:?}", key.correlation_id);
                failed += 1;
            }
        }
    }
    println!("retried {}, still failing {failed}", keys.len());
    Ok(())
}
