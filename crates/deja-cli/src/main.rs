//! `deja`: one binary, one subcommand per job. It parses arguments, loads settings, sets up
//! telemetry and hands over to the crates that do the work.

mod commands;
mod shutdown;
mod table;
mod terminal;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "deja",
    version,
    about = "Episodic incident memory for on-call AI agents"
)]
struct Cli {
    /// Settings file (default: ./deja.toml when present). DEJA__SECTION__KEY variables override it.
    #[arg(long, global = true, env = "DEJA_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Apply the Cypher schema migrations in cypher/schema (idempotent).
    Migrate,
    /// Run the extractor worker (and the strategy synthesizer) until SIGTERM/SIGINT.
    Worker(commands::worker::WorkerArgs),
    /// Publish turn events from a JSON-lines file, with publisher confirms.
    Publish(commands::publish::PublishArgs),
    /// Re-extract failed episodes from their stored turn input.
    Retry(commands::retry::RetryArgs),
    /// Re-embed every episode whose embedding is missing or from another model, or with --all
    /// every episode (resumable).
    Reembed(commands::reembed::ReembedArgs),
    /// List episodes for review (e.g. failed extractions).
    List(commands::list::ListArgs),
    /// Import reviewed incident records as episodes (asks before each unless --yes).
    Import(commands::import::ImportArgs),
    /// Measure retrieval and extraction quality on a labelled corpus (docs/EVALUATION.md).
    Eval(commands::eval::EvalArgs),
    /// Serve memory-search over HTTP (and MCP at /mcp) until SIGTERM/SIGINT.
    Serve(commands::serve::ServeArgs),
    /// Serve memory-search as an MCP server over stdio.
    Mcp(commands::mcp::McpArgs),
    /// Search past episodes (the same code path as the HTTP and MCP skill).
    Search(commands::search::SearchArgs),
    /// Show one episode in full.
    Get(commands::search::GetArgs),
    /// Recent episodes about a signal's entities: the related-history digest (off unless
    /// digest.enabled).
    Digest(commands::digest::DigestArgs),
    /// Review episodes: list, show, edit, mark wrong, clear a verdict, confirm, delete.
    #[command(subcommand)]
    Episode(commands::episode::EpisodeCommand),
    /// Review strategies: list, show, edit, accept a proposal.
    #[command(subcommand)]
    Strategy(commands::strategy::StrategyCommand),
    /// An org's issue types and component names: list, merge two spellings.
    #[command(subcommand)]
    Vocab(commands::vocab::VocabCommand),
    /// Inspect and replay the dead-letter queue: list, show, replay.
    #[command(subcommand)]
    Dlq(commands::dlq::DlqCommand),
}

impl Command {
    /// Whether the command was asked for the API's JSON envelope (`--json`).
    fn prints_envelope(&self) -> bool {
        match self {
            Command::Search(args) => args.json,
            Command::Get(args) => args.json,
            Command::Digest(args) => args.json,
            Command::Episode(command) => command.json(),
            _ => false,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: could not start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // One line, each cause once: many errors repeat their source in their message.
            let error: &(dyn std::error::Error + 'static) = error.as_ref();
            eprintln!("error: {}", deja_domain::error_chain(error));
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let settings = match deja_config::Settings::load(cli.config.as_deref()) {
        Ok(settings) => settings,
        // A command whose `--json` promises one envelope on stdout keeps it for a
        // configuration it cannot load too (`internal`; the cause goes to stderr).
        Err(error) if cli.command.prints_envelope() => {
            eprintln!("error: {error}");
            return commands::print_envelope::<()>(Err(deja_api::SearchError::Internal(Box::new(
                error,
            ))));
        }
        Err(error) => return Err(error.into()),
    };
    let mut log = settings.log.clone();
    let long_running = matches!(
        cli.command,
        Command::Worker(_) | Command::Serve(_) | Command::Mcp(_)
    );
    if !long_running && log.filter == deja_config::Settings::defaults().log.filter {
        // Interactive commands print their results; library chatter would bury them.
        log.filter = "warn".to_owned();
    }
    deja_telemetry::init_logging(&log);
    let neo4j = settings.neo4j.uri.clone();
    let result = dispatch(cli.command, &settings).await;
    // A store that does not answer says which address was tried (the pool connects lazily,
    // so the first query fails, not the connection), and where that address is set.
    result.map_err(|error| {
        let unreachable = error
            .chain()
            .filter_map(|cause| cause.downcast_ref::<deja_graph::GraphError>())
            .any(deja_graph::GraphError::is_transient);
        if unreachable {
            error.context(format!(
                "no answer from neo4j at {neo4j} (neo4j.uri, DEJA__NEO4J__URI; \
                 `deploy/services.sh up` starts the bundled one)"
            ))
        } else {
            error
        }
    })
}

async fn dispatch(command: Command, settings: &deja_config::Settings) -> anyhow::Result<()> {
    match command {
        Command::Migrate => commands::migrate::run(settings).await,
        Command::Worker(args) => commands::worker::run(settings, args).await,
        Command::Publish(args) => commands::publish::run(settings, args).await,
        Command::Retry(args) => commands::retry::run(settings, args).await,
        Command::Reembed(args) => commands::reembed::run(settings, args).await,
        Command::List(args) => commands::list::run(settings, args).await,
        Command::Import(args) => commands::import::run(settings, args).await,
        Command::Eval(args) => commands::eval::run(settings, args).await,
        Command::Serve(args) => commands::serve::run(settings, args).await,
        Command::Mcp(args) => commands::mcp::run(settings, args).await,
        Command::Search(args) => commands::search::run(settings, args).await,
        Command::Get(args) => commands::search::get(settings, args).await,
        Command::Digest(args) => commands::digest::run(settings, args).await,
        Command::Strategy(command) => commands::strategy::run(settings, command).await,
        Command::Episode(command) => commands::episode::run(settings, command).await,
        Command::Vocab(command) => commands::vocab::run(settings, command).await,
        Command::Dlq(command) => commands::dlq::run(settings, command).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blank_org_is_refused_where_the_store_would_read_every_org() {
        for args in [
            &["deja", "reembed", "--org", ""][..],
            &["deja", "retry", "--all-failed", "--org", " "],
            &["deja", "vocab", "list", "--org", ""],
            &["deja", "list", "--org", ""],
            &["deja", "episode", "list", "--org", " "],
            &["deja", "episode", "show", "ep_x", "--org", ""],
            &["deja", "strategy", "list", "--org", ""],
            &[
                "deja",
                "strategy",
                "show",
                "--org",
                "",
                "--issue-type",
                "x",
                "--component",
                "a:b",
            ],
        ] {
            let error = Cli::try_parse_from(args).err().expect("refused");
            assert!(error.to_string().contains("must name an org"), "{error}");
        }
        assert!(Cli::try_parse_from(["deja", "reembed", "--org", "acme"]).is_ok());
    }
}
