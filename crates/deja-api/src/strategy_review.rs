//! Review use cases for strategies: read one, replace its text, accept the regenerated
//! proposal. Shared by the hub (`/hub/strategies`) and the CLI (`deja strategy ...`).
//!
//! An edited strategy is never overwritten by regeneration: new syntheses become proposals
//! (`strategies/save.cypher`) that a person accepts. An edit carries the version the person
//! read when they have one (the hub's form does): a strategy that moved on meanwhile is a
//! `version_conflict`, never a silent overwrite. Team rules are those of the episode review:
//! a team-bound token reviews its teams' strategies, and only an org-wide token the org-wide
//! ones (team `*`), which are built from every team's episodes.

use crate::auth::Principal;
use crate::error::SearchError;
use crate::review::{HistoryEntry, Review, HISTORY_LIMIT, WRITE_ATTEMPTS};
use chrono::{DateTime, Utc};
use deja_domain::review::FieldChange;
use deja_domain::strategy::{StrategyKey, ORG_WIDE_TEAM};
use deja_domain::Component;
use deja_graph::{ReviewRecord, StoredStrategy, StrategyEdit};
use serde::Serialize;
use serde_json::Value;

/// Which strategy, as a person names it (the org comes from the credentials when omitted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StrategyRef {
    /// `None` (or `*`) = the org-wide strategy.
    pub team: Option<String>,
    pub issue_type: String,
    pub component: Component,
}

impl StrategyRef {
    /// Parses `type:name` for the component.
    pub fn new(
        team: Option<String>,
        issue_type: &str,
        component: &str,
    ) -> Result<StrategyRef, SearchError> {
        let (kind, name) = component
            .split_once(':')
            .filter(|(k, n)| !k.trim().is_empty() && !n.trim().is_empty())
            .ok_or_else(|| SearchError::bad_request("component", "must be type:name"))?;
        if issue_type.trim().is_empty() {
            return Err(SearchError::bad_request("issue_type", "must not be empty"));
        }
        Ok(StrategyRef {
            team: team
                .map(|t| t.trim().to_owned())
                .filter(|t| !t.is_empty() && t != ORG_WIDE_TEAM),
            issue_type: issue_type.trim().to_owned(),
            component: Component::new(kind.trim(), name.trim()),
        })
    }

    fn key(&self, org: String) -> StrategyKey {
        StrategyKey {
            org,
            team: self
                .team
                .clone()
                .unwrap_or_else(|| ORG_WIDE_TEAM.to_owned()),
            issue_type: self.issue_type.clone(),
            component: self.component.clone(),
        }
    }
}

/// A strategy as a reviewer sees it: what agents receive, its pending proposal and what
/// people did to it (`GET /v1/review/strategy`, the hub's strategy page, `deja strategy
/// show`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReviewedStrategy {
    /// `org`, `team` (`*` for the org-wide strategy), `issue_type`, `component`.
    #[serde(flatten)]
    pub key: StrategyKey,
    /// What an edit's `If-Match` (`--if-match`, the hub's form) must name.
    pub version: i64,
    pub markdown: String,
    /// A person's edit: regeneration only proposes while it is set.
    pub edited_by: Option<String>,
    pub edited_at: Option<DateTime<Utc>>,
    /// Who accepted the current text as a proposal.
    pub reviewed_by: Option<String>,
    pub reviewed_at: Option<DateTime<Utc>>,
    /// Ids of the episodes it was synthesized from.
    pub source_ids: Vec<String>,
    /// `stale:...` when a source was deleted.
    pub fingerprint: String,
    /// Why its text may no longer fit its sources (`StoredStrategy::stale`): null when it
    /// does.
    pub stale: Option<&'static str>,
    pub proposed_markdown: Option<String>,
    pub proposed_at: Option<DateTime<Utc>>,
    /// Edits and accepted proposals, newest first.
    pub history: Vec<HistoryEntry>,
}

impl ReviewedStrategy {
    fn of(s: StoredStrategy, history: Vec<HistoryEntry>) -> Self {
        let stale = s.stale();
        ReviewedStrategy {
            key: s.key,
            version: s.version,
            markdown: s.markdown,
            edited_by: s.edited_by,
            edited_at: s.edited_at,
            reviewed_by: s.reviewed_by,
            reviewed_at: s.reviewed_at,
            source_ids: s.source_ids,
            stale,
            fingerprint: s.fingerprint,
            proposed_markdown: s.proposed_markdown,
            proposed_at: s.proposed_at,
            history,
        }
    }
}

/// What a person does to a strategy.
enum StrategyAction<'a> {
    /// Replace its text.
    Edit(&'a str),
    /// Make the pending proposal current.
    Accept,
}

impl StrategyAction<'_> {
    fn name(&self) -> &'static str {
        match self {
            StrategyAction::Edit(_) => "edit",
            StrategyAction::Accept => "accept_proposal",
        }
    }

    /// The audit record's changes, from the strategy as read: the text and who it counts
    /// as written by (an edit pins it to the editor; an acceptance makes it machine-written).
    fn changes(&self, read: &StoredStrategy, by: &str) -> Vec<FieldChange> {
        let (markdown, edited_by) = match self {
            StrategyAction::Edit(markdown) => (Some(*markdown), Some(by)),
            StrategyAction::Accept => (read.proposed_markdown.as_deref(), None),
        };
        let mut changes = Vec::new();
        let mut change = |field: &str, from: Option<&str>, to: Option<&str>| {
            if from != to {
                changes.push(FieldChange {
                    field: field.to_owned(),
                    from: from.map_or(Value::Null, Value::from),
                    to: to.map_or(Value::Null, Value::from),
                });
            }
        };
        change("markdown", Some(read.markdown.as_str()), markdown);
        change("edited_by", read.edited_by.as_deref(), edited_by);
        changes
    }
}

impl Review {
    /// The org and key `principal` may review.
    fn strategy_key(
        principal: &Principal,
        mut org: Option<String>,
        strategy: &StrategyRef,
    ) -> Result<StrategyKey, SearchError> {
        // An org-wide strategy is read like an org-wide listing: team-bound tokens may not.
        principal.authorize_review(&mut org, &strategy.team, strategy.team.is_none())?;
        Ok(strategy.key(org.unwrap_or_default()))
    }

    /// One strategy with its pending proposal, if any, and its review history.
    pub async fn strategy(
        &self,
        principal: &Principal,
        org: Option<String>,
        strategy: &StrategyRef,
    ) -> Result<ReviewedStrategy, SearchError> {
        let key = Self::strategy_key(principal, org, strategy)?;
        let stored = self.load_strategy(&key).await?;
        let history = self
            .store()
            .strategy_history(&key, HISTORY_LIMIT)
            .await?
            .into_iter()
            .map(HistoryEntry::from)
            .collect();
        Ok(ReviewedStrategy::of(stored, history))
    }

    /// Replaces the strategy's text; regeneration will only propose from now on. With
    /// `if_match`, a strategy no longer at that version is a `version_conflict`. Returns
    /// the new version.
    pub async fn edit_strategy(
        &self,
        principal: &Principal,
        org: Option<String>,
        strategy: &StrategyRef,
        markdown: &str,
        if_match: Option<i64>,
    ) -> Result<i64, SearchError> {
        let key = Self::strategy_key(principal, org, strategy)?;
        if markdown.trim().is_empty() {
            return Err(SearchError::bad_request("markdown", "must not be empty"));
        }
        self.write_strategy(principal, &key, if_match, StrategyAction::Edit(markdown))
            .await
    }

    /// Makes the pending proposal the current strategy (machine-written again). With
    /// `if_match`, a strategy no longer at that version (another person's edit, a newer
    /// proposal) is a `version_conflict`. Returns the new version; `not_found` when nothing
    /// is pending.
    pub async fn accept_strategy(
        &self,
        principal: &Principal,
        org: Option<String>,
        strategy: &StrategyRef,
        if_match: Option<i64>,
    ) -> Result<i64, SearchError> {
        let key = Self::strategy_key(principal, org, strategy)?;
        self.write_strategy(principal, &key, if_match, StrategyAction::Accept)
            .await
    }

    /// Reads the strategy, checks the version the person read, and writes the action
    /// against the version read with its audit record in the same statement (what the
    /// episode review does). Without `if_match`, a write that lost a race is re-applied on
    /// a fresh read.
    async fn write_strategy(
        &self,
        principal: &Principal,
        key: &StrategyKey,
        if_match: Option<i64>,
        action: StrategyAction<'_>,
    ) -> Result<i64, SearchError> {
        let by = principal.name();
        let mut current = None;
        for _ in 0..WRITE_ATTEMPTS {
            let read = self.load_strategy(key).await?;
            if let Some(expected) = if_match.filter(|v| *v != read.version) {
                return Err(conflict(key, expected, read.version));
            }
            if matches!(action, StrategyAction::Accept) && read.proposed_markdown.is_none() {
                return Err(no_proposal(key));
            }
            let changes = action.changes(&read, by);
            let record = ReviewRecord::new(by, action.name(), &changes, Utc::now());
            let store = self.store();
            let written = match action {
                StrategyAction::Edit(markdown) => {
                    store
                        .edit_strategy_at(key, markdown, by, Some(read.version), Some(&record))
                        .await?
                }
                StrategyAction::Accept => {
                    store
                        .accept_proposal_at(key, by, Some(read.version), Some(&record))
                        .await?
                }
            };
            match written {
                Some(StrategyEdit::Saved { version }) => {
                    tracing::info!(by, version, action = action.name(), "strategy reviewed");
                    return Ok(version);
                }
                Some(StrategyEdit::Conflict { current: now }) => {
                    if let Some(expected) = if_match {
                        return Err(conflict(key, expected, now));
                    }
                    current = Some(now);
                }
                // Gone (or its proposal taken) between the read and the write.
                None if matches!(action, StrategyAction::Accept) => return Err(no_proposal(key)),
                None => return Err(not_found(key)),
            }
        }
        Err(conflict(key, if_match.unwrap_or(0), current.unwrap_or(-1)))
    }

    async fn load_strategy(&self, key: &StrategyKey) -> Result<StoredStrategy, SearchError> {
        self.store()
            .get_strategy(key)
            .await?
            .ok_or_else(|| not_found(key))
    }
}

/// The strategy as people name it: `team/issue type/type:name` (`*` = org-wide).
fn describe(key: &StrategyKey) -> String {
    format!(
        "{}/{}/{}:{}",
        key.team, key.issue_type, key.component.kind, key.component.name
    )
}

fn conflict(key: &StrategyKey, expected: i64, current: i64) -> SearchError {
    SearchError::conflict("strategy", &describe(key), expected, current)
}

fn not_found(key: &StrategyKey) -> SearchError {
    SearchError::NotFound(format!("no strategy `{}`", describe(key)))
}

fn no_proposal(key: &StrategyKey) -> SearchError {
    SearchError::NotFound(format!(
        "no pending proposal for strategy `{}`",
        describe(key)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    #[test]
    fn a_strategy_conflict_names_the_strategy_not_an_episode() {
        let key = StrategyRef::new(Some("checkout".into()), "oom", "service:api")
            .unwrap()
            .key("acme".into());
        let error = conflict(&key, 3, 4);
        assert_eq!(error.code(), ErrorCode::VersionConflict);
        assert!(
            error
                .to_string()
                .starts_with("strategy `checkout/oom/service:api` changed since version 3"),
            "{error}"
        );
    }
}
