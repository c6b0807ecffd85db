//! Property-based fuzzing of the search request parser (the JSON of `POST /v1/memory/search`
//! and of the `memory_search` tool, then `SearchRequest::validate`): whatever the body, no
//! panic, and every rejection names a field and says what is wrong with it.
//!
//! CI runs a few dozen cases per property; more with `PROPTEST_CASES` (see the crate README):
//! `PROPTEST_CASES=100000 cargo test -p deja-api --lib --release request_fuzz`.

use crate::error::SearchError;
use crate::request::{GetRequest, SearchRequest};
use proptest::prelude::*;
use serde_json::{json, Value};

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

fn hostile_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\PC{0,80}",
        "[ \\x00-\\x1f*\\u{1f}\\u{202e}\"\\\\]{0,8}",
        Just("*".to_owned()),
        "[a-z]{1,4}".prop_map(|s| s.repeat(200)),
    ]
}

fn any_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        hostile_text().prop_map(Value::String),
        prop::collection::vec(
            (hostile_text(), hostile_text()).prop_map(|(t, n)| json!({"type": t, "name": n})),
            0..4
        )
        .prop_map(Value::Array),
    ]
}

const FIELDS: [&str; 13] = [
    "org",
    "team",
    "query",
    "mode",
    "components",
    "issue_type",
    "resolved",
    "significance",
    "limit",
    "details",
    "exclude_correlation_id",
    "limt",
    "id",
];

/// A search body: a few fields of the request, each with any value.
fn any_body() -> impl Strategy<Value = Value> {
    prop::collection::btree_map(prop::sample::select(FIELDS.to_vec()), any_value(), 0..8).prop_map(
        |fields| Value::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()),
    )
}

fn check_search(body: &[u8]) -> Result<(), TestCaseError> {
    let settings = deja_config::Settings::defaults().search;
    match serde_json::from_slice::<SearchRequest>(body) {
        Err(error) => prop_assert!(!error.to_string().trim().is_empty()),
        Ok(request) => match request.validate(&settings) {
            Ok(valid) => {
                prop_assert!(valid.limit >= 1 && valid.limit <= settings.max_limit);
                prop_assert!(!valid.scope.org.trim().is_empty());
                prop_assert_ne!(valid.scope.team.as_deref(), Some("*"));
            }
            Err(SearchError::BadRequest { field, problem }) => {
                prop_assert!(!field.trim().is_empty());
                prop_assert!(!problem.trim().is_empty());
            }
            Err(other) => prop_assert!(false, "validation answered {other:?}"),
        },
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn the_search_parser_never_panics_on_arbitrary_bytes(body in prop::collection::vec(any::<u8>(), 0..256)) {
        check_search(&body)?;
    }

    #[test]
    fn every_rejected_search_names_its_field(body in any_body()) {
        check_search(&serde_json::to_vec(&body).unwrap())?;
    }

    #[test]
    fn every_rejected_get_names_its_field(id in hostile_text(), org in prop::option::of(hostile_text())) {
        let request = GetRequest { id, org };
        match request.validate() {
            Ok((org, id)) => {
                prop_assert!(!org.trim().is_empty());
                prop_assert!(!id.trim().is_empty());
            }
            Err(SearchError::BadRequest { field, problem }) => {
                prop_assert!(!field.is_empty() && !problem.is_empty());
            }
            Err(other) => prop_assert!(false, "validation answered {other:?}"),
        }
    }
}
