//! Words of a query and of an episode, compared cheaply: the lexical side of ranking and of
//! the recognition evidence. No stemmer, no dictionary: lowercased words, a short stopword
//! list, prefix matching for inflections, and "literals" (error strings and identifiers).

use std::collections::{BTreeSet, HashSet};

const STOPWORDS: &[&str] = &[
    "the", "and", "for", "with", "from", "was", "were", "are", "not", "but", "too", "has", "had",
    "have", "this", "that", "into", "after", "when", "then", "than", "due", "our", "all", "any",
    "its", "out", "one", "two", "per", "via", "each", "since", "while", "over", "under", "again",
    "same", "new", "still", "now", "only", "also", "every",
];

/// Lowercased words of three or more letters or digits, stopwords removed.
pub fn terms(text: &str) -> HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| is_term(w))
        .collect()
}

/// Whether a lowercased word counts as one of [`terms`]: three or more characters, not a
/// stopword.
pub fn is_term(word: &str) -> bool {
    word.chars().count() >= 3 && !STOPWORDS.contains(&word)
}

/// Words match when equal or when one is a prefix of the other with at least four letters
/// (`test`/`tests`, `evict`/`eviction`): cheap stemming.
pub fn words_match(word: &str, term: &str) -> bool {
    word == term
        || (word.len().min(term.len()) >= 4 && (word.starts_with(term) || term.starts_with(word)))
}

/// Whether `word` matches one of `terms` ([`words_match`]).
pub fn matches_a_term(word: &str, terms: &HashSet<String>) -> bool {
    terms.iter().any(|term| words_match(word, term))
}

/// Whether any word of `text` matches a query term.
pub fn shares_a_term(text: &str, query_terms: &HashSet<String>) -> bool {
    terms(text)
        .iter()
        .any(|word| matches_a_term(word, query_terms))
}

/// "Resolved with a matching root cause": resolved, a root cause is recorded, and it shares
/// a meaningful word with the query (so an episode resolved for an unrelated reason gets no
/// bonus). Good enough for a 0.02 tie-break.
pub fn resolved_with_matching_root_cause(
    resolved: bool,
    root_cause: Option<&str>,
    query_terms: &HashSet<String>,
) -> bool {
    match root_cause {
        Some(root_cause) if resolved && !root_cause.trim().is_empty() => {
            shares_a_term(root_cause, query_terms)
        }
        _ => false,
    }
}

/// Literal error strings and identifiers in `text`, lowercased: the tokens a person would
/// paste into a full-text search — `CLOSE_WAIT`, `ECONNRESET`, `OOMKilled`, `max_connections`,
/// `ERR_CERT_DATE_INVALID`, HTTP-like status codes (`503`), `x509`. A token counts when it has
/// an underscore, mixes letters and digits, is an all-caps word of five or more letters (not
/// one every report has, like `ERROR`), or has an inner capital (camel case). Plain words and plain numbers other than 3-digit codes
/// are not literals.
pub fn literals(text: &str) -> BTreeSet<String> {
    text.split_whitespace()
        // `4,012` or `1.5` is a count or a size, never an identifier: drop it whole
        // rather than let `012` pass as a code.
        .filter(|chunk| {
            let chunk = chunk.trim_matches(|c: char| !c.is_alphanumeric());
            !(chunk.contains([',', '.'])
                && chunk
                    .chars()
                    .all(|c| c.is_ascii_digit() || c == ',' || c == '.'))
        })
        .flat_map(|chunk| chunk.split(|c: char| !(c.is_alphanumeric() || c == '_')))
        .map(|token| token.trim_matches('_'))
        .filter(|token| is_literal(token))
        .map(str::to_lowercase)
        .filter(|token| !COMMON_CAPS.contains(&token.as_str()))
        .collect()
}

/// All-caps words every incident report has: not identifying.
const COMMON_CAPS: &[&str] = &[
    "https", "error", "fatal", "alert", "firing", "critical", "warning", "false",
];

fn is_literal(token: &str) -> bool {
    let chars = token.chars().count();
    if !(3..=64).contains(&chars) {
        return false;
    }
    let letters = token.chars().filter(|c| c.is_alphabetic()).count();
    let digits = token.chars().filter(|c| c.is_ascii_digit()).count();
    if letters == 0 {
        // 3-digit codes (HTTP statuses, exit codes) identify a failure; other numbers are
        // counts and sizes that differ between every two incidents.
        return chars == 3 && digits == 3;
    }
    let underscore = token.contains('_');
    let mixed = digits > 0;
    let all_caps = letters >= 5 && token.chars().all(|c| !c.is_lowercase());
    let camel =
        token.chars().skip(1).any(|c| c.is_uppercase()) && token.chars().any(|c| c.is_lowercase());
    underscore || mixed || all_caps || camel
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_drop_short_words_and_stopwords() {
        let t = terms("The Redis evictions, after a deploy: OOM");
        assert!(t.contains("redis") && t.contains("evictions") && t.contains("oom"));
        assert!(!t.contains("the") && !t.contains("after"));
    }

    #[test]
    fn a_root_cause_matches_when_it_shares_a_stemmed_word_with_the_query() {
        let query = terms("Maven OOM surveys-module test failure Jenkins");
        let matching = Some("surefire heap too small for the surveys tests");
        assert!(resolved_with_matching_root_cause(true, matching, &query));
        assert!(!resolved_with_matching_root_cause(
            true,
            Some("expired TLS certificate"),
            &query
        ));
        assert!(!resolved_with_matching_root_cause(false, matching, &query));
        assert!(!resolved_with_matching_root_cause(true, Some("  "), &query));
    }

    #[test]
    fn literals_are_error_strings_and_identifiers_not_plain_words() {
        let found = literals(
            "Pods OOMKilled; 4,012 sockets in CLOSE_WAIT, ECONNRESET from api-v2 and HTTP 503 \
             after 30 seconds. The Service is DOWN, ERROR logged, READONLY replica.",
        );
        let expected: BTreeSet<String> =
            ["oomkilled", "close_wait", "econnreset", "503", "readonly"]
                .into_iter()
                .map(String::from)
                .collect();
        assert_eq!(found, expected);
    }

    #[test]
    fn numbers_other_than_three_digit_codes_are_not_literals() {
        assert!(literals("4012 connections, 30 s, 1.5 GB").is_empty());
        assert_eq!(
            literals("exit 137").into_iter().collect::<Vec<_>>(),
            ["137"]
        );
    }
}
