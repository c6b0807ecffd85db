//! The optional `conclusion` block of a turn event: what a runtime that already knows the
//! answer tells deja directly. Complete, it is merged without an LLM call; partial, the LLM
//! fills only the missing fields and the given ones win.
//!
//! It is still untrusted input: the same normalisation and bounds as an LLM reply apply
//! ([`ExtractedEpisode::validated`]), and a block that breaks them makes the event a schema
//! violation (dead-lettered with the reason) rather than being partly believed.

use crate::episode::Component;
use crate::extraction::{check_list, clean_list, ExtractedEpisode, ExtractionLimits};
use serde::{Deserialize, Deserializer, Serialize};

/// Every field is optional. `root_cause` distinguishes absent (not given) from `null`
/// (given: no root cause identified).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Conclusion {
    #[serde(
        default,
        deserialize_with = "given_or_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub root_cause: Option<Option<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue_description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub components: Option<Vec<Component>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_findings: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ruled_out: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// `"root_cause": null` is a given value (no cause identified), not an absent field.
fn given_or_null<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// The fields a complete block must give (`issue_description` may be left out: it then comes
/// from the stored episode or the user message).
pub const CONCLUSION_FIELDS: [&str; 7] = [
    "root_cause",
    "resolved",
    "issue_type",
    "components",
    "key_findings",
    "ruled_out",
    "summary",
];

impl Conclusion {
    /// The fields given, in [`CONCLUSION_FIELDS`] order, `issue_description` last.
    pub fn given_fields(&self) -> Vec<&'static str> {
        let mut fields: Vec<&'static str> = CONCLUSION_FIELDS
            .into_iter()
            .filter(|f| self.has(f))
            .collect();
        if self.issue_description.is_some() {
            fields.push("issue_description");
        }
        fields
    }

    /// The fields the LLM must fill, in [`CONCLUSION_FIELDS`] order (`issue_description` is
    /// asked for only when something else is missing too).
    pub fn missing_fields(&self) -> Vec<&'static str> {
        let mut fields: Vec<&'static str> = CONCLUSION_FIELDS
            .into_iter()
            .filter(|f| !self.has(f))
            .collect();
        if !fields.is_empty() && self.issue_description.is_none() {
            fields.push("issue_description");
        }
        fields
    }

    /// Enough to store an episode without asking an LLM.
    pub fn is_complete(&self) -> bool {
        CONCLUSION_FIELDS.iter().all(|f| self.has(f))
    }

    fn has(&self, field: &str) -> bool {
        match field {
            "root_cause" => self.root_cause.is_some(),
            "resolved" => self.resolved.is_some(),
            "issue_type" => self.issue_type.is_some(),
            "issue_description" => self.issue_description.is_some(),
            "components" => self.components.is_some(),
            "key_findings" => self.key_findings.is_some(),
            "ruled_out" => self.ruled_out.is_some(),
            "summary" => self.summary.is_some(),
            _ => false,
        }
    }

    /// Every way the given fields break the bounds an LLM reply must keep.
    pub fn problems(&self, limits: &ExtractionLimits) -> Vec<String> {
        let mut problems = Vec::new();
        let prefix = |p: String| format!("conclusion: {p}");
        if let Some(issue_type) = &self.issue_type {
            let normal = crate::vocab::normalize_issue_type(issue_type);
            if normal.is_empty() {
                problems.push("`issue_type` is empty".to_owned());
            } else if normal.chars().count() > limits.max_issue_type_chars {
                problems.push(format!(
                    "`issue_type` is longer than {} characters",
                    limits.max_issue_type_chars
                ));
            }
        }
        for (field, value) in [
            ("issue_description", self.issue_description.as_deref()),
            ("summary", self.summary.as_deref()),
            (
                "root_cause",
                self.root_cause.as_ref().and_then(Option::as_deref),
            ),
        ] {
            let Some(value) = value.map(str::trim) else {
                continue;
            };
            if value.is_empty() && field != "root_cause" {
                problems.push(format!("`{field}` is empty"));
            }
            if value.chars().count() > limits.max_text_chars {
                problems.push(format!(
                    "`{field}` is longer than {} characters",
                    limits.max_text_chars
                ));
            }
        }
        if self.resolved == Some(true) && !self.gives_a_root_cause() {
            problems.push("`resolved` is true but no `root_cause` is given".to_owned());
        }
        for (field, list) in [
            ("key_findings", &self.key_findings),
            ("ruled_out", &self.ruled_out),
        ] {
            if let Some(list) = list {
                check_list(field, &clean_list(list.clone()), limits, &mut problems);
            }
        }
        if let Some(components) = &self.components {
            if components.len() > limits.max_components {
                problems.push(format!(
                    "`components` has {} items, at most {} allowed",
                    components.len(),
                    limits.max_components
                ));
            }
            if components
                .iter()
                .any(|c| c.kind.chars().count() > 40 || c.name.chars().count() > 80)
            {
                problems.push(
                    "a component's `type` is over 40 or its `name` over 80 characters".to_owned(),
                );
            }
        }
        problems.into_iter().map(prefix).collect()
    }

    fn gives_a_root_cause(&self) -> bool {
        self.root_cause
            .as_ref()
            .and_then(Option::as_deref)
            .is_some_and(|r| !r.trim().is_empty() && !r.trim().eq_ignore_ascii_case("null"))
    }

    /// The given fields written over `extracted` (the LLM's reply for the missing ones, or a
    /// blank draft), then normalised and checked like any reply.
    pub fn overlay(
        &self,
        mut extracted: ExtractedEpisode,
        limits: &ExtractionLimits,
    ) -> Result<ExtractedEpisode, crate::ExtractionViolation> {
        if let Some(root_cause) = &self.root_cause {
            extracted.root_cause = root_cause.clone();
        }
        if let Some(resolved) = self.resolved {
            extracted.resolved = resolved;
        }
        if let Some(issue_type) = &self.issue_type {
            extracted.issue_type = issue_type.clone();
        }
        if let Some(description) = &self.issue_description {
            extracted.issue_description = description.clone();
        }
        if let Some(components) = &self.components {
            extracted.components = components.clone();
        }
        if let Some(findings) = &self.key_findings {
            extracted.key_findings = findings.clone();
        }
        if let Some(ruled_out) = &self.ruled_out {
            extracted.ruled_out = ruled_out.clone();
        }
        if let Some(summary) = &self.summary {
            extracted.summary = summary.clone();
        }
        // A given `root_cause: null` means no cause yet: the episode cannot be resolved.
        if extracted
            .root_cause
            .as_deref()
            .is_none_or(|r| r.trim().is_empty())
            && self.resolved != Some(true)
        {
            extracted.resolved = false;
        }
        extracted.validated(limits)
    }

    /// A complete block as an extraction, without any LLM. `fallback_description` is used
    /// when the block gives no `issue_description` (the stored episode's, or the opening
    /// message's first line). `None` when the block is not complete.
    pub fn to_extraction(
        &self,
        fallback_description: &str,
        limits: &ExtractionLimits,
    ) -> Option<Result<ExtractedEpisode, crate::ExtractionViolation>> {
        if !self.is_complete() {
            return None;
        }
        let description: String = fallback_description
            .trim()
            .chars()
            .take(limits.max_text_chars)
            .collect();
        let draft = ExtractedEpisode {
            root_cause: None,
            resolved: false,
            issue_type: String::new(),
            issue_description: if description.is_empty() {
                "No description given.".to_owned()
            } else {
                description
            },
            components: Vec::new(),
            key_findings: Vec::new(),
            ruled_out: Vec::new(),
            summary: String::new(),
        };
        Some(self.overlay(draft, limits))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn complete() -> serde_json::Value {
        serde_json::json!({
            "issue_type": "Cache Eviction",
            "components": [{"type": "svc", "name": "Redis_Sessions"}],
            "root_cause": "maxmemory too low for the session keys",
            "resolved": true,
            "key_findings": ["evicted_keys climbing"],
            "ruled_out": ["a bad deploy"],
            "summary": "redis evicted session keys; raised maxmemory"
        })
    }

    fn parse(value: serde_json::Value) -> Conclusion {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_complete_block_becomes_a_normalised_extraction_without_an_llm() {
        let c = parse(complete());
        assert!(c.is_complete());
        assert!(c.missing_fields().is_empty());
        let e = c
            .to_extraction("checkout 500s", &Default::default())
            .unwrap()
            .unwrap();
        assert_eq!(e.issue_type, "cache-eviction");
        assert_eq!(
            e.components,
            vec![Component::new("service", "redis-sessions")]
        );
        assert_eq!(e.issue_description, "checkout 500s");
        assert_eq!(e.ruled_out, vec!["a bad deploy"]);
        assert!(e.resolved);
    }

    #[test]
    fn a_null_root_cause_is_given_and_an_absent_one_is_missing() {
        let mut value = complete();
        value["root_cause"] = serde_json::Value::Null;
        value["resolved"] = false.into();
        let given = parse(value.clone());
        assert!(given.is_complete());
        value.as_object_mut().unwrap().remove("root_cause");
        let missing = parse(value);
        assert_eq!(
            missing.missing_fields(),
            vec!["root_cause", "issue_description"]
        );
        assert!(missing.to_extraction("x", &Default::default()).is_none());
    }

    #[test]
    fn the_given_fields_win_over_the_llm_reply() {
        let c = parse(serde_json::json!({"root_cause": "disk full on db-1", "resolved": true}));
        let llm = ExtractedEpisode {
            root_cause: Some("network partition".into()),
            resolved: false,
            issue_type: "disk-full".into(),
            issue_description: "writes fail".into(),
            components: vec![],
            key_findings: vec![],
            ruled_out: vec![],
            summary: "writes failed".into(),
        };
        let merged = c.overlay(llm, &Default::default()).unwrap();
        assert_eq!(merged.root_cause.as_deref(), Some("disk full on db-1"));
        assert!(merged.resolved);
        assert_eq!(merged.summary, "writes failed");
    }

    #[test]
    fn out_of_bounds_blocks_are_reported_like_llm_replies() {
        let mut value = complete();
        value["key_findings"] = serde_json::json!(["f1", "f2", "f3", "f4", "f5", "f6", "f7"]);
        value["summary"] = "x".repeat(900).into();
        let problems = parse(value).problems(&Default::default());
        assert_eq!(problems.len(), 2, "{problems:?}");
        let resolved_without_cause =
            parse(serde_json::json!({"resolved": true, "root_cause": null}));
        assert!(resolved_without_cause.problems(&Default::default())[0].contains("resolved"));
    }
}
