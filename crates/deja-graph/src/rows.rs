//! The mapping between [`Episode`] and its node's properties, both ways.
//!
//! Stored layout (see `cypher/queries/episodes/write.cypher`): every field of `Episode` is a
//! property of the same name, except
//! - `components` → two parallel lists `component_types` / `component_names` (exact round
//!   trip, readable in the Browser) plus `(:Episode)-[:AFFECTS]->(:Component)`;
//! - `skills_used` → a sorted list plus `(:Episode)-[:USED_SKILL]->(:Skill)`;
//! - `key_findings` → the list plus `key_findings_text` (joined, for the full-text index);
//! - `scope_tokens` is derived (full-text tenant restriction) and `key` is the composite key;
//! - timestamps are Neo4j `DateTime` values in UTC, which keep nanoseconds, so a
//!   `chrono::DateTime<Utc>` round-trips exactly.

use crate::lucene;
use crate::queries::Statement;
use crate::queries::WRITE;
use chrono::{DateTime, Utc};
use deja_domain::{
    Component, Episode, ExtractionStatus, Provenance, RecurrenceSummary, ReviewState,
};
use neo4rs::BoltType;
use serde::Deserialize;
use std::collections::HashMap;

/// The stored identity of a component: one property because Community has no node keys.
/// Components belong to one org: two tenants naming the same `service: checkout` get two
/// nodes, so no traversal (nor a write lock) crosses from one org's episodes to another's.
pub fn component_key(org: &str, component: &Component) -> String {
    format!("{org}\u{1f}{}\u{1f}{}", component.kind, component.name)
}

/// The stored identity of a skill: org + U+001F + name. Like components, skills belong to
/// one org, so no traversal crosses from one org's episodes to another's through a skill.
pub fn skill_key(org: &str, skill: &str) -> String {
    format!("{org}\u{1f}{skill}")
}

/// Converts a count or limit for Cypher. Nothing the store handles gets near `i64::MAX`.
pub(crate) fn int(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// An episode node as returned by `e {.*}`. Absent properties are null-valued ones.
#[derive(Debug, Deserialize)]
pub(crate) struct EpisodeRow {
    id: String,
    org: String,
    team: String,
    #[serde(default)]
    agent_id: String,
    correlation_id: String,
    #[serde(default)]
    agent_run_id: String,
    #[serde(default)]
    turn_count: i64,
    #[serde(default)]
    last_turn_index: i64,
    #[serde(default)]
    issue_type: String,
    #[serde(default)]
    issue_description: String,
    opening_message: Option<String>,
    #[serde(default)]
    component_types: Vec<String>,
    #[serde(default)]
    component_names: Vec<String>,
    #[serde(default)]
    skills_used: Vec<String>,
    #[serde(default)]
    key_findings: Vec<String>,
    root_cause: Option<String>,
    #[serde(default)]
    summary: String,
    #[serde(default)]
    resolved: bool,
    #[serde(default)]
    effectiveness_score: f64,
    embedding: Option<Vec<f32>>,
    embedding_model: Option<String>,
    extraction_status: String,
    extraction_error: Option<String>,
    failed_turn_index: Option<i64>,
    provenance: String,
    #[serde(default)]
    event_ids: Vec<String>,
    significance: Option<String>,
    root_cause_confidence: Option<String>,
    #[serde(default)]
    ruled_out: Vec<String>,
    resolution: Option<String>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    last_confirmed_at: DateTime<Utc>,
    version: i64,
    verdict: Option<String>,
    verdict_note: Option<String>,
    #[serde(default)]
    human_pinned: Vec<String>,
    proposals_json: Option<String>,
    turns_json: Option<String>,
    last_recalled_at: Option<DateTime<Utc>>,
    /// Computed by the search queries (not a property): the `created_at` of every other
    /// episode of the recurrence chain. Absent = the query did not compute the chain.
    #[serde(default)]
    recurrence_seen: Option<Vec<DateTime<Utc>>>,
}

impl EpisodeRow {
    /// Checks what the type system could not: enum spellings, counts, list pairing.
    pub(crate) fn into_episode(self) -> Result<Episode, String> {
        let count = |name: &str, value: i64| {
            u32::try_from(value).map_err(|_| format!("{name} {value} is out of range"))
        };
        if self.component_types.len() != self.component_names.len() {
            return Err(format!(
                "episode {} has {} component types but {} names",
                self.id,
                self.component_types.len(),
                self.component_names.len()
            ));
        }
        let extraction_status = ExtractionStatus::parse(&self.extraction_status)
            .ok_or_else(|| format!("unknown extraction_status `{}`", self.extraction_status))?;
        let provenance = Provenance::parse(&self.provenance)
            .ok_or_else(|| format!("unknown provenance `{}`", self.provenance))?;
        let proposals = match self.proposals_json.as_deref() {
            None | Some("") => Default::default(),
            Some(text) => serde_json::from_str(text)
                .map_err(|e| format!("episode {} has unreadable proposals_json: {e}", self.id))?,
        };
        let turns = match self.turns_json.as_deref() {
            None | Some("") => Vec::new(),
            Some(text) => serde_json::from_str(text)
                .map_err(|e| format!("episode {} has unreadable turns_json: {e}", self.id))?,
        };
        let recurrence = self.recurrence_seen.map(|seen| RecurrenceSummary {
            count: u32::try_from(seen.len()).unwrap_or(u32::MAX),
            first_seen: seen.iter().copied().fold(self.created_at, DateTime::min),
            last_seen: seen.iter().copied().fold(self.created_at, DateTime::max),
        });
        Ok(Episode {
            turn_count: count("turn_count", self.turn_count)?,
            last_turn_index: count("last_turn_index", self.last_turn_index)?,
            components: self
                .component_types
                .into_iter()
                .zip(self.component_names)
                .map(|(kind, name)| Component { kind, name })
                .collect(),
            skills_used: self.skills_used.into_iter().collect(),
            id: self.id,
            org: self.org,
            team: self.team,
            agent_id: self.agent_id,
            correlation_id: self.correlation_id,
            agent_run_id: self.agent_run_id,
            issue_type: self.issue_type,
            issue_description: self.issue_description,
            opening_message: self.opening_message,
            key_findings: self.key_findings,
            root_cause: self.root_cause,
            summary: self.summary,
            resolved: self.resolved,
            effectiveness_score: self.effectiveness_score,
            embedding: self.embedding,
            embedding_model: self.embedding_model,
            extraction_status,
            extraction_error: self.extraction_error,
            failed_turn_index: self
                .failed_turn_index
                .map(|n| count("failed_turn_index", n))
                .transpose()?,
            provenance,
            event_ids: self.event_ids,
            significance: self.significance,
            root_cause_confidence: self.root_cause_confidence,
            ruled_out: self.ruled_out,
            resolution: self.resolution,
            created_at: self.created_at,
            updated_at: self.updated_at,
            last_confirmed_at: self.last_confirmed_at,
            version: self.version,
            review: ReviewState {
                verdict: self.verdict,
                verdict_note: self.verdict_note,
                human_pinned: self.human_pinned.into_iter().collect(),
                proposals,
            },
            turns,
            last_recalled_at: self.last_recalled_at,
            recurrence,
        })
    }
}

/// `episodes/write` with every property of `episode` and the new `version`.
pub(crate) fn write_statement(episode: &Episode, version: i64) -> Statement {
    let (types, names): (Vec<String>, Vec<String>) = episode
        .components
        .iter()
        .map(|c| (c.kind.clone(), c.name.clone()))
        .unzip();
    WRITE
        .statement()
        .param("key", episode.key().composite())
        .param("id", episode.id.as_str())
        .param("org", episode.org.as_str())
        .param("team", episode.team.as_str())
        .param("agent_id", episode.agent_id.as_str())
        .param("correlation_id", episode.correlation_id.as_str())
        .param("agent_run_id", episode.agent_run_id.as_str())
        .param("turn_count", episode.turn_count)
        .param("last_turn_index", episode.last_turn_index)
        .param("issue_type", episode.issue_type.as_str())
        .param("issue_description", episode.issue_description.as_str())
        .param("opening_message", episode.opening_message.clone())
        .param("component_types", types)
        .param("component_names", names)
        .param("skills_used", sorted_skills(episode))
        .param("key_findings", episode.key_findings.clone())
        .param("key_findings_text", episode.key_findings.join("\n"))
        .param("root_cause", episode.root_cause.clone())
        .param("summary", episode.summary.as_str())
        .param("resolved", episode.resolved)
        .param("effectiveness_score", episode.effectiveness_score)
        .param("embedding", episode.embedding.clone())
        .param("embedding_model", episode.embedding_model.clone())
        .param("extraction_status", episode.extraction_status.as_str())
        .param("extraction_error", episode.extraction_error.clone())
        .param(
            "failed_turn_index",
            episode.failed_turn_index.map(i64::from),
        )
        .param("provenance", episode.provenance.as_str())
        .param("event_ids", episode.event_ids.clone())
        .param("significance", episode.significance.clone())
        .param(
            "root_cause_confidence",
            episode.root_cause_confidence.clone(),
        )
        .param("ruled_out", episode.ruled_out.clone())
        .param("resolution", episode.resolution.clone())
        .param("created_at", episode.created_at)
        .param("updated_at", episode.updated_at)
        .param("last_confirmed_at", episode.last_confirmed_at)
        .param(
            "scope_tokens",
            lucene::scope_tokens(&episode.org, &episode.team),
        )
        .param("version", version)
        .param("verdict", episode.review.verdict.clone())
        .param("verdict_note", episode.review.verdict_note.clone())
        .param(
            "human_pinned",
            episode
                .review
                .human_pinned
                .iter()
                .cloned()
                .collect::<Vec<_>>(),
        )
        .param("proposals_json", json_or_null(&episode.review.proposals))
        .param("turns_json", json_or_null(&episode.turns))
}

/// A JSON property, or null (no property) when the collection is empty.
fn json_or_null<T: serde::Serialize + ?Sized>(value: &T) -> Option<String> {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::Array(a)) if a.is_empty() => None,
        Ok(serde_json::Value::Object(o)) if o.is_empty() => None,
        Ok(v) => Some(v.to_string()),
        Err(_) => None,
    }
}

/// The skills in the order every writer locks them in (a `BTreeSet` is already sorted).
pub(crate) fn sorted_skills(episode: &Episode) -> Vec<String> {
    episode.skills_used.iter().cloned().collect()
}

/// The episode's skills as `{key, name}` maps sorted by key (the order concurrent saves lock
/// them in), and their keys. `skills_used` is a sorted set and every key has the same org
/// prefix, so key order is name order.
pub(crate) fn skill_maps(episode: &Episode) -> (Vec<String>, Vec<BoltType>) {
    episode
        .skills_used
        .iter()
        .map(|name| {
            let key = skill_key(&episode.org, name);
            let map = BoltType::from(HashMap::from([
                ("key".to_owned(), key.clone()),
                ("name".to_owned(), name.clone()),
            ]));
            (key, map)
        })
        .unzip()
}

/// An org's components as `{key, type, name}` maps, deduplicated and sorted by key so that
/// concurrent saves lock the org's `Component` nodes in one order (fewer deadlocks).
pub(crate) fn component_maps(org: &str, components: &[Component]) -> (Vec<String>, Vec<BoltType>) {
    let mut keyed: Vec<(String, &Component)> = components
        .iter()
        .map(|c| (component_key(org, c), c))
        .collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    keyed.dedup_by(|a, b| a.0 == b.0);
    let keys = keyed.iter().map(|(k, _)| k.clone()).collect();
    let maps = keyed
        .into_iter()
        .map(|(key, c)| {
            BoltType::from(HashMap::from([
                ("key".to_owned(), key),
                ("type".to_owned(), c.kind.clone()),
                ("name".to_owned(), c.name.clone()),
            ]))
        })
        .collect();
    (keys, maps)
}

/// The component keys a filter matches against `Component.key` inside `org`.
pub(crate) fn component_keys(org: &str, components: &[Component]) -> Vec<String> {
    component_maps(org, components).0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> EpisodeRow {
        let at = DateTime::from_timestamp(1_770_000_000, 123_456_000).unwrap();
        EpisodeRow {
            id: "ep_1".into(),
            org: "acme".into(),
            team: "checkout".into(),
            agent_id: "agent".into(),
            correlation_id: "conv".into(),
            agent_run_id: "run".into(),
            turn_count: 2,
            last_turn_index: 3,
            issue_type: "cache-eviction".into(),
            issue_description: "pods crash".into(),
            opening_message: Some("[FIRING] CheckoutErrors".into()),
            component_types: vec!["service".into(), "cache".into()],
            component_names: vec!["checkout".into(), "redis:main".into()],
            skills_used: vec!["k8s".into()],
            key_findings: vec!["a".into()],
            root_cause: None,
            summary: "s".into(),
            resolved: false,
            effectiveness_score: 0.1,
            embedding: None,
            embedding_model: None,
            extraction_status: "ok".into(),
            extraction_error: None,
            failed_turn_index: None,
            provenance: "imported".into(),
            event_ids: vec![],
            significance: None,
            root_cause_confidence: None,
            ruled_out: vec![],
            resolution: None,
            created_at: at,
            updated_at: at,
            last_confirmed_at: at,
            version: 4,
            verdict: None,
            verdict_note: None,
            human_pinned: vec![],
            proposals_json: None,
            turns_json: None,
            last_recalled_at: None,
            recurrence_seen: None,
        }
    }

    #[test]
    fn a_computed_recurrence_chain_becomes_its_count_and_first_and_last_seen() {
        let episode = row().into_episode().unwrap();
        assert_eq!(episode.recurrence, None, "not computed: absent");
        let mut chained = row();
        let at = chained.created_at;
        let (before, after) = (
            at - chrono::Duration::days(9),
            at + chrono::Duration::days(2),
        );
        chained.recurrence_seen = Some(vec![after, before]);
        let summary = chained.into_episode().unwrap().recurrence.unwrap();
        assert_eq!(summary.count, 2);
        assert_eq!((summary.first_seen, summary.last_seen), (before, after));
        let mut alone = row();
        alone.recurrence_seen = Some(vec![]);
        let summary = alone.into_episode().unwrap().recurrence.unwrap();
        assert_eq!(
            (summary.count, summary.first_seen, summary.last_seen),
            (0, at, at)
        );
    }

    #[test]
    fn a_row_maps_to_an_episode_with_paired_components() {
        let episode = row().into_episode().unwrap();
        assert_eq!(
            episode.components,
            vec![
                Component::new("service", "checkout"),
                Component::new("cache", "redis:main")
            ]
        );
        assert_eq!(episode.provenance, Provenance::Imported);
        assert_eq!(episode.turn_count, 2);
        assert_eq!(episode.version, 4);
    }

    #[test]
    fn malformed_rows_are_refused_with_a_reason() {
        let mut bad = row();
        bad.component_names.pop();
        assert!(bad.into_episode().unwrap_err().contains("component"));
        let mut bad = row();
        bad.extraction_status = "maybe".into();
        assert!(bad.into_episode().unwrap_err().contains("maybe"));
        let mut bad = row();
        bad.turn_count = -1;
        assert!(bad.into_episode().unwrap_err().contains("turn_count"));
    }

    #[test]
    fn component_keys_are_sorted_unique_and_unambiguous() {
        let components = vec![
            Component::new("service", "b"),
            Component::new("service", "a"),
            Component::new("service", "b"),
        ];
        assert_eq!(
            component_keys("acme", &components),
            vec!["acme\u{1f}service\u{1f}a", "acme\u{1f}service\u{1f}b"]
        );
        assert_ne!(
            component_key("acme", &Component::new("a:b", "c")),
            component_key("acme", &Component::new("a", "b:c"))
        );
        // The same component of two orgs is two nodes.
        let checkout = Component::new("service", "checkout");
        assert_ne!(
            component_key("acme", &checkout),
            component_key("globex", &checkout)
        );
    }

    #[test]
    fn skill_keys_belong_to_the_org_and_come_in_lock_order() {
        let mut episode = deja_domain::testing::episode("e");
        episode.org = "acme".into();
        episode.skills_used = ["redis", "kubernetes", "datadog"]
            .into_iter()
            .map(String::from)
            .collect();
        let (keys, maps) = skill_maps(&episode);
        assert_eq!(
            keys,
            vec![
                "acme\u{1f}datadog",
                "acme\u{1f}kubernetes",
                "acme\u{1f}redis"
            ]
        );
        assert_eq!(maps.len(), 3);
        assert_ne!(skill_key("acme", "redis"), skill_key("globex", "redis"));
    }
}
