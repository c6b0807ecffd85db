//! What the query says is *fine*, and the past root causes whose failure that rules out.
//!
//! A look-alike often rules the stored mechanism out without a negation: "the certificate is
//! valid for months" (not expired), "heap is flat between requests" (nothing grows), "every
//! borrowed connection is returned promptly" (no leak). [`crate::recognition::negation`]
//! reads only cues ("not expired"), so such a query left the expired certificate's, the
//! growing cache's, the leaked pool's episode free to be a recognized recurrence
//! (docs/EVALUATION.md, "A held-out fold").
//!
//! A *healthy state* is a subject, a present-tense copula and one of a few state words whose
//! opposite is a failure mechanism: `<subject> is|are|stays|remains|looks|seems [still]
//! <state>`. It contradicts a root cause one of whose clauses names both a word of the
//! subject and that failure (a clause: "and" does not end one, "so" or "because" do) —
//! affirmed ("the client certificate had expired") or as the
//! safeguard it denies ("the certificate was never renewed"): the failure of *that* thing,
//! not every cause that names an expiry somewhere ("all keys had one TTL and expired
//! together" is not contradicted by a valid certificate).
//!
//! A contradicted episode is never `strong` and never the first lead, and a false one would
//! lose a real recurrence, so the rule errs towards not contradicting. It says nothing for:
//! - a state a negation or a question reaches ("no connection is returned", "not all certs
//!   are valid", "check whether the cert is valid", "the cert is not valid");
//! - a state of the past or with an end ("was valid until midnight", "is valid until
//!   Friday"), or at a level ("pool usage is flat at 100%": a saturated metric);
//! - a subject of no words but quantifiers ("every", "new"), and a returned or released
//!   thing that is not a pooled resource ("an error is returned to the caller");
//! - a root cause that names the state itself ("valid tokens were rejected as expired",
//!   "a 365-day validity") or a cause that makes the failure only seem to happen (a clock
//!   ahead makes valid tokens look expired): it agrees with the query.
//!
//! The list of states is short and generic on purpose.

use super::negation::{affirmed_words, clauses_of, content_words, denied_phrases, is_leading_cue};
use crate::ranking::terms::{terms, words_match};
use std::collections::HashSet;

/// State words and the failure each rules out.
const STATES: &[(&str, Failure)] = &[
    ("valid", EXPIRY),
    ("unexpired", EXPIRY),
    ("flat", GROWTH),
    ("stable", GROWTH),
    ("steady", GROWTH),
    ("constant", GROWTH),
    ("bounded", GROWTH),
    ("returned", LEAK),
    ("released", LEAK),
    // Not "closed": a connection closed by its peer or a balancer is the symptom of other
    // failures (an idle timeout), not a sign that nothing leaked. Nor "current": "the primary
    // is current" says nothing of the replica that lags behind it.
];

/// A failure as a root cause words it, by word stems (a prefix: "expir" matches "expired",
/// "expiry" and "expires").
#[derive(Debug, PartialEq, Eq)]
pub struct Failure {
    /// What a cause affirms of the failed thing ("had expired", "grew", "leaked").
    pub affirmed: &'static [&'static str],
    /// The safeguard a cause denies it had ("was never renewed", "no size bound").
    pub denied: &'static [&'static str],
    /// Causes that make the failure only seem to happen ("the clock ran ahead, so tokens
    /// were treated as expired"): a cause naming one agrees with the state.
    pub seeming: &'static [&'static str],
    /// When set, the subject must name one of these (the state is only a sign of health
    /// for them): "returned" of a connection, not of an error.
    pub subjects: Option<&'static [&'static str]>,
}

const EXPIRY: Failure = Failure {
    affirmed: &["expir"],
    denied: &["renew", "rotat"],
    seeming: &["clock", "skew", "drift", "ntp", "ahead", "behind"],
    subjects: None,
};
const GROWTH: Failure = Failure {
    affirmed: &["grow", "grew", "climb", "leak", "unbounded", "bloat"],
    denied: &["bound", "limit", "evict"],
    seeming: &[],
    subjects: None,
};
const LEAK: Failure = Failure {
    affirmed: &["leak"],
    denied: &["return", "releas"],
    seeming: &[],
    subjects: Some(&[
        "connection",
        "conn",
        "session",
        "socket",
        "handle",
        "descriptor",
        "lock",
        "lease",
        "buffer",
        "cursor",
        "slot",
    ]),
};

/// Present-tense verbs that state what the subject is: a past one ("was valid", "stayed
/// flat") tells what it was before it failed.
const COPULAS: &[&str] = &[
    "is", "are", "stays", "stay", "remains", "remain", "looks", "look", "seems", "seem",
];

/// Words allowed between the copula and the state ("is *still* valid").
const ADVERBS: &[&str] = &[
    "still",
    "completely",
    "perfectly",
    "fully",
    "entirely",
    "well",
    "always",
    "essentially",
    "pretty",
    "quite",
];

/// Words after a state that bound it in time or pin it at a level ("valid *until* midnight",
/// "flat *at* 100%"): no sign of health then.
const BOUNDED_BY: &[&str] = &["until", "till", "at", "before"];

/// Words before the copula that make the state a question or a hypothesis, not evidence
/// ("check *whether* the cert is valid").
const HEDGES: &[&str] = &[
    "whether", "if", "unless", "check", "verify", "confirm", "suspect", "assume", "assuming",
    "hope", "expect", "expected", "should",
];

/// How many content words before the copula make the subject.
const SUBJECT_WORDS: usize = 3;

/// Words that say how much of the subject, not what it is ("*every* borrowed connection",
/// "the *new* cert"): a root cause naming them is not about the same thing.
const NOT_A_SUBJECT: &[&str] = &[
    "every", "each", "all", "any", "both", "other", "others", "new", "old", "same", "still",
];

/// A state the query affirms: its subject's content words, the state word and the failure
/// it rules out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthyState {
    pub subject: Vec<String>,
    /// The state word ("valid").
    pub state: &'static str,
    pub rules_out: &'static Failure,
}

/// The healthy states `text` affirms, in text order.
pub fn healthy_states(text: &str) -> Vec<HealthyState> {
    let mut out = Vec::new();
    for clause in clauses_of(text) {
        let words: Vec<&str> = clause.iter().map(String::as_str).collect();
        for (i, word) in words.iter().enumerate() {
            if !COPULAS.contains(word) {
                continue;
            }
            let before = &words[..i];
            if before
                .iter()
                .any(|w| is_leading_cue(w) || HEDGES.contains(w))
            {
                continue;
            }
            let Some(at) = (i + 1..words.len()).find(|&j| !ADVERBS.contains(&words[j])) else {
                continue;
            };
            let Some((state, rules_out)) = STATES.iter().find(|(state, _)| *state == words[at])
            else {
                continue;
            };
            if words.get(at + 1).is_some_and(|w| BOUNDED_BY.contains(w)) {
                continue;
            }
            let subject: Vec<String> = content_words(before)
                .into_iter()
                .filter(|w| !NOT_A_SUBJECT.contains(&w.as_str()))
                .collect();
            let from = subject.len().saturating_sub(SUBJECT_WORDS);
            let subject: Vec<String> = subject.into_iter().skip(from).collect();
            let fits = rules_out.subjects.is_none_or(|kinds| {
                subject
                    .iter()
                    .any(|w| kinds.iter().any(|kind| w.starts_with(kind)))
            });
            if !subject.is_empty() && fits {
                out.push(HealthyState {
                    subject,
                    state,
                    rules_out,
                });
            }
        }
    }
    out
}

/// The words of `root_cause` that name a failure one of `states` rules out, in a clause that
/// names that state's subject: the failure it affirms ("had expired"), or the safeguard it
/// denies ("was never renewed"). Empty when none, when the root cause denies the failure
/// itself ("had not expired"), and when it agrees with the state (it names the state, or a
/// cause that only makes the failure seem to happen).
pub fn contradicted_by_states(states: &[HealthyState], root_cause: &str) -> Vec<String> {
    if states.is_empty() {
        return Vec::new();
    }
    let affirmed_anywhere = affirmed_words(root_cause);
    // Each statement read once for every state: its words (the subject may sit inside a
    // denial, "never renewed its certificate"), what it affirms and what it denies.
    let read: Vec<(HashSet<String>, Vec<String>, Vec<String>)> = statements(root_cause)
        .iter()
        .map(|statement| {
            (
                terms(statement),
                affirmed_words(statement),
                denied_phrases(statement).into_iter().flatten().collect(),
            )
        })
        .collect();
    let mut out: Vec<String> = Vec::new();
    for state in states {
        let failure = state.rules_out;
        let agrees = affirmed_anywhere.iter().any(|a| {
            words_match(a, state.state) || failure.seeming.iter().any(|s| a.starts_with(s))
        });
        if agrees {
            continue;
        }
        for (named, affirmed, denied) in &read {
            let of_subject = named
                .iter()
                .any(|n| state.subject.iter().any(|s| words_match(n, s)));
            if of_subject {
                out.extend(with_stem(affirmed, failure.affirmed));
                out.extend(with_stem(denied, failure.denied));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The `words` that start with one of `stems`.
fn with_stem<'a>(words: &'a [String], stems: &'a [&str]) -> impl Iterator<Item = String> + 'a {
    words
        .iter()
        .filter(|w| stems.iter().any(|stem| w.starts_with(stem)))
        .cloned()
}

/// Words that open another statement, usually with another subject ("…, so descriptors
/// grow"); "and" does not: "was installed by hand and never renewed" says both of one thing.
const NEW_STATEMENT: &[&str] = &[
    "so",
    "because",
    "but",
    "while",
    "though",
    "although",
    "whereas",
    "therefore",
    "then",
    "which",
];

/// `text` in statements: split at punctuation and at [`NEW_STATEMENT`] words.
fn statements(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for piece in text.split([';', ',', '.', ':', '!', '?', '(', ')']) {
        let mut current: Vec<&str> = Vec::new();
        for word in piece.split_whitespace() {
            if NEW_STATEMENT.contains(&word.to_lowercase().as_str()) {
                out.push(current.join(" "));
                current.clear();
            } else {
                current.push(word);
            }
        }
        out.push(current.join(" "));
    }
    out.retain(|s| !s.trim().is_empty());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contradicted(query: &str, root_cause: &str) -> Vec<String> {
        contradicted_by_states(&healthy_states(query), root_cause)
    }

    fn nothing(query: &str, root_cause: &str) {
        assert!(
            contradicted(query, root_cause).is_empty(),
            "`{query}` contradicted `{root_cause}`"
        );
    }

    #[test]
    fn a_valid_certificate_rules_out_an_expired_one() {
        assert_eq!(
            contradicted(
                "older terminals fail the handshake; the certificate is valid for months",
                "The mutual-TLS client certificate had expired at midnight."
            ),
            vec!["expired"]
        );
        assert_eq!(
            contradicted(
                "the cert is still valid",
                "renewal failed silently until the cert expired"
            ),
            vec!["expired"]
        );
    }

    #[test]
    fn returned_connections_rule_out_a_leak_and_flat_memory_rules_out_growth() {
        assert_eq!(
            contradicted(
                "pool timeouts: every borrowed connection is returned promptly",
                "an error path leaked its connections until the pool was empty"
            ),
            vec!["leaked"]
        );
        assert_eq!(
            contradicted(
                "OOMKilled on one request; heap is flat between those requests",
                "an unbounded map grew the heap until the pod was killed"
            ),
            vec!["grew", "unbounded"]
        );
    }

    #[test]
    fn a_root_cause_that_denies_the_safeguard_names_the_failure() {
        assert_eq!(
            contradicted(
                "the client certificate is valid",
                "the certificate was installed by hand and never renewed"
            ),
            vec!["renewed"]
        );
    }

    #[test]
    fn the_failure_must_be_of_the_subject_the_query_says_is_fine() {
        // A valid certificate says nothing of cache keys expiring.
        nothing(
            "the certificate is valid",
            "all category keys had the same TTL and expired together",
        );
        // Flat traffic says nothing of a heap that grows.
        nothing(
            "traffic is flat but the pods get OOMKilled",
            "an unbounded cache grew the heap",
        );
        // Memory named in one clause, growth in another.
        nothing(
            "memory is flat between requests",
            "the loader maps files into memory and never closes them, so descriptors grow",
        );
        // An error returned to the caller is no pooled resource.
        nothing(
            "an error is returned to the customer",
            "the decline error path leaked connections",
        );
    }

    #[test]
    fn a_negated_hedged_or_subjectless_state_says_nothing() {
        assert!(healthy_states("the certificate is not valid for this name").is_empty());
        assert!(healthy_states("the certificate isn't valid").is_empty());
        assert!(healthy_states("is valid").is_empty());
        assert!(healthy_states("all are valid").is_empty());
        // A quoted message is a symptom, as for the negation rule.
        assert!(healthy_states("clients log 'the session is valid' then fail").is_empty());
        // A negation or a question before the subject reaches the state too.
        nothing(
            "no connection is returned to the pool after a declined payment",
            "an error path leaked connections until the pool was empty",
        );
        nothing(
            "not all certificates are valid",
            "the intermediate certificate had expired",
        );
        nothing(
            "none of the certificates are valid anymore",
            "the client certificate had expired",
        );
        nothing(
            "need to check whether the cert is valid",
            "the client certificate had expired",
        );
    }

    #[test]
    fn a_state_of_the_past_with_an_end_or_at_a_level_says_nothing() {
        nothing(
            "the client certificate was valid until midnight; since then every handshake fails",
            "The mutual-TLS client certificate had expired at midnight.",
        );
        nothing(
            "the client certificate is valid until midnight",
            "The mutual-TLS client certificate had expired at midnight.",
        );
        nothing(
            "heap stayed flat for weeks, now it grows 200 MB an hour",
            "an unbounded map grew the heap",
        );
        nothing(
            "pool usage is flat at 100% (50/50)",
            "connections leaked until the pool was exhausted",
        );
    }

    #[test]
    fn a_root_cause_that_names_the_state_or_a_seeming_failure_agrees() {
        // A clock ahead makes valid tokens look expired.
        nothing(
            "logins fail with token expired although the token is valid",
            "the host clock drifted ahead, so valid tokens were rejected as expired",
        );
        nothing(
            "logins fail right after issue, but the token is valid",
            "auth-3's clock ran 6 min ahead, so freshly issued tokens were treated as expired",
        );
        // A validity period named by the cause: it agrees, whatever it denies.
        nothing(
            "the serving certificate is valid",
            "the serving certificate had a 365-day validity and nothing rotated it",
        );
        // Idle connections the pool did not close: a keepalive mismatch, not a leak.
        nothing(
            "connections are returned to the pool; after 5 min idle the first request is reset",
            "the pool did not close idle connections before the NAT's 350 s timeout",
        );
    }

    #[test]
    fn a_root_cause_that_denies_the_failure_agrees() {
        nothing(
            "the certificate is valid",
            "the certificate had not expired; the chain was incomplete",
        );
    }

    #[test]
    fn states_are_read_per_clause() {
        let states = healthy_states("the replicas look stable, the CDN cached the response");
        assert_eq!(
            states,
            vec![HealthyState {
                subject: vec!["replicas".to_owned()],
                state: "stable",
                rules_out: &GROWTH
            }]
        );
    }
}
