use deja_api::{serve_mcp_stdio, Dependencies, Principal};
use deja_config::Settings;

#[derive(clap::Args)]
pub struct McpArgs {
    /// The org this local agent may read.
    #[arg(long, value_parser = super::org_name)]
    org: String,
    /// Restrict the session to one team (default: the whole org).
    #[arg(long)]
    team: Option<String>,
}

/// An MCP server over stdio: the agent that spawned this process is trusted locally and
/// scoped by the flags. Logs go to stderr so they never corrupt the protocol on stdout.
pub async fn run(settings: &Settings, args: McpArgs) -> anyhow::Result<()> {
    let service = Dependencies::from_settings(settings)
        .await?
        .service(settings);
    let digest = std::sync::Arc::new(settings.digest.clone());
    serve_mcp_stdio(service, digest, Principal::local(args.org, args.team)).await?;
    Ok(())
}
