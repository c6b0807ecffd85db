//! What people do to an episode, as pure rules: edit, mark wrong, clear the verdict, confirm,
//! and the rule that keeps a person's edit when a later turn of the same conversation lands.
//!
//! Rules (each has a unit test below):
//! - An edit changes only the fields it names, pins them (`human_pinned`) and returns the
//!   list of changes for the audit record; a field set to its current value is no change.
//! - A pinned field is never overwritten by a later agent turn: the agent's new value is
//!   recorded in `proposals` beside it ([`keep_pinned`]).
//! - Marking wrong moves the root cause to `ruled_out`, clears it, pins it and records the
//!   verdict and its note; such an episode is no strategy source (`is_strategy_source`).
//! - Confirming moves `last_confirmed_at` (the recency factor counts from it).

use crate::episode::{effectiveness_score, Component, Episode};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

/// The verdict a person can put on an episode.
pub const VERDICT_WRONG: &str = "wrong";

/// Field names a person can edit (and that can therefore be pinned).
pub const EDITABLE_FIELDS: &[&str] = &[
    "issue_type",
    "issue_description",
    "components",
    "root_cause",
    "root_cause_confidence",
    "ruled_out",
    "key_findings",
    "resolution",
    "significance",
    "summary",
];

/// The review state of an episode: what people said about it, and what the agent proposed
/// for the fields they pinned.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReviewState {
    /// `Some("wrong")` when a person marked the episode wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict_note: Option<String>,
    /// Fields a person edited: later agent turns propose instead of overwriting them.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub human_pinned: BTreeSet<String>,
    /// The agent's newest value for each pinned field it concluded differently on.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub proposals: BTreeMap<String, Value>,
}

impl ReviewState {
    pub fn is_wrong(&self) -> bool {
        self.verdict.as_deref() == Some(VERDICT_WRONG)
    }
}

/// One merged turn, for provenance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnRecord {
    pub event_id: String,
    pub agent_run_id: String,
    pub turn_index: u32,
    pub ended_at: DateTime<Utc>,
    /// Whether the turn's final answer revised anything: ruled something out or abandoned a
    /// hypothesis ([`crate::merge::TurnUpdate::answer_revises`]). Absent on older records.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub revised: bool,
}

/// A person's edit: every field is optional; `Some` replaces the value. For the optional
/// text fields an empty string clears them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EpisodeEdit {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue_type: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "description"
    )]
    pub issue_description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub components: Option<Vec<Component>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_cause: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_cause_confidence: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ruled_out: Option<Vec<String>>,
    /// What the investigation observed (embedded with the episode: an edit re-embeds it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_findings: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub significance: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// Why an edit is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    #[error("the edit changes nothing")]
    Empty,
    #[error("`{0}` must not be empty")]
    Blank(&'static str),
    #[error("`{field}` is longer than {max} characters")]
    TooLong { field: &'static str, max: usize },
}

/// The longest text a person may put in one field.
pub const MAX_FIELD_CHARS: usize = 4000;

/// One field's change, for the audit record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldChange {
    pub field: String,
    pub from: Value,
    pub to: Value,
}

fn optional(text: &str) -> Option<String> {
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

fn record(field: &str, from: Value, to: Value, changes: &mut Vec<FieldChange>) {
    if from != to {
        changes.push(FieldChange {
            field: field.to_owned(),
            from,
            to,
        });
    }
}

fn set_optional(
    field: &'static str,
    target: &mut Option<String>,
    value: &Option<String>,
    changes: &mut Vec<FieldChange>,
) -> Result<(), EditError> {
    if let Some(value) = value {
        check_len(field, value)?;
        let next = optional(value);
        record(field, json!(target), json!(next), changes);
        *target = next;
    }
    Ok(())
}

/// Replaces a list field when the edit names it: blank items dropped, each item bounded.
fn set_list(
    field: &'static str,
    current: &mut Vec<String>,
    edit: &Option<Vec<String>>,
    changes: &mut Vec<FieldChange>,
) -> Result<(), EditError> {
    let Some(value) = edit else { return Ok(()) };
    let value: Vec<String> = value.iter().filter_map(|v| optional(v)).collect();
    for item in &value {
        check_len(field, item)?;
    }
    record(field, json!(current), json!(value), changes);
    *current = value;
    Ok(())
}

fn check_len(field: &'static str, text: &str) -> Result<(), EditError> {
    if text.chars().count() > MAX_FIELD_CHARS {
        Err(EditError::TooLong {
            field,
            max: MAX_FIELD_CHARS,
        })
    } else {
        Ok(())
    }
}

/// Applies a person's edit. Returns the changes (empty = nothing changed: the caller writes
/// nothing). The episode's embedding is dropped when its embedded text moved.
pub fn apply_edit(
    episode: &mut Episode,
    edit: &EpisodeEdit,
    now: DateTime<Utc>,
) -> Result<Vec<FieldChange>, EditError> {
    if edit == &EpisodeEdit::default() {
        return Err(EditError::Empty);
    }
    let text_before = episode.embedding_text();
    let mut changes = Vec::new();
    if let Some(value) = &edit.issue_type {
        let value = value.trim();
        if value.is_empty() {
            return Err(EditError::Blank("issue_type"));
        }
        check_len("issue_type", value)?;
        // In the org's normal form, as extraction writes it: "Redis Evictions" would otherwise
        // be a second name for `redis-evictions` in the vocabulary and in strategy keys.
        let value = crate::vocab::normalize_issue_type(value);
        if value.is_empty() {
            return Err(EditError::Blank("issue_type"));
        }
        record(
            "issue_type",
            json!(episode.issue_type),
            json!(value),
            &mut changes,
        );
        episode.issue_type = value;
    }
    if let Some(value) = &edit.issue_description {
        check_len("issue_description", value)?;
        record(
            "issue_description",
            json!(episode.issue_description),
            json!(value.trim()),
            &mut changes,
        );
        episode.issue_description = value.trim().to_owned();
    }
    if let Some(value) = &edit.summary {
        if value.trim().is_empty() {
            return Err(EditError::Blank("summary"));
        }
        check_len("summary", value)?;
        record(
            "summary",
            json!(episode.summary),
            json!(value.trim()),
            &mut changes,
        );
        episode.summary = value.trim().to_owned();
    }
    if let Some(value) = &edit.components {
        if value
            .iter()
            .any(|c| c.kind.trim().is_empty() || c.name.trim().is_empty())
        {
            return Err(EditError::Blank("components"));
        }
        let value = crate::vocab::normalize_components(value.clone());
        record(
            "components",
            json!(episode.components),
            json!(value),
            &mut changes,
        );
        episode.components = value;
    }
    set_optional(
        "root_cause",
        &mut episode.root_cause,
        &edit.root_cause,
        &mut changes,
    )?;
    set_optional(
        "root_cause_confidence",
        &mut episode.root_cause_confidence,
        &edit.root_cause_confidence,
        &mut changes,
    )?;
    set_optional(
        "resolution",
        &mut episode.resolution,
        &edit.resolution,
        &mut changes,
    )?;
    set_optional(
        "significance",
        &mut episode.significance,
        &edit.significance,
        &mut changes,
    )?;
    set_list(
        "ruled_out",
        &mut episode.ruled_out,
        &edit.ruled_out,
        &mut changes,
    )?;
    set_list(
        "key_findings",
        &mut episode.key_findings,
        &edit.key_findings,
        &mut changes,
    )?;
    for change in &changes {
        episode.review.human_pinned.insert(change.field.clone());
        // The person decided: an older agent proposal for the field is moot.
        episode.review.proposals.remove(&change.field);
    }
    if !changes.is_empty() {
        after_person_changed(episode, &text_before, now, &mut changes);
    }
    Ok(changes)
}

/// Marks the episode wrong: its root cause becomes a ruled-out lead. Returns the changes.
pub fn mark_wrong(episode: &mut Episode, note: &str, now: DateTime<Utc>) -> Vec<FieldChange> {
    let text_before = episode.embedding_text();
    let mut changes = Vec::new();
    let note = optional(note);
    if let Some(root_cause) = episode.root_cause.take() {
        if !episode.ruled_out.contains(&root_cause) {
            let before = json!(episode.ruled_out);
            episode.ruled_out.push(root_cause.clone());
            changes.push(FieldChange {
                field: "ruled_out".into(),
                from: before,
                to: json!(episode.ruled_out),
            });
        }
        changes.push(FieldChange {
            field: "root_cause".into(),
            from: json!(root_cause),
            to: Value::Null,
        });
        episode.review.human_pinned.insert("root_cause".into());
        episode.review.proposals.remove("root_cause");
    }
    changes.push(FieldChange {
        field: "verdict".into(),
        from: json!(episode.review.verdict),
        to: json!(VERDICT_WRONG),
    });
    changes.push(FieldChange {
        field: "verdict_note".into(),
        from: json!(episode.review.verdict_note),
        to: json!(note),
    });
    episode.review.verdict = Some(VERDICT_WRONG.to_owned());
    episode.review.verdict_note = note;
    after_person_changed(episode, &text_before, now, &mut changes);
    changes
}

/// Clears the verdict (the ruled-out root cause stays ruled out; edit it back if needed).
pub fn clear_verdict(episode: &mut Episode, now: DateTime<Utc>) -> Vec<FieldChange> {
    if episode.review.verdict.is_none() && episode.review.verdict_note.is_none() {
        return Vec::new();
    }
    let changes = vec![
        FieldChange {
            field: "verdict".into(),
            from: json!(episode.review.verdict),
            to: Value::Null,
        },
        FieldChange {
            field: "verdict_note".into(),
            from: json!(episode.review.verdict_note),
            to: Value::Null,
        },
    ];
    episode.review.verdict = None;
    episode.review.verdict_note = None;
    episode.updated_at = now;
    changes
}

/// A person confirms the episode still holds: recency counts from now.
pub fn confirm(episode: &mut Episode, now: DateTime<Utc>) -> Vec<FieldChange> {
    let change = FieldChange {
        field: "last_confirmed_at".into(),
        from: json!(episode.last_confirmed_at),
        to: json!(now),
    };
    // Not `updated_at`: nothing it says changed, and strategies made from it would read as
    // stale (their source fingerprint hashes it) and be synthesized again for nothing.
    episode.last_confirmed_at = now;
    vec![change]
}

/// True when the episode may feed a strategy: extracted fine and not marked wrong.
pub fn is_strategy_source(episode: &Episode) -> bool {
    episode.extraction_status == crate::ExtractionStatus::Ok && !episode.review.is_wrong()
}

fn after_person_changed(
    episode: &mut Episode,
    text_before: &str,
    now: DateTime<Utc>,
    changes: &mut Vec<FieldChange>,
) {
    // Resolved means a cause identified (as a merge has it): without one it is not.
    if episode.resolved && episode.root_cause.is_none() {
        changes.push(FieldChange {
            field: "resolved".into(),
            from: json!(true),
            to: json!(false),
        });
        episode.resolved = false;
    }
    episode.effectiveness_score =
        effectiveness_score(episode.resolved, episode.root_cause.as_deref());
    episode.drop_vector_if_text_moved(text_before);
    episode.updated_at = now;
}

/// The value of a pinnable field, as JSON (for proposals and audit records).
fn field_value(episode: &Episode, field: &str) -> Option<Value> {
    Some(match field {
        "issue_type" => json!(episode.issue_type),
        "issue_description" => json!(episode.issue_description),
        "components" => json!(episode.components),
        "root_cause" => json!(episode.root_cause),
        "root_cause_confidence" => json!(episode.root_cause_confidence),
        "ruled_out" => json!(episode.ruled_out),
        "key_findings" => json!(episode.key_findings),
        "resolution" => json!(episode.resolution),
        "significance" => json!(episode.significance),
        "summary" => json!(episode.summary),
        _ => return None,
    })
}

fn restore_field(from: &Episode, to: &mut Episode, field: &str) {
    match field {
        "issue_type" => to.issue_type = from.issue_type.clone(),
        "issue_description" => to.issue_description = from.issue_description.clone(),
        "components" => to.components = from.components.clone(),
        "root_cause" => to.root_cause = from.root_cause.clone(),
        "root_cause_confidence" => to.root_cause_confidence = from.root_cause_confidence.clone(),
        "ruled_out" => to.ruled_out = from.ruled_out.clone(),
        "key_findings" => to.key_findings = from.key_findings.clone(),
        "resolution" => to.resolution = from.resolution.clone(),
        "significance" => to.significance = from.significance.clone(),
        "summary" => to.summary = from.summary.clone(),
        _ => {}
    }
}

/// The merge rule for pinned fields: `merged` is `before` with an agent's new conclusion
/// applied. Every field a person pinned gets its human value back; the agent's value, when
/// different, is recorded as a proposal. The vector is kept when the embedded text ends up
/// unchanged.
pub fn keep_pinned(before: &Episode, merged: &mut Episode) {
    let pinned = before.review.human_pinned.clone();
    if pinned.is_empty() {
        return;
    }
    for field in &pinned {
        let (Some(human), Some(agent)) = (field_value(before, field), field_value(merged, field))
        else {
            continue;
        };
        if human != agent {
            merged.review.proposals.insert(field.clone(), agent);
        }
        restore_field(before, merged, field);
    }
    // While a person's verdict stands, the cause they refuted stays ruled out (`mark_wrong`
    // put it there), whatever list the agent's turn brought; and an episode whose cause a
    // person removed is not resolved by a turn's `resolved` alone.
    if before.review.verdict.as_deref() == Some(VERDICT_WRONG) && !pinned.contains("ruled_out") {
        for item in &before.ruled_out {
            if !merged.ruled_out.contains(item) {
                merged.ruled_out.push(item.clone());
            }
        }
    }
    if merged.root_cause.is_none() {
        merged.resolved = false;
    }
    merged.effectiveness_score = effectiveness_score(merged.resolved, merged.root_cause.as_deref());
    if merged.embedding.is_none() && merged.embedding_text() == before.embedding_text() {
        merged.embedding = before.embedding.clone();
        merged.embedding_model = before.embedding_model.clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extraction::ExtractedEpisode;
    use crate::merge::{merge_turn, TurnUpdate};

    fn at(minute: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_770_000_000 + minute * 60, 0).unwrap()
    }

    fn update(turn: u32) -> TurnUpdate {
        TurnUpdate {
            event_id: format!("evt-{turn}"),
            agent_id: "agent".into(),
            agent_run_id: format!("run-{turn}"),
            started_at: at(i64::from(turn)),
            ended_at: at(i64::from(turn)),
            ..crate::testing::turn_update("conv", turn)
        }
    }

    fn conclusion(root_cause: &str) -> ExtractedEpisode {
        ExtractedEpisode {
            issue_type: "cache-eviction".into(),
            issue_description: "pods crash".into(),
            components: vec![Component::new("cache", "redis")],
            key_findings: vec!["evictions".into()],
            root_cause: Some(root_cause.into()),
            summary: format!("summary: {root_cause}"),
            resolved: true,
            ruled_out: vec![],
        }
    }

    fn episode() -> Episode {
        let mut e = merge_turn(None, &update(1), &conclusion("maxmemory too low"), at(1)).unwrap();
        e.embedding = Some(vec![0.1; 3]);
        e.embedding_model = Some("m".into());
        e
    }

    #[test]
    fn an_edit_changes_only_named_fields_pins_them_and_lists_the_changes() {
        let mut e = episode();
        let edit = EpisodeEdit {
            root_cause: Some("a bad deploy".into()),
            significance: Some("incident".into()),
            summary: Some(e.summary.clone()),
            ..Default::default()
        };
        let changes = apply_edit(&mut e, &edit, at(10)).unwrap();
        let fields: Vec<&str> = changes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, vec!["root_cause", "significance"]);
        assert_eq!(e.root_cause.as_deref(), Some("a bad deploy"));
        assert!(e.review.human_pinned.contains("root_cause"));
        assert!(!e.review.human_pinned.contains("summary"), "unchanged");
        assert!(e.embedding.is_none(), "the embedded text moved");
        assert_eq!(e.updated_at, at(10));
    }

    #[test]
    fn an_edited_issue_type_and_components_are_stored_in_the_orgs_normal_form() {
        let mut e = episode();
        let edit = EpisodeEdit {
            issue_type: Some("Redis Evictions".into()),
            components: Some(vec![
                Component::new("Service", "Redis_Sessions"),
                Component::new("svc", "redis sessions"),
            ]),
            ..Default::default()
        };
        apply_edit(&mut e, &edit, at(3)).unwrap();
        assert_eq!(e.issue_type, "redis-evictions");
        assert_eq!(
            e.components,
            vec![Component::new("service", "redis-sessions")]
        );
    }

    #[test]
    fn an_empty_or_blank_edit_is_refused() {
        let mut e = episode();
        assert_eq!(
            apply_edit(&mut e, &EpisodeEdit::default(), at(2)),
            Err(EditError::Empty)
        );
        let blank = EpisodeEdit {
            summary: Some("  ".into()),
            ..Default::default()
        };
        assert_eq!(
            apply_edit(&mut e, &blank, at(2)),
            Err(EditError::Blank("summary"))
        );
    }

    /// The next turn after a verdict brings its own `ruled_out` (none here) and `resolved`: the
    /// refuted cause stays ruled out, and without a cause the episode is not resolved.
    #[test]
    fn a_turn_after_a_wrong_verdict_keeps_the_refuted_cause_ruled_out_and_resolves_nothing() {
        let mut before = episode();
        mark_wrong(&mut before, "the heap was fine", at(5));
        assert_eq!(before.ruled_out, vec!["maxmemory too low".to_owned()]);
        let mut merged =
            merge_turn(Some(&before), &update(2), &conclusion("dns ttl"), at(6)).unwrap();
        keep_pinned(&before, &mut merged);
        assert_eq!(merged.root_cause, None, "the person's removal stands");
        assert_eq!(
            merged.review.proposals.get("root_cause"),
            Some(&json!("dns ttl"))
        );
        assert!(
            merged.ruled_out.contains(&"maxmemory too low".to_owned()),
            "{:?}",
            merged.ruled_out
        );
        assert!(!merged.resolved);
        assert_eq!(merged.effectiveness_score, 0.1);
    }

    #[test]
    fn a_later_agent_turn_proposes_instead_of_overwriting_a_pinned_field() {
        let mut e = episode();
        let edit = EpisodeEdit {
            root_cause: Some("a bad deploy".into()),
            ..Default::default()
        };
        apply_edit(&mut e, &edit, at(2)).unwrap();
        let before = e.clone();
        let merged = merge_turn(
            Some(&before),
            &update(2),
            &conclusion("noisy neighbour"),
            at(3),
        )
        .unwrap();
        assert_eq!(merged.root_cause.as_deref(), Some("a bad deploy"));
        assert_eq!(
            merged.review.proposals.get("root_cause"),
            Some(&json!("noisy neighbour"))
        );
        assert_eq!(merged.summary, "summary: noisy neighbour", "not pinned");
        assert_eq!(merged.last_turn_index, 2);
    }

    #[test]
    fn a_person_corrects_the_findings_which_re_embeds_and_outlives_the_next_turn() {
        let mut e = episode();
        let edit = EpisodeEdit {
            key_findings: Some(vec![
                " evicted_keys at 40k/s ".into(),
                "".into(),
                "session lookups miss".into(),
            ]),
            ..Default::default()
        };
        let changes = apply_edit(&mut e, &edit, at(2)).unwrap();
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].field, "key_findings");
        assert_eq!(changes[0].from, json!(["evictions"]));
        assert_eq!(
            e.key_findings,
            vec!["evicted_keys at 40k/s", "session lookups miss"]
        );
        assert!(e.embedding.is_none(), "the findings are embedded");
        let merged =
            merge_turn(Some(&e), &update(2), &conclusion("noisy neighbour"), at(3)).unwrap();
        assert_eq!(merged.key_findings, e.key_findings);
        assert_eq!(
            merged.review.proposals.get("key_findings"),
            Some(&json!(["evictions"]))
        );
        let too_long = EpisodeEdit {
            key_findings: Some(vec!["x".repeat(MAX_FIELD_CHARS + 1)]),
            ..Default::default()
        };
        assert_eq!(
            apply_edit(&mut e, &too_long, at(4)),
            Err(EditError::TooLong {
                field: "key_findings",
                max: MAX_FIELD_CHARS
            })
        );
    }

    #[test]
    fn an_agent_turn_agreeing_with_the_person_leaves_no_proposal() {
        let mut e = episode();
        let edit = EpisodeEdit {
            root_cause: Some("noisy neighbour".into()),
            ..Default::default()
        };
        apply_edit(&mut e, &edit, at(2)).unwrap();
        let merged =
            merge_turn(Some(&e), &update(2), &conclusion("noisy neighbour"), at(3)).unwrap();
        assert!(merged.review.proposals.is_empty());
    }

    #[test]
    fn marking_wrong_rules_out_the_root_cause_and_stops_feeding_strategies() {
        let mut e = episode();
        assert!(is_strategy_source(&e));
        let changes = mark_wrong(&mut e, "it was DNS", at(5));
        assert_eq!(e.root_cause, None);
        assert_eq!(e.ruled_out, vec!["maxmemory too low"]);
        assert_eq!(e.review.verdict.as_deref(), Some("wrong"));
        assert_eq!(e.review.verdict_note.as_deref(), Some("it was DNS"));
        assert!(changes.iter().any(|c| c.field == "root_cause"));
        // Without a cause it is not resolved (as a merge has it), and the audit says so.
        assert!(!e.resolved);
        assert_eq!(e.effectiveness_score, 0.1);
        assert!(changes
            .iter()
            .any(|c| c.field == "resolved" && c.to == json!(false)));
        assert!(!is_strategy_source(&e));
        // A later turn cannot bring the wrong root cause back: one whose answer is silent on
        // it is not even proposed (an abandoned guess revived), one that says it is.
        let silent = merge_turn(
            Some(&e),
            &update(2),
            &conclusion("maxmemory too low"),
            at(6),
        )
        .unwrap();
        assert_eq!(silent.root_cause, None);
        assert_eq!(silent.ruled_out, vec!["maxmemory too low"]);
        assert!(silent.review.proposals.is_empty());
        let says_it = TurnUpdate {
            answer_terms: crate::ranking::terms::terms("maxmemory was too low after all"),
            ..update(2)
        };
        let merged =
            merge_turn(Some(&e), &says_it, &conclusion("maxmemory too low"), at(6)).unwrap();
        assert_eq!(merged.root_cause, None);
        assert_eq!(
            merged.review.proposals.get("root_cause"),
            Some(&json!("maxmemory too low"))
        );
        let mut cleared = merged.clone();
        assert_eq!(clear_verdict(&mut cleared, at(7)).len(), 2);
        assert!(cleared.review.verdict.is_none());
        assert!(clear_verdict(&mut cleared, at(8)).is_empty());
    }

    #[test]
    fn confirming_moves_the_recency_anchor() {
        let mut e = episode();
        let updated = e.updated_at;
        confirm(&mut e, at(100));
        assert_eq!(e.last_confirmed_at, at(100));
        // Nothing it says changed: strategies made from it stay current.
        assert_eq!(e.updated_at, updated);
    }
}
