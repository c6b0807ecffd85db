use crate::shutdown;
use deja_api::{Application, Dependencies};
use deja_config::Settings;

#[derive(clap::Args)]
pub struct ServeArgs {
    /// Serve without API tokens (loopback only; refused on any other address).
    #[arg(long)]
    dev: bool,
    /// Listen address, overriding api.bind.
    #[arg(long)]
    bind: Option<String>,
}

pub async fn run(settings: &Settings, args: ServeArgs) -> anyhow::Result<()> {
    let mut settings = settings.clone();
    settings.api.dev |= args.dev;
    if let Some(bind) = args.bind {
        settings.api.bind = bind;
    }
    let deps = Dependencies::from_settings(&settings).await?;
    let app = Application::build(&settings, deps).await?;
    let address = app.address();
    println!("deja api on http://{address} (search: POST /v1/memory/search, MCP: /mcp, metrics: /metrics)");
    if settings.api.dev {
        if settings.api.tokens.is_empty() {
            println!("dev mode: no authentication, loopback only");
        } else {
            println!("dev mode: loopback only; the configured tokens are still required");
        }
    }
    app.run_until_stopped(shutdown::signal()).await?;
    Ok(())
}
