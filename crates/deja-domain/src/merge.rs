//! How turns fold into an episode.
//!
//! Rules (each has a property test below):
//! - The conclusion (issue type, description, components, root cause, summary, resolved,
//!   key findings, run id) comes from the turn with the highest `turn_index` that was
//!   extracted, whatever the arrival order: a late, older turn never overwrites a newer
//!   conclusion (what it would conclude is never read, so the worker asks no LLM for it:
//!   [`is_superseded`]), and concludes an episode whose newer turns all failed.
//! - Key findings are replaced, not accumulated: they describe the latest conclusion.
//! - The opening message is the user message of the lowest turn index merged, whatever the
//!   arrival order (a late first turn replaces a later turn's); a failed turn sets it only
//!   on an episode without a vector to refresh (the failed path embeds nothing).
//! - Skills are a set union over every turn, late or failed ones included.
//! - `created_at` is the earliest turn's start and `agent_id` the lowest turn's agent,
//!   whatever the arrival order.
//! - An event id already merged changes nothing (at-least-once delivery becomes exactly-once
//!   in effect), unless it is the turn whose extraction failed (`deja retry`).
//! - A turn that failed for good records its index (`failed_turn_index`); only a turn at or
//!   above it clears the error, so a late or redelivered older turn never hides the failure.
//! - A newer turn that names no root cause keeps the earlier one, unless it lists that cause
//!   among the hypotheses it ruled out ("thanks, monitoring" does not erase what was found;
//!   "it was not the network after all" does).
//! - A root cause the same turn's `ruled_out` restates word for word, or one that only denies
//!   ("rebalancing isn't the cause", `recognition::negation::only_denies`), is not a
//!   conclusion: the episode keeps the earlier cause unless that is ruled out (or denied) too.
//!   The denial itself joins `ruled_out`.
//! - A root cause that affirms, as a whole, a phrase the turn's own answer denies, when the
//!   earlier conclusion affirmed it too ("it isn't LDAP capacity" after "the LDAP backend is
//!   out of capacity"), is the abandoned hypothesis kept by the model: neither is stored as
//!   the conclusion, and the earlier one joins `ruled_out`.
//! - A root cause that restates word for word a hypothesis an earlier turn ruled out (the
//!   stored `ruled_out`), while this turn's answer does not name that hypothesis, is the
//!   abandoned guess revived by the model, not a conclusion: the episode keeps the earlier
//!   cause and the hypothesis stays ruled out. An answer that names it again ("it was the
//!   schema change after all") may conclude it.

use crate::episode::{effectiveness_score, Episode, EpisodeKey, ExtractionStatus, Provenance};
use crate::extraction::ExtractedEpisode;
use crate::ranking::terms::{matches_a_term, terms};
use crate::recognition::negation;
use chrono::{DateTime, Utc};
use std::collections::HashSet;

/// One turn's contribution, whether or not its extraction succeeded.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnUpdate {
    pub event_id: String,
    pub org: String,
    pub team: String,
    pub agent_id: String,
    pub correlation_id: String,
    pub agent_run_id: String,
    pub turn_index: u32,
    pub skills: Vec<String>,
    pub started_at: DateTime<Utc>,
    pub ended_at: DateTime<Utc>,
    /// The phrases this turn's final answer denies ([`negation::denied_phrases`]): what the
    /// agent ruled out in its own words. Compared with the extracted causes, never stored.
    pub answer_denials: Vec<Vec<String>>,
    /// The phrases this turn's final answer names as ruled out ([`negation::ruled_out_subjects`]:
    /// "clock drift was investigated and ruled out"), which no reading of its cause may
    /// affirm. Never stored.
    pub answer_ruled_out: Vec<Vec<String>>,
    /// The meaningful words of this turn's final answer ([`terms`]): whether the answer names
    /// a hypothesis at all. Never stored.
    pub answer_terms: HashSet<String>,
    /// The words of the cause this turn's final answer states in so many words ("Final: …",
    /// [`crate::second_look::stated_cause`]), if it states one. Never stored.
    pub answer_stated_cause: Option<HashSet<String>>,
    /// Whether this turn's final answer revises anything: it rules something out or abandons
    /// a hypothesis (`affirmed::revises`). Never stored.
    pub answer_revises: bool,
    /// The turn's user message as an opening message ([`crate::opening_message_of`]): the
    /// episode keeps the first turn's.
    pub opening_message: Option<String>,
    /// Whether the runtime's `conclusion` block gave the issue description: a given
    /// description replaces the stored one whatever the turn (a later turn's extracted one does
    /// not).
    pub description_given: bool,
    /// Whether the runtime's `conclusion` block gave `components` / `key_findings`: a given
    /// list replaces the stored one even when empty (an extracted empty list is a small model
    /// leaving the field out, and keeps the earlier one).
    pub components_given: bool,
    pub key_findings_given: bool,
}

impl TurnUpdate {
    pub fn from_event(event: &crate::TurnEvent) -> Self {
        TurnUpdate {
            event_id: event.event_id.clone(),
            org: event.org.clone(),
            team: event.team.clone(),
            agent_id: event.agent_id.clone(),
            correlation_id: event.correlation_id.clone(),
            agent_run_id: event.agent_run_id.clone(),
            turn_index: event.turn_index,
            skills: event.skills(),
            started_at: event.started_at,
            ended_at: event.ended_at,
            answer_denials: Vec::new(),
            answer_ruled_out: Vec::new(),
            answer_terms: HashSet::new(),
            answer_stated_cause: None,
            answer_revises: false,
            opening_message: crate::episode::opening_message_of(&event.user_message),
            description_given: event
                .conclusion
                .as_ref()
                .is_some_and(|given| given.issue_description.is_some()),
            components_given: event
                .conclusion
                .as_ref()
                .is_some_and(|given| given.components.is_some()),
            key_findings_given: event
                .conclusion
                .as_ref()
                .is_some_and(|given| given.key_findings.is_some()),
        }
        .reading(&event.final_answer)
    }

    /// With what the merge rules read of the turn's final answer `answer`: what it denies and
    /// rules out, its words, the cause it states in so many words, whether it revises anything.
    pub(crate) fn reading(self, answer: &str) -> Self {
        let (answer_denials, answer_ruled_out) = negation::denied_and_ruled_out(answer);
        TurnUpdate {
            answer_denials,
            answer_revises: crate::affirmed::revises(answer, &answer_ruled_out),
            answer_ruled_out,
            answer_terms: terms(answer),
            answer_stated_cause: crate::second_look::stated_cause(answer),
            ..self
        }
    }

    pub fn key(&self) -> EpisodeKey {
        EpisodeKey::new(&self.org, &self.correlation_id)
    }
}

/// Merges a successfully extracted turn. Returns `None` when the event was already merged and
/// nothing is left to do.
pub fn merge_turn(
    existing: Option<&Episode>,
    update: &TurnUpdate,
    extracted: &ExtractedEpisode,
    now: DateTime<Utc>,
) -> Option<Episode> {
    let mut episode = match existing {
        Some(e) => {
            if is_redelivery(e, update) {
                return None;
            }
            if is_superseded(Some(e), update) {
                return merge_superseded_turn(e, update, now);
            }
            e.clone()
        }
        None => blank_episode(update, now),
    };
    let earliest = first_so_far(&episode, update);
    take_opening_message(&mut episode, update);
    absorb_turn(&mut episode, update);
    // An episode with no conclusion yet (every turn merged so far failed) takes any turn's:
    // a newer turn that failed first must not keep an older one's out of search.
    let concluded = existing.is_some_and(|e| e.extraction_status == ExtractionStatus::Ok);
    if !concluded || update.turn_index >= episode.last_turn_index {
        let before = episode.clone();
        apply_conclusion(&mut episode, update, extracted);
        // Fields a person edited stay theirs; the agent's value becomes a proposal.
        crate::review::keep_pinned(&before, &mut episode);
    } else {
        if earliest {
            // The first turn arriving late (a delayed retry): its conclusion is older than
            // the stored one, but the description is the opening turn's (`keeps_description`).
            take_late_description(&mut episode, extracted);
        }
        fill_left_open(&mut episode, extracted);
    }
    episode.updated_at = now;
    Some(episode)
}

/// Whether the stored conclusion leaves its cause open: a newer turn that names no root
/// cause keeps an earlier turn's — when the earlier turn was merged first. Arriving later,
/// that turn must still be read. (Empty components or key findings are filled too when a
/// late turn is read, [`fill_left_open`], but do not cost an LLM call on their own.)
fn leaves_open(episode: &Episode) -> bool {
    episode.root_cause.is_none()
}

/// A turn older than the stored conclusion, arriving late (two turns extracted at once after
/// a backlog, a delayed retry), fills what that conclusion left open, as it would have stayed
/// had the turns arrived in order: its root cause when none is stored and the conversation has
/// not ruled it out, its components and key findings when none are stored. Whether the
/// incident is resolved stays the newer turn's word. Fields a person edited stay theirs.
fn fill_left_open(episode: &mut Episode, extracted: &ExtractedEpisode) {
    let before = episode.clone();
    let text_before = episode.embedding_text();
    if episode.root_cause.is_none() {
        episode.root_cause = extracted
            .root_cause
            .as_ref()
            .filter(|cause| !cause.trim().is_empty())
            .filter(|cause| !restates_one_of(cause, &episode.ruled_out))
            .cloned();
    }
    if episode.components.is_empty() {
        episode.components = extracted.components.clone();
    }
    if episode.key_findings.is_empty() {
        episode.key_findings = extracted.key_findings.clone();
    }
    crate::review::keep_pinned(&before, episode);
    episode.effectiveness_score =
        effectiveness_score(episode.resolved, episode.root_cause.as_deref());
    episode.drop_vector_if_text_moved(&text_before);
}

/// Whether a newer turn's conclusion stands over `update` whatever `update` would conclude:
/// the episode concluded from a higher turn, leaving nothing open an older turn could fill
/// ([`leaves_open`]), and `update` is not the conversation's first turn arriving late (whose
/// description the episode takes). Such a turn adds only its
/// bookkeeping ([`merge_superseded_turn`]), so the worker asks no LLM for it.
pub fn is_superseded(existing: Option<&Episode>, update: &TurnUpdate) -> bool {
    existing.is_some_and(|e| {
        e.extraction_status == ExtractionStatus::Ok
            && update.turn_index < e.last_turn_index
            && !first_so_far(e, update)
            && !leaves_open(e)
    })
}

/// Merges a turn older than the episode's conclusion: its skills, event id and start, nothing
/// of what it concluded. `None` when the episode already holds the event (a copy of the turn
/// merged first): nothing to write.
pub fn merge_superseded_turn(
    concluded: &Episode,
    update: &TurnUpdate,
    now: DateTime<Utc>,
) -> Option<Episode> {
    if concluded.event_ids.contains(&update.event_id) {
        return None;
    }
    let mut episode = concluded.clone();
    absorb_turn(&mut episode, update);
    episode.updated_at = now;
    Some(episode)
}

/// Whether `update` is an event the episode already holds and merging it again would change
/// nothing. Judged by the event's own state: a seen event is worth re-merging only when it is
/// the turn whose extraction failed (or a newer one), which is what `deja retry` sends.
pub fn is_redelivery(episode: &Episode, update: &TurnUpdate) -> bool {
    if !episode.event_ids.contains(&update.event_id) {
        return false;
    }
    match episode.failed_turn() {
        Some(failed) => update.turn_index < failed,
        None => true,
    }
}

/// Merges a turn whose extraction failed for good. A new conversation becomes a `failed`
/// episode; an existing conclusion is kept and the error recorded beside it. An older turn
/// failing after a newer one concluded records no error: the newer conclusion stands either
/// way, a retry (which re-sends the newest turn) could not bring the older one back, and a
/// failure recorded below the conclusion would make a redelivered newer turn extract again.
pub fn merge_failed_turn(
    existing: Option<&Episode>,
    update: &TurnUpdate,
    error: &str,
    now: DateTime<Utc>,
) -> Option<Episode> {
    if let Some(concluded) = existing.filter(|e| {
        e.extraction_status == ExtractionStatus::Ok && update.turn_index < e.last_turn_index
    }) {
        return merge_superseded_turn(concluded, update, now);
    }
    let mut episode = match existing {
        // A copy of a turn the episode holds: merged (a redelivery raced its retry copy and
        // this one failed), or its failure already recorded. Either way nothing to write: a
        // failure recorded over a merged turn would send a good episode to `deja retry`.
        Some(e) if e.event_ids.contains(&update.event_id) => return None,
        Some(e) => e.clone(),
        None => {
            let mut e = blank_episode(update, now);
            e.extraction_status = ExtractionStatus::Failed;
            e.last_turn_index = update.turn_index;
            e.agent_run_id = update.agent_run_id.clone();
            e
        }
    };
    if episode.embedding.is_none() {
        take_opening_message(&mut episode, update);
    }
    absorb_turn(&mut episode, update);
    if episode.extraction_status == ExtractionStatus::Failed
        && update.turn_index >= episode.last_turn_index
    {
        episode.last_turn_index = update.turn_index;
        episode.agent_run_id = update.agent_run_id.clone();
    }
    episode.extraction_error = Some(error.to_owned());
    episode.failed_turn_index = Some(
        episode
            .failed_turn_index
            .map_or(update.turn_index, |f| f.max(update.turn_index)),
    );
    episode.updated_at = now;
    Some(episode)
}

/// Keeps `update`'s user message as the episode's opening message when no lower turn was
/// merged before it. The vector goes with a changed message, part of the embedded text (the
/// worker embeds it again).
fn take_opening_message(episode: &mut Episode, update: &TurnUpdate) {
    if update.opening_message.is_none()
        || !first_so_far(episode, update)
        || episode.opening_message == update.opening_message
    {
        return;
    }
    episode.opening_message = update.opening_message.clone();
    episode.embedding = None;
    episode.embedding_model = None;
}

/// The description of a turn older than every merged one: what was observed when it failed,
/// which a later turn's extraction words with its cause or fix. Not a withheld or empty one,
/// nor over a description a person set (it becomes a proposal).
fn take_late_description(episode: &mut Episode, extracted: &ExtractedEpisode) {
    let description = extracted.issue_description.trim();
    if description.is_empty()
        || description == crate::poisoning::WITHHELD_DESCRIPTION
        || description == episode.issue_description
    {
        return;
    }
    let before = episode.clone();
    let text_before = episode.embedding_text();
    episode.issue_description = extracted.issue_description.clone();
    crate::review::keep_pinned(&before, episode);
    episode.drop_vector_if_text_moved(&text_before);
}

/// Whether `update` is lower than every turn merged into `episode` so far (or the first).
fn first_so_far(episode: &Episode, update: &TurnUpdate) -> bool {
    episode
        .turns
        .iter()
        .all(|turn| turn.turn_index > update.turn_index)
}

/// Bookkeeping every turn contributes, whatever its index: skills and the event id, and
/// when the conversation started and which agent opened it, whatever the arrival order (a
/// late first turn moves `created_at` back and names the agent).
fn absorb_turn(episode: &mut Episode, update: &TurnUpdate) {
    episode.skills_used.extend(update.skills.iter().cloned());
    episode.created_at = episode.created_at.min(update.started_at);
    if first_so_far(episode, update) {
        episode.agent_id = update.agent_id.clone();
    }
    if !episode.event_ids.contains(&update.event_id) {
        episode.event_ids.push(update.event_id.clone());
        // Distinct turns: a runtime re-sending a turn under a new event id sent no new turn.
        if !episode
            .turns
            .iter()
            .any(|turn| turn.turn_index == update.turn_index)
        {
            episode.turn_count = episode.turn_count.saturating_add(1);
        }
        episode.turns.push(crate::review::TurnRecord {
            event_id: update.event_id.clone(),
            agent_run_id: update.agent_run_id.clone(),
            turn_index: update.turn_index,
            ended_at: update.ended_at,
            revised: update.answer_revises,
        });
    }
}

/// Whether the episode keeps its stored description through `update`'s conclusion. The
/// description says what was observed when it failed, which the turn that opened the
/// investigation saw; later turns check, fix or revise the cause, which changes no symptom,
/// and a small model rewrites the description with them: the cause, the fix, the user's
/// "gh-ost finished, queue replayed." (docs/EVALUATION.md, "The description the first turn
/// wrote"). A description the runtime gives is always taken, and so is one over none (or
/// over a withheld one).
fn keeps_description(episode: &Episode, update: &TurnUpdate) -> bool {
    let stored = episode.issue_description.trim();
    !stored.is_empty()
        && stored != crate::poisoning::WITHHELD_DESCRIPTION
        && !update.description_given
}

fn apply_conclusion(episode: &mut Episode, update: &TurnUpdate, extracted: &ExtractedEpisode) {
    let text_before = episode.embedding_text();
    episode.agent_run_id = update.agent_run_id.clone();
    episode.last_turn_index = update.turn_index;
    episode.issue_type = extracted.issue_type.clone();
    if !keeps_description(episode, update) {
        episode.issue_description = extracted.issue_description.clone();
    }
    // An empty list is what a small model writes when it leaves a field out, not what the
    // conversation concluded: the earlier turn's components and findings stay then (they are
    // part of the embedded text and the component links). One the runtime gives is its word.
    if !extracted.components.is_empty() || update.components_given {
        episode.components = extracted.components.clone();
    }
    if !extracted.key_findings.is_empty() || update.key_findings_given {
        episode.key_findings = extracted.key_findings.clone();
    }
    let ruled_out_earlier = std::mem::replace(&mut episode.ruled_out, extracted.ruled_out.clone());
    let revived = extracted
        .root_cause
        .as_deref()
        .map(|cause| revived(cause, &ruled_out_earlier, update))
        .unwrap_or_default();
    for hypothesis in &revived {
        if !restates_one_of(hypothesis, &episode.ruled_out) {
            episode.ruled_out.push((*hypothesis).clone());
        }
    }
    // A small model sometimes writes the answer's denial as the cause ("rebalancing isn't the
    // cause"): that is a ruled-out hypothesis, not a conclusion, and what it denies
    // ("rebalancing") is ruled out too.
    let cause_denies = extracted
        .root_cause
        .as_deref()
        .and_then(negation::only_denies);
    if let (Some(denial), Some(_)) = (&extracted.root_cause, &cause_denies) {
        if !restates_one_of(denial, &episode.ruled_out) {
            episode.ruled_out.push(denial.clone());
        }
    }
    let denied_by_cause: Vec<String> = cause_denies
        .iter()
        .flatten()
        .map(|phrase| phrase.join(" "))
        .collect();
    // A cause a person set is theirs, not the model's abandoned guess (`keep_pinned` restores
    // it; it must not also be listed as ruled out).
    let earlier_by_model = episode
        .root_cause
        .as_deref()
        .filter(|_| !episode.review.human_pinned.contains("root_cause"));
    if kept_abandoned(earlier_by_model, update, extracted) {
        if let Some(earlier) = episode.root_cause.take() {
            if !restates_one_of(&earlier, &episode.ruled_out) {
                episode.ruled_out.push(earlier);
            }
        }
    } else {
        episode.root_cause = match (&extracted.root_cause, &cause_denies) {
            // The answer's cause is one it lists as ruled out, word for word: a small model
            // copies the abandoned hypothesis into both fields. The conversation did not
            // conclude it, so it is not stored as the conclusion.
            // Nor is a hypothesis an earlier turn ruled out, revived without a word of this
            // turn's answer for it.
            (Some(root_cause), None)
                if !restates_one_of(root_cause, &extracted.ruled_out) && revived.is_empty() =>
            {
                // A brief confirmation keeps the earlier explanation the conversation did not
                // leave (`confirmed`): not one the answer denies, nor when the cause turns
                // back to a hypothesis an earlier turn ruled out ("the schema change after
                // all"). The model's copies of the explanation in `ruled_out` go with it.
                let explained = earlier_by_model
                    .filter(|earlier| {
                        denied_by_answer(earlier, update).is_empty()
                            && !ruled_out(root_cause, &ruled_out_earlier)
                    })
                    .and_then(|earlier| {
                        let explained = crate::confirmed::with_explanation(
                            root_cause,
                            earlier,
                            &episode.turns,
                            update,
                        )?;
                        episode
                            .ruled_out
                            .retain(|item| !crate::confirmed::copies_explanation(item, earlier));
                        Some(explained)
                    });
                Some(explained.unwrap_or_else(|| root_cause.clone()))
            }
            // The earlier cause stays, unless this turn rules it out; and when its answer
            // denies it, it joins `ruled_out` like an abandoned guess.
            _ => match episode.root_cause.take() {
                Some(earlier) if !denied_by_answer(&earlier, update).is_empty() => {
                    // A person's pinned cause comes back (`keep_pinned`), never as ruled out.
                    if !episode.review.human_pinned.contains("root_cause")
                        && !restates_one_of(&earlier, &episode.ruled_out)
                    {
                        episode.ruled_out.push(earlier);
                    }
                    None
                }
                earlier => earlier.filter(|earlier| {
                    !ruled_out(earlier, &extracted.ruled_out)
                        && !ruled_out(earlier, &denied_by_cause)
                }),
            },
        };
    }
    // A summary withheld for copying a tool's text does not replace a real one (as the
    // description, `keeps_description`).
    let summary_withheld = extracted.summary == crate::poisoning::WITHHELD_SUMMARY
        || extracted.summary.trim().is_empty();
    if !summary_withheld || episode.summary.trim().is_empty() {
        episode.summary = extracted.summary.clone();
    }
    // Resolved means a cause identified: an extraction marked resolved whose cause these rules
    // refused, with no earlier cause kept, is not (a live run stored one).
    episode.resolved = extracted.resolved && episode.root_cause.is_some();
    episode.effectiveness_score =
        effectiveness_score(episode.resolved, episode.root_cause.as_deref());
    episode.extraction_status = ExtractionStatus::Ok;
    // A failure recorded for a newer turn than this one still needs `deja retry`.
    if episode
        .failed_turn()
        .is_none_or(|failed| update.turn_index >= failed)
    {
        episode.extraction_error = None;
        episode.failed_turn_index = None;
    }
    episode.last_confirmed_at = update.ended_at;
    episode.drop_vector_if_text_moved(&text_before);
}

/// Whether the extracted cause keeps the `earlier` one although this turn's answer denies it:
/// a phrase the answer denies ("isn't LDAP capacity") that both causes affirm as a whole. A
/// new cause that only shares a word with the denial ("LDAP calls without a timeout") is a
/// conclusion, and so is one the answer does not deny.
pub(crate) fn kept_abandoned(
    earlier: Option<&str>,
    update: &TurnUpdate,
    extracted: &ExtractedEpisode,
) -> bool {
    let (Some(earlier), Some(cause)) = (earlier, extracted.root_cause.as_deref()) else {
        return false;
    };
    let denied_by_earlier = negation::affirmed_whole(&update.answer_denials, earlier);
    negation::affirmed_whole(&update.answer_denials, cause)
        .iter()
        .any(|phrase| denied_by_earlier.contains(phrase))
}

/// Whether a ruled-out or denied phrase says enough for a text that affirms it to be taken
/// for that hypothesis: two words or more. One word is too little to tell a guess from a cause
/// that mentions it ("pool" in "the pool leaked", "schema" in "… and long in the schema"), or
/// a recovery note's denial from a cause ("no errors since the fix" against a cause that names
/// the errors).
pub(crate) fn names_a_hypothesis(phrase: &[String]) -> bool {
    phrase.len() >= 2
}

/// The phrases this turn's answer denies that `cause` affirms as a whole ("Right, not a
/// consistency issue" against "S3 consistency issue: the registry read the object between the
/// two writes"), of those that name a hypothesis ([`names_a_hypothesis`]).
pub(crate) fn denied_by_answer<'a>(cause: &str, update: &'a TurnUpdate) -> Vec<&'a Vec<String>> {
    negation::affirmed_whole(&update.answer_denials, cause)
        .into_iter()
        .filter(|phrase| names_a_hypothesis(phrase))
        .collect()
}

/// The hypotheses of `ruled_out_earlier` (what earlier turns ruled out) that `cause` restates
/// word for word, or affirms whole among more words ([`affirms_whole`]: "The v42 artifact was
/// written twice. My first guess is an S3 consistency issue: …"), while this turn's answer
/// does not name them: fewer than half of a hypothesis's words are in the answer. The model
/// carried the abandoned guess back from the stored episode in its prompt; an answer that
/// concluded it again would say it.
pub(crate) fn revived<'a>(
    cause: &str,
    ruled_out_earlier: &'a [String],
    update: &TurnUpdate,
) -> Vec<&'a String> {
    ruled_out_earlier
        .iter()
        .filter(|hypothesis| {
            restates_one_of(cause, std::slice::from_ref(*hypothesis))
                || affirms_whole(cause, hypothesis)
        })
        .filter(|hypothesis| {
            let hypothesis_terms = terms(hypothesis);
            let named = hypothesis_terms
                .iter()
                .filter(|word| matches_a_term(word, &update.answer_terms))
                .count();
            named * 2 < hypothesis_terms.len()
        })
        .collect()
}

/// Whether one of the ruled-out `hypotheses` names `cause`: more than half of the words of the
/// shorter of the two are shared (`network issue` rules out "session keys lost to network
/// issues between cart-api and redis"; `redis memory` does not rule out "redis maxmemory too
/// small").
fn ruled_out(cause: &str, hypotheses: &[String]) -> bool {
    let cause_terms = terms(cause);
    hypotheses.iter().any(|hypothesis| {
        let hypothesis_terms = terms(hypothesis);
        let shared = cause_terms
            .iter()
            .filter(|word| matches_a_term(word, &hypothesis_terms))
            .count();
        shared > 0 && shared * 2 > cause_terms.len().min(hypothesis_terms.len())
    })
}

/// Whether `cause` says no more and no less than one of `hypotheses`: every meaningful word of
/// each is one of the other's ("network issues" restates "network issue"; "connection pool
/// exhausted by leaked connections" does not restate "connection pool too small", which a
/// conversation may well rule out on its way to it).
pub(crate) fn restates_one_of(cause: &str, hypotheses: &[String]) -> bool {
    let cause_terms = terms(cause);
    !cause_terms.is_empty()
        && hypotheses.iter().any(|hypothesis| {
            let hypothesis_terms = terms(hypothesis);
            cause_terms
                .iter()
                .all(|word| matches_a_term(word, &hypothesis_terms))
                && hypothesis_terms
                    .iter()
                    .all(|word| matches_a_term(word, &cause_terms))
        })
}

/// Whether `cause` affirms every word of `hypothesis`, a phrase that names one
/// ([`names_a_hypothesis`]: "time drift" in "time drift between identity-service and the
/// relying apps"). A hypothesis written as its own denial ("clock skew ruled out") is the
/// phrase it denies.
pub(crate) fn affirms_whole(cause: &str, hypothesis: &str) -> bool {
    let words = hypothesis_phrase(hypothesis);
    let cause_terms = terms(cause);
    names_a_hypothesis(&words) && words.iter().all(|word| matches_a_term(word, &cause_terms))
}

/// The stored `ruled_out` item whose hypothesis the issue type names, if any: every word of a
/// type of two words or more (`names_a_hypothesis`) in the item, and not all of them in the
/// root cause ("time-drift" with "time drift between identity-service and the relying apps"
/// ruled out and a key-retirement cause). A small model keeps the type its first turn gave
/// the abandoned guess while it writes the new cause, and strategies group episodes by type:
/// an episode filed under the mechanism the conversation rejected. Measured by `deja eval
/// extraction`, and the reason for the worker's second look at a type
/// ([`crate::type_look`]); an item that misfiles the conclusion as ruled out is caught too,
/// which the root-cause condition only partly screens.
pub fn issue_type_names_ruled_out<'a>(
    issue_type: &str,
    root_cause: Option<&str>,
    ruled_out: &'a [String],
) -> Option<&'a String> {
    let words = type_words(issue_type);
    let names_all = |text: &str| all_words_in(&words, text);
    if !names_a_hypothesis(&words) || root_cause.is_some_and(names_all) {
        return None;
    }
    ruled_out.iter().find(|item| names_all(item))
}

/// Whether `text` has every word of the issue type `issue_type` ("clock-time-drift" has
/// "time-drift"); a type without words is in no text.
pub(crate) fn names_every_word_of_type(text: &str, issue_type: &str) -> bool {
    let words = type_words(issue_type);
    !words.is_empty() && all_words_in(&words, text)
}

/// Every word of a type, fillers too ("change" in "schema-change"): the type is a name, not
/// a sentence to find a hypothesis in ([`terms`] splits it at `-` and `_`).
fn type_words(issue_type: &str) -> Vec<String> {
    terms(issue_type).into_iter().collect()
}

fn all_words_in(words: &[String], text: &str) -> bool {
    let text_terms = terms(text);
    words.iter().all(|word| matches_a_term(word, &text_terms))
}

/// A ruled-out item as the words of the hypothesis it names: what it denies when it is
/// written as a denial ("clock skew ruled out", "it isn't the deploy"), else all its content
/// words.
pub(crate) fn hypothesis_phrase(hypothesis: &str) -> Vec<String> {
    let denied: Vec<String> = negation::denied_phrases(hypothesis)
        .into_iter()
        .flatten()
        .collect();
    if denied.is_empty() {
        negation::phrase(hypothesis)
    } else {
        denied
    }
}

fn blank_episode(update: &TurnUpdate, now: DateTime<Utc>) -> Episode {
    let key = update.key();
    Episode {
        id: key.episode_id(),
        org: update.org.clone(),
        team: update.team.clone(),
        agent_id: update.agent_id.clone(),
        correlation_id: update.correlation_id.clone(),
        agent_run_id: update.agent_run_id.clone(),
        turn_count: 0,
        last_turn_index: 0,
        issue_type: String::new(),
        issue_description: String::new(),
        opening_message: None,
        components: Vec::new(),
        skills_used: Default::default(),
        key_findings: Vec::new(),
        root_cause: None,
        summary: String::new(),
        resolved: false,
        effectiveness_score: effectiveness_score(false, None),
        embedding: None,
        embedding_model: None,
        extraction_status: ExtractionStatus::Ok,
        extraction_error: None,
        failed_turn_index: None,
        provenance: Provenance::Extracted,
        event_ids: Vec::new(),
        significance: None,
        root_cause_confidence: None,
        ruled_out: Vec::new(),
        resolution: None,
        created_at: update.started_at,
        updated_at: now,
        last_confirmed_at: update.ended_at,
        version: 0,
        review: Default::default(),
        turns: Vec::new(),
        last_recalled_at: None,
        recurrence: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::episode::Component;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn items(texts: &[&str]) -> Vec<String> {
        texts.iter().map(|t| (*t).to_owned()).collect()
    }

    #[test]
    fn an_issue_type_naming_a_ruled_out_hypothesis_is_found() {
        let ruled_out = items(&[
            "deploy of 4.2",
            "time drift between identity-service and the relying apps",
        ]);
        let cause = Some("the key-retirement job removed the signing key from the JWKS");
        assert_eq!(
            issue_type_names_ruled_out("time-drift", cause, &ruled_out),
            Some(&ruled_out[1])
        );
        // Without a cause, and with the hypothesis written as its own denial.
        let denied = items(&["not the schema change"]);
        assert_eq!(
            issue_type_names_ruled_out("schema-change", None, &denied),
            Some(&denied[0])
        );
    }

    #[test]
    fn an_issue_type_the_cause_names_or_of_one_word_is_not_taken_for_a_ruled_out_one() {
        let ruled_out = items(&["database slowness: p99 of the queries is flat", "no panic"]);
        // The cause names the mechanism the type does: the item misfiles it, the type is right.
        let cause = Some("database slowness from a missing index on orders");
        assert_eq!(
            issue_type_names_ruled_out("database-slowness", cause, &ruled_out),
            None
        );
        // One word says too little to be the guess.
        assert_eq!(issue_type_names_ruled_out("panic", None, &ruled_out), None);
        // A type no item names.
        assert_eq!(
            issue_type_names_ruled_out("cache-eviction", None, &ruled_out),
            None
        );
    }

    fn update(turn: u32, skills: &[&str]) -> TurnUpdate {
        let at = DateTime::from_timestamp(1_770_000_000 + i64::from(turn) * 60, 0).unwrap();
        TurnUpdate {
            event_id: format!("evt-{turn}"),
            agent_id: format!("agent-{turn}"),
            agent_run_id: format!("run-{turn}"),
            skills: skills.iter().map(|s| s.to_string()).collect(),
            started_at: at,
            ended_at: at,
            opening_message: Some(format!("[FIRING] alert of turn {turn}")),
            ..crate::testing::turn_update("conv", turn)
        }
    }

    /// Turn `turn` whose final answer is `answer`.
    fn answered(turn: u32, answer: &str) -> TurnUpdate {
        update(turn, &[]).reading(answer)
    }

    fn conclusion(turn: u32) -> ExtractedEpisode {
        ExtractedEpisode {
            issue_type: "cache-eviction".into(),
            issue_description: format!("description of turn {turn}"),
            components: vec![Component::new("service", format!("svc-{turn}"))],
            key_findings: vec![format!("finding of turn {turn}")],
            ruled_out: vec![],
            root_cause: Some(format!("root cause of turn {turn}")),
            summary: format!("summary of turn {turn}"),
            resolved: turn % 2 == 1,
        }
    }

    fn now() -> DateTime<Utc> {
        DateTime::from_timestamp(1_780_000_000, 0).unwrap()
    }

    #[test]
    fn a_turn_sent_again_under_a_new_event_id_is_not_another_turn() {
        let first = merge_turn(None, &update(1, &[]), &conclusion(1), now()).unwrap();
        let second = merge_turn(Some(&first), &update(2, &[]), &conclusion(2), now()).unwrap();
        let again = TurnUpdate {
            event_id: "evt-2-sent-again".into(),
            ..update(2, &[])
        };
        let resent = merge_turn(Some(&second), &again, &conclusion(2), now()).unwrap();
        assert_eq!(resent.turn_count, 2);
        assert_eq!(
            resent.event_ids.len(),
            3,
            "both ids are known: neither is merged twice"
        );
    }

    /// A later turn whose extraction left a list out, or whose summary was withheld for
    /// copying a tool's text, does not erase what the earlier turn stored.
    #[test]
    fn empty_lists_and_a_withheld_summary_do_not_erase_the_earlier_turns() {
        let first = merge_turn(None, &update(1, &[]), &conclusion(1), now()).unwrap();
        let sparse = ExtractedEpisode {
            components: vec![],
            key_findings: vec![],
            summary: crate::poisoning::WITHHELD_SUMMARY.to_owned(),
            ..conclusion(2)
        };
        let merged = merge_turn(Some(&first), &update(2, &[]), &sparse, now()).unwrap();
        assert_eq!(merged.components, first.components);
        assert_eq!(merged.key_findings, first.key_findings);
        assert_eq!(merged.summary, "summary of turn 1");
        assert_eq!(merged.root_cause.as_deref(), Some("root cause of turn 2"));
        // A list the turn does give replaces the earlier one.
        let merged = merge_turn(Some(&first), &update(2, &[]), &conclusion(2), now()).unwrap();
        assert_eq!(merged.key_findings, vec!["finding of turn 2".to_owned()]);
        assert_eq!(merged.summary, "summary of turn 2");
        // The first turn's withheld summary is all there is: it is stored.
        let withheld = merge_turn(None, &update(1, &[]), &sparse, now()).unwrap();
        assert_eq!(withheld.summary, crate::poisoning::WITHHELD_SUMMARY);
    }

    fn fold(order: &[u32]) -> Episode {
        let mut episode: Option<Episode> = None;
        for &turn in order {
            if let Some(next) = merge_turn(
                episode.as_ref(),
                &update(turn, &[&format!("skill-{turn}")]),
                &conclusion(turn),
                now(),
            ) {
                episode = Some(next);
            }
        }
        episode.unwrap()
    }

    #[test]
    fn three_turns_give_the_last_conclusion_and_all_skills() {
        let e = fold(&[1, 2, 3]);
        assert_eq!(e.summary, "summary of turn 3");
        assert_eq!(e.agent_run_id, "run-3");
        assert_eq!(e.key_findings, vec!["finding of turn 3"]);
        assert_eq!(e.turn_count, 3);
        assert_eq!(e.skills_used.len(), 3);
        assert_eq!(e.effectiveness_score, 0.8);
    }

    #[test]
    fn the_description_stays_the_first_turns_unless_the_runtime_gives_one() {
        assert_eq!(fold(&[1, 2, 3]).issue_description, "description of turn 1");
        // The first turn late (a delayed retry): its description, not the later turn's, and
        // the later turn's conclusion.
        let late = fold(&[2, 3, 1]);
        assert_eq!(late.issue_description, "description of turn 1");
        assert_eq!(late.root_cause.as_deref(), Some("root cause of turn 3"));
        assert_eq!(fold(&[3, 1, 2]).issue_description, "description of turn 1");

        let first = fold(&[1]);
        let revising = answered(2, "Not the deploy: the rollback changed nothing.");
        let revised = merge_turn(Some(&first), &revising, &conclusion(2), now()).unwrap();
        assert_eq!(revised.issue_description, "description of turn 1");
        assert_eq!(revised.root_cause.as_deref(), Some("root cause of turn 2"));

        let mut event = crate::testing::turn_event("conv", 2);
        assert!(!TurnUpdate::from_event(&event).description_given);
        event.conclusion = Some(crate::conclusion::Conclusion {
            issue_description: Some("the runtime's description".into()),
            ..Default::default()
        });
        let given = TurnUpdate::from_event(&event);
        assert!(given.description_given);
        let given = merge_turn(Some(&first), &given, &conclusion(2), now()).unwrap();
        assert_eq!(given.issue_description, "description of turn 2");

        for stored in ["", crate::poisoning::WITHHELD_DESCRIPTION] {
            let mut without = first.clone();
            without.issue_description = stored.into();
            let filled = merge_turn(Some(&without), &update(2, &[]), &conclusion(2), now());
            assert_eq!(filled.unwrap().issue_description, "description of turn 2");
        }
    }

    /// An empty list a runtime gives in its `conclusion` block replaces the stored one; an
    /// extracted empty list (a small model leaving the field out) keeps it.
    #[test]
    fn a_runtimes_empty_list_replaces_an_extracted_one_keeps() {
        let first = fold(&[1]);
        let emptied = ExtractedEpisode {
            components: vec![],
            key_findings: vec![],
            ..conclusion(2)
        };
        let kept = merge_turn(Some(&first), &update(2, &[]), &emptied, now()).unwrap();
        assert_eq!(kept.components, first.components);
        assert_eq!(kept.key_findings, first.key_findings);

        let mut event = crate::testing::turn_event("conv", 2);
        event.conclusion = Some(crate::conclusion::Conclusion {
            components: Some(vec![]),
            key_findings: Some(vec![]),
            ..Default::default()
        });
        let given = TurnUpdate::from_event(&event);
        assert!(given.components_given && given.key_findings_given);
        let replaced = merge_turn(Some(&first), &given, &emptied, now()).unwrap();
        assert!(replaced.components.is_empty());
        assert!(replaced.key_findings.is_empty());
    }

    #[test]
    fn a_newer_turn_without_a_cause_keeps_the_earlier_one_unless_it_rules_it_out() {
        let first = fold(&[1]);
        let mut thanks = conclusion(2);
        thanks.root_cause = None;
        thanks.resolved = true;
        let kept = merge_turn(Some(&first), &update(2, &[]), &thanks, now()).unwrap();
        assert_eq!(kept.root_cause.as_deref(), Some("root cause of turn 1"));
        assert_eq!(kept.summary, "summary of turn 2");
        assert_eq!(kept.effectiveness_score, 0.8, "resolved with a cause");

        let mut revised = thanks.clone();
        revised.resolved = false;
        revised.ruled_out = vec!["turn 1's root cause: the rollback did not help".into()];
        let dropped = merge_turn(Some(&first), &update(2, &[]), &revised, now()).unwrap();
        assert_eq!(dropped.root_cause, None);

        // A hypothesis that only shares a word with the cause does not rule it out.
        let mut unrelated = thanks.clone();
        unrelated.ruled_out = vec!["cause in the network".into()];
        let kept = merge_turn(Some(&first), &update(2, &[]), &unrelated, now()).unwrap();
        assert_eq!(kept.root_cause.as_deref(), Some("root cause of turn 1"));

        // Nor does the answer, unless it denies two words or more the cause affirms.
        let mut retry_storm = fold(&[1]);
        retry_storm.root_cause = Some("a retry storm amplified the 5xx errors".into());
        let recovered = answered(2, "Recovered: no errors since the fix went out.");
        let kept = merge_turn(Some(&retry_storm), &recovered, &thanks, now()).unwrap();
        assert_eq!(kept.root_cause, retry_storm.root_cause);
        let denied = answered(2, "Recovered, and it wasn't a retry storm after all.");
        let dropped = merge_turn(Some(&retry_storm), &denied, &thanks, now()).unwrap();
        assert_eq!(dropped.root_cause, None);
        assert!(dropped
            .ruled_out
            .contains(&"a retry storm amplified the 5xx errors".to_owned()));
    }

    #[test]
    fn a_cause_the_same_answer_rules_out_is_not_stored_as_the_conclusion() {
        let mut first = fold(&[1]);
        first.root_cause = Some("network issues between cart-api and redis".into());
        // The model put the abandoned hypothesis in both fields.
        let mut both = conclusion(2);
        both.root_cause = Some("Network issue".into());
        both.ruled_out = vec!["network issues".into()];
        let merged = merge_turn(Some(&first), &update(2, &[]), &both, now()).unwrap();
        assert_eq!(
            merged.root_cause, None,
            "nor the earlier cause it also rules out"
        );
        assert_eq!(merged.effectiveness_score, 0.1, "unresolved, no cause");
        // Marked resolved by the model, it is not resolved without a cause.
        let mut resolved_both = conclusion(3);
        resolved_both.root_cause = Some("Network issue".into());
        resolved_both.ruled_out = vec!["network issues".into()];
        assert!(resolved_both.resolved);
        let merged = merge_turn(Some(&first), &update(3, &[]), &resolved_both, now()).unwrap();
        assert_eq!(merged.root_cause, None);
        assert!(!merged.resolved, "{merged:#?}");
        assert_eq!(
            merged.effectiveness_score, 0.1,
            "scored as stored, not as the model marked it"
        );

        // An earlier cause the answer does not rule out stays.
        first.root_cause = Some("redis maxmemory too small for the session keys".into());
        let merged = merge_turn(Some(&first), &update(2, &[]), &both, now()).unwrap();
        assert_eq!(
            merged.root_cause.as_deref(),
            Some("redis maxmemory too small for the session keys")
        );

        // A cause in the same area as a ruled-out hypothesis is a conclusion, not a copy.
        let mut narrowed = conclusion(2);
        narrowed.root_cause = Some("connection pool exhausted by leaked connections".into());
        narrowed.ruled_out = vec!["connection pool too small".into()];
        let answer = "A pool size problem is ruled out: the report job leaks connections.";
        let merged = merge_turn(Some(&first), &answered(2, answer), &narrowed, now()).unwrap();
        assert_eq!(
            merged.root_cause.as_deref(),
            Some("connection pool exhausted by leaked connections")
        );
    }

    #[test]
    fn a_hypothesis_an_earlier_turn_ruled_out_is_not_revived_by_an_answer_silent_on_it() {
        let guess = "an upstream schema change the join handles badly";
        let first = ExtractedEpisode {
            root_cause: Some(guess.into()),
            ..conclusion(1)
        };
        let first = merge_turn(None, &update(1, &[]), &first, now()).unwrap();
        let revised = ExtractedEpisode {
            root_cause: Some("the producer's 32-bit event id counter wrapped to negative".into()),
            ruled_out: vec![guess.into()],
            ..conclusion(2)
        };
        let answer = "Not the schema change: the producer's 32-bit id counter wrapped.";
        let second = merge_turn(Some(&first), &answered(2, answer), &revised, now()).unwrap();
        // The last turn only reports the fix; the model carries the guess back as the cause.
        let revived = ExtractedEpisode {
            root_cause: Some("An upstream schema change the join handles badly.".into()),
            ..conclusion(3)
        };
        let answer = "Joined rows are back to 41M a day; the overflow explanation fits the logs.";
        let third = merge_turn(Some(&second), &answered(3, answer), &revived, now()).unwrap();
        assert_eq!(third.root_cause, second.root_cause);
        assert_eq!(third.ruled_out, vec![guess]);
        assert_eq!(third.summary, "summary of turn 3", "the rest is turn 3's");

        // An answer that names the hypothesis again may conclude it.
        let answer = "It was the upstream schema change after all: the join handles it badly.";
        let again = merge_turn(Some(&second), &answered(3, answer), &revived, now()).unwrap();
        assert_eq!(again.root_cause, revived.root_cause);
        assert!(again.ruled_out.is_empty(), "{:?}", again.ruled_out);

        // A cause that only shares words with the hypothesis is a conclusion of its own.
        let narrowed = ExtractedEpisode {
            root_cause: Some("the join drops rows whose producer event ids are negative".into()),
            ..conclusion(3)
        };
        let third = merge_turn(Some(&second), &update(3, &[]), &narrowed, now()).unwrap();
        let narrowed_cause = narrowed.root_cause.as_deref().unwrap_or_default();
        assert!(
            third
                .root_cause
                .as_deref()
                .is_some_and(|cause| cause.starts_with(narrowed_cause)),
            "{:?}",
            third.root_cause
        );

        // Nor is the guess revived inside a longer cause (inc-dev-046's last turn copied the
        // first answer: an observation, then "my first guess is …").
        let copied = ExtractedEpisode {
            root_cause: Some(format!(
                "Joined rows fell to 9M a day. My first guess is {guess}."
            )),
            ..conclusion(3)
        };
        let answer = "Joined rows are back to 41M a day; the overflow explanation fits the logs.";
        let third = merge_turn(Some(&second), &answered(3, answer), &copied, now()).unwrap();
        assert_eq!(third.root_cause, second.root_cause);
    }

    #[test]
    fn a_denial_written_as_the_cause_is_ruled_out_and_so_is_what_it_denies() {
        // inc-dev-012 with the local model: turn 3 stored "rebalancing isn't the cause".
        let mut first = fold(&[1]);
        first.root_cause = Some("consumer group rebalancing after the deploy".into());
        let mut denial = conclusion(2);
        denial.root_cause = Some("Rebalancing isn't the cause".into());
        denial.ruled_out = vec![];
        let merged = merge_turn(Some(&first), &update(2, &[]), &denial, now()).unwrap();
        assert_eq!(
            merged.root_cause, None,
            "neither the denial nor what it denies"
        );
        assert_eq!(merged.ruled_out, vec!["Rebalancing isn't the cause"]);

        // Listed once when the answer's ruled_out already says it.
        denial.ruled_out = vec!["rebalancing isn't the cause".into()];
        let merged = merge_turn(Some(&first), &update(2, &[]), &denial, now()).unwrap();
        assert_eq!(merged.ruled_out.len(), 1);

        // A denial of something else keeps the earlier cause.
        first.root_cause = Some("one hot partition key took most of the traffic".into());
        let merged = merge_turn(Some(&first), &update(2, &[]), &denial, now()).unwrap();
        assert_eq!(
            merged.root_cause.as_deref(),
            Some("one hot partition key took most of the traffic")
        );

        // A cause that also names what was ruled out is a conclusion.
        let mut affirmed = conclusion(2);
        affirmed.root_cause = Some("staging config applied globally; DDoS ruled out".into());
        let merged = merge_turn(Some(&first), &update(2, &[]), &affirmed, now()).unwrap();
        assert_eq!(
            merged.root_cause.as_deref(),
            Some("staging config applied globally; DDoS ruled out")
        );
    }

    #[test]
    fn a_cause_the_answer_denies_is_not_kept_from_the_earlier_turn() {
        // inc-dev-010 with the local model: turn 2 revised the first guess, the extraction
        // kept it.
        let mut first = fold(&[1]);
        first.root_cause =
            Some("LDAP backend is out of capacity and everything upstream is waiting on it".into());
        let answer = "No, it isn't LDAP capacity. The LDAP servers are at ~20% CPU; \
                      user-directory doesn't pass the caller's deadline down to the LDAP call.";
        let mut kept = conclusion(2);
        kept.root_cause = Some("the LDAP backend ran out of capacity".into());
        let merged = merge_turn(Some(&first), &answered(2, answer), &kept, now()).unwrap();
        assert_eq!(
            merged.root_cause, None,
            "neither the copy nor the earlier guess"
        );
        assert_eq!(
            merged.ruled_out,
            vec!["LDAP backend is out of capacity and everything upstream is waiting on it"]
        );

        // The revised cause names LDAP too, but not its capacity: a conclusion.
        let mut revised = conclusion(2);
        revised.root_cause =
            Some("LDAP calls had no client timeout and ignored the caller's deadline".into());
        let merged = merge_turn(Some(&first), &answered(2, answer), &revised, now()).unwrap();
        assert_eq!(merged.root_cause, revised.root_cause);

        // The same cause kept by an answer that denies something else.
        let other = "Restarting didn't help; the LDAP backend is out of capacity.";
        let merged = merge_turn(Some(&first), &answered(2, other), &kept, now()).unwrap();
        assert_eq!(merged.root_cause, kept.root_cause);

        // A first turn has no earlier conclusion to keep: its cause stands.
        let merged = merge_turn(None, &answered(1, answer), &kept, now()).unwrap();
        assert_eq!(merged.root_cause, kept.root_cause);

        // A cause a person set stays, and is not listed as ruled out.
        first.review.human_pinned.insert("root_cause".into());
        let merged = merge_turn(Some(&first), &answered(2, answer), &kept, now()).unwrap();
        assert_eq!(merged.root_cause, first.root_cause);
        assert!(merged.ruled_out.is_empty(), "{:?}", merged.ruled_out);
        // Nor when the turn names no cause of its own while its answer denies that one.
        let mut causeless = conclusion(2);
        causeless.root_cause = None;
        causeless.resolved = false;
        let merged = merge_turn(Some(&first), &answered(2, answer), &causeless, now()).unwrap();
        assert_eq!(merged.root_cause, first.root_cause);
        assert!(merged.ruled_out.is_empty(), "{:?}", merged.ruled_out);
    }

    #[test]
    fn a_turn_update_carries_what_its_answer_denies() {
        let mut event = crate::testing::turn_event("conv", 2);
        event.final_answer = "It isn't LDAP capacity: the calls have no timeout.".into();
        let update = TurnUpdate::from_event(&event);
        assert_eq!(
            update.answer_denials,
            vec![
                vec!["ldap".to_owned(), "capacity".to_owned()],
                vec!["timeout".to_owned()]
            ]
        );
        // What it names as ruled out is the subject of its denial, not a missing timeout.
        assert_eq!(
            update.answer_ruled_out,
            vec![vec!["ldap".to_owned(), "capacity".to_owned()]]
        );
        event.final_answer = "Final: a retired signing key. A cloud provider network outage \
                              was investigated first and ruled out."
            .into();
        assert_eq!(
            TurnUpdate::from_event(&event).answer_ruled_out,
            vec![vec![
                "provider".to_owned(),
                "network".to_owned(),
                "outage".to_owned()
            ]],
            "how it was checked is not what was ruled out"
        );
    }

    #[test]
    fn ruled_out_needs_most_words_of_the_shorter_text() {
        let cause = "Session keys are lost to network issues between cart-api and redis";
        assert!(ruled_out(cause, &["network issue".into()]));
        assert!(!ruled_out(cause, &["redis memory".into()]));
        assert!(!ruled_out(cause, &[]));
        assert!(!ruled_out(
            "redis maxmemory too small",
            &["redis memory".into(), "a bad deploy".into()]
        ));
    }

    #[test]
    fn a_redelivered_event_changes_nothing() {
        let e = fold(&[1, 2]);
        assert!(merge_turn(Some(&e), &update(2, &["new-skill"]), &conclusion(2), now()).is_none());
    }

    #[test]
    fn a_late_older_turn_adds_skills_but_keeps_the_newer_conclusion() {
        let e = fold(&[1, 3, 2]);
        assert_eq!(e.summary, "summary of turn 3");
        assert!(e.skills_used.contains("skill-2"));
        assert_eq!(e.turn_count, 3);
    }

    #[test]
    fn changing_the_conclusion_drops_the_stale_embedding() {
        let mut e = fold(&[1]);
        e.embedding = Some(vec![0.0; 3]);
        let same = merge_turn(Some(&e), &update(2, &[]), &conclusion(1), now()).unwrap();
        assert!(same.embedding.is_some(), "same text keeps its vector");
        let moved = merge_turn(Some(&e), &update(2, &[]), &conclusion(2), now()).unwrap();
        assert!(moved.embedding.is_none(), "new text needs a new vector");
    }

    #[test]
    fn a_failed_first_turn_makes_a_failed_episode_that_a_retry_repairs() {
        let failed = merge_failed_turn(None, &update(1, &["k8s"]), "llm garbage", now()).unwrap();
        assert_eq!(failed.extraction_status, ExtractionStatus::Failed);
        assert_eq!(failed.extraction_error.as_deref(), Some("llm garbage"));
        assert!(failed.skills_used.contains("k8s"));
        assert!(merge_failed_turn(Some(&failed), &update(1, &[]), "again", now()).is_none());
        let repaired =
            merge_turn(Some(&failed), &update(1, &["k8s"]), &conclusion(1), now()).unwrap();
        assert_eq!(repaired.extraction_status, ExtractionStatus::Ok);
        assert_eq!(repaired.extraction_error, None);
        assert_eq!(repaired.turn_count, 1);
    }

    #[test]
    fn the_first_turn_opens_the_episode_and_a_late_first_turn_refreshes_its_vector() {
        let first = fold(&[1]);
        assert_eq!(
            first.opening_message.as_deref(),
            Some("[FIRING] alert of turn 1")
        );
        assert!(first.embedding_text().contains("alert of turn 1"));

        // Turn 2 arrives first and is embedded; turn 1 comes late and brings the opening
        // message: the episode keeps turn 2's conclusion and drops the stale vector.
        let mut second = fold(&[2]);
        second.embedding = Some(vec![0.1; 4]);
        second.embedding_model = Some("model".into());
        let late = merge_turn(Some(&second), &update(1, &[]), &conclusion(1), now()).unwrap();
        assert_eq!(late.summary, "summary of turn 2");
        assert_eq!(
            late.opening_message.as_deref(),
            Some("[FIRING] alert of turn 1")
        );
        assert_eq!(late.embedding, None, "the embedded text changed");

        // A newer turn never replaces it, and keeps the vector when nothing embedded moved
        // (a skill is not embedded; a finding is).
        let mut embedded = first.clone();
        embedded.embedding = Some(vec![0.1; 4]);
        let newer =
            merge_turn(Some(&embedded), &update(2, &["k8s"]), &conclusion(1), now()).unwrap();
        assert_eq!(
            newer.opening_message.as_deref(),
            Some("[FIRING] alert of turn 1")
        );
        assert!(newer.embedding.is_some());
        let mut found = conclusion(1);
        found.key_findings = vec!["a new finding".into()];
        let newer = merge_turn(Some(&embedded), &update(2, &[]), &found, now()).unwrap();
        assert_eq!(newer.embedding, None, "the findings are embedded");

        // A turn without a message leaves no opening message.
        let silent = TurnUpdate {
            opening_message: None,
            ..update(1, &[])
        };
        let e = merge_turn(None, &silent, &conclusion(1), now()).unwrap();
        assert_eq!(e.opening_message, None);
    }

    #[test]
    fn a_failed_turn_opens_only_an_episode_without_a_vector() {
        let failed = merge_failed_turn(None, &update(1, &[]), "timeout", now()).unwrap();
        assert_eq!(
            failed.opening_message.as_deref(),
            Some("[FIRING] alert of turn 1")
        );
        // A searchable episode's vector is not dropped by the failed path, which embeds
        // nothing: its opening message waits for a successful merge.
        let mut searchable = fold(&[2]);
        searchable.embedding = Some(vec![0.1; 4]);
        let e = merge_failed_turn(Some(&searchable), &update(1, &[]), "timeout", now()).unwrap();
        assert_eq!(
            e.opening_message.as_deref(),
            Some("[FIRING] alert of turn 2")
        );
        assert!(e.embedding.is_some());
    }

    /// A redelivery raced its retry copy: one merged the turn, the other failed for good. The
    /// failure writes nothing over the merged turn (it would send a good episode to retry).
    #[test]
    fn a_failed_copy_of_a_merged_turn_records_no_failure() {
        let merged = fold(&[1, 2]);
        assert!(merge_failed_turn(Some(&merged), &update(2, &[]), "timeout", now()).is_none());
        assert!(merge_failed_turn(Some(&merged), &update(1, &[]), "timeout", now()).is_none());
    }

    #[test]
    fn a_failed_newer_turn_keeps_the_searchable_conclusion() {
        let ok = fold(&[1]);
        let e = merge_failed_turn(Some(&ok), &update(2, &["extra"]), "timeout", now()).unwrap();
        assert_eq!(e.extraction_status, ExtractionStatus::Ok);
        assert_eq!(e.summary, "summary of turn 1");
        assert_eq!(e.extraction_error.as_deref(), Some("timeout"));
        assert!(e.skills_used.contains("extra"));
    }

    #[test]
    fn a_late_older_turn_concludes_an_episode_whose_newer_turn_failed_first() {
        // Turn 2 failed for good before turn 1 arrived: turn 1's conclusion makes the episode
        // searchable, as it would have in the other arrival order, and turn 2's failure
        // stays recorded for `deja retry`.
        let failed = merge_failed_turn(None, &update(2, &[]), "context window", now()).unwrap();
        let late = merge_turn(Some(&failed), &update(1, &[]), &conclusion(1), now()).unwrap();
        let in_order =
            merge_failed_turn(Some(&fold(&[1])), &update(2, &[]), "context window", now()).unwrap();
        for e in [&late, &in_order] {
            assert_eq!(e.extraction_status, ExtractionStatus::Ok);
            assert_eq!(e.summary, "summary of turn 1");
            assert_eq!(e.extraction_error.as_deref(), Some("context window"));
            assert_eq!(e.failed_turn(), Some(2));
        }
        assert!(
            !is_redelivery(&late, &update(2, &[])),
            "retry re-sends turn 2"
        );
    }

    #[test]
    fn an_older_turn_failing_after_a_newer_conclusion_records_no_failure() {
        let concluded = fold(&[2]);
        let late =
            merge_failed_turn(Some(&concluded), &update(1, &["k8s"]), "timeout", now()).unwrap();
        assert_eq!(late.summary, "summary of turn 2");
        assert_eq!(late.extraction_error, None);
        assert_eq!(late.failed_turn(), None);
        assert!(late.skills_used.contains("k8s"));
        assert_eq!(late.turn_count, 2);
        // So a redelivered turn 2 is a redelivery, not a new extraction.
        assert!(is_redelivery(&late, &update(2, &[])));
        assert!(merge_failed_turn(Some(&late), &update(1, &[]), "timeout", now()).is_none());
    }

    #[test]
    fn a_late_older_turn_does_not_clear_the_failure_of_a_newer_turn() {
        let ok = fold(&[1]);
        let failed = merge_failed_turn(Some(&ok), &update(3, &[]), "timeout", now()).unwrap();
        assert_eq!(failed.failed_turn_index, Some(3));
        let late = merge_turn(Some(&failed), &update(2, &[]), &conclusion(2), now()).unwrap();
        assert_eq!(
            late.summary, "summary of turn 2",
            "t2 is newer than t1's conclusion"
        );
        assert_eq!(late.extraction_error.as_deref(), Some("timeout"));
        assert_eq!(late.failed_turn_index, Some(3));
        // `deja retry` re-sends t3: it is not a redelivery and it clears the failure.
        assert!(!is_redelivery(&late, &update(3, &[])));
        let retried = merge_turn(Some(&late), &update(3, &[]), &conclusion(3), now()).unwrap();
        assert_eq!(retried.summary, "summary of turn 3");
        assert_eq!(retried.extraction_error, None);
        assert_eq!(retried.failed_turn_index, None);
        assert_eq!(retried.turn_count, 3);
    }

    #[test]
    fn a_redelivered_older_turn_does_not_clear_the_failure_of_a_newer_turn() {
        let ok = fold(&[1, 2]);
        let failed = merge_failed_turn(Some(&ok), &update(3, &[]), "timeout", now()).unwrap();
        for turn in [1, 2] {
            assert!(is_redelivery(&failed, &update(turn, &[])));
            let merged = merge_turn(Some(&failed), &update(turn, &[]), &conclusion(turn), now());
            assert!(merged.is_none(), "turn {turn} was already merged");
        }
        assert!(!is_redelivery(&failed, &update(3, &[])));
    }

    /// A superseded turn's extraction is never read, so the worker may skip it: whatever it
    /// would conclude (here: nothing of the conversation's), the episode comes out the same.
    fn fold_skipping_superseded(order: &[u32]) -> (Episode, usize) {
        let mut episode: Option<Episode> = None;
        let mut skipped = 0;
        for &turn in order {
            let update = update(turn, &[&format!("skill-{turn}")]);
            let unread = ExtractedEpisode {
                issue_type: "unrelated".into(),
                root_cause: Some("never read".into()),
                ..conclusion(99)
            };
            let superseded = is_superseded(episode.as_ref(), &update);
            skipped += usize::from(superseded);
            if let Some(next) = merge_turn(episode.as_ref(), &update, &unread, now())
                .filter(|_| superseded)
                .or_else(|| merge_turn(episode.as_ref(), &update, &conclusion(turn), now()))
            {
                episode = Some(next);
            }
        }
        (episode.unwrap(), skipped)
    }

    /// A later turn that names no cause, components or findings ("thanks, watching it") keeps
    /// the earlier turn's — in whichever order the two are merged: two turns of a backlog
    /// extracted at once may commit newest first.
    #[test]
    fn what_a_newer_turn_leaves_open_is_filled_by_an_older_one_arriving_late() {
        let open = |turn: u32| ExtractedEpisode {
            root_cause: None,
            components: vec![],
            key_findings: vec![],
            resolved: false,
            summary: format!("summary of turn {turn}"),
            ..conclusion(turn)
        };
        let merge_in = |order: &[(u32, ExtractedEpisode)]| {
            let mut episode: Option<Episode> = None;
            for (turn, extracted) in order {
                let update = update(*turn, &[]);
                assert!(
                    !is_superseded(episode.as_ref(), &update),
                    "turn {turn} must be read"
                );
                episode = merge_turn(episode.as_ref(), &update, extracted, now()).or(episode);
            }
            episode.unwrap()
        };
        let in_order = merge_in(&[(1, conclusion(1)), (2, open(2))]);
        let newest_first = merge_in(&[(2, open(2)), (1, conclusion(1))]);
        for episode in [&in_order, &newest_first] {
            assert_eq!(episode.root_cause.as_deref(), Some("root cause of turn 1"));
            assert_eq!(episode.components, conclusion(1).components);
            assert_eq!(episode.key_findings, conclusion(1).key_findings);
            assert_eq!(episode.summary, "summary of turn 2");
        }
        // The text it embeds changed: its vector is dropped, for the worker to embed anew.
        let mut embedded = merge_in(&[(2, open(2))]);
        embedded.embedding = Some(vec![0.1; 4]);
        let filled = merge_turn(Some(&embedded), &update(1, &[]), &conclusion(1), now()).unwrap();
        assert_eq!(filled.embedding, None);
        // The cause in the middle: turns 1, 3 and then 2.
        let middle = merge_in(&[(1, open(1)), (3, open(3)), (2, conclusion(2))]);
        assert_eq!(middle.root_cause.as_deref(), Some("root cause of turn 2"));
        assert_eq!(middle.summary, "summary of turn 3");
        // A cause the newer turns ruled out is not brought back.
        let mut denied = merge_in(&[(2, open(2))]);
        denied.ruled_out = vec!["root cause of turn 1".into()];
        let merged = merge_turn(Some(&denied), &update(1, &[]), &conclusion(1), now()).unwrap();
        assert_eq!(merged.root_cause, None);
        assert_eq!(merged.key_findings, conclusion(1).key_findings);
    }

    #[test]
    fn a_turn_older_than_the_conclusion_is_superseded_unless_it_is_the_first() {
        let concluded = fold(&[1, 3]);
        assert!(is_superseded(Some(&concluded), &update(2, &[])));
        // The first turn late still gives the description; a newer turn concludes.
        assert!(!is_superseded(Some(&fold(&[2, 3])), &update(1, &[])));
        assert!(!is_superseded(Some(&concluded), &update(4, &[])));
        assert!(!is_superseded(None, &update(2, &[])));
        // An episode whose turns all failed takes any turn's conclusion.
        let failed = merge_failed_turn(None, &update(3, &[]), "llm down", now()).unwrap();
        assert!(!is_superseded(Some(&failed), &update(2, &[])));
        let merged = merge_superseded_turn(&concluded, &update(2, &["skill-2"]), now())
            .expect("a turn not merged yet");
        assert_eq!(merged.turn_count, 3);
        assert_eq!(
            merge_superseded_turn(&merged, &update(2, &["skill-2"]), now()),
            None,
            "a copy of it is nothing to write"
        );
        assert!(merged.skills_used.contains("skill-2"));
        assert_eq!(merged.root_cause, concluded.root_cause);
    }

    proptest! {
        #[test]
        fn a_superseded_turns_extraction_changes_nothing(order in Just(vec![1u32, 2, 3, 4, 5]).prop_shuffle(), dup in 0usize..5) {
            let mut with_dup = order.clone();
            with_dup.push(order[dup]);
            let (skipping, skipped) = fold_skipping_superseded(&with_dup);
            // What the conversation concluded and saw first, never the unread extraction's
            // (turn 99's): a late first turn is not superseded, it gives the description.
            prop_assert_eq!(&skipping.summary, "summary of turn 5");
            prop_assert_eq!(&skipping.issue_description, "description of turn 1");
            prop_assert_eq!(skipping, fold(&with_dup));
            // Every turn under 5 that came after 5 and after turn 1 is superseded.
            let at = |t: u32| with_dup.iter().position(|&x| x == t).unwrap();
            let expected = (2..5).filter(|&t| at(t) > at(5) && at(t) > at(1)).count();
            prop_assert!(skipped >= expected, "{skipped} < {expected} in {with_dup:?}");
        }

        #[test]
        fn the_highest_turn_wins_in_any_arrival_order(order in Just(vec![1u32, 2, 3, 4, 5]).prop_shuffle(), dup in 0usize..5) {
            let mut with_dup = order.clone();
            with_dup.push(order[dup]);
            let e = fold(&with_dup);
            prop_assert_eq!(e.summary, "summary of turn 5");
            prop_assert_eq!(e.key_findings, vec!["finding of turn 5".to_string()]);
            prop_assert_eq!(e.last_turn_index, 5);
            prop_assert_eq!(e.turn_count, 5);
            prop_assert_eq!(e.opening_message.as_deref(), Some("[FIRING] alert of turn 1"));
            prop_assert_eq!(e.created_at, update(1, &[]).started_at);
            prop_assert_eq!(e.agent_id, "agent-1");
            let expected: BTreeSet<String> = (1..=5).map(|t| format!("skill-{t}")).collect();
            prop_assert_eq!(e.skills_used, expected);
        }
    }
}
