//! The published contract (`schema/turn-event.v1.json`) and the parser (`TurnEvent::parse`)
//! must agree: every fixture under `tests/fixtures/contract/accept` is accepted by both, every
//! one under `reject` refused by both.
//!
//! The schema is checked by a small interpreter of the JSON Schema keywords the file uses; a
//! keyword it does not know fails the test, so it can never pass by ignoring a rule.

use serde_json::Value;
use std::path::{Path, PathBuf};

const KNOWN_KEYWORDS: &[&str] = &[
    "$schema",
    "$id",
    "title",
    "description",
    "default",
    "format",
    "type",
    "required",
    "properties",
    "const",
    "minLength",
    "maxLength",
    "minimum",
    "items",
    "maxItems",
    "if",
    "then",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn schema() -> Value {
    let text = std::fs::read_to_string(root().join("schema/turn-event.v1.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn fixtures(kind: &str) -> Vec<(String, Vec<u8>)> {
    let dir = root().join("tests/fixtures/contract").join(kind);
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no fixtures in {}", dir.display());
    out
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_u64() || n.is_i64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Adds the problems of `value` against `schema` (none = valid).
fn check(schema: &Value, value: &Value, at: &str, problems: &mut Vec<String>) {
    let Some(rules) = schema.as_object() else {
        problems.push(format!("{at}: schema is not an object"));
        return;
    };
    for keyword in rules.keys() {
        assert!(
            KNOWN_KEYWORDS.contains(&keyword.as_str()),
            "schema keyword `{keyword}` at {at} is not interpreted by this test"
        );
    }
    if let Some(types) = rules.get("type") {
        let allowed: Vec<&str> = match types {
            Value::String(t) => vec![t.as_str()],
            Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let actual = type_name(value);
        let ok = allowed
            .iter()
            .any(|t| *t == actual || (*t == "number" && actual == "integer"));
        if !ok {
            problems.push(format!("{at}: {actual} is not {allowed:?}"));
            return;
        }
    }
    if let Some(constant) = rules.get("const") {
        if value != constant {
            problems.push(format!("{at}: is not {constant}"));
        }
    }
    if let Some(text) = value.as_str() {
        let chars = text.chars().count() as u64;
        if let Some(min) = rules.get("minLength").and_then(Value::as_u64) {
            if chars < min {
                problems.push(format!("{at}: shorter than {min}"));
            }
        }
        if let Some(max) = rules.get("maxLength").and_then(Value::as_u64) {
            if chars > max {
                problems.push(format!("{at}: longer than {max}"));
            }
        }
    }
    if let (Some(n), Some(min)) = (value.as_f64(), rules.get("minimum").and_then(Value::as_f64)) {
        if n < min {
            problems.push(format!("{at}: below {min}"));
        }
    }
    if let Some(list) = value.as_array() {
        if let Some(max) = rules.get("maxItems").and_then(Value::as_u64) {
            if list.len() as u64 > max {
                problems.push(format!("{at}: more than {max} items"));
            }
        }
        if let Some(items) = rules.get("items") {
            for (i, item) in list.iter().enumerate() {
                check(items, item, &format!("{at}[{i}]"), problems);
            }
        }
    }
    if let Some(object) = value.as_object() {
        let required = rules
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str);
        for field in required {
            if !object.contains_key(field) {
                problems.push(format!("{at}: `{field}` is required"));
            }
        }
        if let Some(properties) = rules.get("properties").and_then(Value::as_object) {
            for (field, rule) in properties {
                if let Some(inner) = object.get(field) {
                    check(rule, inner, &format!("{at}.{field}"), problems);
                }
            }
        }
    }
    if let Some(condition) = rules.get("if") {
        let mut failed = Vec::new();
        check(condition, value, at, &mut failed);
        if let (true, Some(then)) = (failed.is_empty(), rules.get("then")) {
            check(then, value, at, problems);
        }
    }
}

fn schema_problems(body: &[u8]) -> Vec<String> {
    let value: Value = serde_json::from_slice(body).unwrap();
    let mut problems = Vec::new();
    check(&schema(), &value, "$", &mut problems);
    problems
}

#[test]
fn the_schema_and_the_parser_accept_every_accept_fixture() {
    for (name, body) in fixtures("accept") {
        let problems = schema_problems(&body);
        assert!(
            problems.is_empty(),
            "{name}: schema refuses it: {problems:?}"
        );
        if let Err(error) = deja_domain::TurnEvent::parse(&body, 1 << 20) {
            panic!("{name}: parse refuses it: {error}");
        }
    }
}

#[test]
fn the_schema_and_the_parser_refuse_every_reject_fixture() {
    for (name, body) in fixtures("reject") {
        assert!(
            !schema_problems(&body).is_empty(),
            "{name}: the schema accepts it"
        );
        assert!(
            deja_domain::TurnEvent::parse(&body, 1 << 20).is_err(),
            "{name}: parse accepts it"
        );
    }
}

#[test]
fn the_published_example_satisfies_the_schema_and_the_parser() {
    let body = std::fs::read(root().join("tests/fixtures/turn-event.example.json")).unwrap();
    assert_eq!(schema_problems(&body), Vec::<String>::new());
    assert!(deja_domain::TurnEvent::parse(&body, 1 << 20).is_ok());
}

#[test]
fn the_interpreter_itself_refuses_what_it_should() {
    let schema = serde_json::json!({
        "type": "object", "required": ["a"],
        "properties": {"a": {"type": "string", "maxLength": 2}},
        "if": {"type": "object", "required": ["b"], "properties": {"b": {"const": true}}},
        "then": {"required": ["c"]}
    });
    let problems = |value: Value| {
        let mut p = Vec::new();
        check(&schema, &value, "$", &mut p);
        p.len()
    };
    assert_eq!(problems(serde_json::json!({"a": "ok"})), 0);
    assert_eq!(problems(serde_json::json!({"a": "too long"})), 1);
    assert_eq!(problems(serde_json::json!({"a": "ok", "b": true})), 1);
    assert_eq!(problems(serde_json::json!({"a": "ok", "b": false})), 0);
    assert_eq!(problems(serde_json::json!({})), 1);
}
