use crate::shutdown;
use deja_config::Settings;
use deja_worker::{Application, Dependencies};

#[derive(clap::Args)]
pub struct WorkerArgs {
    /// Do not consume strategy-synthesis jobs (run a separate synthesizer elsewhere).
    #[arg(long)]
    no_synthesizer: bool,
}

pub async fn run(settings: &Settings, args: WorkerArgs) -> anyhow::Result<()> {
    let deps = Dependencies::from_settings(settings).await?;
    let mut app = Application::build(settings, deps).await?;
    if args.no_synthesizer {
        app = app.without_synthesizer();
    }
    app.run_until_stopped(shutdown::signal()).await?;
    tracing::info!("worker stopped");
    Ok(())
}
