//! The ranking formula of semantic search (documented in `docs/ranking.md`).
//!
//! ```text
//! decay  = 0.5 ^ (age_days / half_life_days)        (1 when half_life_days = 0)
//! score  = relevance × (1 − recency_weight + recency_weight × decay)
//!        + effectiveness_weight × effectiveness_score
//!        + resolved_weight × [resolved and root cause present and the hit matches it]
//! ```
//! `relevance` is the recognition's calibrated confidence (`crate::recognition`), or the raw
//! cosine similarity where no decision runs. The similarity floor applies to the raw cosine
//! before any weighting (in the decision, after the rerank stage scored the candidates): a
//! gate that must not move with an episode's age.

pub mod terms;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RankingParams {
    /// Hits whose cosine similarity is below this are not returned.
    pub similarity_floor: f64,
    /// Recency half-life in days; 0 disables decay.
    pub recency_half_life_days: f64,
    /// How much of the similarity recency may take away (0..=1).
    pub recency_weight: f64,
    pub effectiveness_weight: f64,
    pub resolved_weight: f64,
}

impl Default for RankingParams {
    fn default() -> Self {
        RankingParams {
            similarity_floor: 0.0,
            recency_half_life_days: 0.0,
            recency_weight: 0.3,
            effectiveness_weight: 0.03,
            resolved_weight: 0.02,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ScoreBreakdown {
    pub similarity: f64,
    /// What the score was built from: the recognition confidence, or the similarity.
    #[serde(default)]
    pub relevance: f64,
    pub recency_factor: f64,
    pub effectiveness: f64,
    pub resolved_with_root_cause: bool,
    pub score: f64,
}

/// What ranking needs to know about one candidate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    pub similarity: f64,
    pub relevance: f64,
    pub effectiveness_score: f64,
    pub resolved_with_root_cause: bool,
    pub last_confirmed_at: DateTime<Utc>,
}

impl RankingParams {
    pub fn passes_floor(&self, similarity: f64) -> bool {
        similarity >= self.similarity_floor
    }

    pub fn recency_factor(&self, last_confirmed_at: DateTime<Utc>, now: DateTime<Utc>) -> f64 {
        if self.recency_half_life_days <= 0.0 {
            return 1.0;
        }
        let age_days = (now - last_confirmed_at).num_seconds().max(0) as f64 / 86_400.0;
        let decay = 0.5_f64.powf(age_days / self.recency_half_life_days);
        let weight = self.recency_weight.clamp(0.0, 1.0);
        1.0 - weight + weight * decay
    }

    pub fn score(&self, candidate: &Candidate, now: DateTime<Utc>) -> ScoreBreakdown {
        let recency_factor = self.recency_factor(candidate.last_confirmed_at, now);
        let score = candidate.relevance * recency_factor
            + self.effectiveness_weight * candidate.effectiveness_score
            + if candidate.resolved_with_root_cause {
                self.resolved_weight
            } else {
                0.0
            };
        ScoreBreakdown {
            similarity: candidate.similarity,
            relevance: candidate.relevance,
            recency_factor,
            effectiveness: candidate.effectiveness_score,
            resolved_with_root_cause: candidate.resolved_with_root_cause,
            score,
        }
    }
}

/// Orders scored items best first; equal scores fall back to similarity, then to the id so
/// that results are deterministic.
pub fn sort_ranked<T>(items: &mut [(ScoreBreakdown, T)], id: impl Fn(&T) -> &str) {
    items.sort_by(|(a, x), (b, y)| {
        b.score
            .total_cmp(&a.score)
            .then(b.similarity.total_cmp(&a.similarity))
            .then_with(|| id(x).cmp(id(y)))
    });
}

/// Reciprocal-rank fusion of several rankings (lists of ids, best first); `k` = 60 is the
/// usual constant. Returns ids best first with their fused score.
pub fn reciprocal_rank_fusion(rankings: &[Vec<String>], k: f64) -> Vec<(String, f64)> {
    let mut fused: Vec<(String, f64)> = Vec::new();
    for ranking in rankings {
        for (rank, id) in ranking.iter().enumerate() {
            let contribution = 1.0 / (k + rank as f64 + 1.0);
            match fused.iter_mut().find(|(existing, _)| existing == id) {
                Some((_, score)) => *score += contribution,
                None => fused.push((id.clone(), contribution)),
            }
        }
    }
    fused.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    fused
}

/// Cosine similarity of two vectors of equal length (0 when either is all zeros), summed in
/// f64. For L2-normalised embeddings this equals the dot product.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    dot / (na.sqrt() * nb.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(days_ago: i64) -> DateTime<Utc> {
        now() - chrono::Duration::days(days_ago)
    }

    fn now() -> DateTime<Utc> {
        DateTime::from_timestamp(1_780_000_000, 0).unwrap()
    }

    #[test]
    fn no_half_life_means_no_decay() {
        let params = RankingParams::default();
        assert_eq!(params.recency_factor(at(3650), now()), 1.0);
    }

    #[test]
    fn one_half_life_takes_half_of_the_recency_weight() {
        let params = RankingParams {
            recency_half_life_days: 30.0,
            recency_weight: 0.4,
            ..Default::default()
        };
        let factor = params.recency_factor(at(30), now());
        assert!((factor - 0.8).abs() < 1e-9, "{factor}");
    }

    #[test]
    fn effectiveness_breaks_a_similarity_tie() {
        let params = RankingParams::default();
        let base = Candidate {
            similarity: 0.7,
            relevance: 0.7,
            effectiveness_score: 0.1,
            resolved_with_root_cause: false,
            last_confirmed_at: at(1),
        };
        let better = Candidate {
            effectiveness_score: 0.8,
            resolved_with_root_cause: true,
            ..base
        };
        assert!(params.score(&better, now()).score > params.score(&base, now()).score);
    }

    #[test]
    fn fusion_rewards_agreement() {
        let fused = reciprocal_rank_fusion(
            &[
                vec!["a".into(), "b".into(), "c".into()],
                vec!["b".into(), "d".into()],
            ],
            60.0,
        );
        assert_eq!(fused[0].0, "b");
        assert_eq!(fused.len(), 4);
    }

    proptest! {
        #[test]
        fn tie_breaks_never_beat_a_clear_similarity_gap(sim in 0.3f64..0.9, eff in 0.0f64..1.0) {
            // Tie-breaks are bounded: 0.1 of similarity always outweighs them with defaults.
            let params = RankingParams::default();
            let low = Candidate { similarity: sim, relevance: sim, effectiveness_score: eff, resolved_with_root_cause: true, last_confirmed_at: at(0) };
            let high = Candidate { similarity: sim + 0.1, relevance: sim + 0.1, effectiveness_score: 0.0, resolved_with_root_cause: false, last_confirmed_at: at(0) };
            prop_assert!(params.score(&high, now()).score > params.score(&low, now()).score);
        }

        #[test]
        fn recency_factor_stays_in_range(days in 0i64..10_000, half in 0.0f64..400.0, w in 0.0f64..1.0) {
            let params = RankingParams { recency_half_life_days: half, recency_weight: w, ..Default::default() };
            let f = params.recency_factor(at(days), now());
            prop_assert!((1.0 - w - 1e-9..=1.0 + 1e-9).contains(&f));
        }
    }
}
