use anyhow::Context;
use deja_bus::{Bus, PublishMeta};
use deja_config::Settings;
use deja_domain::TurnEvent;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct PublishArgs {
    /// A JSON-lines file, one turn event per line (see schema/turn-event.v1.json).
    file: PathBuf,
    /// Publish lines as they are, even invalid ones (to exercise the dead-letter path).
    #[arg(long)]
    raw: bool,
}

pub async fn run(settings: &Settings, args: PublishArgs) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("could not read {}", args.file.display()))?;
    let bus = Bus::connect_named(&settings.rabbitmq, "deja-publish").await?;
    bus.declare_topology().await?;
    let (mut published, mut skipped) = (0usize, 0usize);
    for (number, line) in text.lines().enumerate().map(|(i, l)| (i + 1, l)) {
        if line.trim().is_empty() {
            continue;
        }
        let meta = match TurnEvent::parse(line.as_bytes(), settings.worker.max_event_bytes) {
            Ok(event) => PublishMeta::turn(&event.org, &event.team)
                .with_message_id(&event.event_id)
                .with_correlation_id(&event.correlation_id),
            Err(error) if !args.raw => {
                eprintln!("{}:{number}: skipped: {error}", args.file.display());
                skipped += 1;
                continue;
            }
            Err(_) => PublishMeta::turn("unknown", "unknown"),
        };
        bus.publish_turn(line.as_bytes(), &meta)
            .await
            .with_context(|| format!("publishing line {number}"))?;
        published += 1;
    }
    let _ = bus.close().await;
    println!(
        "published {published} events to exchange {} (confirmed), skipped {skipped}",
        settings.rabbitmq.exchange
    );
    if skipped > 0 {
        anyhow::bail!("{skipped} invalid lines were not published");
    }
    Ok(())
}
