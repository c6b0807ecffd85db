//! What the LLM must return for one turn, its JSON schema (derived from the type, see
//! [`crate::schema`]), and the validation that runs again in Rust on every reply (a
//! schema-constrained server can still be wrong, and a fake or a misconfigured endpoint may
//! not constrain at all): the reply is parsed into the same type, then checked against the
//! same limits the schema carries.

use crate::episode::Component;
use schemars::JsonSchema;
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

/// The fields are in the order the model is asked to write them: the conclusion first (root
/// cause and resolved, decided by the latest turn), then what supports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExtractedEpisode {
    /// `null` while no root cause is identified.
    pub root_cause: Option<String>,
    /// True only when a root cause was identified with evidence.
    pub resolved: bool,
    /// A short kebab-case slug, e.g. `cache-eviction`; reuse the org's existing values.
    pub issue_type: String,
    pub issue_description: String,
    pub components: Vec<Component>,
    pub key_findings: Vec<String>,
    /// Hypotheses the conversation considered and abandoned.
    #[serde(default)]
    pub ruled_out: Vec<String>,
    pub summary: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("extraction violates the episode schema: {}", .problems.join("; "))]
pub struct ExtractionViolation {
    pub problems: Vec<String>,
}

impl ExtractedEpisode {
    /// `ruled_out` within `limits` after a step that added to it without the validator (the
    /// second look files the doubtful cause there): the newest items kept, each cut to
    /// `max_finding_chars`.
    pub fn bound_ruled_out(&mut self, limits: &ExtractionLimits) {
        let extra = self.ruled_out.len().saturating_sub(limits.max_key_findings);
        self.ruled_out.drain(..extra);
        for item in &mut self.ruled_out {
            if item.chars().count() > limits.max_finding_chars {
                *item = item.chars().take(limits.max_finding_chars).collect();
            }
        }
    }

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
        self.issue_type = crate::vocab::normalize_issue_type(&self.issue_type);
        self.issue_description = self.issue_description.trim().to_owned();
        self.summary = self.summary.trim().to_owned();
        self.root_cause = self
            .root_cause
            .map(|r| r.trim().to_owned())
            .filter(|r| !r.is_empty() && !r.eq_ignore_ascii_case("null"));
        self.key_findings = clean_list(self.key_findings);
        self.ruled_out = hypotheses_only(clean_list(self.ruled_out), &self.key_findings);
        if let Some(cause) = self.root_cause.take() {
            let cause = crate::second_look::cut_to_stated(&cause);
            let (cause, ruled_out) = split_off_ruled_out(cause);
            self.root_cause = Some(cause);
            for clause in ruled_out {
                if self.ruled_out.len() < limits.max_key_findings {
                    add_ruled_out(&mut self.ruled_out, clause);
                }
            }
        }
        self.components = crate::vocab::normalize_components(self.components);

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
        check_list("key_findings", &self.key_findings, limits, &mut problems);
        check_list("ruled_out", &self.ruled_out, limits, &mut problems);
        if self.components.len() > limits.max_components {
            problems.push(format!(
                "`components` has {} items, at most {} allowed",
                self.components.len(),
                limits.max_components
            ));
        }
        // The schema bounds them too, but an endpoint that does not enforce the schema could
        // store a name of any length.
        if self.components.iter().any(|c| {
            c.kind.chars().count() > Component::MAX_KIND_CHARS
                || c.name.chars().count() > Component::MAX_NAME_CHARS
        }) {
            problems.push(format!(
                "a component's type is longer than {} or its name than {} characters",
                Component::MAX_KIND_CHARS,
                Component::MAX_NAME_CHARS
            ));
        }
        if problems.is_empty() {
            Ok(self)
        } else {
            Err(ExtractionViolation { problems })
        }
    }

    /// The JSON schema sent as `response_format`: the strict schema of this type, with
    /// string lengths and list sizes bounded by `limits` so a constrained decoder stops where
    /// [`ExtractedEpisode::validated`] would refuse.
    pub fn json_schema(limits: &ExtractionLimits) -> serde_json::Value {
        let mut schema = crate::schema::strict_schema::<ExtractedEpisode>();
        let text = limits.max_text_chars;
        let (items, item_chars) = (limits.max_key_findings, limits.max_finding_chars);
        for (pointer, keyword, bound) in [
            ("/properties/root_cause", "maxLength", text),
            (
                "/properties/issue_type",
                "maxLength",
                limits.max_issue_type_chars,
            ),
            ("/properties/issue_description", "maxLength", text),
            ("/properties/summary", "maxLength", text),
            ("/properties/components", "maxItems", limits.max_components),
            ("/properties/key_findings", "maxItems", items),
            ("/properties/key_findings/items", "maxLength", item_chars),
            ("/properties/ruled_out", "maxItems", items),
            ("/properties/ruled_out/items", "maxLength", item_chars),
        ] {
            crate::schema::bound(&mut schema, pointer, keyword, bound);
        }
        schema
    }
}

/// Lowercase kebab-case: `Cache Eviction` and `cache_eviction` both become `cache-eviction`.
pub fn slug(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    // Lowercase first: some capitals lowercase to a letter plus a combining mark, which must
    // become a separator now rather than on a second pass (slugs are idempotent).
    for c in text.trim().chars().flat_map(char::to_lowercase) {
        if c.is_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    out
}

/// Trimmed, without empty items nor [placeholders](names_nothing), each item once (the first
/// spelling of items that differ only in case): small models repeat one sentence to fill a
/// list (seen with a 1.5B model: one finding five times in `ruled_out`).
pub(crate) fn clean_list(items: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    items
        .into_iter()
        .map(|f| f.trim().to_owned())
        .filter(|f| !names_nothing(f) && seen.insert(f.to_lowercase()))
        .collect()
}

/// Words that fill a list item without naming anything checked or seen, the list's own
/// field names among them (separated by spaces).
const PLACEHOLDER_WORDS: &str = "a abandoned any applicable are at be been cause causes checked \
     considered else explored far findings found has have hypotheses hypothesis identified \
     investigated is issue issues key n na nil no none not nothing null other others out point \
     problem problems rejected reported root ruled so summary tested the this time unknown was \
     were yet";

/// Whether `item` is empty or made of [`PLACEHOLDER_WORDS`] only: what a small model writes
/// to fill a list it has nothing for ("no other hypotheses considered", "none", "unknown",
/// "no hypothesis abandoned") or a field name it copied ("ruled_out[]" in `key_findings`,
/// "summary" in `ruled_out`): 15 of the 1,442 list items in the bundled 1.5B model's memories
/// of the dev conversations. Listed as ruled out, such an item tells the next agent that
/// something was checked when nothing was. An item that names something ("network ruled
/// out", "no other tenants affected") is kept.
fn names_nothing(item: &str) -> bool {
    crate::poisoning::words(item).iter().all(|word| {
        PLACEHOLDER_WORDS
            .split_whitespace()
            .any(|filler| filler == word)
    })
}

/// The ruled-out items that are hypotheses, not observations. A small model copies key
/// findings into `ruled_out` (28 of the 124 items the bundled 1.5B model wrote for the 65 dev
/// conversations, every one an observation: "redis client resolves endpoint once at
/// start-up", "the whole cache expires at once every hour", several the conversation's very
/// conclusion), and a ruled-out item is read as "this was checked and is not it": shown to
/// the next agent as what was ruled out, and contradicting a past episode with that cause
/// when a recurrence is linked. An item that is also a key finding in the same words (up to
/// case and punctuation) stays a finding and leaves `ruled_out`, unless it denies something
/// ("the crawler is not it: its rate is flat"): that finding records what was ruled out.
pub(crate) fn hypotheses_only(ruled_out: Vec<String>, key_findings: &[String]) -> Vec<String> {
    let findings: Vec<Vec<String>> = key_findings
        .iter()
        .map(|finding| crate::poisoning::words(finding))
        .collect();
    ruled_out
        .into_iter()
        .filter(|item| {
            !findings.contains(&crate::poisoning::words(item))
                || !crate::recognition::negation::denied_phrases(item).is_empty()
        })
        .collect()
}

/// `cause` without the clauses that only rule something out ("expired webhook certificate
/// created once at install; clock skew ruled out", "clock drift on three hosts; the
/// signing-key rotation was ruled out"), and those clauses. A small model copies an answer's
/// "Cause: X; Y ruled out" line whole; Y is then embedded in the cause, where it pulls the
/// episode's cause vector towards the very failure it excluded, and reads as part of the
/// conclusion. Clauses end at `;` and at a full stop before a space. A missing safeguard ("no
/// request coalescing") is a cause's own words and stays
/// ([`negation::only_rules_out`](crate::recognition::negation::only_rules_out)); a cause that
/// only rules out is left whole (the merge and the second look deal with it).
pub fn split_off_ruled_out(cause: &str) -> (String, Vec<String>) {
    let mut clauses: Vec<&str> = Vec::new();
    let mut start = 0;
    let mut chars = cause.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let ends = c == ';' || (c == '.' && chars.peek().is_none_or(|(_, n)| n.is_whitespace()));
        if ends {
            let end = i + c.len_utf8();
            clauses.push(&cause[start..end]);
            start = end;
        }
    }
    clauses.push(&cause[start..]);
    let (ruled_out, kept): (Vec<&str>, Vec<&str>) = clauses
        .into_iter()
        .filter(|clause| !clause.trim().is_empty())
        .partition(|clause| crate::recognition::negation::only_rules_out(clause));
    if ruled_out.is_empty() || kept.is_empty() {
        return (cause.to_owned(), Vec::new());
    }
    let kept = kept.concat();
    let kept = kept
        .trim()
        .trim_end_matches([';', ','])
        .trim_end()
        .to_owned();
    let ruled_out = ruled_out
        .into_iter()
        .map(|clause| clause.trim().trim_end_matches(['.', ';']).trim().to_owned())
        .collect();
    (kept, ruled_out)
}

/// Adds `clause` (a text that only rules something out) to `ruled_out` unless an item there
/// names all it denies already ("clock skew" covers "clock skew ruled out").
pub(crate) fn add_ruled_out(ruled_out: &mut Vec<String>, clause: String) {
    let denied = crate::recognition::negation::denied_phrases(&clause);
    let listed = ruled_out.iter().any(|item| {
        let item_terms = crate::ranking::terms::terms(item);
        denied
            .iter()
            .flatten()
            .all(|word| crate::ranking::terms::matches_a_term(word, &item_terms))
    });
    if !listed {
        ruled_out.push(clause);
    }
}

/// The bounds of a list of short sentences (`key_findings`, `ruled_out`).
pub(crate) fn check_list(
    field: &str,
    items: &[String],
    limits: &ExtractionLimits,
    problems: &mut Vec<String>,
) {
    if items.len() > limits.max_key_findings {
        problems.push(format!(
            "`{field}` has {} items, at most {} allowed",
            items.len(),
            limits.max_key_findings
        ));
    }
    if let Some(long) = items
        .iter()
        .position(|f| f.chars().count() > limits.max_finding_chars)
    {
        problems.push(format!(
            "`{field}[{long}]` is longer than {} characters",
            limits.max_finding_chars
        ));
    }
}

/// Small models sometimes wrap JSON in a markdown fence even when told not to.
pub(crate) fn strip_code_fence(reply: &str) -> &str {
    let trimmed = reply.trim();
    let Some(rest) = trimmed.strip_prefix("```") else {
        return trimmed;
    };
    let rest = rest.strip_prefix("json").unwrap_or(rest);
    rest.strip_suffix("```").unwrap_or(rest).trim()
}

#[cfg(test)]
mod tests {
    #[test]
    fn ruled_out_is_bounded_keeping_the_newest_items() {
        let limits = ExtractionLimits::default();
        let mut e: ExtractedEpisode = serde_json::from_value(serde_json::json!({
            "issue_type": "x", "issue_description": "d", "components": [],
            "root_cause": null, "resolved": false, "key_findings": [], "summary": "s",
            "ruled_out": (0..limits.max_key_findings + 2)
                .map(|i| format!("hypothesis {i}"))
                .chain(std::iter::once("é".repeat(limits.max_finding_chars + 10)))
                .collect::<Vec<_>>(),
        }))
        .unwrap();
        e.bound_ruled_out(&limits);
        assert_eq!(e.ruled_out.len(), limits.max_key_findings);
        assert_eq!(e.ruled_out[0], "hypothesis 3");
        assert_eq!(
            e.ruled_out.last().unwrap().chars().count(),
            limits.max_finding_chars
        );
    }

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
    fn a_component_name_past_its_bound_is_a_violation() {
        let mut long =
            serde_json::from_str::<serde_json::Value>(&reply(true, "maxmemory too low".into()))
                .unwrap();
        long["components"][0]["name"] = "n".repeat(Component::MAX_NAME_CHARS + 1).into();
        let err = ExtractedEpisode::parse(&long.to_string(), &Default::default()).unwrap_err();
        assert!(err.to_string().contains("component"), "{err}");
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
    fn a_cause_pasting_the_answers_labelled_statement_keeps_the_statement() {
        let pasted = "Resolved: p99 is back to 120 ms. Cause: the nightly report query held \
                      pooled connections; network ruled out. Next: move reports to the replica.";
        let e = ExtractedEpisode::parse(&reply(true, pasted.into()), &Default::default()).unwrap();
        assert_eq!(
            e.root_cause.as_deref(),
            Some("the nightly report query held pooled connections")
        );
        assert_eq!(e.ruled_out, vec!["network ruled out"]);
    }

    #[test]
    fn a_sentence_repeated_to_fill_a_list_is_kept_once() {
        let mut value: serde_json::Value =
            serde_json::from_str(&reply(false, serde_json::Value::Null)).unwrap();
        let repeated = "the webhook certificate expired";
        value["ruled_out"] = serde_json::json!([
            "clock skew",
            repeated,
            " The webhook certificate EXPIRED ",
            repeated,
            repeated,
            repeated,
            repeated
        ]);
        let e = ExtractedEpisode::parse(&value.to_string(), &Default::default()).unwrap();
        assert_eq!(e.ruled_out, vec!["clock skew", repeated]);
    }

    #[test]
    fn list_items_that_name_nothing_are_dropped() {
        let mut value: serde_json::Value =
            serde_json::from_str(&reply(false, serde_json::Value::Null)).unwrap();
        value["ruled_out"] = serde_json::json!([
            "no other hypotheses were considered",
            "None.",
            "unknown",
            "network ruled out",
            "No other issues found",
            "no hypothesis abandoned",
            "summary",
            "no other tenants affected"
        ]);
        value["key_findings"] = serde_json::json!(["ruled_out[]", "error rate 31% since 04:10"]);
        let e = ExtractedEpisode::parse(&value.to_string(), &Default::default()).unwrap();
        assert_eq!(
            e.ruled_out,
            vec!["network ruled out", "no other tenants affected"]
        );
        assert_eq!(e.key_findings, vec!["error rate 31% since 04:10"]);
    }

    #[test]
    fn a_clause_of_the_cause_that_only_rules_something_out_moves_to_ruled_out() {
        // As the 1.5B model copies an answer's "Cause:" line.
        assert_eq!(
            split_off_ruled_out(
                "expired webhook certificate created once at install; clock skew ruled out"
            ),
            (
                "expired webhook certificate created once at install".to_owned(),
                vec!["clock skew ruled out".to_owned()]
            )
        );
        assert_eq!(
            split_off_ruled_out(
                "clock drift on three hosts whose NTP server was gone; the signing-key rotation \
                 was ruled out."
            ),
            (
                "clock drift on three hosts whose NTP server was gone".to_owned(),
                vec!["the signing-key rotation was ruled out".to_owned()]
            )
        );
        assert_eq!(
            split_off_ruled_out(
                "DDL queued behind a long query. Rebalancing isn't the cause. No lock timeout \
                 was set."
            ),
            (
                "DDL queued behind a long query. No lock timeout was set.".to_owned(),
                vec!["Rebalancing isn't the cause".to_owned()]
            )
        );
        // inc-dev-057's last turn: what was a consequence, not the cause, is ruled out.
        assert_eq!(
            split_off_ruled_out(
                "unbounded price cache; promo-engine latency was a consequence, not the cause"
            ),
            (
                "unbounded price cache".to_owned(),
                vec!["promo-engine latency was a consequence, not the cause".to_owned()]
            )
        );
        // What a cause says was missing is the cause's own words, a decimal point ends no
        // clause, and a cause that only rules out is left to the merge.
        for whole in [
            "synchronized TTL expiry of the listing keys; no request coalescing",
            "tax-calculator HTTP client has no read timeout and shares the request pool",
            "fsclient 2.4 retried in lockstep. Nothing throttled the reconnects.",
            "rebalancing isn't the cause",
        ] {
            assert_eq!(split_off_ruled_out(whole), (whole.to_owned(), Vec::new()));
        }

        let mut value: serde_json::Value = serde_json::from_str(&reply(
            true,
            "staging config applied globally; DDoS ruled out.".into(),
        ))
        .unwrap();
        value["ruled_out"] = serde_json::json!(["a DDoS"]);
        let e = ExtractedEpisode::parse(&value.to_string(), &Default::default()).unwrap();
        assert_eq!(
            e.root_cause.as_deref(),
            Some("staging config applied globally")
        );
        assert_eq!(e.ruled_out, vec!["a DDoS"], "listed once");
        value["ruled_out"] = serde_json::json!([]);
        let e = ExtractedEpisode::parse(&value.to_string(), &Default::default()).unwrap();
        assert_eq!(e.ruled_out, vec!["DDoS ruled out"]);
    }

    #[test]
    fn a_key_finding_copied_into_ruled_out_stays_a_finding_unless_it_denies_something() {
        let mut value: serde_json::Value = serde_json::from_str(&reply(
            true,
            "redis client pinned to the old primary".into(),
        ))
        .unwrap();
        // As the 1.5B model wrote them for a failover conversation: observations (one of them
        // the conclusion) listed as ruled out, beside a real abandoned hypothesis and a
        // finding that records one.
        value["key_findings"] = serde_json::json!([
            "Redis client resolves endpoint once at start-up.",
            "writes get READONLY",
            "the crawler is not it: its rate is flat"
        ]);
        value["ruled_out"] = serde_json::json!([
            "redis client resolves endpoint once at start-up",
            "network partition between writer and redis",
            "Writes get READONLY!",
            "the crawler is not it: its rate is flat",
            // Shares words with a finding without restating it: a hypothesis of its own.
            "writes get READONLY because the primary is overloaded"
        ]);
        let e = ExtractedEpisode::parse(&value.to_string(), &Default::default()).unwrap();
        assert_eq!(
            e.ruled_out,
            vec![
                "network partition between writer and redis",
                "the crawler is not it: its rate is flat",
                "writes get READONLY because the primary is overloaded"
            ]
        );
        assert_eq!(e.key_findings.len(), 3, "findings are kept whole");
    }

    #[test]
    fn too_many_findings_are_reported_with_the_bound() {
        let mut value: serde_json::Value =
            serde_json::from_str(&reply(false, serde_json::Value::Null)).unwrap();
        value["key_findings"] = serde_json::json!(["f1", "f2", "f3", "f4", "f5", "f6", "f7"]);
        let err = ExtractedEpisode::parse(&value.to_string(), &Default::default()).unwrap_err();
        assert!(err.to_string().contains("at most 6"), "{err}");
    }

    /// The schema as it was written by hand before it was derived, which llama.cpp's
    /// `json_schema` support and OpenAI's strict mode accept: the derived one must keep
    /// every constraint.
    #[test]
    fn the_derived_schema_keeps_every_constraint_of_the_accepted_one() {
        let limits = ExtractionLimits {
            max_key_findings: 3,
            max_finding_chars: 50,
            max_components: 4,
            max_text_chars: 200,
            max_issue_type_chars: 30,
        };
        let accepted = serde_json::json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["root_cause", "resolved", "issue_type", "issue_description", "components",
                         "key_findings", "ruled_out", "summary"],
            "properties": {
                "root_cause": {"type": ["string", "null"], "maxLength": 200},
                "resolved": {"type": "boolean"},
                "issue_type": {"type": "string", "maxLength": 30},
                "issue_description": {"type": "string", "maxLength": 200},
                "components": {
                    "type": "array",
                    "maxItems": 4,
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
                    "maxItems": 3,
                    "items": {"type": "string", "maxLength": 50}
                },
                "ruled_out": {
                    "type": "array",
                    "maxItems": 3,
                    "items": {"type": "string", "maxLength": 50}
                },
                "summary": {"type": "string", "maxLength": 200}
            }
        });
        assert_eq!(
            crate::schema::normalized(ExtractedEpisode::json_schema(&limits)),
            crate::schema::normalized(accepted)
        );
    }

    #[test]
    fn slugs_are_kebab_case() {
        assert_eq!(slug("  OOM_Killed  (JVM) "), "oom-killed-jvm");
    }
}
