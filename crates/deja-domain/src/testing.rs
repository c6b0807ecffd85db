//! Episode literals for tests, in one place: every field set to a plain, valid value, so a
//! test states only what it is about. Enabled for this crate's tests and, with the
//! `testing` feature, for other crates' tests (never in production builds).

use crate::{effectiveness_score, Episode, ExtractionStatus, Provenance};
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
