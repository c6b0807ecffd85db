//! What the LLM must return for one turn, its JSON schema, and the validation that runs again
//! in Rust on every reply (a schema-constrained server can still be wrong, and a fake or a
//! misconfigured endpoint may not constrain at all).

use crate::episode::Component;
use serde::{Deserialize, Serialize};

/// Bounds on the extracted fields: memory stores conclusions, not transcripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtractionLimits {
    pub max_key_findings: usize,
    pub max_finding_chars: usize,
    pub max_components: usize,
    pub max_text_chars: usize,
    pub max_issue_type_chars: usize,
}

impl Default for ExtractionLimits {
    fn default() -> Self {
        ExtractionLimits {
            max_key_findings: 6,
            max_finding_chars: 240,
            max_components: 8,
            max_text_chars: 800,
            max_issue_type_chars: 60,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtractedEpisode {
    /// A short kebab-case slug, e.g. `cache-eviction`; reuse the team's existing values.
    pub issue_type: String,
    pub issue_description: String,
    pub components: Vec<Component>,
    pub key_findings: Vec<String>,
    /// `null` while no root cause is identified.
    pub root_cause: Option<String>,
    pub summary: String,
    /// True only when a root cause was identified with evidence.
    pub resolved: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("extraction violates the episode schema: {}", .problems.join("; "))]
pub struct ExtractionViolation {
    pub problems: Vec<String>,
}

impl ExtractedEpisode {
    /// Parses an LLM reply and validates it. The error lists every problem so that a repair
    /// prompt can name them all at once.
    pub fn parse(reply: &str, limits: &ExtractionLimits) -> Result<Self, ExtractionViolation> {
        let extracted: ExtractedEpisode =
            serde_json::from_str(strip_code_fence(reply)).map_err(|e| ExtractionViolation {
                problems: vec![format!("reply is not the required json object: {e}")],
            })?;
        extracted.validated(limits)
    }

    /// Normalises (trims, slugs the issue type, drops empty items) and checks bounds.
    pub fn validated(mut self, limits: &ExtractionLimits) -> Result<Self, ExtractionViolation> {
        let mut problems = Vec::new();
        self.issue_type = slug(&self.issue_type);
        self.issue_description = self.issue_description.trim().to_owned();
        self.summary = self.summary.trim().to_owned();
        self.root_cause = self
            .root_cause
            .map(|r| r.trim().to_owned())
            .filter(|r| !r.is_empty() && !r.eq_ignore_ascii_case("null"));
        self.key_findings = self
            .key_findings
            .into_iter()
            .map(|f| f.trim().to_owned())
            .filter(|f| !f.is_empty())
            .collect();
        self.components = dedup_components(self.components);

        if self.issue_type.is_empty() {
            problems.push("`issue_type` is empty".to_owned());
        }
        if self.issue_type.chars().count() > limits.max_issue_type_chars {
            problems.push(format!(
                "`issue_type` is longer than {} characters",
                limits.max_issue_type_chars
            ));
        }
        for (field, value) in [
            ("issue_description", self.issue_description.as_str()),
            ("summary", self.summary.as_str()),
        ] {
            if value.is_empty() {
                problems.push(format!("`{field}` is empty"));
            }
            if value.chars().count() > limits.max_text_chars {
                problems.push(format!(
                    "`{field}` is longer than {} characters",
                    limits.max_text_chars
                ));
            }
        }
        if let Some(root_cause) = &self.root_cause {
            if root_cause.chars().count() > limits.max_text_chars {
                problems.push(format!(
                    "`root_cause` is longer than {} characters",
                    limits.max_text_chars
                ));
            }
        }
        if self.resolved && self.root_cause.is_none() {
            problems.push("`resolved` is true but `root_cause` is null".to_owned());
        }
        if self.key_findings.len() > limits.max_key_findings {
            problems.push(format!(
                "`key_findings` has {} items, at most {} allowed",
                self.key_findings.len(),
                limits.max_key_findings
            ));
        }
        if let Some(long) = self
            .key_findings
            .iter()
            .position(|f| f.chars().count() > limits.max_finding_chars)
        {
            problems.push(format!(
                "`key_findings[{long}]` is longer than {} characters",
                limits.max_finding_chars
            ));
        }
        if self.components.len() > limits.max_components {
            problems.push(format!(
                "`components` has {} items, at most {} allowed",
                self.components.len(),
                limits.max_components
            ));
        }
        if problems.is_empty() {
            Ok(self)
        } else {
            Err(ExtractionViolation { problems })
        }
    }

    /// The JSON schema sent as `response_format` (strict mode: every property required,
    /// no additional properties, string lengths bounded so a constrained decoder stops).
    pub fn json_schema(limits: &ExtractionLimits) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["issue_type", "issue_description", "components", "key_findings",
                         "root_cause", "summary", "resolved"],
            "properties": {
                "issue_type": {"type": "string", "maxLength": limits.max_issue_type_chars},
                "issue_description": {"type": "string", "maxLength": limits.max_text_chars},
                "components": {
                    "type": "array",
                    "maxItems": limits.max_components,
                    "items": {
                        "type": "object",
                        "additionalProperties": false,
                        "required": ["type", "name"],
                        "properties": {
                            "type": {"type": "string", "maxLength": 40},
                            "name": {"type": "string", "maxLength": 80}
                        }
                    }
                },
                "key_findings": {
                    "type": "array",
                    "maxItems": limits.max_key_findings,
                    "items": {"type": "string", "maxLength": limits.max_finding_chars}
                },
                "root_cause": {"type": ["string", "null"], "maxLength": limits.max_text_chars},
                "summary": {"type": "string", "maxLength": limits.max_text_chars},
                "resolved": {"type": "boolean"}
            }
        })
    }
}

/// Lowercase kebab-case: `Cache Eviction` and `cache_eviction` both become `cache-eviction`.
pub fn slug(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.trim().chars() {
        if c.is_alphanumeric() {
            out.extend(c.to_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    out
}

fn dedup_components(components: Vec<Component>) -> Vec<Component> {
    let mut out: Vec<Component> = Vec::new();
    for c in components {
        let c = Component::new(slug(&c.kind), c.name.trim());
        if c.kind.is_empty() || c.name.is_empty() {
            continue;
        }
        if !out
            .iter()
            .any(|o| o.kind == c.kind && o.name.eq_ignore_ascii_case(&c.name))
        {
            out.push(c);
        }
    }
    out
}

/// Small models sometimes wrap JSON in a markdown fence even when told not to.
fn strip_code_fence(reply: &str) -> &str {
    let trimmed = reply.trim();
    let Some(rest) = trimmed.strip_prefix("```") else {
        return trimmed;
    };
    let rest = rest.strip_prefix("json").unwrap_or(rest);
    rest.strip_suffix("```").unwrap_or(rest).trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(resolved: bool, root_cause: serde_json::Value) -> String {
        serde_json::json!({
            "issue_type": "Cache Eviction",
            "issue_description": "checkout pods crash",
            "components": [{"type": "Service", "name": "checkout"}, {"type": "service", "name": "Checkout"}],
            "key_findings": ["evicted_keys climbing", " "],
            "root_cause": root_cause,
            "summary": "redis maxmemory reached",
            "resolved": resolved
        })
        .to_string()
    }

    #[test]
    fn a_good_reply_is_normalised() {
        let e = ExtractedEpisode::parse(
            &reply(true, "maxmemory too low".into()),
            &Default::default(),
        )
        .unwrap();
        assert_eq!(e.issue_type, "cache-eviction");
        assert_eq!(e.components, vec![Component::new("service", "checkout")]);
        assert_eq!(e.key_findings, vec!["evicted_keys climbing"]);
    }

    #[test]
    fn resolved_without_root_cause_is_a_violation() {
        let err =
            ExtractedEpisode::parse(&reply(true, serde_json::Value::Null), &Default::default())
                .unwrap_err();
        assert!(err.to_string().contains("root_cause"), "{err}");
    }

    #[test]
    fn a_fenced_reply_is_accepted_and_garbage_is_not() {
        let fenced = format!("```json\n{}\n```", reply(false, serde_json::Value::Null));
        assert!(ExtractedEpisode::parse(&fenced, &Default::default()).is_ok());
        assert!(ExtractedEpisode::parse("the root cause is redis", &Default::default()).is_err());
    }

    #[test]
    fn too_many_findings_are_reported_with_the_bound() {
        let mut value: serde_json::Value =
            serde_json::from_str(&reply(false, serde_json::Value::Null)).unwrap();
        value["key_findings"] = serde_json::json!(["a", "b", "c", "d", "e", "f", "g"]);
        let err = ExtractedEpisode::parse(&value.to_string(), &Default::default()).unwrap_err();
        assert!(err.to_string().contains("at most 6"), "{err}");
    }

    #[test]
    fn slugs_are_kebab_case() {
        assert_eq!(slug("  OOM_Killed  (JVM) "), "oom-killed-jvm");
    }
}
