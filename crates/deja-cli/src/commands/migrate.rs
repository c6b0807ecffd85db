use deja_config::Settings;

pub async fn run(settings: &Settings) -> anyhow::Result<()> {
    let store = super::connect_store(settings).await?;
    let report = store.migrate().await?;
    for name in &report.applied {
        println!("applied {name}");
    }
    println!(
        "schema up to date: {} applied now, {} already applied",
        report.applied.len(),
        report.already
    );
    Ok(())
}
