use deja_config::Settings;
use deja_embed::embed_blocking;
use std::io::Write;

#[derive(clap::Args)]
pub struct ReembedArgs {
    /// Episodes embedded per batch.
    #[arg(long, default_value_t = 64)]
    batch: usize,
    /// Only this org (default: every org).
    #[arg(long)]
    org: Option<String>,
}

/// Walks episodes in id order, so an interrupted run resumes where it stopped: already
/// re-embedded episodes carry the current model id and are not selected again.
pub async fn run(settings: &Settings, args: ReembedArgs) -> anyhow::Result<()> {
    let store = super::connect_store(settings).await?;
    let embedder = super::load_embedder(settings)?;
    super::check_dimensions(&store, embedder.as_ref()).await?;
    let model_id = embedder.model_id().to_owned();
    let mut done = 0usize;
    // An episode written concurrently keeps its old vector and is picked up by the next
    // pass; passes are bounded so a hot episode cannot keep the command running forever.
    for _pass in 0..3 {
        let (mut after, mut conflicts) = (None::<String>, 0usize);
        loop {
            let batch = store
                .episodes_for_reembed(
                    args.org.as_deref(),
                    &model_id,
                    after.as_deref(),
                    args.batch.max(1),
                )
                .await?;
            let Some(last) = batch.last() else { break };
            after = Some(last.id.clone());
            let texts: Vec<String> = batch.iter().map(|item| item.text.clone()).collect();
            let vectors = embed_blocking(embedder.clone(), texts).await?;
            for (item, vector) in batch.iter().zip(vectors) {
                if store
                    .set_embedding(&item.id, item.version, &vector, &model_id)
                    .await?
                {
                    done += 1;
                } else {
                    conflicts += 1;
                }
            }
            eprint!("\rre-embedded {done} episodes with {model_id}");
            let _ = std::io::stderr().flush();
        }
        if conflicts == 0 {
            break;
        }
    }
    eprintln!();
    println!("re-embedded {done} episodes with {model_id}");
    Ok(())
}
