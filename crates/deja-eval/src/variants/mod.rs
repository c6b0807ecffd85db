//! The recognition stages as variants, compared on the same candidates, and the
//! cross-validation that chooses the decision's weights and thresholds.
//!
//! Every query's candidates come from `SearchService::recognition_candidates` (retrieve,
//! fuse, rerank, evidence): the production stages. Each variant then orders (and, for the
//! decision, labels and filters) those candidates; the decision variants call
//! `deja_domain::recognition::decide`, the production function itself.
//!
//! Cross-validation is over root-cause families, never over single queries: a fold holds
//! whole families (all their sibling queries) plus a share of the novel queries. Each fold
//! is decided by a model fitted on the other folds only. The original 30-incident dev set
//! stays one fold of its own, so its figures stay comparable with earlier runs.

use super::metrics::{score_query, summarise, QueryScores, Summary, MRR_DEPTH, TOP_K};
use chrono::Utc;
use deja_api::CandidateSet;
use deja_config::SearchSettings;
use deja_domain::ranking::RankingParams;
use deja_domain::recognition::{
    decide, features, fit, CalibrationCandidate, CalibrationQuery, Decided, FamilyOrder,
    FitOptions, MatchStrength, Model, RecognitionParams,
};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

mod folds;
mod table;

pub use folds::assign_folds;
pub(crate) use folds::shuffled_folds;
pub use table::{calibration_toml, dump, markdown, repeated_markdown};

/// Which memory a query searched: the corpus's curated incident records, or the episodes a
/// model extracted from the same incidents' conversations (`--extracted`). The decision is
/// fitted on both — production memory is what the worker's LLM writes, not curated text —
/// and scored on each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Memory {
    Records,
    Extracted,
}

/// One query's candidates, named by incident, with its fold.
#[derive(Clone)]
pub struct QueryCandidates {
    /// The query's id (or, for a recurrence link, the incident's): a query asked of both
    /// memories is held out in the same fold in both.
    pub id: String,
    pub memory: Memory,
    pub relevant: Vec<String>,
    /// The root-cause family (`cluster`) its relevant incidents belong to
    /// (`Incidents::query_family`): what cross-validation holds out whole, whichever of its
    /// members a query lists.
    pub family: String,
    pub fold: usize,
    pub set: CandidateSet,
    /// Incident id of each candidate, in `set.candidates` order.
    pub incidents: Vec<String>,
}

impl QueryCandidates {
    fn novel(&self) -> bool {
        self.relevant.is_empty()
    }

    pub(crate) fn calibration(&self, stage: RerankStage, contradictions: bool) -> CalibrationQuery {
        CalibrationQuery {
            candidates: self
                .set
                .candidates
                .iter()
                .zip(&self.incidents)
                .map(|(c, incident)| {
                    let x = features(&stage.apply(&c.evidence));
                    CalibrationCandidate {
                        features: x,
                        relevant: self.relevant.contains(incident),
                        contradicted: contradictions && !c.evidence.contradicted.is_empty(),
                    }
                })
                .collect(),
            novel: self.novel(),
        }
    }
}

/// A variant's figures: pooled over all queries, and mean ± spread over folds (for the
/// cross-validated ones; for the others per-fold figures show the corpus' own spread).
#[derive(Debug, Clone, Serialize)]
pub struct VariantRow {
    pub name: String,
    /// Fitted per fold on the other folds.
    pub cross_validated: bool,
    pub summary: Summary,
    pub fold_mean: Summary,
    pub fold_sd: Summary,
    /// Stage time of one search up to this variant, p50 / p95 in ms.
    pub latency_p50_ms: f64,
    pub latency_p95_ms: f64,
}

/// An answer of a variant to one query: what the skill would show (top 3), the deeper list
/// for the reciprocal rank, and the ids labelled `strong`.
struct Answer {
    answer: Vec<String>,
    deeper: Vec<String>,
    strong: Vec<String>,
}

/// `key`'s order of the candidates: the top `TOP_K` among the first `shown` (the candidates
/// a search with the default limit keeps, `Shown`), the reciprocal rank over them all.
fn ordered(qc: &QueryCandidates, shown: Shown, key: impl Fn(usize) -> Option<f64>) -> Answer {
    let mut order: Vec<(usize, f64)> = (0..qc.incidents.len())
        .filter_map(|i| key(i).map(|k| (i, k)))
        .collect();
    order.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let deeper: Vec<String> = order
        .iter()
        .take(MRR_DEPTH)
        .map(|(i, _)| qc.incidents[*i].clone())
        .collect();
    Answer {
        answer: order
            .iter()
            .filter(|(i, _)| *i < shown.0)
            .take(TOP_K)
            .map(|(i, _)| qc.incidents[*i].clone())
            .collect(),
        deeper,
        strong: Vec::new(),
    }
}

/// How many candidates a search with the default limit decides (`search.rerank_candidates`,
/// or the limit + 1 when that is more): the candidate sets are asked with the reciprocal
/// rank's depth as their limit, which keeps one more, and the top `TOP_K` and their labels
/// must come from the candidates an agent's search decides, not from that deeper set.
/// Candidates are in fused order, so the production set is their prefix.
#[derive(Debug, Clone, Copy)]
pub struct Shown(pub usize);

impl Shown {
    pub fn of(production: &SearchSettings) -> Shown {
        Shown(
            production
                .rerank_candidates
                .max(production.default_limit.saturating_add(1)),
        )
    }
}

/// Which scores of the rerank stage a variant reads: the cross-encoder's logit and the
/// late-interaction score. Without either, the similarity-only calibration decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RerankStage {
    pub cross_encoder: bool,
    pub late: bool,
}

impl RerankStage {
    /// Neither score: what a degraded search decides with.
    pub(crate) const NONE: RerankStage = RerankStage {
        cross_encoder: false,
        late: false,
    };

    /// The scores every candidate of every query carries.
    fn of(queries: &[QueryCandidates]) -> RerankStage {
        let all = |has: fn(&deja_domain::recognition::Evidence) -> bool| {
            !queries.is_empty()
                && queries
                    .iter()
                    .all(|q| q.set.candidates.iter().all(|c| has(&c.evidence)))
        };
        RerankStage {
            cross_encoder: all(|e| e.rerank.is_some()),
            late: all(|e| e.late.is_some()),
        }
    }

    pub(crate) fn any(self) -> bool {
        self.cross_encoder || self.late
    }

    /// `evidence` without the scores this stage does not read.
    fn apply(
        self,
        evidence: &deja_domain::recognition::Evidence,
    ) -> deja_domain::recognition::Evidence {
        let mut evidence = evidence.clone();
        if !self.cross_encoder {
            evidence.rerank = None;
        }
        if !self.late {
            evidence.late = None;
        }
        evidence
    }
}

/// How a decision variant treats its candidates.
#[derive(Debug, Clone, Copy)]
struct Decision {
    /// The rerank stage's scores used (without any, the similarity-only calibration decides).
    stage: RerankStage,
    /// The query's denials cap contradicted candidates at `possible` (the production rule).
    contradictions: bool,
    /// Which leads follow the first, in which order (the fold's calibration has none of its
    /// own: it is a configured setting, compared by its own row).
    family: FamilyOrder,
    /// The candidates a default-limit search decides.
    shown: Shown,
}

/// The top `TOP_K` and their labels as a default-limit search decides them; the reciprocal
/// rank from the decision over every candidate (a deeper search's).
fn decided(
    qc: &QueryCandidates,
    params: &RecognitionParams,
    ranking: &RankingParams,
    decision: Decision,
) -> Answer {
    let deeper = decision_of(qc, params, ranking, decision, usize::MAX);
    if qc.set.candidates.len() <= decision.shown.0 {
        return answer_of(qc, &deeper, &deeper);
    }
    let shown = decision_of(qc, params, ranking, decision, decision.shown.0);
    answer_of(qc, &shown, &deeper)
}

/// What `decide` answers for the first `keep` of `qc`'s candidates under `decision` (up to
/// `MRR_DEPTH` leads).
fn decision_of(
    qc: &QueryCandidates,
    params: &RecognitionParams,
    ranking: &RankingParams,
    decision: Decision,
    keep: usize,
) -> Vec<Decided> {
    let mut candidates: Vec<_> = qc.set.candidates.iter().take(keep).cloned().collect();
    for c in &mut candidates {
        c.evidence = decision.stage.apply(&c.evidence);
        if !decision.contradictions {
            c.evidence.contradicted.clear();
        }
    }
    let params = RecognitionParams {
        family: decision.family,
        ..*params
    };
    let (list, _) = decide(
        candidates,
        &qc.set.query,
        &params,
        ranking,
        MRR_DEPTH,
        Utc::now(),
    );
    list
}

/// A decided list as the skill shows it (`shown`: the top `TOP_K` and their labels), and the
/// deeper list the reciprocal rank reads, named by incident.
fn answer_of(qc: &QueryCandidates, shown: &[Decided], list: &[Decided]) -> Answer {
    let incident_of: HashMap<&str, &str> = qc
        .set
        .candidates
        .iter()
        .zip(&qc.incidents)
        .map(|(c, i)| (c.episode.id.as_str(), i.as_str()))
        .collect();
    let name = |id: &str| {
        incident_of
            .get(id)
            .map_or_else(|| id.to_owned(), |s| (*s).to_owned())
    };
    let deeper: Vec<String> = list.iter().map(|d| name(&d.episode.id)).collect();
    Answer {
        answer: shown
            .iter()
            .take(TOP_K)
            .map(|d| name(&d.episode.id))
            .collect(),
        strong: shown
            .iter()
            .take(TOP_K)
            .filter(|d| d.strength == MatchStrength::Strong)
            .map(|d| name(&d.episode.id))
            .collect(),
        deeper,
    }
}

fn score(qc: &QueryCandidates, a: &Answer) -> QueryScores {
    score_query(&qc.relevant, &a.answer, &a.deeper, &a.strong)
}

/// The fit options of the decision: fixed, documented defaults (never tuned per query).
fn fit_options(stage: RerankStage, base: &FitOptions) -> FitOptions {
    let mut options = *base;
    options.features[RERANK_FEATURE] &= stage.cross_encoder;
    options.features[LATE_FEATURE] &= stage.late;
    options
}

/// The cross-encoder's and late interaction's indices in the feature vector.
const RERANK_FEATURE: usize = 0;
const LATE_FEATURE: usize = 7;

/// Both calibrations fitted on `queries` with the default feature set and the production
/// contradiction rule.
pub fn calibrate(queries: &[&QueryCandidates], stage: RerankStage) -> RecognitionParams {
    calibrate_with(queries, stage, &FitOptions::default(), true)
}

/// The rerank stage's scores every candidate of `queries` carries.
pub fn rerank_stage(queries: &[QueryCandidates]) -> RerankStage {
    RerankStage::of(queries)
}

/// The two calibrations: `reranked` with the scores of `stage`, `cosine_only` with neither.
fn calibrate_with(
    queries: &[&QueryCandidates],
    stage: RerankStage,
    base: &FitOptions,
    contradictions: bool,
) -> RecognitionParams {
    let fit_one = |stage: RerankStage| {
        let calibration: Vec<CalibrationQuery> = queries
            .iter()
            .map(|q| q.calibration(stage, contradictions))
            .collect();
        fit(&calibration, &fit_options(stage, base))
    };
    RecognitionParams {
        reranked: fit_one(stage),
        cosine_only: fit_one(RerankStage::NONE),
        family: FamilyOrder::OFF,
    }
}

/// The root-cause evidence's index in the feature vector (its ablation row).
const ROOT_CAUSE_FEATURE: usize = 6;

/// Each fold's calibrations, fitted on the other folds' queries of every memory: the
/// production fit and the two ablations' fits that [`compare`] decides with. Fitted once per
/// split of the folds, so every memory's rows read the same fits.
pub struct FoldFits {
    /// The rerank stage's scores every query's candidates carry.
    stage: RerankStage,
    production: BTreeMap<usize, RecognitionParams>,
    without_contradictions: BTreeMap<usize, RecognitionParams>,
    without_root_cause: BTreeMap<usize, RecognitionParams>,
}

impl FoldFits {
    pub fn fit(queries: &[QueryCandidates], folds: usize) -> Self {
        let stage = RerankStage::of(queries);
        let fit_folds = |options: &FitOptions, contradictions: bool| {
            (0..folds)
                .filter(|f| queries.iter().any(|q| q.fold == *f))
                .map(|f| {
                    let training: Vec<&QueryCandidates> =
                        queries.iter().filter(|q| q.fold != f).collect();
                    (f, calibrate_with(&training, stage, options, contradictions))
                })
                .collect::<BTreeMap<usize, RecognitionParams>>()
        };
        let mut without_root_cause = FitOptions::default();
        without_root_cause.features[ROOT_CAUSE_FEATURE] = false;
        FoldFits {
            stage,
            production: fit_folds(&FitOptions::default(), true),
            without_contradictions: fit_folds(&FitOptions::default(), false),
            without_root_cause: fit_folds(&without_root_cause, true),
        }
    }
}

/// Every variant's row over the queries of `memory`, the cross-validated ones decided by
/// `fits` (fitted on these queries' folds). `production` is the configured recognition.
pub fn compare(
    queries: &[QueryCandidates],
    memory: Memory,
    fits: &FoldFits,
    production: &SearchSettings,
) -> Vec<VariantRow> {
    let stage = fits.stage;
    let queries: Vec<QueryCandidates> = queries
        .iter()
        .filter(|q| q.memory == memory)
        .cloned()
        .collect();
    let queries = queries.as_slice();
    let fold_params = &fits.production;
    let without_contradictions = &fits.without_contradictions;
    let without_root_cause = &fits.without_root_cause;
    let retrieve = |q: &QueryCandidates| q.set.timings.embed_ms + q.set.timings.retrieve_ms;
    let late = |q: &QueryCandidates| retrieve(q) + q.set.timings.late_ms;
    let rerank = rerank_latency;
    let shown = Shown::of(production);

    let mut rows = Vec::new();
    let mut push = |name: &str,
                    cross_validated: bool,
                    answer: &dyn Fn(&QueryCandidates) -> Answer,
                    latency: &dyn Fn(&QueryCandidates) -> f64| {
        rows.push(row(name, cross_validated, queries, answer, latency));
    };
    // Not a stage: how much of each family the candidates hold at all. A gap to it is the
    // order's (or the decision's); what it lacks, only retrieval can bring.
    push(
        "the candidates' reach (family members first: no order of them does better)",
        false,
        &|q| {
            ordered(q, shown, |i| {
                Some(f64::from(u8::from(q.relevant.contains(&q.incidents[i]))))
            })
        },
        &retrieve,
    );
    push(
        "semantic (cosine order, no floor)",
        false,
        &|q| {
            ordered(q, shown, |i| {
                let e = &q.set.candidates[i].evidence;
                e.semantic_rank.map(|_| e.cosine)
            })
        },
        &retrieve,
    );
    push(
        "semantic, floor 0.35 (before recognition)",
        false,
        &|q| {
            ordered(q, shown, |i| {
                let e = &q.set.candidates[i].evidence;
                (e.semantic_rank.is_some() && e.cosine >= 0.35).then_some(e.cosine)
            })
        },
        &retrieve,
    );
    push(
        "hybrid (RRF of vector + full text)",
        false,
        &|q| ordered(q, shown, |i| Some(-(i as f64))),
        &retrieve,
    );
    if stage.cross_encoder {
        push(
            "+ rerank (cross-encoder order)",
            false,
            &|q| ordered(q, shown, |i| q.set.candidates[i].evidence.rerank),
            &rerank,
        );
    }
    if stage.late {
        push(
            "+ late interaction (MaxSim order)",
            false,
            &|q| ordered(q, shown, |i| q.set.candidates[i].evidence.late),
            &late,
        );
    }
    let evidence_order = |q: &QueryCandidates| {
        let model: &Model = fold_params[&q.fold].model(stage.any());
        ordered(q, shown, |i| {
            let x = features(&stage.apply(&q.set.candidates[i].evidence));
            Some(model.confidence(&x))
        })
    };
    push(
        "+ evidence (calibrated order, no abstention)",
        true,
        &evidence_order,
        &rerank,
    );
    let family = production.recognition.family;
    let decision = |stage, contradictions| Decision {
        stage,
        contradictions,
        family,
        shown,
    };
    push(
        "+ decision (strong / possible / nothing)",
        true,
        &|q| {
            decided(
                q,
                &fold_params[&q.fold],
                &production.ranking,
                decision(stage, true),
            )
        },
        &rerank,
    );
    push(
        "+ decision without the family order (confidence order and cut for every lead)",
        true,
        &|q| {
            decided(
                q,
                &fold_params[&q.fold],
                &production.ranking,
                Decision {
                    family: FamilyOrder::OFF,
                    ..decision(stage, true)
                },
            )
        },
        &rerank,
    );
    push(
        "+ decision, the query's denials ignored (no contradiction rule)",
        true,
        &|q| {
            decided(
                q,
                &without_contradictions[&q.fold],
                &production.ranking,
                decision(stage, false),
            )
        },
        &rerank,
    );
    push(
        "+ decision without the root-cause evidence",
        true,
        &|q| {
            decided(
                q,
                &without_root_cause[&q.fold],
                &production.ranking,
                decision(stage, true),
            )
        },
        &rerank,
    );
    if stage.any() {
        push(
            "+ decision without the rerank stage (degraded search)",
            true,
            &|q| {
                decided(
                    q,
                    &fold_params[&q.fold],
                    &production.ranking,
                    decision(RerankStage::NONE, true),
                )
            },
            &retrieve,
        );
    }
    push(
        "configured (search.recognition as deployed)",
        false,
        &|q| {
            let deeper = configured_decision(q, stage, production, usize::MAX);
            let shown = configured_decision(q, stage, production, shown.0);
            answer_of(q, &shown, &deeper)
        },
        &rerank,
    );
    rows
}

/// What the configured recognition decides for `qc` (the production decision on the same
/// candidates), `stage` being the scores every query's candidates carry.
fn configured_decision(
    qc: &QueryCandidates,
    stage: RerankStage,
    production: &SearchSettings,
    keep: usize,
) -> Vec<Decided> {
    decision_of(
        qc,
        &production.recognition,
        &production.ranking,
        Decision {
            stage: RerankStage {
                cross_encoder: stage.cross_encoder && production.rerank,
                late: stage.late,
            },
            contradictions: true,
            family: production.recognition.family,
            shown: Shown::of(production),
        },
        keep,
    )
}

/// The configured decision of every query, in order: what the verification row verifies.
pub fn configured_decisions(
    queries: &[QueryCandidates],
    production: &SearchSettings,
) -> Vec<Vec<Decided>> {
    let stage = RerankStage::of(queries);
    queries
        .iter()
        .map(|q| configured_decision(q, stage, production, Shown::of(production).0))
        .collect()
}

/// The row of the optional LLM verification: `verified[i]` is the configured decision of
/// `queries[i]` after the verification stage relabelled it, `verify_ms[i]` what that stage
/// took (added to the search's time up to the rerank stage). Not cross-validated: it
/// verifies the deployed decision. `unavailable` counts the queries whose verification
/// failed or ran out of time (their labels are the calibrated decision's).
pub fn verified_row(
    queries: &[QueryCandidates],
    verified: &[Vec<Decided>],
    verify_ms: &[f64],
    unavailable: usize,
    production: &SearchSettings,
) -> VariantRow {
    // Verification relabels, it never reorders: the reciprocal rank is the configured
    // decision's over every candidate, as in the `configured` row.
    let stage = RerankStage::of(queries);
    let answers: Vec<Answer> = queries
        .iter()
        .zip(verified)
        .map(|(q, list)| {
            answer_of(
                q,
                list,
                &configured_decision(q, stage, production, usize::MAX),
            )
        })
        .collect();
    let times: Vec<f64> = queries
        .iter()
        .zip(verify_ms)
        .map(|(q, ms)| rerank_latency(q) + ms)
        .collect();
    let name = match unavailable {
        0 => "+ LLM verify (the configured decision, then one call per query)".to_owned(),
        n => format!(
            "+ LLM verify (the configured decision, then one call per query; {n} of {} \
             unavailable, left as decided)",
            queries.len()
        ),
    };
    row_of(&name, false, queries, &answers, times)
}

/// The time of one search up to the rerank stage: the cross-encoder and the token vectors'
/// load run concurrently.
fn rerank_latency(q: &QueryCandidates) -> f64 {
    let t = &q.set.timings;
    t.embed_ms + t.retrieve_ms + t.rerank_ms.max(t.late_ms)
}

/// A cross-validated variant over repeated shuffles of the families over the folds: the
/// mean and spread of each shuffle's pooled held-out figures.
#[derive(Debug, Clone, Serialize)]
pub struct RepeatedRow {
    pub name: String,
    pub repeats: usize,
    pub mean: Summary,
    pub sd: Summary,
}

/// Every cross-validated variant of [`compare`], over `repeats` seeded shuffles of the
/// families (and novel queries) over `folds` folds: one list of rows per memory of
/// `memories`, in that order (each shuffle's fits are shared by every memory). One split of
/// a few dozen families is too few to choose by: the same configuration's sibling-strong
/// share moved by ±0.1 between splits of the dev corpus.
pub fn repeated(
    queries: &[QueryCandidates],
    memories: &[Memory],
    folds: usize,
    repeats: usize,
    production: &SearchSettings,
) -> Vec<Vec<RepeatedRow>> {
    let mut by_memory: Vec<Vec<(String, Vec<Summary>)>> = vec![Vec::new(); memories.len()];
    for seed in 0..repeats {
        let assignment = shuffled_folds(queries, folds, seed as u64);
        let shuffled: Vec<QueryCandidates> = queries
            .iter()
            .zip(assignment)
            .map(|(q, fold)| QueryCandidates { fold, ..q.clone() })
            .collect();
        let fits = FoldFits::fit(&shuffled, folds);
        for (memory, by_name) in memories.iter().zip(&mut by_memory) {
            for row in compare(&shuffled, *memory, &fits, production)
                .into_iter()
                .filter(|r| r.cross_validated)
            {
                match by_name.iter_mut().find(|(name, _)| *name == row.name) {
                    Some((_, summaries)) => summaries.push(row.summary),
                    None => by_name.push((row.name, vec![row.summary])),
                }
            }
        }
    }
    by_memory
        .into_iter()
        .map(|by_name| {
            by_name
                .into_iter()
                .map(|(name, summaries)| RepeatedRow {
                    name,
                    repeats: summaries.len(),
                    mean: fold_stat(&summaries, false),
                    sd: fold_stat(&summaries, true),
                })
                .collect()
        })
        .collect()
}

fn row(
    name: &str,
    cross_validated: bool,
    queries: &[QueryCandidates],
    answer: &dyn Fn(&QueryCandidates) -> Answer,
    latency: &dyn Fn(&QueryCandidates) -> f64,
) -> VariantRow {
    let answers: Vec<Answer> = queries.iter().map(answer).collect();
    row_of(
        name,
        cross_validated,
        queries,
        &answers,
        queries.iter().map(latency).collect(),
    )
}

/// A row from each query's answer and search time (in `queries` order).
fn row_of(
    name: &str,
    cross_validated: bool,
    queries: &[QueryCandidates],
    answers: &[Answer],
    mut times: Vec<f64>,
) -> VariantRow {
    let scores: Vec<(usize, QueryScores)> = queries
        .iter()
        .zip(answers)
        .map(|(q, a)| (q.fold, score(q, a)))
        .collect();
    let all: Vec<QueryScores> = scores.iter().map(|(_, s)| *s).collect();
    let mut by_fold: BTreeMap<usize, Vec<QueryScores>> = BTreeMap::new();
    for (fold, s) in &scores {
        by_fold.entry(*fold).or_default().push(*s);
    }
    let per_fold: Vec<Summary> = by_fold.values().map(|s| summarise(s)).collect();
    times.sort_by(f64::total_cmp);
    VariantRow {
        name: name.to_owned(),
        cross_validated,
        summary: summarise(&all),
        fold_mean: fold_stat(&per_fold, false),
        fold_sd: fold_stat(&per_fold, true),
        latency_p50_ms: percentile(&times, 0.50),
        latency_p95_ms: percentile(&times, 0.95),
    }
}

/// Mean (or standard deviation) of each metric over the folds that have it.
fn fold_stat(folds: &[Summary], sd: bool) -> Summary {
    let stat = |get: fn(&Summary) -> Option<f64>| {
        let values: Vec<f64> = folds.iter().filter_map(get).collect();
        if values.is_empty() {
            return None;
        }
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        if !sd {
            return Some(mean);
        }
        let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / values.len() as f64;
        Some(var.sqrt())
    };
    Summary {
        sibling_queries: folds.iter().map(|f| f.sibling_queries).sum(),
        novel_queries: folds.iter().map(|f| f.novel_queries).sum(),
        recall_at_1: stat(|s| s.recall_at_1),
        recall_at_3: stat(|s| s.recall_at_3),
        mrr: stat(|s| s.mrr),
        sibling_empty: stat(|s| s.sibling_empty),
        novel_false_positive: stat(|s| s.novel_false_positive),
        novel_strong: stat(|s| s.novel_strong),
        sibling_strong: stat(|s| s.sibling_strong),
    }
}

pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_pick_the_nearest_rank() {
        let sorted = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(percentile(&sorted, 0.5), 3.0);
        assert_eq!(percentile(&sorted, 0.95), 5.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }

    pub(super) fn query(relevant: &[&str]) -> QueryCandidates {
        QueryCandidates {
            id: {
                use std::sync::atomic::{AtomicUsize, Ordering};
                static NEXT: AtomicUsize = AtomicUsize::new(0);
                format!("q-{}", NEXT.fetch_add(1, Ordering::Relaxed))
            },
            memory: Memory::Records,
            relevant: relevant.iter().map(|r| (*r).to_owned()).collect(),
            family: {
                let mut members: Vec<&str> = relevant.to_vec();
                members.sort();
                members.join(" ")
            },
            fold: 0,
            set: CandidateSet {
                query: Default::default(),
                candidates: Vec::new(),
                timings: Default::default(),
                degraded: Vec::new(),
            },
            incidents: Vec::new(),
        }
    }

    #[test]
    fn the_verification_row_scores_the_labels_the_verification_left() {
        use deja_domain::recognition::{Candidate, Evidence};
        // One sibling query whose only candidate, a family member, was decided `strong`.
        let episode = deja_domain::testing::episode("ep-1");
        let mut qc = query(&["inc-1"]);
        qc.set.candidates = vec![Candidate {
            episode: episode.clone(),
            evidence: Evidence::default(),
        }];
        qc.incidents = vec!["inc-1".to_owned()];
        qc.set.timings.retrieve_ms = 30.0;
        let verified = |strength| {
            vec![vec![Decided {
                episode: episode.clone(),
                evidence: Evidence::default(),
                confidence: 0.9,
                strength,
                breakdown: Default::default(),
            }]]
        };

        let row = |strength, unavailable| {
            verified_row(
                std::slice::from_ref(&qc),
                &verified(strength),
                &[12.0],
                unavailable,
                &deja_config::Settings::defaults().search,
            )
        };

        let kept = row(MatchStrength::Strong, 0);
        assert_eq!(kept.summary.sibling_strong, Some(1.0));
        assert_eq!(kept.summary.recall_at_1, Some(1.0));
        assert_eq!(
            kept.latency_p50_ms, 42.0,
            "the search's time plus the call's"
        );
        assert!(!kept.cross_validated && !kept.name.contains("unavailable"));

        // Demoted by a `no`: still the first lead, no longer a recognized recurrence.
        let demoted = row(MatchStrength::Possible, 1);
        assert_eq!(demoted.summary.sibling_strong, Some(0.0));
        assert_eq!(demoted.summary.recall_at_1, Some(1.0));
        assert!(
            demoted.name.contains("1 of 1 unavailable"),
            "{}",
            demoted.name
        );
    }

    /// A candidate past the ones a default-limit search decides (here the 3rd of 3, with 2
    /// shown) never enters the top answer, however it scores; it still counts for the
    /// reciprocal rank, which a deeper search reads.
    #[test]
    fn the_top_answer_comes_from_the_candidates_a_default_search_decides() {
        use deja_domain::recognition::{Candidate, Evidence};
        let mut qc = query(&["inc-3"]);
        for id in ["inc-1", "inc-2", "inc-3"] {
            qc.set.candidates.push(Candidate {
                episode: deja_domain::testing::episode(id),
                evidence: Evidence::default(),
            });
            qc.incidents.push(id.to_owned());
        }
        let by_index_descending = |i: usize| Some(i as f64);
        let answer = ordered(&qc, Shown(2), by_index_descending);
        assert_eq!(answer.answer, vec!["inc-2", "inc-1"]);
        assert_eq!(answer.deeper, vec!["inc-3", "inc-2", "inc-1"]);
        let all = ordered(&qc, Shown(3), by_index_descending);
        assert_eq!(all.answer, vec!["inc-3", "inc-2", "inc-1"]);
    }

    #[test]
    fn fold_statistics_are_mean_and_spread_of_the_folds() {
        let fold = |r1: f64| Summary {
            sibling_queries: 2,
            novel_queries: 1,
            recall_at_1: Some(r1),
            recall_at_3: None,
            mrr: None,
            sibling_empty: None,
            novel_false_positive: None,
            novel_strong: None,
            sibling_strong: None,
        };
        let folds = [fold(0.5), fold(1.0)];
        assert_eq!(fold_stat(&folds, false).recall_at_1, Some(0.75));
        assert_eq!(fold_stat(&folds, true).recall_at_1, Some(0.25));
        assert_eq!(fold_stat(&folds, false).recall_at_3, None);
        assert_eq!(fold_stat(&folds, false).sibling_queries, 4);
    }
}
