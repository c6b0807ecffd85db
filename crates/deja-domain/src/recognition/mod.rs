//! Recognition: from a query's candidates to "we have seen this before" — or to nothing.
//!
//! The pipeline (its IO stages live in `deja-recognition`, run by memory-search and the worker's
//! recurrence linking; every rule is here):
//!
//! ```text
//! candidates  vector search top N  ∪  full-text top N      (tenant-scoped, by the store)
//! fuse        reciprocal-rank fusion, keep the best `rerank_candidates`       fuse()
//! rerank      cross-encoder logit of (query, episode text) for each           (adapter)
//! evidence    components, issue type, literals shared with the query          annotate()
//! decide      calibrated confidence = σ(model · features) → strong | possible | dropped;
//!             a candidate whose root cause the query denies is `possible` at most   negation
//!             the first lead: the best that passes `possible` and is not contradicted
//!             (none: "nothing similar"); the next: the leads most like it     FamilyOrder
//! ```
//!
//! The model is a logistic regression over a handful of features whose weights and the two
//! thresholds are chosen by `deja eval retrieval` with cross-validation over root-cause
//! families (docs/ranking.md, docs/EVALUATION.md). When the reranker did not run for a
//! search, a second calibration fitted without its feature decides instead: a degraded
//! search is still calibrated, never mixed.

mod calibrate;
mod evidence;
pub mod healthy;
pub mod late;
pub mod links;
pub mod negation;
pub mod verify;

pub use calibrate::{fit, CalibrationCandidate, CalibrationQuery, FitOptions, Thresholds};
pub use evidence::{Evidence, QueryText};
pub use late::{max_sim, source_stamp, TokenVectors, TokenVectorsError};
pub use links::{link_bar, link_figures, LinkBar, LinkFigures, FALSE_LINK_WEIGHT};

use crate::ranking::{self, terms::resolved_with_matching_root_cause, RankingParams};
use crate::Episode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// How sure deja is that a returned episode is the same failure as the query's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MatchStrength {
    /// A recognized recurrence: same failure mechanism with high confidence. Only these
    /// feed strategies and recurrence links.
    Strong,
    /// A lead worth one check: similar symptoms, mechanism unconfirmed.
    Possible,
}

impl MatchStrength {
    pub fn as_str(self) -> &'static str {
        match self {
            MatchStrength::Strong => "strong",
            MatchStrength::Possible => "possible",
        }
    }
}

/// How many numbers a feature vector has.
pub const FEATURE_COUNT: usize = 8;

/// The numbers a feature vector is made of, in [`Model`] order.
pub const FEATURES: [&str; FEATURE_COUNT] = [
    "rerank",
    "cosine",
    "fused",
    "component",
    "issue_type",
    "literal",
    "root_cause",
    "late",
];

/// One candidate's feature vector, in [`FEATURES`] order.
pub type Features = [f64; FEATURE_COUNT];

/// A logistic model: confidence = σ(bias + Σ weight × feature).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    pub bias: f64,
    /// Cross-encoder logit (0 in the model used when reranking did not run).
    pub rerank: f64,
    pub cosine: f64,
    /// 1/(1 + semantic rank) + 1/(1 + full-text rank), each 0 when absent.
    pub fused: f64,
    /// Share of up to two named components.
    pub component: f64,
    pub issue_type: f64,
    /// Share of up to three shared literals.
    pub literal: f64,
    /// Share of the episode's root-cause words the query names (0 without a root cause).
    /// Absent from calibrations written before it existed: weight 0.
    #[serde(default)]
    pub root_cause: f64,
    /// Late-interaction coverage of the query by the episode ([`late::max_sim`], in [-1, 1];
    /// 0 when not computed). Absent from calibrations written before it existed: weight 0.
    #[serde(default)]
    pub late: f64,
    /// At or above: `strong`.
    pub strong: f64,
    /// At or above (and below `strong`): `possible`; below: not returned.
    pub possible: f64,
}

impl Model {
    pub fn weights(&self) -> Features {
        [
            self.rerank,
            self.cosine,
            self.fused,
            self.component,
            self.issue_type,
            self.literal,
            self.root_cause,
            self.late,
        ]
    }

    pub fn from_weights(bias: f64, w: Features, thresholds: Thresholds) -> Self {
        Model {
            bias,
            rerank: w[0],
            cosine: w[1],
            fused: w[2],
            component: w[3],
            issue_type: w[4],
            literal: w[5],
            root_cause: w[6],
            late: w[7],
            strong: thresholds.strong,
            possible: thresholds.possible,
        }
    }

    pub fn confidence(&self, features: &Features) -> f64 {
        let z = self.bias
            + self
                .weights()
                .iter()
                .zip(features)
                .map(|(w, x)| w * x)
                .sum::<f64>();
        sigmoid(z)
    }

    pub fn strength(&self, confidence: f64) -> Option<MatchStrength> {
        if confidence >= self.strong {
            Some(MatchStrength::Strong)
        } else if confidence >= self.possible {
            Some(MatchStrength::Possible)
        } else {
            None
        }
    }
}

/// The two calibrations: with the cross-encoder's logit, and without it (reranker absent,
/// failed or out of time).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecognitionParams {
    pub reranked: Model,
    pub cosine_only: Model,
    /// Which leads follow the first, in which order (off when absent).
    #[serde(default)]
    pub family: FamilyOrder,
}

impl RecognitionParams {
    pub fn model(&self, reranked: bool) -> &Model {
        if reranked {
            &self.reranked
        } else {
            &self.cosine_only
        }
    }

    /// The calibration that decides `evidence`: `reranked` when the rerank stage gave the
    /// candidate every score that calibration weighs, else `cosine_only`. A weighed score
    /// missing (the token vectors failed to load while the cross-encoder answered, an
    /// episode without current token vectors) would count as 0 and sink the candidate: the
    /// shipped `late` weight is 32 against a bias of -28, so every lead would be dropped and
    /// the search would answer "nothing similar" for a stage that failed.
    pub fn model_for(&self, evidence: &Evidence) -> &Model {
        let scored = |weight: f64, score: Option<f64>| weight == 0.0 || score.is_some();
        let reranked = evidence.reranked()
            && scored(self.reranked.rerank, evidence.rerank)
            && scored(self.reranked.late, evidence.late);
        self.model(reranked)
    }
}

pub fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

/// The feature vector of one candidate, in [`FEATURES`] order.
pub fn features(evidence: &Evidence) -> Features {
    let reciprocal = |rank: Option<usize>| rank.map_or(0.0, |r| 1.0 / (1.0 + r as f64));
    [
        evidence.rerank.unwrap_or(0.0),
        evidence.cosine,
        reciprocal(evidence.semantic_rank) + reciprocal(evidence.text_rank),
        evidence.components.len().min(2) as f64 / 2.0,
        if evidence.issue_type { 1.0 } else { 0.0 },
        evidence.literals.len().min(3) as f64 / 3.0,
        evidence.root_cause,
        evidence.late.unwrap_or(0.0),
    ]
}

/// One candidate of a search: the episode and what links it to the query.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub episode: Episode,
    pub evidence: Evidence,
}

/// Merges the vector search's and the full-text search's lists (each best first) into one
/// candidate list ordered by reciprocal-rank fusion (k = 60), keeping the best `keep`.
/// An episode found by full text only gets the lowest cosine of the semantic list (see
/// [`Evidence::cosine`]); 0 when the semantic list is empty.
pub fn fuse(
    semantic: Vec<(Episode, f64)>,
    text: Vec<(Episode, f64)>,
    keep: usize,
) -> Vec<Candidate> {
    let floor_cosine = semantic.last().map_or(0.0, |(_, cosine)| *cosine);
    let semantic_ids: Vec<String> = semantic.iter().map(|(e, _)| e.id.clone()).collect();
    let text_ids: Vec<String> = text.iter().map(|(e, _)| e.id.clone()).collect();
    let mut by_id: HashMap<String, Candidate> = HashMap::new();
    for (rank, (episode, cosine)) in semantic.into_iter().enumerate() {
        let evidence = Evidence {
            cosine,
            semantic_rank: Some(rank),
            ..Evidence::default()
        };
        by_id.insert(episode.id.clone(), Candidate { episode, evidence });
    }
    for (rank, (episode, _)) in text.into_iter().enumerate() {
        by_id
            .entry(episode.id.clone())
            .or_insert_with(|| Candidate {
                episode,
                evidence: Evidence {
                    cosine: floor_cosine,
                    ..Evidence::default()
                },
            })
            .evidence
            .text_rank = Some(rank);
    }
    let mut fused: Vec<(f64, Candidate)> =
        ranking::reciprocal_rank_fusion(&[semantic_ids, text_ids], 60.0)
            .into_iter()
            .filter_map(|(id, score)| by_id.remove(&id).map(|c| (score, c)))
            .collect();
    // Equal fused scores are common (rank 9 of one list only and rank 9 of the other only
    // both score 1/70), and the cut to `keep` falls among them: the closer vector first,
    // then the conversation's id — stable where the episode id, a hash, is not across
    // stores of the same conversations.
    fused.sort_by(|(a_score, a), (b_score, b)| {
        b_score
            .total_cmp(a_score)
            .then_with(|| b.evidence.cosine.total_cmp(&a.evidence.cosine))
            .then_with(|| a.episode.correlation_id.cmp(&b.episode.correlation_id))
            .then_with(|| a.episode.id.cmp(&b.episode.id))
    });
    fused.into_iter().take(keep).map(|(_, c)| c).collect()
}

/// A candidate after the decision.
#[derive(Debug, Clone, PartialEq)]
pub struct Decided {
    pub episode: Episode,
    pub evidence: Evidence,
    pub confidence: f64,
    pub strength: MatchStrength,
    pub breakdown: ranking::ScoreBreakdown,
}

/// Fills the lexical evidence of every candidate (the "evidence" stage).
pub fn annotate(query: &QueryText, candidates: &mut [Candidate]) {
    for candidate in candidates {
        query.annotate(&candidate.episode, &mut candidate.evidence);
    }
}

/// How the leads after the first are chosen and ordered: the episodes most like the first
/// lead come next. A recurring failure leaves several past incidents that resemble each
/// other (each worded by another on-call engineer), and the query usually reads most like one
/// of them; the others then resemble that one more than they resemble the query — most in
/// what failed and why, so leads are compared by their cause vectors (the embedding of
/// [`Episode::cause_text`], [`Evidence::cause_vector`]), not by their symptoms' wording. Off
/// (the order and cut of the first lead for everyone) when `weight` is 0, or when a cause
/// vector is missing.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FamilyOrder {
    /// Logit points per unit of cosine between a lead's cause vector and the first lead's.
    pub weight: f64,
    /// The lowest confidence of a lead shown after the first because it resembles it
    /// (at or above `possible`, every lead is shown anyway).
    pub floor: f64,
}

impl FamilyOrder {
    pub const OFF: FamilyOrder = FamilyOrder {
        weight: 0.0,
        floor: 1.0,
    };

    pub fn is_on(&self) -> bool {
        self.weight > 0.0
    }
}

impl Default for FamilyOrder {
    fn default() -> Self {
        FamilyOrder::OFF
    }
}

/// Cosine of two embeddings ([`ranking::cosine`]); `None` when either is missing, they differ
/// in length, or one is all zeros (or empty): nothing to compare.
pub fn embedding_cosine(a: Option<&[f32]>, b: Option<&[f32]>) -> Option<f64> {
    let (a, b) = (a?, b?);
    let blank = |v: &[f32]| v.iter().all(|x| *x == 0.0);
    if a.len() != b.len() || blank(a) || blank(b) {
        return None;
    }
    Some(ranking::cosine(a, b))
}

/// Decides a query's candidates (evidence already filled by [`annotate`]; below the
/// similarity floor, a cheap gate off by default, they are dropped first), each with the
/// calibration matching whether reranking ran:
///
/// 1. the *first lead* is the best-ranked candidate (the ranking formula with the confidence
///    as its relevance; recency and the effectiveness tie-breaks apply as documented) at or
///    above `possible` that the query does not contradict. Without one memory has nothing
///    similar: the answer is empty, even when a contradicted candidate scored higher;
/// 2. the other leads follow: those at or above `possible`, and, with the family order on,
///    those at or above its `floor` — `strong` ones first, contradicted ones last, each group
///    ordered by their confidence's logit plus `family.weight` × their cosine to the first
///    lead ([`FamilyOrder`]);
/// 3. a lead is `strong` at or above the model's `strong` unless the query contradicts it,
///    `possible` otherwise.
///
/// Returns at most `limit`, and whether more passed.
pub fn decide(
    candidates: Vec<Candidate>,
    query: &QueryText,
    params: &RecognitionParams,
    ranking_params: &RankingParams,
    limit: usize,
    now: DateTime<Utc>,
) -> (Vec<Decided>, bool) {
    let family = params.family;
    // Kept: the candidates a lead may be made of, each with whether it passes `possible`
    // on its own.
    let mut decided: Vec<(ranking::ScoreBreakdown, (Decided, bool))> = candidates
        .into_iter()
        .filter(|c| ranking_params.passes_floor(c.evidence.cosine))
        .filter_map(|Candidate { episode, evidence }| {
            let model = params.model_for(&evidence);
            let confidence = model.confidence(&features(&evidence));
            let labelled = model.strength(confidence);
            let passes = labelled.is_some();
            let may_follow = family.is_on() && confidence >= family.floor;
            if !(passes || may_follow) {
                return None;
            }
            let strength = match labelled {
                // The query denies this episode's cause, or a person marked it wrong: a lead
                // at most (never a recognized recurrence, nor a strategy's source).
                Some(MatchStrength::Strong)
                    if evidence.contradicted.is_empty() && !episode.review.is_wrong() =>
                {
                    MatchStrength::Strong
                }
                // Below `possible`, shown only as a lead resembling the first.
                _ => MatchStrength::Possible,
            };
            let breakdown = ranking_params.score(
                &ranking::Candidate {
                    similarity: evidence.cosine,
                    relevance: confidence,
                    effectiveness_score: episode.effectiveness_score,
                    resolved_with_root_cause: resolved_with_matching_root_cause(
                        episode.resolved,
                        episode.root_cause.as_deref(),
                        query.terms(),
                    ),
                    last_confirmed_at: episode.last_confirmed_at,
                },
                now,
            );
            let decided = Decided {
                episode,
                evidence,
                confidence,
                strength,
                breakdown,
            };
            Some((breakdown, (decided, passes)))
        })
        .collect();
    ranking::sort_ranked(&mut decided, |(d, _)| d.episode.id.as_str());
    // The first lead: the best the query does not contradict, one no person marked wrong
    // when there is such a one (a wrong episode still opens an answer it alone would make:
    // its verdict tells the agent what was ruled out).
    let opens = |(_, (d, passes)): &(ranking::ScoreBreakdown, (Decided, bool))| {
        *passes && d.evidence.contradicted.is_empty()
    };
    let Some(first) = decided
        .iter()
        .position(|entry| opens(entry) && !entry.1 .0.episode.review.is_wrong())
        .or_else(|| decided.iter().position(opens))
    else {
        return (Vec::new(), false);
    };
    let (_, (first, _)) = decided.remove(first);
    let mut rest: Vec<(f64, Decided)> = decided
        .into_iter()
        .filter_map(|(_, (mut d, passes))| {
            let cosine = family
                .is_on()
                .then(|| {
                    embedding_cosine(
                        first.evidence.cause_vector.as_deref(),
                        d.evidence.cause_vector.as_deref(),
                    )
                })
                .flatten();
            // Below `possible`, a lead is shown only for its resemblance to the first.
            if !passes && cosine.is_none() {
                return None;
            }
            d.evidence.first_lead_cosine = cosine;
            let key = logit(d.confidence) + family.weight * cosine.unwrap_or(0.0);
            Some((key, d))
        })
        .collect();
    if family.is_on() {
        // Stable: equal keys keep the ranking's order.
        rest.sort_by(|(a, _), (b, _)| b.total_cmp(a));
    }
    // Recognized recurrences before leads, and leads the query contradicts after every
    // other, each group in its order (a stable sort).
    rest.sort_by_key(|(_, d)| {
        (
            !d.evidence.contradicted.is_empty(),
            d.episode.review.is_wrong(),
            d.strength != MatchStrength::Strong,
        )
    });
    let mut leads: Vec<Decided> = std::iter::once(first)
        .chain(rest.into_iter().map(|(_, d)| d))
        .collect();
    let more_available = leads.len() > limit;
    leads.truncate(limit);
    (leads, more_available)
}

fn logit(p: f64) -> f64 {
    let p = p.clamp(1e-9, 1.0 - 1e-9);
    (p / (1.0 - p)).ln()
}

/// The older episode a new conversation's episode recurs, as the recognition decision sees
/// it: the most confident `strong` match of the same org and team created before it (never
/// itself, nor a newer episode: links point from the newer conversation to the older one, so
/// a chain has no cycle), and never one a person marked wrong: its conclusion is the one memory
/// must not repeat. `None` when the decision recognized nothing: a look-alike that only earned
/// `possible` is not a recurrence.
pub fn recurrence_target<'a>(episode: &Episode, decided: &'a [Decided]) -> Option<&'a Decided> {
    decided
        .iter()
        .filter(|d| d.strength == MatchStrength::Strong)
        .filter(|d| {
            let other = &d.episode;
            !other.review.is_wrong()
                && other.id != episode.id
                && other.org == episode.org
                && other.team == episode.team
                && other.correlation_id != episode.correlation_id
                && other.created_at < episode.created_at
        })
        .max_by(|a, b| {
            a.confidence
                .total_cmp(&b.confidence)
                .then_with(|| b.episode.id.cmp(&a.episode.id))
        })
}

/// For a `possible` lead: the one check that would confirm or discard it — the past root
/// cause to test for, how it was confirmed then, and what was ruled out then. An episode that
/// recorded no root cause (an investigation that did not find one) has no cause to test: its
/// check is then what was observed then, to compare with what is observed now.
pub fn discriminating_check(episode: &Episode) -> String {
    let root_cause = episode
        .root_cause
        .as_deref()
        .map(str::trim)
        .filter(|r| !r.is_empty());
    let mut check = match root_cause {
        Some(root_cause) => format!(
            "Check whether this is the same cause: {}",
            root_cause.trim_end_matches('.')
        ),
        None => {
            let observed: Vec<&str> = crate::episode::observed_findings(&episode.key_findings)
                .map(|f| f.trim().trim_end_matches('.'))
                .filter(|f| !f.is_empty())
                .take(3)
                .collect();
            let summary = episode.summary.trim().trim_end_matches('.');
            let what = if !observed.is_empty() {
                observed.join("; ")
            } else if !summary.is_empty() {
                summary.to_owned()
            } else {
                episode
                    .issue_description
                    .trim()
                    .trim_end_matches('.')
                    .to_owned()
            };
            format!(
                "No root cause was found for this incident; compare what was observed then \
                 with your evidence: {what}"
            )
        }
    };
    let confirmed_by = crate::episode::verification_of(&episode.key_findings)
        .or(episode.resolution.as_deref())
        .map(str::trim)
        .filter(|v| !v.is_empty() && root_cause.is_some());
    if let Some(confirmed_by) = confirmed_by {
        check.push_str(&format!(
            ". Last time it was confirmed by: {}",
            confirmed_by.trim_end_matches('.')
        ));
    }
    if !episode.ruled_out.is_empty() {
        check.push_str(&format!(
            ". Ruled out then: {}",
            episode.ruled_out.join("; ")
        ));
    }
    check.push('.');
    check
}

/// The check of a `possible` lead as the answer shows it: [`discriminating_check`], and,
/// when the query denies the lead's cause, which of its words it denies — usually the
/// check is already answered.
pub fn lead_check(decided: &Decided) -> String {
    let mut check = discriminating_check(&decided.episode);
    if !decided.evidence.contradicted.is_empty() {
        check.push_str(&format!(
            " Your evidence already says this does not apply ({} is denied in the query), \
             so this is the least likely lead.",
            decided.evidence.contradicted.join(", ")
        ));
    }
    check
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::episode;

    #[test]
    fn the_check_names_the_cause_how_it_was_confirmed_and_what_was_ruled_out() {
        let mut e = episode("a");
        e.root_cause = Some("idle timeout of the load balancer below the pool's".into());
        e.key_findings = vec!["Verification: no resets for a week.".into()];
        e.ruled_out = vec!["DNS".into(), "TLS".into()];
        assert_eq!(
            discriminating_check(&e),
            "Check whether this is the same cause: idle timeout of the load balancer below \
             the pool's. Last time it was confirmed by: no resets for a week. Ruled out then: \
             DNS; TLS."
        );
        e.root_cause = None;
        e.key_findings = vec![
            "evicted_keys climbed to 40k/s.".into(),
            "Verification: no resets for a week.".into(),
        ];
        assert_eq!(
            discriminating_check(&e),
            "No root cause was found for this incident; compare what was observed then with \
             your evidence: evicted_keys climbed to 40k/s. Ruled out then: DNS; TLS."
        );
        e.key_findings.clear();
        e.summary = "Sessions dropped; cause unknown.".into();
        assert!(discriminating_check(&e)
            .ends_with("evidence: Sessions dropped; cause unknown. Ruled out then: DNS; TLS."));
    }

    #[test]
    fn a_recurrence_links_to_the_most_confident_older_strong_match_of_the_same_team() {
        let decided = |id: &str, strength, confidence, age_hours: i64, team: &str| {
            let mut e = episode(id);
            e.team = team.into();
            e.created_at = now() - chrono::Duration::hours(age_hours);
            Decided {
                episode: e,
                evidence: Evidence::default(),
                confidence,
                strength,
                breakdown: ranking::ScoreBreakdown::default(),
            }
        };
        let mut new = episode("new");
        new.created_at = now();
        let found = vec![
            decided("possible", MatchStrength::Possible, 0.99, 5, "checkout"),
            decided("newer", MatchStrength::Strong, 0.97, -1, "checkout"),
            decided("other-team", MatchStrength::Strong, 0.96, 5, "payments"),
            decided("older", MatchStrength::Strong, 0.85, 48, "checkout"),
            decided("old", MatchStrength::Strong, 0.9, 24, "checkout"),
            decided("new", MatchStrength::Strong, 1.0, 0, "checkout"),
        ];
        let target = recurrence_target(&new, &found).expect("a strong older match");
        assert_eq!(target.episode.id, "old");
        // One a person marked wrong is no recurrence to link: the next best is.
        let mut marked = found.clone();
        marked[4].episode.review.verdict = Some(crate::review::VERDICT_WRONG.into());
        let target = recurrence_target(&new, &marked).expect("another strong older match");
        assert_eq!(target.episode.id, "older");
        // A look-alike the decision only calls `possible` is not a recurrence.
        assert!(recurrence_target(&new, &found[..3]).is_none());
    }

    fn model(strong: f64, possible: f64) -> Model {
        Model {
            bias: -4.0,
            rerank: 0.5,
            cosine: 4.0,
            fused: 0.5,
            component: 0.0,
            issue_type: 0.0,
            literal: 1.0,
            root_cause: 0.0,
            late: 0.0,
            strong,
            possible,
        }
    }

    fn labels(decided: &[Decided]) -> Vec<(&str, MatchStrength)> {
        decided
            .iter()
            .map(|d| (d.episode.id.as_str(), d.strength))
            .collect()
    }

    fn params() -> RecognitionParams {
        RecognitionParams {
            reranked: model(0.8, 0.3),
            cosine_only: Model {
                rerank: 0.0,
                ..model(0.7, 0.3)
            },
            family: FamilyOrder::OFF,
        }
    }

    fn now() -> DateTime<Utc> {
        DateTime::from_timestamp(1_780_000_000, 0).unwrap()
    }

    /// The shipped kind of calibration: late interaction weighed, the cross-encoder not.
    /// A candidate the cross-encoder scored but whose token vectors failed to load is
    /// decided by `cosine_only`, not by `reranked` with its late score read as 0.
    #[test]
    fn a_candidate_missing_a_weighed_score_is_decided_without_the_rerank_stage() {
        let params = RecognitionParams {
            reranked: Model {
                rerank: 0.0,
                late: 30.0,
                bias: -28.0,
                ..model(0.8, 0.3)
            },
            cosine_only: Model {
                rerank: 0.0,
                ..model(0.7, 0.3)
            },
            family: FamilyOrder::OFF,
        };
        let scored = |rerank: Option<f64>, late: Option<f64>| Evidence {
            cosine: 0.8,
            rerank,
            late,
            ..Evidence::default()
        };
        let is_reranked = |e: &Evidence| std::ptr::eq(params.model_for(e), &params.reranked);
        assert!(is_reranked(&scored(None, Some(0.9))));
        assert!(is_reranked(&scored(Some(2.0), Some(0.9))));
        assert!(!is_reranked(&scored(Some(2.0), None)), "late missing");
        assert!(!is_reranked(&scored(None, None)));
        let cross_encoder_only = scored(Some(2.0), None);
        let confidence = params
            .model_for(&cross_encoder_only)
            .confidence(&features(&cross_encoder_only));
        assert!(confidence > 0.3, "still a lead: {confidence}");
    }

    #[test]
    fn fusion_keeps_both_lists_and_gives_text_only_hits_the_lowest_cosine() {
        let semantic = vec![(episode("a"), 0.8), (episode("b"), 0.5)];
        let text = vec![(episode("c"), 9.0), (episode("a"), 7.0)];
        let fused = fuse(semantic, text, 10);
        let ids: Vec<&str> = fused.iter().map(|c| c.episode.id.as_str()).collect();
        assert_eq!(ids[0], "a", "found by both lists, so first");
        assert_eq!(fused.len(), 3);
        let c = fused.iter().find(|c| c.episode.id == "c").unwrap();
        assert_eq!(c.evidence.cosine, 0.5);
        assert_eq!(
            (c.evidence.semantic_rank, c.evidence.text_rank),
            (None, Some(0))
        );
        assert_eq!(fuse(vec![(episode("a"), 0.8)], vec![], 0).len(), 0);
    }

    /// Equal fused scores are ordered by the closer vector, not by the episode id (a hash,
    /// another one in every store): the cut to `keep` is the same from store to store.
    #[test]
    fn fusion_breaks_ties_by_the_closer_vector_then_the_conversation() {
        let semantic = vec![
            (episode("a"), 0.9),
            (episode("b"), 0.7),
            (episode("e"), 0.5),
        ];
        // "0-…" sorts before every other id: were ties broken by id, they would win.
        let text = vec![(episode("0-c"), 9.0), (episode("0-d"), 8.0)];
        let ids = |fused: Vec<Candidate>| -> Vec<String> {
            fused.into_iter().map(|c| c.episode.id).collect()
        };
        assert_eq!(
            ids(fuse(semantic.clone(), text.clone(), 3)),
            ["a", "0-c", "b"],
            "a and 0-c tie at 1/61, b and 0-d at 1/62"
        );
        // b (vector rank 1, the lowest cosine) and z (text rank 1, given that cosine) tie on
        // both: the conversation's id decides, not the episode's.
        let mut b = episode("b");
        b.correlation_id = "conv-2".into();
        let mut z = episode("z");
        z.correlation_id = "conv-1".into();
        let tied = fuse(
            vec![(episode("a"), 0.9), (b, 0.5)],
            vec![(episode("0-c"), 9.0), (z, 8.0)],
            4,
        );
        assert_eq!(ids(tied), ["a", "0-c", "z", "b"]);
    }

    #[test]
    fn a_confident_candidate_is_strong_a_weak_one_possible_and_a_poor_one_dropped() {
        let candidate = |id: &str, cosine: f64, rerank: f64| Candidate {
            episode: episode(id),
            evidence: Evidence {
                cosine,
                rerank: Some(rerank),
                semantic_rank: Some(0),
                ..Evidence::default()
            },
        };
        let (decided, more) = decide(
            vec![
                candidate("strong", 0.7, 6.0),
                candidate("possible", 0.7, 0.0),
                candidate("dropped", 0.1, -8.0),
            ],
            &QueryText::new("anything", &[]),
            &params(),
            &RankingParams::default(),
            5,
            now(),
        );
        assert_eq!(
            labels(&decided),
            [
                ("strong", MatchStrength::Strong),
                ("possible", MatchStrength::Possible)
            ]
        );
        assert!(!more);
        assert!(decided[0].confidence > decided[1].confidence);
    }

    /// A person marked the best match wrong: it is no recognized recurrence (nor a strategy's
    /// source), and a match no one refuted opens the answer; alone, it still opens one, with
    /// its verdict.
    #[test]
    fn an_episode_marked_wrong_is_never_strong_and_opens_an_answer_only_alone() {
        let candidate = |id: &str, rerank: f64, wrong: bool| {
            let mut e = episode(id);
            if wrong {
                e.review.verdict = Some(crate::review::VERDICT_WRONG.into());
            }
            Candidate {
                episode: e,
                evidence: Evidence {
                    cosine: 0.7,
                    rerank: Some(rerank),
                    semantic_rank: Some(0),
                    ..Evidence::default()
                },
            }
        };
        let query = QueryText::new("anything", &[]);
        let (decided, _) = decide(
            vec![
                candidate("wrong", 8.0, true),
                candidate("right", 6.0, false),
            ],
            &query,
            &params(),
            &RankingParams::default(),
            5,
            now(),
        );
        assert_eq!(
            labels(&decided),
            [
                ("right", MatchStrength::Strong),
                ("wrong", MatchStrength::Possible)
            ]
        );
        let (alone, _) = decide(
            vec![candidate("wrong", 8.0, true)],
            &query,
            &params(),
            &RankingParams::default(),
            5,
            now(),
        );
        assert_eq!(labels(&alone), [("wrong", MatchStrength::Possible)]);
    }

    #[test]
    fn a_confident_candidate_whose_cause_the_query_denies_is_a_lead_ranked_last() {
        let candidate = |id: &str, rerank: f64, root_cause: &str| {
            let mut e = episode(id);
            e.root_cause = Some(root_cause.into());
            Candidate {
                episode: e,
                evidence: Evidence {
                    cosine: 0.7,
                    rerank: Some(rerank),
                    semantic_rank: Some(0),
                    ..Evidence::default()
                },
            }
        };
        let query = QueryText::new(
            "clients fail TLS to the api after the renewal; the new certificate is not \
             expired, only its SAN list changed",
            &[],
        );
        let mut candidates = vec![
            candidate(
                "expiry",
                9.0,
                "The client certificate had expired at midnight.",
            ),
            candidate(
                "san",
                6.0,
                "The renewed certificate lacked the api hostname.",
            ),
        ];
        annotate(&query, &mut candidates);
        let (decided, _) = decide(
            candidates,
            &query,
            &params(),
            &RankingParams::default(),
            5,
            now(),
        );
        assert_eq!(
            labels(&decided),
            [
                ("san", MatchStrength::Strong),
                ("expiry", MatchStrength::Possible)
            ]
        );
        let expiry = &decided[1];
        assert!(
            expiry.confidence > decided[0].confidence,
            "still the closer text"
        );
        assert_eq!(expiry.evidence.contradicted, ["expired"]);
        let check = lead_check(expiry);
        assert!(
            check.starts_with("Check whether this is the same cause"),
            "{check}"
        );
        assert!(
            check.contains("(expired is denied in the query)"),
            "{check}"
        );
        assert!(decided[0].evidence.contradicted.is_empty());
    }

    #[test]
    fn without_a_rerank_score_the_cosine_only_calibration_decides() {
        let candidate = Candidate {
            episode: episode("a"),
            evidence: Evidence {
                cosine: 0.9,
                semantic_rank: Some(0),
                ..Evidence::default()
            },
        };
        let (decided, _) = decide(
            vec![candidate],
            &QueryText::new("q", &[]),
            &params(),
            &RankingParams::default(),
            1,
            now(),
        );
        let expected = params()
            .cosine_only
            .confidence(&[0.0, 0.9, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        assert!((decided[0].confidence - expected).abs() < 1e-12);
    }

    #[test]
    fn nothing_passes_when_every_candidate_is_below_possible() {
        let candidates = (0..5)
            .map(|i| Candidate {
                episode: episode(&format!("e{i}")),
                evidence: Evidence {
                    cosine: 0.2,
                    rerank: Some(-9.0),
                    ..Evidence::default()
                },
            })
            .collect();
        let (decided, more) = decide(
            candidates,
            &QueryText::new("q", &[]),
            &params(),
            &RankingParams::default(),
            3,
            now(),
        );
        assert!(decided.is_empty() && !more);
    }

    #[test]
    fn features_are_bounded_and_in_documented_order() {
        let evidence = Evidence {
            cosine: 0.4,
            semantic_rank: Some(0),
            text_rank: Some(1),
            rerank: Some(2.5),
            late: Some(0.71),
            components: vec!["a".into(), "b".into(), "c".into()],
            issue_type: true,
            literals: vec!["x".into()],
            root_cause: 0.25,
            contradicted: vec!["expired".into()],
            first_lead_cosine: Some(0.9),
            cause_vector: Some(vec![1.0, 0.0]),
        };
        let f = features(&evidence);
        assert_eq!(f[0], 2.5);
        assert_eq!(f[1], 0.4);
        assert!((f[2] - 1.5).abs() < 1e-12);
        assert_eq!(f[3], 1.0);
        assert_eq!(f[4], 1.0);
        assert!((f[5] - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(f[6], 0.25);
        assert_eq!(f[7], 0.71);
        assert_eq!(FEATURES.len(), f.len());
    }

    /// A candidate with a cause vector pointing `angle` radians from the x axis: the cosine
    /// of two of them is the cosine of their angle difference.
    fn candidate_at(id: &str, rerank: f64, angle: f64) -> Candidate {
        Candidate {
            episode: episode(id),
            evidence: Evidence {
                cosine: 0.5,
                rerank: Some(rerank),
                semantic_rank: Some(0),
                cause_vector: Some(vec![angle.cos() as f32, angle.sin() as f32, 0.0]),
                ..Evidence::default()
            },
        }
    }

    fn with_family(weight: f64, floor: f64) -> RecognitionParams {
        RecognitionParams {
            family: FamilyOrder { weight, floor },
            ..params()
        }
    }

    #[test]
    fn leads_that_resemble_the_first_come_next_even_below_possible() {
        // The model: logit = -4 + 0.5·rerank + 4·0.5 + 0.5·1 = 0.5·rerank − 1.5.
        let candidates = || {
            vec![
                candidate_at("first", 8.0, 0.0),      // 0.92: strong
                candidate_at("recognized", 6.6, 1.5), // 0.86: strong, far from the first
                candidate_at("apart", 3.4, 1.5),      // 0.55: possible, far from the first
                candidate_at("sibling", 0.0, 0.1),    // 0.18: under possible, like the first
                candidate_at("unlike", 0.0, 1.4),     // 0.18: under possible, unlike it
                candidate_at("hopeless", -6.0, 0.0),  // 0.01: under the floor
            ]
        };
        let decide_with = |params: &RecognitionParams| {
            decide(
                candidates(),
                &QueryText::new("q", &[]),
                params,
                &RankingParams::default(),
                10,
                now(),
            )
            .0
        };
        // Off: confidence order, `possible` cut for every lead.
        let off = decide_with(&params());
        assert_eq!(
            labels(&off),
            [
                ("first", MatchStrength::Strong),
                ("recognized", MatchStrength::Strong),
                ("apart", MatchStrength::Possible)
            ]
        );
        assert!(off.iter().all(|d| d.evidence.first_lead_cosine.is_none()));

        let on = decide_with(&with_family(10.0, 0.05));
        let ids: Vec<&str> = on.iter().map(|d| d.episode.id.as_str()).collect();
        // A recognized recurrence stays ahead of the leads; then sibling: logit −1.5 +
        // 10·cos(0.1) ≈ 8.45; apart: 0.2 + 10·cos(1.5) ≈ 0.91; unlike: −1.5 + 10·cos(1.4)
        // ≈ 0.2; hopeless is under the floor.
        assert_eq!(ids, ["first", "recognized", "sibling", "apart", "unlike"]);
        assert_eq!(on[2].strength, MatchStrength::Possible);
        assert_eq!(on[0].evidence.first_lead_cosine, None);
        let cosine = on[2]
            .evidence
            .first_lead_cosine
            .expect("a follower's cosine");
        assert!((cosine - 0.1f64.cos()).abs() < 1e-6, "{cosine}");

        // Without cause vectors nothing resembles anything: back to the `possible` cut.
        let bare: Vec<Candidate> = candidates()
            .into_iter()
            .map(|mut c| {
                c.evidence.cause_vector = None;
                c
            })
            .collect();
        let (no_vectors, _) = decide(
            bare,
            &QueryText::new("q", &[]),
            &with_family(10.0, 0.05),
            &RankingParams::default(),
            10,
            now(),
        );
        assert_eq!(labels(&no_vectors), labels(&off));
    }

    #[test]
    fn a_contradicted_candidate_alone_does_not_open_an_answer() {
        let mut denied = candidate_at("expiry", 9.0, 0.0);
        denied.evidence.contradicted = vec!["expired".into()];
        let weak = candidate_at("weak", -2.0, 0.05); // 0.08: under possible
        let (decided, more) = decide(
            vec![denied.clone(), weak.clone()],
            &QueryText::new("q", &[]),
            &with_family(10.0, 0.05),
            &RankingParams::default(),
            5,
            now(),
        );
        assert!(decided.is_empty() && !more, "{:?}", labels(&decided));
        // Beside a first lead it is shown, last, and never strong.
        let first = candidate_at("first", 4.0, 1.0);
        let (decided, _) = decide(
            vec![denied, weak, first],
            &QueryText::new("q", &[]),
            &with_family(10.0, 0.05),
            &RankingParams::default(),
            5,
            now(),
        );
        assert_eq!(
            labels(&decided),
            [
                ("first", MatchStrength::Possible),
                ("weak", MatchStrength::Possible),
                ("expiry", MatchStrength::Possible)
            ]
        );
    }

    #[test]
    fn embedding_cosine_needs_two_comparable_vectors() {
        let a = [1.0f32, 0.0];
        let b = [1.0f32, 1.0];
        let c = embedding_cosine(Some(&a), Some(&b)).unwrap();
        assert!((c - std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-9);
        assert_eq!(embedding_cosine(Some(&a), None), None);
        assert_eq!(embedding_cosine(Some(&a), Some(&[1.0, 0.0, 0.0])), None);
        assert_eq!(embedding_cosine(Some(&a), Some(&[0.0, 0.0])), None);
    }
}
