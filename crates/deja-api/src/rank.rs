//! Turning the store's raw semantic hits into ranked results (formula in docs/ranking.md and
//! `deja_domain::ranking`): the floor on raw cosine, the score, the deterministic order.

use chrono::{DateTime, Utc};
use deja_domain::ranking::{sort_ranked, Candidate, RankingParams, ScoreBreakdown};
use deja_domain::Episode;
use std::collections::HashSet;

/// How many candidates semantic search asks the store for, for `limit` results. More than
/// `limit`: recency and the tie-breaks may reorder the nearest few, and one extra tells
/// whether more are available.
pub(crate) fn candidate_pool(limit: usize) -> usize {
    (limit * 2).max(limit + 1).max(10)
}

/// Ranked semantic hits (best first, at most `limit`) and whether more passed the floor.
pub(crate) fn rank(
    hits: Vec<(Episode, f64)>,
    query: &str,
    params: &RankingParams,
    limit: usize,
    now: DateTime<Utc>,
) -> (Vec<(ScoreBreakdown, Episode)>, bool) {
    let terms = terms(query);
    let mut ranked: Vec<(ScoreBreakdown, Episode)> = hits
        .into_iter()
        .filter(|(_, similarity)| params.passes_floor(*similarity))
        .map(|(episode, similarity)| {
            let candidate = Candidate {
                similarity,
                effectiveness_score: episode.effectiveness_score,
                resolved_with_root_cause: resolved_with_matching_root_cause(&episode, &terms),
                last_confirmed_at: episode.last_confirmed_at,
            };
            (params.score(&candidate, now), episode)
        })
        .collect();
    sort_ranked(&mut ranked, |e| e.id.as_str());
    let more_available = ranked.len() > limit;
    ranked.truncate(limit);
    (ranked, more_available)
}

/// "Resolved with a matching root cause": resolved, a root cause is recorded, and it shares
/// a meaningful word with the query (so an episode resolved for an unrelated reason gets no
/// bonus). Words match when equal or when one is a prefix of the other with at least four
/// letters (`test`/`tests`, `evict`/`eviction`): cheap stemming, good enough for a 0.02
/// tie-break.
pub(crate) fn resolved_with_matching_root_cause(
    episode: &Episode,
    query_terms: &HashSet<String>,
) -> bool {
    let Some(root_cause) = episode.root_cause.as_deref() else {
        return false;
    };
    if !episode.resolved || root_cause.trim().is_empty() {
        return false;
    }
    terms(root_cause).iter().any(|word| {
        query_terms.iter().any(|term| {
            word == term
                || (word.len().min(term.len()) >= 4
                    && (word.starts_with(term.as_str()) || term.starts_with(word.as_str())))
        })
    })
}

const STOPWORDS: &[&str] = &[
    "the", "and", "for", "with", "from", "was", "were", "are", "not", "but", "too", "has", "had",
    "have", "this", "that", "into", "after", "when", "then", "than", "due", "our",
];

/// Lowercased words of three or more letters or digits, stopwords removed.
pub(crate) fn terms(text: &str) -> HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3)
        .map(str::to_lowercase)
        .filter(|w| !STOPWORDS.contains(&w.as_str()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use deja_domain::{ExtractionStatus, Provenance};

    fn episode(id: &str, resolved: bool, root_cause: Option<&str>) -> Episode {
        let t = DateTime::from_timestamp(1_780_000_000, 0).unwrap();
        Episode {
            id: id.into(),
            org: "acme".into(),
            team: "checkout".into(),
            agent_id: "a".into(),
            correlation_id: id.into(),
            agent_run_id: "r".into(),
            turn_count: 1,
            last_turn_index: 0,
            issue_type: "build-failure".into(),
            issue_description: String::new(),
            components: vec![],
            skills_used: Default::default(),
            key_findings: vec![],
            root_cause: root_cause.map(str::to_string),
            summary: String::new(),
            resolved,
            effectiveness_score: deja_domain::effectiveness_score(resolved, root_cause),
            embedding: None,
            embedding_model: None,
            extraction_status: ExtractionStatus::Ok,
            extraction_error: None,
            provenance: Provenance::Extracted,
            event_ids: vec![],
            significance: None,
            root_cause_confidence: None,
            ruled_out: vec![],
            resolution: None,
            created_at: t,
            updated_at: t,
            last_confirmed_at: t,
            version: 1,
            review: Default::default(),
            turns: Vec::new(),
        }
    }

    #[test]
    fn a_root_cause_matches_when_it_shares_a_stemmed_word_with_the_query() {
        let query = terms("Maven OOM surveys-module test failure Jenkins");
        let matching = episode(
            "a",
            true,
            Some("surefire heap too small for the surveys tests"),
        );
        let unrelated = episode("b", true, Some("expired TLS certificate"));
        let unresolved = episode("c", false, Some("surveys tests heap"));
        assert!(resolved_with_matching_root_cause(&matching, &query));
        assert!(!resolved_with_matching_root_cause(&unrelated, &query));
        assert!(!resolved_with_matching_root_cause(&unresolved, &query));
    }

    #[test]
    fn hits_below_the_floor_are_dropped_and_the_rest_ranked_with_more_available() {
        let params = RankingParams::default();
        let now = DateTime::from_timestamp(1_780_000_000, 0).unwrap();
        let hits = vec![
            (episode("low", true, Some("x")), 0.2),
            (episode("b", false, None), 0.70),
            (episode("a", true, Some("redis maxmemory")), 0.70),
            (episode("c", false, None), 0.60),
        ];
        let (ranked, more) = rank(hits, "redis maxmemory", &params, 2, now);
        let ids: Vec<&str> = ranked.iter().map(|(_, e)| e.id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert!(more);
        assert!(ranked[0].0.resolved_with_root_cause);
    }

    #[test]
    fn the_candidate_pool_always_exceeds_the_limit() {
        for limit in 1..=50 {
            assert!(candidate_pool(limit) > limit);
        }
    }
}
