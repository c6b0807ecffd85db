//! What links a query to one candidate episode, beyond the two similarity scores: the
//! episode's components named in the query (or passed as `components`), its issue type's
//! words in the query, literal error strings or identifiers the two share, how much of the
//! episode's root cause the query names, and what of it the query denies.

use super::healthy::{contradicted_by_states, healthy_states, HealthyState};
use super::negation::{contradicted_hypotheses, contradicted_words, denied_phrases};
use crate::ranking::terms::{literals, matches_a_term, terms};
use crate::{Component, Episode};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// Everything the decision knows about one candidate. Ranks are 0-based positions in the
/// stage's own list; `None` = the stage did not return the episode.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// Raw cosine similarity of the query and the episode's embedded text. For an episode
    /// found by full text only, the lowest cosine of the semantic list (an upper bound: it
    /// was not among the nearest).
    pub cosine: f64,
    pub semantic_rank: Option<usize>,
    pub text_rank: Option<usize>,
    /// The cross-encoder's relevance logit of (query, episode text); `None` when reranking
    /// was skipped (no model, or the time budget ran out).
    pub rerank: Option<f64>,
    /// Late-interaction coverage of the query by the episode ([`super::late::max_sim`]);
    /// `None` when it was not computed (no encoder, or no current token vectors stored for
    /// the episode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late: Option<f64>,
    /// Names of the episode's components that the query names or the request passed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub components: Vec<String>,
    /// The episode's issue type shares a word with the query.
    pub issue_type: bool,
    /// Literal error strings / identifiers found in both (lowercased).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub literals: Vec<String>,
    /// The episode's mechanism words the query names, as a share in [0, 1] of its root
    /// cause's words; 0 when the episode records none. Mechanism words are the root cause's
    /// words that its issue description (the symptoms) does not use: a look-alike shares a
    /// past incident's symptoms, services and vocabulary, a recurrence described with
    /// evidence also names what caused it ("…because one giant partition dominates").
    #[serde(default)]
    pub root_cause: f64,
    /// Words of the episode's root cause that the query says are not the case ("the cert is
    /// *not expired*" against "… had expired at midnight"): the agent's evidence rules this
    /// mechanism out, so the decision never labels the episode `strong`
    /// (`recognition::negation`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contradicted: Vec<String>,
    /// For a lead after the first: the cosine of its cause vector and the first lead's,
    /// which ordered it ([`super::FamilyOrder`]); `None` for the first lead, or when the
    /// family order is off or a cause vector is missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_lead_cosine: Option<f64>,
    /// The embedding of the episode's [`Episode::cause_text`] (what failed and why, without
    /// the symptoms' wording), stored when its text was written and read for the kept
    /// candidates when the family order is on; the order compares leads by it. `None` when
    /// none of the episode's current text is stored. Not part of any answer.
    #[serde(skip)]
    pub cause_vector: Option<Vec<f32>>,
}

impl Evidence {
    /// Whether the rerank stage scored this candidate (by the cross-encoder or by late
    /// interaction): the decision then uses the reranked calibration.
    pub fn reranked(&self) -> bool {
        self.rerank.is_some() || self.late.is_some()
    }
}

/// The query's side of the lexical evidence, computed once per search.
#[derive(Debug, Clone, Default)]
pub struct QueryText {
    normalized: String,
    terms: HashSet<String>,
    literals: HashSet<String>,
    components: HashSet<String>,
    /// The phrases the query denies ("no lock waits", "clocks are in sync").
    denied: Vec<Vec<String>>,
    /// The states it says are fine ("the certificate is valid", `recognition::healthy`).
    healthy: Vec<HealthyState>,
    /// Hypotheses its conversation ruled out, each as its terms ([`QueryText::with_ruled_out`]).
    ruled_out: Vec<Vec<String>>,
}

impl QueryText {
    /// `components` are the ones the request passed explicitly.
    pub fn new(query: &str, components: &[Component]) -> Self {
        QueryText {
            normalized: format!(" {} ", normalize_name(query)),
            terms: terms(query),
            literals: literals(query).into_iter().collect(),
            components: components.iter().map(|c| normalize_name(&c.name)).collect(),
            denied: denied_phrases(query),
            healthy: healthy_states(query),
            ruled_out: Vec::new(),
        }
    }

    /// The same query also denying each of `hypotheses` (what a conversation ruled out), each
    /// as a whole: a root cause that affirms every term of one is contradicted. They add no
    /// words to the query.
    pub fn with_ruled_out(mut self, hypotheses: &[String]) -> Self {
        self.ruled_out.extend(
            hypotheses
                .iter()
                .map(|h| terms(h).into_iter().collect::<Vec<String>>())
                .filter(|h| !h.is_empty()),
        );
        self
    }

    pub fn terms(&self) -> &HashSet<String> {
        &self.terms
    }

    /// Fills the lexical fields of `evidence` for `episode`.
    pub fn annotate(&self, episode: &Episode, evidence: &mut Evidence) {
        evidence.components = episode
            .components
            .iter()
            .filter(|c| self.names_component(&c.name))
            .map(|c| c.name.clone())
            .collect();
        evidence.components.sort();
        evidence.components.dedup();
        evidence.issue_type = terms(&episode.issue_type.replace(['-', '_'], " "))
            .iter()
            .filter(|word| word.len() >= 4)
            .any(|word| matches_a_term(word, &self.terms));
        let mut shared: Vec<String> = literals(&episode_text(episode))
            .into_iter()
            .filter(|l| self.literals.contains(l))
            .collect();
        shared.sort();
        evidence.literals = shared;
        evidence.root_cause = episode.root_cause.as_deref().map_or(0.0, |root_cause| {
            self.mechanism_words_named(root_cause, &episode.issue_description)
        });
        evidence.contradicted = episode
            .root_cause
            .as_deref()
            .map_or_else(Vec::new, |root_cause| {
                let mut words = contradicted_words(&self.denied, root_cause);
                words.extend(contradicted_hypotheses(&self.ruled_out, root_cause));
                words.extend(contradicted_by_states(&self.healthy, root_cause));
                words.sort();
                words.dedup();
                words
            });
    }

    /// The words of `root_cause` that `symptoms` does not use and the query names, as a
    /// share of all the words of `root_cause` (0 for one without words).
    fn mechanism_words_named(&self, root_cause: &str, symptoms: &str) -> f64 {
        let words = terms(root_cause);
        if words.is_empty() {
            return 0.0;
        }
        let symptom_words = terms(symptoms);
        let named = words
            .iter()
            .filter(|word| {
                !matches_a_term(word, &symptom_words) && matches_a_term(word, &self.terms)
            })
            .count();
        named as f64 / words.len() as f64
    }

    /// A component is named when the request passed it, or when its normalized name (four
    /// characters or more, so `db` or `api` alone never count) appears in the query as a
    /// whole word sequence.
    fn names_component(&self, name: &str) -> bool {
        let name = normalize_name(name);
        if self.components.contains(&name) {
            return true;
        }
        name.chars().filter(|c| c.is_alphanumeric()).count() >= 4
            && self.normalized.contains(&format!(" {name} "))
    }
}

/// Lowercase, every run of separators (space, `-`, `_`, `.`, `/`, punctuation) as one space.
fn normalize_name(text: &str) -> String {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Everything of an episode a literal could be quoted in: its embedded text (the observed
/// findings included) and an imported record's verification.
fn episode_text(episode: &Episode) -> String {
    let mut text = episode.embedding_text();
    if let Some(verification) = crate::episode::verification_of(&episode.key_findings) {
        text.push(' ');
        text.push_str(verification);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::episode;

    #[test]
    fn components_named_in_the_query_count_whatever_their_separators() {
        let mut e = episode("a");
        e.components = vec![
            Component::new("database", "feature-store"),
            Component::new("service", "api"),
        ];
        let query = QueryText::new(
            "Feature store primary restarted after failover; api slow",
            &[],
        );
        let mut evidence = Evidence::default();
        query.annotate(&e, &mut evidence);
        // `api` is too short to count as named: it appears in every other incident.
        assert_eq!(evidence.components, ["feature-store"]);
    }

    #[test]
    fn a_component_passed_by_the_request_counts_even_when_the_query_omits_it() {
        let mut e = episode("a");
        e.components = vec![Component::new("cache", "Redis")];
        let query = QueryText::new("sessions lost", &[Component::new("cache", "redis")]);
        let mut evidence = Evidence::default();
        query.annotate(&e, &mut evidence);
        assert_eq!(evidence.components, ["Redis"]);
    }

    #[test]
    fn issue_type_words_and_shared_literals_are_found() {
        let mut e = episode("a");
        e.issue_type = "socket-exhaustion".into();
        e.issue_description = "sockets stuck in CLOSE_WAIT, EMFILE errors".into();
        let query = QueryText::new(
            "too many open files (EMFILE), CLOSE_WAIT sockets pile up",
            &[],
        );
        let mut evidence = Evidence::default();
        query.annotate(&e, &mut evidence);
        assert!(evidence.issue_type);
        assert_eq!(evidence.literals, ["close_wait", "emfile"]);

        let unrelated = QueryText::new("certificate expired on ingress", &[]);
        let mut none = Evidence::default();
        unrelated.annotate(&e, &mut none);
        assert!(!none.issue_type && none.literals.is_empty() && none.components.is_empty());
    }

    #[test]
    fn the_root_cause_evidence_counts_the_mechanism_words_the_query_names() {
        let mut e = episode("a");
        e.issue_description = "Three storage nodes show compaction backlog and slow reads".into();
        e.root_cause = Some("One giant partition dominates reads and stalls compaction".into());
        let mut evidence = Evidence::default();
        // The root cause has six words (`one` and `and` are stopwords); `reads` and
        // `compaction` are symptoms, the other four are the mechanism. The query names all
        // four (`dominate` matches `dominates` by prefix).
        QueryText::new(
            "giant partition dominate reads; compaction stalls on three nodes",
            &[],
        )
        .annotate(&e, &mut evidence);
        assert!(
            (evidence.root_cause - 4.0 / 6.0).abs() < 1e-9,
            "{}",
            evidence.root_cause
        );

        // A look-alike: same symptoms and services, another mechanism.
        QueryText::new(
            "compaction backlog and slow reads after a disk failure",
            &[],
        )
        .annotate(&e, &mut evidence);
        assert_eq!(evidence.root_cause, 0.0);

        e.root_cause = None;
        QueryText::new("giant partition", &[]).annotate(&e, &mut evidence);
        assert_eq!(evidence.root_cause, 0.0);
    }
}
