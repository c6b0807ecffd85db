//! The end-of-turn event contract (`schema/turn-event.v1.json` is its published form).
//!
//! Parsing is strict about what deja needs and tolerant of everything else: unknown fields
//! are ignored so that agent runtimes can evolve ahead of deja, while a missing or empty
//! required field is a permanent error (the event goes to the dead-letter queue).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The contract version this build understands.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnEvent {
    pub schema_version: u32,
    /// Unique per published event; redelivery of the same id is a no-op.
    pub event_id: String,
    pub org: String,
    pub team: String,
    pub agent_id: String,
    /// The conversation: one episode per (org, correlation_id).
    pub correlation_id: String,
    /// This turn's run, for deep links into the trace viewer.
    pub agent_run_id: String,
    pub turn_index: u32,
    pub started_at: DateTime<Utc>,
    pub ended_at: DateTime<Utc>,
    /// The user's message or the alert text that opened the turn.
    pub user_message: String,
    /// The agent's answer at the end of the turn.
    pub final_answer: String,
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<Trigger>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub linked_episode_ids: Vec<String>,
    /// What the runtime already concluded, if it knows (`conclusion.rs`): complete, the turn
    /// is merged without an LLM call; partial, the LLM fills only the missing fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conclusion: Option<crate::conclusion::Conclusion>,
}

/// A skill name's length in an episode; longer names are cut.
pub const MAX_SKILL_CHARS: usize = 100;

/// A skill's name as memory keeps it (a `Skill` node of the org, kept for good): trimmed, in
/// lower case (a runtime that writes "Kubernetes" once and "kubernetes" once used one skill),
/// cut at [`MAX_SKILL_CHARS`]; `None` when blank. Turn events and imported records alike.
pub fn skill_name(raw: &str) -> Option<String> {
    let skill: String = raw
        .trim()
        .to_lowercase()
        .chars()
        .take(MAX_SKILL_CHARS)
        .collect();
    let skill = skill.trim_end();
    (!skill.is_empty()).then(|| skill.to_owned())
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub name: String,
    /// The skill the tool belongs to; accumulated into the episode's `skills_used` (lower
    /// case, at most [`MAX_SKILL_CHARS`] characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
    #[serde(default)]
    pub input: serde_json::Value,
    /// Raw tool output. Untrusted: it reaches the LLM only inside a delimited data section.
    #[serde(default)]
    pub output: String,
    #[serde(default = "default_status")]
    pub status: String,
}

fn default_status() -> String {
    "ok".to_owned()
}

/// What started the turn (or, in a digest request, the investigation). In a turn event it
/// is as tolerant as the rest of the event: unknown fields are ignored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trigger {
    pub signal_type: String,
    #[serde(default)]
    pub payload: serde_json::Value,
}

impl Trigger {
    /// A trigger as a request states it (the digest's `trigger`, `deserialize_with`): an
    /// unknown field is refused by name, as the rest of the request's are, since a misspelt
    /// `paylod` would leave the payload null and the answer silently empty. `payload` may be
    /// omitted (null). Turn events keep parsing the trigger with [`Trigger`]'s own,
    /// tolerant `Deserialize` (runtimes evolve ahead of deja).
    pub fn deserialize_strict<'de, D>(deserializer: D) -> Result<Trigger, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Strict {
            signal_type: String,
            #[serde(default)]
            payload: serde_json::Value,
        }
        let Strict {
            signal_type,
            payload,
        } = Strict::deserialize(deserializer)?;
        Ok(Trigger {
            signal_type,
            payload,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    #[error("event is {size} bytes, over the {limit} byte limit")]
    Oversize { size: usize, limit: usize },
    #[error("event is not valid json: {0}")]
    InvalidJson(String),
    #[error("event violates the turn-event schema: {0}")]
    Schema(String),
    #[error("unsupported schema_version {found}; this build understands {SCHEMA_VERSION}")]
    UnsupportedVersion { found: u64 },
    /// The org/team in the body are not the ones of the routing key it was published with.
    #[error("event of org `{org}` team `{team}` arrived with routing key `{routing_key}`")]
    TenantMismatch {
        org: String,
        team: String,
        routing_key: String,
    },
}

impl EventError {
    /// A short machine-readable reason, carried in the dead-letter headers.
    pub fn reason_code(&self) -> &'static str {
        match self {
            EventError::Oversize { .. } => "oversize",
            EventError::InvalidJson(_) => "invalid_json",
            EventError::Schema(_) => "schema_violation",
            EventError::UnsupportedVersion { .. } => "unsupported_schema_version",
            EventError::TenantMismatch { .. } => "tenant_mismatch",
        }
    }
}

impl TurnEvent {
    /// Parses and validates one event body.
    pub fn parse(body: &[u8], max_bytes: usize) -> Result<TurnEvent, EventError> {
        if body.len() > max_bytes {
            return Err(EventError::Oversize {
                size: body.len(),
                limit: max_bytes,
            });
        }
        // Two steps so that "not JSON at all" and "JSON of the wrong shape" get distinct reasons.
        let value: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| EventError::InvalidJson(e.to_string()))?;
        match value.get("schema_version").and_then(|v| v.as_u64()) {
            Some(v) if v == u64::from(SCHEMA_VERSION) => {}
            Some(v) => return Err(EventError::UnsupportedVersion { found: v }),
            None => {
                return Err(EventError::Schema(
                    "missing or non-integer field `schema_version`".to_owned(),
                ))
            }
        }
        let event: TurnEvent =
            serde_json::from_value(value).map_err(|e| EventError::Schema(e.to_string()))?;
        event.validate()?;
        Ok(event)
    }

    fn validate(&self) -> Result<(), EventError> {
        let required = [
            ("event_id", &self.event_id),
            ("org", &self.org),
            ("team", &self.team),
            ("agent_id", &self.agent_id),
            ("correlation_id", &self.correlation_id),
            ("agent_run_id", &self.agent_run_id),
        ];
        for (field, value) in required {
            check_id(field, value).map_err(EventError::Schema)?;
        }
        for (field, value) in [("org", &self.org), ("team", &self.team)] {
            check_routing_word(field, value).map_err(EventError::Schema)?;
        }
        if self.ended_at < self.started_at {
            return Err(EventError::Schema(
                "field `ended_at` is before `started_at`".to_owned(),
            ));
        }
        if let Some(conclusion) = &self.conclusion {
            let problems = conclusion.problems(&crate::ExtractionLimits::default());
            if !problems.is_empty() {
                return Err(EventError::Schema(problems.join("; ")));
            }
        }
        Ok(())
    }

    /// Skills named by this turn's tool calls, in first-seen order, without duplicates: in
    /// lower case (a runtime that writes "Kubernetes" once and "kubernetes" once used one
    /// skill) and cut at [`MAX_SKILL_CHARS`] (each becomes a node of the org, kept for good).
    pub fn skills(&self) -> Vec<String> {
        let mut skills: Vec<String> = Vec::new();
        for skill in self
            .tool_calls
            .iter()
            .filter_map(|call| call.skill.as_deref().and_then(skill_name))
        {
            if !skills.contains(&skill) {
                skills.push(skill);
            }
        }
        skills
    }

    /// A copy bounded for the prompt (and for what is kept for re-extraction): tool outputs cut
    /// to `tool_output_budget` bytes each, `user_message` to [`MAX_USER_MESSAGE_BYTES`],
    /// `final_answer` to [`MAX_FINAL_ANSWER_BYTES`] (head + tail around a marker), and at most
    /// [`MAX_PROMPT_TOOL_CALLS`] tool calls (the first and the last ones around a marker call
    /// that says how many were left out). Skills are taken from the full event, not from this.
    pub fn bounded(&self, tool_output_budget: usize) -> TurnEvent {
        let mut event = self.clone();
        event.user_message = bound_text(&event.user_message, MAX_USER_MESSAGE_BYTES);
        event.final_answer = bound_text(&event.final_answer, MAX_FINAL_ANSWER_BYTES);
        if event.tool_calls.len() > MAX_PROMPT_TOOL_CALLS {
            let keep_tail = MAX_PROMPT_TOOL_CALLS / 4;
            let keep_head = MAX_PROMPT_TOOL_CALLS - 1 - keep_tail;
            let omitted = event.tool_calls.len() - keep_head - keep_tail;
            let tail = event
                .tool_calls
                .split_off(event.tool_calls.len() - keep_tail);
            event.tool_calls.truncate(keep_head);
            event.tool_calls.push(ToolCall {
                name: OMITTED_TOOL_CALLS.to_owned(),
                skill: None,
                input: serde_json::Value::Null,
                output: format!("[... {omitted} tool calls omitted by deja ...]"),
                status: "omitted".to_owned(),
            });
            event.tool_calls.extend(tail);
        }
        for call in &mut event.tool_calls {
            call.output = bound_text(&call.output, tool_output_budget);
        }
        event
    }
}

/// `user_message` is cut to this many bytes in the prompt (with a marker).
pub const MAX_USER_MESSAGE_BYTES: usize = 16 * 1024;
/// `final_answer` is cut to this many bytes in the prompt (with a marker).
pub const MAX_FINAL_ANSWER_BYTES: usize = 32 * 1024;
/// At most this many tool calls reach the prompt, the marker call included.
pub const MAX_PROMPT_TOOL_CALLS: usize = 40;
/// The name of the marker call that stands for the tool calls left out of the prompt.
pub const OMITTED_TOOL_CALLS: &str = "deja.omitted_tool_calls";

/// Checks one id (org, team, correlation id, ...): no control characters (the composite keys
/// join ids with U+001F), and a team never named `*` (the org-wide strategy's team).
pub fn check_id(field: &str, value: &str) -> Result<(), String> {
    if value.trim().is_empty() {
        return Err(format!("field `{field}` must not be empty"));
    }
    if let Some(c) = value.chars().find(|c| c.is_control()) {
        return Err(format!(
            "field `{field}` contains the control character U+{:04X}",
            u32::from(c)
        ));
    }
    if field == "team" && value == crate::strategy::ORG_WIDE_TEAM {
        return Err(format!(
            "field `team` must not be `{}` (reserved for org-wide strategies)",
            crate::strategy::ORG_WIDE_TEAM
        ));
    }
    Ok(())
}

/// The most bytes an org or team of a turn event may have: each is one word of the routing key
/// `turn.<org>.<team>`, which must fit AMQP's 255 bytes.
pub const MAX_ROUTING_WORD_BYTES: usize = 100;

/// Checks that an org or team of a turn event is one routing-key word as it is: no `.`, `*`
/// or `#` (topic syntax) and at most [`MAX_ROUTING_WORD_BYTES`]. The routing key stands for
/// the tenant (broker permissions on `turn.acme.*` confine a publisher to org `acme`), so two
/// orgs must never share a key: were `acme.x` routed as `acme_x`, or a long name cut, a
/// publisher of one could write into the other.
pub fn check_routing_word(field: &str, value: &str) -> Result<(), String> {
    if let Some(c) = value.chars().find(|c| matches!(c, '.' | '*' | '#')) {
        return Err(format!(
            "field `{field}` must not contain `{c}`: it is one word of the routing key \
             turn.<org>.<team>"
        ));
    }
    if value.len() > MAX_ROUTING_WORD_BYTES {
        return Err(format!(
            "field `{field}` must be at most {MAX_ROUTING_WORD_BYTES} bytes: it is one word of \
             the routing key turn.<org>.<team>"
        ));
    }
    Ok(())
}

/// Cuts `text` to at most about `budget` bytes, keeping its head and tail around a marker that
/// says how much was left out. Cuts only on char boundaries.
pub fn bound_text(text: &str, budget: usize) -> String {
    if text.len() <= budget {
        return text.to_owned();
    }
    let head_len = text.floor_char_boundary(budget * 2 / 3);
    let tail_start = text.ceil_char_boundary(text.len() - (budget - budget * 2 / 3));
    let omitted = tail_start - head_len;
    format!(
        "{}\n[... {omitted} bytes omitted by deja ...]\n{}",
        &text[..head_len],
        &text[tail_start..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> serde_json::Value {
        serde_json::json!({
            "schema_version": 1,
            "event_id": "evt-1",
            "org": "acme",
            "team": "checkout",
            "agent_id": "sre-agent",
            "correlation_id": "conv-1",
            "agent_run_id": "run-1",
            "turn_index": 1,
            "started_at": "2026-02-03T04:14:27Z",
            "ended_at": "2026-02-03T04:15:27Z",
            "user_message": "checkout 500s",
            "final_answer": "redis evictions",
            "tool_calls": [
                {"name": "kubectl", "skill": "infrastructure-kubernetes", "input": {}, "output": "x", "status": "ok"},
                {"name": "promql", "skill": "observability-prometheus", "input": {}, "output": "y", "status": "ok"},
                {"name": "kubectl2", "skill": "infrastructure-kubernetes", "input": {}, "output": "z", "status": "error"}
            ],
            "an_unknown_field": {"is": "tolerated"}
        })
    }

    #[test]
    fn skills_are_one_per_spelling_and_bounded() {
        let mut event = sample();
        event["tool_calls"][0]["skill"] = serde_json::json!(" Infrastructure-Kubernetes ");
        event["tool_calls"][2]["skill"] = serde_json::json!("x".repeat(5000));
        let body = serde_json::to_vec(&event).unwrap();
        let skills = TurnEvent::parse(&body, 1 << 20).unwrap().skills();
        assert_eq!(skills.len(), 3, "{skills:?}");
        assert_eq!(skills[0], "infrastructure-kubernetes");
        assert_eq!(skills[1], "observability-prometheus");
        assert_eq!(skills[2].chars().count(), MAX_SKILL_CHARS);
    }

    #[test]
    fn a_valid_event_with_unknown_fields_parses() {
        let body = serde_json::to_vec(&sample()).unwrap();
        let event = TurnEvent::parse(&body, 1 << 20).unwrap();
        assert_eq!(event.correlation_id, "conv-1");
        assert_eq!(
            event.skills(),
            vec!["infrastructure-kubernetes", "observability-prometheus"]
        );
    }

    #[test]
    fn a_trigger_is_tolerant_in_a_turn_event_and_strict_in_a_request() {
        let mut event = sample();
        event["trigger"] = serde_json::json!({
            "signal_type": "alertmanager", "payload": {"a": 1}, "received_by": "runtime-2"
        });
        let body = serde_json::to_vec(&event).unwrap();
        let parsed = TurnEvent::parse(&body, 1 << 20).unwrap();
        assert_eq!(parsed.trigger.unwrap().payload, serde_json::json!({"a": 1}));

        let strict = |value: serde_json::Value| Trigger::deserialize_strict(value);
        let error = strict(serde_json::json!({"signal_type": "alertmanager", "paylod": {}}))
            .unwrap_err()
            .to_string();
        assert!(error.contains("unknown field `paylod`"), "{error}");
        let bare = strict(serde_json::json!({"signal_type": "alertmanager"})).unwrap();
        assert_eq!(
            bare.payload,
            serde_json::Value::Null,
            "payload may be omitted"
        );
    }

    #[test]
    fn a_missing_required_field_is_a_schema_violation_naming_it() {
        let mut value = sample();
        value.as_object_mut().unwrap().remove("correlation_id");
        let err = TurnEvent::parse(&serde_json::to_vec(&value).unwrap(), 1 << 20).unwrap_err();
        assert_eq!(err.reason_code(), "schema_violation");
        assert!(err.to_string().contains("correlation_id"), "{err}");
    }

    #[test]
    fn an_org_or_team_that_is_not_one_routing_word_is_a_schema_violation() {
        for (field, value) in [
            ("org", "acme.x".to_owned()),
            ("team", "check*out".to_owned()),
            ("team", "a#b".to_owned()),
            ("org", "o".repeat(MAX_ROUTING_WORD_BYTES + 1)),
        ] {
            let mut event = sample();
            event[field] = serde_json::json!(value);
            let err = TurnEvent::parse(&serde_json::to_vec(&event).unwrap(), 1 << 20).unwrap_err();
            assert_eq!(err.reason_code(), "schema_violation");
            assert!(err.to_string().contains(&format!("`{field}`")), "{err}");
        }
        let mut event = sample();
        event["org"] = serde_json::json!("o".repeat(MAX_ROUTING_WORD_BYTES));
        event["team"] = serde_json::json!("check_out-2");
        assert!(TurnEvent::parse(&serde_json::to_vec(&event).unwrap(), 1 << 20).is_ok());
    }

    #[test]
    fn an_empty_org_is_a_schema_violation() {
        let mut value = sample();
        value["org"] = serde_json::json!("  ");
        let err = TurnEvent::parse(&serde_json::to_vec(&value).unwrap(), 1 << 20).unwrap_err();
        assert!(err.to_string().contains("`org`"), "{err}");
    }

    #[test]
    fn invalid_json_and_oversize_have_their_own_reasons() {
        assert_eq!(
            TurnEvent::parse(b"{not json", 1 << 20)
                .unwrap_err()
                .reason_code(),
            "invalid_json"
        );
        let body = serde_json::to_vec(&sample()).unwrap();
        let err = TurnEvent::parse(&body, 10).unwrap_err();
        assert_eq!(err.reason_code(), "oversize");
    }

    #[test]
    fn a_future_schema_version_is_refused() {
        let mut value = sample();
        value["schema_version"] = serde_json::json!(2);
        let err = TurnEvent::parse(&serde_json::to_vec(&value).unwrap(), 1 << 20).unwrap_err();
        assert_eq!(err.reason_code(), "unsupported_schema_version");
    }

    #[test]
    fn long_tool_output_keeps_head_and_tail_with_a_marker() {
        let text = format!("HEAD{}TAIL", "x".repeat(10_000));
        let cut = bound_text(&text, 300);
        assert!(cut.starts_with("HEAD"));
        assert!(cut.ends_with("TAIL"));
        assert!(cut.contains("bytes omitted by deja"));
        assert!(cut.len() < 400);
    }

    #[test]
    fn bounded_cuts_the_message_the_answer_and_the_tool_calls_with_visible_markers() {
        let mut event = TurnEvent::parse(&serde_json::to_vec(&sample()).unwrap(), 1 << 20).unwrap();
        event.user_message = format!("ALERT{}END", "u".repeat(100_000));
        event.final_answer = format!("ANSWER{}DONE", "a".repeat(100_000));
        let call = event.tool_calls[0].clone();
        event.tool_calls = (0..500)
            .map(|i| ToolCall {
                name: format!("tool-{i}"),
                ..call.clone()
            })
            .collect();
        let bounded = event.bounded(4000);
        assert!(bounded.user_message.len() <= MAX_USER_MESSAGE_BYTES + 64);
        assert!(bounded.user_message.starts_with("ALERT") && bounded.user_message.ends_with("END"));
        assert!(bounded.user_message.contains("bytes omitted by deja"));
        assert!(bounded.final_answer.len() <= MAX_FINAL_ANSWER_BYTES + 64);
        assert!(bounded.final_answer.ends_with("DONE"));
        assert_eq!(bounded.tool_calls.len(), MAX_PROMPT_TOOL_CALLS);
        assert_eq!(bounded.tool_calls[0].name, "tool-0");
        assert_eq!(bounded.tool_calls.last().unwrap().name, "tool-499");
        let marker = bounded
            .tool_calls
            .iter()
            .find(|c| c.name == OMITTED_TOOL_CALLS)
            .expect("a marker call");
        assert!(
            marker.output.contains("461 tool calls omitted"),
            "{}",
            marker.output
        );
        // Skills still come from every call of the full event.
        assert_eq!(event.skills(), vec!["infrastructure-kubernetes"]);
    }

    #[test]
    fn ids_with_control_characters_are_schema_violations() {
        for field in ["org", "team", "correlation_id", "event_id", "agent_id"] {
            let mut value = sample();
            value[field] = serde_json::json!("acme\u{1f}conv");
            let err = TurnEvent::parse(&serde_json::to_vec(&value).unwrap(), 1 << 20).unwrap_err();
            assert_eq!(err.reason_code(), "schema_violation");
            assert!(err.to_string().contains("U+001F"), "{err}");
            assert!(err.to_string().contains(field), "{err}");
        }
    }

    #[test]
    fn a_team_named_like_the_org_wide_strategy_scope_is_refused() {
        let mut value = sample();
        value["team"] = serde_json::json!("*");
        let err = TurnEvent::parse(&serde_json::to_vec(&value).unwrap(), 1 << 20).unwrap_err();
        assert!(err.to_string().contains("reserved"), "{err}");
    }

    proptest! {
        #[test]
        fn bound_text_never_panics_and_stays_bounded(text in "\\PC{0,600}", budget in 8usize..300) {
            let cut = bound_text(&text, budget);
            if text.len() <= budget {
                prop_assert_eq!(cut, text);
            } else {
                // The marker adds a bounded overhead on top of the budget.
                prop_assert!(cut.len() <= budget + 64);
            }
        }
    }
}
