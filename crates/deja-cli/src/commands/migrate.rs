use deja_config::Settings;

pub async fn run(settings: &Settings) -> anyhow::Result<()> {
    let store = super::connect_store(settings).await?;
    let report = store.migrate().await?;
    for name in &report.applied {
        println!("applied {name}");
    }
    // A migration this server does not take is applied by the first migrate after the
    // server is upgraded; said once per run.
    for (name, lacking) in &report.skipped {
        eprintln!(
            "note: skipped {name}: Neo4j {} lacks {lacking}; the first `deja migrate` after \
             the server is upgraded applies it",
            report.server
        );
    }
    if let Some(newest) = report.newer.last() {
        let known = deja_graph::MIGRATIONS.last().map_or(0, |m| m.version);
        eprintln!(
            "warning: the schema is newer than this binary: migration {newest} is recorded, \
             this binary knows up to {known}. A newer `deja` migrated it; run that version \
             everywhere (this one may use what a newer migration removed)"
        );
    }
    println!(
        "schema up to date: {} applied now, {} already applied",
        report.applied.len(),
        report.already
    );
    if !report.populating.is_empty() {
        eprintln!(
            "warning: indexes still populating after 5 minutes: {}. The schema is migrated \
             and recorded, so this is not a failure: they come online by themselves; until \
             then a search that uses one waits for it and may miss its deadline (`SHOW \
             INDEXES` shows their progress; `deja migrate` again waits for them)",
            report.populating.join(", ")
        );
    }
    Ok(())
}
