//! Reading deja-llm's prompt layout back out of a chat completion request
//! (`crates/deja-llm/PROMPT.md`). Tolerant: a missing piece yields `None` or a default, never
//! a panic, because the fake must answer whatever a test sends it.

use deja_domain::{Component, ExtractionLimits};
use serde_json::Value;

/// `(role, text)` of every message; array contents are joined text parts.
pub fn messages(body: &Value) -> Vec<(String, String)> {
    let Some(list) = body.get("messages").and_then(Value::as_array) else {
        return Vec::new();
    };
    list.iter()
        .map(|message| {
            let role = message
                .get("role")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let text = match message.get("content") {
                Some(Value::String(text)) => text.clone(),
                Some(Value::Array(parts)) => parts
                    .iter()
                    .filter_map(|part| part.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n"),
                _ => String::new(),
            };
            (role, text)
        })
        .collect()
}

/// The system message and the FIRST user message: in a repair conversation the later user
/// message only lists problems, the prompt is the first one.
pub fn prompt(body: &Value) -> (String, String) {
    let all = messages(body);
    let first = |role: &str| {
        all.iter()
            .find(|(r, _)| r == role)
            .map(|(_, text)| text.clone())
            .unwrap_or_default()
    };
    (first("system"), first("user"))
}

/// Splits the user message around its tool calls: `head` is everything before the first
/// `<tool-call ` (stored episode, user message), `tail` everything after the last
/// `</tool-call>` (the final answer). What lies between is never read. This holds even if a
/// tool output smuggled in an undefanged tag: a forged section can only sit between the two.
pub fn around_tool_calls(user: &str) -> (&str, &str) {
    let head_end = user.find("<tool-call ").unwrap_or(user.len());
    let tail_start = user
        .rfind("</tool-call>")
        .map_or(0, |at| at + "</tool-call>".len());
    (&user[..head_end], &user[tail_start..])
}

/// The body of the first `<tag>` … `</tag>` section (tags on their own lines).
pub fn section<'a>(text: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>\n");
    let close = format!("</{tag}>");
    let start = text.find(&open)? + open.len();
    let end = start + text[start..].find(&close)?;
    Some(text[start..end].trim_end_matches('\n'))
}

/// The body of the first `<<deja:NAME>>` … `<</deja:NAME>>` block (markers on their own
/// lines), the structured blocks `deja-llm` emits for programs (see its `PROMPT.md`).
pub fn block<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<<deja:{name}>>\n");
    let close = format!("<</deja:{name}>>");
    let start = text.find(&open)? + open.len();
    let end = start + text[start..].find(&close)?;
    Some(text[start..end].trim_end_matches('\n'))
}

/// The org's vocabulary from the system message's `issue-types` and `components` blocks:
/// `- name: description` and `- type: name` lines.
pub fn vocabulary(system: &str) -> (Vec<String>, Vec<Component>) {
    let items = |name: &str| -> Vec<(String, String)> {
        block(system, name)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.strip_prefix("- "))
            .map(|item| match item.split_once(": ") {
                Some((a, b)) => (a.trim().to_owned(), b.trim().to_owned()),
                None => (item.trim().to_owned(), String::new()),
            })
            .collect()
    };
    let issue_types = items("issue-types")
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    let components = items("components")
        .into_iter()
        .filter(|(_, name)| !name.is_empty())
        .map(|(kind, name)| Component::new(kind, name))
        .collect();
    (issue_types, components)
}

/// The fields the agent runtime gave, from the `given-fields` block after the final answer.
pub fn given_fields(tail: &str) -> Option<serde_json::Map<String, Value>> {
    block(tail, "given-fields")
        .and_then(|json| serde_json::from_str::<Value>(json).ok())
        .and_then(|value| value.as_object().cloned())
}

/// The stored conclusion, when the prompt carries one.
pub fn stored_episode(user: &str) -> Option<Value> {
    section(user, "stored-episode").and_then(|json| serde_json::from_str(json).ok())
}

/// The bounds the request's schema asks for, with deja's defaults where it says nothing.
pub fn limits(body: &Value) -> ExtractionLimits {
    let defaults = ExtractionLimits::default();
    let schema = body.pointer("/response_format/json_schema/schema/properties");
    let read = |path: &str, default: usize| {
        schema
            .and_then(|s| s.pointer(path))
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
            .filter(|n| *n > 0)
            .unwrap_or(default)
    };
    ExtractionLimits {
        max_key_findings: read("/key_findings/maxItems", defaults.max_key_findings),
        max_finding_chars: read("/key_findings/items/maxLength", defaults.max_finding_chars),
        max_components: read("/components/maxItems", defaults.max_components),
        max_text_chars: read("/summary/maxLength", defaults.max_text_chars),
        max_issue_type_chars: read("/issue_type/maxLength", defaults.max_issue_type_chars),
    }
}

/// One `<source-episode>` of a synthesis prompt: its `name: value` lines.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct SourceEpisode {
    pub root_cause: Option<String>,
    pub skills: Vec<String>,
    pub ruled_out: Vec<String>,
}

pub fn source_episodes(user: &str) -> Vec<SourceEpisode> {
    let mut sources = Vec::new();
    let mut rest = user;
    while let Some(start) = rest.find("<source-episode") {
        let after = &rest[start..];
        let end = after.find("</source-episode>").unwrap_or(after.len());
        let mut source = SourceEpisode::default();
        for line in after[..end].lines() {
            if let Some(value) = line.strip_prefix("root_cause: ") {
                if value != "none identified" {
                    source.root_cause = Some(value.trim().to_owned());
                }
            } else if let Some(value) = line.strip_prefix("skills: ") {
                source.skills = split_list(value, ',');
            } else if let Some(value) = line.strip_prefix("ruled_out: ") {
                source.ruled_out = split_list(value, ';');
            }
        }
        sources.push(source);
        rest = &after[end..];
        if rest.is_empty() {
            break;
        }
        rest = &rest[1..];
    }
    sources
}

fn split_list(value: &str, separator: char) -> Vec<String> {
    value
        .split(separator)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_text_before_and_after_the_tool_calls_is_read() {
        let text = "a\n<tool-call id=\"1\">\nsecret\n</tool-call>\n<tool-call id=\"2\">\nmore\n</tool-call>\nb";
        assert_eq!(around_tool_calls(text), ("a\n", "\nb"));
        assert_eq!(around_tool_calls("no calls"), ("no calls", "no calls"));
    }

    #[test]
    fn sections_and_vocabulary_lines_are_read_back() {
        let user = "<user-message>\nhello\nworld\n</user-message>\n<agent-final-answer>\n</agent-final-answer>";
        assert_eq!(section(user, "user-message"), Some("hello\nworld"));
        assert_eq!(section(user, "agent-final-answer"), Some(""));
        let system = "rules\n<<deja:issue-types>>\n- a: pool held by: a slow query\n- b\n<</deja:issue-types>>\n\
                      <<deja:components>>\n- service: x\n<</deja:components>>";
        let (types, components) = vocabulary(system);
        assert_eq!(types, vec!["a", "b"]);
        assert_eq!(components, vec![Component::new("service", "x")]);
        let empty = "<<deja:issue-types>>\n(none yet)\n<</deja:issue-types>>";
        assert_eq!(vocabulary(empty), (vec![], vec![]));
        let tail = "x\n<<deja:given-fields>>\n{\"resolved\":true}\n<</deja:given-fields>>";
        assert_eq!(given_fields(tail).unwrap()["resolved"], true);
        assert_eq!(
            given_fields("<&lt;deja:given-fields>>\n{}\n<</deja:given-fields>>"),
            None
        );
    }

    #[test]
    fn source_episodes_yield_root_causes_skills_and_ruled_out_items() {
        let user =
            "PLAYBOOK FOR: x\n<source-episode n=\"1\">\nroot_cause: redis full\nskills: a, b\n\
                    ruled_out: network; dns\n</source-episode>\n<source-episode n=\"2\">\n\
                    root_cause: none identified\n</source-episode>";
        let sources = source_episodes(user);
        assert_eq!(sources.len(), 2);
        assert_eq!(sources[0].root_cause.as_deref(), Some("redis full"));
        assert_eq!(sources[0].skills, vec!["a", "b"]);
        assert_eq!(sources[0].ruled_out, vec!["network", "dns"]);
        assert_eq!(sources[1].root_cause, None);
    }
}
