//! Retrieval metrics, pure: ranked incident ids in, numbers out. Definitions
//! (docs/EVALUATION.md):
//!
//! - recall@k of a sibling query = |relevant ∩ top k| / min(|relevant|, k). With the dev
//!   corpus's 3 relevant incidents per query, recall@3 is "the share of the family found in
//!   the top 3" and recall@1 is "the first hit belongs to the family".
//! - reciprocal rank = 1 / rank of the first relevant hit, 0 when none is returned.
//! - sibling-empty = the share of sibling queries that return nothing (the floor hid a
//!   family that is in memory).
//! - novel false positive = the share of novel queries (no relevant incident) that return
//!   anything (even as a `possible` lead).
//! - novel strong = the share of novel queries answered with a `strong` match: memory
//!   claimed a recurrence that is not one.
//! - sibling strong = the share of sibling queries with a family member among the `strong`
//!   matches of the answer: the recurrence was recognized.

use serde::Serialize;
use std::collections::BTreeMap;

/// How many hits recall is measured on: what the skill shows by default.
pub const TOP_K: usize = 3;
/// How deep the reciprocal rank looks.
pub const MRR_DEPTH: usize = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum QueryKind {
    /// A new occurrence of a family in memory.
    Sibling,
    /// A failure mode memory has never seen: the right answer is nothing.
    Novel,
}

/// One query's scores.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct QueryScores {
    pub kind: QueryKind,
    pub recall_at_1: f64,
    pub recall_at_3: f64,
    pub reciprocal_rank: f64,
    /// The answer (top `TOP_K`) held at least one hit.
    pub returned_any: bool,
    /// The answer held a `strong` match.
    pub strong_any: bool,
    /// The answer held a `strong` match of the query's family.
    pub strong_relevant: bool,
}

/// `|relevant ∩ ranked[..k]| / min(|relevant|, k)`; 0 when nothing is relevant.
pub fn recall_at(relevant: &[String], ranked: &[String], k: usize) -> f64 {
    let wanted = relevant.len().min(k);
    if wanted == 0 {
        return 0.0;
    }
    let found = ranked
        .iter()
        .take(k)
        .filter(|id| relevant.contains(id))
        .count();
    found as f64 / wanted as f64
}

/// 1 / (1-based rank of the first relevant id within `MRR_DEPTH`), else 0.
pub fn reciprocal_rank(relevant: &[String], ranked: &[String]) -> f64 {
    ranked
        .iter()
        .take(MRR_DEPTH)
        .position(|id| relevant.contains(id))
        .map_or(0.0, |index| 1.0 / (index as f64 + 1.0))
}

/// Scores one query. `answer` is what the caller sees (at most `TOP_K` hits past the floor);
/// `deeper` is a longer list of the same ranking (up to `MRR_DEPTH`) for the reciprocal rank.
/// Pass the same list twice when only one was asked for. `strong` holds the ids the answer
/// labelled `strong`.
pub fn score_query(
    relevant: &[String],
    answer: &[String],
    deeper: &[String],
    strong: &[String],
) -> QueryScores {
    let answer = &answer[..answer.len().min(TOP_K)];
    let strong: Vec<&String> = answer.iter().filter(|id| strong.contains(id)).collect();
    QueryScores {
        kind: if relevant.is_empty() {
            QueryKind::Novel
        } else {
            QueryKind::Sibling
        },
        recall_at_1: recall_at(relevant, answer, 1),
        recall_at_3: recall_at(relevant, answer, TOP_K),
        reciprocal_rank: reciprocal_rank(relevant, deeper),
        returned_any: !answer.is_empty(),
        strong_any: !strong.is_empty(),
        strong_relevant: strong.iter().any(|id| relevant.contains(id)),
    }
}

/// Averages over a set of queries; `None` where the set has no query of the kind a metric
/// is about (e.g. recall of the novel queries).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    pub sibling_queries: usize,
    pub novel_queries: usize,
    pub recall_at_1: Option<f64>,
    pub recall_at_3: Option<f64>,
    pub mrr: Option<f64>,
    pub sibling_empty: Option<f64>,
    pub novel_false_positive: Option<f64>,
    pub novel_strong: Option<f64>,
    pub sibling_strong: Option<f64>,
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, count) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    (count > 0).then(|| sum / count as f64)
}

pub fn summarise(scores: &[QueryScores]) -> Summary {
    let siblings: Vec<&QueryScores> = scores
        .iter()
        .filter(|s| s.kind == QueryKind::Sibling)
        .collect();
    let novel: Vec<&QueryScores> = scores
        .iter()
        .filter(|s| s.kind == QueryKind::Novel)
        .collect();
    let share = |set: &[&QueryScores], hit: fn(&QueryScores) -> bool| {
        mean(set.iter().map(|s| if hit(s) { 1.0 } else { 0.0 }))
    };
    Summary {
        sibling_queries: siblings.len(),
        novel_queries: novel.len(),
        recall_at_1: mean(siblings.iter().map(|s| s.recall_at_1)),
        recall_at_3: mean(siblings.iter().map(|s| s.recall_at_3)),
        mrr: mean(siblings.iter().map(|s| s.reciprocal_rank)),
        sibling_empty: share(&siblings, |s| !s.returned_any),
        novel_false_positive: share(&novel, |s| s.returned_any),
        novel_strong: share(&novel, |s| s.strong_any),
        sibling_strong: share(&siblings, |s| s.strong_relevant),
    }
}

/// Summaries per group (e.g. per family), in name order.
pub fn summarise_by<'a>(
    scores: impl IntoIterator<Item = (&'a str, QueryScores)>,
) -> BTreeMap<String, Summary> {
    let mut groups: BTreeMap<String, Vec<QueryScores>> = BTreeMap::new();
    for (group, score) in scores {
        groups.entry(group.to_owned()).or_default().push(score);
    }
    groups
        .into_iter()
        .map(|(group, scores)| (group, summarise(&scores)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn recall_counts_the_family_found_in_the_top_k() {
        let relevant = ids(&["a", "b", "c"]);
        assert_eq!(
            recall_at(&relevant, &ids(&["a", "x", "b", "c"]), 3),
            2.0 / 3.0
        );
        assert_eq!(recall_at(&relevant, &ids(&["x", "a"]), 1), 0.0);
        assert_eq!(recall_at(&relevant, &ids(&["b"]), 1), 1.0);
        assert_eq!(recall_at(&relevant, &[], 3), 0.0);
        // Fewer relevant than k: finding all of them is full recall.
        assert_eq!(recall_at(&ids(&["a"]), &ids(&["x", "a"]), 3), 1.0);
        assert_eq!(recall_at(&[], &ids(&["a"]), 3), 0.0);
    }

    #[test]
    fn reciprocal_rank_is_the_first_relevant_position_within_the_depth() {
        let relevant = ids(&["c"]);
        assert_eq!(reciprocal_rank(&relevant, &ids(&["c"])), 1.0);
        assert_eq!(
            reciprocal_rank(&relevant, &ids(&["a", "b", "c"])),
            1.0 / 3.0
        );
        assert_eq!(reciprocal_rank(&relevant, &ids(&["a"])), 0.0);
        let mut long: Vec<String> = (0..MRR_DEPTH).map(|i| format!("x{i}")).collect();
        long.push("c".into());
        assert_eq!(reciprocal_rank(&relevant, &long), 0.0);
    }

    #[test]
    fn recall_looks_at_the_answer_and_mrr_at_the_deeper_list() {
        let relevant = ids(&["r"]);
        let scores = score_query(
            &relevant,
            &ids(&["a", "b", "c"]),
            &ids(&["a", "b", "c", "r"]),
            &[],
        );
        assert_eq!(scores.recall_at_3, 0.0);
        assert_eq!(scores.reciprocal_rank, 0.25);
        assert!(scores.returned_any);
        // An answer longer than TOP_K is cut: recall@3 never sees the fourth hit.
        let scores = score_query(&relevant, &ids(&["a", "b", "c", "r"]), &[], &[]);
        assert_eq!(scores.recall_at_3, 0.0);
    }

    #[test]
    fn summaries_separate_sibling_and_novel_queries() {
        let sibling_hit = score_query(
            &ids(&["a", "b", "c"]),
            &ids(&["a", "b", "x"]),
            &ids(&["a"]),
            &ids(&["x", "b"]),
        );
        let sibling_empty = score_query(&ids(&["a", "b", "c"]), &[], &[], &[]);
        let novel_quiet = score_query(&[], &[], &[], &[]);
        let novel_noisy = score_query(&[], &ids(&["a"]), &ids(&["a"]), &ids(&["a"]));
        assert_eq!(novel_noisy.kind, QueryKind::Novel);
        let summary = summarise(&[sibling_hit, sibling_empty, novel_quiet, novel_noisy]);
        assert_eq!(summary.sibling_queries, 2);
        assert_eq!(summary.novel_queries, 2);
        assert_eq!(summary.recall_at_1, Some(0.5));
        assert_eq!(summary.recall_at_3, Some(1.0 / 3.0));
        assert_eq!(summary.mrr, Some(0.5));
        assert_eq!(summary.sibling_empty, Some(0.5));
        assert_eq!(summary.novel_false_positive, Some(0.5));
        // `x` is strong but not of the family; `b` is strong and is.
        assert_eq!(summary.sibling_strong, Some(0.5));
        assert_eq!(summary.novel_strong, Some(0.5));

        let only_novel = summarise(&[novel_quiet]);
        assert_eq!(only_novel.recall_at_3, None);
        assert_eq!(only_novel.sibling_empty, None);
        assert_eq!(only_novel.novel_false_positive, Some(0.0));
        assert_eq!(summarise(&[]).mrr, None);
    }

    #[test]
    fn groups_are_summarised_separately() {
        let hit = score_query(&ids(&["a"]), &ids(&["a"]), &ids(&["a"]), &[]);
        let miss = score_query(&ids(&["b"]), &ids(&["a"]), &ids(&["a"]), &[]);
        let groups = summarise_by([("f1", hit), ("f2", miss), ("f1", hit)]);
        assert_eq!(groups.len(), 2);
        assert_eq!(groups["f1"].recall_at_1, Some(1.0));
        assert_eq!(groups["f1"].sibling_queries, 2);
        assert_eq!(groups["f2"].mrr, Some(0.0));
    }
}
