//! What people do to episodes: the review listing, a write guarded by the version the person
//! read together with its audit record, the review history, the strategies an episode feeds
//! and deletion.
//!
//! ```text
//! (:Episode)-[:HAS_REVIEW]->(:Review {at, by, action, changes_json, version})
//! (:Review {action: 'delete', episode_id, org, team, correlation_id, at, by})  -- kept alone
//! ```
//!
//! The rules themselves (what an edit changes, what marking wrong does) are pure, in
//! `deja_domain::review`; this module only reads and writes.

use crate::queries::{cypher, MARK_RECALLED};
use crate::rows::int;
use crate::{column, episode_column, GraphStore, Result, SaveOutcome};
use chrono::{DateTime, Utc};
use deja_domain::{Episode, EpisodeKey, ExtractionStatus};
use serde::{Deserialize, Serialize};

cypher!(LIST, "review/list");
cypher!(RECORD, "review/record");
cypher!(HISTORY, "review/history");
cypher!(STRATEGIES, "review/strategies");
cypher!(DELETE, "review/delete");
cypher!(LINK_RECURRENCE, "review/link_recurrence");
cypher!(UNLINK_RECURRENCE, "review/unlink_recurrence");
cypher!(RECURRENCES, "review/recurrences");
cypher!(AUTO_LINK_RECURRENCE, "review/auto_link_recurrence");
cypher!(DELETED, "review/deleted");

/// Every review statement, for the "every query file is embedded" check.
#[cfg(test)]
pub(crate) const QUERIES: &[crate::queries::Cypher] = &[
    LIST,
    RECORD,
    HISTORY,
    STRATEGIES,
    DELETE,
    LINK_RECURRENCE,
    UNLINK_RECURRENCE,
    RECURRENCES,
    AUTO_LINK_RECURRENCE,
    DELETED,
];

/// The audit record of `record` on the episode of `key` (`review/record.cypher`), but for
/// the version it names, which the caller adds.
fn audit_statement(key: &EpisodeKey, record: &ReviewRecord) -> crate::queries::Statement {
    RECORD
        .statement()
        .param("key", key.composite())
        .param("at", record.at)
        .param("by", record.by.as_str())
        .param("action", record.action.as_str())
        .param("changes_json", record.changes_json.as_str())
}

/// Who links recurrences detected automatically (the recognition decision).
pub const RECOGNITION: &str = "recognition";

/// How the review listing is ordered (always newest first).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ReviewOrder {
    /// Most recently updated (by a turn or a person).
    #[default]
    Updated,
    Created,
    /// Most recently confirmed (by a turn or a person): the recency anchor of ranking.
    Confirmed,
    /// Most recently returned by a memory-search (`last_recalled_at`); never recalled last.
    Recalled,
}

impl ReviewOrder {
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewOrder::Updated => "updated",
            ReviewOrder::Created => "created",
            ReviewOrder::Confirmed => "confirmed",
            ReviewOrder::Recalled => "recalled",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "updated" => Some(ReviewOrder::Updated),
            "created" => Some(ReviewOrder::Created),
            "confirmed" => Some(ReviewOrder::Confirmed),
            "recalled" => Some(ReviewOrder::Recalled),
            _ => None,
        }
    }
}

/// Which verdicts the listing keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerdictFilter {
    /// Episodes nobody put a verdict on.
    None,
    /// Episodes with this verdict (`wrong`).
    Is(String),
}

/// The filters of the review listing; every field is optional and they combine with AND.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReviewFilter {
    pub team: Option<String>,
    pub issue_type: Option<String>,
    pub significance: Option<String>,
    pub resolved: Option<bool>,
    pub status: Option<ExtractionStatus>,
    /// Only episodes with an `extraction_error` (failed, or ok with a failed newer turn).
    pub pending_error: bool,
    pub verdict: Option<VerdictFilter>,
    /// `(type or None, name)`: the episode affects a component of that name (any case).
    pub component: Option<(Option<String>, String)>,
    /// A substring of the episode's text fields (any case).
    pub text: Option<String>,
    pub order: ReviewOrder,
}

/// One page of the review listing.
#[derive(Debug, Clone, PartialEq)]
pub struct ReviewPage {
    pub episodes: Vec<Episode>,
    /// The offset of the next page, when there is one.
    pub next_offset: Option<usize>,
}

/// The audit record of one review write.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReviewRecord {
    pub at: DateTime<Utc>,
    /// The token's name (or the CLI user).
    pub by: String,
    /// `edit`, `mark_wrong`, `clear_verdict`, `confirm`, `delete`...
    pub action: String,
    /// The field changes, as JSON (`[{field, from, to}]`).
    pub changes_json: String,
    /// The episode version the write produced (absent for a deletion).
    pub version: Option<i64>,
}

/// A strategy an episode feeds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FedStrategy {
    pub team: String,
    pub issue_type: String,
    pub component_type: String,
    pub component_name: String,
    pub version: i64,
    /// A source was deleted: the next qualifying search asks for a new synthesis.
    pub stale: bool,
}

/// What a deletion removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Deletion {
    pub stale_strategies: i64,
    pub reviews: i64,
    pub turn_inputs: i64,
}

/// One `RECURRENCE_OF` link of an episode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecurrenceLink {
    /// `of`: this episode recurs the other; `recurred_in`: the other recurs this one.
    pub direction: String,
    pub id: String,
    pub team: String,
    pub issue_type: String,
    pub created_at: DateTime<Utc>,
    pub detected_at: DateTime<Utc>,
    pub confidence: f64,
    pub by: String,
    pub confirmed_by: Option<String>,
}

/// A pair a person unlinked: not a recurrence, and never linked again automatically
/// (`NOT_RECURRENCE_OF`; only a person's link of the pair removes it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RejectedLink {
    /// `of`: this episode was unlinked from the other (older) one; `recurred_in`: the other
    /// was unlinked from this one.
    pub direction: String,
    pub id: String,
    pub team: String,
    pub issue_type: String,
    pub by: String,
    pub at: DateTime<Utc>,
}

/// What the recognition decision's linking did for one episode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct AutoLink {
    /// A new `RECURRENCE_OF` link was created.
    pub created: bool,
    /// Earlier automatic links removed (the newest conclusion recognized another incident, or
    /// none).
    pub retracted: i64,
}

/// One episode of a recurrence chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChainEpisode {
    pub id: String,
    pub team: String,
    pub issue_type: String,
    pub created_at: DateTime<Utc>,
    /// `wrong` when a person marked it wrong.
    #[serde(default)]
    pub verdict: Option<String>,
}

/// An episode's recurrence chain (every episode linked to it, directly or not).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recurrences {
    /// Other episodes in the chain.
    pub recurrence_count: i64,
    /// The earliest and latest `created_at` in the chain (this episode included).
    pub first_seen: DateTime<Utc>,
    pub last_seen: DateTime<Utc>,
    pub links: Vec<RecurrenceLink>,
    /// Every episode of the chain, this one included, oldest first.
    #[serde(default)]
    pub chain: Vec<ChainEpisode>,
    /// The pairs with this episode a person unlinked.
    #[serde(default)]
    pub rejected: Vec<RejectedLink>,
}

impl GraphStore {
    /// Links `new_id` (a newer conversation's episode) as a recurrence of `old_id`, both of
    /// `org`. Idempotent: returns `Some(true)` when the link was created, `Some(false)` when
    /// it already existed (counted once), `None` when either episode is missing or a person
    /// rejected the pair ([`GraphStore::unlink_recurrence`]). Unconfirmed, `by` =
    /// [`RECOGNITION`].
    pub async fn link_recurrence(
        &self,
        org: &str,
        new_id: &str,
        old_id: &str,
        confidence: f64,
    ) -> Result<Option<bool>> {
        self.link_recurrence_as(org, new_id, old_id, confidence, RECOGNITION, None)
            .await
    }

    /// [`GraphStore::link_recurrence`] by a person: the link is confirmed by `by`, an earlier
    /// rejection of the pair is taken back, and an audit record (`audit` = the changes as
    /// JSON) is written on the new episode.
    pub async fn link_recurrence_as(
        &self,
        org: &str,
        new_id: &str,
        old_id: &str,
        confidence: f64,
        by: &str,
        audit: Option<&ReviewRecord>,
    ) -> Result<Option<bool>> {
        let rows = self
            .fetch_write(
                LINK_RECURRENCE
                    .statement()
                    .param("org", org)
                    .param("new_id", new_id)
                    .param("old_id", old_id)
                    .param("confidence", confidence)
                    .param("by", by)
                    .param("at", audit.map_or_else(Utc::now, |a| a.at))
                    .param("confirm", audit.is_some())
                    .param("audit", audit.is_some())
                    .param(
                        "changes_json",
                        audit.map_or("[]", |a| a.changes_json.as_str()),
                    ),
            )
            .await?;
        rows.first()
            .map(|row| column(row, LINK_RECURRENCE.name, "created"))
            .transpose()
    }

    /// The recognition decision's link for the episode `new_id` of `org`, after one of its
    /// turns: `target` = the older episode its newest conclusion strongly matches and the
    /// decision's confidence, or `None` when it recognizes nothing. Keeps at most one
    /// automatic link per episode (a conversation is counted once); never touches a link a
    /// person made or confirmed, and never links a pair a person rejected or a target marked
    /// wrong (see `review/auto_link_recurrence.cypher`). `None` when the episode is missing.
    pub async fn auto_link_recurrence(
        &self,
        org: &str,
        new_id: &str,
        target: Option<(&str, f64)>,
    ) -> Result<Option<AutoLink>> {
        let rows = self
            .fetch_write(
                AUTO_LINK_RECURRENCE
                    .statement()
                    .param("org", org)
                    .param("new_id", new_id)
                    .param("old_id", target.map(|t| t.0))
                    .param("confidence", target.map_or(0.0, |t| t.1))
                    .param("by", RECOGNITION)
                    .param("at", Utc::now()),
            )
            .await?;
        let name = AUTO_LINK_RECURRENCE.name;
        rows.first()
            .map(|row| {
                Ok(AutoLink {
                    created: column(row, name, "created")?,
                    retracted: column(row, name, "retracted")?,
                })
            })
            .transpose()
    }

    /// Stamps `last_recalled_at = at` on the episodes of `org` a memory-search returned (no
    /// version bump; only moves forward). Returns how many were stamped.
    pub async fn mark_recalled(&self, org: &str, ids: &[String], at: DateTime<Utc>) -> Result<i64> {
        if ids.is_empty() {
            return Ok(0);
        }
        let rows = self
            .fetch_write(
                MARK_RECALLED
                    .statement()
                    .param("org", org)
                    .param("ids", ids.to_vec())
                    .param("at", at),
            )
            .await?;
        rows.first()
            .map_or(Ok(0), |row| column(row, MARK_RECALLED.name, "stamped"))
    }

    /// Removes a recurrence link with its audit record, and records the rejection
    /// (`(new)-[:NOT_RECURRENCE_OF {by, at}]->(old)`) so that automatic linking never makes
    /// the pair again; a person's [`GraphStore::link_recurrence_as`] takes it back. `None`
    /// when either episode is missing; `Some(false)` when there was no link (nothing
    /// recorded).
    pub async fn unlink_recurrence(
        &self,
        org: &str,
        new_id: &str,
        old_id: &str,
        audit: &ReviewRecord,
    ) -> Result<Option<bool>> {
        let rows = self
            .fetch_write(
                UNLINK_RECURRENCE
                    .statement()
                    .param("org", org)
                    .param("new_id", new_id)
                    .param("old_id", old_id)
                    .param("by", audit.by.as_str())
                    .param("at", audit.at)
                    .param("changes_json", audit.changes_json.as_str()),
            )
            .await?;
        rows.first()
            .map(|row| column::<i64>(row, UNLINK_RECURRENCE.name, "removed").map(|n| n > 0))
            .transpose()
    }

    /// The recurrence chain of an episode; `None` when there is no such episode. With
    /// `teams`, only the chain members and links of those teams count (a team-bound reader);
    /// `None` = every team.
    pub async fn recurrences(
        &self,
        org: &str,
        id: &str,
        teams: Option<&[String]>,
    ) -> Result<Option<Recurrences>> {
        let rows = self
            .fetch(
                RECURRENCES
                    .statement()
                    .param("org", org)
                    .param("id", id)
                    .param("teams", teams.map(<[String]>::to_vec)),
            )
            .await?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let name = RECURRENCES.name;
        Ok(Some(Recurrences {
            recurrence_count: column(row, name, "recurrence_count")?,
            first_seen: column(row, name, "first_seen")?,
            last_seen: column(row, name, "last_seen")?,
            links: column(row, name, "links")?,
            chain: {
                let mut chain: Vec<ChainEpisode> = column(row, name, "chain")?;
                chain.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
                chain
            },
            rejected: column(row, name, "rejected")?,
        }))
    }

    /// One page of an org's episodes for review (no embeddings). `limit` is the page size.
    pub async fn review_list(
        &self,
        org: &str,
        filter: &ReviewFilter,
        limit: usize,
        offset: usize,
    ) -> Result<ReviewPage> {
        let (verdict, component) = (filter.verdict.as_ref(), filter.component.as_ref());
        let statement = LIST
            .statement()
            .param("org", org)
            .param("team", filter.team.as_deref())
            .param("issue_type", filter.issue_type.as_deref())
            .param("significance", filter.significance.as_deref())
            .param("resolved", filter.resolved)
            .param("status", filter.status.map(ExtractionStatus::as_str))
            .param("pending_error", filter.pending_error)
            .param(
                "verdict",
                verdict.map(|v| match v {
                    VerdictFilter::None => "none".to_owned(),
                    VerdictFilter::Is(verdict) => verdict.clone(),
                }),
            )
            .param("component_type", component.and_then(|c| c.0.clone()))
            .param("component_name", component.map(|c| c.1.clone()))
            .param(
                "text",
                filter
                    .text
                    .as_deref()
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_lowercase),
            )
            .param("order", filter.order.as_str())
            .param("offset", int(offset))
            .param("limit", int(limit.saturating_add(1)));
        let rows = self.fetch(statement).await?;
        let mut episodes = rows
            .iter()
            .map(|row| episode_column(row, LIST.name, "episode"))
            .collect::<Result<Vec<_>>>()?;
        let next_offset = (episodes.len() > limit).then(|| offset + limit);
        episodes.truncate(limit);
        Ok(ReviewPage {
            episodes,
            next_offset,
        })
    }

    /// Writes a reviewed episode if it is still at `expected_version`, with its audit record
    /// in the same transaction. `record.version` is filled in with the new version.
    pub async fn save_reviewed(
        &self,
        episode: &Episode,
        expected_version: i64,
        record: &ReviewRecord,
    ) -> Result<SaveOutcome> {
        let audit = audit_statement(&episode.key(), record);
        self.save_then(episode, Some(expected_version), move |version| {
            Some(audit.param("version", version))
        })
        .await
    }

    /// The ids of the episodes of `org` a person deleted (their audit records stay).
    pub async fn deleted_episode_ids(
        &self,
        org: &str,
    ) -> Result<std::collections::HashSet<String>> {
        let rows = self.fetch(DELETED.statement().param("org", org)).await?;
        Ok(match rows.first() {
            Some(row) => column::<Vec<String>>(row, DELETED.name, "ids")?
                .into_iter()
                .collect(),
            None => Default::default(),
        })
    }

    /// Records a review action that changes no field of the episode itself (a retry it
    /// queued), at the episode's current `version`.
    pub async fn record_review(
        &self,
        key: &EpisodeKey,
        version: i64,
        record: &ReviewRecord,
    ) -> Result<()> {
        self.run(audit_statement(key, record).param("version", version))
            .await
    }

    /// The review history of an episode, newest first.
    pub async fn review_history(
        &self,
        org: &str,
        id: &str,
        limit: usize,
    ) -> Result<Vec<ReviewRecord>> {
        let rows = self
            .fetch(
                HISTORY
                    .statement()
                    .param("org", org)
                    .param("id", id)
                    .param("limit", int(limit)),
            )
            .await?;
        review_records(&rows, HISTORY.name)
    }

    /// The strategies synthesized from an episode. With `teams`, only those teams'
    /// strategies (never the org-wide ones, team `*`); `None` = all of them.
    pub async fn strategies_fed_by(
        &self,
        org: &str,
        id: &str,
        teams: Option<&[String]>,
    ) -> Result<Vec<FedStrategy>> {
        let rows = self
            .fetch(
                STRATEGIES
                    .statement()
                    .param("org", org)
                    .param("id", id)
                    .param("teams", teams.map(<[String]>::to_vec)),
            )
            .await?;
        rows.iter()
            .map(|row| {
                let name = STRATEGIES.name;
                Ok(FedStrategy {
                    team: column(row, name, "team")?,
                    issue_type: column(row, name, "issue_type")?,
                    component_type: column(row, name, "component_type")?,
                    component_name: column(row, name, "component_name")?,
                    version: column(row, name, "version")?,
                    stale: column::<Option<bool>>(row, name, "stale")?.unwrap_or(false),
                })
            })
            .collect()
    }

    /// Deletes an episode of `org` with its review records, turn input and relationships,
    /// marks the strategies built from it stale and keeps an audit record of the deletion.
    /// With `teams`, the stale count is of those teams' strategies only (all are marked).
    /// `None` when there is no such episode, or when `version` is given and the episode is no
    /// longer at it (nothing is deleted then).
    pub async fn delete_episode(
        &self,
        org: &str,
        id: &str,
        version: Option<i64>,
        teams: Option<&[String]>,
        record: &ReviewRecord,
    ) -> Result<Option<Deletion>> {
        let rows = self
            .fetch_write(
                DELETE
                    .statement()
                    .param("org", org)
                    .param("id", id)
                    .param("version", version)
                    .param("teams", teams.map(<[String]>::to_vec))
                    .param("at", record.at)
                    .param("by", record.by.as_str())
                    .param("changes_json", record.changes_json.as_str()),
            )
            .await?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        Ok(Some(Deletion {
            stale_strategies: column(row, DELETE.name, "stale_strategies")?,
            reviews: column(row, DELETE.name, "reviews")?,
            turn_inputs: column(row, DELETE.name, "turn_inputs")?,
        }))
    }
}

/// Audit records as `history.cypher` (episode or strategy) returns them.
pub(crate) fn review_records(
    rows: &[neo4rs::Row],
    query: &'static str,
) -> Result<Vec<ReviewRecord>> {
    rows.iter()
        .map(|row| {
            Ok(ReviewRecord {
                at: column(row, query, "at")?,
                by: column(row, query, "by")?,
                action: column(row, query, "action")?,
                changes_json: column(row, query, "changes_json")?,
                version: column(row, query, "version")?,
            })
        })
        .collect()
}

impl ReviewRecord {
    /// A record of `changes` (anything serializable) made now by `by`.
    pub fn new(by: &str, action: &str, changes: &impl Serialize, at: DateTime<Utc>) -> Self {
        ReviewRecord {
            at,
            by: by.to_owned(),
            action: action.to_owned(),
            changes_json: serde_json::to_string(changes).unwrap_or_else(|_| "[]".to_owned()),
            version: None,
        }
    }

    /// The record of a retry of the stored turn `turn_index` (queued by the API, or run by
    /// `deja retry`): it may replace the episode's conclusion.
    pub fn retry(by: &str, turn_index: u32, at: DateTime<Utc>) -> Self {
        let changes = serde_json::json!([{"field": "turn_index", "from": null, "to": turn_index}]);
        ReviewRecord::new(by, "retry", &changes, at)
    }
}
