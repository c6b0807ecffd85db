//! Ruled-out items the turn's own answer affirms.
//!
//! `ruled_out` is for the hypotheses a conversation abandoned. A small model also files the
//! answer's own statements there: a finding ("checkout-db: query p99 went from ~40 ms to
//! ~460 ms"), the fix, even the conclusion ("the 3-minute failover produced errors, the apps
//! responded by multiplying their traffic ~6x, and that retry load has kept cart-db …
//! saturated"; "tax-calculator HTTP client has no read timeout" next to the same cause). Stored,
//! such an item tells the next agent that the cause was ruled out (a `possible` lead's check
//! names what was), and it misleads the rules that read `ruled_out`: the second look takes a
//! cause it restates for a revived guess ([`crate::second_look`]), the type look renames a
//! type the conclusion names ([`crate::type_look`]). Over the local model's run on the 25
//! revised dev conversations, 6 of 25 episodes kept an item naming their own cause.
//!
//! So before those rules an item goes when this turn's answer affirms it and denies nothing
//! of it ([`affirmed_items`]):
//! - it copies [`crate::poisoning::LEAK_WINDOW`] consecutive words of a sentence of the answer that affirms
//!   (`affirms`: "the cache has no maximumSize or expiry" affirms what was missing; "I first
//!   suspected X, but the CDN doesn't cache it", "GC is also ruled out: pauses stay around
//!   30 ms" and "the DB latency was a side effect" keep their items),
//! - or it names the cause the answer states in so many words ("Final: …",
//!   [`crate::second_look::stated_cause`]): [`STATED_SHARE`] of its words or more.
//!
//! An item is always kept when the answer rules it out in its own words ("client caching ruled
//! out"), when it is written as a denial ("DDoS ruled out"), or when it is too short to name a
//! hypothesis (one word).

use crate::extraction::ExtractedEpisode;
use crate::merge::{names_a_hypothesis, TurnUpdate};
use crate::poisoning::{sentences, words, CopyGuard};
use crate::ranking::terms::{matches_a_term, terms};
use crate::recognition::negation;
use std::collections::HashSet;

/// The share of an item's words that must be in the answer's stated cause for the item to
/// name it: the conclusion filed as ruled out repeats it nearly whole ("tax-calculator HTTP
/// client has no read timeout" in "unbounded waits on the tax-calculator HTTP client (no read
/// timeout, shared request pool)"), while a hypothesis the statement mentions in passing
/// ("Cause: stale reads from lagging replicas; client caching ruled out" against "client-side
/// caching of the cart response") shares a few words.
pub const STATED_SHARE: f64 = 0.8;

/// Removes from `extracted.ruled_out` the items this turn's `answer` affirms (module doc) and
/// returns them, in their order.
pub fn drop_affirmed(
    extracted: &mut ExtractedEpisode,
    answer: &str,
    update: &TurnUpdate,
) -> Vec<String> {
    let affirmed = affirmed_items(&extracted.ruled_out, answer, update);
    extracted.ruled_out.retain(|item| !affirmed.contains(item));
    affirmed
}

/// The items of `ruled_out` this turn's `answer` affirms (module doc).
pub fn affirmed_items(ruled_out: &[String], answer: &str, update: &TurnUpdate) -> Vec<String> {
    // The answer's affirming sentences, searched for copies like untrusted text is.
    let affirming = CopyGuard::new(sentences(answer).into_iter().filter(|s| affirms(s)));
    ruled_out
        .iter()
        .filter(|item| names_a_hypothesis(&negation::phrase(item)))
        // Written as a denial ("DDoS ruled out"), it is one, whatever the answer affirms.
        .filter(|item| negation::ruled_out_subjects(item).is_empty())
        .filter(|item| !ruled_out_by(item, update))
        .filter(|item| {
            affirming.copies(item)
                || update
                    .answer_stated_cause
                    .as_ref()
                    .is_some_and(|stated| names_stated(item, stated))
        })
        .cloned()
        .collect()
}

/// Words that tell a hypothesis or what something was instead of the cause rather than a
/// finding ("I first suspected …", "my first guess is …", "I was wrong to blame …", "the DB
/// latency was a side effect"), as prefixes of a sentence's words.
const HYPOTHESIS_WORDS: &[&str] = &[
    "suspect",
    "guess",
    "thought",
    "hypothes",
    "assum",
    "blam",
    "initial",
    "wrong",
    "idea",
    "side",
    "consequen",
    "symptom",
    "herring",
    "collateral",
    "downstream",
];

/// Whether a sentence of the answer affirms what it says: it rules out no hypothesis
/// ([`negation::ruled_out_subjects`]: "this isn't a sizing problem") and does not talk of
/// ruling out ("GC is also ruled out: pauses stay around 30 ms") nor tell a hypothesis
/// ([`HYPOTHESIS_WORDS`]). What a sentence says was missing ("the cache has no maximumSize",
/// "nginx never reopened its log") is a finding or the cause, affirmed.
fn affirms(sentence: &str) -> bool {
    let sentence_words = words(sentence);
    let rules_out = sentence_words.windows(2).any(|pair| {
        matches!(pair[0].as_str(), "rule" | "rules" | "ruled" | "ruling") && pair[1] == "out"
    });
    !rules_out
        && negation::ruled_out_subjects(sentence).is_empty()
        && !sentence_words.iter().any(|word| {
            HYPOTHESIS_WORDS
                .iter()
                .any(|marker| word.starts_with(marker))
        })
}

/// Whether the answer rules out, in its own words, a hypothesis of two words or more that
/// `item` affirms whole ("client caching" in "client-side caching of the cart response"). What
/// the answer says was missing ("no read timeout") is no hypothesis it rejects.
fn ruled_out_by(item: &str, update: &TurnUpdate) -> bool {
    let item_terms = terms(item);
    update
        .answer_ruled_out
        .iter()
        .filter(|phrase| names_a_hypothesis(phrase))
        .any(|phrase| phrase.iter().all(|word| matches_a_term(word, &item_terms)))
}

/// Whether [`STATED_SHARE`] or more of `item`'s words are in the stated cause.
fn names_stated(item: &str, stated: &HashSet<String>) -> bool {
    let item_terms = terms(item);
    if item_terms.is_empty() {
        return false;
    }
    let named = item_terms
        .iter()
        .filter(|word| matches_a_term(word, stated))
        .count();
    named as f64 >= STATED_SHARE * item_terms.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::turn_event;

    fn answered(answer: &str) -> TurnUpdate {
        let mut event = turn_event("conv-affirmed", 2);
        event.final_answer = answer.to_owned();
        TurnUpdate::from_event(&event)
    }

    fn items(texts: &[&str]) -> Vec<String> {
        texts.iter().map(|t| (*t).to_owned()).collect()
    }

    #[test]
    fn a_finding_or_the_conclusion_copied_from_an_affirming_sentence_is_not_ruled_out() {
        let answer = "The DBA is right that this isn't a sizing problem. The number of active \
            users is normal. The 3-minute failover produced errors, the apps responded by \
            multiplying their traffic ~6x, and that retry load has kept cart-db saturated.";
        let ruled_out = items(&[
            "the 3-minute failover produced errors, the apps responded by multiplying their traffic ~6x",
            "database sizing problem",
            "a sizing problem: the DBA is right that this isn't it",
        ]);
        assert_eq!(
            affirmed_items(&ruled_out, answer, &answered(answer)),
            vec![ruled_out[0].clone()]
        );
    }

    #[test]
    fn a_copy_of_what_the_answer_says_was_missing_is_no_ruled_out_hypothesis() {
        let answer = "The key is (sku, promo_code) and the promotion issues per-customer promo \
            codes, so the key space exploded and the cache has no maximumSize or expiry.";
        let ruled_out = items(&["the key space exploded and the cache has no maximumSize"]);
        assert_eq!(
            affirmed_items(&ruled_out, answer, &answered(answer)),
            ruled_out
        );
    }

    #[test]
    fn a_copy_of_a_sentence_that_rules_out_or_names_a_side_effect_stays() {
        let answer = "GC is also ruled out: pauses stay around 30 ms p99 and heap is about half \
            used. The DB latency was a side effect of the backlog.";
        let ruled_out = items(&[
            "GC is also ruled out: pauses stay around 30 ms p99",
            "database latency was a side effect of the backlog",
        ]);
        assert!(affirmed_items(&ruled_out, answer, &answered(answer)).is_empty());
    }

    #[test]
    fn a_copy_of_a_sentence_telling_a_hypothesis_stays() {
        let answer = "I first suspected client-side caching of the cart response, but the CDN \
            doesn't cache /api/cart at all.";
        let ruled_out = items(&["client-side caching of the cart response"]);
        assert!(affirmed_items(&ruled_out, answer, &answered(answer)).is_empty());
    }

    #[test]
    fn an_item_naming_the_stated_cause_goes_and_one_the_statement_rules_out_stays() {
        let answer = "Done, the breaker holds.\n\nFinal: unbounded waits on the tax-calculator \
            HTTP client (no read timeout, shared request pool) starved every endpoint.";
        let ruled_out = items(&[
            "tax-calculator HTTP client has no read timeout",
            "GC pauses",
        ]);
        assert_eq!(
            affirmed_items(&ruled_out, answer, &answered(answer)),
            vec![ruled_out[0].clone()]
        );

        let answer = "Cause: stale reads from lagging replicas; client caching ruled out.";
        let ruled_out = items(&["client-side caching of the cart response", "client caching"]);
        assert!(affirmed_items(&ruled_out, answer, &answered(answer)).is_empty());

        // An item written as a denial stays, though the statement repeats it (inc-dev-036).
        let answer = "Resolved: 429s back to baseline. Cause: staging config applied \
            globally; DDoS ruled out.";
        let ruled_out = items(&["DDoS ruled out"]);
        assert!(affirmed_items(&ruled_out, answer, &answered(answer)).is_empty());
    }

    #[test]
    fn a_one_word_item_is_kept_whatever_the_answer_says() {
        let answer = "Root cause: DNS caching in the JVM kept the old address forever.";
        let ruled_out = items(&["DNS"]);
        assert!(affirmed_items(&ruled_out, answer, &answered(answer)).is_empty());
    }

    #[test]
    fn dropping_keeps_the_other_items_in_order() {
        let answer = "The heap holds 41 million PriceKey/Quote pairs in one cache. Promo-engine \
            latency was a consequence, not the cause.";
        let mut extracted = ExtractedEpisode {
            root_cause: Some("an unbounded price cache".into()),
            resolved: true,
            issue_type: "heap-exhaustion".into(),
            issue_description: "pricing slowed, then its JVMs crashed".into(),
            components: vec![],
            key_findings: vec![],
            ruled_out: items(&[
                "promo-engine latency",
                "the heap holds 41 million PriceKey/Quote pairs in one cache",
                "network partition between zones",
            ]),
            summary: "an unbounded cache filled the heap".into(),
        };
        let dropped = drop_affirmed(&mut extracted, answer, &answered(answer));
        assert_eq!(
            dropped,
            vec!["the heap holds 41 million PriceKey/Quote pairs in one cache"]
        );
        assert_eq!(
            extracted.ruled_out,
            vec!["promo-engine latency", "network partition between zones"]
        );
    }
}
