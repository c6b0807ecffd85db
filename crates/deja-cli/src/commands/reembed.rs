use deja_config::Settings;
use deja_worker::jobs::ReembedError;
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
    let result = deja_worker::jobs::reembed(
        &store,
        &embedder,
        args.org.as_deref(),
        target,
        args.batch,
        report,
    )
    .await;
    spinner.finish_and_clear();
    if spinner.is_hidden() {
        eprintln!();
    }
    // Episodes written concurrently on every attempt keep their older vector: said, the token
    // vectors still refreshed, and the command then exits non-zero.
    let (done, left) = match result {
        Ok(done) => (done, Vec::new()),
        Err(ReembedError::Unfinished { reembedded, left }) => (reembedded, left),
        Err(error) => return Err(error.into()),
    };
    println!("re-embedded {done} episodes with {model_id}");
    let unfinished = (!left.is_empty()).then(|| {
        let again = format!(
            "deja reembed{}{}",
            args.org
                .as_deref()
                .map(|org| format!(" --org {org}"))
                .unwrap_or_default(),
            if args.all { " --all" } else { "" }
        );
        const SHOWN: usize = 20;
        let more = left.len().saturating_sub(SHOWN);
        let mut ids = left
            .iter()
            .take(SHOWN)
            .cloned()
            .collect::<Vec<_>>()
            .join(" ");
        if more > 0 {
            ids.push_str(&format!(" (and {more} more)"));
        }
        println!(
            "not re-embedded {} episodes: written concurrently on every attempt",
            left.len()
        );
        format!(
            "{} episode(s) changed during every attempt and keep their older vector: {ids}; \
             run `{again}` again",
            left.len()
        )
    });
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
             token vectors were not refreshed{}",
            unfinished.map(|u| format!("; and {u}")).unwrap_or_default()
        );
    }
    match unfinished {
        Some(message) => Err(anyhow::anyhow!(message)),
        None => Ok(()),
    }
}
