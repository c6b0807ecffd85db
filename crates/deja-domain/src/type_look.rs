//! A second look at an issue type that names a hypothesis the conversation ruled out.
//!
//! A small model revising its cause on a later turn keeps the issue type its first turn gave
//! the abandoned guess: it reads that type in the stored episode and copies it, whatever the
//! prompt says (inc-dev-027 stored as `time-drift` with "time drift between identity-service
//! and the relying apps" ruled out and a key-retirement cause; a prompt that told the model
//! to drop such a type changed nothing, docs/EVALUATION.md). Strategies group episodes by
//! type, and a person reading the episode sees the rejected mechanism as its label. So when
//! [`issue_type_names_ruled_out`] finds such a type, the worker asks one narrow question: the
//! conclusion's root cause and what was ruled out, "name the failure mechanism of this
//! cause". The reply is checked here: a type that still names a ruled-out hypothesis, or the
//! same type, is sent back once for repair and otherwise not used.

use crate::episode::Episode;
use crate::extraction::{clean_list, strip_code_fence, ExtractedEpisode, ExtractionLimits};
use crate::merge::{issue_type_names_ruled_out, names_every_word_of_type};
use crate::vocab::normalize_issue_type;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Longest issue type the second look may write, in characters (as an extraction's default).
pub const MAX_RENAMED_TYPE_CHARS: usize = 60;

/// Why an extracted issue type is asked for again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeDoubt {
    /// The type the extraction wrote.
    pub issue_type: String,
    /// The ruled-out hypothesis that type names.
    pub names: String,
    /// The conclusion whose mechanism the new type must name.
    pub root_cause: String,
    /// Every hypothesis the conversation ruled out so far (this turn's and the stored ones).
    pub ruled_out: Vec<String>,
    /// The longest type the reply may give (the extraction's limit, at most
    /// [`MAX_RENAMED_TYPE_CHARS`]).
    pub max_chars: usize,
}

/// The doubt about `extracted`'s issue type, if it names a hypothesis ruled out by this turn
/// or an earlier one while its root cause is another. Without a root cause there is no
/// mechanism to name instead, and the type stays.
pub fn doubt(
    existing: Option<&Episode>,
    extracted: &ExtractedEpisode,
    limits: &ExtractionLimits,
) -> Option<TypeDoubt> {
    let root_cause = extracted.root_cause.as_deref()?.trim();
    if root_cause.is_empty() {
        return None;
    }
    let earlier = existing.map(|e| e.ruled_out.as_slice()).unwrap_or_default();
    let ruled_out = clean_list(extracted.ruled_out.iter().chain(earlier).cloned().collect());
    let names = issue_type_names_ruled_out(&extracted.issue_type, Some(root_cause), &ruled_out)?;
    Some(TypeDoubt {
        issue_type: extracted.issue_type.clone(),
        names: names.clone(),
        root_cause: root_cause.to_owned(),
        ruled_out,
        max_chars: limits.max_issue_type_chars.min(MAX_RENAMED_TYPE_CHARS),
    })
}

/// The second look's reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RenamedType {
    /// The failure mechanism of the root cause, as a short kebab-case name.
    #[schemars(length(max = MAX_RENAMED_TYPE_CHARS))]
    pub issue_type: String,
}

impl RenamedType {
    /// The strict JSON schema of the reply (OpenAI structured outputs).
    pub fn json_schema() -> Value {
        crate::schema::strict_schema::<RenamedType>()
    }

    /// Parses and checks a reply against the doubt it answers: the type in normal form, or
    /// every problem, worded for the repair prompt.
    pub fn parse(reply: &str, doubt: &TypeDoubt) -> Result<String, Vec<String>> {
        let parsed: RenamedType = serde_json::from_str(strip_code_fence(reply))
            .map_err(|e| vec![format!("the reply is not the requested JSON object: {e}")])?;
        let issue_type = normalize_issue_type(&parsed.issue_type);
        let mut problems = Vec::new();
        if issue_type.is_empty() {
            problems.push("`issue_type` is empty".to_owned());
        }
        // A reply that reaches the limit was cut there by the schema's `maxLength` (a
        // constrained decoder stops mid-word: "…-with-no-request-coal", seen live): no name.
        if issue_type.chars().count() >= doubt.max_chars {
            problems.push(format!(
                "`issue_type` reaches the {} character limit and is cut off: name the \
                 mechanism in two to four words",
                doubt.max_chars
            ));
        }
        if issue_type == doubt.issue_type {
            problems.push(format!(
                "`{issue_type}` is the type being replaced: name the mechanism of the root cause"
            ));
        } else if names_every_word_of_type(&issue_type, &doubt.issue_type) {
            // A name built around the replaced one is that name again.
            problems.push(format!(
                "`{issue_type}` still says `{}`, the type being replaced: name the mechanism \
                 of the root cause",
                doubt.issue_type
            ));
        } else if let Some(item) =
            issue_type_names_ruled_out(&issue_type, Some(&doubt.root_cause), &doubt.ruled_out)
        {
            problems.push(format!(
                "`{issue_type}` names a ruled-out hypothesis (\"{item}\"): name the mechanism \
                 of the root cause instead"
            ));
        }
        if problems.is_empty() {
            Ok(issue_type)
        } else {
            Err(problems)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY_RETIREMENT: &str =
        "the key-retirement job removed signing key k-2024-03-b from the published JWKS";

    fn extracted(
        issue_type: &str,
        root_cause: Option<&str>,
        ruled_out: &[&str],
    ) -> ExtractedEpisode {
        ExtractedEpisode {
            root_cause: root_cause.map(str::to_owned),
            resolved: true,
            issue_type: issue_type.to_owned(),
            issue_description: "token validations fail across apps".to_owned(),
            components: vec![],
            key_findings: vec![],
            ruled_out: ruled_out.iter().map(|r| (*r).to_owned()).collect(),
            summary: String::new(),
        }
    }

    fn doubted(existing: Option<&Episode>, extracted: &ExtractedEpisode) -> Option<TypeDoubt> {
        doubt(existing, extracted, &ExtractionLimits::default())
    }

    fn stored(ruled_out: &[&str]) -> Episode {
        let mut episode = crate::testing::episode("conv");
        episode.ruled_out = ruled_out.iter().map(|r| (*r).to_owned()).collect();
        episode
    }

    #[test]
    fn a_type_naming_a_hypothesis_ruled_out_by_this_turn_is_doubted() {
        let doubt = doubted(
            None,
            &extracted(
                "time-drift",
                Some(KEY_RETIREMENT),
                &["time drift between identity-service and the relying apps"],
            ),
        )
        .expect("doubted");
        assert_eq!(doubt.issue_type, "time-drift");
        assert_eq!(
            doubt.names,
            "time drift between identity-service and the relying apps"
        );
        assert_eq!(doubt.root_cause, KEY_RETIREMENT);
    }

    #[test]
    fn a_hypothesis_ruled_out_by_an_earlier_turn_counts_too() {
        let earlier = stored(&["time drift between the hosts"]);
        let doubt = doubted(
            Some(&earlier),
            &extracted("time-drift", Some(KEY_RETIREMENT), &["a bad deploy"]),
        )
        .expect("doubted");
        assert_eq!(doubt.names, "time drift between the hosts");
        assert_eq!(doubt.ruled_out.len(), 2);
    }

    #[test]
    fn a_type_that_fits_the_cause_or_has_no_cause_to_replace_it_is_not_doubted() {
        let ruled_out = ["time drift between the hosts"];
        // The type names the cause's mechanism.
        assert_eq!(
            doubted(
                None,
                &extracted("key-retirement", Some(KEY_RETIREMENT), &ruled_out)
            ),
            None
        );
        // The cause itself says time drift: the ruled-out item was a narrower guess.
        let drift = "time drift on the NTP-less nodes after the chrony removal";
        assert_eq!(
            doubted(None, &extracted("time-drift", Some(drift), &ruled_out)),
            None
        );
        // No cause yet: nothing to name instead.
        assert_eq!(
            doubted(None, &extracted("time-drift", None, &ruled_out)),
            None
        );
        assert_eq!(
            doubted(None, &extracted("time-drift", Some("  "), &ruled_out)),
            None
        );
    }

    fn the_doubt() -> TypeDoubt {
        doubted(
            None,
            &extracted(
                "time-drift",
                Some(KEY_RETIREMENT),
                &["time drift between the hosts"],
            ),
        )
        .expect("doubted")
    }

    #[test]
    fn a_renamed_type_is_kept_in_normal_form() {
        assert_eq!(
            RenamedType::parse(r#"{"issue_type": "Signing Key Retired"}"#, &the_doubt()),
            Ok("signing-key-retired".to_owned())
        );
    }

    #[test]
    fn a_reply_that_keeps_or_renames_into_the_ruled_out_hypothesis_is_refused() {
        let doubt = the_doubt();
        let same = RenamedType::parse(r#"{"issue_type": "time-drift"}"#, &doubt).unwrap_err();
        assert!(same[0].contains("the type being replaced"), "{same:?}");
        let around =
            RenamedType::parse(r#"{"issue_type": "clock-time-drift"}"#, &doubt).unwrap_err();
        assert!(around[0].contains("still says `time-drift`"), "{around:?}");
        let again =
            RenamedType::parse(r#"{"issue_type": "drift-between-hosts"}"#, &doubt).unwrap_err();
        assert!(again[0].contains("ruled-out hypothesis"), "{again:?}");
        assert!(RenamedType::parse(r#"{"issue_type": ""}"#, &doubt).is_err());
        assert!(RenamedType::parse("key retirement", &doubt).is_err());
        let long = format!(r#"{{"issue_type": "{}"}}"#, "a-".repeat(40));
        assert!(RenamedType::parse(&long, &doubt).is_err());
        // Cut at the limit by a constrained decoder: refused, while one character less is a name.
        let cut = "synchronized-ttl-expiry-of-listing-keys-with-no-request-coal";
        assert_eq!(cut.len(), MAX_RENAMED_TYPE_CHARS);
        let refused = RenamedType::parse(&format!(r#"{{"issue_type": "{cut}"}}"#), &doubt);
        assert!(refused.unwrap_err()[0].contains("cut off"));
        let whole = &cut[..MAX_RENAMED_TYPE_CHARS - 1];
        let taken = RenamedType::parse(&format!(r#"{{"issue_type": "{whole}"}}"#), &doubt);
        assert_eq!(taken.as_deref(), Ok(whole));
    }
}
