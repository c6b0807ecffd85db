use deja_config::Settings;
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

pub async fn run(settings: &Settings, args: ReembedArgs) -> anyhow::Result<()> {
    let store = super::connect_store(settings).await?;
    let embedder = super::load_embedder(settings)?;
    let model_id = embedder.model_id().to_owned();
    let done =
        deja_worker::jobs::reembed(&store, &embedder, args.org.as_deref(), args.batch, |done| {
            eprint!("\rre-embedded {done} episodes with {model_id}");
            let _ = std::io::stderr().flush();
        })
        .await?;
    eprintln!();
    println!("re-embedded {done} episodes with {model_id}");
    Ok(())
}
