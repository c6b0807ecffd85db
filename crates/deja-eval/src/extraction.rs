//! `deja eval extraction`: replays labelled conversations through the real pipeline
//! (publish → worker → LLM → Neo4j) into a fresh org, scores the extracted episodes against
//! the gold incidents, then runs the queries against them (end-to-end recall). To compare
//! models and prompts; not in CI (a real LLM takes minutes per conversation on a laptop).

use super::corpus::{self, EvalQuery, Incidents};
use super::extraction_score::{self as score, mean, share};
use super::replay::{self, Replayed, Transcript};
use super::report::{self, number, Headline};
use super::scoring::{score_conversations, ConversationScore};
use super::search;
use crate::services::{check_dimensions, connect_store, load_embedder};
use crate::EvalError;
use deja_bus::Bus;
use deja_config::Settings;
use deja_domain::import::IncidentRecord;
use deja_worker::{Application, Dependencies};
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What `deja eval extraction` replays, and how.
pub struct ExtractionOptions {
    /// Conversations in the neutral transcript format.
    pub transcripts: PathBuf,
    /// The gold incidents the conversations are about.
    pub incidents: PathBuf,
    /// Queries for end-to-end recall (`None`: queries.jsonl beside the incidents file).
    pub queries: Option<PathBuf>,
    /// Replay only these incidents' conversations (empty: all).
    pub only: Vec<String>,
    /// Replay at most this many conversations (oldest first).
    pub limit: Option<usize>,
    /// Start no worker in-process: publish to the configured exchange and let a separately
    /// running `deja worker` extract.
    pub external_worker: bool,
    /// Give up on a turn that is not merged after this many seconds.
    pub turn_timeout_secs: u64,
    /// Conversations replayed at once (each still turn by turn).
    pub parallel: usize,
    /// Start no new conversation after this many minutes.
    pub max_minutes: Option<u64>,
    /// The report of an earlier run (`--json`) to continue: its namespace is reused, its
    /// conversations are not replayed again, and the report covers both.
    pub resume: Option<PathBuf>,
    /// Also write every scored conversation's episode as a labelled incident record (the
    /// import format plus the gold `cluster`): the memory this model wrote, for
    /// `deja eval retrieval --extracted`.
    pub records: Option<PathBuf>,
}

/// Replays the conversations into a fresh namespace and scores what the worker made of
/// them. `interrupted` (Ctrl-C) starts no more conversation: the ones in flight finish and
/// what was replayed is scored and reported, as at the `--max-minutes` deadline (hours of LLM
/// time are not thrown away, and `--resume` goes on from the report); `interrupted_again`
/// (the next signal, polled only after the first) stops at once, without a report. The
/// in-process worker is stopped and its queues deleted either way.
pub async fn run(
    settings: &Settings,
    args: ExtractionOptions,
    interrupted: impl Future<Output = ()>,
    interrupted_again: impl Future<Output = ()>,
) -> Result<ExtractionReport, EvalError> {
    let incidents = Incidents::load(&args.incidents)?;
    let mut transcripts = replay::load(&args.transcripts)?;
    if let Some(t) = transcripts
        .iter()
        .find(|t| incidents.get(&t.incident_id).is_none())
    {
        return Err(EvalError::Input(format!(
            "transcript {} names an unknown incident",
            t.correlation_id
        )));
    }
    if !args.only.is_empty() {
        transcripts.retain(|t| args.only.contains(&t.incident_id));
    }
    let earlier = match &args.resume {
        Some(path) => Some(EarlierRun::load(path, &settings.llm.model)?),
        None => None,
    };
    let (scored, mut transcripts): (Vec<Transcript>, Vec<Transcript>) = transcripts
        .into_iter()
        .partition(|t| earlier.as_ref().is_some_and(|e| e.scored(&t.incident_id)));
    transcripts.truncate(args.limit.unwrap_or(usize::MAX));
    if transcripts.is_empty() && earlier.is_none() {
        return Err(EvalError::Input("no conversation to replay".to_owned()));
    }
    let total_conversations = transcripts.len();
    let queries_path = args.queries.clone().or_else(|| {
        let beside = args.incidents.with_file_name("queries.jsonl");
        beside.exists().then_some(beside)
    });
    let queries = match &queries_path {
        Some(path) => Some(corpus::load_queries(path, &incidents)?),
        None => None,
    };

    let org = earlier
        .as_ref()
        .map_or_else(|| corpus::namespace("extraction"), |e| e.namespace.clone());
    let mut settings = settings.clone();
    if !args.external_worker {
        // Queues of its own: the in-process worker must not take anyone else's turns, nor
        // the port of a `deja worker` running beside it.
        settings.rabbitmq.name_prefix = format!("deja.{org}");
        settings.rabbitmq.exchange = format!("deja.{org}.turns");
        settings.worker.concurrency = settings.worker.concurrency.max(args.parallel);
        settings.worker.metrics_addr = String::new();
    }
    let store = connect_store(&settings).await?;
    if let Some(earlier) = &earlier {
        earlier.check_stored(&store, &scored).await?;
    }
    let embedder = load_embedder(&settings)?;
    // As `deja worker` and `deja serve` load them: the worker stores token vectors with the
    // one, end-to-end recall searches with both.
    let late = deja_api::load_late_encoder(&settings).await;
    let reranker = deja_api::load_reranker(&settings).await;
    let bus = Bus::connect_named(&settings.rabbitmq, "deja-eval").await?;
    bus.declare_topology().await?;
    let worker = if args.external_worker {
        check_dimensions(&store, embedder.as_ref()).await?;
        None
    } else {
        // Started as `deja worker` starts it (its startup checks included), without the
        // strategy synthesizer: strategies are not what this command scores.
        let deps = Dependencies {
            store: store.clone(),
            embedder: embedder.clone(),
            reranker: None,
            late: late.clone(),
        };
        let app = Application::build(&settings, deps)
            .await?
            .without_synthesizer();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(app.run_until_stopped(async {
            let _ = stopped.await;
        }));
        Some((stop, task))
    };
    if let Some(earlier) = &earlier {
        eprintln!(
            "resuming {org}: {} conversations scored by the earlier run(s) are not replayed",
            earlier.conversations.len()
        );
    }
    eprintln!(
        "replaying {} conversations into {org}, {} at once ({} worker, LLM {} at {})",
        transcripts.len(),
        args.parallel.max(1),
        if worker.is_some() {
            "in-process"
        } else {
            "external"
        },
        settings.llm.model,
        settings.llm.base_url
    );

    let timeout = Duration::from_secs(args.turn_timeout_secs);
    let start_by = args
        .max_minutes
        .map(|minutes| Instant::now() + Duration::from_secs(minutes * 60));
    let replay_started = Instant::now();
    let stopped = std::sync::atomic::AtomicBool::new(false);
    let plan = ReplayPlan {
        turn_timeout: timeout,
        parallel: args.parallel,
        start_by,
        stopped: &stopped,
    };
    let replayed = {
        let replay = replay_all(&bus, &store, &org, &transcripts, &plan);
        tokio::pin!(replay);
        tokio::select! {
        result = &mut replay => result,
        () = interrupted => {
            stopped.store(true, std::sync::atomic::Ordering::Relaxed);
            eprintln!(
                "interrupted: no more conversation starts; the ones in flight finish, then \
                 what was replayed is scored (interrupt again to stop at once, without a \
                 report)"
            );
            tokio::select! {
                result = &mut replay => result,
                () = interrupted_again => Err(EvalError::Interrupted),
            }
        }
        }
    };
    if let Some((stop, task)) = worker {
        let _ = stop.send(());
        match task.await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => eprintln!("warning: the worker stopped with an error: {error}"),
            Err(error) => eprintln!("warning: the worker task failed: {error}"),
        }
        // Another run on the same namespace (a `--resume` started before this one ended)
        // may be consuming them: its turns must not be published into deleted queues. The
        // broker may take a moment to drop the stopped worker's own consumer: asked again
        // a few times before the queues are left in place.
        let mut attempts = 0;
        loop {
            attempts += 1;
            match bus.delete_topology_if_unused().await {
                Ok(true) => break,
                Ok(false) if attempts < 10 => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Ok(false) => {
                    eprintln!(
                        "note: the eval queues are left in place: another process consumes them"
                    );
                    break;
                }
                Err(error) => {
                    eprintln!("warning: could not delete the eval queues: {error}");
                    break;
                }
            }
        }
    }
    // Conversations not started before `--max-minutes` are left out of every figure.
    let (mut transcripts, replayed): (Vec<Transcript>, Vec<Replayed>) = transcripts
        .into_iter()
        .zip(replayed?)
        .filter_map(|(t, r)| Some((t, r?)))
        .unzip();
    let skipped = total_conversations - transcripts.len();
    if transcripts.is_empty() && earlier.is_none() {
        return Err(EvalError::Input(
            "no conversation was replayed before the --max-minutes deadline or Ctrl-C".to_owned(),
        ));
    }

    let mut conversations =
        score_conversations(&embedder, &incidents, &transcripts, &replayed).await?;
    let (earlier_seconds, runs) = match earlier {
        Some(earlier) => {
            conversations.splice(0..0, earlier.conversations);
            (earlier.replay_seconds, earlier.runs + 1)
        }
        None => (0, 1),
    };
    // End-to-end recall is over every scored conversation's episode, earlier runs' included.
    transcripts.extend(scored);
    if let Some(path) = &args.records {
        write_records(path, &store, &org, &incidents, &transcripts).await?;
    }
    let summary = summarise(&conversations);
    let end_to_end = match queries {
        Some(queries) => {
            let incident_of: HashMap<String, String> = transcripts
                .iter()
                .map(|t| (t.correlation_id.clone(), t.incident_id.clone()))
                .collect();
            let queries = replayed_queries(&queries, &transcripts);
            let service = search::service(&store, &embedder, &settings.search)
                .with_reranker(reranker.clone())
                .with_late(late.clone());
            let answers =
                search::production_answers(&service, &org, &queries, &incident_of).await?;
            Some(report::headline(&queries, &incidents, &answers))
        }
        None => None,
    };
    Ok(ExtractionReport {
        namespace: org,
        runs,
        skipped_conversations: skipped,
        replay_seconds: earlier_seconds + replay_started.elapsed().as_secs(),
        parallel: args.parallel.max(1),
        llm_model: settings.llm.model.clone(),
        llm_base_url: settings.llm.base_url.clone(),
        summary,
        conversations,
        end_to_end,
    })
}

/// What `--resume` takes from an earlier run's report (`--json`): where it wrote, what it
/// scored. The scores are kept as they were: a conversation's root-cause baseline and leak
/// check were computed among the conversations of its own run.
#[derive(Deserialize)]
struct EarlierRun {
    namespace: String,
    #[serde(default = "one_run")]
    runs: usize,
    replay_seconds: u64,
    llm_model: String,
    conversations: Vec<ConversationScore>,
}

fn one_run() -> usize {
    1
}

impl EarlierRun {
    /// Reads the report and refuses one made with another model: their figures would not
    /// form one table.
    fn load(path: &Path, model: &str) -> Result<Self, EvalError> {
        let text = std::fs::read_to_string(path).map_err(|source| EvalError::Read {
            path: path.to_owned(),
            source,
        })?;
        let earlier: Self = serde_json::from_str(&text).map_err(|source| EvalError::Line {
            location: path.display().to_string(),
            what: "`deja eval extraction --json` report",
            source,
        })?;
        if earlier.llm_model != model {
            return Err(EvalError::Input(format!(
                "{} was made with the model {}, this run would use {model}: resume with the same model",
                path.display(),
                earlier.llm_model
            )));
        }
        Ok(earlier)
    }

    fn scored(&self, incident: &str) -> bool {
        self.conversations.iter().any(|c| c.incident == incident)
    }

    /// End-to-end recall searches the earlier runs' episodes too, so they must be in this
    /// store: every conversation they scored (as `ok` or `failed`) has its episode there.
    async fn check_stored(
        &self,
        store: &deja_graph::GraphStore,
        scored: &[Transcript],
    ) -> Result<(), EvalError> {
        for conversation in self.conversations.iter().filter(|c| c.status != "missing") {
            let transcript = scored
                .iter()
                .find(|t| t.incident_id == conversation.incident)
                .ok_or_else(|| {
                    EvalError::Input(format!(
                        "the earlier run scored {}, which these transcripts (and --only) leave out",
                        conversation.incident
                    ))
                })?;
            let key = deja_domain::EpisodeKey::new(&self.namespace, &transcript.correlation_id);
            if store.get_by_key(&key).await?.is_none() {
                return Err(EvalError::Input(format!(
                    "the episode of {} ({}) is not in this store: --resume needs the store the \
                     earlier run wrote to",
                    conversation.incident, self.namespace
                )));
            }
        }
        Ok(())
    }
}

/// How the conversations are replayed.
struct ReplayPlan<'a> {
    /// Give up on a turn not merged within this.
    turn_timeout: Duration,
    /// Conversations in flight at once.
    parallel: usize,
    /// Start no conversation after this instant.
    start_by: Option<Instant>,
    /// Set on Ctrl-C: start no more conversation either.
    stopped: &'a std::sync::atomic::AtomicBool,
}

/// Replays the conversations, `plan.parallel` at a time (each turn by turn, in order), and
/// returns what became of each in the order given; `None` for one not started in time.
async fn replay_all(
    bus: &Bus,
    store: &deja_graph::GraphStore,
    org: &str,
    transcripts: &[Transcript],
    plan: &ReplayPlan<'_>,
) -> Result<Vec<Option<Replayed>>, EvalError> {
    use futures::stream::{self, StreamExt, TryStreamExt};
    use std::sync::atomic::{AtomicUsize, Ordering};

    let started = Instant::now();
    let total_turns: usize = transcripts.iter().map(|t| t.turns.len()).sum();
    let done = AtomicUsize::new(0);
    let (done, conversations) = (&done, transcripts.len());
    // A bar on a terminal; elsewhere (logs, tests) it hides itself and each turn is a line.
    let bar = ProgressBar::new(total_turns as u64).with_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} turns")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let bar = &bar;
    let replayed = stream::iter(transcripts.iter().enumerate())
        .map(|(index, transcript)| async move {
            if plan
                .start_by
                .is_some_and(|deadline| Instant::now() >= deadline)
                || plan.stopped.load(Ordering::Relaxed)
            {
                return Ok(None);
            }
            let mut progress = |line: &str| {
                let done = done.fetch_add(1, Ordering::Relaxed) + 1;
                if bar.is_hidden() {
                    eprintln!(
                        "[{done}/{total_turns} turns, conversation {}/{conversations}, {:.0} s] {line}",
                        index + 1,
                        started.elapsed().as_secs_f64()
                    );
                } else {
                    bar.println(format!("conversation {}/{conversations}: {line}", index + 1));
                    bar.inc(1);
                }
            };
            replay::replay(
                bus,
                store,
                org,
                transcript,
                plan.turn_timeout,
                &mut progress,
            )
            .await
            .map(Some)
        })
        .buffered(plan.parallel.max(1))
        .try_collect()
        .await;
    bar.finish_and_clear();
    replayed
}

/// An incident record with its family label, as the corpus's incidents file holds them.
#[derive(Serialize)]
struct LabelledRecord<'a> {
    #[serde(flatten)]
    record: &'a IncidentRecord,
    cluster: &'a str,
}

/// Writes the episode of every conversation in `transcripts` as a labelled incident record,
/// named by its incident and labelled with its gold family: the memory the model wrote, in
/// the format `deja eval retrieval` reads. An episode that is no valid record (a failed
/// extraction without a summary, say) is left out and named on stderr.
async fn write_records(
    path: &Path,
    store: &deja_graph::GraphStore,
    org: &str,
    incidents: &Incidents,
    transcripts: &[Transcript],
) -> Result<(), EvalError> {
    let mut ordered: Vec<&Transcript> = transcripts.iter().collect();
    ordered.sort_by(|a, b| a.incident_id.cmp(&b.incident_id));
    let mut lines = String::new();
    let (mut written, mut left_out) = (0usize, 0usize);
    for transcript in ordered {
        let key = deja_domain::EpisodeKey::new(org, &transcript.correlation_id);
        let Some(episode) = store.get_by_key(&key).await? else {
            eprintln!("warning: no episode of {} to write", transcript.incident_id);
            left_out += 1;
            continue;
        };
        match IncidentRecord::from_episode(&episode, &transcript.incident_id) {
            Ok(mut record) => {
                // The incident's own org, not the eval namespace the episode was written to.
                if let Some(gold) = incidents.get(&transcript.incident_id) {
                    record.org = gold.org.clone();
                }
                let labelled = LabelledRecord {
                    record: &record,
                    cluster: incidents.family(&transcript.incident_id),
                };
                let line = serde_json::to_string(&labelled).map_err(|e| {
                    EvalError::Input(format!("cannot write {}: {e}", transcript.incident_id))
                })?;
                lines.push_str(&line);
                lines.push('\n');
                written += 1;
            }
            Err(error) => {
                eprintln!(
                    "warning: the episode of {} is not a valid record ({error}): left out",
                    transcript.incident_id
                );
                left_out += 1;
            }
        }
    }
    std::fs::write(path, lines)?;
    eprintln!(
        "wrote {written} extracted episodes as records to {} ({left_out} left out)",
        path.display()
    );
    Ok(())
}

/// Sibling queries keep only the replayed incidents as relevant; a sibling query none of
/// whose incidents was replayed is dropped rather than turned into a novel one.
fn replayed_queries(queries: &[EvalQuery], transcripts: &[Transcript]) -> Vec<EvalQuery> {
    corpus::queries_about(queries, |id| {
        transcripts.iter().any(|t| t.incident_id == id)
    })
}

#[derive(Debug, Serialize)]
struct ExtractionSummary {
    conversations: usize,
    episodes_ok: usize,
    episodes_failed: usize,
    episodes_missing: usize,
    turns_not_merged: usize,
    /// Turns merged as a failed extraction (the episode kept the earlier conclusion).
    turns_failed: usize,
    distinct_issue_types: usize,
    issue_type_sibling_pairs_shared: Option<f64>,
    issue_type_cross_family_pairs_shared: Option<f64>,
    component_recall: Option<f64>,
    component_precision: Option<f64>,
    root_cause_similarity: Option<f64>,
    root_cause_baseline: Option<f64>,
    root_causes_missing: usize,
    summary_similarity: Option<f64>,
    resolved_agreement: Option<f64>,
    revised_conversations: usize,
    /// Revised conversations whose final root cause is closer to gold than the first one.
    revisions_replaced: usize,
    /// Revised conversations whose final root cause is closer to gold than to the early
    /// hypothesis (of those measured: reports written before it count none).
    revisions_left_hypothesis: usize,
    revisions_measured_left: usize,
    /// Items stored in `ruled_out`, and those naming the conclusion
    /// (`ConversationScore::ruled_out_naming_cause`).
    ruled_out_items: usize,
    ruled_out_naming_cause: usize,
    /// Episodes filed under a type that names one of their ruled-out hypotheses
    /// (`ConversationScore::issue_type_naming_ruled_out`).
    issue_types_naming_ruled_out: usize,
    poisoned_conversations: usize,
    leaks: usize,
}

fn summarise(c: &[ConversationScore]) -> ExtractionSummary {
    // A failed extraction's blank type is no type: two of them would count as one shared.
    let typed: Vec<(&str, &str)> = c
        .iter()
        .filter(|s| s.status == "ok")
        .filter_map(|s| Some((s.family.as_str(), s.issue_type.as_deref()?)))
        .filter(|(_, issue_type)| !issue_type.trim().is_empty())
        .collect();
    let (sibling_shared, cross_shared) = score::issue_type_sharing(&typed);
    let mut distinct: Vec<&str> = typed.iter().map(|(_, t)| *t).collect();
    distinct.sort_unstable();
    distinct.dedup();
    let revised: Vec<&ConversationScore> = c.iter().filter(|s| s.hypothesis_revised).collect();
    ExtractionSummary {
        conversations: c.len(),
        episodes_ok: c.iter().filter(|s| s.status == "ok").count(),
        episodes_failed: c.iter().filter(|s| s.status == "failed").count(),
        episodes_missing: c.iter().filter(|s| s.status == "missing").count(),
        turns_not_merged: c.iter().map(|s| s.lost_turns.len()).sum(),
        turns_failed: c.iter().map(|s| s.failed_turns.len()).sum(),
        distinct_issue_types: distinct.len(),
        issue_type_sibling_pairs_shared: sibling_shared,
        issue_type_cross_family_pairs_shared: cross_shared,
        component_recall: mean(c.iter().map(|s| s.component_recall)),
        component_precision: mean(c.iter().map(|s| s.component_precision)),
        // A conclusion the episode lacks scores 0 (missing episodes included): dropped from
        // the mean, failing to conclude would raise it.
        root_cause_similarity: mean(
            c.iter()
                .filter(|s| s.gold_has_root_cause)
                .map(|s| Some(s.root_cause_similarity.unwrap_or(0.0))),
        ),
        root_cause_baseline: mean(c.iter().map(|s| s.root_cause_baseline)),
        root_causes_missing: c.iter().filter(|s| s.root_cause.is_none()).count(),
        summary_similarity: mean(c.iter().map(|s| Some(s.summary_similarity.unwrap_or(0.0)))),
        // A missing or failed episode says nothing about the outcome: it does not agree.
        resolved_agreement: share(
            c.iter()
                .map(|s| Some(s.status == "ok" && s.resolved == Some(s.gold_resolved))),
        ),
        revised_conversations: revised.len(),
        revisions_replaced: revised
            .iter()
            .filter(|s| s.revision_replaced == Some(true))
            .count(),
        revisions_left_hypothesis: revised
            .iter()
            .filter(|s| s.revision_left_hypothesis == Some(true))
            .count(),
        revisions_measured_left: revised
            .iter()
            .filter(|s| s.revision_left_hypothesis.is_some())
            .count(),
        ruled_out_items: c.iter().map(|s| s.ruled_out.len()).sum(),
        ruled_out_naming_cause: c.iter().map(|s| s.ruled_out_naming_cause.len()).sum(),
        issue_types_naming_ruled_out: c
            .iter()
            .filter(|s| s.issue_type_naming_ruled_out.is_some())
            .count(),
        poisoned_conversations: c.iter().filter(|s| s.poisoned).count(),
        leaks: c.iter().map(|s| s.leaked_into.len()).sum(),
    }
}

/// The report of `deja eval extraction` (`--json` prints it as is).
#[derive(Serialize)]
pub struct ExtractionReport {
    namespace: String,
    /// Invocations the report covers: 1, plus one per `--resume`.
    runs: usize,
    /// Conversations not started before `--max-minutes` (in the last run).
    skipped_conversations: usize,
    /// Wall time of the replay (publish → merged), all conversations of all runs.
    replay_seconds: u64,
    parallel: usize,
    llm_model: String,
    llm_base_url: String,
    summary: ExtractionSummary,
    conversations: Vec<ConversationScore>,
    /// The queries against the extracted episodes; absent without a queries file.
    end_to_end: Option<Headline>,
}

/// The report for people.
pub fn print(report: &ExtractionReport) {
    let s = &report.summary;
    println!(
        "deja eval extraction: {} conversations into {} (LLM {} at {})",
        s.conversations, report.namespace, report.llm_model, report.llm_base_url
    );
    println!(
        "replayed in {} s over {} run(s), {} conversation(s) at once; {} skipped (--max-minutes or Ctrl-C)",
        report.replay_seconds, report.runs, report.parallel, report.skipped_conversations
    );
    println!(
        "episodes: {} ok, {} failed, {} missing; turns not merged: {}, turns failed: {}\n",
        s.episodes_ok, s.episodes_failed, s.episodes_missing, s.turns_not_merged, s.turns_failed
    );
    println!(
        "{:<12} {:<34} {:<30} {:>6} {:>6} {:>6} {:>8} {:>8} {:>5}",
        "incident", "family", "issue type", "comp", "rc", "summ", "resolved", "revised", "leak"
    );
    for c in &report.conversations {
        let flag = |v: Option<bool>| v.map_or("-", |b| if b { "yes" } else { "no" });
        println!(
            "{:<12} {:<34} {:<30} {:>6} {:>6} {:>6} {:>8} {:>8} {:>5}",
            c.incident,
            c.family,
            clip(c.issue_type.as_deref().unwrap_or("(none)"), 30),
            number(c.component_recall),
            number(c.root_cause_similarity),
            number(c.summary_similarity),
            format!(
                "{}/{}",
                flag(c.resolved),
                if c.gold_resolved { "yes" } else { "no" }
            ),
            flag(c.revision_replaced),
            if c.poisoned {
                if c.leaked_into.is_empty() {
                    "no"
                } else {
                    "LEAK"
                }
            } else {
                "-"
            },
        );
    }
    println!(
        "\nissue-type reuse: same-family pairs sharing {}, different-family pairs sharing {}, \
         {} distinct types",
        number(s.issue_type_sibling_pairs_shared),
        number(s.issue_type_cross_family_pairs_shared),
        s.distinct_issue_types
    );
    println!(
        "components found: recall {}, precision {}",
        number(s.component_recall),
        number(s.component_precision)
    );
    println!(
        "root-cause similarity {} (an unrelated incident's gold scores {}); {} without a root cause",
        number(s.root_cause_similarity),
        number(s.root_cause_baseline),
        s.root_causes_missing
    );
    println!("summary similarity {}", number(s.summary_similarity));
    println!("resolved agreement {}", number(s.resolved_agreement));
    println!(
        "wrong early hypothesis left (final root cause closer to gold than to it) in {} of {} \
         revised conversations; final root cause closer to gold than the early one was in {} of {}",
        s.revisions_left_hypothesis,
        s.revisions_measured_left,
        s.revisions_replaced,
        s.revised_conversations
    );
    println!(
        "ruled out: {} items stored, {} of them naming the conclusion (closer to gold's root \
         cause than to its ruled-out hypotheses)",
        s.ruled_out_items, s.ruled_out_naming_cause
    );
    println!(
        "issue type naming a ruled-out hypothesis: {} episodes",
        s.issue_types_naming_ruled_out
    );
    println!(
        "poisoned conversations: {}, injected text found in {} stored episodes",
        s.poisoned_conversations, s.leaks
    );
    if let Some(headline) = &report.end_to_end {
        println!("\nend-to-end recall (the queries against the extracted episodes):");
        report::print_headline(headline);
    }
}

/// `text` cut to `width` characters (with `…`), so that table columns stay aligned.
fn clip(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::summarise;
    use crate::scoring::ConversationScore;

    fn scored(
        family: &str,
        status: &str,
        issue_type: &str,
        cause: Option<f64>,
    ) -> ConversationScore {
        serde_json::from_value(serde_json::json!({
            "incident": format!("inc-{family}-{status}"), "family": family, "team": "t",
            "turns": 2, "lost_turns": [], "status": status,
            "issue_type": (status != "missing").then_some(issue_type),
            "gold_issue_type": "x", "components": [], "component_recall": null,
            "component_precision": null, "root_cause": cause.map(|_| "a cause"),
            "root_cause_similarity": cause, "root_cause_baseline": null,
            "summary_similarity": cause, "resolved": (status != "missing").then_some(false),
            "gold_resolved": false, "hypothesis_revised": false,
            "first_root_cause_similarity": null, "revision_replaced": null,
            "poisoned": false, "leaked_into": []
        }))
        .expect("a conversation score")
    }

    /// A conversation that failed to conclude counts against the figures, not out of them:
    /// its missing cause scores 0, it does not agree on `resolved`, and a failed episode's
    /// blank type is shared with nobody.
    #[test]
    fn missing_and_failed_episodes_count_against_the_summary() {
        let summary = summarise(&[
            scored("pool", "ok", "pool-exhaustion", Some(0.8)),
            scored("pool", "missing", "", None),
            scored("dns", "failed", "", None),
            scored("mtu", "failed", "", None),
        ]);
        assert_eq!(summary.root_cause_similarity, Some(0.2));
        assert_eq!(summary.summary_similarity, Some(0.2));
        assert_eq!(summary.resolved_agreement, Some(0.25));
        assert_eq!(summary.distinct_issue_types, 1);
        assert_eq!(summary.issue_type_cross_family_pairs_shared, None);
    }
}
