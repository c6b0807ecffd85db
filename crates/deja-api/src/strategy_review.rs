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
use crate::review::Review;
use deja_domain::strategy::{StrategyKey, ORG_WIDE_TEAM};
use deja_domain::Component;
use deja_graph::{StoredStrategy, StrategyEdit};

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

    /// One strategy with its pending proposal, if any.
    pub async fn strategy(
        &self,
        principal: &Principal,
        org: Option<String>,
        strategy: &StrategyRef,
    ) -> Result<StoredStrategy, SearchError> {
        let key = Self::strategy_key(principal, org, strategy)?;
        self.store()
            .get_strategy(&key)
            .await?
            .ok_or_else(|| not_found(&key))
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
        match self
            .store()
            .edit_strategy_at(&key, markdown, principal.name(), if_match)
            .await?
        {
            Some(StrategyEdit::Saved { version }) => {
                tracing::info!(by = principal.name(), version, "strategy edited");
                Ok(version)
            }
            Some(StrategyEdit::Conflict { current }) => Err(SearchError::VersionConflict {
                id: describe(&key),
                expected: if_match.unwrap_or_default(),
                current,
            }),
            None => Err(not_found(&key)),
        }
    }

    /// Makes the pending proposal the current strategy (machine-written again). Returns the
    /// new version; `not_found` when nothing is pending.
    pub async fn accept_strategy(
        &self,
        principal: &Principal,
        org: Option<String>,
        strategy: &StrategyRef,
    ) -> Result<i64, SearchError> {
        let key = Self::strategy_key(principal, org, strategy)?;
        let version = self
            .store()
            .accept_proposal(&key, principal.name())
            .await?
            .ok_or_else(|| {
                SearchError::NotFound(format!("no pending proposal for {}", describe(&key)))
            })?;
        tracing::info!(by = principal.name(), version, "strategy proposal accepted");
        Ok(version)
    }
}

fn describe(key: &StrategyKey) -> String {
    format!(
        "strategy {}/{}/{}:{}",
        key.team, key.issue_type, key.component.kind, key.component.name
    )
}

fn not_found(key: &StrategyKey) -> SearchError {
    SearchError::NotFound(format!("no {}", describe(key)))
}
