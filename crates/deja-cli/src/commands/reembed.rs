use deja_config::Settings;
use indicatif::ProgressBar;
use std::io::Write;
use std::time::Duration;

#[derive(clap::Args)]
pub struct ReembedArgs {
    /// Episodes embedded per batch.
    #[arg(long, default_value_t = 64)]
    batch: usize,
    /// Only this org (default: every org).
    #[arg(long, value_parser = super::org_name)]
    org: Option<String>,
    /// Every episode, not only those without a vector of the current model: after an upgrade
    /// that changed what is embedded (docs/SCALING.md, "Upgrading a running deployment").
    #[arg(long)]
    all: bool,
}

pub async fn run(settings: &Settings, args: ReembedArgs) -> anyhow::Result<()> {
    let store = super::connect_store(settings).await?;
    let embedder = super::load_embedder(settings)?;
    let model_id = embedder.model_id().to_owned();
    // A spinner on a terminal (how many episodes need it is not known up front); elsewhere
    // it hides itself and the count is rewritten on one line, as before.
    let spinner = ProgressBar::new_spinner();
    spinner.enable_steady_tick(Duration::from_millis(120));
    spinner.set_message(format!("re-embedding with {model_id}"));
    let report = |done: usize| {
        if spinner.is_hidden() {
            eprint!("\rre-embedded {done} episodes with {model_id}");
            let _ = std::io::stderr().flush();
        } else {
            spinner.set_message(format!("re-embedded {done} episodes with {model_id}"));
        }
    };
    let target = if args.all {
        deja_worker::jobs::ReembedTarget::Every
    } else {
        deja_worker::jobs::ReembedTarget::Stale
    };
    let done = deja_worker::jobs::reembed(
        &store,
        &embedder,
        args.org.as_deref(),
        target,
        args.batch,
        report,
    )
    .await?;
    spinner.finish_and_clear();
    if spinner.is_hidden() {
        eprintln!();
    }
    println!("re-embedded {done} episodes with {model_id}");
    if let Some(encoder) = deja_api::load_late_encoder(settings).await {
        let late_id = encoder.model_id().to_owned();
        let report = |done: usize| eprint!("\rstored token vectors of {done} episodes");
        let done = deja_worker::jobs::retokenize(
            &store,
            &encoder,
            &embedder,
            args.org.as_deref(),
            args.batch,
            report,
        )
        .await?;
        if done > 0 {
            eprintln!();
        }
        println!("stored token vectors of {done} episodes with {late_id}");
    } else if settings.late_interaction.enabled {
        anyhow::bail!(
            "late_interaction.enabled is on but its model did not load (see the log): \
             token vectors were not refreshed"
        );
    }
    Ok(())
}
