//! The episode: deja's derived memory of one conversation.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The identity of an episode: one per (org, correlation_id). Stored as a single composite
/// property because Neo4j Community has no node keys, only single-property uniqueness.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct EpisodeKey {
    pub org: String,
    pub correlation_id: String,
}

impl EpisodeKey {
    pub fn new(org: impl Into<String>, correlation_id: impl Into<String>) -> Self {
        EpisodeKey {
            org: org.into(),
            correlation_id: correlation_id.into(),
        }
    }

    /// The stored composite key. The unit separator cannot appear in a sane org id, so two
    /// different pairs never collide.
    pub fn composite(&self) -> String {
        format!("{}\u{1f}{}", self.org, self.correlation_id)
    }

    /// A stable, URL-safe episode id derived from the key (so re-imports and replays land on
    /// the same id without a lookup).
    pub fn episode_id(&self) -> String {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(self.composite().as_bytes());
        format!("ep_{}", &hex::encode(digest)[..24])
    }
}

/// Something an incident touched. `kind` is free-form but conventional: `service`,
/// `database`, `queue`, `cache`, `cluster`, `host`, `network`, `pipeline`, `library`...
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub struct Component {
    #[serde(rename = "type")]
    #[schemars(length(max = Component::MAX_KIND_CHARS))]
    pub kind: String,
    #[schemars(length(max = Component::MAX_NAME_CHARS))]
    pub name: String,
}

impl Component {
    /// Bounds of an extracted component (the LLM's schema; longer is not a component name).
    pub const MAX_KIND_CHARS: usize = 40;
    pub const MAX_NAME_CHARS: usize = 80;

    pub fn new(kind: impl Into<String>, name: impl Into<String>) -> Self {
        Component {
            kind: kind.into(),
            name: name.into(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExtractionStatus {
    Ok,
    /// The LLM could not summarise the conversation: listed, never semantically searchable.
    Failed,
}

impl ExtractionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ExtractionStatus::Ok => "ok",
            ExtractionStatus::Failed => "failed",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "ok" => Some(ExtractionStatus::Ok),
            "failed" => Some(ExtractionStatus::Failed),
            _ => None,
        }
    }
}

/// Where an episode came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Provenance {
    /// Extracted by the worker from end-of-turn events.
    Extracted,
    /// Imported from a reviewed incident record by `deja import`.
    Imported,
}

impl Provenance {
    pub fn as_str(self) -> &'static str {
        match self {
            Provenance::Extracted => "extracted",
            Provenance::Imported => "imported",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "extracted" => Some(Provenance::Extracted),
            "imported" => Some(Provenance::Imported),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Episode {
    pub id: String,
    pub org: String,
    pub team: String,
    pub agent_id: String,
    pub correlation_id: String,
    /// The run of the turn whose conclusion the episode holds.
    pub agent_run_id: String,
    /// Distinct turns merged so far.
    pub turn_count: u32,
    /// The highest turn index merged; its conclusion is the episode's conclusion.
    pub last_turn_index: u32,
    pub issue_type: String,
    pub issue_description: String,
    /// What opened the investigation: the first turn's user message (the alert or the
    /// question the agent was given), verbatim up to [`OPENING_MESSAGE_MAX_CHARS`]
    /// ([`opening_message_of`]).
    /// Input, not a conclusion: it is embedded and full-text indexed with the episode (the
    /// next alert of a recurring failure reads like the last one, in words a small model's
    /// description drops), shown to people, and never part of a search answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opening_message: Option<String>,
    pub components: Vec<Component>,
    /// Accumulated over every turn (set union, sorted).
    pub skills_used: BTreeSet<String>,
    /// The latest turn's findings, replaced each turn.
    pub key_findings: Vec<String>,
    pub root_cause: Option<String>,
    pub summary: String,
    /// A root cause identified with evidence.
    pub resolved: bool,
    pub effectiveness_score: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding: Option<Vec<f32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding_model: Option<String>,
    pub extraction_status: ExtractionStatus,
    /// Why the latest extraction failed. May be set on an `ok` episode whose newest turn could
    /// not be summarised: the older conclusion stays searchable and `deja retry` picks it up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extraction_error: Option<String>,
    /// The turn whose extraction failed for good (set with `extraction_error`): only a turn
    /// at or above it clears the error, so a late or redelivered older turn cannot hide the
    /// failure from `deja retry`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_turn_index: Option<u32>,
    pub provenance: Provenance,
    /// Event ids already merged, for idempotent redelivery.
    #[serde(default)]
    pub event_ids: Vec<String>,
    // Review metadata, from imports or people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub significance: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_cause_confidence: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ruled_out: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// When the episode's conclusion was last confirmed by a turn or a person; recency decay
    /// runs from here.
    pub last_confirmed_at: DateTime<Utc>,
    /// Optimistic concurrency: every committed write increments it.
    pub version: i64,
    /// What people said (verdict, pinned fields) and what the agent proposed beside it.
    #[serde(default)]
    pub review: crate::review::ReviewState,
    /// Every merged turn, oldest merge first (provenance).
    #[serde(default)]
    pub turns: Vec<crate::review::TurnRecord>,
    /// When a memory-search last returned the episode. Written apart from the episode's
    /// versioned writes (no `version` bump, never by the worker), read for the review
    /// listing's "most recently recalled first".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_recalled_at: Option<DateTime<Utc>>,
    /// The episode's recurrence chain, when the query that read it computed one (search
    /// answers do). Derived, never stored on the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recurrence: Option<RecurrenceSummary>,
}

/// How often the failure of an episode has been seen: its `RECURRENCE_OF` chain (every
/// episode linked to it, directly or not, in either direction).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecurrenceSummary {
    /// Other episodes in the chain (0 = seen once).
    pub count: u32,
    /// The earliest and latest `created_at` in the chain, this episode included.
    pub first_seen: DateTime<Utc>,
    pub last_seen: DateTime<Utc>,
}

impl Episode {
    pub fn key(&self) -> EpisodeKey {
        EpisodeKey::new(&self.org, &self.correlation_id)
    }

    /// Drops the search vector (and its model) when the embedded text is no longer
    /// `text_before`, for whoever writes the episode to embed it anew. Embedding is the costly
    /// part of a write: an unchanged text keeps its vector.
    pub fn drop_vector_if_text_moved(&mut self, text_before: &str) {
        if self.embedding_text() != text_before {
            self.embedding = None;
            self.embedding_model = None;
        }
    }

    /// The text that is embedded for semantic search.
    pub fn embedding_text(&self) -> String {
        embedding_text(
            &self.issue_type,
            &self.issue_description,
            self.opening_message.as_deref(),
            &self.summary,
            &self.key_findings,
            self.root_cause.as_deref(),
        )
    }

    /// What failed and why: the issue type and the root cause, without the symptoms'
    /// wording. Past incidents of one failure read most alike here (each on-call engineer
    /// describes the symptoms in other words), so recognition compares its leads by the
    /// embedding of this text (`recognition::FamilyOrder`). Without a root cause, everything
    /// the episode says ([`Episode::embedding_text`]).
    pub fn cause_text(&self) -> String {
        cause_text(
            &self.issue_type,
            &self.issue_description,
            &self.summary,
            self.root_cause.as_deref(),
        )
    }

    pub fn is_searchable(&self) -> bool {
        self.extraction_status == ExtractionStatus::Ok && self.embedding.is_some()
    }

    /// The turn whose extraction failed for good and is still recorded, if any: a merge must
    /// reach it to clear the failure. Episodes written before `failed_turn_index` existed fall
    /// back to `last_turn_index`.
    pub fn failed_turn(&self) -> Option<u32> {
        let failed =
            self.extraction_status == ExtractionStatus::Failed || self.extraction_error.is_some();
        failed.then(|| self.failed_turn_index.unwrap_or(self.last_turn_index))
    }
}

/// Issue type + description + opening message + summary + key findings + root cause: what
/// the episode is *about*, what opened it and what was observed, without the skills (whose
/// churn would force re-embedding on every turn). The key findings carry the observations a
/// later agent's query describes (error strings, figures, which service did what) that a
/// small model's one-line description drops (docs/EVALUATION.md, "The key findings").
pub fn embedding_text(
    issue_type: &str,
    issue_description: &str,
    opening_message: Option<&str>,
    summary: &str,
    key_findings: &[String],
    root_cause: Option<&str>,
) -> String {
    let issue_type = issue_type.replace(['-', '_'], " ");
    // One list sentence, "Findings: a; b; c": read as one part of the text, not as sentences
    // of their own (docs/EVALUATION.md, "The key findings").
    let findings: Vec<&str> = observed_findings(key_findings)
        .map(|finding| finding.trim().trim_end_matches('.'))
        .filter(|finding| !finding.is_empty())
        .collect();
    let findings = if findings.is_empty() {
        String::new()
    } else {
        format!("Findings: {}", findings.join("; "))
    };
    let mut text = String::new();
    for part in [
        issue_type.as_str(),
        issue_description,
        opening_message.unwrap_or(""),
        summary,
        findings.as_str(),
        root_cause.unwrap_or(""),
    ] {
        let part = part.trim();
        if !part.is_empty() {
            if !text.is_empty() {
                text.push_str(". ");
            }
            text.push_str(part.trim_end_matches('.'));
        }
    }
    text
}

/// How an imported record's verification is kept among its key findings (the episode has no
/// field of its own for it): `Verification: <how the fix was confirmed>`.
pub const VERIFICATION_PREFIX: &str = "Verification: ";

/// The key findings that are observations of the failure: all but an imported record's
/// verification line, which says how the *fix* was confirmed, and which a look-alike with the
/// same fix shares (embedded, it raised the new incidents answered `strong` from 0.21 to 0.24
/// on the curated records: docs/EVALUATION.md, "The key findings").
pub fn observed_findings(key_findings: &[String]) -> impl Iterator<Item = &str> {
    key_findings
        .iter()
        .map(String::as_str)
        .filter(|finding| !finding.starts_with(VERIFICATION_PREFIX))
}

/// How the fix of an imported record was confirmed: its verification line's text, if any.
pub fn verification_of(key_findings: &[String]) -> Option<&str> {
    key_findings
        .iter()
        .find_map(|finding| finding.strip_prefix(VERIFICATION_PREFIX))
}

/// [`Episode::cause_text`] of an episode with these fields.
pub fn cause_text(
    issue_type: &str,
    issue_description: &str,
    summary: &str,
    root_cause: Option<&str>,
) -> String {
    match root_cause.map(str::trim) {
        Some(root_cause) if !root_cause.is_empty() => {
            embedding_text(issue_type, "", None, "", &[], Some(root_cause))
        }
        _ => embedding_text(issue_type, issue_description, None, summary, &[], None),
    }
}

/// How much of an opening message [`Episode::opening_message`] keeps: a pasted alert payload
/// is cut, so that the embedded text (the encoder reads 256 word pieces) stays about the
/// episode.
pub const OPENING_MESSAGE_MAX_CHARS: usize = 500;

/// The opening message a first turn's user message gives an episode: trimmed, cut after
/// [`OPENING_MESSAGE_MAX_CHARS`] characters at a word boundary (marked `…`); none when empty.
/// Idempotent: a message it cut is kept as it is (an import of an exported record keeps it).
pub fn opening_message_of(user_message: &str) -> Option<String> {
    let message = user_message.trim();
    if message.is_empty() {
        return None;
    }
    let body = message.strip_suffix('…').unwrap_or(message);
    if body.chars().nth(OPENING_MESSAGE_MAX_CHARS).is_none() {
        return Some(message.to_owned());
    }
    // The body is longer than the bound, so the message is too.
    let (cut, _) = message.char_indices().nth(OPENING_MESSAGE_MAX_CHARS)?;
    let head = &message[..cut];
    let head = head
        .rfind(char::is_whitespace)
        .map_or(head, |space| &head[..space]);
    Some(format!("{}…", head.trim_end()))
}

/// The tie-break weight of an episode: about 0.8 when resolved with a root cause, 0.4 when
/// resolved without one, 0.1 otherwise.
pub fn effectiveness_score(resolved: bool, root_cause: Option<&str>) -> f64 {
    let has_root_cause = root_cause.is_some_and(|r| !r.trim().is_empty());
    match (resolved, has_root_cause) {
        (true, true) => 0.8,
        (true, false) => 0.4,
        _ => 0.1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effectiveness_follows_resolution_and_root_cause() {
        assert_eq!(effectiveness_score(true, Some("redis evictions")), 0.8);
        assert_eq!(effectiveness_score(true, Some("  ")), 0.4);
        assert_eq!(effectiveness_score(true, None), 0.4);
        assert_eq!(effectiveness_score(false, Some("suspected")), 0.1);
    }

    #[test]
    fn keys_of_different_pairs_never_collide() {
        let a = EpisodeKey::new("ab", "c");
        let b = EpisodeKey::new("a", "bc");
        assert_ne!(a.composite(), b.composite());
        assert_ne!(a.episode_id(), b.episode_id());
        assert_eq!(a.episode_id(), EpisodeKey::new("ab", "c").episode_id());
    }

    #[test]
    fn cause_text_is_the_type_and_root_cause_or_everything_without_one() {
        let mut episode = crate::testing::episode("ep");
        episode.issue_type = "cache-eviction".to_owned();
        episode.issue_description = "pods crash".to_owned();
        episode.summary = "redis full".to_owned();
        episode.root_cause = Some("maxmemory too low for the session keys.".to_owned());
        assert_eq!(
            episode.cause_text(),
            "cache eviction. maxmemory too low for the session keys"
        );
        episode.root_cause = Some("  ".to_owned());
        assert_eq!(episode.cause_text(), episode.embedding_text());
        assert_eq!(
            episode.cause_text(),
            "cache eviction. pods crash. redis full"
        );
    }

    #[test]
    fn embedding_text_joins_the_meaningful_fields() {
        let text = embedding_text(
            "cache-eviction",
            "pods crash.",
            None,
            "redis full",
            &[],
            Some(""),
        );
        assert_eq!(text, "cache eviction. pods crash. redis full");
        let findings = [
            "evicted_keys at 40k/s.".to_owned(),
            " ".to_owned(),
            format!("{VERIFICATION_PREFIX}no evictions for a week"),
            " pods OOMKilled".to_owned(),
        ];
        let text = embedding_text(
            "cache-eviction",
            "pods crash.",
            Some("[FIRING] RedisEvictions"),
            "redis full",
            &findings,
            Some("maxmemory too low"),
        );
        assert_eq!(
            text,
            "cache eviction. pods crash. [FIRING] RedisEvictions. redis full. \
             Findings: evicted_keys at 40k/s; pods OOMKilled. maxmemory too low"
        );
    }

    #[test]
    fn the_cause_text_leaves_the_opening_message_and_the_findings_out() {
        let mut episode = crate::testing::episode("ep");
        episode.opening_message = Some("[FIRING] CheckoutErrors".to_owned());
        episode.key_findings = vec!["502s from the ALB".to_owned()];
        episode.root_cause = None;
        assert!(!episode.cause_text().contains("FIRING"));
        assert!(!episode.cause_text().contains("502s"));
        assert!(episode.embedding_text().contains("[FIRING] CheckoutErrors"));
        assert!(episode.embedding_text().contains("502s from the ALB"));
    }

    #[test]
    fn an_opening_message_is_the_trimmed_message_cut_at_a_word() {
        assert_eq!(opening_message_of("  \n "), None);
        assert_eq!(
            opening_message_of(" checkout 500s\n").as_deref(),
            Some("checkout 500s")
        );
        let long = "évictions ".repeat(100);
        let cut = opening_message_of(&long).expect("an opening message");
        assert!(cut.ends_with("évictions…"), "{cut}");
        assert!(cut.chars().count() <= OPENING_MESSAGE_MAX_CHARS + 1);
        assert_eq!(opening_message_of(&cut).as_ref(), Some(&cut), "idempotent");
        let exact = "x".repeat(OPENING_MESSAGE_MAX_CHARS);
        assert_eq!(opening_message_of(&exact), Some(exact));
        // One word longer than the bound is cut inside the word rather than dropped.
        let word = "y".repeat(OPENING_MESSAGE_MAX_CHARS + 10);
        assert_eq!(
            opening_message_of(&word),
            Some(format!("{}…", "y".repeat(OPENING_MESSAGE_MAX_CHARS)))
        );
    }
}

/// What an org already calls things: offered to the LLM so that it reuses `checkout` instead
/// of inventing `checkout-svc`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Vocabulary {
    pub issue_types: Vec<String>,
    pub components: Vec<Component>,
    /// A short description of an issue type (what failed and why, from its episodes), so the
    /// model reuses a type only for the same failure mechanism.
    #[serde(default)]
    pub issue_type_descriptions: std::collections::BTreeMap<String, String>,
}
