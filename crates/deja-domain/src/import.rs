//! Reviewed incident records (`deja import`): the format of `tests/fixtures/incidents.sample.jsonl`,
//! documented in `docs/import.md`. A record becomes an episode with provenance `imported`.

use crate::episode::{
    effectiveness_score, Component, Episode, EpisodeKey, ExtractionStatus, Provenance,
    VERIFICATION_PREFIX,
};
use crate::extraction::{add_ruled_out, clean_list, hypotheses_only, split_off_ruled_out};
use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IncidentRecord {
    pub id: String,
    pub org: String,
    pub team: String,
    #[serde(default)]
    pub title: Option<String>,
    pub issue_type: String,
    pub issue_description: String,
    #[serde(default)]
    pub symptoms: Option<String>,
    /// The message that opened the investigation, verbatim (an alert, a question): kept as
    /// the episode's `opening_message` (bounded like the worker bounds it), not in the
    /// description. Optional; `--records` writes it for the episodes the worker extracted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opening_message: Option<String>,
    /// What the investigation observed, one short sentence each (the episode's
    /// `key_findings`: embedded and indexed with it). Optional; `--records` writes them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub key_findings: Vec<String>,
    #[serde(default)]
    pub components: Vec<Component>,
    #[serde(default)]
    pub root_cause: Option<String>,
    #[serde(default)]
    pub resolution: Option<String>,
    #[serde(default)]
    pub verification: Option<String>,
    pub summary: String,
    #[serde(default)]
    pub skills_used: Vec<String>,
    pub resolved: bool,
    #[serde(default)]
    pub root_cause_confidence: Option<String>,
    #[serde(default)]
    pub significance: Option<String>,
    #[serde(default)]
    pub ruled_out: Vec<String>,
    /// `YYYY-MM-DD` or RFC 3339.
    pub created: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RecordError(pub String);

impl IncidentRecord {
    /// Parses one JSON line and checks it; the error says what is wrong.
    pub fn parse(line: &str) -> Result<IncidentRecord, RecordError> {
        let record: IncidentRecord = serde_json::from_str(line)
            .map_err(|e| RecordError(format!("not a valid incident record: {e}")))?;
        for (field, value) in [
            ("id", &record.id),
            ("org", &record.org),
            ("team", &record.team),
        ] {
            crate::event::check_id(field, value).map_err(RecordError)?;
        }
        for (field, value) in [
            ("issue_type", &record.issue_type),
            ("issue_description", &record.issue_description),
            ("summary", &record.summary),
        ] {
            if value.trim().is_empty() {
                return Err(RecordError(format!("field `{field}` must not be empty")));
            }
        }
        record.created_at()?;
        if record.resolved
            && record
                .root_cause
                .as_deref()
                .is_none_or(|r| r.trim().is_empty())
        {
            return Err(RecordError(
                "`resolved` is true but `root_cause` is empty".into(),
            ));
        }
        Ok(record)
    }

    /// The record of an episode the worker extracted, named `id`: what memory holds for a
    /// conversation, in the import format, so that an evaluation can import it as it
    /// imports reviewed records (`deja eval extraction --records`). The record carries every
    /// field search reads; a verification among the key findings becomes `verification`. Checked
    /// like any record: an episode without a description or summary, or resolved without a
    /// cause, is not one.
    pub fn from_episode(episode: &Episode, id: &str) -> Result<IncidentRecord, RecordError> {
        let record = IncidentRecord {
            id: id.to_owned(),
            org: episode.org.clone(),
            team: episode.team.clone(),
            title: None,
            issue_type: episode.issue_type.clone(),
            issue_description: episode.issue_description.clone(),
            symptoms: None,
            opening_message: episode.opening_message.clone(),
            key_findings: crate::episode::observed_findings(&episode.key_findings)
                .map(str::to_owned)
                .collect(),
            components: episode.components.clone(),
            root_cause: episode.root_cause.clone(),
            resolution: episode.resolution.clone(),
            verification: crate::episode::verification_of(&episode.key_findings).map(str::to_owned),
            summary: episode.summary.clone(),
            skills_used: episode.skills_used.iter().cloned().collect(),
            resolved: episode.resolved,
            root_cause_confidence: episode.root_cause_confidence.clone(),
            significance: episode.significance.clone(),
            ruled_out: episode.ruled_out.clone(),
            created: episode.created_at.to_rfc3339(),
        };
        let line = serde_json::to_string(&record)
            .map_err(|e| RecordError(format!("cannot write the record: {e}")))?;
        IncidentRecord::parse(&line)
    }

    pub fn created_at(&self) -> Result<DateTime<Utc>, RecordError> {
        if let Ok(at) = DateTime::parse_from_rfc3339(&self.created) {
            return Ok(at.with_timezone(&Utc));
        }
        NaiveDate::parse_from_str(&self.created, "%Y-%m-%d")
            .ok()
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .map(|d| d.and_utc())
            .ok_or_else(|| {
                RecordError(format!("field `created` is not a date: {:?}", self.created))
            })
    }

    /// Refuses a `created` date more than a day after `now`: a typo (2062 for 2026) would
    /// rank and list first for decades, and a corrected re-import could not move it back (the
    /// later confirmation stays). What `deja import` checks of people's records; an evaluation
    /// imports a corpus whatever its dates.
    pub fn check_created_by(&self, now: DateTime<Utc>) -> Result<(), RecordError> {
        if self.created_at()? > now + chrono::Duration::days(1) {
            return Err(RecordError(format!(
                "field `created` is in the future: {:?}",
                self.created
            )));
        }
        Ok(())
    }

    /// The episode this record becomes; the record id is its correlation id, so re-importing
    /// the same id updates the same episode. Symptoms join the description because they are
    /// what a later search describes.
    pub fn to_episode(&self, now: DateTime<Utc>) -> Result<Episode, RecordError> {
        let created = self.created_at()?;
        let key = EpisodeKey::new(&self.org, &self.id);
        let mut description = self.issue_description.trim().to_owned();
        if let Some(symptoms) = self.symptoms.as_deref().filter(|s| !s.trim().is_empty()) {
            description = format!("{description} Symptoms: {}", symptoms.trim());
        }
        // Cleaned as an extraction's cause and list are (`split_off_ruled_out`,
        // `hypotheses_only`): an imported record may be a small model's extraction.
        let mut ruled_out = hypotheses_only(clean_list(self.ruled_out.clone()), &self.key_findings);
        let root_cause = self
            .root_cause
            .as_deref()
            .filter(|r| !r.trim().is_empty())
            .map(|cause| {
                let (cause, clauses) = split_off_ruled_out(cause);
                for clause in clauses {
                    add_ruled_out(&mut ruled_out, clause);
                }
                cause
            });
        Ok(Episode {
            id: key.episode_id(),
            org: self.org.clone(),
            team: self.team.clone(),
            agent_id: "import".to_owned(),
            correlation_id: self.id.clone(),
            agent_run_id: String::new(),
            turn_count: 0,
            last_turn_index: 0,
            issue_type: crate::vocab::normalize_issue_type(&self.issue_type),
            issue_description: description,
            opening_message: self
                .opening_message
                .as_deref()
                .and_then(crate::episode::opening_message_of),
            components: crate::vocab::normalize_components(self.components.clone()),
            skills_used: self
                .skills_used
                .iter()
                .filter_map(|skill| crate::event::skill_name(skill))
                .collect(),
            // Cleaned as an extraction's lists are: a record written by hand or by a small
            // model may repeat one item, and a repeated finding would weigh twice when embedded.
            key_findings: clean_list(self.key_findings.clone())
                .into_iter()
                .chain(
                    self.verification
                        .iter()
                        .map(|v| format!("{VERIFICATION_PREFIX}{v}")),
                )
                .collect(),
            effectiveness_score: effectiveness_score(self.resolved, root_cause.as_deref()),
            root_cause,
            summary: self.summary.clone(),
            resolved: self.resolved,
            embedding: None,
            embedding_model: None,
            extraction_status: ExtractionStatus::Ok,
            extraction_error: None,
            failed_turn_index: None,
            provenance: Provenance::Imported,
            event_ids: Vec::new(),
            significance: self.significance.clone(),
            root_cause_confidence: self.root_cause_confidence.clone(),
            ruled_out,
            resolution: self.resolution.clone(),
            created_at: created,
            updated_at: now,
            last_confirmed_at: created,
            version: 0,
            review: Default::default(),
            turns: Vec::new(),
            last_recalled_at: None,
            recurrence: None,
        })
    }
}

/// Why a record is not written over the episode its id names: that episode holds an agent
/// conversation (extracted from turns, or an imported one a conversation's turns have merged
/// into since). A record replaces what an import wrote; merged into a conversation it would
/// overwrite the conclusion of its newest turn with older, second-hand text, and the next
/// turn would overwrite the record in turn.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the episode {episode_id} of id {correlation_id} holds an agent conversation ({provenance}, \
     {turns} turns): a record does not overwrite it"
)]
pub struct ConversationEpisode {
    pub episode_id: String,
    pub correlation_id: String,
    pub provenance: &'static str,
    pub turns: usize,
}

/// The episode of a record (`record`, from [`IncidentRecord::to_episode`]) re-imported over
/// `stored`, the episode its id already names. The record's fields replace what the last
/// import wrote, but what happened to the episode since stays:
/// - what people did: the verdict and its note, the fields they edited (`human_pinned`) with
///   their values, the proposals; the record's different value for a pinned field becomes a
///   proposal beside it, as an agent turn's does ([`crate::review::keep_pinned`]), except a
///   root cause the person ruled out (marked wrong): it stays in `ruled_out` and is proposed
///   no more;
/// - `last_confirmed_at` when newer than the record's `created` (`deja episode confirm`),
///   and the earlier `created_at`;
/// - the turns, event ids and the recall stamp;
/// - the embedding, when the embedded text is the stored one (the caller checks its model).
///
/// An episode that holds an agent conversation is refused ([`ConversationEpisode`]).
pub fn reimport(stored: &Episode, record: Episode) -> Result<Episode, ConversationEpisode> {
    if stored.provenance != Provenance::Imported
        || !stored.event_ids.is_empty()
        || !stored.turns.is_empty()
        || stored.turn_count > 0
    {
        return Err(ConversationEpisode {
            episode_id: stored.id.clone(),
            correlation_id: stored.correlation_id.clone(),
            provenance: stored.provenance.as_str(),
            turns: stored.turns.len().max(stored.turn_count as usize),
        });
    }
    let record_cause = record.root_cause.clone();
    let mut merged = Episode {
        created_at: stored.created_at.min(record.created_at),
        last_confirmed_at: stored.last_confirmed_at.max(record.last_confirmed_at),
        review: stored.review.clone(),
        turns: stored.turns.clone(),
        event_ids: stored.event_ids.clone(),
        last_recalled_at: stored.last_recalled_at,
        recurrence: stored.recurrence,
        version: stored.version,
        embedding: None,
        embedding_model: None,
        ..record
    };
    crate::review::keep_pinned(stored, &mut merged);
    if stored.review.human_pinned.contains("root_cause") {
        if let Some(cause) = record_cause.filter(|cause| {
            crate::merge::restates_one_of(cause, &stored.ruled_out)
                && merged.root_cause.as_deref() != Some(cause.as_str())
        }) {
            // Marked wrong (or ruled out by an edit): the person's word on this cause stands.
            match stored.review.proposals.get("root_cause") {
                Some(earlier) => merged
                    .review
                    .proposals
                    .insert("root_cause".to_owned(), earlier.clone()),
                None => merged.review.proposals.remove("root_cause"),
            };
            if !crate::merge::restates_one_of(&cause, &merged.ruled_out) {
                merged.ruled_out.push(cause);
            }
        }
    }
    merged.effectiveness_score = effectiveness_score(merged.resolved, merged.root_cause.as_deref());
    if merged.embedding_text() == stored.embedding_text() {
        merged.embedding = stored.embedding.clone();
        merged.embedding_model = stored.embedding_model.clone();
    }
    Ok(merged)
}

/// Whether writing `merged` (from [`reimport`]) would change nothing of `stored` but its
/// update time: a record imported again unchanged is no new version.
pub fn changes_nothing(stored: &Episode, merged: &Episode) -> bool {
    let mut same = merged.clone();
    same.updated_at = stored.updated_at;
    same.version = stored.version;
    &same == stored
}

/// Valid records and invalid lines (with their error), each with its 1-based line number.
pub type ParsedRecords = (Vec<(usize, IncidentRecord)>, Vec<(usize, String)>);

/// Checks the org given for every record (`deja import --org`) as a record's own org is
/// checked.
pub fn check_org(org: &str) -> Result<(), RecordError> {
    crate::event::check_id("org", org)
        .map_err(|error| RecordError(error.replace("field `org`", "`--org`")))
}

/// Every record of a JSON-lines file (`deja import`, `deja eval`): the valid ones with their
/// line numbers, moved into `org` when given (evaluation namespaces), and the invalid lines
/// with their error. Blank lines are skipped. A record whose id (in its org) an earlier line
/// already gave is invalid: the earlier one stands, and the later one is reported rather than
/// written over it.
pub fn parse_records(text: &str, org: Option<&str>) -> ParsedRecords {
    let (mut records, mut invalid) = (Vec::new(), Vec::new());
    let mut first_line: HashMap<EpisodeKey, usize> = HashMap::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match IncidentRecord::parse(line) {
            Ok(mut record) => {
                if let Some(org) = org {
                    record.org = org.to_owned();
                }
                let key = EpisodeKey::new(&record.org, &record.id);
                if let Some(first) = first_line.get(&key) {
                    invalid.push((
                        index + 1,
                        format!(
                            "duplicate id {} in org {} (first on line {first})",
                            record.id, record.org
                        ),
                    ));
                    continue;
                }
                first_line.insert(key, index + 1);
                records.push((index + 1, record));
            }
            Err(error) => invalid.push((index + 1, error.to_string())),
        }
    }
    (records, invalid)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"{"id": "inc-1", "org": "acme", "team": "checkout", "issue_type": "Cache Eviction",
        "issue_description": "checkout pods crash", "symptoms": "evicted_keys climbing",
        "components": [{"type": "database", "name": "redis"}], "root_cause": "maxmemory too low",
        "resolution": "raised maxmemory", "verification": "no evictions for a week",
        "summary": "redis full", "skills_used": ["database-redis"], "resolved": true,
        "root_cause_confidence": "confirmed", "significance": "incident", "ruled_out": ["bad deploy", " Bad Deploy "],
        "created": "2026-02-03", "cluster": "ignored", "source": "ignored"}"#;

    /// Skills are kept as a turn's are (one `Skill` node per name, whatever the case), and a
    /// date in the future is a typo, refused.
    #[test]
    fn skills_are_named_as_a_turns_and_a_future_date_is_refused() {
        let line = LINE.replace(
            r#""skills_used": ["database-redis"]"#,
            r#""skills_used": [" Database-Redis ", " ", "observability"]"#,
        );
        let record = IncidentRecord::parse(&line).unwrap();
        let now = DateTime::parse_from_rfc3339("2026-06-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let episode = record.to_episode(now).unwrap();
        let skills: Vec<&str> = episode.skills_used.iter().map(String::as_str).collect();
        assert_eq!(skills, ["database-redis", "observability"]);
        assert!(record.check_created_by(now).is_ok());
        let typo = IncidentRecord::parse(&LINE.replace("2026-02-03", "2062-02-03")).unwrap();
        let error = typo.check_created_by(now).unwrap_err();
        assert!(error.0.contains("in the future"), "{error:?}");
    }

    #[test]
    fn a_record_becomes_an_imported_episode_keeping_review_fields() {
        let record = IncidentRecord::parse(LINE).unwrap();
        let episode = record.to_episode(Utc::now()).unwrap();
        assert_eq!(episode.provenance, Provenance::Imported);
        assert_eq!(episode.issue_type, "cache-eviction");
        assert!(episode
            .issue_description
            .contains("Symptoms: evicted_keys climbing"));
        assert_eq!(episode.ruled_out, vec!["bad deploy"]);
        // The verification is kept with the findings, and is not embedded: it describes the
        // fix, not the failure.
        assert_eq!(
            episode.key_findings,
            vec!["Verification: no evictions for a week"]
        );
        assert!(!episode.embedding_text().contains("no evictions for a week"));
        let with_findings = LINE.replace(
            r#""components""#,
            r#""key_findings": [" OOMKilled at 02:10 ", "", "oomkilled AT 02:10"], "components""#,
        );
        let episode = IncidentRecord::parse(&with_findings)
            .unwrap()
            .to_episode(Utc::now())
            .unwrap();
        assert_eq!(
            episode.key_findings,
            vec![
                "OOMKilled at 02:10",
                "Verification: no evictions for a week"
            ]
        );
        assert!(episode.embedding_text().contains("OOMKilled at 02:10"));
        assert_eq!(episode.significance.as_deref(), Some("incident"));
        assert_eq!(episode.created_at.to_rfc3339(), "2026-02-03T00:00:00+00:00");
        assert_eq!(episode.effectiveness_score, 0.8);
        assert_eq!(episode.id, EpisodeKey::new("acme", "inc-1").episode_id());
    }

    #[test]
    fn a_record_lists_a_finding_as_ruled_out_only_where_extraction_would() {
        let mut value: serde_json::Value = serde_json::from_str(LINE).unwrap();
        value["key_findings"] = serde_json::json!(["evicted_keys climbing since 04:12"]);
        value["ruled_out"] =
            serde_json::json!(["Evicted keys climbing since 04:12.", "bad deploy"]);
        let record = IncidentRecord::parse(&value.to_string()).unwrap();
        let episode = record.to_episode(Utc::now()).unwrap();
        assert_eq!(episode.ruled_out, vec!["bad deploy"]);
        assert_eq!(episode.key_findings[0], "evicted_keys climbing since 04:12");

        // A cause's clause that only rules something out moves as an extraction's does.
        value["root_cause"] =
            serde_json::json!("maxmemory too low; a bad deploy was ruled out; DNS is fine");
        let record = IncidentRecord::parse(&value.to_string()).unwrap();
        let episode = record.to_episode(Utc::now()).unwrap();
        assert_eq!(episode.root_cause.as_deref(), Some("maxmemory too low"));
        assert_eq!(episode.ruled_out, vec!["bad deploy", "DNS is fine"]);
    }

    #[test]
    fn an_extracted_episode_becomes_a_record_that_imports_back_to_what_search_reads() {
        let mut extracted = crate::testing::episode("ep-1");
        extracted.issue_type = "cache-eviction".into();
        extracted.issue_description = "checkout pods crash with session misses".into();
        extracted.root_cause = Some("maxmemory too low for the session keys".into());
        extracted.resolved = true;
        extracted.summary = "redis evicted sessions".into();
        extracted.ruled_out = vec!["bad deploy".into()];
        extracted.components = vec![Component::new("database", "redis")];
        extracted.opening_message = Some("[FIRING] CheckoutSessionMisses".into());
        extracted.key_findings = vec![
            "evicted_keys climbing since 02:10".into(),
            format!("{VERIFICATION_PREFIX}no misses after the resize"),
        ];

        let record = IncidentRecord::from_episode(&extracted, "inc-7").unwrap();
        assert_eq!(record.id, "inc-7");
        let imported = record.to_episode(Utc::now()).unwrap();
        assert_eq!(imported.embedding_text(), extracted.embedding_text());
        assert!(imported
            .embedding_text()
            .contains("evicted_keys climbing since 02:10"));
        assert_eq!(imported.opening_message, extracted.opening_message);
        assert_eq!(imported.key_findings, extracted.key_findings);
        assert_eq!(
            record.verification.as_deref(),
            Some("no misses after the resize")
        );
        assert_eq!(imported.root_cause, extracted.root_cause);
        assert_eq!(imported.ruled_out, extracted.ruled_out);
        assert_eq!(imported.components, extracted.components);
        assert_eq!(imported.created_at, extracted.created_at);

        // What is not a valid record is refused, as `deja import` would refuse it.
        extracted.root_cause = None;
        let error = IncidentRecord::from_episode(&extracted, "inc-7").unwrap_err();
        assert!(error.0.contains("root_cause"), "{error}");
        extracted.resolved = false;
        extracted.summary = String::new();
        let error = IncidentRecord::from_episode(&extracted, "inc-7").unwrap_err();
        assert!(error.0.contains("summary"), "{error}");
    }

    /// The episode `LINE` became, as stored after its first import (version 1, embedded).
    fn stored() -> Episode {
        let mut episode = IncidentRecord::parse(LINE)
            .unwrap()
            .to_episode(Utc::now())
            .unwrap();
        episode.version = 1;
        episode.embedding = Some(vec![0.5; 3]);
        episode.embedding_model = Some("m".into());
        episode
    }

    fn record_episode(line: &str) -> Episode {
        IncidentRecord::parse(line)
            .unwrap()
            .to_episode(Utc::now())
            .unwrap()
    }

    #[test]
    fn a_record_imported_again_unchanged_changes_nothing() {
        let stored = stored();
        let merged = reimport(&stored, record_episode(LINE)).unwrap();
        assert!(changes_nothing(&stored, &merged), "{merged:#?}");
        assert_eq!(merged.embedding, stored.embedding, "the text did not move");

        let changed = LINE.replace("redis full", "redis ran full");
        let merged = reimport(&stored, record_episode(&changed)).unwrap();
        assert!(!changes_nothing(&stored, &merged));
        assert_eq!(
            merged.summary, "redis ran full",
            "an unpinned field follows the record"
        );
        assert!(merged.embedding.is_none(), "the embedded text moved");
        assert_eq!(merged.version, stored.version);
    }

    #[test]
    fn a_record_imported_again_keeps_what_people_did_to_the_episode() {
        let mut stored = stored();
        let later = stored.created_at + chrono::Duration::days(30);
        crate::review::mark_wrong(&mut stored, "it was the network", later);
        let edit = crate::review::EpisodeEdit {
            summary: Some("a person's summary".into()),
            ..Default::default()
        };
        crate::review::apply_edit(&mut stored, &edit, later).unwrap();
        crate::review::confirm(&mut stored, later);
        stored.last_recalled_at = Some(later);

        let changed = LINE.replace("raised maxmemory", "raised maxmemory to 4gb");
        let merged = reimport(&stored, record_episode(&changed)).unwrap();
        assert!(merged.review.is_wrong());
        assert!(!crate::review::is_strategy_source(&merged));
        assert_eq!(
            merged.review.verdict_note.as_deref(),
            Some("it was the network")
        );
        assert_eq!(merged.summary, "a person's summary");
        assert_eq!(
            merged.review.proposals.get("summary"),
            Some(&serde_json::json!("redis full")),
            "the record's value is proposed beside the person's, as an agent turn's is"
        );
        assert_eq!(merged.root_cause, None, "marked wrong");
        assert!(
            !merged.review.proposals.contains_key("root_cause"),
            "the cause the person ruled out is not proposed back"
        );
        assert!(merged.ruled_out.contains(&"maxmemory too low".to_owned()));
        assert!(
            merged.effectiveness_score < 0.8,
            "no cause, no resolved-with-cause score"
        );
        assert_eq!(merged.last_confirmed_at, later);
        assert_eq!(merged.last_recalled_at, Some(later));
        assert_eq!(
            merged.resolution.as_deref(),
            Some("raised maxmemory to 4gb"),
            "an unpinned field follows the record"
        );
        // Imported once more unchanged: the proposal is already there, nothing to write.
        let mut written = merged.clone();
        written.version += 1;
        let again = reimport(&written, record_episode(&changed)).unwrap();
        assert!(changes_nothing(&written, &again), "{again:#?}");
    }

    #[test]
    fn a_conversations_episode_is_not_overwritten_by_a_record() {
        let mut extracted = stored();
        extracted.provenance = Provenance::Extracted;
        let refused = reimport(&extracted, record_episode(LINE)).unwrap_err();
        assert!(
            refused.to_string().contains("agent conversation"),
            "{refused}"
        );

        let mut joined = stored();
        joined.event_ids = vec!["evt-1".into()];
        joined.turn_count = 1;
        assert!(reimport(&joined, record_episode(LINE)).is_err());
    }

    #[test]
    fn a_repeated_id_is_reported_and_the_first_line_kept() {
        let one = LINE.replace('\n', " ");
        let other = one.replace("redis full", "the later line");
        let text = format!("{one}\n\n{other}\n");
        let (records, invalid) = parse_records(&text, None);
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].0, 1);
        assert_eq!(records[0].1.summary, "redis full");
        assert_eq!(invalid.len(), 1);
        assert_eq!(invalid[0].0, 3);
        assert!(
            invalid[0].1.contains("duplicate id inc-1"),
            "{}",
            invalid[0].1
        );
        assert!(invalid[0].1.contains("line 1"), "{}", invalid[0].1);

        // The same id in two orgs is two episodes, unless `--org` moves both into one.
        let elsewhere = other.replace("\"acme\"", "\"globex\"");
        let text = format!("{one}\n{elsewhere}\n");
        assert_eq!(parse_records(&text, None).0.len(), 2);
        let (records, invalid) = parse_records(&text, Some("eval-1"));
        assert_eq!((records.len(), invalid.len()), (1, 1));
    }

    #[test]
    fn the_org_given_for_every_record_is_checked_like_a_records() {
        assert!(check_org("eval-1").is_ok());
        for bad in ["", "   ", "a\u{1f}b"] {
            let error = check_org(bad).unwrap_err();
            assert!(error.0.contains("--org"), "{error}");
        }
    }

    #[test]
    fn invalid_records_say_what_is_wrong() {
        let no_summary = LINE.replace("\"summary\": \"redis full\"", "\"summary\": \"\"");
        assert!(IncidentRecord::parse(&no_summary)
            .unwrap_err()
            .0
            .contains("summary"));
        let bad_date = LINE.replace("2026-02-03", "yesterday");
        assert!(IncidentRecord::parse(&bad_date)
            .unwrap_err()
            .0
            .contains("created"));
        assert!(IncidentRecord::parse("{").is_err());
    }
}
