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
//! - it copies [`crate::poisoning::LEAK_WINDOW`] consecutive words of a sentence of the answer,
//!   or of the part of one after a "but" (`contrasted_parts`), that affirms (`affirms`: "the
//!   cache has no maximumSize or expiry" affirms what was missing; "I first
//!   suspected X, but the CDN doesn't cache it", "GC is also ruled out: pauses stay around
//!   30 ms" and "the DB latency was a side effect" keep their items),
//! - or it names the cause the answer states in so many words ("Final: …",
//!   [`crate::second_look::stated_cause`]): [`STATED_SHARE`] of its words or more,
//! - or it restates the turn's extracted cause or the stored one while the answer revises
//!   nothing (`revises`, `copies_the_conclusion`): the model filed the standing
//!   conclusion in both fields, and the second look, told it was ruled out, would read a
//!   symptom as the cause instead.
//!
//! An item is always kept when the answer rules it out in its own words ("client caching ruled
//! out"), when it is written as a denial ("DDoS ruled out"), or when it is too short to name a
//! hypothesis (one word).

use crate::episode::Episode;
use crate::extraction::ExtractedEpisode;
use crate::merge::{names_a_hypothesis, restates_one_of, TurnUpdate};
use crate::poisoning::{sentences, words, CopyGuard};
use crate::ranking::terms::{matches_a_term, terms};
use crate::recognition::negation;
use crate::second_look::{agreement_with_stated, STATED_CAUSE_MIN_AGREEMENT};
use std::collections::HashSet;

/// The share of an item's words that must be in the answer's stated cause for the item to
/// name it: the conclusion filed as ruled out repeats it nearly whole ("tax-calculator HTTP
/// client has no read timeout" in "unbounded waits on the tax-calculator HTTP client (no read
/// timeout, shared request pool)"), while a hypothesis the statement mentions in passing
/// ("Cause: stale reads from lagging replicas; client caching ruled out" against "client-side
/// caching of the cart response") shares a few words.
pub const STATED_SHARE: f64 = 0.8;

/// Removes from `extracted.ruled_out` the items this turn's `answer` affirms (module doc),
/// given the conversation's stored episode, and returns them, in their order.
pub fn drop_affirmed(
    extracted: &mut ExtractedEpisode,
    existing: Option<&Episode>,
    answer: &str,
    update: &TurnUpdate,
) -> Vec<String> {
    let standing = Standing {
        cause: extracted.root_cause.as_deref(),
        earlier_cause: existing.and_then(|e| e.root_cause.as_deref()),
        earlier_ruled_out: existing.map(|e| e.ruled_out.as_slice()).unwrap_or_default(),
    };
    let affirmed = affirmed_items(&extracted.ruled_out, &standing, answer, update);
    extracted.ruled_out.retain(|item| !affirmed.contains(item));
    affirmed
}

/// The conclusion an item of `ruled_out` may copy: this turn's extracted cause and the stored
/// episode's, and what earlier turns ruled out (which stays ruled out).
#[derive(Debug, Clone, Copy, Default)]
pub struct Standing<'a> {
    pub cause: Option<&'a str>,
    pub earlier_cause: Option<&'a str>,
    pub earlier_ruled_out: &'a [String],
}

/// The items of `ruled_out` this turn's `answer` affirms (module doc), given the `standing`
/// conclusion.
pub fn affirmed_items(
    ruled_out: &[String],
    standing: &Standing,
    answer: &str,
    update: &TurnUpdate,
) -> Vec<String> {
    // The answer's affirming sentences and contrasted parts, searched for copies like
    // untrusted text is.
    let affirming = CopyGuard::new(
        sentences(answer)
            .into_iter()
            .flat_map(contrasted_parts)
            .filter(|part| affirms(part)),
    );
    // The standing conclusions' words, and whether the answer revises anything, read once.
    let conclusions: Vec<HashSet<String>> = [standing.cause, standing.earlier_cause]
        .into_iter()
        .flatten()
        .map(terms)
        .collect();
    ruled_out
        .iter()
        .filter(|item| names_a_hypothesis(&negation::phrase(item)))
        // Written as a denial ("DDoS ruled out"), it is one, whatever the answer affirms.
        .filter(|item| negation::ruled_out_subjects(item).is_empty())
        .filter(|item| !ruled_out_by(item, update))
        .filter(|item| {
            affirming.copies(item)
                || (!update.answer_revises
                    && copies_the_conclusion(
                        item,
                        &conclusions,
                        standing.earlier_ruled_out,
                        update,
                    ))
                || update
                    .answer_stated_cause
                    .as_ref()
                    .is_some_and(|stated| names_stated(item, stated))
        })
        .cloned()
        .collect()
}

/// Whether `item` names a standing conclusion (the words of this turn's cause or the stored
/// one: [`STATED_SHARE`] of its words in it), restates nothing an earlier turn ruled out, and
/// the answer neither denies its words nor states another cause; for a turn whose answer
/// revises nothing ([`revises`]). The model filed the conclusion in both fields
/// ("cache eviction due to a dogpile on a hot key", inc-dev-043), or moved the earlier one to
/// `ruled_out` with its field name ("earlier_conclusion: The order_events id sequence is at
/// 2,147,483,647 …", inc-dev-062) while the answer only checks the fix.
fn copies_the_conclusion(
    item: &str,
    conclusions: &[HashSet<String>],
    earlier_ruled_out: &[String],
    update: &TurnUpdate,
) -> bool {
    let item = without_label(item);
    let item_terms = terms(item);
    // An answer that states another cause in so many words concludes that one.
    let states_another = update
        .answer_stated_cause
        .as_ref()
        .is_some_and(|stated| agreement_with_stated(item, stated) < STATED_CAUSE_MIN_AGREEMENT);
    conclusions
        .iter()
        .any(|conclusion| names_stated(item, conclusion))
        && !restates_one_of(item, earlier_ruled_out)
        && !states_another
        && !update
            .answer_denials
            .iter()
            .flatten()
            .any(|word| matches_a_term(word, &item_terms))
}

/// `item` without a one-word label before a colon ("earlier_conclusion: …",
/// "certificate-expiration: the WAF rule blocked …"): the model names the field or the type it
/// copied from, which is no word of what it copied.
fn without_label(item: &str) -> &str {
    match item.split_once(':') {
        Some((label, rest))
            if !label.is_empty()
                && !label.contains(char::is_whitespace)
                && !rest.trim().is_empty() =>
        {
            rest.trim()
        }
        _ => item,
    }
}

/// Words with which an answer abandons a hypothesis without a negation cue ("scratch the ACL
/// theory", "I had it backwards", "I was wrong"). Not "abandoned" nor "dropping": "abandoned
/// calls held threads", "agents are dropping buffered chunks" are findings.
const ABANDONING_WORDS: &[&str] = &[
    "wrong",
    "backwards",
    "scratch",
    "herring",
    "theory",
    "theories",
    "mistake",
    "mistaken",
    "revise",
    "revised",
];

/// Whether `answer` revises anything: it rules something out (`answer_ruled_out`, its
/// [`TurnUpdate::answer_ruled_out`]; talk of ruling out or of what "is out") or has a word of
/// [`ABANDONING_WORDS`]. Every revising answer of the dev conversations does ("Not CPU.", "It
/// isn't the key rotation", "Scratch the ACL theory", "I had it backwards"); one that does not
/// ("That fits the hot-key expiry explanation, though it's still suspected", inc-dev-043)
/// abandoned no conclusion, whatever the model filed as ruled out.
pub(crate) fn revises(answer: &str, answer_ruled_out: &[Vec<String>]) -> bool {
    let answer_words = words(answer);
    !answer_ruled_out.is_empty()
        || talks_of_ruling_out(&answer_words)
        || answer_words
            .iter()
            .any(|word| ABANDONING_WORDS.contains(&word.as_str()))
}

/// Whether `words` say "rule out", "ruled out" or the like, that something "is out" or that
/// it does not fit: "Target deregistration is out: the 502s continue all night" (inc-dev-008)
/// and "I looked at GPU hardware as a possible cause and it doesn't fit" (inc-dev-005) rule
/// out as surely as a cue, though "the fix is out" says no such thing (an item it keeps is one
/// this module leaves as the model filed it).
fn talks_of_ruling_out(words: &[String]) -> bool {
    let says_out = words.windows(2).any(|pair| {
        pair[1] == "out"
            && matches!(
                pair[0].as_str(),
                "rule" | "rules" | "ruled" | "ruling" | "is" | "are" | "was" | "were"
            )
    });
    says_out || says_it_does_not_fit(words)
}

/// Whether `words` say that something does not fit ("it doesn't fit", "does not fit the
/// timeline", "didn't fit with the graphs"), the words of [`crate::poisoning::words`] ("doesn",
/// "t", "fit"). Not what does not fit in or on something: "the working set no longer fits in
/// memory" and "the pod doesn't fit on the node" are findings, often the cause.
fn says_it_does_not_fit(words: &[String]) -> bool {
    const WHERE: &[&str] = &["in", "into", "inside", "within", "on", "onto", "under"];
    words.iter().enumerate().any(|(at, word)| {
        let negated = match at {
            0 => false,
            1 => words[0] == "not",
            _ => {
                words[at - 1] == "not"
                    || (words[at - 1] == "t"
                        && matches!(words[at - 2].as_str(), "doesn" | "don" | "didn"))
            }
        };
        matches!(word.as_str(), "fit" | "fits")
            && negated
            && words
                .get(at + 1)
                .is_none_or(|next| !WHERE.contains(&next.as_str()))
    })
}

/// Words that open a contrast: what follows may affirm what the part before denies.
const CONTRASTS: &[&str] = &["but", "however"];

/// `sentence` cut before each word of [`CONTRASTS`]: "The number of active users is normal
/// (~2,300), | but each mobile client retries failed cart calls every ~200 ms with no limit"
/// denies a hypothesis in its first part and affirms the finding in its second, and each part
/// is read on its own.
fn contrasted_parts(sentence: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut at = 0;
    for token in sentence.split_inclusive(char::is_whitespace) {
        let word = token.trim_matches(|c: char| !c.is_alphanumeric());
        if at > start && CONTRASTS.contains(&word.to_lowercase().as_str()) {
            parts.push(&sentence[start..at]);
            start = at;
        }
        at += token.len();
    }
    parts.push(&sentence[start..]);
    parts
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
    "wrong",
    "consequen",
    "symptom",
    "herring",
    "collateral",
    "downstream",
];

/// [`HYPOTHESIS_WORDS`] that begin other words as well ("sidecar", "ideal", "initialize"), so
/// they count only whole.
const WHOLE_HYPOTHESIS_WORDS: &[&str] = &["side", "idea", "ideas", "initial", "initially"];

/// Whether a sentence of the answer affirms what it says: it rules out no hypothesis
/// ([`negation::ruled_out_subjects`]: "this isn't a sizing problem") and does not talk of
/// ruling out ("GC is also ruled out: pauses stay around 30 ms") nor tell a hypothesis or
/// abandon one ([`HYPOTHESIS_WORDS`], [`WHOLE_HYPOTHESIS_WORDS`], [`ABANDONING_WORDS`]).
/// What a sentence says was missing ("the cache has no maximumSize", "nginx never reopened
/// its log") is a finding or the cause, affirmed.
fn affirms(sentence: &str) -> bool {
    let sentence_words = words(sentence);
    !talks_of_ruling_out(&sentence_words)
        && negation::ruled_out_subjects(sentence).is_empty()
        && !sentence_words.iter().any(|word| {
            ABANDONING_WORDS.contains(&word.as_str())
                || WHOLE_HYPOTHESIS_WORDS.contains(&word.as_str())
                || HYPOTHESIS_WORDS
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

/// Whether [`STATED_SHARE`] or more of `item`'s words are in `stated`, the words of a cause.
pub(crate) fn names_stated(item: &str, stated: &HashSet<String>) -> bool {
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
    fn answered(answer: &str) -> TurnUpdate {
        crate::testing::answered_turn("conv-affirmed", 2, answer)
    }

    fn caused(cause: &str) -> Standing<'_> {
        Standing {
            cause: Some(cause),
            ..Standing::default()
        }
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
            affirmed_items(&ruled_out, &Standing::default(), answer, &answered(answer)),
            vec![ruled_out[0].clone()]
        );
    }

    #[test]
    fn a_copy_of_what_the_answer_says_was_missing_is_no_ruled_out_hypothesis() {
        let answer = "The key is (sku, promo_code) and the promotion issues per-customer promo \
            codes, so the key space exploded and the cache has no maximumSize or expiry.";
        let ruled_out = items(&["the key space exploded and the cache has no maximumSize"]);
        assert_eq!(
            affirmed_items(&ruled_out, &Standing::default(), answer, &answered(answer)),
            ruled_out
        );
    }

    #[test]
    fn a_word_that_only_begins_like_a_hypothesis_word_does_not_make_a_guess() {
        // inc-dev-030's finding, filed as ruled out by the local model: "sidecar" is no "side
        // effect", so the sentence affirms and its copy leaves `ruled_out`.
        let answer = "No user impact: every one of the ~500 daily UC failures is a first \
            attempt that the sidecar retries successfully. The pool fails to initialize twice.";
        let ruled_out = items(&[
            "every one of the ~500 daily UC failures is a first attempt that the sidecar retries",
            "the pool fails to initialize twice",
        ]);
        assert_eq!(
            affirmed_items(&ruled_out, &Standing::default(), answer, &answered(answer)),
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
        assert!(
            affirmed_items(&ruled_out, &Standing::default(), answer, &answered(answer)).is_empty()
        );
    }

    #[test]
    fn a_copy_of_a_sentence_that_says_a_hypothesis_does_not_fit_stays() {
        // inc-dev-005, turn 1: the local model filed the abandoned guess in the answer's words.
        let answer = "I looked at GPU hardware as a possible cause and it doesn't fit: the \
            failures happen on every node and GPU type in the pool. The working set no longer \
            fits in the page cache.";
        let ruled_out = items(&[
            "GPU hardware as a possible cause and it doesn't fit",
            "the working set no longer fits in the page cache",
        ]);
        assert_eq!(
            affirmed_items(&ruled_out, &Standing::default(), answer, &answered(answer)),
            vec![ruled_out[1].clone()]
        );
        let said = |text: &str| says_it_does_not_fit(&words(text));
        assert!(said("that does not fit the timeline"));
        assert!(said("Not fit: the graphs disagree"));
        assert!(said("it didn't fit with the graphs"));
        assert!(!said("the pod doesn't fit on the node"));
        assert!(!said("the new limits fit the workload"));
    }

    #[test]
    fn a_part_after_but_affirms_on_its_own() {
        // inc-dev-021, turn 2: the first part rules out a hypothesis, the second states the
        // finding the conclusion rests on.
        let answer = "The number of active users is normal (~2,300), but each mobile client \
            retries failed cart calls every ~200 ms with no limit: one iOS user has made 612 \
            attempts since 14:02.";
        let ruled_out = items(&[
            "each mobile client retries failed cart calls every ~200 ms",
            "the number of active users is normal",
        ]);
        assert_eq!(
            affirmed_items(&ruled_out, &Standing::default(), answer, &answered(answer)),
            vec![ruled_out[0].clone()]
        );
        assert_eq!(
            contrasted_parts("It was not the deploy, but the config. However, it held."),
            vec![
                "It was not the deploy, ",
                "but the config. ",
                "However, it held."
            ]
        );
    }

    #[test]
    fn the_concluded_cause_copied_into_ruled_out_goes_unless_the_answer_abandons_something() {
        // inc-dev-043, turn 2: the model filed the standing conclusion in both fields.
        let cause = "cache eviction due to a dogpile on a hot key";
        let answer = "Not yet. The spikes now come once an hour instead of every ten minutes \
            and are smaller, but config-db still refuses connections on every expiry. That \
            fits the hot-key expiry explanation, though it's still suspected rather than \
            proven.";
        let ruled_out = items(&[cause, "memcached node eviction"]);
        assert_eq!(
            affirmed_items(&ruled_out, &caused(cause), answer, &answered(answer)),
            vec![cause.to_owned()]
        );
        // The model keeps the abandoned guess in both fields of a revising turn: every sign
        // of a revision keeps it ruled out (inc-dev-018, -003, -057, -033).
        let cause = "CPU saturation on the gateway tasks";
        for answer in [
            "Not CPU. The gateway's event loop is blocked by a synchronous download.",
            "Scratch that theory: CPU saturation on the gateway tasks came with the traffic.",
            "I had it backwards: the full GCs slow the gateway tasks.",
            "Control-plane clocks are within 0.4 ms, so skew is ruled out.",
        ] {
            let ruled_out = items(&[cause]);
            assert!(
                affirmed_items(&ruled_out, &caused(cause), answer, &answered(answer)).is_empty(),
                "{answer}"
            );
        }
    }

    #[test]
    fn the_stored_conclusion_moved_to_ruled_out_by_a_turn_checking_the_fix_goes() {
        // inc-dev-062, turn 2: the fix is checked, the earlier cause filed with its field name.
        let earlier = "The order_events id sequence is at 2,147,483,647, the maximum of a \
            32-bit integer; the column is int4.";
        let answer = "Resolved: the sequence is bigint and past the old limit, and orders save \
            again. Add an alert at 70% of each id column's type range.";
        let ruled_out = items(&[
            "earlier_conclusion: The order_events id sequence is at 2,147,483,647, the \
             maximum of a 32-bit integer",
            "disk I/O",
        ]);
        let standing = Standing {
            cause: Some("32-bit id exhausted"),
            earlier_cause: Some(earlier),
            earlier_ruled_out: &[],
        };
        assert_eq!(
            affirmed_items(&ruled_out, &standing, answer, &answered(answer)),
            vec![ruled_out[0].clone()]
        );
        // What an earlier turn ruled out stays ruled out, though the cause names it whole.
        let carried = items(&["connection pool exhausted"]);
        let standing = Standing {
            cause: Some("connection pool exhausted by the migration's lock queue"),
            earlier_cause: None,
            earlier_ruled_out: &carried,
        };
        assert!(affirmed_items(&carried, &standing, answer, &answered(answer)).is_empty());
    }

    #[test]
    fn a_copy_of_a_sentence_saying_what_is_out_stays() {
        // inc-dev-008, turn 2: "X is out" rules X out.
        let answer = "Target deregistration is out: the 502s continue all night with no \
            scaling. App crashes are out too: zero container restarts in 24 h.";
        let ruled_out = items(&[
            "target deregistration is out: the 502s continue all night with no scaling",
            "app crashes are out too: zero container restarts in 24 h",
        ]);
        assert!(
            affirmed_items(&ruled_out, &Standing::default(), answer, &answered(answer)).is_empty()
        );
    }

    #[test]
    fn a_copy_of_a_sentence_telling_a_hypothesis_stays() {
        let answer = "I first suspected client-side caching of the cart response, but the CDN \
            doesn't cache /api/cart at all.";
        let ruled_out = items(&["client-side caching of the cart response"]);
        assert!(
            affirmed_items(&ruled_out, &Standing::default(), answer, &answered(answer)).is_empty()
        );
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
            affirmed_items(&ruled_out, &Standing::default(), answer, &answered(answer)),
            vec![ruled_out[0].clone()]
        );

        let answer = "Cause: stale reads from lagging replicas; client caching ruled out.";
        let ruled_out = items(&["client-side caching of the cart response", "client caching"]);
        assert!(
            affirmed_items(&ruled_out, &Standing::default(), answer, &answered(answer)).is_empty()
        );

        // An item written as a denial stays, though the statement repeats it (inc-dev-036).
        let answer = "Resolved: 429s back to baseline. Cause: staging config applied \
            globally; DDoS ruled out.";
        let ruled_out = items(&["DDoS ruled out"]);
        assert!(
            affirmed_items(&ruled_out, &Standing::default(), answer, &answered(answer)).is_empty()
        );
    }

    #[test]
    fn a_one_word_item_is_kept_whatever_the_answer_says() {
        let answer = "Root cause: DNS caching in the JVM kept the old address forever.";
        let ruled_out = items(&["DNS"]);
        assert!(
            affirmed_items(&ruled_out, &Standing::default(), answer, &answered(answer)).is_empty()
        );
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
        let dropped = drop_affirmed(&mut extracted, None, answer, &answered(answer));
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
