//! Optional LLM verification of a decision (`search.verify = "llm"`): one call per search
//! asks, for each of the top candidates, whether it is the same failure mechanism as the
//! current evidence. The reply can only move a returned episode between `strong` and
//! `possible` — never add one, never drop one — so a wrong or hostile model can at worst
//! mislabel what the calibrated decision already returned.

use super::{Decided, MatchStrength, RecognitionParams};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Most candidates one verification call reads.
pub const MAX_VERIFIED: usize = 5;
/// Longest accepted reason, in characters.
pub const MAX_REASON_CHARS: usize = 300;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Same failure mechanism: promote to `strong`.
    Yes,
    /// A different mechanism: demote to `possible`.
    No,
    /// Cannot tell from the evidence: keep the calibrated label.
    Unsure,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CandidateVerdict {
    /// The episode id the verdict is about.
    pub id: String,
    pub verdict: Verdict,
    /// One short sentence.
    #[schemars(length(max = MAX_REASON_CHARS))]
    pub reason: String,
}

/// What the model must return.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifyReply {
    #[schemars(length(max = MAX_VERIFIED))]
    pub candidates: Vec<CandidateVerdict>,
}

impl VerifyReply {
    /// The strict JSON schema of the reply (OpenAI structured outputs), derived from this
    /// type, bounds included.
    pub fn json_schema() -> Value {
        crate::schema::strict_schema::<VerifyReply>()
    }

    /// Parses and checks a reply about `asked` (the ids sent, in order). Unknown ids,
    /// duplicates and over-long reasons are problems; a missing id is "unsure".
    pub fn parse(reply: &str, asked: &[String]) -> Result<VerifyReply, Vec<String>> {
        let parsed: VerifyReply = serde_json::from_str(reply.trim())
            .map_err(|e| vec![format!("the reply is not the requested JSON object: {e}")])?;
        let mut problems = Vec::new();
        let mut seen = Vec::new();
        for candidate in &parsed.candidates {
            if !asked.contains(&candidate.id) {
                problems.push(format!(
                    "`{}` is not one of the candidates asked about",
                    candidate.id
                ));
            }
            if seen.contains(&candidate.id) {
                problems.push(format!("`{}` is answered twice", candidate.id));
            }
            seen.push(candidate.id.clone());
            if candidate.reason.chars().count() > MAX_REASON_CHARS {
                problems.push(format!(
                    "the reason for `{}` is longer than {MAX_REASON_CHARS} characters",
                    candidate.id
                ));
            }
        }
        if problems.is_empty() {
            Ok(parsed)
        } else {
            Err(problems)
        }
    }

    pub fn verdict(&self, id: &str) -> Verdict {
        self.candidates
            .iter()
            .find(|c| c.id == id)
            .map_or(Verdict::Unsure, |c| c.verdict)
    }
}

/// Applies the verdicts to the decided list in place: `yes` promotes to `strong`, `no`
/// demotes to `possible`, `unsure` (or no verdict) keeps the label. A lead the query
/// contradicts, one a person marked wrong, and one shown below `possible` only for its
/// resemblance to the first lead stay `possible` whatever the reply: `strong` still needs the
/// rules and the confidence (`params`). Returns how many labels changed. Nothing is added or
/// removed, and the order is kept.
pub fn apply(decided: &mut [Decided], reply: &VerifyReply, params: &RecognitionParams) -> usize {
    let mut changed = 0;
    for d in decided.iter_mut() {
        let may_be_strong = d.evidence.contradicted.is_empty()
            && !d.episode.review.is_wrong()
            && d.confidence >= params.model_for(&d.evidence).possible;
        let next = match reply.verdict(&d.episode.id) {
            Verdict::Yes if !may_be_strong => d.strength,
            Verdict::Yes => MatchStrength::Strong,
            Verdict::No => MatchStrength::Possible,
            Verdict::Unsure => d.strength,
        };
        if next != d.strength {
            d.strength = next;
            changed += 1;
        }
    }
    changed
}

/// The cache key of one verification: the query and each candidate's id and version, so a
/// repeated search costs no call and an edited episode is verified again.
pub fn cache_key(query: &str, candidates: &[(&str, i64)]) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    hasher.update(query.trim().as_bytes());
    for (id, version) in candidates {
        hasher.update([0x1f]);
        hasher.update(id.as_bytes());
        hasher.update(version.to_le_bytes());
    }
    hex::encode(hasher.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recognition::Evidence;
    use crate::testing::episode;

    /// The schema as written by hand before it was derived (accepted by llama.cpp and
    /// OpenAI's strict mode): the derived one keeps every constraint.
    #[test]
    fn the_derived_schema_keeps_every_constraint_of_the_accepted_one() {
        let accepted = serde_json::json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["candidates"],
            "properties": {
                "candidates": {
                    "type": "array",
                    "maxItems": MAX_VERIFIED,
                    "items": {
                        "type": "object",
                        "additionalProperties": false,
                        "required": ["id", "verdict", "reason"],
                        "properties": {
                            "id": {"type": "string"},
                            "verdict": {"type": "string", "enum": ["yes", "no", "unsure"]},
                            "reason": {"type": "string", "maxLength": MAX_REASON_CHARS}
                        }
                    }
                }
            }
        });
        assert_eq!(
            crate::schema::normalized(VerifyReply::json_schema()),
            crate::schema::normalized(accepted)
        );
    }

    /// Thresholds under the test leads' 0.5: `possible` 0.3, `strong` 0.8.
    fn params() -> RecognitionParams {
        let model = crate::recognition::Model::from_weights(
            0.0,
            [0.0; crate::recognition::FEATURE_COUNT],
            crate::recognition::Thresholds {
                strong: 0.8,
                possible: 0.3,
            },
        );
        RecognitionParams {
            reranked: model,
            cosine_only: model,
            family: crate::recognition::FamilyOrder::OFF,
        }
    }

    fn decided(id: &str, strength: MatchStrength) -> Decided {
        Decided {
            episode: episode(id),
            evidence: Evidence::default(),
            confidence: 0.5,
            strength,
            breakdown: Default::default(),
        }
    }

    #[test]
    fn verdicts_move_labels_between_strong_and_possible_and_never_add_or_drop() {
        let mut list = vec![
            decided("a", MatchStrength::Possible),
            decided("b", MatchStrength::Strong),
            decided("c", MatchStrength::Strong),
        ];
        let reply = VerifyReply::parse(
            r#"{"candidates": [
                {"id": "a", "verdict": "yes", "reason": "same pool leak"},
                {"id": "b", "verdict": "no", "reason": "this one was a quota"},
                {"id": "c", "verdict": "unsure", "reason": "not enough evidence"}]}"#,
            &["a".into(), "b".into(), "c".into()],
        )
        .unwrap();
        assert_eq!(apply(&mut list, &reply, &params()), 2);
        let labels: Vec<(&str, MatchStrength)> = list
            .iter()
            .map(|d| (d.episode.id.as_str(), d.strength))
            .collect();
        assert_eq!(
            labels,
            [
                ("a", MatchStrength::Strong),
                ("b", MatchStrength::Possible),
                ("c", MatchStrength::Strong)
            ]
        );
    }

    /// Neither a lead shown below `possible` for its resemblance to the first nor one a person
    /// marked wrong becomes a recognized recurrence on a `yes`.
    #[test]
    fn a_yes_does_not_promote_a_lead_below_possible_or_marked_wrong() {
        let mut faint = decided("a", MatchStrength::Possible);
        faint.confidence = 0.1;
        let mut wrong = decided("b", MatchStrength::Possible);
        wrong.episode.review.verdict = Some(crate::review::VERDICT_WRONG.into());
        let mut list = vec![faint, wrong];
        let reply = VerifyReply::parse(
            r#"{"candidates": [{"id": "a", "verdict": "yes", "reason": "same"},
                               {"id": "b", "verdict": "yes", "reason": "same"}]}"#,
            &["a".into(), "b".into()],
        )
        .unwrap();
        assert_eq!(apply(&mut list, &reply, &params()), 0);
        assert!(list.iter().all(|d| d.strength == MatchStrength::Possible));
    }

    #[test]
    fn a_yes_does_not_promote_a_lead_the_query_contradicts() {
        let mut denied = decided("a", MatchStrength::Possible);
        denied.evidence.contradicted = vec!["expired".into()];
        let mut list = vec![denied];
        let reply = VerifyReply::parse(
            r#"{"candidates": [{"id": "a", "verdict": "yes", "reason": "both certificates"}]}"#,
            &["a".into()],
        )
        .unwrap();
        assert_eq!(apply(&mut list, &reply, &params()), 0);
        assert_eq!(list[0].strength, MatchStrength::Possible);
    }

    #[test]
    fn a_reply_about_unknown_or_repeated_ids_is_rejected_with_reasons() {
        let asked = vec!["a".to_owned()];
        let problems = VerifyReply::parse(
            r#"{"candidates": [{"id": "z", "verdict": "yes", "reason": ""},
                               {"id": "z", "verdict": "no", "reason": ""}]}"#,
            &asked,
        )
        .unwrap_err();
        assert!(problems
            .iter()
            .any(|p| p.contains("not one of the candidates")));
        assert!(problems.iter().any(|p| p.contains("twice")));
        assert!(VerifyReply::parse("yes", &asked).is_err());
        assert!(VerifyReply::parse(r#"{"candidates": [], "extra": 1}"#, &asked).is_err());
    }

    #[test]
    fn the_cache_key_changes_with_the_query_the_candidates_and_their_versions() {
        let base = cache_key("q", &[("a", 1), ("b", 2)]);
        assert_eq!(base, cache_key(" q ", &[("a", 1), ("b", 2)]));
        assert_ne!(base, cache_key("q2", &[("a", 1), ("b", 2)]));
        assert_ne!(base, cache_key("q", &[("a", 2), ("b", 2)]));
        assert_ne!(base, cache_key("q", &[("a", 1)]));
    }
}
