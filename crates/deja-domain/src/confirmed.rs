//! A turn that confirms the conclusion keeps the explanation it confirms.
//!
//! The latest turn's conclusion wins, and the last turn of an investigation often only checks
//! the fix and names the cause in a few words: "Resolved: ids continue past 2^31 and the UI
//! shows current alerts. Cause: 32-bit auto-increment exhausted." (inc-dev-064). Stored alone,
//! that label drops what the earlier turn found out and a later agent needs to recognise the
//! failure: which table, which limit, why every insert failed. So when this turn revises
//! nothing and its cause is brief ([`BRIEF_CAUSE_MAX_WORDS`]), the stored cause becomes the new
//! one followed by the earlier explanation: "32-bit auto-increment exhausted: The notifications
//! table's id is a signed INT and its AUTO_INCREMENT is at 2147483647, …". Replayed over the
//! local model's logged causes of the 64 multi-turn dev conversations, it fires on 15, whose
//! root-cause similarity to gold goes 0.58 → 0.68 (11 better, 4 worse; docs/EVALUATION.md, "A
//! confirming turn").
//!
//! The earlier cause is not kept when the conversation left it: the answer revises something
//! (rules out, abandons: [`TurnUpdate::answer_revises`]) or denies it, or the new cause turns
//! back to a hypothesis an earlier turn ruled out (the merge checks those two; the model's
//! copies of a kept explanation in `ruled_out` go: [`copies_explanation`]). Nor when it is hedged ("Suspected: a retention
//! change (not confirmed yet)"): a confirmation in a few words is then the conclusion, and the
//! guess it confirms would read as doubt. Nor when a turn after the first revised something:
//! the stored cause may be the hypothesis that turn abandoned, which a small model kept (a
//! live run of inc-dev-034 and -061: turn 2's answer revised, its extraction kept turn 1's
//! guess, and turn 3's brief confirmation would have carried the guess back in its
//! explanation). The first turn revising within itself ("My first guess was …, but") is the
//! explanation it wrote.

use crate::merge::TurnUpdate;
use crate::poisoning::words;
use crate::ranking::terms::{matches_a_term, terms};
use crate::review::TurnRecord;

/// The most words a cause may have to be a brief restatement of the conclusion: a label
/// ("uncapped container logs", "a resolver-side minimum TTL was pinning clients to the old
/// address") rather than an explanation. Between 12 and 20 the dev runs gain alike.
pub const BRIEF_CAUSE_MAX_WORDS: usize = 15;

/// Word prefixes that hedge a cause: a guess, not an explanation a confirmation keeps.
const HEDGES: &[&str] = &[
    "suspect",
    "hypothes",
    "guess",
    "likely",
    "probabl",
    "possibl",
    "perhaps",
    "maybe",
    "might",
    "unconfirmed",
];

/// The root cause to store when this turn concludes the brief `cause` and the stored episode,
/// merged from `turns`, holds the `earlier` one the conversation did not leave (module doc):
/// the cause followed by the earlier explanation, or the explanation alone when it already
/// says every word of the cause. `None` keeps `cause` as it is.
pub fn with_explanation(
    cause: &str,
    earlier: &str,
    turns: &[TurnRecord],
    update: &TurnUpdate,
) -> Option<String> {
    let cause_words = words(cause).len();
    // A cause that rules something out itself ("staging config applied globally; DDoS ruled
    // out") tells of a revision the answer may word otherwise.
    if update.answer_revises
        || crate::affirmed::revises(cause, &[])
        || cause_words > BRIEF_CAUSE_MAX_WORDS
        || hedged(earlier)
        || revised_after_the_first(turns, update.turn_index)
    {
        return None;
    }
    let explanation = without_brief_label(earlier).trim();
    if words(explanation).len() <= cause_words {
        return None;
    }
    let explanation_terms = terms(explanation);
    if terms(cause)
        .iter()
        .all(|word| matches_a_term(word, &explanation_terms))
    {
        return Some(explanation.to_owned());
    }
    let cause = cause.trim().trim_end_matches(['.', ';', ':']);
    let labelled = format!("{cause}: {explanation}");
    // Each confirming turn would put its label before the last one's: past a root cause's
    // bound, the explanation alone.
    if labelled.chars().count() > crate::ExtractionLimits::default().max_text_chars {
        return Some(explanation.to_owned());
    }
    Some(labelled)
}

/// Whether a ruled-out `item` copies the `earlier` explanation a confirmation keeps: a
/// hypothesis (two words or more) with [`crate::affirmed::STATED_SHARE`] of its words in it.
/// A small model files the standing conclusion as ruled out while the answer only checks the
/// fix (inc-dev-064 listed "the notifications table's id is a signed INT and its
/// AUTO_INCREMENT is at 2147483647"); kept, it would deny the cause it sits beside.
pub fn copies_explanation(item: &str, earlier: &str) -> bool {
    terms(item).len() >= 2
        && crate::affirmed::names_stated(item, &terms(without_brief_label(earlier)))
}

/// Whether a turn of `turns` after the first one and before `turn_index` revised something.
fn revised_after_the_first(turns: &[TurnRecord], turn_index: u32) -> bool {
    let Some(first) = turns.iter().map(|turn| turn.turn_index).min() else {
        return false;
    };
    turns
        .iter()
        .any(|turn| turn.revised && turn.turn_index > first && turn.turn_index < turn_index)
}

/// Whether `cause` hedges ([`HEDGES`], or "not confirmed").
fn hedged(cause: &str) -> bool {
    let cause_words = words(cause);
    cause_words
        .iter()
        .any(|word| HEDGES.iter().any(|hedge| word.starts_with(hedge)))
        || cause_words
            .windows(2)
            .any(|pair| pair[0] == "not" && pair[1] == "confirmed")
}

/// `cause` without a leading label of three to [`BRIEF_CAUSE_MAX_WORDS`] words and a colon,
/// the shape this module writes: a second confirmation replaces the first one's label instead
/// of stacking its own in front. Shorter labels ("Root cause:", "checkout-db:") stay.
fn without_brief_label(cause: &str) -> &str {
    match cause.split_once(": ") {
        Some((label, rest))
            if (3..=BRIEF_CAUSE_MAX_WORDS).contains(&words(label).len())
                && !rest.trim().is_empty() =>
        {
            rest
        }
        _ => cause,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::answered_turn;

    fn answered(answer: &str) -> TurnUpdate {
        answered_turn("conv-confirmed", 2, answer)
    }

    const EARLIER_064: &str = "The notifications table's id is a signed INT and its \
AUTO_INCREMENT is at 2147483647, the top of the range, so every insert tries to reuse that \
value and fails with a duplicate key.";

    #[test]
    fn a_brief_confirmation_keeps_the_explanation_after_its_label() {
        let update = answered(
            "Resolved: ids continue past 2^31 and the UI shows current alerts. Cause: 32-bit \
auto-increment exhausted.",
        );
        let cause = with_explanation(
            "32-bit auto-increment exhausted.",
            EARLIER_064,
            &[],
            &update,
        );
        assert_eq!(
            cause.as_deref(),
            Some(format!("32-bit auto-increment exhausted: {EARLIER_064}").as_str())
        );
    }

    #[test]
    fn a_second_confirmation_replaces_the_label_instead_of_stacking_one() {
        let update = answered("Still fine a week later: the id column is bigint now.");
        let earlier = format!("32-bit auto-increment exhausted: {EARLIER_064}");
        let cause = with_explanation("id column range exhausted", &earlier, &[], &update);
        assert_eq!(
            cause.as_deref(),
            Some(format!("id column range exhausted: {EARLIER_064}").as_str())
        );
    }

    #[test]
    fn a_label_that_would_take_the_cause_past_its_bound_is_left_off() {
        let update = answered("Still fine a week later: the id column is bigint now.");
        let long = format!(
            "{EARLIER_064} {}",
            "and the retry storm that followed ".repeat(18)
        );
        let long = long.trim().to_owned();
        assert!(long.chars().count() <= 800 && long.chars().count() > 760);
        let cause = with_explanation("id column range exhausted", &long, &[], &update);
        assert_eq!(cause.as_deref(), Some(long.as_str()));
    }

    #[test]
    fn an_explanation_that_says_every_word_of_the_cause_is_kept_alone() {
        let update = answered("Confirmed: no evictions since the change.");
        let earlier = "Redis maxmemory was too low, so session keys were evicted and checkout \
lost sessions.";
        let cause = with_explanation("session keys evicted", earlier, &[], &update);
        assert_eq!(cause.as_deref(), Some(earlier));
    }

    #[test]
    fn a_revising_answer_keeps_its_own_cause() {
        for answer in [
            "Scratch the replica theory: the loader's cache is stale. Cause: stale loader cache.",
            "The replica lag is ruled out. Cause: stale loader cache.",
            "I had it backwards. Cause: stale loader cache.",
        ] {
            let update = answered(answer);
            assert!(
                with_explanation("stale loader cache", EARLIER_064, &[], &update).is_none(),
                "{answer}"
            );
        }
    }

    fn turn(turn_index: u32, revised: bool) -> TurnRecord {
        TurnRecord {
            event_id: format!("evt-{turn_index}"),
            agent_run_id: format!("run-{turn_index}"),
            turn_index,
            ended_at: crate::testing::fixed_time(),
            revised,
        }
    }

    #[test]
    fn a_turn_after_the_first_that_revised_leaves_the_cause_alone() {
        // inc-dev-061: turn 2 ruled the keep-alive idea out, its extraction kept it.
        let update = answered_turn(
            "conv-confirmed",
            3,
            "Resolved: no 502s across three rollouts. Cause: pods exiting immediately on \
SIGTERM while still receiving traffic.",
        );
        let cause = "pods exiting immediately on SIGTERM while still receiving traffic";
        let guess = "The ingress controller keeps upstream connections for 60 s, which is \
shorter than the cart-api server's idle timeout, causing the 502s.";
        let middle_revised = [turn(1, false), turn(2, true), turn(3, false)];
        assert!(with_explanation(cause, guess, &middle_revised, &update).is_none());
        // The first turn revising within itself wrote the explanation after it.
        let first_revised = [turn(1, true), turn(2, false), turn(3, false)];
        assert!(with_explanation(cause, guess, &first_revised, &update).is_some());
    }

    #[test]
    fn a_long_cause_or_a_hedged_earlier_one_stands_alone() {
        let update = answered("Resolved: the errors stopped.");
        let long = "the id column of the notifications table was a signed 32-bit integer and \
its auto-increment counter reached the top of that range yesterday";
        assert!(with_explanation(long, EARLIER_064, &[], &update).is_none());
        for earlier in [
            "Suspected: a retention change on kafka-2 topics (not confirmed yet).",
            "Probably a retention change on the kafka-2 topics that nobody announced.",
            "A retention change on the kafka-2 topics, not confirmed by the config history yet.",
        ] {
            assert!(
                with_explanation("retention change", earlier, &[], &update).is_none(),
                "{earlier}"
            );
        }
    }

    #[test]
    fn an_earlier_cause_no_longer_than_the_new_one_adds_nothing() {
        let update = answered("Resolved: the drill passed.");
        assert!(with_explanation(
            "a resolver-side minimum TTL pinned clients",
            "dnsmasq min-cache-ttl",
            &[],
            &update
        )
        .is_none());
    }
}
