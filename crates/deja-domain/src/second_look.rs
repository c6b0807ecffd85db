//! A second look at a doubtful root cause, before it is merged.
//!
//! A small model reading a whole turn (stored episode, tool calls, answer) sometimes keeps
//! the hypothesis the conversation abandoned, or writes the answer's denial as the cause. The
//! merge rules ([`crate::merge`]) refuse to store such a cause, which leaves the episode
//! without one although the answer states it. When an extraction's cause is doubtful in one
//! of those ways, the worker asks one more, narrow question: the turn's final answer alone,
//! "what cause does it conclude?", with the phrases it rules out named as not the answer. The
//! reply is checked here like every reply: a cause that only denies, or that affirms a phrase
//! the answer rules out, is sent back once for repair and otherwise not used.
//!
//! The same question is asked when a cause is too thin to say what broke and why
//! ([`THIN_CAUSE_MAX_WORDS`]): "the failed deliveries", "a synchronized regional event",
//! "keep-alive timeout mismatch". Replayed over the local model's stored episodes of the dev
//! conversations, the 21 of 65 causes this short moved from 0.47 to 0.60 in similarity to the
//! incident's gold cause (12 read anew: 9 closer, 2 further; docs/EVALUATION.md, "A second
//! look at a thin cause").
//!
//! And when the answer states its cause in so many words ("Root cause: …", "Final: …", "the
//! cause is …", [`stated_cause`]) and the extracted cause shares too little with it: the
//! model wrote an observation, the fix's deploy or the abandoned guess instead.

use crate::episode::Episode;
use crate::extraction::{add_ruled_out, split_off_ruled_out, strip_code_fence, ExtractedEpisode};
use crate::merge::{
    affirms_whole, denied_by_answer, hypothesis_phrase, kept_abandoned, names_a_hypothesis,
    restates_one_of, revived, TurnUpdate,
};
use crate::ranking::terms::{matches_a_term, terms};
use crate::recognition::negation;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashSet;

/// Longest cause the second look may write, in characters.
pub const MAX_RESTATED_CAUSE_CHARS: usize = 300;

/// A cause of at most this many words (alphanumeric runs) is thin: too short to name both
/// what broke and why. In the replay above, causes of up to 5 words gained most, 6–7 words
/// still gained, 8 did not.
pub const THIN_CAUSE_MAX_WORDS: usize = 7;

/// A cause agrees with the cause its answer states ([`stated_cause`]) when at least this
/// share of the words of one of the two is in the other. Over the local model's causes of
/// the revised dev conversations whose answers state one (five live runs, 51 turns), the
/// wrong ones (the abandoned guess, an observation, the fix's deploy) agreed at most 0.31,
/// the right ones at least 0.40 but one (0.31, read again at the cost of one call).
pub const STATED_CAUSE_MIN_AGREEMENT: f64 = 0.35;

/// Labels that open an answer's statement of its cause, at the start of a sentence or line.
const CAUSE_LABELS: &[&str] = &[
    "root cause:",
    "final root cause:",
    "final cause:",
    "cause:",
    "cause confirmed:",
    "root cause confirmed:",
    "confirmed cause:",
    "confirmed root cause:",
    "final:",
    "conclusion:",
    "final conclusion:",
    "revised conclusion:",
    "updated conclusion:",
    "revised root cause:",
    "updated root cause:",
];

/// Phrases after which an answer states its cause, anywhere in a sentence.
const CAUSE_PHRASES: &[&str] = &[
    "the root cause is ",
    "the root cause was ",
    "the cause is ",
    "the cause was ",
    "the real cause is ",
    "the real cause was ",
    "the actual cause is ",
    "the actual cause was ",
    "the real problem is ",
    "the real problem was ",
    "that's the real problem: ",
    "that's the real problem ",
];

/// The cause a final answer states in so many words, as its [`terms`]: the rest of the
/// sentence after its last "Root cause:", "Final:", "Cause:", "Cause confirmed:",
/// "Conclusion:" or "Revised conclusion:" label (markdown bold or not), or after "the cause
/// is", "the real problem was" and the like. `None` when the answer states none (most turns do not), when what follows denies ("the cause was
/// not the deploy"), or when it names fewer than two words.
pub fn stated_cause(answer: &str) -> Option<HashSet<String>> {
    stated_with_terms(answer).map(|(_, stated_terms)| stated_terms)
}

/// The cause `text` states ([`stated_statement`]) with its [`terms`], when it names two words
/// or more.
fn stated_with_terms(text: &str) -> Option<(&str, HashSet<String>)> {
    let stated = stated_statement(text)?;
    let stated_terms = terms(stated);
    (stated_terms.len() >= 2).then_some((stated, stated_terms))
}

/// The cause a text states after a label or a cause phrase ([`stated_cause`]), as written;
/// `None` when it states none or what follows denies.
fn stated_statement(text: &str) -> Option<&str> {
    // ASCII lowercasing keeps byte offsets, so the statement is cut from `text` as written.
    let lower = text.to_ascii_lowercase();
    let at_sentence_start = |i: usize| {
        lower[..i]
            .trim_end_matches([' ', '\t', '*', '-'])
            .chars()
            .last()
            .is_none_or(|c| matches!(c, '.' | '!' | '?' | '\n' | ':' | ';'))
    };
    // A label may close its bold before the colon ("**Root cause**: …"), as markdown
    // answers write it; "**Root cause:** …" is the plain label already.
    let labelled = CAUSE_LABELS.iter().flat_map(|label| {
        let name = label.trim_end_matches(':');
        lower
            .match_indices(name)
            .filter(|(i, _)| at_sentence_start(*i))
            .filter_map(|(i, _)| {
                let after = i + name.len();
                [":", "**:"]
                    .iter()
                    .find(|colon| lower[after..].starts_with(**colon))
                    .map(|colon| after + colon.len())
            })
            .collect::<Vec<_>>()
    });
    let phrased = CAUSE_PHRASES.iter().flat_map(|phrase| {
        lower
            .match_indices(phrase)
            .map(|(i, _)| i + phrase.len())
            .collect::<Vec<_>>()
    });
    let start = labelled.chain(phrased).max()?;
    let rest = text[start..].trim_start();
    let end = rest
        .match_indices(['.', '!', '?', '\n'])
        .map(|(i, _)| i)
        .find(|&i| rest[i + 1..].chars().next().is_none_or(char::is_whitespace))
        .unwrap_or(rest.len());
    let stated = rest[..end].trim();
    let denies =
        stated.to_ascii_lowercase().starts_with("not ") || negation::opens_with_denial(stated);
    (!denies && !stated.is_empty()).then_some(stated)
}

/// `cause` cut to the cause it states after a label or a cause phrase, when it pastes such a
/// statement among other words: a small model copies an answer's "Resolved: the sequence is
/// bigint and past the old limit, and no order saves have failed. Cause: 32-bit id exhausted.
/// Add an alert at 70% …" whole, and the check and the follow-up are no cause. A statement
/// of fewer than two words leaves `cause` whole.
pub fn cut_to_stated(cause: &str) -> &str {
    stated_with_terms(cause).map_or(cause, |(stated, _)| stated)
}

/// How far `cause` agrees with the cause the answer states: the larger of the share of its
/// words in the stated cause and the share of the stated cause's words in it (a short right
/// cause covers a long statement's core, a long one contains a short statement).
pub fn agreement_with_stated(cause: &str, stated: &HashSet<String>) -> f64 {
    let cause_terms = terms(cause);
    let share = |of: &HashSet<String>, within: &HashSet<String>| {
        if of.is_empty() {
            return 0.0;
        }
        let found = of.iter().filter(|w| matches_a_term(w, within)).count();
        found as f64 / of.len() as f64
    };
    share(&cause_terms, stated).max(share(stated, &cause_terms))
}

/// Why an extracted cause gets a second look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DoubtReason {
    /// The cause and the earlier conclusion both affirm a phrase this turn's answer denies.
    KeptAbandoned,
    /// The cause opens by denying something ("the crawler was ruled out (flat rate)").
    Denies,
    /// The cause restates, word for word, a hypothesis the same extraction lists as ruled out.
    RestatesRuledOut,
    /// The cause affirms every word of a hypothesis (of two or more words) the same
    /// extraction lists as ruled out, and says more: "time drift between identity-service
    /// and the relying apps" against "time drift". The guess may be the abandoned one with
    /// words added, or a right cause that names an observation the model misfiled as ruled
    /// out; so, like a thin cause, a restatement replaces it without ruling it out, and
    /// without one it stays.
    AffirmsRuledOut,
    /// The answer states its cause in so many words ("Final: …", "the cause is …") and the
    /// extracted cause shares too little with it ([`STATED_CAUSE_MIN_AGREEMENT`]): the model
    /// wrote an observation, the fix or an earlier guess instead. It may not be wrong as such
    /// (a fix's deploy is true), so a restatement replaces it without ruling it out.
    MissesStatedCause,
    /// The cause is too short to say what broke and why ([`THIN_CAUSE_MAX_WORDS`]). Not a
    /// wrong cause: a restatement replaces it without ruling it out.
    Thin,
}

impl DoubtReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DoubtReason::KeptAbandoned => "kept_abandoned",
            DoubtReason::Denies => "denies",
            DoubtReason::RestatesRuledOut => "restates_ruled_out",
            DoubtReason::AffirmsRuledOut => "affirms_ruled_out",
            DoubtReason::MissesStatedCause => "misses_stated_cause",
            DoubtReason::Thin => "thin",
        }
    }

    /// Whether the doubtful cause is wrong, and so joins `ruled_out` when a reading replaces
    /// it; a thin cause, or one that may only say more than a ruled-out phrase, is not.
    fn refutes_the_cause(self) -> bool {
        !matches!(
            self,
            DoubtReason::Thin | DoubtReason::AffirmsRuledOut | DoubtReason::MissesStatedCause
        )
    }
}

/// A cause worth a second look, and what the answer must not be read as concluding.
#[derive(Debug, Clone, PartialEq)]
pub struct CauseDoubt {
    pub reason: DoubtReason,
    /// The phrases that made the cause doubtful, each as its words: those the turn's answer
    /// denies and the kept cause affirms, those the cause opens by denying, or the ruled-out
    /// hypothesis it restated; none for a thin cause.
    pub ruled_out: Vec<Vec<String>>,
    /// What the answer names as ruled out ("clock drift between servers was investigated and
    /// ruled out"): not named in the question (a right cause may share words with what the
    /// answer denies in passing), but a reading that affirms one is refused.
    pub answer_ruled_out: Vec<Vec<String>>,
}

impl CauseDoubt {
    /// A doubt naming `phrases` (empty and repeated ones dropped), with what `update`'s answer
    /// rules out.
    fn new(
        reason: DoubtReason,
        phrases: impl IntoIterator<Item = Vec<String>>,
        update: &TurnUpdate,
    ) -> CauseDoubt {
        let mut ruled_out: Vec<Vec<String>> = Vec::new();
        for phrase in phrases {
            if !phrase.is_empty() && !ruled_out.contains(&phrase) {
                ruled_out.push(phrase);
            }
        }
        CauseDoubt {
            reason,
            ruled_out,
            answer_ruled_out: update.answer_ruled_out.clone(),
        }
    }

    /// The ruled-out phrases as text, for the prompt.
    pub fn ruled_out_text(&self) -> Vec<String> {
        self.ruled_out
            .iter()
            .map(|phrase| phrase.join(" "))
            .collect()
    }

    /// Every phrase a reading must not affirm: those named and those the answer rules out,
    /// of those that name a hypothesis (two words or more). "Not the schema change"
    /// rules out "schema" (a change is no mechanism), and the cause it concludes ends "… and
    /// long in the schema". The prompt still names it.
    pub fn refused(&self) -> Vec<Vec<String>> {
        let mut refused: Vec<Vec<String>> = Vec::new();
        for phrase in self.ruled_out.iter().chain(&self.answer_ruled_out) {
            if names_a_hypothesis(phrase) && !refused.contains(phrase) {
                refused.push(phrase.clone());
            }
        }
        refused
    }
}

/// Whether `extracted`'s root cause needs a second look before it is merged into `existing`.
/// Only a turn that will become the conclusion is worth the call, and a cause a person set is
/// never the model's abandoned guess.
pub fn doubt(
    existing: Option<&Episode>,
    update: &TurnUpdate,
    extracted: &ExtractedEpisode,
) -> Option<CauseDoubt> {
    let cause = extracted.root_cause.as_deref()?;
    // A person's cause stays whatever the model writes (the turn's is only a proposal).
    if existing.is_some_and(|e| {
        update.turn_index < e.last_turn_index || e.review.human_pinned.contains("root_cause")
    }) {
        return None;
    }
    let earlier = existing.and_then(|e| e.root_cause.as_deref());
    // A guess an earlier turn ruled out, revived while this turn's answer is silent on it: the
    // merge keeps the earlier cause (`merge::revived`). Asking the silent answer for its cause
    // invites another guess (a live run's reading paraphrased the revived one). Unless the
    // answer denies the earlier cause too: then neither is its conclusion, and it has one.
    let revived = existing
        .map(|e| revived(cause, &e.ruled_out, update))
        .unwrap_or_default();
    if !revived.is_empty() {
        let earlier_denied = earlier
            .map(|e| denied_by_answer(e, update))
            .unwrap_or_default();
        if earlier_denied.is_empty() {
            return None;
        }
        let phrases = revived
            .iter()
            .map(|hypothesis| hypothesis_phrase(hypothesis))
            .chain(earlier_denied.into_iter().cloned());
        return Some(CauseDoubt::new(
            DoubtReason::RestatesRuledOut,
            phrases,
            update,
        ));
    }
    let restated: Vec<&String> = extracted
        .ruled_out
        .iter()
        .filter(|hypothesis| restates_one_of(cause, std::slice::from_ref(*hypothesis)))
        .collect();
    let affirmed: Vec<&String> = extracted
        .ruled_out
        .iter()
        .filter(|hypothesis| affirms_whole(cause, hypothesis))
        .collect();
    // What to name as ruled out is what made the cause doubtful, and only that: an answer
    // denies in passing too ("no hourly pattern", "without a timeout"), and a right cause may
    // say those words.
    let (reason, phrases) = if kept_abandoned(earlier, update, extracted) {
        let abandoned = negation::affirmed_whole(&update.answer_denials, cause);
        (
            DoubtReason::KeptAbandoned,
            abandoned.into_iter().cloned().collect(),
        )
    } else if !restated.is_empty() {
        let listed = restated
            .iter()
            .map(|hypothesis| negation::phrase(hypothesis));
        (DoubtReason::RestatesRuledOut, listed.collect())
    } else if negation::opens_with_denial(cause) {
        (DoubtReason::Denies, negation::denied_phrases(cause))
    } else if !affirmed.is_empty() {
        let listed = affirmed
            .iter()
            .map(|hypothesis| hypothesis_phrase(hypothesis));
        (DoubtReason::AffirmsRuledOut, listed.collect())
    } else if update
        .answer_stated_cause
        .as_ref()
        .is_some_and(|stated| agreement_with_stated(cause, stated) < STATED_CAUSE_MIN_AGREEMENT)
    {
        (DoubtReason::MissesStatedCause, Vec::new())
    } else if is_thin(cause) {
        // Nothing named as ruled out: the extraction's own `ruled_out` list, named in the
        // prompt, made the model's readings worse in the replay (0.52 against 0.60).
        (DoubtReason::Thin, Vec::new())
    } else {
        return None;
    };
    Some(CauseDoubt::new(reason, phrases, update))
}

/// A cause of at most [`THIN_CAUSE_MAX_WORDS`] words.
pub fn is_thin(cause: &str) -> bool {
    cause
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .nth(THIN_CAUSE_MAX_WORDS)
        .is_none()
}

/// `extracted` with `cause`, the second look's reading, as its root cause. The doubtful
/// cause it replaces joins `ruled_out` (the abandoned guess, or the denial), unless it restates
/// a hypothesis listed there already; a thin cause does not (it was the same conclusion, said
/// too briefly), nor does one that only affirmed a ruled-out phrase among other words. `None` when the reading is the extracted cause again, up to case and
/// punctuation: there is nothing to replace.
pub fn restated(
    extracted: &ExtractedEpisode,
    reason: DoubtReason,
    cause: String,
) -> Option<ExtractedEpisode> {
    let words = crate::poisoning::words;
    // A reading copies the answer's "Cause: X; Y ruled out" line, or its whole labelled
    // statement among the check and the follow-up, as readily as the extraction.
    let (cause, ruled_out_clauses) = split_off_ruled_out(cut_to_stated(&cause));
    if extracted
        .root_cause
        .as_deref()
        .is_some_and(|doubtful| words(doubtful) == words(&cause))
    {
        return None;
    }
    let mut out = extracted.clone();
    if let Some(doubtful) = out.root_cause.replace(cause) {
        if reason.refutes_the_cause() && !restates_one_of(&doubtful, &out.ruled_out) {
            out.ruled_out.push(doubtful);
        }
    }
    for clause in ruled_out_clauses {
        add_ruled_out(&mut out.ruled_out, clause);
    }
    Some(out)
}

/// What the second look must return.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RestatedCause {
    /// The cause the answer concludes, in one sentence; `null` when it names none.
    #[schemars(length(max = MAX_RESTATED_CAUSE_CHARS))]
    pub root_cause: Option<String>,
}

/// What a rejected second-look reply is asked for. A reply that repeats it wrote no cause:
/// the bundled 1.5B model answered a repair with "write the cause it concludes instead, or
/// null" as the root cause (inc-dev-015 of the dev conversations, thirty-seventh session).
const WRITE_THE_CAUSE: &str = "write the cause the answer concludes, or null";
const WRITE_ANOTHER_CAUSE: &str = "write the cause it concludes instead, or null";

/// The problem of a reply that repeats the instructions: the repair's (checked here) or the
/// second look's system message (checked by the LLM client, which holds it).
pub fn repeats_the_instructions() -> String {
    format!("`root_cause` repeats the instructions: {WRITE_THE_CAUSE}")
}

impl RestatedCause {
    /// The strict JSON schema of the reply (OpenAI structured outputs).
    pub fn json_schema() -> Value {
        crate::schema::strict_schema::<RestatedCause>()
    }

    /// Parses and checks a reply given what the answer rules out. The error lists every
    /// problem, worded for the repair prompt.
    pub fn parse(reply: &str, ruled_out: &[Vec<String>]) -> Result<Option<String>, Vec<String>> {
        let parsed: RestatedCause = serde_json::from_str(strip_code_fence(reply))
            .map_err(|e| vec![format!("the reply is not the requested JSON object: {e}")])?;
        let Some(cause) = parsed
            .root_cause
            .map(|c| c.trim().to_owned())
            .filter(|c| !c.is_empty() && !c.eq_ignore_ascii_case("null"))
        else {
            return Ok(None);
        };
        let mut problems = Vec::new();
        if cause.chars().count() > MAX_RESTATED_CAUSE_CHARS {
            problems.push(format!(
                "`root_cause` is longer than {MAX_RESTATED_CAUSE_CHARS} characters"
            ));
        }
        if [WRITE_THE_CAUSE, WRITE_ANOTHER_CAUSE]
            .iter()
            .any(|instruction| crate::poisoning::leaks(instruction, &cause))
        {
            problems.push(repeats_the_instructions());
        } else if negation::only_denies(&cause).is_some() {
            problems.push(format!(
                "`root_cause` only says what was ruled out: {WRITE_THE_CAUSE}"
            ));
        }
        for phrase in negation::affirmed_whole(ruled_out, &cause) {
            problems.push(format!(
                "`root_cause` names `{}`, which the answer rules out: {WRITE_ANOTHER_CAUSE}",
                phrase.join(" ")
            ));
        }
        if problems.is_empty() {
            Ok(Some(cause))
        } else {
            Err(problems)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::merge_turn;
    use chrono::Utc;

    fn update(turn_index: u32, answer: &str) -> TurnUpdate {
        crate::testing::answered_turn("conv", turn_index, answer)
    }

    fn with_cause(cause: &str, ruled_out: &[&str]) -> ExtractedEpisode {
        ExtractedEpisode {
            root_cause: Some(cause.to_owned()),
            resolved: true,
            issue_type: "certificate-expiry".to_owned(),
            issue_description: "syncs fail".to_owned(),
            components: Vec::new(),
            key_findings: Vec::new(),
            ruled_out: ruled_out.iter().map(|s| (*s).to_owned()).collect(),
            summary: "syncs failed".to_owned(),
        }
    }

    fn episode_with_cause(cause: &str) -> Episode {
        merge_turn(
            None,
            &update(1, "first look"),
            &with_cause(cause, &[]),
            Utc::now(),
        )
        .expect("a new conversation merges")
    }

    #[test]
    fn an_abandoned_guess_kept_by_the_model_is_doubted_with_what_the_answer_denies() {
        let earlier = episode_with_cause("clock skew on the API server");
        let answer = "Resolved. Cause: expired webhook certificate; clock skew ruled out.";
        let skew = doubt(
            Some(&earlier),
            &update(2, answer),
            &with_cause("clock skew on the API server", &[]),
        )
        .expect("the kept guess is doubted");
        assert_eq!(skew.reason, DoubtReason::KeptAbandoned);
        assert_eq!(skew.ruled_out_text(), vec!["clock skew".to_owned()]);

        // What the answer denies in passing is not named: a right cause may say it.
        let earlier = episode_with_cause("the LDAP backend is out of capacity");
        let answer = "It isn't LDAP capacity: the searches ran without a timeout.";
        let capacity = doubt(
            Some(&earlier),
            &update(2, answer),
            &with_cause("the LDAP backend is out of capacity", &[]),
        )
        .expect("the kept guess is doubted");
        assert_eq!(capacity.ruled_out_text(), vec!["ldap capacity".to_owned()]);
    }

    #[test]
    fn a_cause_that_denies_or_restates_a_ruled_out_hypothesis_is_doubted() {
        let answer = "Fixed: synchronized TTL expiry. The crawler was ruled out (flat rate).";
        let denies = doubt(
            None,
            &update(1, answer),
            &with_cause("The crawler was ruled out (flat rate).", &[]),
        )
        .expect("a denial written as the cause is doubted");
        assert_eq!(denies.reason, DoubtReason::Denies);
        assert_eq!(denies.ruled_out_text(), vec!["crawler".to_owned()]);

        let restates = doubt(
            None,
            &update(1, "It was the pool."),
            &with_cause("network issue", &["network issue"]),
        )
        .expect("a cause listed as ruled out is doubted");
        assert_eq!(restates.reason, DoubtReason::RestatesRuledOut);
        assert_eq!(restates.ruled_out_text(), vec!["network issue".to_owned()]);
    }

    #[test]
    fn a_cause_that_affirms_a_ruled_out_phrase_among_more_words_is_read_again_not_refuted() {
        let answer = "Recovered. Final: key retirement removed a signing key still in use. \
                      Clock drift between servers was investigated first and ruled out.";
        let guess = with_cause(
            "time drift between identity-service and the relying apps",
            &["time drift"],
        );
        let doubted = doubt(None, &update(3, answer), &guess).expect("the cause is doubted");
        assert_eq!(doubted.reason, DoubtReason::AffirmsRuledOut);
        assert_eq!(doubted.ruled_out_text(), vec!["time drift".to_owned()]);

        // A reading replaces it, and the extra words may have been the conclusion: the
        // doubtful cause is not listed as ruled out.
        let reading = "key retirement removed a signing key still in use";
        let out = restated(&guess, doubted.reason, reading.to_owned()).expect("a new reading");
        assert_eq!(out.root_cause.as_deref(), Some(reading));
        assert_eq!(out.ruled_out, vec!["time drift".to_owned()]);

        // Without a reading the merge stores it: only a word-for-word copy is refused.
        let merged =
            merge_turn(None, &update(3, answer), &guess, Utc::now()).expect("a turn merges");
        assert_eq!(merged.root_cause, guess.root_cause);

        // A hypothesis listed as its own denial is the phrase it denies.
        let listed_as_denial = with_cause(
            "clock skew on the API server broke token checks",
            &["clock skew was ruled out"],
        );
        let doubted = doubt(None, &update(2, answer), &listed_as_denial).expect("doubted");
        assert_eq!(doubted.reason, DoubtReason::AffirmsRuledOut);
        assert_eq!(doubted.ruled_out_text(), vec!["clock skew".to_owned()]);

        // One ruled-out word is too little to doubt a cause that mentions it.
        let pool = with_cause(
            "leaked connections exhausted the pool of cart-api",
            &["pool"],
        );
        let stated = "Final: leaked connections exhausted the pool. The pool size was fine.";
        assert_eq!(doubt(None, &update(1, stated), &pool), None);
    }

    #[test]
    fn a_guess_an_earlier_turn_ruled_out_revived_in_silence_gets_no_second_look() {
        let guess = "an upstream schema change the feature join handles badly, dropping rows";
        let mut earlier = episode_with_cause("the producer's 32-bit id counter wrapped");
        earlier.ruled_out = vec![guess.to_owned()];
        let silent = "Joined rows are back to 41M a day; the overflow explanation fits the logs.";
        let revived = with_cause(guess, &[]);
        assert_eq!(doubt(Some(&earlier), &update(2, silent), &revived), None);
        // Nor when the revived guess is thin.
        let mut thin = earlier.clone();
        thin.ruled_out = vec!["an upstream schema change".to_owned()];
        let thin_guess = with_cause("An upstream schema change.", &[]);
        assert_eq!(doubt(Some(&thin), &update(2, silent), &thin_guess), None);
        let merged = merge_turn(Some(&earlier), &update(2, silent), &revived, Utc::now())
            .expect("a newer turn merges");
        assert_eq!(merged.root_cause, earlier.root_cause);
    }

    #[test]
    fn a_revived_guess_gets_a_second_look_when_the_answer_denies_the_earlier_cause_too() {
        // inc-dev-046: the first turn's guess is the cause, the model lists an observation as
        // ruled out; the second answer denies the guess and concludes something else, and the
        // model revives the observation. Neither is the answer's conclusion.
        let mut earlier = episode_with_cause(
            "S3 consistency issue: the registry read the object between the two writes",
        );
        earlier.ruled_out = vec!["airflow worker inconsistencies".to_owned()];
        let answer = "Right, not a consistency issue. A backfill run and the scheduled run \
                      ran at the same time (max_active_runs unset) and both took version 42.";
        let revived = with_cause(
            "airflow worker inconsistencies",
            &["airflow worker inconsistencies"],
        );
        let doubted =
            doubt(Some(&earlier), &update(2, answer), &revived).expect("the revival is doubted");
        assert_eq!(doubted.reason, DoubtReason::RestatesRuledOut);
        assert_eq!(
            doubted.ruled_out_text(),
            vec![
                "airflow worker inconsistencies".to_owned(),
                "consistency issue".to_owned()
            ]
        );
        let reading = r#"{"root_cause":"a backfill and the scheduled run overlapped and both took version 42"}"#;
        assert!(matches!(
            RestatedCause::parse(reading, &doubted.refused()),
            Ok(Some(_))
        ));
        let s3 = r#"{"root_cause":"an S3 consistency issue between the two writes"}"#;
        assert!(RestatedCause::parse(s3, &doubted.refused()).is_err());

        // Without a reading the merge keeps neither: the answer denies the earlier cause.
        let merged = merge_turn(Some(&earlier), &update(2, answer), &revived, Utc::now())
            .expect("a newer turn merges");
        assert_eq!(merged.root_cause, None);
        assert!(merged
            .ruled_out
            .iter()
            .any(|h| h.starts_with("S3 consistency issue")));
    }

    #[test]
    fn a_plain_conclusion_an_older_turn_or_a_persons_cause_gets_no_second_look() {
        let answer = "Root cause: LDAP calls without a timeout. It isn't LDAP capacity.";
        let earlier = episode_with_cause("the LDAP backend is out of capacity");
        let new_cause = with_cause("LDAP calls without a timeout held every thread", &[]);
        assert_eq!(doubt(Some(&earlier), &update(2, answer), &new_cause), None);

        let kept = with_cause("the LDAP backend is out of capacity", &[]);
        let mut later = earlier.clone();
        later.last_turn_index = 3;
        assert_eq!(doubt(Some(&later), &update(2, answer), &kept), None);

        let mut pinned = earlier.clone();
        pinned.review.human_pinned.insert("root_cause".to_owned());
        assert_eq!(doubt(Some(&pinned), &update(2, answer), &kept), None);
        assert!(doubt(Some(&earlier), &update(2, answer), &kept).is_some());

        let mut no_cause = with_cause("", &[]);
        no_cause.root_cause = None;
        assert_eq!(doubt(Some(&earlier), &update(2, answer), &no_cause), None);
    }

    #[test]
    fn one_word_the_answer_rules_out_does_not_refuse_a_reading_that_mentions_it() {
        // inc-dev-066: the answer's "Not the schema change" rules out "schema" (a change is
        // no mechanism); the cause it concludes mentions the schema the fix touches.
        let guess = "An upstream schema change in the join schema dropped rows";
        let earlier = episode_with_cause(guess);
        let answer = "Not the schema change. Since 06:41 yesterday the producer's event ids \
                      are negative: a 32-bit counter wrapped. Fix: int64 ids in the producer \
                      and long in the schema.";
        let doubted = doubt(Some(&earlier), &update(2, answer), &with_cause(guess, &[]))
            .expect("the kept guess is doubted");
        assert_eq!(doubted.reason, DoubtReason::KeptAbandoned);
        assert_eq!(doubted.ruled_out_text(), vec!["schema".to_owned()]);
        assert_eq!(doubted.answer_ruled_out, vec![vec!["schema".to_owned()]]);
        let reading = r#"{"root_cause":"the producer's 32-bit event id counter wrapped negative; the fix is long in the schema"}"#;
        assert_eq!(
            RestatedCause::parse(reading, &doubted.refused()).map(|c| c.is_some()),
            Ok(true),
            "{doubted:?}"
        );
        // Two words or more still refuse a reading that affirms them.
        let answer = "Not an upstream schema change: a 32-bit counter wrapped.";
        let doubted = doubt(Some(&earlier), &update(2, answer), &with_cause(guess, &[]))
            .expect("the kept guess is doubted");
        let revived = r#"{"root_cause":"an upstream schema change dropped rows"}"#;
        assert!(RestatedCause::parse(revived, &doubted.refused()).is_err());
    }

    #[test]
    fn a_restated_cause_must_conclude_something_the_answer_does_not_rule_out() {
        let ruled_out = vec![vec!["clock".to_owned(), "skew".to_owned()]];
        assert_eq!(
            RestatedCause::parse(
                r#"{"root_cause":" the webhook certificate expired "}"#,
                &ruled_out
            ),
            Ok(Some("the webhook certificate expired".to_owned()))
        );
        assert_eq!(
            RestatedCause::parse(r#"{"root_cause":null}"#, &ruled_out),
            Ok(None)
        );
        let affirmed =
            RestatedCause::parse(r#"{"root_cause":"clock skew on the API"}"#, &ruled_out)
                .expect_err("the ruled-out guess is refused");
        assert!(affirmed[0].contains("`clock skew`"), "{affirmed:?}");
        let denial = RestatedCause::parse(r#"{"root_cause":"clock skew was ruled out"}"#, &[])
            .expect_err("a denial is no cause");
        assert!(denial[0].contains("only says"), "{denial:?}");
        let echo = RestatedCause::parse(
            r#"{"root_cause":"Write the cause it concludes instead, or null."}"#,
            &ruled_out,
        )
        .expect_err("the repair's own words are no cause");
        assert!(echo[0].contains("repeats the instructions"), "{echo:?}");
        let long = format!(r#"{{"root_cause":"{}"}}"#, "x".repeat(301));
        assert!(RestatedCause::parse(&long, &[]).is_err());
        assert!(RestatedCause::parse("not json", &[]).is_err());
    }

    #[test]
    fn the_restated_cause_replaces_the_doubtful_one_which_joins_ruled_out() {
        let doubtful = with_cause("clock skew on the API server", &["a bad deploy"]);
        let out = restated(
            &doubtful,
            DoubtReason::KeptAbandoned,
            "the webhook certificate expired".to_owned(),
        )
        .expect("a new reading");
        assert_eq!(
            out.root_cause.as_deref(),
            Some("the webhook certificate expired")
        );
        assert_eq!(
            out.ruled_out,
            vec![
                "a bad deploy".to_owned(),
                "clock skew on the API server".to_owned()
            ]
        );

        let listed = with_cause("network issue", &["network issue"]);
        let out = restated(
            &listed,
            DoubtReason::RestatesRuledOut,
            "the pool was exhausted".to_owned(),
        )
        .expect("a new reading");
        assert_eq!(out.ruled_out, vec!["network issue".to_owned()]);
    }

    #[test]
    fn a_thin_cause_is_doubted_and_its_fuller_reading_replaces_it_without_ruling_it_out() {
        assert!(is_thin("keep-alive timeout mismatch"));
        assert!(is_thin("the LDAP backend is out of capacity"));
        assert!(!is_thin(
            "the log-router systemd unit never set LimitNOFILE"
        ));

        let answer = "Root cause: the backend closed idle keep-alive sockets after 5 s while \
                      the balancer reused them for 60 s. The proxy deploy was not it.";
        let thin = with_cause("keep-alive timeout mismatch", &["the proxy deploy"]);
        let doubted = doubt(None, &update(1, answer), &thin).expect("a thin cause is doubted");
        assert_eq!(doubted.reason, DoubtReason::Thin);
        assert!(doubted.ruled_out.is_empty());

        let fuller = "The backend closed idle keep-alive sockets before the balancer stopped \
                      reusing them";
        let out = restated(&thin, DoubtReason::Thin, fuller.to_owned()).expect("a fuller reading");
        assert_eq!(out.root_cause.as_deref(), Some(fuller));
        assert_eq!(out.ruled_out, vec!["the proxy deploy".to_owned()]);

        assert_eq!(
            restated(
                &thin,
                DoubtReason::Thin,
                "Keep-alive timeout mismatch.".to_owned()
            ),
            None,
            "the same words read back replace nothing"
        );
        assert_eq!(
            restated(
                &with_cause("clock skew on the API server", &[]),
                DoubtReason::KeptAbandoned,
                "Clock skew on the API server".to_owned()
            ),
            None,
            "nor is a doubtful cause read back ruled out and kept at once"
        );

        let full = with_cause("the log-router systemd unit never set LimitNOFILE", &[]);
        let stated = "Root cause: the log-router unit never set LimitNOFILE, so it ran with \
                      1,024 descriptors.";
        assert_eq!(doubt(None, &update(1, stated), &full), None);
    }

    #[test]
    fn an_answer_states_its_cause_after_a_label_or_a_cause_phrase() {
        let words = |text: &str| Some(terms(text));
        assert_eq!(
            stated_cause(
                "Fixed. 502s are gone.\n\nFinal: the Node.js server dropped idle keep-alive \
                 sockets at 5 s. Target deregistration was ruled out."
            ),
            words("the Node.js server dropped idle keep-alive sockets at 5 s")
        );
        assert_eq!(
            stated_cause("Not LDAP. That's the real problem: the client has no timeout."),
            words("the client has no timeout")
        );
        // The last statement wins; a decimal point ends no sentence.
        assert_eq!(
            stated_cause(
                "Cause: a slow disk. Later: the cause was a 1.5 GB heap that is too small."
            ),
            words("a 1.5 GB heap that is too small")
        );
        // A confirmation states it too (inc-dev-057's last turn).
        assert_eq!(
            stated_cause(
                "Resolved: heap steady at 1.4 GB. Cause confirmed: unbounded price cache."
            ),
            words("unbounded price cache")
        );
        // Markdown bold on either side of the colon, and a revised conclusion.
        assert_eq!(
            stated_cause(
                "Checked the pool.\n\n**Root cause**: leaked connections on the error path."
            ),
            words("leaked connections on the error path")
        );
        assert_eq!(
            stated_cause("**Root cause:** leaked connections on the error path."),
            words("leaked connections on the error path")
        );
        assert_eq!(
            stated_cause(
                "Not the database. Revised conclusion: the tax client has no read timeout."
            ),
            words("the tax client has no read timeout")
        );
        // A label inside a sentence, a denial, or a single word states nothing.
        assert_eq!(
            stated_cause("My likely cause: clock skew on the hosts."),
            None
        );
        assert_eq!(stated_cause("The cause was not the deploy."), None);
        assert_eq!(stated_cause("Root cause: DNS."), None);
        assert_eq!(stated_cause("Still investigating the 502s."), None);
    }

    #[test]
    fn a_cause_pasting_a_labelled_statement_is_cut_to_it() {
        // inc-dev-062's last turn, read again: the whole answer came back as the cause.
        let pasted = "The sequence is bigint and past the old limit, and no order saves have \
                      failed in the last hour. Cause: 32-bit id exhausted. Add an alert at 70% \
                      of each id column's type range.";
        assert_eq!(cut_to_stated(pasted), "32-bit id exhausted");
        let thin = with_cause("32-bit id exhausted", &[]);
        assert_eq!(restated(&thin, DoubtReason::Thin, pasted.to_owned()), None);
        assert_eq!(
            cut_to_stated("the root cause is a missing index on orders, added back at 10:02"),
            "a missing index on orders, added back at 10:02"
        );
        // No statement, one word, or a denial after the label: the cause stays whole.
        for whole in [
            "a missing index on orders",
            "Lock contention. Root cause: DNS.",
            "Root cause: not the deploy; the config push at 10:42",
        ] {
            assert_eq!(cut_to_stated(whole), whole);
        }
    }

    #[test]
    fn a_cause_that_misses_the_one_the_answer_states_is_read_again_not_refuted() {
        // inc-dev-008's last turn: the model wrote the fix's deploy as the cause.
        let answer = "Fixed: 502s dropped to zero after the deploy.\n\nFinal: checkout-api's \
                      Node.js server dropped idle keep-alive sockets at its 5 s default, but the \
                      ALB keeps reusing backend sockets for up to 60 s.";
        let deploy = with_cause(
            "keepAliveTimeout=65000 / headersTimeout=66000 went out last Monday",
            &[],
        );
        let doubted = doubt(None, &update(3, answer), &deploy).expect("the cause is doubted");
        assert_eq!(doubted.reason, DoubtReason::MissesStatedCause);
        assert!(doubted.ruled_out.is_empty());
        let reading = "the Node.js server closed idle keep-alive sockets at 5 s while the ALB \
                       reused them for 60 s";
        let out = restated(&deploy, doubted.reason, reading.to_owned()).expect("a reading");
        assert_eq!(out.root_cause.as_deref(), Some(reading));
        assert!(out.ruled_out.is_empty(), "a true deploy is not ruled out");

        // A cause in other words that still shares the statement's core agrees with it.
        let agrees = with_cause(
            "keep-alive sockets closed by Node.js before the ALB's idle timeout",
            &[],
        );
        assert_eq!(doubt(None, &update(3, answer), &agrees), None);
        assert!(
            agreement_with_stated(
                "keepAliveTimeout=65000 / headersTimeout=66000 went out last Monday",
                &stated_cause(answer).expect("stated")
            ) < STATED_CAUSE_MIN_AGREEMENT
        );
    }

    #[test]
    fn the_reply_schema_is_strict_and_bounded() {
        let schema = RestatedCause::json_schema();
        assert_eq!(schema["additionalProperties"], Value::Bool(false));
        assert_eq!(
            schema["properties"]["root_cause"]["maxLength"],
            Value::from(MAX_RESTATED_CAUSE_CHARS)
        );
    }
}
