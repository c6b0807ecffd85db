//! Episode and turn-event literals for tests, in one place: every field set to a plain, valid
//! value, so a test states only what it is about. Enabled for this crate's tests and, with the
//! `testing` feature, for other crates' tests (never in production builds).

use crate::{
    effectiveness_score, Episode, ExtractionStatus, Provenance, TurnEvent, TurnUpdate,
    SCHEMA_VERSION,
};
use chrono::{DateTime, Utc};

/// A fixed instant (2026-05-29), so that tests never depend on the clock.
pub fn fixed_time() -> DateTime<Utc> {
    DateTime::from_timestamp(1_780_000_000, 0).unwrap_or_default()
}

/// A resolved, searchable episode of org `acme`, team `checkout`, with `id` as its id and
/// correlation id.
pub fn episode(id: &str) -> Episode {
    let t = fixed_time();
    let root_cause = "connection pool too small for the batch job";
    Episode {
        id: id.into(),
        org: "acme".into(),
        team: "checkout".into(),
        agent_id: "agent".into(),
        correlation_id: id.into(),
        agent_run_id: format!("run-{id}"),
        turn_count: 1,
        last_turn_index: 0,
        issue_type: "build-failure".into(),
        issue_description: String::new(),
        opening_message: None,
        components: vec![],
        skills_used: Default::default(),
        key_findings: vec![],
        root_cause: Some(root_cause.into()),
        summary: String::new(),
        resolved: true,
        effectiveness_score: effectiveness_score(true, Some(root_cause)),
        embedding: None,
        embedding_model: None,
        extraction_status: ExtractionStatus::Ok,
        extraction_error: None,
        failed_turn_index: None,
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
        last_recalled_at: None,
        recurrence: None,
    }
}

/// Turn `turn_index` of conversation `correlation_id` in org `acme`, team `checkout`, at
/// [`fixed_time`], without tool calls: a valid event (`TurnEvent::parse` accepts it).
pub fn turn_event(correlation_id: &str, turn_index: u32) -> TurnEvent {
    let t = fixed_time();
    TurnEvent {
        schema_version: SCHEMA_VERSION,
        event_id: format!("evt-{correlation_id}-{turn_index}"),
        org: "acme".into(),
        team: "checkout".into(),
        agent_id: "sre-agent".into(),
        correlation_id: correlation_id.into(),
        agent_run_id: format!("run-{correlation_id}-{turn_index}"),
        turn_index,
        started_at: t,
        ended_at: t,
        user_message: "checkout returns 500s".into(),
        final_answer: "still investigating".into(),
        tool_calls: Vec::new(),
        trigger: None,
        linked_episode_ids: Vec::new(),
        conclusion: None,
    }
}

/// Turn `turn_index` of conversation `correlation_id` as the merge receives it, with nothing
/// read from a final answer (no denials, terms, stated cause or revision) and no opening
/// message: [`turn_event`] with an empty answer, through `TurnUpdate::from_event`. A test
/// sets the fields it is about with struct-update syntax.
pub fn turn_update(correlation_id: &str, turn_index: u32) -> TurnUpdate {
    let mut event = turn_event(correlation_id, turn_index);
    event.final_answer = String::new();
    TurnUpdate {
        opening_message: None,
        ..TurnUpdate::from_event(&event)
    }
}

/// What the merge reads of turn `turn_index` of conversation `correlation_id` ([`turn_event`])
/// whose final answer is `answer`.
pub fn answered_turn(correlation_id: &str, turn_index: u32, answer: &str) -> TurnUpdate {
    let mut event = turn_event(correlation_id, turn_index);
    event.final_answer = answer.to_owned();
    TurnUpdate::from_event(&event)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_turn_update_reads_nothing_from_an_answer() {
        let update = turn_update("conv", 3);
        assert_eq!(update.event_id, "evt-conv-3");
        assert_eq!(update.turn_index, 3);
        assert!(update.answer_denials.is_empty() && update.answer_ruled_out.is_empty());
        assert!(update.answer_terms.is_empty() && update.answer_stated_cause.is_none());
        assert!(!update.answer_revises && !update.description_given);
        assert!(update.skills.is_empty() && update.opening_message.is_none());
    }

    #[test]
    fn the_turn_event_literal_is_a_valid_event() {
        let body = serde_json::to_vec(&turn_event("conv-1", 2)).unwrap();
        let parsed = TurnEvent::parse(&body, 64 * 1024).unwrap();
        assert_eq!(parsed.event_id, "evt-conv-1-2");
    }
}
