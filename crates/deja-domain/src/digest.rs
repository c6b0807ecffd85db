//! The related-history digest's rules: which entities a trigger names (per-signal-type JSON
//! paths, tried in order) and whether an episode matches them. The store query
//! (`cypher/queries/digest/related.cypher`) applies the same match inside Neo4j; the API
//! (`POST /v1/memory/digest`) wires them.
//!
//! Paths are a small JSONPath subset, enough for alert payloads: `$` then `.key`,
//! `["key with dots"]`, `[0]` or `[*]`, e.g. `$.labels.service`, `$.alerts[*].labels.job`.
//! A path that ends on an array takes its scalar elements.

use crate::event::Trigger;
use crate::Episode;
use serde_json::Value;

/// At most this many entities are taken from one trigger (a payload is outside data).
pub const MAX_ENTITIES: usize = 20;
/// Longer values are not entity names (a message, a stack trace): ignored.
pub const MAX_ENTITY_CHARS: usize = 200;

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    Key(String),
    Index(usize),
    Every,
}

/// A parsed path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPath {
    text: String,
    segments: Vec<Segment>,
}

impl JsonPath {
    /// Parses `$.a.b[0]["c.d"][*]`; the error says what is wrong (config validation).
    pub fn parse(text: &str) -> Result<JsonPath, String> {
        let rest = text
            .trim()
            .strip_prefix('$')
            .ok_or_else(|| format!("`{text}` must start with `$`"))?;
        let chars: Vec<char> = rest.chars().collect();
        let mut segments = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '.' => {
                    let start = i + 1;
                    let mut end = start;
                    while end < chars.len() && chars[end] != '.' && chars[end] != '[' {
                        end += 1;
                    }
                    if end == start {
                        return Err(format!("`{text}` has an empty key"));
                    }
                    segments.push(Segment::Key(chars[start..end].iter().collect()));
                    i = end;
                }
                '[' => {
                    let close = chars[i..]
                        .iter()
                        .position(|c| *c == ']')
                        .map(|p| p + i)
                        .ok_or_else(|| format!("`{text}` has an unclosed `[`"))?;
                    let inner: String = chars[i + 1..close].iter().collect();
                    let inner = inner.trim();
                    let segment = if inner == "*" {
                        Segment::Every
                    } else if let Some(key) = inner
                        .strip_prefix('"')
                        .and_then(|k| k.strip_suffix('"'))
                        .or_else(|| inner.strip_prefix('\'').and_then(|k| k.strip_suffix('\'')))
                    {
                        Segment::Key(key.to_owned())
                    } else {
                        Segment::Index(inner.parse().map_err(|_| {
                            format!("`{text}`: `[{inner}]` is not an index, `*` or a quoted key")
                        })?)
                    };
                    segments.push(segment);
                    i = close + 1;
                }
                other => return Err(format!("`{text}`: unexpected `{other}`")),
            }
        }
        Ok(JsonPath {
            text: text.trim().to_owned(),
            segments,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The scalar values the path reaches in `value`, as text, in document order.
    pub fn select(&self, value: &Value) -> Vec<String> {
        let mut current = vec![value];
        for segment in &self.segments {
            current = current
                .into_iter()
                .flat_map(|v| -> Vec<&Value> {
                    match (segment, v) {
                        (Segment::Key(k), Value::Object(map)) => map.get(k).into_iter().collect(),
                        (Segment::Index(n), Value::Array(items)) => {
                            items.get(*n).into_iter().collect()
                        }
                        (Segment::Every, Value::Array(items)) => items.iter().collect(),
                        (Segment::Every, Value::Object(map)) => map.values().collect(),
                        _ => Vec::new(),
                    }
                })
                .collect();
        }
        current
            .into_iter()
            .flat_map(|v| -> Vec<String> {
                match v {
                    Value::Array(items) => items.iter().filter_map(scalar).collect(),
                    other => scalar(other).into_iter().collect(),
                }
            })
            .collect()
    }
}

fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The entities a trigger names: the values of the first path (in order) that yields any,
/// trimmed, lowercased (matching ignores case), deduplicated, bounded.
pub fn trigger_entities(trigger: &Trigger, paths: &[JsonPath]) -> Vec<String> {
    for path in paths {
        let mut entities: Vec<String> = Vec::new();
        for value in path.select(&trigger.payload) {
            let value = value.trim().to_lowercase();
            if value.is_empty()
                || value.chars().count() > MAX_ENTITY_CHARS
                || entities.contains(&value)
            {
                continue;
            }
            entities.push(value);
            if entities.len() == MAX_ENTITIES {
                break;
            }
        }
        if !entities.is_empty() {
            return entities;
        }
    }
    Vec::new()
}

/// Whether `episode` matches any of `entities` (lowercase): one of its component names or
/// its issue type (the episode's tag), ignoring case. What `digest/related.cypher` checks.
pub fn matches(episode: &Episode, entities: &[String]) -> bool {
    let is_entity = |name: &str| entities.iter().any(|e| *e == name.to_lowercase());
    episode.components.iter().any(|c| is_entity(&c.name)) || is_entity(&episode.issue_type)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths(texts: &[&str]) -> Vec<JsonPath> {
        texts.iter().map(|t| JsonPath::parse(t).unwrap()).collect()
    }

    fn alert(payload: Value) -> Trigger {
        Trigger {
            signal_type: "alertmanager".to_owned(),
            payload,
        }
    }

    #[test]
    fn paths_parse_keys_indexes_wildcards_and_quoted_keys() {
        let path = JsonPath::parse(r#"$.alerts[*].labels["app.kubernetes.io/name"][0]"#).unwrap();
        assert_eq!(
            path.segments,
            vec![
                Segment::Key("alerts".into()),
                Segment::Every,
                Segment::Key("labels".into()),
                Segment::Key("app.kubernetes.io/name".into()),
                Segment::Index(0),
            ]
        );
        assert!(JsonPath::parse("labels.service").is_err());
        assert!(JsonPath::parse("$..service").is_err());
        assert!(JsonPath::parse("$.a[x]").is_err());
        assert!(JsonPath::parse("$.a[0").is_err());
    }

    #[test]
    fn the_first_path_that_yields_values_names_the_entities() {
        let trigger = alert(json!({
            "labels": {"job": "node-exporter"},
            "alerts": [{"labels": {"service": "Checkout"}}, {"labels": {"service": "cart"}},
                       {"labels": {"service": "checkout "}}]
        }));
        let entities = trigger_entities(
            &trigger,
            &paths(&[
                "$.labels.service",
                "$.alerts[*].labels.service",
                "$.labels.job",
            ]),
        );
        assert_eq!(entities, vec!["checkout", "cart"]);
        assert!(trigger_entities(&trigger, &paths(&["$.nothing"])).is_empty());
    }

    #[test]
    fn arrays_at_the_end_of_a_path_give_their_scalars_and_numbers_count_as_text() {
        let trigger = alert(json!({"services": ["a", {"x": 1}, 42], "port": 5432}));
        assert_eq!(
            trigger_entities(&trigger, &paths(&["$.services"])),
            vec!["a", "42"]
        );
        assert_eq!(
            trigger_entities(&trigger, &paths(&["$.port"])),
            vec!["5432"]
        );
    }

    #[test]
    fn long_values_and_too_many_values_are_bounded() {
        let many: Vec<String> = (0..50).map(|i| format!("svc-{i}")).collect();
        let trigger = alert(json!({"s": many, "msg": "x".repeat(MAX_ENTITY_CHARS + 1)}));
        assert_eq!(
            trigger_entities(&trigger, &paths(&["$.s"])).len(),
            MAX_ENTITIES
        );
        assert!(trigger_entities(&trigger, &paths(&["$.msg"])).is_empty());
    }

    #[test]
    fn an_episode_matches_by_component_name_or_issue_type_ignoring_case() {
        let mut episode = crate::testing::episode("c1");
        episode.components = vec![crate::Component::new("service", "Checkout")];
        episode.issue_type = "cache-eviction".into();
        assert!(matches(&episode, &["checkout".into()]));
        assert!(matches(&episode, &["cache-eviction".into()]));
        assert!(!matches(&episode, &["cart".into()]));
    }
}
