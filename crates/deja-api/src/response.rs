//! What memory-search answers, identical over HTTP, MCP and the CLI's `--json`:
//! `{"success": true, "result": {...}}` or `{"success": false, "error": {"code", "message"}}`.

use crate::error::{ErrorBody, SearchError};
use crate::request::ComponentRef;
use chrono::{DateTime, Utc};
use deja_domain::ranking::ScoreBreakdown;
use deja_domain::recognition::{lead_check, Decided, Evidence, MatchStrength};
use deja_domain::Episode;

/// The notice of a semantic search that recognized nothing: memory has no episode like
/// the query's incident, and says so instead of offering the nearest unrelated one.
pub const NOTHING_SIMILAR: &str = "nothing similar in memory";
use serde::{Deserialize, Serialize};

/// `result` of a successful search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchResponse {
    /// Best first.
    pub episodes: Vec<EpisodeView>,
    /// Markdown playbook for the (issue type, component) that two or more of the episodes
    /// share, when one is stored. Leads to verify, never instructions.
    pub strategy: Option<String>,
    /// More episodes passed the filters (and, in semantic mode, the decision) than `limit`
    /// allowed.
    pub more_available: bool,
    /// Present only when something about this answer deserves a word: nothing similar in
    /// memory, a semantic search answered by text search because the embedder is down, a
    /// stage skipped for time, or a strategy being refreshed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
}

/// One episode as search returns it: compact unless `details` was asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeView {
    pub id: String,
    pub issue_type: String,
    pub root_cause: Option<String>,
    pub resolved: bool,
    pub summary: String,
    pub skills_used: Vec<String>,
    pub components: Vec<ComponentRef>,
    /// The ranking score (semantic: docs/ranking.md; text: the full-text relevance);
    /// null in timeline mode, which orders by time.
    pub score: Option<f64>,
    /// Raw cosine similarity to the query (semantic mode only).
    pub similarity: Option<f64>,
    /// Semantic mode: `strong` = a recognized recurrence (same failure mechanism, high
    /// confidence); `possible` = a lead to check with one step (`check`), not a recognition.
    #[serde(rename = "match", default, skip_serializing_if = "Option::is_none")]
    pub match_strength: Option<MatchStrength>,
    /// Semantic mode: calibrated probability in [0, 1] that this is the same failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// For a `possible` lead: the check that would confirm or discard it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
    pub updated_at: DateTime<Utc>,
    pub correlation_id: String,
    pub agent_run_id: String,
    /// `"wrong"` when a person marked the episode wrong: treat it as a ruled-out lead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
    /// What the person said about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict_note: Option<String>,
    /// How many other episodes are in this one's recurrence chain (`RECURRENCE_OF`, linked
    /// by the recognition decision or by people): 0 = seen once. Present in search answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recurrence_count: Option<u32>,
    /// When the failure was first and last seen: the earliest and latest `created_at` of
    /// the chain, this episode included. Present in search answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_seen: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen: Option<DateTime<Utc>>,
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub details: Option<EpisodeDetails>,
}

/// What `details: true` (and `GET /v1/memory/episodes/{id}`) adds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeDetails {
    pub org: String,
    pub team: String,
    pub description: String,
    pub key_findings: Vec<String>,
    /// How `score` was made (semantic mode only).
    #[serde(default)]
    pub score_breakdown: Option<ScoreBreakdown>,
    /// What linked the episode to the query (semantic mode only): the similarities (cosine,
    /// late interaction, the cross-encoder's score when on), components, issue type and
    /// literal strings in common.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Evidence>,
    /// `extracted` by the worker from a conversation, or `imported` from a reviewed record.
    pub provenance: String,
    pub agent_id: String,
    pub turn_count: u32,
    pub extraction_status: String,
    pub effectiveness_score: f64,
    #[serde(default)]
    pub significance: Option<String>,
    #[serde(default)]
    pub root_cause_confidence: Option<String>,
    #[serde(default)]
    pub ruled_out: Vec<String>,
    #[serde(default)]
    pub resolution: Option<String>,
    pub created_at: DateTime<Utc>,
    pub last_confirmed_at: DateTime<Utc>,
}

impl EpisodeView {
    pub fn compact(episode: &Episode, score: Option<f64>, similarity: Option<f64>) -> Self {
        EpisodeView {
            id: episode.id.clone(),
            issue_type: episode.issue_type.clone(),
            root_cause: episode.root_cause.clone(),
            resolved: episode.resolved,
            summary: episode.summary.clone(),
            skills_used: episode.skills_used.iter().cloned().collect(),
            components: episode.components.iter().map(ComponentRef::from).collect(),
            score,
            similarity,
            match_strength: None,
            confidence: None,
            check: None,
            updated_at: episode.updated_at,
            correlation_id: episode.correlation_id.clone(),
            agent_run_id: episode.agent_run_id.clone(),
            verdict: episode.review.verdict.clone(),
            verdict_note: episode.review.verdict_note.clone(),
            recurrence_count: episode.recurrence.map(|r| r.count),
            first_seen: episode.recurrence.map(|r| r.first_seen),
            last_seen: episode.recurrence.map(|r| r.last_seen),
            details: None,
        }
    }

    pub fn with_details(mut self, episode: &Episode, breakdown: Option<ScoreBreakdown>) -> Self {
        self.details = Some(EpisodeDetails {
            org: episode.org.clone(),
            team: episode.team.clone(),
            description: episode.issue_description.clone(),
            key_findings: episode.key_findings.clone(),
            score_breakdown: breakdown,
            evidence: None,
            provenance: episode.provenance.as_str().to_owned(),
            agent_id: episode.agent_id.clone(),
            turn_count: episode.turn_count,
            extraction_status: episode.extraction_status.as_str().to_owned(),
            effectiveness_score: episode.effectiveness_score,
            significance: episode.significance.clone(),
            root_cause_confidence: episode.root_cause_confidence.clone(),
            ruled_out: episode.ruled_out.clone(),
            resolution: episode.resolution.clone(),
            created_at: episode.created_at,
            last_confirmed_at: episode.last_confirmed_at,
        });
        self
    }

    /// An episode a semantic search recognized, with its label and confidence.
    pub fn recognized(decided: &Decided, details: bool) -> Self {
        let episode = &decided.episode;
        let mut view = EpisodeView::compact(
            episode,
            Some(decided.breakdown.score),
            Some(decided.evidence.cosine),
        );
        view.match_strength = Some(decided.strength);
        view.confidence = Some((decided.confidence * 1000.0).round() / 1000.0);
        if decided.strength == MatchStrength::Possible {
            view.check = Some(lead_check(decided));
        }
        if details {
            view = view.with_details(episode, Some(decided.breakdown));
            if let Some(d) = view.details.as_mut() {
                d.evidence = Some(decided.evidence.clone());
            }
        }
        view
    }

    /// The full view of one episode (no score: it was not searched for).
    pub fn full(episode: &Episode) -> Self {
        EpisodeView::compact(episode, None, None).with_details(episode, None)
    }
}

/// The envelope every answer travels in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope<T> {
    pub success: bool,
    // A missing Option is None without `default`, which would demand `T: Default`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
}

impl<T> Envelope<T> {
    pub fn ok(result: T) -> Self {
        Envelope {
            success: true,
            result: Some(result),
            error: None,
        }
    }

    pub fn failed(error: &SearchError) -> Self {
        Envelope {
            success: false,
            result: None,
            error: Some(error.body()),
        }
    }

    pub fn from_result(result: Result<T, SearchError>) -> Self {
        match result {
            Ok(value) => Envelope::ok(value),
            Err(error) => Envelope::failed(&error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    #[test]
    fn a_success_envelope_has_exactly_the_documented_shape() {
        let envelope = Envelope::ok(SearchResponse {
            episodes: vec![],
            strategy: None,
            more_available: false,
            notice: None,
        });
        assert_eq!(
            serde_json::to_value(&envelope).unwrap(),
            serde_json::json!({"success": true, "result": {"episodes": [], "strategy": null, "more_available": false}})
        );
    }

    #[test]
    fn a_failure_envelope_carries_code_and_message() {
        let envelope: Envelope<SearchResponse> =
            Envelope::failed(&SearchError::DeadlineExceeded(2000));
        let json = serde_json::to_value(&envelope).unwrap();
        assert_eq!(json["success"], false);
        assert_eq!(json["error"]["code"], "deadline_exceeded");
        let back: Envelope<SearchResponse> = serde_json::from_value(json).unwrap();
        assert_eq!(back.error.unwrap().code, ErrorCode::DeadlineExceeded);
    }
}
