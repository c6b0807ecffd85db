//! `deja eval`: measuring memory quality on a labelled corpus (docs/EVALUATION.md). The
//! measuring is `deja-eval`'s; this parses the flags and prints the report.

use deja_config::Settings;
use deja_eval::extraction::ExtractionOptions;
use deja_eval::retrieval::RetrievalOptions;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct EvalArgs {
    #[command(subcommand)]
    command: EvalCommand,
}

#[derive(clap::Subcommand)]
enum EvalCommand {
    /// Score memory search on labelled incidents and queries; compare ranking variants.
    Retrieval(RetrievalArgs),
    /// Replay conversations through worker and LLM; score the episodes against gold fields.
    Extraction(ExtractionArgs),
}

#[derive(clap::Args)]
struct RetrievalArgs {
    /// Labelled incident records (the `deja import` format plus `cluster`). Repeatable: the
    /// files are one memory, in order (a held-out fold beside the dev corpus).
    #[arg(long, required = true)]
    incidents: Vec<PathBuf>,
    /// Queries: `{id, team, query, relevant}` per line.
    #[arg(long)]
    queries: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Cross-validation folds over root-cause families (at least 2).
    #[arg(long, default_value_t = 5)]
    folds: usize,
    /// `INCIDENTS:QUERIES`: the first lines of each file that form fold 0 of their own when
    /// the corpus is larger (`30:38`: the original dev set of tests/fixtures/eval/). Off
    /// (`0:0`) by default: in another corpus the first lines are no set of their own.
    #[arg(long, default_value = "0:0", value_parser = parse_base_fold)]
    base_fold: (usize, usize),
    /// Also write every query's candidates with their evidence and label, one JSON line
    /// per query, for offline analysis of the decision.
    #[arg(long)]
    dump_candidates: Option<PathBuf>,
    /// Repeat the cross-validation with the families shuffled over the folds this many times
    /// (seeded, reproducible) and report each cross-validated variant's mean ± spread over
    /// the repeats: one split of 22 families is too few to choose by. 0 = off.
    #[arg(long, default_value_t = 10)]
    repeats: usize,
    /// The episodes a model extracted from these incidents' conversations, as records
    /// (`deja eval extraction --records`): the same queries also search that memory, the
    /// decision is fitted on both memories and scored on each.
    #[arg(long)]
    extracted: Option<PathBuf>,
}

fn parse_base_fold(text: &str) -> Result<(usize, usize), String> {
    let (incidents, queries) = text
        .split_once(':')
        .ok_or_else(|| "expected INCIDENTS:QUERIES, e.g. 30:38".to_owned())?;
    let number = |s: &str| s.trim().parse::<usize>().map_err(|e| format!("`{s}`: {e}"));
    Ok((number(incidents)?, number(queries)?))
}

#[derive(clap::Args)]
struct ExtractionArgs {
    /// Conversations in the neutral transcript format.
    #[arg(long)]
    transcripts: PathBuf,
    /// The gold incidents the conversations are about.
    #[arg(long)]
    incidents: PathBuf,
    /// Queries for end-to-end recall (default: queries.jsonl beside the incidents file).
    #[arg(long)]
    queries: Option<PathBuf>,
    /// Replay only these incidents' conversations (comma-separated ids).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Replay at most this many conversations (oldest first).
    #[arg(long)]
    limit: Option<usize>,
    /// Do not start a worker in-process: publish to the configured exchange and let a
    /// separately running `deja worker` extract.
    #[arg(long)]
    external_worker: bool,
    /// Give up on a turn that is not merged after this many seconds.
    #[arg(long, default_value_t = 300)]
    turn_timeout_secs: u64,
    /// Conversations replayed at once (each still turn by turn). Match it to the LLM
    /// server's parallel slots (`DEJA_LLM_PARALLEL` of deploy/llm.sh): a local model batches
    /// concurrent requests, which raises its throughput on CPU.
    #[arg(long, default_value_t = 1)]
    parallel: usize,
    /// Start no new conversation after this many minutes; the report covers the
    /// conversations replayed by then (and says how many were skipped).
    #[arg(long)]
    max_minutes: Option<u64>,
    /// Continue an earlier run from its `--json` report (same store, same model): replay
    /// only the conversations it did not score, into its namespace, and report over both.
    /// Long runs can be split with `--max-minutes` and continued this way.
    #[arg(long)]
    resume: Option<PathBuf>,
    /// Also write every scored conversation's episode as a labelled incident record (the
    /// import format plus the gold `cluster`): the memory this model wrote, which
    /// `deja eval retrieval --extracted` calibrates the decision on beside the curated records.
    #[arg(long)]
    records: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

pub async fn run(settings: &Settings, args: EvalArgs) -> anyhow::Result<()> {
    match args.command {
        EvalCommand::Retrieval(args) => {
            let options = RetrievalOptions {
                incidents: args.incidents,
                queries: args.queries,
                folds: args.folds,
                base_fold: args.base_fold,
                dump_candidates: args.dump_candidates,
                repeats: args.repeats,
                extracted: args.extracted,
            };
            let report = deja_eval::retrieval::run(settings, options).await?;
            print_report(&report, args.json, deja_eval::retrieval::print)
        }
        EvalCommand::Extraction(args) => {
            let options = ExtractionOptions {
                transcripts: args.transcripts,
                incidents: args.incidents,
                queries: args.queries,
                only: args.only,
                limit: args.limit,
                external_worker: args.external_worker,
                turn_timeout_secs: args.turn_timeout_secs,
                parallel: args.parallel,
                max_minutes: args.max_minutes,
                resume: args.resume,
                records: args.records,
            };
            let report = deja_eval::extraction::run(
                settings,
                options,
                crate::shutdown::signal(),
                // Polled only after the first: the second SIGINT or SIGTERM.
                crate::shutdown::signal(),
            )
            .await?;
            print_report(&report, args.json, deja_eval::extraction::print)
        }
    }
}

/// `--json` prints the report as it is, otherwise its text form.
fn print_report<R: serde::Serialize>(report: &R, json: bool, text: fn(&R)) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else {
        text(report);
    }
    Ok(())
}
