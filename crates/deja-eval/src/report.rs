//! The headline of a retrieval run (overall, per family, per query, the misses) and its
//! text form. Shared by `eval retrieval` (imported incidents) and `eval extraction`
//! (end-to-end recall over extracted episodes).

use super::corpus::{EvalQuery, Incidents};
use super::metrics::{score_query, summarise, summarise_by, QueryKind, QueryScores, Summary};
use super::search::{ids, strong_ids, Answer, Hit};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize)]
pub struct QueryResult {
    pub id: String,
    pub kind: QueryKind,
    pub family: String,
    pub team: Option<String>,
    pub relevant: Vec<String>,
    /// What the caller saw (default limit), best first.
    pub returned: Vec<Hit>,
    #[serde(flatten)]
    pub scores: QueryScores,
    /// Relevant incidents missing from `returned`.
    pub missed: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Headline {
    pub overall: Summary,
    pub families: BTreeMap<String, Summary>,
    pub queries: Vec<QueryResult>,
}

/// Scores `answers` (one per query, same order) against the labels.
pub fn headline(queries: &[EvalQuery], incidents: &Incidents, answers: &[Answer]) -> Headline {
    let results: Vec<QueryResult> = queries
        .iter()
        .zip(answers)
        .map(|(query, answer)| {
            let returned = ids(&answer.answer);
            let scores = score_query(
                &query.relevant,
                &returned,
                &ids(&answer.deeper),
                &strong_ids(&answer.answer),
            );
            QueryResult {
                id: query.id.clone(),
                kind: scores.kind,
                family: incidents.query_family(&query.relevant),
                team: query.team.clone(),
                relevant: query.relevant.clone(),
                missed: query
                    .relevant
                    .iter()
                    .filter(|id| !returned.contains(id))
                    .cloned()
                    .collect(),
                returned: answer.answer.clone(),
                scores,
            }
        })
        .collect();
    let scores: Vec<QueryScores> = results.iter().map(|r| r.scores).collect();
    Headline {
        overall: summarise(&scores),
        families: summarise_by(results.iter().map(|r| (r.family.as_str(), r.scores))),
        queries: results,
    }
}

pub fn number(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.2}"))
}

/// `overall` and per-family lines, then the misses.
pub fn print_headline(headline: &Headline) {
    let o = &headline.overall;
    println!(
        "overall ({} sibling, {} novel queries): recall@1 {}  recall@3 {}  MRR {}  \
         sibling-empty {}  sibling-strong {}  novel-any {}  novel-strong {}",
        o.sibling_queries,
        o.novel_queries,
        number(o.recall_at_1),
        number(o.recall_at_3),
        number(o.mrr),
        number(o.sibling_empty),
        number(o.sibling_strong),
        number(o.novel_false_positive),
        number(o.novel_strong)
    );
    println!(
        "\n{:<36} {:>7} {:>6} {:>6} {:>6} {:>6} {:>7} {:>6} {:>7}",
        "family", "queries", "R@1", "R@3", "MRR", "empty", "strong", "n-any", "n-strong"
    );
    for (family, s) in &headline.families {
        println!(
            "{:<36} {:>7} {:>6} {:>6} {:>6} {:>6} {:>7} {:>6} {:>7}",
            family,
            s.sibling_queries + s.novel_queries,
            number(s.recall_at_1),
            number(s.recall_at_3),
            number(s.mrr),
            number(s.sibling_empty),
            number(s.sibling_strong),
            number(s.novel_false_positive),
            number(s.novel_strong)
        );
    }
    println!("\nmisses (top 3 as the skill sees it):");
    let mut any = false;
    for result in &headline.queries {
        let got = describe(&result.returned);
        match result.kind {
            QueryKind::Sibling if !result.missed.is_empty() => {
                println!(
                    "  {} [{}] missed {}; got {}",
                    result.id,
                    result.family,
                    result.missed.join(", "),
                    got
                );
                any = true;
            }
            QueryKind::Novel if !result.returned.is_empty() => {
                println!("  {} [novel] returned {}", result.id, got);
                any = true;
            }
            _ => {}
        }
    }
    if !any {
        println!("  none");
    }
}

/// `inc-1 (0.61), inc-2 (0.48)`, or `nothing`.
fn describe(hits: &[Hit]) -> String {
    if hits.is_empty() {
        return "nothing".to_owned();
    }
    hits.iter()
        .map(
            |h| match (h.strength, h.confidence, h.similarity.or(h.score)) {
                (Some(strength), Some(confidence), _) => {
                    format!("{} ({} {confidence:.2})", h.incident, strength.as_str())
                }
                (_, _, Some(value)) => format!("{} ({value:.2})", h.incident),
                _ => h.incident.clone(),
            },
        )
        .collect::<Vec<_>>()
        .join(", ")
}
