//! `Reply::Auto`: a deterministic reply derived from the prompt, always within the bounds the
//! request's schema asks for. The conventions (documented in `crates/deja-llm/PROMPT.md`):
//!
//! - issue_type: a `#slug` tag in the user message; else the first existing issue type (in
//!   vocabulary order) mentioned in the user message or final answer; else the stored
//!   episode's; else the alert name (the first CamelCase word with 3+ capitals, or
//!   `alertname=X`) as kebab case; else the first words of the user message.
//! - components: `service=` / `database=` / `db=` / `queue=` / `topic=` / `cache=` /
//!   `cluster=` / `host=` / `node=` / `pipeline=` pairs, then vocabulary components whose name
//!   is mentioned, then the stored episode's; deduplicated, bounded.
//! - root_cause: the final answer's text after `Root cause:` to the end of that sentence.
//! - resolved: a root cause and the answer says "confirmed" or "fixed".
//! - summary: the final answer's first two sentences; issue_description: the stored one, else
//!   the user message's first line; key_findings: the final answer's `- ` lines; ruled_out:
//!   the final answer's `Ruled out: a; b` sentence.
//! - fields given in the `<<deja:given-fields>>` block after the final answer are copied.
//! - a second look at a root cause: the final answer's `Root cause:` sentence; at an issue
//!   type: the first existing issue type the `<root-cause>` mentions, else its first three
//!   words (articles skipped) as a slug.
//!
//! Only the user message, the final answer, the stored episode and the vocabulary are read;
//! the text between the first `<tool-call` and the last `</tool-call>` never is.

use crate::parse;
use crate::RequestKind;
use deja_domain::strategy::Playbook;
use deja_domain::{Component, ExtractionLimits};
use serde_json::{json, Value};

/// The reply content for a request of `kind`.
pub fn reply(body: &Value, kind: RequestKind) -> String {
    match kind {
        RequestKind::Synthesis => synthesis(body).to_string(),
        RequestKind::Verification => verification(body).to_string(),
        RequestKind::Cause => cause(body).to_string(),
        RequestKind::IssueType => issue_type(body).to_string(),
        RequestKind::Extraction | RequestKind::Other => extraction(body).to_string(),
    }
}

/// A verification answers `unsure` for every `<past-incident id="...">` it was shown:
/// deterministic and neutral (tests that need verdicts script them with `Reply`).
pub fn verification(body: &Value) -> Value {
    let (_, user) = parse::prompt(body);
    let candidates: Vec<Value> = user
        .match_indices("<past-incident id=\"")
        .filter_map(|(at, marker)| {
            let rest = &user[at + marker.len()..];
            rest.find('"').map(|end| &rest[..end])
        })
        .map(|id| json!({"id": id, "verdict": "unsure", "reason": "the fake cannot tell"}))
        .collect();
    json!({ "candidates": candidates })
}

/// A second look at an issue type answers with the first existing issue type the root cause
/// mentions, else the root cause's first three words (articles skipped) as a slug.
pub fn issue_type(body: &Value) -> Value {
    let (system, user) = parse::prompt(body);
    let (issue_types, _) = parse::vocabulary(&system);
    let cause = parse::section(&user, "root-cause").unwrap_or_default();
    let named = mentioned_issue_type(&issue_types, cause).or_else(|| {
        let words: Vec<&str> = cause
            .split_whitespace()
            .filter(|w| !["a", "an", "the"].contains(&w.to_lowercase().as_str()))
            .collect();
        first_words(&words.join(" "))
    });
    json!({ "issue_type": named.unwrap_or_default() })
}

/// A second look at a root cause answers with the final answer's `Root cause:` sentence, as
/// an extraction would, or `null`.
pub fn cause(body: &Value) -> Value {
    let (_, user) = parse::prompt(body);
    let answer = parse::section(&user, "agent-final-answer").unwrap_or_default();
    json!({ "root_cause": root_cause(answer) })
}

const COMPONENT_KEYS: [(&str, &str); 11] = [
    ("service", "service"),
    ("svc", "service"),
    ("database", "database"),
    ("db", "database"),
    ("queue", "queue"),
    ("topic", "queue"),
    ("cache", "cache"),
    ("cluster", "cluster"),
    ("host", "host"),
    ("node", "host"),
    ("pipeline", "pipeline"),
];

/// Bounds of a component in `ExtractedEpisode::json_schema`.
const MAX_COMPONENT_KIND_CHARS: usize = deja_domain::Component::MAX_KIND_CHARS;
const MAX_COMPONENT_NAME_CHARS: usize = deja_domain::Component::MAX_NAME_CHARS;
/// A description longer than this is not a description any more.
const MAX_DESCRIPTION_CHARS: usize = 300;

pub fn extraction(body: &Value) -> Value {
    let limits = parse::limits(body);
    let (system, user) = parse::prompt(body);
    let (head, tail) = parse::around_tool_calls(&user);
    let (issue_types, vocabulary_components) = parse::vocabulary(&system);
    let stored = parse::stored_episode(head);
    let message = parse::section(head, "user-message").unwrap_or_default();
    let answer = parse::section(tail, "agent-final-answer").unwrap_or_default();
    let both = format!("{message}\n{answer}");

    let issue_type = hashtag(message)
        .or_else(|| mentioned_issue_type(&issue_types, &both))
        .or_else(|| stored_str(&stored, "issue_type"))
        .or_else(|| alert_name(message).map(|name| kebab(&name)))
        .or_else(|| first_words(message))
        .unwrap_or_else(|| "incident".to_owned());
    let issue_type = trim_slug(&deja_domain::extraction::slug(&issue_type), &limits);

    let description = stored_str(&stored, "issue_description")
        .or_else(|| {
            message
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "No description given.".to_owned());
    let root_cause = root_cause(answer).map(|r| bound(&r, limits.max_text_chars));
    let lower = answer.to_lowercase();
    let resolved = root_cause.is_some() && (lower.contains("confirmed") || lower.contains("fixed"));
    let summary = sentences(answer, 2);
    let summary = if summary.is_empty() {
        "No conclusion in this turn.".to_owned()
    } else {
        summary
    };
    let ruled_out: Vec<String> = ruled_out(answer)
        .into_iter()
        .map(|item| bound(&item, limits.max_finding_chars))
        .take(limits.max_key_findings)
        .collect();
    let findings: Vec<String> = answer
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("- "))
        .map(|finding| bound(finding.trim(), limits.max_finding_chars))
        .filter(|finding| !finding.is_empty())
        .take(limits.max_key_findings)
        .collect();

    let mut reply = json!({
        "root_cause": root_cause,
        "resolved": resolved,
        "issue_type": issue_type,
        "issue_description": bound(&description, limits.max_text_chars.min(MAX_DESCRIPTION_CHARS)),
        "components": components(&both, &vocabulary_components, &stored, &limits),
        "key_findings": findings,
        "ruled_out": ruled_out,
        "summary": bound(&summary, limits.max_text_chars),
    });
    // A compliant model copies the fields the runtime gave.
    if let (Some(given), Some(fields)) = (parse::given_fields(tail), reply.as_object_mut()) {
        for (field, value) in given {
            if fields.contains_key(&field) {
                fields.insert(field, value);
            }
        }
    }
    reply
}

pub fn synthesis(body: &Value) -> Value {
    let (_, user) = parse::prompt(body);
    let sources = parse::source_episodes(&user);
    let max = Playbook::MAX_ITEMS;
    let item = |text: String| bound(&text, Playbook::MAX_ITEM_CHARS);

    let mut root_causes: Vec<String> = Vec::new();
    let mut skills: Vec<String> = Vec::new();
    let mut ruled_out: Vec<String> = Vec::new();
    for source in &sources {
        if let Some(cause) = &source.root_cause {
            push_distinct(&mut root_causes, cause);
        }
        for skill in &source.skills {
            push_distinct(&mut skills, skill);
        }
        for item in &source.ruled_out {
            push_distinct(&mut ruled_out, item);
        }
    }
    if root_causes.is_empty() {
        root_causes.push("No root cause was identified in the past episodes".to_owned());
    }
    let mut steps = vec!["Compare the live symptoms with the past root causes above".to_owned()];
    steps.extend(
        skills
            .iter()
            .take(max - 2)
            .map(|skill| format!("Gather evidence with {skill}")),
    );
    steps.push("Confirm the cause with live data before acting".to_owned());
    let mut anti_patterns: Vec<String> = ruled_out
        .iter()
        .take(max - 1)
        .map(|item| format!("Chasing {item} again: it was ruled out before"))
        .collect();
    anti_patterns.push("Applying a past fix without confirming the cause".to_owned());

    let list =
        |items: Vec<String>| -> Vec<String> { items.into_iter().take(max).map(item).collect() };
    json!({
        "common_root_causes": list(root_causes),
        "investigation_steps": list(steps),
        "key_skills": list(skills),
        "anti_patterns": list(anti_patterns),
    })
}

fn push_distinct(list: &mut Vec<String>, value: &str) {
    if !list.iter().any(|v| v.eq_ignore_ascii_case(value)) {
        list.push(value.to_owned());
    }
}

fn stored_str(stored: &Option<Value>, field: &str) -> Option<String> {
    stored
        .as_ref()?
        .get(field)?
        .as_str()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// `#cache-eviction` → `cache-eviction` (must contain a letter).
fn hashtag(message: &str) -> Option<String> {
    message.split_whitespace().find_map(|word| {
        let tag = word.strip_prefix('#')?;
        let tag: String = tag
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .collect();
        let tag = tag.trim_matches(|c| c == '-' || c == '_');
        tag.chars()
            .any(|c| c.is_ascii_alphabetic())
            .then(|| tag.to_lowercase())
    })
}

fn mentioned_issue_type(issue_types: &[String], text: &str) -> Option<String> {
    let lower = text.to_lowercase();
    issue_types
        .iter()
        .find(|issue_type| {
            let issue_type = issue_type.to_lowercase();
            !issue_type.is_empty()
                && (mentions(&lower, &issue_type)
                    || mentions(&lower, &issue_type.replace('-', " ")))
        })
        .cloned()
}

/// `needle` occurs in `haystack` (both lowercase) between non-alphanumeric characters.
fn mentions(haystack: &str, needle: &str) -> bool {
    haystack.match_indices(needle).any(|(start, _)| {
        let before = haystack[..start].chars().next_back();
        let after = haystack[start + needle.len()..].chars().next();
        !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
    })
}

fn alert_name(message: &str) -> Option<String> {
    let words = message.split_whitespace();
    let explicit = words
        .clone()
        .find_map(|w| w.strip_prefix("alertname="))
        .map(|name| name.trim_matches(|c: char| !c.is_alphanumeric()).to_owned())
        .filter(|name| !name.is_empty());
    explicit.or_else(|| {
        words
            .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
            .find(|w| {
                w.len() >= 6
                    && w.chars().all(|c| c.is_ascii_alphanumeric())
                    && w.starts_with(|c: char| c.is_ascii_uppercase())
                    && w.chars().any(|c| c.is_ascii_lowercase())
                    && w.chars().filter(char::is_ascii_uppercase).count() >= 3
            })
            .map(str::to_owned)
    })
}

/// `FeatureFreshnessSLO` → `feature-freshness-slo`.
fn kebab(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() && i > 0 {
            let prev = chars[i - 1];
            let next_is_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            if prev.is_lowercase()
                || prev.is_ascii_digit()
                || (prev.is_uppercase() && next_is_lower)
            {
                out.push('-');
            }
        }
        out.extend(c.to_lowercase());
    }
    out
}

fn first_words(message: &str) -> Option<String> {
    let words: Vec<&str> = message.split_whitespace().take(3).collect();
    let slug = deja_domain::extraction::slug(&words.join(" "));
    (!slug.is_empty()).then_some(slug)
}

fn trim_slug(slug: &str, limits: &ExtractionLimits) -> String {
    let cut: String = slug.chars().take(limits.max_issue_type_chars).collect();
    let cut = cut.trim_end_matches('-');
    if cut.is_empty() {
        "incident".to_owned()
    } else {
        cut.to_owned()
    }
}

fn components(
    text: &str,
    vocabulary: &[Component],
    stored: &Option<Value>,
    limits: &ExtractionLimits,
) -> Vec<Value> {
    let mut found: Vec<Component> = Vec::new();
    let mut add = |kind: &str, name: &str| {
        let name = name.trim();
        if name.is_empty()
            || kind.chars().count() > MAX_COMPONENT_KIND_CHARS
            || name.chars().count() > MAX_COMPONENT_NAME_CHARS
            || found
                .iter()
                .any(|c| c.kind == kind && c.name.eq_ignore_ascii_case(name))
        {
            return;
        }
        found.push(Component::new(kind, name));
    };
    for word in text.split_whitespace() {
        let Some((key, value)) = word.split_once('=') else {
            continue;
        };
        let key = key
            .trim_start_matches(|c: char| !c.is_alphanumeric())
            .to_lowercase();
        if let Some((_, kind)) = COMPONENT_KEYS.iter().find(|(k, _)| *k == key) {
            add(kind, value.trim_matches(|c: char| !c.is_alphanumeric()));
        }
    }
    let lower = text.to_lowercase();
    for component in vocabulary {
        if mentions(&lower, &component.name.to_lowercase()) {
            add(&component.kind, &component.name);
        }
    }
    let stored_components: Vec<Component> = stored
        .as_ref()
        .and_then(|s| s.get("components"))
        .and_then(|c| serde_json::from_value(c.clone()).ok())
        .unwrap_or_default();
    for component in &stored_components {
        add(&component.kind, &component.name);
    }
    found
        .into_iter()
        .take(limits.max_components)
        .map(|c| json!({"type": c.kind, "name": c.name}))
        .collect()
}

/// The items of the final answer's `Ruled out:` sentence, split on `;`.
fn ruled_out(answer: &str) -> Vec<String> {
    const MARKER: &[u8] = b"ruled out:";
    let Some(at) = answer
        .as_bytes()
        .windows(MARKER.len())
        .position(|w| w.eq_ignore_ascii_case(MARKER))
    else {
        return Vec::new();
    };
    let rest = answer.get(at + MARKER.len()..).unwrap_or_default();
    sentences(rest, 1)
        .trim_end_matches('.')
        .split(';')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The text after `Root cause:` up to the end of its sentence.
fn root_cause(answer: &str) -> Option<String> {
    const MARKER: &[u8] = b"root cause:";
    // ASCII-only case folding keeps byte offsets valid in the original text.
    let at = answer
        .as_bytes()
        .windows(MARKER.len())
        .position(|w| w.eq_ignore_ascii_case(MARKER))?;
    let rest = answer.get(at + MARKER.len()..)?;
    let cause = sentences(rest, 1);
    let cause = cause.trim_end_matches('.').trim();
    (!cause.is_empty()).then(|| cause.to_owned())
}

/// The first `count` sentences of `text` on one line. A sentence ends at `.`, `!` or `?`
/// followed by whitespace, or at a line break.
fn sentences(text: &str, count: usize) -> String {
    let mut out = String::new();
    let mut found = 0;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let mut start = 0;
        let chars: Vec<(usize, char)> = line.char_indices().collect();
        for (i, &(at, c)) in chars.iter().enumerate() {
            let ends = matches!(c, '.' | '!' | '?')
                && chars.get(i + 1).is_none_or(|(_, n)| n.is_whitespace());
            if ends || i + 1 == chars.len() {
                let end = at + c.len_utf8();
                push_sentence(&mut out, line[start..end].trim());
                found += 1;
                if found == count {
                    return out;
                }
                start = end;
            }
        }
    }
    out
}

fn push_sentence(out: &mut String, sentence: &str) {
    if sentence.is_empty() {
        return;
    }
    if !out.is_empty() {
        out.push(' ');
    }
    out.push_str(sentence);
}

/// At most `max` characters, on one line.
fn bound(text: &str, max: usize) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= max {
        return line;
    }
    let mut cut: String = line.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
#[path = "auto_tests.rs"]
mod tests;
