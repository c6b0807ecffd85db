//! Review use cases: people list, read (with provenance), edit, mark wrong, confirm and delete
//! episodes. Shared by the HTTP API (`/v1/review/...`) and the CLI (`deja episode ...`).
//!
//! Every write is: load the episode (scoped to the caller's org and teams), check the version
//! the person read (`If-Match`), apply a pure rule of `deja_domain::review`, re-embed when the
//! embedded text moved, and save it against the version read with its audit record in the
//! same transaction. A version that moved in between is a `version_conflict` (412), never a
//! silent overwrite; without `If-Match` (allowed for every action but an edit) the write is
//! re-applied on a fresh read instead.

use crate::auth::Principal;
use crate::error::SearchError;
use crate::response::EpisodeView;
use chrono::Utc;
use deja_domain::review::{self, EpisodeEdit, FieldChange};
use deja_domain::{Component, Episode, ExtractionStatus, TurnRecord};
use deja_embed::{embed_blocking, Embedder, LateEncoder};
use deja_graph::{
    ChainEpisode, Deletion, FedStrategy, GraphStore, RecurrenceLink, RejectedLink, ReviewFilter,
    ReviewOrder, ReviewRecord, SaveOutcome, VerdictFilter,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Rounds of re-read-and-apply for a write without `If-Match` before giving up.
pub(crate) const WRITE_ATTEMPTS: u32 = 5;
/// The most history entries an episode view carries.
pub(crate) const HISTORY_LIMIT: usize = 100;
pub const MAX_PAGE: usize = 200;
pub const DEFAULT_PAGE: usize = 50;

/// The review use cases over one store (and the embedder and late-interaction encoder, to
/// re-embed edited text).
#[derive(Clone)]
pub struct Review {
    store: GraphStore,
    embedder: Option<Arc<dyn Embedder>>,
    late: Option<Arc<dyn LateEncoder>>,
    /// Where a retry republishes the stored turn (`None`: retry is refused, use `deja retry`).
    queue: Option<Arc<crate::jobs::SynthesisQueue>>,
}

/// What a retry did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Retried {
    pub id: String,
    /// The stored turn that went back to the worker.
    pub turn_index: u32,
    pub queued: bool,
}

impl std::fmt::Debug for Review {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Review")
            .field("embedder", &self.embedder.is_some())
            .finish()
    }
}

/// The query of `GET /v1/review/episodes` (every field optional).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    pub org: Option<String>,
    pub team: Option<String>,
    /// `type:name` or a name alone.
    pub component: Option<String>,
    pub issue_type: Option<String>,
    pub significance: Option<String>,
    pub resolved: Option<bool>,
    /// `ok`, `failed`, or `pending_error` (failed, or ok with a failed newer turn).
    pub status: Option<String>,
    /// `wrong` or `none`.
    pub verdict: Option<String>,
    /// Free text, matched as a substring of the episode's text fields.
    pub q: Option<String>,
    /// `updated` (default), `created`, `confirmed` or `recalled` (most recently returned by
    /// a memory-search; never recalled last); always newest first.
    pub order: Option<String>,
    pub limit: Option<usize>,
    pub offset: Option<usize>,
}

/// One page of the listing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListResponse {
    pub episodes: Vec<ReviewedEpisode>,
    /// Pass as `offset` for the next page; null on the last one.
    pub next_offset: Option<usize>,
}

/// An episode as a reviewer sees it: the full search view plus its version, review state
/// and (for one episode) its provenance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReviewedEpisode {
    #[serde(flatten)]
    pub view: EpisodeView,
    /// What `If-Match` must name to change it.
    pub version: i64,
    /// The first turn's user message, verbatim (bounded): what opened the investigation.
    /// Shown to people beside the conclusion; search answers never carry it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opening_message: Option<String>,
    #[serde(default)]
    pub extraction_error: Option<String>,
    /// Fields a person edited: later agent turns propose instead of overwriting them.
    #[serde(default)]
    pub human_pinned: Vec<String>,
    /// The agent's newer conclusion for pinned fields, e.g. `{"root_cause": "..."}`.
    #[serde(default)]
    pub proposals: BTreeMap<String, Value>,
    #[serde(default)]
    pub turns: Vec<TurnRecord>,
    /// One episode only: the stored newest turn event (what a retry re-extracts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_input: Option<TurnInput>,
    /// One episode only: the strategies built from it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub strategies: Vec<StrategyRef>,
    /// One episode only: what people changed, newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<HistoryEntry>,
    /// When a memory-search last returned it (the listing's `recalled` order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_recalled_at: Option<chrono::DateTime<Utc>>,
    /// One episode only (the chain's `recurrence_count`, `first_seen` and `last_seen` are
    /// in the view): its own `RECURRENCE_OF` links, both directions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recurrences: Vec<RecurrenceLink>,
    /// One episode only: every episode of its recurrence chain, itself included, oldest
    /// first (empty when it recurs nothing).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chain: Vec<ChainEpisode>,
    /// One episode only: the pairs with it a person unlinked, which automatic linking never
    /// makes again (a person's link of the pair lifts that).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejected: Vec<RejectedLink>,
}

/// How a pair a person unlinked reads from this episode, `other` being the other episode
/// as the caller renders it (the hub's link, the CLI's id).
pub fn rejected_pair(link: &RejectedLink, other: &str) -> String {
    if link.direction == "of" {
        format!("not a recurrence of {other}")
    } else {
        format!("{other} is not a recurrence of this one")
    }
}

/// `POST .../recurrences`: this episode recurs `of`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkRecurrence {
    pub of: String,
    /// A person's link is certain unless they say otherwise.
    #[serde(default = "certain")]
    pub confidence: f64,
}

fn certain() -> f64 {
    1.0
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnInput {
    pub turn_index: u32,
    pub event_json: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StrategyRef {
    pub team: String,
    pub issue_type: String,
    pub component: Component,
    pub version: i64,
    pub stale: bool,
}

impl From<FedStrategy> for StrategyRef {
    fn from(s: FedStrategy) -> Self {
        StrategyRef {
            team: s.team,
            issue_type: s.issue_type,
            component: Component::new(s.component_type, s.component_name),
            version: s.version,
            stale: s.stale,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub at: chrono::DateTime<Utc>,
    pub by: String,
    pub action: String,
    pub changes: Value,
    pub version: Option<i64>,
}

impl Review {
    /// A team-bound reader's history names no episode of a team it may not read: the other
    /// end of a recurrence link recorded as `recurrence_of` is withheld, as the chain and the
    /// links are. (A deleted episode's id says nothing and stays.)
    async fn withhold_other_teams(
        &self,
        principal: &Principal,
        org: &str,
        history: &mut [HistoryEntry],
    ) -> Result<(), SearchError> {
        if principal.team_limit().is_none() {
            return Ok(());
        }
        for entry in history.iter_mut() {
            let Some(changes) = entry.changes.as_array_mut() else {
                continue;
            };
            for change in changes.iter_mut().filter(|c| c["field"] == "recurrence_of") {
                for side in ["from", "to"] {
                    let Some(other) = change[side].as_str().map(str::to_owned) else {
                        continue;
                    };
                    let readable = match self.store.get_by_id(Some(org), &other).await? {
                        Some(episode) => principal.may_read_team(&episode.team),
                        None => true,
                    };
                    if !readable {
                        change[side] = Value::from(WITHHELD_EPISODE);
                    }
                }
            }
        }
        Ok(())
    }
}

/// What a team-bound reader's history shows instead of the id of an episode of a team it
/// may not read (the other end of a recurrence link a person made across teams).
pub const WITHHELD_EPISODE: &str = "(an episode of another team)";

impl From<ReviewRecord> for HistoryEntry {
    fn from(r: ReviewRecord) -> Self {
        HistoryEntry {
            changes: serde_json::from_str(&r.changes_json).unwrap_or(Value::Null),
            at: r.at,
            by: r.by,
            action: r.action,
            version: r.version,
        }
    }
}

/// `POST .../mark-wrong`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MarkWrong {
    #[serde(default)]
    pub note: String,
}

/// What a deletion did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Deleted {
    pub id: String,
    pub deleted: bool,
    pub stale_strategies: i64,
    pub reviews: i64,
    pub turn_inputs: i64,
}

/// One review action.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    // Boxed: an edit is ten optional fields, the other actions a string at most.
    Edit(Box<EpisodeEdit>),
    MarkWrong(String),
    ClearVerdict,
    Confirm,
}

impl Action {
    fn name(&self) -> &'static str {
        match self {
            Action::Edit(_) => "edit",
            Action::MarkWrong(_) => "mark_wrong",
            Action::ClearVerdict => "clear_verdict",
            Action::Confirm => "confirm",
        }
    }

    fn apply(&self, episode: &mut Episode) -> Result<Vec<FieldChange>, SearchError> {
        let now = Utc::now();
        match self {
            Action::Edit(edit) => review::apply_edit(episode, edit, now)
                .map_err(|e| SearchError::bad_request("edit", e.to_string())),
            Action::MarkWrong(note) => Ok(review::mark_wrong(episode, note, now)),
            Action::ClearVerdict => Ok(review::clear_verdict(episode, now)),
            Action::Confirm => Ok(review::confirm(episode, now)),
        }
    }
}

/// Parses an `If-Match` value: `"7"`, `W/"7"` or `7`.
pub fn parse_if_match(value: &str) -> Result<i64, SearchError> {
    let trimmed = value.trim().trim_start_matches("W/").trim_matches('"');
    trimmed.parse().map_err(|_| {
        SearchError::bad_request(
            "If-Match",
            format!("`{value}` is not an episode version (the ETag of a GET)"),
        )
    })
}

/// The `ETag` of a version.
pub fn etag(version: i64) -> String {
    format!("\"{version}\"")
}

impl ListQuery {
    fn filter(&self) -> Result<ReviewFilter, SearchError> {
        let (status, pending_error) = match self.status.as_deref() {
            None | Some("") => (None, false),
            Some("pending_error") => (None, true),
            Some(text) => (
                Some(ExtractionStatus::parse(text).ok_or_else(|| {
                    SearchError::bad_request("status", "must be ok, failed or pending_error")
                })?),
                false,
            ),
        };
        let verdict = match self.verdict.as_deref() {
            None | Some("") | Some("any") => None,
            Some("none") => Some(VerdictFilter::None),
            Some(review::VERDICT_WRONG) => Some(VerdictFilter::Is(review::VERDICT_WRONG.into())),
            Some(_) => {
                return Err(SearchError::bad_request(
                    "verdict",
                    "must be wrong, none or any",
                ))
            }
        };
        let order = match self.order.as_deref() {
            None | Some("") => ReviewOrder::default(),
            Some(text) => ReviewOrder::parse(text).ok_or_else(|| {
                SearchError::bad_request("order", "must be updated, created, confirmed or recalled")
            })?,
        };
        let component = self
            .component
            .as_deref()
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(|c| match c.split_once(':') {
                Some((kind, name)) => (Some(kind.to_owned()), name.to_owned()),
                None => (None, c.to_owned()),
            });
        let blank_to_none = |v: &Option<String>| {
            v.as_deref()
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        Ok(ReviewFilter {
            team: blank_to_none(&self.team),
            issue_type: blank_to_none(&self.issue_type),
            significance: blank_to_none(&self.significance),
            resolved: self.resolved,
            status,
            pending_error,
            verdict,
            component,
            text: blank_to_none(&self.q),
            order,
        })
    }
}

impl ReviewedEpisode {
    fn of(episode: &Episode) -> Self {
        ReviewedEpisode {
            view: EpisodeView::full(episode),
            version: episode.version,
            opening_message: episode.opening_message.clone(),
            extraction_error: episode.extraction_error.clone(),
            human_pinned: episode.review.human_pinned.iter().cloned().collect(),
            proposals: episode.review.proposals.clone(),
            turns: episode.turns.clone(),
            turn_input: None,
            strategies: Vec::new(),
            history: Vec::new(),
            last_recalled_at: episode.last_recalled_at,
            recurrences: Vec::new(),
            rejected: Vec::new(),
            chain: Vec::new(),
        }
    }
}

impl Review {
    pub fn new(store: GraphStore, embedder: Option<Arc<dyn Embedder>>) -> Self {
        Review {
            store,
            embedder,
            late: None,
            queue: None,
        }
    }

    /// Stores the token vectors of an edited text with `late` (`None`: the episode is decided
    /// without late interaction until `deja reembed`).
    pub fn with_late(mut self, late: Option<Arc<dyn LateEncoder>>) -> Self {
        self.late = late;
        self
    }

    pub(crate) fn store(&self) -> &GraphStore {
        &self.store
    }

    /// Lets [`Review::retry`] republish stored turns through this broker connection.
    pub fn with_queue(mut self, queue: Option<Arc<crate::jobs::SynthesisQueue>>) -> Self {
        self.queue = queue;
        self
    }

    /// Retries the extraction of a failed episode: its stored newest turn goes back to the
    /// worker through the turn exchange, the same path as every turn (`deja retry` runs the
    /// same step in-process). Refused for an episode whose extraction did not fail; with
    /// `if_match`, for an episode no longer at that version. A broker that cannot take the
    /// turn is a transient failure (503): nothing was queued, retry later.
    pub async fn retry(
        &self,
        principal: &Principal,
        org: Option<String>,
        id: &str,
        if_match: Option<i64>,
    ) -> Result<Retried, SearchError> {
        // Trimmed as `load` finds it, so every later read and write names the same episode.
        let id = id.trim();
        let (org, episode) = self.load(principal, org, id).await?;
        check_version(id, if_match, episode.version)?;
        if episode.extraction_status != ExtractionStatus::Failed
            && episode.extraction_error.is_none()
        {
            return Err(SearchError::bad_request(
                "id",
                format!("episode `{id}` has no failed extraction to retry"),
            ));
        }
        let Some((turn_index, event_json)) = self.store.get_turn_input(&episode.key()).await?
        else {
            return Err(SearchError::NotFound(format!(
                "no stored turn input for episode `{id}`"
            )));
        };
        let queue = self.queue.as_ref().ok_or_else(|| {
            SearchError::bad_request(
                "retry",
                format!("this server has no broker; run `deja retry {id}`"),
            )
        })?;
        queue
            .republish_turn(&org, &episode.team, &episode.correlation_id, &event_json)
            .await
            .map_err(|error| match error {
                // Unreachable, gone or refusing for now: a 503 to try again later.
                crate::jobs::JobError::Bus(error)
                    if error.is_transient() || error.is_connection_lost() =>
                {
                    SearchError::BrokerUnavailable(Box::new(error))
                }
                error => SearchError::Internal(Box::new(error)),
            })?;
        tracing::info!(
            id,
            turn_index,
            by = principal.name(),
            "extraction retry queued"
        );
        // Who asked for it, in the episode's history: the retry may replace its conclusion.
        // Queued already, so a failure to record it is logged, not answered.
        let record = ReviewRecord::retry(principal.name(), turn_index, chrono::Utc::now());
        if let Err(error) = self
            .store
            .record_review(&episode.key(), episode.version, &record)
            .await
        {
            tracing::warn!(id, error = %deja_domain::error_chain(&error),
                "retry queued but its audit record was not written");
        }
        Ok(Retried {
            id: id.to_owned(),
            turn_index,
            queued: true,
        })
    }

    /// One page of the listing.
    pub async fn list(
        &self,
        principal: &Principal,
        mut query: ListQuery,
    ) -> Result<ListResponse, SearchError> {
        principal.authorize_review(&mut query.org, &query.team, true)?;
        let org = query.org.clone().unwrap_or_default();
        let limit = query.limit.unwrap_or(DEFAULT_PAGE);
        if limit == 0 || limit > MAX_PAGE {
            return Err(SearchError::bad_request(
                "limit",
                format!("must be between 1 and {MAX_PAGE}"),
            ));
        }
        let page = self
            .store
            .review_list(&org, &query.filter()?, limit, query.offset.unwrap_or(0))
            .await?;
        Ok(ListResponse {
            episodes: page.episodes.iter().map(ReviewedEpisode::of).collect(),
            next_offset: page.next_offset,
        })
    }

    /// One episode with its provenance: turns, stored turn input, strategies, history.
    pub async fn get(
        &self,
        principal: &Principal,
        org: Option<String>,
        id: &str,
    ) -> Result<ReviewedEpisode, SearchError> {
        let id = id.trim();
        let (org, episode) = self.load(principal, org, id).await?;
        let mut view = ReviewedEpisode::of(&episode);
        view.turn_input =
            self.store
                .get_turn_input(&episode.key())
                .await?
                .map(|(turn_index, event_json)| TurnInput {
                    turn_index,
                    event_json,
                });
        // A team-bound reader sees what its teams may read only: not another team's linked
        // episodes (a person may link across teams), nor the org-wide strategies (made from
        // every team's episodes), as search and the strategy listing do.
        let teams = principal.team_limit();
        view.strategies = self
            .store
            .strategies_fed_by(&org, id, teams)
            .await?
            .into_iter()
            .map(StrategyRef::from)
            .collect();
        view.history = self
            .store
            .review_history(&org, id, HISTORY_LIMIT)
            .await?
            .into_iter()
            .map(HistoryEntry::from)
            .collect();
        self.withhold_other_teams(principal, &org, &mut view.history)
            .await?;
        if let Some(chain) = self.store.recurrences(&org, id, teams).await? {
            view.view.recurrence_count = Some(u32::try_from(chain.recurrence_count).unwrap_or(0));
            view.view.first_seen = Some(chain.first_seen);
            view.view.last_seen = Some(chain.last_seen);
            view.recurrences = chain.links;
            view.rejected = chain.rejected;
            // A chain of more than this episode is shown even when none of it counts (every
            // other member marked wrong): those are listed, tagged, for people to unlink.
            if chain.chain.len() > 1 {
                view.chain = chain.chain;
            }
        }
        Ok(view)
    }

    /// A person links `id` as a recurrence of `link.of` (or confirms an existing link). With
    /// `if_match`, `id` must still be at the version the person read.
    pub async fn link(
        &self,
        principal: &Principal,
        org: Option<String>,
        id: &str,
        link: &LinkRecurrence,
        if_match: Option<i64>,
    ) -> Result<ReviewedEpisode, SearchError> {
        if !(0.0..=1.0).contains(&link.confidence) {
            return Err(SearchError::bad_request(
                "confidence",
                "must be between 0 and 1",
            ));
        }
        let (id, of) = (id.trim(), link.of.trim());
        let (org, episode) = self.load(principal, org, id).await?;
        check_version(id, if_match, episode.version)?;
        self.load(principal, Some(org.clone()), of).await?;
        let changes = serde_json::json!([{"field": "recurrence_of", "from": null, "to": of}]);
        let record = ReviewRecord::new(principal.name(), "link_recurrence", &changes, Utc::now());
        self.store
            .link_recurrence_as(
                &org,
                id,
                of,
                link.confidence,
                principal.name(),
                Some(&record),
            )
            .await?
            .ok_or_else(|| {
                SearchError::bad_request("of", "must be another episode of the same org")
            })?;
        self.get(principal, Some(org), id).await
    }

    /// A person removes the link `id` -> `of`. With `if_match`, `id` must still be at the
    /// version the person read.
    pub async fn unlink(
        &self,
        principal: &Principal,
        org: Option<String>,
        id: &str,
        of: &str,
        if_match: Option<i64>,
    ) -> Result<ReviewedEpisode, SearchError> {
        let (id, of) = (id.trim(), of.trim());
        let (org, episode) = self.load(principal, org, id).await?;
        check_version(id, if_match, episode.version)?;
        // As `link` does: a team-bound person may not change a link to an episode they may
        // not read (another team's chain), nor learn whether one exists.
        self.load(principal, Some(org.clone()), of).await?;
        let changes = serde_json::json!([{"field": "recurrence_of", "from": of, "to": null}]);
        let record = ReviewRecord::new(principal.name(), "unlink_recurrence", &changes, Utc::now());
        let removed = self.store.unlink_recurrence(&org, id, of, &record).await?;
        if removed != Some(true) {
            return Err(SearchError::NotFound(format!(
                "episode `{id}` is not linked as a recurrence of `{of}`"
            )));
        }
        self.get(principal, Some(org), id).await
    }

    /// Applies one action. `if_match` is the version the person read; an edit requires it.
    pub async fn apply(
        &self,
        principal: &Principal,
        org: Option<String>,
        id: &str,
        if_match: Option<i64>,
        action: Action,
    ) -> Result<ReviewedEpisode, SearchError> {
        if matches!(action, Action::Edit(_)) && if_match.is_none() {
            return Err(SearchError::PreconditionRequired(
                "an edit must name the version it changes: send `If-Match` with the ETag of \
                 the episode as you read it"
                    .into(),
            ));
        }
        // The version the last attempt read, for the error when every attempt loses its race.
        let id = id.trim();
        let mut last_read = 0;
        for _ in 0..WRITE_ATTEMPTS {
            let (org, mut episode) = self.load(principal, org.clone(), id).await?;
            let read_version = episode.version;
            check_version(id, if_match, read_version)?;
            let old_vector = episode.embedding.clone();
            let changes = action.apply(&mut episode)?;
            if changes.is_empty() {
                return self.get(principal, Some(org), id).await;
            }
            self.reembed(&mut episode, old_vector).await;
            let record = ReviewRecord::new(principal.name(), action.name(), &changes, Utc::now());
            match self
                .store
                .save_reviewed(&episode, read_version, &record)
                .await?
            {
                SaveOutcome::Saved { version } => {
                    tracing::info!(
                        id,
                        version,
                        action = action.name(),
                        by = principal.name(),
                        "episode reviewed"
                    );
                    self.store_tokens(&episode).await;
                    return self.get(principal, Some(org), id).await;
                }
                SaveOutcome::Conflict if if_match.is_some() => {
                    let current = self
                        .store
                        .get_by_id(Some(&org), id)
                        .await?
                        .map_or(read_version, |e| e.version);
                    return Err(SearchError::conflict("episode", id, read_version, current));
                }
                // Re-read and re-applied on the next attempt.
                SaveOutcome::Conflict => last_read = read_version,
            }
        }
        // Every attempt lost its race to another writer (a conversation still streaming turns
        // into the episode): the caller retries later.
        let (_, now) = self.load(principal, org, id).await?;
        Err(SearchError::conflict("episode", id, last_read, now.version))
    }

    /// Deletes an episode, its review records, turn input and relationships.
    pub async fn delete(
        &self,
        principal: &Principal,
        org: Option<String>,
        id: &str,
        if_match: Option<i64>,
    ) -> Result<Deleted, SearchError> {
        let id = id.trim();
        let (org, episode) = self.load(principal, org, id).await?;
        check_version(id, if_match, episode.version)?;
        let summary = serde_json::json!([{
            "field": "episode",
            "from": {"correlation_id": episode.correlation_id, "issue_type": episode.issue_type,
                     "summary": episode.summary, "root_cause": episode.root_cause,
                     "version": episode.version},
            "to": null,
        }]);
        let record = ReviewRecord::new(principal.name(), "delete", &summary, Utc::now());
        let Deletion {
            stale_strategies,
            reviews,
            turn_inputs,
        } = match self
            .store
            .delete_episode(&org, id, if_match, principal.team_limit(), &record)
            .await?
        {
            Some(deletion) => deletion,
            // Written (or deleted) since it was read: the If-Match no longer holds.
            None => {
                return Err(match self.store.get_by_id(Some(&org), id).await? {
                    Some(now) => SearchError::conflict(
                        "episode",
                        id,
                        if_match.unwrap_or(now.version),
                        now.version,
                    ),
                    None => not_found(id),
                })
            }
        };
        tracing::info!(id, by = principal.name(), "episode deleted");
        Ok(Deleted {
            id: id.to_owned(),
            deleted: true,
            stale_strategies,
            reviews,
            turn_inputs,
        })
    }

    /// The episode, if the principal may review it; of another org or team = not found.
    async fn load(
        &self,
        principal: &Principal,
        mut org: Option<String>,
        id: &str,
    ) -> Result<(String, Episode), SearchError> {
        principal.authorize_review(&mut org, &None, false)?;
        let org = org.unwrap_or_default();
        let id = id.trim();
        if id.is_empty() {
            return Err(SearchError::bad_request("id", "must not be empty"));
        }
        match self.store.get_by_id(Some(&org), id).await? {
            Some(episode) if principal.may_read_team(&episode.team) => Ok((org, episode)),
            _ => Err(not_found(id)),
        }
    }

    /// The token vectors of the episode's text as just saved, unless they are current; a
    /// failure is logged (the edit stands, and `deja reembed` stores them later).
    async fn store_tokens(&self, episode: &Episode) {
        let Some(encoder) = &self.late else { return };
        if let Err(error) =
            deja_recognition::ensure_tokens(&self.store, encoder, self.embedder.as_ref(), episode)
                .await
        {
            tracing::warn!(id = %episode.id, error = %deja_domain::error_chain(&error),
                "token vectors of the edited episode not stored; run deja reembed");
        }
    }

    /// A new vector when the embedded text moved; without an embedder (or when it fails),
    /// the old vector stays so that the episode remains searchable, under no model: the
    /// mark `deja reembed` looks for (as `deja vocab merge` leaves it), since the vector no
    /// longer reads the episode's text.
    async fn reembed(&self, episode: &mut Episode, old: Option<Vec<f32>>) {
        if episode.embedding.is_some() || episode.extraction_status != ExtractionStatus::Ok {
            return;
        }
        if let Some(embedder) = self.embedder.clone() {
            let model = embedder.model_id().to_owned();
            match embed_blocking(embedder, vec![episode.embedding_text()]).await {
                Ok(mut vectors) if !vectors.is_empty() => {
                    episode.embedding = vectors.pop();
                    episode.embedding_model = Some(model);
                    return;
                }
                Ok(_) => tracing::warn!(
                    "the embedder returned no vector; keeping the old one until deja reembed"
                ),
                Err(error) => tracing::warn!(%error,
                    "re-embedding failed; keeping the old vector until deja reembed"),
            }
        } else if old.is_some() {
            tracing::warn!(id = %episode.id,
                "no embedding model loaded: the edited episode keeps its old vector until \
                 deja reembed");
        }
        episode.embedding = old;
        episode.embedding_model = None;
    }
}

fn check_version(id: &str, if_match: Option<i64>, current: i64) -> Result<(), SearchError> {
    match if_match {
        Some(expected) if expected != current => {
            Err(SearchError::conflict("episode", id, expected, current))
        }
        _ => Ok(()),
    }
}

fn not_found(id: &str) -> SearchError {
    SearchError::NotFound(format!("episode `{}` was not found", id.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    #[test]
    fn if_match_accepts_the_etag_forms() {
        assert_eq!(parse_if_match("\"7\"").unwrap(), 7);
        assert_eq!(parse_if_match("W/\"7\"").unwrap(), 7);
        assert_eq!(parse_if_match("7").unwrap(), 7);
        assert_eq!(
            parse_if_match("*").unwrap_err().code(),
            ErrorCode::BadRequest
        );
        assert_eq!(etag(7), "\"7\"");
    }

    #[test]
    fn list_filters_are_parsed_and_bad_ones_named() {
        let query = ListQuery {
            component: Some("cache:redis".into()),
            status: Some("pending_error".into()),
            verdict: Some("none".into()),
            q: Some("  ".into()),
            order: Some("confirmed".into()),
            ..Default::default()
        };
        let filter = query.filter().unwrap();
        assert_eq!(
            filter.component,
            Some((Some("cache".into()), "redis".into()))
        );
        assert!(filter.pending_error);
        assert_eq!(filter.verdict, Some(VerdictFilter::None));
        assert_eq!(filter.text, None);
        assert_eq!(filter.order, ReviewOrder::Confirmed);
        let bad = ListQuery {
            verdict: Some("maybe".into()),
            ..Default::default()
        };
        assert!(bad.filter().unwrap_err().to_string().contains("verdict"));
    }

    #[test]
    fn a_stale_version_is_a_conflict_naming_both_versions() {
        let error = check_version("ep_1", Some(3), 4).unwrap_err();
        assert_eq!(error.code(), ErrorCode::VersionConflict);
        assert_eq!(error.code().http_status(), 412);
        assert!(error.to_string().contains("version 4"));
        assert!(error.to_string().starts_with("episode `ep_1` changed"));
        assert!(check_version("ep_1", None, 4).is_ok());
    }
}
