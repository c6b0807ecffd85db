//! Helpers shared by the integration tests.
#![allow(dead_code)]

use chrono::{TimeZone, Utc};
use deja_config::{LlmSettings, Secret};
use deja_domain::{Component, Episode, ToolCall, TurnEvent};
use std::collections::BTreeSet;

pub fn settings(base_url: &str, timeout_secs: u64) -> LlmSettings {
    LlmSettings {
        base_url: base_url.to_owned(),
        model: "deja-test-model".to_owned(),
        api_key: Secret::new("test-key"),
        timeout_secs,
        max_tokens: 600,
        temperature: 0.0,
    }
}

pub fn event(user: &str, calls: Vec<ToolCall>, answer: &str) -> TurnEvent {
    TurnEvent {
        user_message: user.into(),
        final_answer: answer.into(),
        tool_calls: calls,
        ..deja_domain::testing::turn_event("conv-1", 1)
    }
}

pub fn call(name: &str, output: &str) -> ToolCall {
    ToolCall {
        name: name.into(),
        skill: Some("infrastructure-kubernetes".into()),
        input: serde_json::json!({"namespace": "checkout"}),
        output: output.into(),
        status: "ok".into(),
    }
}

pub fn episode(id: &str, root_cause: &str, skills: &[&str]) -> Episode {
    let at = Utc.with_ymd_and_hms(2026, 2, 3, 4, 14, 27).unwrap();
    Episode {
        agent_id: "sre-agent".into(),
        correlation_id: format!("conv-{id}"),
        agent_run_id: "run-1".into(),
        turn_count: 2,
        last_turn_index: 2,
        issue_type: "cache-eviction".into(),
        issue_description: "checkout 500s while redis evicts keys".into(),
        components: vec![Component::new("cache", "redis")],
        skills_used: skills
            .iter()
            .map(|s| s.to_string())
            .collect::<BTreeSet<_>>(),
        key_findings: vec!["evicted_keys climbing".into()],
        root_cause: Some(root_cause.into()),
        summary: "redis maxmemory reached".into(),
        effectiveness_score: 0.8,
        event_ids: vec!["evt-1".into()],
        ruled_out: vec!["network".into()],
        resolution: Some("raised maxmemory".into()),
        created_at: at,
        updated_at: at,
        last_confirmed_at: at,
        ..deja_domain::testing::episode(id)
    }
}
