//! What the query says is *not* the case, and the past root causes that contradict it.
//!
//! A look-alike shares a past incident's symptoms, services and vocabulary; what often tells
//! it apart is what the agent already ruled out: "the new cert is not expired", "no secret
//! rotation happened", "no DDL or migration running", "host clocks are in sync". When such a
//! denied phrase names a word that a past episode's root cause *affirms* ("… had expired at
//! midnight"), the agent's own evidence rules that episode's mechanism out: it may still be
//! shown as a `possible` lead, never as a recognized recurrence.
//!
//! No parser, no model: clauses, a short list of negation cues and a narrow scope after each
//! (up to three content words, stopping at a preposition or the next cue) or before a
//! trailing one ("… unchanged", "… are fine", "… in sync"); a denial of "the cause" or "the
//! problem", and "ruled out" with nothing after it, deny their subject ("rebalancing isn't
//! the cause", "consumer rebalancing was considered and ruled out"). The rule errs towards *not*
//! contradicting:
//! - quoted text and well-known negative error messages ("No space left on device", "not
//!   found") are symptoms, not denials, and are skipped;
//! - a quantity or a hedge after a cue denies nothing ("not all pods", "no more than 40",
//!   "no longer runs", "not sure why"), and a denial passes through a sign of or a change to
//!   what it names ("no sign of memory pressure", "no changes to the firewall"): otherwise
//!   "pods", "sign" or "changes" would contradict every cause that names them;
//! - when the root cause denies the same phrase ("created without CONCURRENTLY" against "it
//!   was not created concurrently", "set no client timeout" against "no read timeout"), the
//!   two agree and nothing is contradicted.

use crate::ranking::terms::{is_term, terms, words_match};
use std::collections::HashSet;
use std::ops::Range;

/// Words a negation's scope skips: auxiliaries and fillers that carry no mechanism
/// ("no secret rotation *happened*", "nothing was *changed*").
const SCOPE_FILLERS: &[&str] = &[
    "been",
    "being",
    "some",
    "them",
    "they",
    "their",
    "there",
    "which",
    "what",
    "just",
    "about",
    // "no clear sign of memory pressure": how sure, not what.
    "clear",
    "obvious",
    "definite",
    "real",
    "more",
    "less",
    "very",
    "much",
    "many",
    "yet",
    "happened",
    "changed",
    "change",
    "done",
    "seen",
    "found",
    "involved",
    "exists",
    "exist",
    "considered",
    // "X was investigated (first) and ruled out": how the subject was checked, not what.
    "investigated",
    "checked",
    "examined",
    "suspected",
    "tested",
    "first",
    "initially",
    // "not seeing any evictions": that someone looked, not what.
    "seeing",
    "see",
    "observed",
    // "no obvious errors", "no recent config changes", "no changes were made": how much or
    // when, not what ("recent" would otherwise deny every cause that says "recently").
    "obvious",
    "apparent",
    "significant",
    "noticeable",
    "unusual",
    "recent",
    "recently",
    "made",
];

/// How many content words a negation reaches.
const SCOPE: usize = 3;

/// Cues that deny what follows them.
const LEADING_CUES: &[&str] = &[
    "no", "not", "never", "without", "nothing", "none", "neither", "nor", "isn't", "aren't",
    "wasn't", "weren't", "didn't", "doesn't", "don't", "hasn't", "haven't", "unlikely",
];

/// Leading cues that deny what something *is* ("it isn't time drift"): a hypothesis ruled
/// out, where "no" and "without" may say what was missing.
const COPULAR_CUES: &[&str] = &["isn't", "aren't", "wasn't", "weren't"];

/// Words after which "not" denies what something is ("it was not the deploy").
const COPULAS: &[&str] = &["is", "was", "are", "were", "it's", "that's"];

/// Words after which a leading cue denies nothing: a quantity or a hedge ("not all pods are
/// affected", "not only timeouts", "no more than 40 connections", "the job no longer runs",
/// "not sure why the cache misses rose"), not a hypothesis ruled out. Read as a denial, each
/// would contradict every past cause that names pods, timeouts or the cache.
const NOT_A_DENIAL_AFTER: &[&str] = &[
    "all",
    "every",
    "just",
    "only",
    "always",
    "much",
    "many",
    "more",
    "less",
    "fewer",
    "longer",
    "sure",
    "idea",
    "doubt",
    "necessarily",
    "exactly",
    "quite",
    // "no other service is affected": besides the one the text names, which did happen.
    "other",
];

/// Nouns a denial passes through to what they tell of: "no sign of memory pressure" and "no
/// evidence the certificate expired" deny the memory pressure and the expiry, not a sign
/// ("sign" would contradict every cause about certificate signing).
const EVIDENCE_NOUNS: &[&str] = &[
    "sign",
    "signs",
    "evidence",
    "indication",
    "indications",
    "trace",
    "traces",
    "hint",
    "hints",
];

/// Nouns a denial passes through when a word leads to what they are of ([`PASSED_TO`]): "no
/// changes to the firewall" and "nothing changed in the nginx config" deny the firewall and
/// the config, as "the firewall is unchanged" does, not every cause that names a change.
/// Alone ("no changes") they are what is denied.
const CHANGE_NOUNS: &[&str] = &[
    "change",
    "changes",
    "changed",
    "update",
    "updates",
    "modification",
    "modifications",
];

/// The words that lead from an [`EVIDENCE_NOUNS`] or [`CHANGE_NOUNS`] noun to what it is of.
const PASSED_TO: &[&str] = &["of", "that", "to", "in", "on"];

/// Cues that deny what precedes them, as word sequences.
const TRAILING_CUES: &[&[&str]] = &[
    &["unchanged"],
    &["untouched"],
    &["intact"],
    &["in", "sync"],
    &["is", "fine"],
    &["are", "fine"],
    &["was", "fine"],
    &["were", "fine"],
    &["is", "flat"],
    &["are", "flat"],
    &["was", "correct"],
    &["is", "correct"],
    &["were", "correct"],
    &["are", "correct"],
    &["is", "healthy"],
    &["are", "healthy"],
    &["is", "normal"],
    &["are", "normal"],
    &["look", "normal"],
    &["looks", "normal"],
    &["red", "herring"],
    &["collateral", "damage"],
];

/// A negation's scope ends at a preposition: "not met *on* one server" denies "met".
const SCOPE_ENDS: &[&str] = &[
    "on", "in", "at", "for", "from", "by", "to", "of", "with", "after", "before", "during",
    "because", "since", "as", "between", "across", "within", "through",
];

/// What a denial names when it denies its subject rather than what follows: "rebalancing
/// isn't *the cause*", "DNS was not *the problem*".
const SUBJECT_DENIALS: &[&str] = &[
    "cause",
    "culprit",
    "problem",
    "issue",
    "root",
    "blame",
    "reason",
    "trigger",
    "factor",
    "explanation",
    "it",
];

/// What a subject was instead of the cause ("promo-engine latency was *a consequence*, not
/// the cause", "the retries were *a side effect*"): not part of what is ruled out, and not
/// something the text affirms.
const ROLES: &[&str] = &[
    "consequence",
    "consequences",
    "symptom",
    "symptoms",
    "effect",
    "effects",
    "side",
    "result",
    "downstream",
];

/// Clause boundaries besides punctuation.
const CLAUSE_WORDS: &[&str] = &["but", "and", "while", "though", "although", "because", "so"];

/// Negative error messages: what a system printed, not what the agent ruled out.
const ERROR_MESSAGES: &[&str] = &[
    "no space left on device",
    "no space left",
    "no such file or directory",
    "no such file",
    "no such host",
    "no route to host",
    "no healthy upstream",
    "not found",
    "no data",
    "no servers available",
    "no available server",
];

/// `text` as one phrase: its content words, lowercased, in order (the form
/// [`denied_phrases`] gives), so that a hypothesis listed as ruled out can be compared like a
/// denied phrase.
pub fn phrase(text: &str) -> Vec<String> {
    clauses(&readable(text))
        .iter()
        .flat_map(|clause| {
            let words: Vec<&str> = clause.iter().map(String::as_str).collect();
            content_words(&words)
        })
        .collect()
}

/// The phrases of `text` that it denies, each as its content words (lowercased, as
/// [`terms`] makes them), in text order.
pub fn denied_phrases(text: &str) -> Vec<Vec<String>> {
    denials(text)
        .into_iter()
        .map(|(phrase, _)| phrase)
        .collect()
}

/// The phrases `text` rules out as hypotheses: the subject of its denial ("clock drift
/// between servers was investigated and ruled out", "rebalancing isn't the cause", "the
/// config is unchanged") or what a copula denies ("it isn't time drift", "not a provider
/// outage"). Unlike "no timeout" or "without a lock" (what a cause may say was missing), a
/// conclusion never affirms these.
pub fn ruled_out_subjects(text: &str) -> Vec<Vec<String>> {
    denials(text)
        .into_iter()
        .filter(|(_, of_subject)| *of_subject)
        .map(|(phrase, _)| phrase)
        .collect()
}

/// What `text` denies ([`denied_phrases`]) and, among it, what it rules out as hypotheses
/// ([`ruled_out_subjects`]), read in one pass.
pub fn denied_and_ruled_out(text: &str) -> (Vec<Vec<String>>, Vec<Vec<String>>) {
    let mut denied = Vec::new();
    let mut ruled_out = Vec::new();
    for (phrase, of_subject) in denials(text) {
        if of_subject {
            ruled_out.push(phrase.clone());
        }
        denied.push(phrase);
    }
    (denied, ruled_out)
}

/// Every phrase `text` denies, and whether it is ruled out as a hypothesis: the subject the
/// denial names (the words before the cue), or what a copula denies ("it isn't time drift",
/// "not a provider outage"), rather than what a cause may say was missing ("no timeout").
fn denials(text: &str) -> Vec<(Vec<String>, bool)> {
    let mut phrases = Vec::new();
    let mut push = |words: Vec<String>, of_subject: bool| {
        if !words.is_empty() {
            phrases.push((words, of_subject));
        }
    };
    let mut previous: Vec<String> = Vec::new();
    for clause in clauses(&readable(text)) {
        let words: Vec<&str> = clause.iter().map(String::as_str).collect();
        let mut negated = false;
        for i in 0..words.len() {
            if let Some(start) = leading_cue(&words, i) {
                negated = true;
                let (after, cut) = scope_after(&words, start);
                // A scope a preposition ends at once: a negated state or place ("clocks
                // aren't in sync", "the cert is not in the bundle") denies neither the
                // subject nor anything named after it. "Ruled out by …" still rules its
                // subject out.
                if after.is_empty() && cut && words[i] != "ruled" {
                    continue;
                }
                if names_only_its_subject(&after) {
                    // "rebalancing isn't the cause", "X was ruled out": the words before;
                    // "X was a consequence, not the cause": the clause before — not when a
                    // preposition goes on ("no problem with the network" says nothing of
                    // the clause before).
                    let mut subject = subject_of(content_words(&words[..i]));
                    if subject.is_empty() && i == 0 && !cut {
                        subject = subject_of(previous.clone());
                    }
                    let from = subject.len().saturating_sub(SCOPE);
                    push(subject.split_off(from), true);
                } else {
                    let copular = COPULAR_CUES.contains(&words[i])
                        || (words[i] == "not" && (i == 0 || COPULAS.contains(&words[i - 1])));
                    push(after.into_iter().take(SCOPE).collect(), copular);
                }
            }
        }
        // A trailing cue a negation precedes says the opposite ("clocks aren't in sync",
        // "the ratios are not fine"): no denial.
        if let Some(cue) = trailing_cue(&words).filter(|_| !negated) {
            push(last_words(&words[..cue.start]).collect(), true);
        }
        previous = content_words(&words);
    }
    phrases
}

/// The subject a denial of "the cause" names: `words` without the role the text gives it
/// instead ("promo-engine latency was a consequence" → "promo engine latency").
fn subject_of(mut words: Vec<String>) -> Vec<String> {
    while words.last().is_some_and(|w| ROLES.contains(&w.as_str())) {
        words.pop();
    }
    words
}

/// What `text` denies, when that is all it says: every content word outside its cues is in
/// a phrase it denies or names "the cause" it denies ("rebalancing isn't the cause", "DNS was
/// ruled out"). Such a text is no conclusion; "staging config applied globally; DDoS ruled
/// out" affirms a cause and is one (`None`).
pub fn only_denies(text: &str) -> Option<Vec<Vec<String>>> {
    let denied = denied_phrases(text);
    let affirms_something = clauses(&readable(text)).iter().any(|clause| {
        let words: Vec<&str> = clause.iter().map(String::as_str).collect();
        // The cues themselves ("isn't", "ruled out", "is fine") affirm nothing.
        let mut is_cue = vec![false; words.len()];
        for i in 0..words.len() {
            if let Some(scope_start) = leading_cue(&words, i) {
                is_cue[i..scope_start.min(words.len())].fill(true);
            }
        }
        if let Some(cue) = trailing_cue(&words) {
            is_cue[cue].fill(true);
        }
        let said: Vec<&str> = words
            .iter()
            .zip(&is_cue)
            .filter(|(_, cue)| !**cue)
            .map(|(word, _)| *word)
            .collect();
        content_words(&said).iter().any(|word| {
            !SUBJECT_DENIALS.contains(&word.as_str())
                && !ROLES.contains(&word.as_str())
                && !denied.iter().flatten().any(|d| words_match(d, word))
        })
    });
    (!denied.is_empty() && !affirms_something).then_some(denied)
}

/// Whether `text` only rules out hypotheses ([`ruled_out_subjects`]): "DDoS ruled out", "the
/// signing-key rotation was ruled out", "rebalancing isn't the cause", "it wasn't the
/// deploy". A missing safeguard ("no request coalescing", "without a lock timeout") is how a
/// cause says what was missing, not a ruled-out hypothesis, and it is not such a text.
pub fn only_rules_out(text: &str) -> bool {
    only_denies(text).is_some() && denials(text).iter().all(|(_, of_subject)| *of_subject)
}

/// The content words a leading cue at `start` reaches (up to the next cue or a
/// preposition), and whether a [`STATE_PREPOSITIONS`] preposition ended them — not the
/// clause's end, another cue, or a preposition that leads on ("unlikely *to* be the cause").
fn scope_after(words: &[&str], start: usize) -> (Vec<String>, bool) {
    let rest = &words[start.min(words.len())..];
    let end = rest
        .iter()
        .position(|w| is_leading_cue(w) || SCOPE_ENDS.contains(w))
        .unwrap_or(rest.len());
    let cut = rest
        .get(end)
        .is_some_and(|w| STATE_PREPOSITIONS.contains(w));
    (content_words(&rest[..end]), cut)
}

/// Prepositions of a state or place ("in sync", "in the bundle", "with the network"): a
/// negation they follow says where the subject is not, not that it is ruled out.
const STATE_PREPOSITIONS: &[&str] = &["in", "on", "at", "with", "within", "inside"];

/// Whether a cue's scope names only the subject it denies ("isn't *the cause*", "ruled out"
/// with nothing after it), so that what is denied is the words before the cue.
fn names_only_its_subject(after: &[String]) -> bool {
    after.iter().all(|w| SUBJECT_DENIALS.contains(&w.as_str()))
}

/// Whether the first clause of `text` only denies ("The crawler was ruled out (flat rate)",
/// "rebalancing isn't the cause, so …"): a text that opens by ruling something out is an
/// answer's account of the investigation, not a statement of its cause. "Keys without a TTL"
/// and "expired certificate; clock skew ruled out" open with what they affirm.
pub fn opens_with_denial(text: &str) -> bool {
    clauses(&readable(text))
        .first()
        .is_some_and(|first| only_denies(&first.join(" ")).is_some())
}

/// The words of `root_cause` it affirms that one of `denied` (the query's denied phrases)
/// names; empty when none, or when the root cause denies the same phrase too.
pub fn contradicted_words(denied: &[Vec<String>], root_cause: &str) -> Vec<String> {
    if denied.is_empty() {
        return Vec::new();
    }
    let (root_cause_denies, affirmed) = affirmed_terms(root_cause);
    let mut out: Vec<String> = Vec::new();
    for phrase in denied {
        let agrees = phrase
            .iter()
            .any(|p| root_cause_denies.iter().any(|d| words_match(d, p)));
        if agrees {
            continue;
        }
        out.extend(
            affirmed
                .iter()
                .filter(|a| phrase.iter().any(|p| words_match(a, p)))
                .cloned(),
        );
    }
    out.sort();
    out.dedup();
    out
}

/// The terms `text` affirms: those outside every phrase it denies.
pub(super) fn affirmed_words(text: &str) -> Vec<String> {
    affirmed_terms(text).1
}

/// What `root_cause` denies, and the terms it affirms (the others).
fn affirmed_terms(root_cause: &str) -> (HashSet<String>, Vec<String>) {
    let denies: HashSet<String> = denied_phrases(root_cause).into_iter().flatten().collect();
    let affirmed = terms(root_cause)
        .into_iter()
        .filter(|w| !denies.contains(w))
        .collect();
    (denies, affirmed)
}

/// The words of the `hypotheses` (each a ruled-out hypothesis's terms) that `root_cause`
/// affirms *all* of: a hypothesis is ruled out as a whole, so "an expired certificate"
/// contradicts "the client certificate had expired", not every cause that names a
/// certificate.
pub fn contradicted_hypotheses(hypotheses: &[Vec<String>], root_cause: &str) -> Vec<String> {
    let mut out: Vec<String> = affirmed_whole(hypotheses, root_cause)
        .into_iter()
        .flatten()
        .cloned()
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The `phrases` (each as its terms) that `text` affirms every term of, in their order.
pub fn affirmed_whole<'a>(phrases: &'a [Vec<String>], text: &str) -> Vec<&'a Vec<String>> {
    if phrases.is_empty() {
        return Vec::new();
    }
    let (_, affirmed) = affirmed_terms(text);
    phrases
        .iter()
        .filter(|phrase| {
            !phrase.is_empty()
                && phrase
                    .iter()
                    .all(|word| affirmed.iter().any(|a| words_match(a, word)))
        })
        .collect()
}

/// Whether the word at `i` opens a denial, and where its scope starts ("instead of"
/// denies what follows "of"). "Cannot" and "can't" report an inability (a symptom: "cannot
/// find the key"), not something ruled out, so they are no cues.
fn leading_cue(words: &[&str], i: usize) -> Option<usize> {
    let next = words.get(i + 1);
    if is_leading_cue(words[i]) {
        if next.is_some_and(|next| NOT_A_DENIAL_AFTER.contains(next)) {
            return None;
        }
        Some(passed_through(words, i + 1))
    } else if (words[i] == "instead" && next == Some(&"of"))
        || (words[i] == "ruled" && next == Some(&"out"))
    {
        // "ruled out X", or, with nothing after it, "X was ruled out" (its subject).
        Some(i + 2)
    } else {
        None
    }
}

/// Where a denial's scope starts when the cue's first word is an [`EVIDENCE_NOUNS`] noun
/// ("no *sign of* memory pressure", "no *evidence* the certificate expired") or a
/// [`CHANGE_NOUNS`] one that a word leads on from ("no *changes were made to* the
/// firewall"): after them. Elsewhere `start` itself.
fn passed_through(words: &[&str], start: usize) -> usize {
    let skippable = |w: &&str| !is_term(w) || SCOPE_FILLERS.contains(w);
    let passed = |w: &&str| EVIDENCE_NOUNS.contains(w) || CHANGE_NOUNS.contains(w);
    let mut at = start;
    while words.get(at).is_some_and(|w| !passed(w) && skippable(w)) {
        at += 1;
    }
    let Some(noun) = words.get(at).filter(|w| passed(w)) else {
        return start;
    };
    at += 1;
    while words
        .get(at)
        .is_some_and(|w| !PASSED_TO.contains(w) && skippable(w))
    {
        at += 1;
    }
    if words.get(at).is_some_and(|w| PASSED_TO.contains(w)) {
        at + 1
    } else if EVIDENCE_NOUNS.contains(noun) {
        at
    } else {
        start
    }
}

pub(super) fn is_leading_cue(word: &str) -> bool {
    LEADING_CUES.contains(&word)
}

/// Where the first trailing cue of a clause is, if any.
fn trailing_cue(words: &[&str]) -> Option<Range<usize>> {
    (0..words.len()).find_map(|i| {
        TRAILING_CUES
            .iter()
            .find(|cue| words[i..].starts_with(cue))
            .map(|cue| i..i + cue.len())
    })
}

/// The content words of a scope, as [`terms`] defines them, in order.
pub(super) fn content_words(words: &[&str]) -> Vec<String> {
    words
        .iter()
        .flat_map(|w| w.split(|c: char| !c.is_alphanumeric()))
        .filter(|w| is_term(w) && !SCOPE_FILLERS.contains(w))
        .map(str::to_owned)
        .collect()
}

/// The last [`SCOPE`] content words of `words`.
fn last_words(words: &[&str]) -> impl Iterator<Item = String> {
    let before = content_words(words);
    let from = before.len().saturating_sub(SCOPE);
    before.into_iter().skip(from)
}

/// Clauses as lists of words (an apostrophe stays inside a word: "isn't").
fn clauses(text: &str) -> Vec<Vec<String>> {
    let mut out = vec![Vec::new()];
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut Vec<Vec<String>>| {
        if word.is_empty() {
            return;
        }
        let w = std::mem::take(word);
        let w = w.trim_matches('\'').to_owned();
        if CLAUSE_WORDS.contains(&w.as_str()) {
            out.push(Vec::new());
        } else if !w.is_empty() {
            if let Some(last) = out.last_mut() {
                last.push(w);
            }
        }
    };
    for c in text.chars() {
        if c.is_alphanumeric() || c == '\'' || c == '_' || c == '-' {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            if matches!(c, ';' | ',' | '.' | ':' | '(' | ')' | '!' | '?' | '/') {
                out.push(Vec::new());
            }
        }
    }
    flush(&mut word, &mut out);
    out.retain(|c| !c.is_empty());
    out
}

/// The clauses of `text` as the cues read it ([`readable`]), each as its words.
pub(super) fn clauses_of(text: &str) -> Vec<Vec<String>> {
    clauses(&readable(text))
}

/// `text` as the cues read it: lowercased, without quoted text or negative error messages,
/// and "X was considered and ruled out" kept one clause, so it rules X out.
fn readable(text: &str) -> String {
    without_error_messages(&straight_apostrophes(&without_quotes(&text.to_lowercase())))
        .replace(" and ruled out", " ruled out")
}

/// "isn’t" as "isn't": a typographic apostrophe inside a word (left after
/// [`without_quotes`] blanked the ‘…’ quotes) would split the contraction in two and hide
/// its cue.
fn straight_apostrophes(text: &str) -> String {
    text.replace(['\u{2019}', '\u{2018}'], "'")
}

/// `text` with quoted spans ('…', "…", `…`) blanked: a quoted error message such as
/// 'certificate is not valid for this name' is a symptom. A quote opens only at the start
/// or after a space or bracket, so the apostrophe of "isn't" or "callers'" opens nothing.
fn without_quotes(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let opens = matches!(c, '\'' | '"' | '`' | '‘' | '“')
            && (i == 0 || chars[i - 1].is_whitespace() || matches!(chars[i - 1], '(' | '['));
        if opens {
            let close = match c {
                '‘' => '’',
                '“' => '”',
                other => other,
            };
            // The closing quote is one that no letter follows ("isn't" inside a quote
            // does not close it).
            let closing = (i + 1..chars.len()).find(|&j| {
                chars[j] == close && chars.get(j + 1).is_none_or(|n| !n.is_alphanumeric())
            });
            if let Some(j) = closing {
                out.push_str(" , ");
                i = j + 1;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    out
}

/// `text` with every [`ERROR_MESSAGES`] message blanked where it stands as words ("no data",
/// not the start of "no database failover").
fn without_error_messages(text: &str) -> String {
    let mut text = text.to_owned();
    for message in ERROR_MESSAGES {
        let mut from = 0;
        while let Some(found) = text[from..].find(message) {
            let at = from + found;
            let end = at + message.len();
            let bounded = |c: Option<char>| c.is_none_or(|c| !c.is_alphanumeric());
            if bounded(text[..at].chars().next_back()) && bounded(text[end..].chars().next()) {
                text.replace_range(at..end, " , ");
                from = at + 3;
            } else {
                from = end;
            }
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_opens_with_a_denial_only_when_its_first_clause_affirms_nothing() {
        assert!(opens_with_denial("The crawler was ruled out (flat rate)."));
        assert!(opens_with_denial(
            "Rebalancing isn't the cause, so the lag comes from the slow handler."
        ));
        assert!(!opens_with_denial(
            "LDAP calls without a timeout held every thread"
        ));
        assert!(!opens_with_denial(
            "expired webhook certificate; clock skew ruled out"
        ));
        assert!(!opens_with_denial(""));
    }

    #[test]
    fn a_phrase_is_the_content_words_in_order() {
        assert_eq!(
            super::phrase("The Network issue!"),
            vec!["network", "issue"]
        );
        assert!(super::phrase("the").is_empty());
    }

    #[test]
    fn a_text_that_only_denies_affirms_nothing() {
        assert_eq!(
            only_denies("rebalancing isn't the cause"),
            Some(vec![phrase(&["rebalancing"])])
        );
        assert!(only_denies("DNS was ruled out").is_some());
        assert!(only_denies("not a consistency issue").is_some());
        assert!(only_denies("staging config applied globally; DDoS ruled out").is_none());
        assert!(only_denies("disk full: no space left on device").is_none());
        assert!(only_denies("redis maxmemory too small").is_none());
        assert!(only_denies("").is_none());
    }

    fn denied(text: &str) -> Vec<Vec<String>> {
        denied_phrases(text)
    }

    fn phrase(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn a_negation_reaches_the_next_few_content_words_up_to_a_preposition() {
        assert_eq!(
            denied("orders-db slow; no DDL or migration running, no lock waits in pg_locks"),
            vec![
                phrase(&["ddl", "migration", "running"]),
                phrase(&["lock", "waits"])
            ]
        );
        assert_eq!(
            denied("SAML assertions rejected as NotBefore condition not met on one app server"),
            vec![phrase(&["met"])]
        );
        assert_eq!(
            denied(
                "401 since the gateway began re-serializing bodies; no secret rotation happened"
            ),
            vec![phrase(&["secret", "rotation"])]
        );
        assert_eq!(
            denied("the endpoint isn't reachable"),
            vec![phrase(&["reachable"])]
        );
    }

    #[test]
    fn a_quantity_or_a_hedge_after_a_cue_denies_nothing() {
        // Each would otherwise contradict every past cause that names pods, timeouts, the
        // cache or connections, and "not sure" would rule out a hypothesis.
        for text in [
            "not all pods are affected, only the ones on node-7",
            "not every request fails; about 3% do",
            "not only timeouts but also 503s",
            "not sure why the cache misses rose",
            "no idea why the replicas lag",
            "no more than 40 connections open",
            "the job no longer runs after 02:00",
            "no other service is affected",
        ] {
            assert!(denied(text).is_empty(), "{text}");
            assert!(ruled_out_subjects(text).is_empty(), "{text}");
        }
        // The same cues before what they deny still deny it.
        assert_eq!(
            denied("not a capacity problem"),
            vec![phrase(&["capacity", "problem"])]
        );
    }

    /// A negated state or place says the subject is out of it — the evidence of a failure,
    /// not a hypothesis ruled out: nothing is denied, so the recurrence it describes is not
    /// contradicted.
    #[test]
    fn a_negation_a_preposition_ends_at_once_denies_no_subject() {
        for query in [
            "401 invalid audience after the rename; host clocks aren't in sync",
            "host clocks aren\u{2019}t in sync",
            "the intermediate cert is not in the bundle",
            "Redis evicting keys under memory pressure; no problem with the network",
        ] {
            let denied = denied(query);
            for cause in [
                "chronyd stopped on two hosts, so their clocks drifted 90 s",
                "The intermediate certificate was missing from the bundle",
                "maxmemory too low: memory pressure evicted session keys",
            ] {
                assert!(
                    contradicted_words(&denied, cause).is_empty(),
                    "{query:?} contradicts {cause:?}: {denied:?}"
                );
            }
        }
        // What a cue with no preposition after it denies is unchanged; "ruled out by" still
        // rules its subject out.
        assert_eq!(
            denied("host clocks are in sync"),
            vec![phrase(&["host", "clocks"])]
        );
        assert_eq!(
            denied("DNS was ruled out by the network team"),
            vec![phrase(&["dns"])]
        );
        assert_eq!(
            denied("rebalancing isn't the cause of the lag"),
            vec![phrase(&["rebalancing"])]
        );
    }

    #[test]
    fn a_typographic_apostrophe_keeps_its_contraction_a_cue() {
        assert_eq!(
            denied("the new cert isn\u{2019}t expired"),
            denied("the new cert isn't expired")
        );
        assert!(!denied("the new cert isn\u{2019}t expired").is_empty());
    }

    #[test]
    fn an_error_message_is_blanked_only_as_whole_words() {
        assert_eq!(
            denied("no database failover happened"),
            vec![phrase(&["database", "failover"])]
        );
        assert!(denied("the exporter reports no data since 02:00").is_empty());
        assert_eq!(
            denied("no clear sign of memory pressure"),
            vec![phrase(&["memory", "pressure"])]
        );
    }

    #[test]
    fn a_denial_passes_through_a_sign_of_or_a_change_to_what_it_names() {
        assert_eq!(
            denied("no sign of memory pressure on the brokers"),
            vec![phrase(&["memory", "pressure"])]
        );
        assert_eq!(
            denied("there's no evidence the certificate expired"),
            vec![phrase(&["certificate", "expired"])]
        );
        assert_eq!(
            denied("there is no indication of packet loss between the zones"),
            vec![phrase(&["packet", "loss"])]
        );
        assert_eq!(
            denied("no changes were made to the firewall since Tuesday"),
            vec![phrase(&["firewall"])]
        );
        assert_eq!(
            denied("nothing changed in the nginx config"),
            vec![phrase(&["nginx", "config"])]
        );
        // A change noun with nothing it is of is what is denied, with its qualifier.
        assert_eq!(
            denied("no recent config changes; no price changes were made"),
            vec![
                phrase(&["config", "changes"]),
                phrase(&["price", "changes"])
            ]
        );
        assert_eq!(
            denied("not seeing any evictions"),
            vec![phrase(&["evictions"])]
        );
        // None of these is a hypothesis ruled out: "no" may say what was missing.
        assert!(ruled_out_subjects("no sign of memory pressure").is_empty());
        // So a cause about signing is no longer contradicted by "no sign of".
        assert!(contradicted_words(
            &denied("no sign of memory pressure on the brokers"),
            "the release pipeline signed the image with the revoked key"
        )
        .is_empty());
    }

    #[test]
    fn a_trailing_cue_denies_what_precedes_it_in_its_clause() {
        assert_eq!(
            denied("401 invalid audience after the rename; host clocks are in sync"),
            vec![phrase(&["host", "clocks"])]
        );
        assert_eq!(
            denied("garbled names after the charset change; columns and schema unchanged"),
            vec![phrase(&["schema"])]
        );
    }

    #[test]
    fn a_denial_of_the_cause_or_ruled_out_denies_its_subject() {
        assert_eq!(
            denied("Rebalancing isn't the cause: lag was already rising before 15:41"),
            vec![phrase(&["rebalancing"])]
        );
        assert_eq!(
            denied("Consumer rebalancing was considered and ruled out."),
            vec![phrase(&["consumer", "rebalancing"])]
        );
        assert_eq!(
            denied("We ruled out DNS early; the resolver answered in 2 ms"),
            vec![phrase(&["dns", "early"])]
        );
        assert_eq!(
            denied("the disk was not the problem"),
            vec![phrase(&["disk"])]
        );
    }

    #[test]
    fn one_pass_reads_what_a_text_denies_and_what_it_rules_out() {
        let text = "Not a provider outage; no read timeout was set. DNS was ruled out.";
        assert_eq!(
            denied_and_ruled_out(text),
            (denied_phrases(text), ruled_out_subjects(text))
        );
        assert_eq!(
            ruled_out_subjects(text),
            vec![phrase(&["provider", "outage"]), phrase(&["dns"])]
        );
        assert_eq!(denied_phrases(text).len(), 3);
    }

    #[test]
    fn what_was_a_consequence_not_the_cause_or_a_red_herring_is_ruled_out() {
        // inc-dev-057's last answer, as the local model wrote it into the root cause.
        let text = "promo-engine latency was a consequence, not the cause";
        assert_eq!(
            ruled_out_subjects(text),
            vec![phrase(&["promo", "engine", "latency"])]
        );
        assert!(only_rules_out(text));
        assert_eq!(
            ruled_out_subjects("The retries were a side effect. Not the cause."),
            vec![phrase(&["retries"])]
        );
        assert_eq!(
            ruled_out_subjects("the network blip was a red herring"),
            vec![phrase(&["network", "blip"])]
        );
        assert_eq!(
            ruled_out_subjects("DNS resolution is collateral damage: resolvers share the links"),
            vec![phrase(&["dns", "resolution"])]
        );
        // A clause of its own that denies "the cause" names nothing when nothing precedes it.
        assert!(denied("not the cause").is_empty());
        // What a symptom came from is affirmed.
        assert!(!only_rules_out(
            "the latency was a symptom of the GC pauses"
        ));
        assert!(!only_rules_out(
            "unbounded price cache; promo-engine latency was a consequence, not the cause"
        ));
    }

    #[test]
    fn quoted_text_and_negative_error_messages_are_symptoms_not_denials() {
        assert!(denied("clients fail with 'certificate is not valid for this name'").is_empty());
        assert!(denied("writes fail with No space left on device on the node").is_empty());
        assert!(denied("GET /v1/orders returns not found for new ids").is_empty());
        // An apostrophe inside or after a word opens no quote.
        assert_eq!(
            denied("the callers' deadlines weren't passed down"),
            vec![phrase(&["passed", "down"])]
        );
    }

    #[test]
    fn a_root_cause_that_affirms_a_denied_word_is_contradicted() {
        let query = denied(
            "clients fail with hostname mismatch after renewing; the new cert is not expired, \
             only the SAN list changed",
        );
        assert_eq!(
            contradicted_words(
                &query,
                "The client certificate issued a year earlier had expired at midnight."
            ),
            vec!["expired".to_owned()]
        );
        assert!(contradicted_words(&query, "The SAN list lacked the new hostname.").is_empty());
    }

    #[test]
    fn a_root_cause_that_denies_the_same_phrase_agrees_with_the_query() {
        let query =
            denied("inserts time out while the index builds; it was not created concurrently");
        assert!(contradicted_words(
            &query,
            "An index was created without CONCURRENTLY on a 600 GB table."
        )
        .is_empty());
        let query = denied("worker threads all busy on a slow provider with no read timeout");
        assert!(contradicted_words(
            &query,
            "The service neither passed callers' deadlines down nor set a client timeout."
        )
        .is_empty());
    }

    #[test]
    fn a_word_the_root_cause_denies_in_passing_is_not_affirmed() {
        let query = denied(
            "OOMKilled on one 2 GB upload; memory is flat between requests and there is no cache",
        );
        assert_eq!(
            contradicted_words(
                &query,
                "A memoization dict cached every embedding with no size bound or expiry."
            ),
            vec!["cached".to_owned()]
        );
    }

    #[test]
    fn what_is_unlikely_to_be_the_cause_is_denied() {
        // inc-dev-020's answer, stored as its root cause by the local model.
        assert_eq!(
            denied(
                "those shards all pass checksum verification, so corrupt shards are \
                    unlikely to be the cause"
            ),
            vec![vec!["corrupt".to_owned(), "shards".to_owned()]]
        );
        assert!(contradicted_hypotheses(
            &[vec!["corrupt".to_owned(), "shards".to_owned()]],
            "descriptors leak per epoch; corrupt shards are unlikely to be the cause"
        )
        .is_empty());
    }

    #[test]
    fn nothing_denied_contradicts_nothing() {
        assert!(contradicted_words(&[], "anything at all").is_empty());
        assert!(denied("").is_empty());
    }
}
