//! `deja eval`: measuring memory quality on a labelled corpus (docs/EVALUATION.md).
//!
//! - `retrieval`: imports labelled incidents into a fresh org and scores the production
//!   search path on the queries, with ranking variants side by side.
//! - `extraction`: replays conversations through the real pipeline (RabbitMQ → worker →
//!   LLM → Neo4j) and scores the extracted episodes against the gold incidents, then the
//!   queries against those episodes (end-to-end recall).
//!
//! Every run writes into its own `eval-...` org and nothing else: it never reads or changes
//! real tenants, and it leaves its episodes behind for inspection in the Browser.

mod corpus;
mod extraction;
mod extraction_score;
mod judge;
mod metrics;
mod replay;
mod report;
mod retrieval;
mod search;
mod variants;

use deja_config::Settings;

#[derive(clap::Args)]
pub struct EvalArgs {
    #[command(subcommand)]
    command: EvalCommand,
}

#[derive(clap::Subcommand)]
enum EvalCommand {
    /// Score memory search on labelled incidents and queries; compare ranking variants.
    Retrieval(retrieval::RetrievalArgs),
    /// Replay conversations through worker and LLM; score the episodes against gold fields.
    Extraction(extraction::ExtractionArgs),
}

pub async fn run(settings: &Settings, args: EvalArgs) -> anyhow::Result<()> {
    match args.command {
        EvalCommand::Retrieval(args) => retrieval::run(settings, args).await,
        EvalCommand::Extraction(args) => extraction::run(settings, args).await,
    }
}
