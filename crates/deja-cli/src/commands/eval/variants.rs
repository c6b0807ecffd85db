//! The variants table: embedded text (all fields / symptoms only) × ranking (semantic,
//! semantic with recency decay, full text, reciprocal-rank fusion) × similarity floor, all
//! computed from the same per-query lists so that rows differ only by what they name.
//!
//! Floors are applied afterwards to unfloored lists. That is exact because the floor is a
//! filter on each hit's raw cosine that never reorders (docs/ranking.md), and the lists hold
//! every episode of the namespace (limit = `search.max_limit`).

use super::corpus::EvalQuery;
use super::metrics::{score_query, summarise, Summary, MRR_DEPTH, TOP_K};
use super::report::number;
use super::search::Hit;
use deja_config::SearchSettings;
use deja_domain::ranking::reciprocal_rank_fusion;
use serde::Serialize;
use std::collections::HashMap;

/// The usual reciprocal-rank-fusion constant.
const RRF_K: f64 = 60.0;

/// One query's unfloored ranked lists.
#[derive(Debug, Clone, Default)]
pub struct Lists {
    /// Semantic, production embedding text, no recency.
    pub all_fields: Vec<Hit>,
    /// Semantic, production embedding text, recency decay on.
    pub recency: Vec<Hit>,
    /// Semantic, episodes embedded from `symptoms` only, no recency.
    pub symptoms_only: Vec<Hit>,
    /// Full text (Lucene BM25), top `MRR_DEPTH`.
    pub text: Vec<Hit>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Embedded {
    AllFields,
    SymptomsOnly,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ranking {
    Semantic,
    Text,
    /// Reciprocal-rank fusion of the semantic (all fields) and text lists.
    Hybrid,
}

#[derive(Debug, Clone, Serialize)]
pub struct Variant {
    pub embedded: Embedded,
    pub ranking: Ranking,
    /// 0 = no recency decay.
    pub recency_half_life_days: f64,
    /// `None` = no floor.
    pub floor: Option<f64>,
    /// These are the configured settings (the headline's ranking).
    pub production: bool,
    #[serde(flatten)]
    pub summary: Summary,
}

/// Every variant over every query.
pub fn compare(
    queries: &[EvalQuery],
    lists: &[Lists],
    floors: &[f64],
    half_life_days: f64,
    production: &SearchSettings,
) -> Vec<Variant> {
    let mut floors: Vec<f64> = floors.to_vec();
    floors.push(production.similarity_floor);
    floors.sort_by(f64::total_cmp);
    floors.dedup_by(|a, b| (*a - *b).abs() < 1e-9);
    let gates: Vec<Option<f64>> = std::iter::once(None)
        .chain(floors.into_iter().map(Some))
        .collect();
    let mut shapes: Vec<(Embedded, Ranking, f64, Option<f64>)> = Vec::new();
    for (embedded, half_life) in [
        (Embedded::AllFields, 0.0),
        (Embedded::AllFields, half_life_days),
        (Embedded::SymptomsOnly, 0.0),
    ] {
        for gate in &gates {
            shapes.push((embedded, Ranking::Semantic, half_life, *gate));
        }
    }
    // A floor is a cosine gate; BM25 scores have no comparable scale, so text gets none.
    shapes.push((Embedded::AllFields, Ranking::Text, 0.0, None));
    for gate in &gates {
        shapes.push((Embedded::AllFields, Ranking::Hybrid, 0.0, *gate));
    }
    shapes
        .into_iter()
        .map(|(embedded, ranking, half_life, floor)| {
            let scores: Vec<_> = queries
                .iter()
                .zip(lists)
                .map(|(query, lists)| {
                    let ranked = ranked(lists, embedded, ranking, half_life > 0.0, floor);
                    score_query(&query.relevant, &ranked[..ranked.len().min(TOP_K)], &ranked)
                })
                .collect();
            Variant {
                embedded,
                ranking,
                recency_half_life_days: half_life,
                floor,
                production: ranking == Ranking::Semantic
                    && embedded == Embedded::AllFields
                    && (half_life - production.recency_half_life_days).abs() < 1e-9
                    && floor.is_some_and(|f| (f - production.similarity_floor).abs() < 1e-9),
                summary: summarise(&scores),
            }
        })
        .collect()
}

/// Incident ids best first (at most `MRR_DEPTH`) of one variant for one query.
pub fn ranked(
    lists: &Lists,
    embedded: Embedded,
    ranking: Ranking,
    recency: bool,
    floor: Option<f64>,
) -> Vec<String> {
    let passes = |similarity: Option<f64>| match floor {
        None => true,
        Some(floor) => similarity.is_some_and(|s| s >= floor),
    };
    let semantic = match (embedded, recency) {
        (Embedded::SymptomsOnly, _) => &lists.symptoms_only,
        (Embedded::AllFields, true) => &lists.recency,
        (Embedded::AllFields, false) => &lists.all_fields,
    };
    match ranking {
        Ranking::Semantic => semantic
            .iter()
            .filter(|h| passes(h.similarity))
            .take(MRR_DEPTH)
            .map(|h| h.incident.clone())
            .collect(),
        Ranking::Text => lists
            .text
            .iter()
            .take(MRR_DEPTH)
            .map(|h| h.incident.clone())
            .collect(),
        Ranking::Hybrid => {
            // Fuse the two top-k lists a hybrid mode would fetch; gate each fused hit on its
            // cosine (known for every episode: the semantic list is complete).
            let similarity: HashMap<&str, Option<f64>> = semantic
                .iter()
                .map(|h| (h.incident.as_str(), h.similarity))
                .collect();
            let top = |hits: &[Hit]| -> Vec<String> {
                hits.iter()
                    .take(MRR_DEPTH)
                    .map(|h| h.incident.clone())
                    .collect()
            };
            reciprocal_rank_fusion(&[top(semantic), top(&lists.text)], RRF_K)
                .into_iter()
                .map(|(id, _)| id)
                .filter(|id| passes(similarity.get(id.as_str()).copied().flatten()))
                .take(MRR_DEPTH)
                .collect()
        }
    }
}

/// The table as Markdown, ready to paste into docs/EVALUATION.md.
pub fn markdown(variants: &[Variant]) -> String {
    let mut out = String::from(
        "| embedded text | ranking | recency | floor | recall@1 | recall@3 | MRR | sibling empty | novel FP |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for v in variants {
        let embedded = match v.embedded {
            Embedded::AllFields => "all fields",
            Embedded::SymptomsOnly => "symptoms only",
        };
        let ranking = match v.ranking {
            Ranking::Semantic => "semantic",
            Ranking::Text => "full text (BM25)",
            Ranking::Hybrid => "hybrid (RRF)",
        };
        let recency = if v.recency_half_life_days > 0.0 {
            format!("{} d", v.recency_half_life_days)
        } else {
            "off".to_owned()
        };
        let floor = match (v.floor, v.ranking) {
            (_, Ranking::Text) => "n/a".to_owned(),
            (None, _) => "none".to_owned(),
            (Some(f), _) if v.production => format!("**{f:.2}** (current)"),
            (Some(f), _) => format!("{f:.2}"),
        };
        let s = &v.summary;
        out.push_str(&format!(
            "| {embedded} | {ranking} | {recency} | {floor} | {} | {} | {} | {} | {} |\n",
            number(s.recall_at_1),
            number(s.recall_at_3),
            number(s.mrr),
            number(s.sibling_empty),
            number(s.novel_false_positive)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::eval::retrieval::hits;

    fn lists() -> Lists {
        Lists {
            all_fields: hits(&[("a", 0.62), ("x", 0.50), ("b", 0.41), ("y", 0.20)]),
            recency: hits(&[("x", 0.50), ("a", 0.62), ("b", 0.41), ("y", 0.20)]),
            symptoms_only: hits(&[("y", 0.55), ("a", 0.44)]),
            text: vec![Hit {
                incident: "b".into(),
                similarity: None,
                score: Some(3.2),
            }],
        }
    }

    #[test]
    fn a_floor_filters_without_reordering() {
        let l = lists();
        let ranked = |e, r, rec, f| ranked(&l, e, r, rec, f);
        assert_eq!(
            ranked(Embedded::AllFields, Ranking::Semantic, false, Some(0.45)),
            ["a", "x"]
        );
        assert_eq!(
            ranked(Embedded::AllFields, Ranking::Semantic, true, Some(0.45)),
            ["x", "a"]
        );
        assert_eq!(
            ranked(Embedded::SymptomsOnly, Ranking::Semantic, false, None),
            ["y", "a"]
        );
        assert_eq!(
            ranked(Embedded::AllFields, Ranking::Text, false, None),
            ["b"]
        );
    }

    #[test]
    fn fusion_promotes_agreement_and_the_gate_uses_the_cosine() {
        let l = lists();
        let fused = ranked(&l, Embedded::AllFields, Ranking::Hybrid, false, None);
        // b is third semantically and first in text: both lists vote for it, so it leads.
        assert_eq!(fused[..2], ["b".to_owned(), "a".to_owned()]);
        let gated = ranked(&l, Embedded::AllFields, Ranking::Hybrid, false, Some(0.45));
        assert_eq!(gated, ["a", "x"]);
    }

    #[test]
    fn the_production_row_is_marked_and_every_floor_appears_once() {
        let queries = vec![EvalQuery {
            id: "q".into(),
            team: None,
            query: "q".into(),
            relevant: vec!["a".into(), "b".into()],
        }];
        let settings = deja_config::Settings::defaults().search;
        let floors = [settings.similarity_floor, 0.99];
        let variants = compare(&queries, &[lists()], &floors, 90.0, &settings);
        // 3 semantic shapes × (none + 2 floors) + text + hybrid × 3.
        assert_eq!(variants.len(), 3 * 3 + 1 + 3);
        let production: Vec<_> = variants.iter().filter(|v| v.production).collect();
        assert_eq!(production.len(), 1);
        assert_eq!(production[0].summary.recall_at_1, Some(1.0));
        assert!(markdown(&variants).contains("(current)"));
    }
}
