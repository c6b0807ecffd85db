//! What the query says is *fine*, and the past root causes whose failure that rules out.
//!
//! A look-alike often rules the stored mechanism out without a negation: "the certificate is
//! valid for months" (not expired), "every borrowed connection is returned promptly" (no
//! leak), "heap is flat between requests" (nothing grows), "the replicas are current" (no
//! lag). [`crate::recognition::negation`] reads only cues ("not expired"), so such a query
//! left the expired certificate's, the leaked pool's, the growing cache's episode free to be
//! a recognized recurrence (docs/EVALUATION.md, "A held-out fold").
//!
//! A *healthy state* is a subject, a copula and one of a few state words whose opposite is a
//! failure mechanism: `<subject> is|are|stays|remains|looks [still] <state>`. It contradicts a
//! root cause that affirms both a word of its subject and a word of that failure ("the mTLS
//! client certificate had expired" against "the certificate is valid"): the failure of *that*
//! thing, not every cause that names an expiry ("the cache keys expired together" is not
//! contradicted by a valid certificate). Like the negation rule it errs towards not
//! contradicting: a state word after a negation ("is not valid") or without a subject ("all
//! stable") says nothing, a failure that a root cause names beside the state itself is the
//! failure as it was seen ("valid tokens were rejected as expired": a clock ahead, not an
//! expiry), and the list of states is short and generic on purpose.

use super::negation::{affirmed_words, clauses_of, content_words, denied_phrases};
use crate::ranking::terms::{terms, words_match};

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
    // failures (an idle timeout), not a sign that nothing leaked.
    ("current", STALENESS),
];

/// A failure as a root cause words it, by word stems (a prefix: "expir" matches "expired",
/// "expiry" and "expires"): what it affirms ("had expired", "leaked"), or what it denies of
/// the subject ("was never renewed", "without closing it", "no size bound").
#[derive(Debug, PartialEq, Eq)]
pub struct Failure {
    pub affirmed: &'static [&'static str],
    pub denied: &'static [&'static str],
}

const EXPIRY: Failure = Failure {
    affirmed: &["expir"],
    denied: &["renew", "rotat"],
};
const GROWTH: Failure = Failure {
    affirmed: &["grow", "grew", "climb", "leak", "unbounded", "bloat"],
    denied: &["bound", "limit", "evict"],
};
const LEAK: Failure = Failure {
    affirmed: &["leak"],
    denied: &["clos", "return", "releas"],
};
const STALENESS: Failure = Failure {
    affirmed: &["stale", "lagg", "lags"],
    denied: &[],
};

/// Words that say how much of the subject, not what it is ("*every* borrowed connection",
/// "the *new* cert"): a root cause naming them is not about the same thing.
const NOT_A_SUBJECT: &[&str] = &[
    "every", "each", "all", "any", "both", "other", "others", "new", "old", "same", "still",
];

/// Verbs that state what the subject is.
const COPULAS: &[&str] = &[
    "is", "are", "was", "were", "stays", "stay", "stayed", "remains", "remain", "remained",
    "looks", "look", "looked", "seems", "seem", "holds", "held",
];

/// Words allowed between the copula and the state ("is *still* valid", "is returned").
const ADVERBS: &[&str] = &[
    "still",
    "completely",
    "perfectly",
    "fully",
    "entirely",
    "well",
    "again",
    "always",
    "essentially",
    "pretty",
    "quite",
];

/// How many content words before the copula make the subject.
const SUBJECT_WORDS: usize = 3;

/// A state the query affirms: its subject's content words and the failure stems it rules out.
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
            let state = words[i + 1..]
                .iter()
                .find(|w| !ADVERBS.contains(w))
                .and_then(|w| STATES.iter().find(|(state, _)| state == w));
            let Some((state, rules_out)) = state else {
                continue;
            };
            let subject: Vec<String> = content_words(&words[..i])
                .into_iter()
                .filter(|w| !NOT_A_SUBJECT.contains(&w.as_str()))
                .collect();
            let from = subject.len().saturating_sub(SUBJECT_WORDS);
            let subject: Vec<String> = subject.into_iter().skip(from).collect();
            if !subject.is_empty() {
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

/// The words of `root_cause` that name a failure one of `states` rules out, of that state's
/// subject (named anywhere in it): the failure it affirms ("had expired"), or the safeguard it
/// denies ("without closing it" against "connections are returned"). Empty when none, and
/// when the root cause denies the failure itself ("had not expired").
pub fn contradicted_by_states(states: &[HealthyState], root_cause: &str) -> Vec<String> {
    if states.is_empty() {
        return Vec::new();
    }
    // The subject may sit inside a denial ("never closed its connections").
    let named = terms(root_cause);
    let affirmed = affirmed_words(root_cause);
    let denied: Vec<String> = denied_phrases(root_cause).into_iter().flatten().collect();
    let mut out: Vec<String> = Vec::new();
    for state in states {
        let of_subject = named
            .iter()
            .any(|n| state.subject.iter().any(|s| words_match(n, s)));
        if !of_subject {
            continue;
        }
        // A cause that affirms the state too ("valid tokens were rejected as expired": a
        // clock ahead, not an expiry) names the failure as it was seen, not as what
        // happened; a safeguard it denies ("returned early without closing it") still is.
        let agrees = affirmed.iter().any(|a| words_match(a, state.state));
        let failure = state.rules_out;
        let stems = |words: &[String], stems: &[&str]| -> Vec<String> {
            words
                .iter()
                .filter(|w| stems.iter().any(|stem| w.starts_with(stem)))
                .cloned()
                .collect()
        };
        if !agrees {
            out.extend(stems(&affirmed, failure.affirmed));
        }
        out.extend(stems(&denied, failure.denied));
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contradicted(query: &str, root_cause: &str) -> Vec<String> {
        contradicted_by_states(&healthy_states(query), root_cause)
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
                "an error path never closed its connections, which leaked until the pool was empty"
            ),
            vec!["closed", "leaked"]
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
    fn the_failure_must_be_of_the_subject_the_query_says_is_fine() {
        // A valid certificate says nothing of cache keys expiring.
        assert!(contradicted(
            "the certificate is valid",
            "all category keys had the same TTL and expired together"
        )
        .is_empty());
        // Flat traffic says nothing of a heap that grows.
        assert!(contradicted(
            "traffic is flat but the pods get OOMKilled",
            "an unbounded cache grew the heap"
        )
        .is_empty());
    }

    #[test]
    fn a_negated_or_subjectless_state_says_nothing() {
        assert!(healthy_states("the certificate is not valid for this name").is_empty());
        assert!(healthy_states("the certificate isn't valid").is_empty());
        assert!(healthy_states("is valid").is_empty());
        // A quoted message is a symptom, as for the negation rule.
        assert!(healthy_states("clients log 'the session is valid' then fail").is_empty());
    }

    #[test]
    fn a_root_cause_that_affirms_the_state_agrees() {
        // A clock ahead makes valid tokens look expired: the query's "valid" is the cause's.
        assert!(contradicted(
            "logins fail with token expired although the token is valid",
            "the host clock drifted ahead, so valid tokens were rejected as expired"
        )
        .is_empty());
    }

    #[test]
    fn a_root_cause_that_denies_the_failure_agrees() {
        assert!(contradicted(
            "the certificate is valid",
            "the certificate had not expired; the chain was incomplete"
        )
        .is_empty());
    }

    #[test]
    fn a_root_cause_that_denies_the_safeguard_names_the_failure() {
        assert_eq!(
            contradicted(
                "pool timeouts: every borrowed connection is returned promptly",
                "the decline path fetched a connection and returned early without closing it"
            ),
            vec!["closing"]
        );
        assert_eq!(
            contradicted(
                "the client certificate is valid",
                "the certificate was installed by hand and never renewed"
            ),
            vec!["renewed"]
        );
        // Of the subject only: a quantifier is not one ("every").
        assert!(contradicted(
            "every borrowed connection is returned promptly",
            "every retry opened a socket without closing it"
        )
        .is_empty());
    }

    #[test]
    fn states_are_read_per_clause() {
        let states = healthy_states("the replicas are current, the CDN cached the response");
        assert_eq!(
            states,
            vec![HealthyState {
                subject: vec!["replicas".to_owned()],
                state: "current",
                rules_out: &STALENESS
            }]
        );
        assert_eq!(
            contradicted_by_states(&states, "the read replicas were lagging by minutes"),
            vec!["lagging"]
        );
    }
}
