//! Property-based fuzzing of the two parsers that take untrusted input: the turn-event parser
//! (every message on the bus) and the incident-record parser (`deja import`). Whatever the
//! bytes, parsing never panics, and every rejection carries a reason: a machine-readable code
//! (for the dead-letter header) and a message that says what is wrong.
//!
//! CI runs a few dozen cases per property; `PROPTEST_CASES` runs more (see the crate README):
//! `PROPTEST_CASES=100000 cargo test -p deja-domain --test fuzz --release`.

use deja_domain::import::IncidentRecord;
use deja_domain::TurnEvent;
use proptest::prelude::*;
use serde_json::{json, Value};

/// Cases per property: `PROPTEST_CASES` when set, else a CI-sized default.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

const LIMIT: usize = 1 << 20;

fn valid_event() -> Value {
    json!({
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
        "tool_calls": [{"name": "kubectl", "skill": "k8s", "input": {}, "output": "x", "status": "ok"}]
    })
}

fn valid_record() -> Value {
    json!({
        "id": "inc-1", "org": "acme", "team": "checkout", "issue_type": "cache-eviction",
        "issue_description": "checkout pods crash", "summary": "redis full",
        "components": [{"type": "database", "name": "redis"}], "root_cause": "maxmemory",
        "resolved": true, "created": "2026-02-03"
    })
}

/// Any JSON value, a few levels deep, with hostile strings.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("json has no NaN or infinity", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        "\\PC{0,40}".prop_map(Value::String),
        "[\\x00-\\x1f*\\u{1f}\\u{202e}]{0,5}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,16}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A valid document with one field replaced by anything, or removed.
fn mutated(base: Value) -> impl Strategy<Value = Value> {
    let fields: Vec<String> = base
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    (prop::sample::select(fields), prop::option::of(any_json())).prop_map(move |(field, value)| {
        let mut doc = base.clone();
        if let Some(object) = doc.as_object_mut() {
            match value {
                Some(value) => object.insert(field, value),
                None => object.remove(&field),
            };
        }
        doc
    })
}

fn check_event(body: &[u8]) -> Result<(), TestCaseError> {
    match TurnEvent::parse(body, LIMIT) {
        Ok(event) => {
            // What parses is what the contract promises.
            for (field, value) in [
                ("event_id", &event.event_id),
                ("org", &event.org),
                ("team", &event.team),
                ("correlation_id", &event.correlation_id),
            ] {
                prop_assert!(!value.trim().is_empty(), "{field} empty");
                prop_assert!(
                    !value.chars().any(char::is_control),
                    "{field} has a control char"
                );
            }
            prop_assert!(event.ended_at >= event.started_at);
            // Bounding never panics either.
            let _ = event.bounded(64);
        }
        Err(error) => {
            prop_assert!(!error.reason_code().is_empty());
            prop_assert!(!error.to_string().trim().is_empty());
        }
    }
    Ok(())
}

fn check_record(line: &str) -> Result<(), TestCaseError> {
    match IncidentRecord::parse(line) {
        Ok(record) => {
            prop_assert!(record.to_episode(chrono::Utc::now()).is_ok());
        }
        Err(error) => prop_assert!(!error.0.trim().is_empty()),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn the_event_parser_never_panics_on_arbitrary_bytes(body in prop::collection::vec(any::<u8>(), 0..512)) {
        check_event(&body)?;
    }

    #[test]
    fn the_event_parser_never_panics_on_arbitrary_json(value in any_json()) {
        check_event(&serde_json::to_vec(&value).unwrap())?;
    }

    #[test]
    fn the_event_parser_gives_a_reason_for_every_mutated_event(doc in mutated(valid_event())) {
        check_event(&serde_json::to_vec(&doc).unwrap())?;
    }

    #[test]
    fn the_import_parser_never_panics_on_arbitrary_text(line in "\\PC{0,300}") {
        check_record(&line)?;
    }

    #[test]
    fn the_import_parser_gives_a_reason_for_every_mutated_record(doc in mutated(valid_record())) {
        check_record(&doc.to_string())?;
    }
}
