//! `deja eval retrieval`: imports labelled incidents into a fresh org namespace with the
//! import command's own code, runs every query through the production search path, then
//! compares the recognition stages as variants on the same candidates, cross-validated over
//! root-cause families (docs/EVALUATION.md).

use super::corpus::{self, EvalQuery, Incidents};
use super::links::{self, LinkReport};
use super::report::{self, Headline};
use super::search;
use super::variants::{
    self, assign_folds, FoldFits, Memory, QueryCandidates, RepeatedRow, VariantRow,
};
use crate::services::{check_dimensions, connect_store, load_embedder};
use crate::EvalError;
use chrono::Utc;
use deja_api::{Verified, Verifier};
use deja_config::{SearchSettings, Settings};
use deja_domain::recognition::RecognitionParams;
use deja_domain::{Episode, Scope};
use deja_embed::{Embedder, LateEncoder};
use deja_graph::GraphStore;
use deja_worker::jobs::import_one;
use deja_worker::RecurrenceLinker;
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What `deja eval retrieval` evaluates, and how.
pub struct RetrievalOptions {
    /// Labelled incident records (the `deja import` format plus `cluster`), one file or
    /// several read as one memory (a held-out fold beside the dev corpus).
    pub incidents: Vec<PathBuf>,
    /// Queries: `{id, team, query, relevant}` per line.
    pub queries: PathBuf,
    /// Cross-validation folds over root-cause families (at least 2).
    pub folds: usize,
    /// `(incidents, queries)`: the first lines of each file that form fold 0 of their own
    /// (the original dev set), when the corpus is larger.
    pub base_fold: (usize, usize),
    /// Also write every query's candidates with their evidence and label, one JSON line
    /// per query, for offline analysis of the decision.
    pub dump_candidates: Option<PathBuf>,
    /// Repeats of the cross-validation over shuffled family folds (0 = off).
    pub repeats: usize,
    /// The episodes a model extracted from these incidents' conversations, as records
    /// (`deja eval extraction --records`): a second memory the same queries search. The
    /// decision is fitted on both memories and scored on each.
    pub extracted: Option<PathBuf>,
}

#[derive(Serialize)]
struct Production {
    ranking: deja_domain::ranking::RankingParams,
    rerank: bool,
    reranker_loaded: bool,
    late_interaction: bool,
    late_loaded: bool,
    candidates: usize,
    rerank_candidates: usize,
    default_limit: usize,
    /// `search.verify = "llm"`: the variants end with the verification row (the headline
    /// stays the calibrated decision's, so each query costs one call, not three).
    verify_llm: bool,
}

/// The report of `deja eval retrieval` (`--json` prints it as is).
#[derive(Serialize)]
pub struct RetrievalReport {
    namespace: String,
    production: Production,
    incidents: usize,
    folds: usize,
    #[serde(flatten)]
    headline: Headline,
    variants: Vec<VariantRow>,
    /// The cross-validated variants over `repeats` shuffles of the families over the folds.
    repeated: Vec<RepeatedRow>,
    /// The same queries over the extracted memory (`--extracted`).
    #[serde(skip_serializing_if = "Option::is_none")]
    extracted: Option<ExtractedMemory>,
    /// The calibration fitted on every query (of both memories): what `defaults.toml`
    /// should hold.
    calibration: RecognitionParams,
    /// The worker's recurrence links, every incident standing for a new episode.
    links: LinkReport,
}

/// The queries over the memory a model extracted from the incidents' conversations.
#[derive(Serialize)]
struct ExtractedMemory {
    /// The records file it was imported from.
    source: String,
    namespace: String,
    incidents: usize,
    #[serde(flatten)]
    headline: Headline,
    variants: Vec<VariantRow>,
    repeated: Vec<RepeatedRow>,
}

/// Imports the incidents into a fresh namespace, runs every query and compares the
/// variants.
pub async fn run(
    settings: &Settings,
    args: RetrievalOptions,
) -> Result<RetrievalReport, EvalError> {
    let incidents = Incidents::load_all(&args.incidents)?;
    let queries = corpus::load_queries(&args.queries, &incidents)?;
    if args.folds < 2 {
        return Err(EvalError::Input("--folds must be at least 2".to_owned()));
    }
    let extracted = match &args.extracted {
        Some(path) => Some((path, extracted_incidents(path, &incidents)?)),
        None => None,
    };
    let store = connect_store(settings).await?;
    let embedder = load_embedder(settings)?;
    check_dimensions(&store, embedder.as_ref()).await?;
    let reranker = deja_api::load_reranker(settings).await;
    if settings.search.rerank && reranker.is_none() {
        eprintln!(
            "warning: search.rerank is on but the reranker did not load (see the log); \
             run `deploy/embeddings.sh fetch`. Evaluating without it."
        );
    }

    let late = deja_api::load_late_encoder(settings).await;
    if settings.late_interaction.enabled && late.is_none() {
        eprintln!(
            "warning: late_interaction.enabled is on but its model did not load (see the \
             log); run `deploy/embeddings.sh fetch`. Evaluating without it."
        );
    }

    let namespace = corpus::namespace("retrieval");
    let episodes = import(&store, &embedder, late.as_ref(), &incidents, &namespace).await?;

    // `Some` exactly when `search.verify = "llm"`.
    let verifier = deja_api::verifier(settings)
        .map_err(|e| EvalError::Input(format!("{e} (search.verify)")))?;
    let production = search::service(&store, &embedder, &settings.search)
        .with_reranker(reranker.clone())
        .with_late(late.clone());
    eprintln!("running {} queries...", queries.len());
    let folds = assign_folds(
        &queries,
        &incidents,
        args.folds,
        args.base_fold.0,
        args.base_fold.1,
    );
    let (answers, mut candidates) = ask(
        &production,
        &namespace,
        (&queries, &folds),
        &incidents,
        Memory::Records,
    )
    .await?;
    let headline = report::headline(&queries, &incidents, &answers);
    let extracted = match extracted {
        Some((path, records)) => {
            let namespace = corpus::namespace("retrieval-extracted");
            import(&store, &embedder, late.as_ref(), &records, &namespace).await?;
            let asked = corpus::queries_about(&queries, |id| records.get(id).is_some());
            let fold_of: HashMap<&str, usize> = queries
                .iter()
                .zip(&folds)
                .map(|(q, fold)| (q.id.as_str(), *fold))
                .collect();
            let asked_folds: Vec<usize> = asked.iter().map(|q| fold_of[q.id.as_str()]).collect();
            eprintln!(
                "running {} queries over the extracted memory ({} incidents)...",
                asked.len(),
                records.records.len()
            );
            let (answers, asked_candidates) = ask(
                &production,
                &namespace,
                (&asked, &asked_folds),
                &incidents,
                Memory::Extracted,
            )
            .await?;
            candidates.extend(asked_candidates);
            Some((
                path,
                namespace,
                records.records.len(),
                report::headline(&asked, &incidents, &answers),
            ))
        }
        None => None,
    };
    if let Some(path) = &args.dump_candidates {
        variants::dump(path, &candidates)?;
    }
    // Each fold's decision is fitted once, on the training queries of every memory, and
    // scored on each memory's held-out queries.
    let fits = FoldFits::fit(&candidates, args.folds);
    let mut variants = variants::compare(&candidates, Memory::Records, &fits, &settings.search);
    if let Some(verifier) = &verifier {
        eprintln!("verifying the configured decision of every query with the LLM...");
        // The curated memory's queries come first, in file order.
        let records = &candidates[..queries.len()];
        variants.push(verify(verifier, &queries, records, &settings.search).await);
    }
    let memories: &[Memory] = match extracted {
        Some(_) => &[Memory::Records, Memory::Extracted],
        None => &[Memory::Records],
    };
    let mut repeated = variants::repeated(
        &candidates,
        memories,
        args.folds,
        args.repeats,
        &settings.search,
    )
    .into_iter();
    let records_repeated = repeated.next().unwrap_or_default();
    let extracted = extracted.map(|(path, namespace, incidents, headline)| ExtractedMemory {
        source: path.display().to_string(),
        namespace,
        incidents,
        headline,
        variants: variants::compare(&candidates, Memory::Extracted, &fits, &settings.search),
        repeated: repeated.next().unwrap_or_default(),
    });
    let everything: Vec<&QueryCandidates> = candidates.iter().collect();
    let calibration = variants::calibrate(&everything, variants::rerank_stage(&candidates));

    eprintln!("recognizing every incident as a new episode (recurrence links)...");
    let linker = RecurrenceLinker::new(store.clone(), reranker.clone(), &settings.search)
        .with_late(late.clone());
    let (link_sets, link_incidents) =
        link_candidates(&linker, &settings.search, &incidents, &episodes).await?;
    let query_folds: Vec<usize> = candidates.iter().map(|q| q.fold).collect();
    let splits: Vec<Vec<usize>> = std::iter::once(query_folds)
        .chain(
            (0..args.repeats)
                .map(|seed| variants::shuffled_folds(&candidates, args.folds, seed as u64)),
        )
        .collect();
    let links = links::evaluate(
        &candidates,
        &link_sets,
        &link_incidents,
        &splits,
        (&settings.search.recognition, &settings.search.recurrence),
        &calibration,
    );

    Ok(RetrievalReport {
        production: Production {
            ranking: settings.search.ranking,
            rerank: settings.search.rerank,
            reranker_loaded: reranker.is_some(),
            late_interaction: settings.late_interaction.enabled,
            late_loaded: late.is_some(),
            candidates: settings.search.candidates,
            rerank_candidates: settings.search.rerank_candidates,
            default_limit: settings.search.default_limit,
            verify_llm: verifier.is_some(),
        },
        namespace,
        incidents: incidents.records.len(),
        folds: args.folds,
        headline,
        variants,
        repeated: records_repeated,
        extracted,
        calibration,
        links,
    })
}

/// The records of `--extracted`: each must name an incident of the corpus, whose family
/// labels it.
fn extracted_incidents(path: &Path, incidents: &Incidents) -> Result<Incidents, EvalError> {
    let records = Incidents::load(path)?;
    if let Some((line, record)) = records
        .records
        .iter()
        .find(|(_, r)| incidents.get(&r.id).is_none())
    {
        return Err(EvalError::Input(format!(
            "{}:{line}: {} is not an incident of --incidents (--extracted holds the episodes \
             extracted from those incidents' conversations)",
            path.display(),
            record.id
        )));
    }
    Ok(records)
}

/// How many times more a query's candidates are asked for when a stage did not run.
const DEGRADED_RETRIES: usize = 2;

/// Every query through the production search of `namespace`, where each imported episode
/// keeps its record id as correlation id: the answers as the skill shows them, and the
/// candidates of the recognition stages, in `fold`s.
async fn ask(
    production: &deja_api::SearchService,
    namespace: &str,
    (queries, folds): (&[EvalQuery], &[usize]),
    incidents: &Incidents,
    memory: Memory,
) -> Result<(Vec<search::Answer>, Vec<QueryCandidates>), EvalError> {
    let incident_of: HashMap<String, String> = incidents
        .records
        .iter()
        .map(|(_, r)| (r.id.clone(), r.id.clone()))
        .collect();
    let mut answers = Vec::with_capacity(queries.len());
    let mut candidates = Vec::with_capacity(queries.len());
    for (query, fold) in queries.iter().zip(folds) {
        // The answer and the candidates of a query back to back: full-text statistics span
        // every tenant, so writes elsewhere between the two could shift them apart.
        // A fit on a set a stage left out of (its token load timed out on a busy machine)
        // would learn the calibration without that stage's feature: asked again (the answer
        // with it, to keep the two back to back), and said when it stays short.
        let mut answer =
            search::production_answer(production, namespace, query, &incident_of).await?;
        let mut set = search::candidates(production, namespace, query).await?;
        for _ in 0..DEGRADED_RETRIES {
            if set.degraded.is_empty() {
                break;
            }
            answer = search::production_answer(production, namespace, query, &incident_of).await?;
            set = search::candidates(production, namespace, query).await?;
        }
        answers.push(answer);
        if !set.degraded.is_empty() {
            let reasons: Vec<&str> = set.degraded.iter().map(|d| d.reason()).collect();
            eprintln!(
                "warning: query {}: candidates without every stage ({}) after {} tries; the \
                 fit reads them so",
                query.id,
                reasons.join(", "),
                DEGRADED_RETRIES + 1
            );
        }
        candidates.push(QueryCandidates {
            id: query.id.clone(),
            memory,
            relevant: query.relevant.clone(),
            family: incidents.query_family(&query.relevant),
            fold: *fold,
            incidents: set
                .candidates
                .iter()
                .map(|c| {
                    incident_of
                        .get(&c.episode.correlation_id)
                        .cloned()
                        .unwrap_or_else(|| c.episode.correlation_id.clone())
                })
                .collect(),
            set,
        });
    }
    Ok((answers, candidates))
}

/// Every imported incident recognized as the worker recognizes a new episode, against the
/// other incidents of its org; its family's other members are its relevant candidates.
async fn link_candidates(
    linker: &RecurrenceLinker,
    settings: &SearchSettings,
    incidents: &Incidents,
    episodes: &[Episode],
) -> Result<(Vec<QueryCandidates>, Vec<String>), EvalError> {
    let mut sets = Vec::with_capacity(episodes.len());
    let mut ids = Vec::with_capacity(episodes.len());
    for episode in episodes {
        let Some(vector) = episode.embedding.as_deref() else {
            continue;
        };
        let incident = episode.correlation_id.clone();
        let family = incidents.family(&incident);
        let relevant: Vec<String> = incidents
            .records
            .iter()
            .map(|(_, r)| r.id.clone())
            .filter(|id| *id != incident && incidents.family(id) == family)
            .collect();
        let scope = Scope {
            org: episode.org.clone(),
            team: None,
        };
        let deadline = Instant::now() + Duration::from_millis(settings.deadline_ms);
        let set = linker
            .candidate_set(episode, vector, &scope, deadline)
            .await
            .map_err(|e| EvalError::Input(format!("recognizing incident {incident}: {e}")))?;
        sets.push(QueryCandidates {
            id: incident.clone(),
            memory: Memory::Records,
            relevant,
            family: family.to_owned(),
            fold: 0,
            incidents: set
                .candidates
                .iter()
                .map(|c| c.episode.correlation_id.clone())
                .collect(),
            set,
        });
        ids.push(incident);
    }
    Ok((sets, ids))
}

/// The verification row: every query's configured decision through the verification stage,
/// as a search with `search.verify = "llm"` runs it (its budget, its label moves).
async fn verify(
    verifier: &Verifier,
    queries: &[EvalQuery],
    candidates: &[QueryCandidates],
    settings: &SearchSettings,
) -> VariantRow {
    let budget = Duration::from_millis(settings.verify_budget_ms);
    let mut verified = variants::configured_decisions(candidates, settings);
    let mut verify_ms = Vec::with_capacity(verified.len());
    let mut unavailable = 0;
    for (query, decided) in queries.iter().zip(&mut verified) {
        // A search decides `limit` leads and verifies those: the same prompt here.
        let shown = settings.default_limit.min(decided.len());
        let started = Instant::now();
        let outcome = verifier
            .verify(
                &query.query,
                &mut decided[..shown],
                &settings.recognition,
                budget,
                Instant::now() + budget,
            )
            .await;
        verify_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        if matches!(outcome, Verified::Unavailable(_)) {
            unavailable += 1;
        }
    }
    variants::verified_row(candidates, &verified, &verify_ms, unavailable, settings)
}

/// Writes every record into `org` through `import_one`, the import command's write path;
/// returns the episodes as stored.
async fn import(
    store: &GraphStore,
    embedder: &Arc<dyn Embedder>,
    late: Option<&Arc<dyn LateEncoder>>,
    incidents: &Incidents,
    org: &str,
) -> Result<Vec<Episode>, EvalError> {
    eprintln!(
        "importing {} incidents into {org}...",
        incidents.records.len()
    );
    let now = Utc::now();
    let mut episodes = Vec::with_capacity(incidents.records.len());
    for (line, record) in &incidents.records {
        let mut record = record.clone();
        record.org = org.to_owned();
        let episode = record
            .to_episode(now)
            .map_err(|e| EvalError::Input(format!("line {line}: {e}")))?;
        let stored = import_one(store, embedder, late, episode)
            .await
            .map_err(|source| EvalError::Import {
                id: record.id.clone(),
                source,
            })?;
        episodes.push(stored);
    }
    Ok(episodes)
}

/// The report for people.
pub fn print(report: &RetrievalReport) {
    let p = &report.production;
    println!(
        "deja eval retrieval: {} incidents, {} queries, namespace {}",
        report.incidents,
        report.headline.queries.len(),
        report.namespace
    );
    let loaded = |on: bool| if on { "loaded" } else { "NOT loaded" };
    println!(
        "production settings: {} candidates per stage, {} kept; late interaction {} (model \
         {}), cross-encoder {} (model {}); limit {} (MRR over the top {})\n",
        p.candidates,
        p.rerank_candidates,
        if p.late_interaction { "on" } else { "off" },
        loaded(p.late_loaded),
        if p.rerank { "on" } else { "off" },
        loaded(p.reranker_loaded),
        p.default_limit,
        super::metrics::MRR_DEPTH
    );
    report::print_headline(&report.headline);
    println!(
        "\nvariants (the same fused candidates per query; ᶜᵛ = fitted per fold on the other \
         folds, pooled (fold mean±sd) over {} folds):\n",
        report.folds
    );
    print!("{}", variants::markdown(&report.variants));
    if let Some(first) = report.repeated.first() {
        println!(
            "\nrepeated cross-validation ({} shuffles of the families over {} folds; mean ± sd \
             of each shuffle's pooled held-out figures):\n",
            first.repeats, report.folds
        );
        print!("{}", variants::repeated_markdown(&report.repeated));
    }
    if let Some(extracted) = &report.extracted {
        println!(
            "\nthe same queries over the extracted memory ({} incidents from {}, namespace {}; \
             the decision fitted on both memories, ᶜᵛ per fold as above):\n",
            extracted.incidents, extracted.source, extracted.namespace
        );
        report::print_headline(&extracted.headline);
        println!();
        print!("{}", variants::markdown(&extracted.variants));
        if !extracted.repeated.is_empty() {
            println!();
            print!("{}", variants::repeated_markdown(&extracted.repeated));
        }
    }
    println!(
        "\ncalibration fitted on every query{} (for defaults.toml):\n",
        if report.extracted.is_some() {
            " of both memories"
        } else {
            ""
        }
    );
    print!("{}", variants::calibration_toml(&report.calibration));
    let links = &report.links;
    println!(
        "\nrecurrence links ({} incidents, each standing for a new episode against the others \
         of its org: with its family in memory a link is right or wrong; with its family taken \
         out any link is false; ᶜᵛ = mean ± sd over {} splits of the families):\n",
        links.episodes, links.splits
    );
    print!("{}", links::markdown(&links.rows));
    println!("\nlink bars fitted on every incident (for defaults.toml):\n");
    print!("{}", links::bar_toml(&links.bar));
}
