use crate::shutdown;
use anyhow::Context;
use deja_config::Settings;
use deja_llm::LlmClient;
use deja_worker::{run_worker, Extractor, Synthesizer, WorkerHandles};
use std::sync::Arc;

#[derive(clap::Args)]
pub struct WorkerArgs {
    /// Do not consume strategy-synthesis jobs (run a separate synthesizer elsewhere).
    #[arg(long)]
    no_synthesizer: bool,
}

pub async fn run(settings: &Settings, args: WorkerArgs) -> anyhow::Result<()> {
    let store = super::connect_store(settings).await?;
    let embedder = super::load_embedder(settings)?;
    super::check_dimensions(&store, embedder.as_ref()).await?;
    if !settings.llm.is_configured() {
        anyhow::bail!("no LLM endpoint configured: set llm.base_url (DEJA__LLM__BASE_URL)");
    }
    let llm = Arc::new(LlmClient::new(&settings.llm).context("could not set up the LLM client")?);
    let synthesizer = (!args.no_synthesizer)
        .then(|| Synthesizer::new(store.clone(), llm.clone(), settings.llm.model.clone()));
    // Recurrence linking decides like memory-search: with the cross-encoder when it is on.
    let reranker = if settings.worker.link_recurrences {
        deja_api::load_reranker(settings).await
    } else {
        None
    };
    let extractor = Extractor::new(store, llm, embedder, settings).with_reranker(reranker);
    if !settings.worker.metrics_addr.is_empty() {
        let routes = deja_worker::status_router(extractor.readiness());
        let bound = deja_telemetry::serve_router(&settings.worker.metrics_addr, routes)
            .await
            .with_context(|| {
                format!(
                    "could not serve metrics on {}",
                    settings.worker.metrics_addr
                )
            })?;
        tracing::info!(%bound, "worker metrics on http://{bound}/metrics, readiness on /readyz");
    }
    let handles = WorkerHandles {
        extractor,
        synthesizer,
    };
    run_worker(settings, handles, shutdown::signal()).await?;
    tracing::info!("worker stopped");
    Ok(())
}
