//! Strategy storage: synthesized playbooks per (org, team or `*`, issue type, component).
//!
//! ```text
//! (:Strategy {key, org, team, issue_type, component_type, component_name,
//!             markdown, playbook_json, fingerprint, model, generated_at, version,
//!             edited_by, edited_at, reviewed_by, reviewed_at,
//!             proposed_markdown, proposed_playbook_json, proposed_fingerprint,
//!             proposed_model, proposed_at, proposed_source_ids,
//!             claim_fingerprint, claimed_at,
//!             failed_fingerprint, failed_at, failed_reason})-[:SYNTHESIZED_FROM]->(:Episode)
//! (:Strategy)-[:HAS_REVIEW]->(:Review {at, by, action, changes_json, version})
//! ```
//!
//! `key` is [`StrategyKey::composite`] (unique, migration 006). The synthesis claim lives on
//! the same node so that the uniqueness constraint makes claiming atomic without another
//! schema change; a node holding only a claim has no `markdown` and is not a strategy. So
//! does the last failed synthesis (`failed_*`): its source set is not claimed again during
//! the cool-down, which stops every qualifying search from paying for the same failure.
//!
//! Architecture invariant: a strategy edited by a person (`edited_by` set) is never
//! overwritten by regeneration; the new text is stored as `proposed_*` until a reviewer
//! accepts it ([`GraphStore::accept_proposal`]). A person's edit or acceptance through the
//! review use cases carries its audit record in the same statement, like episode reviews.

use crate::queries::{cypher, Cypher, Statement};
use crate::review::{review_records, ReviewRecord};
use crate::rows::int;
use crate::{column, episode_column, GraphError, GraphStore, Result};
use chrono::{DateTime, Utc};
use deja_domain::strategy::StrategyKey;
use deja_domain::{Component, Episode};
use serde::Deserialize;
use std::time::Duration;

cypher!(SOURCES_ORG, "strategies/sources_org");
cypher!(SOURCES_TEAM, "strategies/sources_team");
cypher!(GET, "strategies/get");
cypher!(LIST, "strategies/list");
cypher!(FAILURES, "strategies/failures");
cypher!(SAVE, "strategies/save");
cypher!(CLAIM, "strategies/claim");
cypher!(RELEASE_CLAIM, "strategies/release_claim");
cypher!(EDIT, "strategies/edit");
cypher!(ACCEPT_PROPOSAL, "strategies/accept_proposal");
cypher!(HISTORY, "strategies/history");

/// Every strategy statement, for the "every query file is embedded" check.
#[cfg(test)]
pub(crate) const QUERIES: &[Cypher] = &[
    SOURCES_ORG,
    SOURCES_TEAM,
    GET,
    LIST,
    FAILURES,
    SAVE,
    CLAIM,
    RELEASE_CLAIM,
    EDIT,
    ACCEPT_PROPOSAL,
    HISTORY,
];

/// How many times a claim is retried when Neo4j aborts it as a deadlock or another transient
/// conflict: concurrent first claims of a new key contend on the constraint's index lock.
const CLAIM_ATTEMPTS: u32 = 4;

/// How long a recorded synthesis failure's reason may be: the dead letter keeps it whole.
const FAILED_REASON_MAX_CHARS: usize = 500;

/// What [`GraphStore::claim_synthesis`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SynthesisClaim {
    /// This caller holds the claim and should publish the job.
    Won,
    /// Nothing to do: another caller's claim stands (within its lease), or the stored
    /// strategy (or its pending proposal) already has this fingerprint.
    Held,
    /// The synthesis of this very fingerprint failed within the cool-down: not retried.
    CoolingDown,
}

impl SynthesisClaim {
    pub fn won(self) -> bool {
        self == SynthesisClaim::Won
    }
}

/// What the synthesizer writes.
#[derive(Debug, Clone, PartialEq)]
pub struct StrategyWrite {
    pub key: StrategyKey,
    pub markdown: String,
    pub playbook_json: String,
    /// `source_fingerprint` of the sources the playbook was made from.
    pub fingerprint: String,
    /// Ids of those sources; they become the `SYNTHESIZED_FROM` set.
    pub source_ids: Vec<String>,
    pub model: String,
    pub generated_at: DateTime<Utc>,
    /// When the sources were read: a write of sources read before the stored strategy's is
    /// refused as stale.
    pub sources_read_at: DateTime<Utc>,
}

/// What [`GraphStore::save_strategy`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SavedStrategy {
    /// Written as the current strategy.
    Stored,
    /// Kept as a proposal: a person edited the current strategy.
    Proposed,
    /// Not written: the stored strategy (or its proposal) was made from a newer read of its
    /// sources.
    Stale,
}

/// What a person's guarded strategy edit or acceptance did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrategyEdit {
    Saved {
        version: i64,
    },
    /// The strategy is at `current`, not at the version the person read: nothing written.
    Conflict {
        current: i64,
    },
}

impl StrategyEdit {
    /// The strategy's version now (the new one, or the one that stopped the write).
    pub fn version(self) -> i64 {
        match self {
            StrategyEdit::Saved { version } | StrategyEdit::Conflict { current: version } => {
                version
            }
        }
    }
}

/// A stored strategy.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredStrategy {
    pub key: StrategyKey,
    /// What search returns: the person's text when edited, else the synthesized one.
    pub markdown: String,
    pub playbook_json: String,
    /// The source fingerprint `markdown` was generated from (unchanged by a person's edit).
    pub fingerprint: String,
    pub model: String,
    pub generated_at: Option<DateTime<Utc>>,
    pub version: i64,
    /// Episodes linked by `SYNTHESIZED_FROM`.
    pub source_ids: Vec<String>,
    pub edited_by: Option<String>,
    pub edited_at: Option<DateTime<Utc>>,
    pub reviewed_by: Option<String>,
    pub reviewed_at: Option<DateTime<Utc>>,
    /// A regenerated version waiting for review (only ever set on an edited strategy).
    pub proposed_markdown: Option<String>,
    pub proposed_fingerprint: Option<String>,
    pub proposed_model: Option<String>,
    pub proposed_at: Option<DateTime<Utc>>,
    pub proposed_source_ids: Vec<String>,
    /// Sources changed since it was written: a later turn or edit, another issue type (a
    /// vocabulary merge), a person's verdict.
    pub changed_source_ids: Vec<String>,
    /// Sources a person has marked wrong since (read by `get_strategy` only).
    pub corrected_source_ids: Vec<String>,
}

impl StoredStrategy {
    /// Why review shows it stale, if it is: what it was made from is no longer what memory
    /// holds. (Search decides by the source fingerprint, which also moves when a new
    /// episode joins the sources; `stale` says the text itself may mislead.)
    pub fn stale(&self) -> Option<&'static str> {
        if self.source_deleted() {
            Some("a source episode was deleted")
        } else if self.source_ids.len() < 2 {
            Some("fewer than two source episodes are left")
        } else if !self.changed_source_ids.is_empty() {
            Some("a source episode changed since it was written")
        } else {
            None
        }
    }

    /// True when this strategy (or its pending proposal) was made from the sources with
    /// `fingerprint`: nothing to synthesize. An edited strategy with a current proposal
    /// still serves the person's text.
    pub fn is_current(&self, fingerprint: &str) -> bool {
        self.fingerprint == fingerprint || self.proposed_fingerprint.as_deref() == Some(fingerprint)
    }

    pub fn is_edited(&self) -> bool {
        self.edited_by.is_some()
    }

    /// True when search must not serve this text while a new version is made: it is the
    /// synthesizer's, and a person has since deleted or marked wrong an episode it was made
    /// from — it may repeat what they removed. A person's edit is theirs to keep.
    pub fn made_from_corrected_sources(&self) -> bool {
        !self.is_edited() && (self.source_deleted() || !self.corrected_source_ids.is_empty())
    }

    /// A source episode was deleted (`review/delete.cypher` marks the fingerprint).
    fn source_deleted(&self) -> bool {
        self.fingerprint.starts_with("stale:")
    }
}

/// The last failed synthesis of a strategy key, recorded until one succeeds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedSynthesis {
    /// The source set whose synthesis failed.
    pub fingerprint: String,
    pub at: DateTime<Utc>,
}

impl FailedSynthesis {
    /// Whether the source set `fingerprint` is in its cool-down at `now`: its synthesis failed
    /// less than `cooldown` ago, so no search asks for it (claim.cypher decides the same).
    pub fn cools_down(&self, fingerprint: &str, cooldown: Duration, now: DateTime<Utc>) -> bool {
        self.fingerprint == fingerprint
            && chrono::Duration::from_std(cooldown)
                .is_ok_and(|cooldown| now.signed_duration_since(self.at) < cooldown)
    }
}

/// A strategy whose last synthesis failed, none having succeeded since
/// ([`GraphStore::synthesis_failures`]).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SynthesisFailure {
    pub team: String,
    pub issue_type: String,
    pub component_type: String,
    pub component_name: String,
    pub failed_at: DateTime<Utc>,
    /// Why, as the dead letter of its job says it (bounded).
    pub reason: String,
    /// Whether an earlier strategy is stored and still served (a refresh failed), or none
    /// exists yet.
    pub has_strategy: bool,
    /// When a search asked for the synthesis again since (its sources changed, or the
    /// cool-down ended) and that job has not finished; `None` otherwise.
    #[serde(default)]
    pub asked_again_at: Option<DateTime<Utc>>,
}

/// A strategy node as returned by `s {.*, source_ids: [...]}`.
#[derive(Debug, Deserialize)]
struct StrategyRow {
    org: String,
    team: String,
    issue_type: String,
    component_type: String,
    component_name: String,
    markdown: String,
    #[serde(default)]
    playbook_json: String,
    #[serde(default)]
    fingerprint: String,
    #[serde(default)]
    model: String,
    #[serde(default)]
    generated_at: Option<DateTime<Utc>>,
    #[serde(default)]
    version: i64,
    #[serde(default)]
    source_ids: Vec<String>,
    #[serde(default)]
    edited_by: Option<String>,
    #[serde(default)]
    edited_at: Option<DateTime<Utc>>,
    #[serde(default)]
    reviewed_by: Option<String>,
    #[serde(default)]
    reviewed_at: Option<DateTime<Utc>>,
    #[serde(default)]
    proposed_markdown: Option<String>,
    #[serde(default)]
    proposed_fingerprint: Option<String>,
    #[serde(default)]
    proposed_model: Option<String>,
    #[serde(default)]
    proposed_at: Option<DateTime<Utc>>,
    #[serde(default)]
    proposed_source_ids: Vec<String>,
    #[serde(default)]
    changed_source_ids: Vec<String>,
    #[serde(default)]
    corrected_source_ids: Vec<String>,
}

impl From<StrategyRow> for StoredStrategy {
    fn from(row: StrategyRow) -> Self {
        StoredStrategy {
            key: StrategyKey {
                org: row.org,
                team: row.team,
                issue_type: row.issue_type,
                component: Component::new(row.component_type, row.component_name),
            },
            markdown: row.markdown,
            playbook_json: row.playbook_json,
            fingerprint: row.fingerprint,
            model: row.model,
            generated_at: row.generated_at,
            version: row.version,
            source_ids: row.source_ids,
            edited_by: row.edited_by,
            edited_at: row.edited_at,
            reviewed_by: row.reviewed_by,
            reviewed_at: row.reviewed_at,
            proposed_markdown: row.proposed_markdown,
            proposed_fingerprint: row.proposed_fingerprint,
            proposed_model: row.proposed_model,
            proposed_at: row.proposed_at,
            proposed_source_ids: row.proposed_source_ids,
            changed_source_ids: row.changed_source_ids,
            corrected_source_ids: row.corrected_source_ids,
        }
    }
}

/// A statement with the key and its parts (for nodes created by MERGE).
fn keyed(cypher: Cypher, key: &StrategyKey) -> Statement {
    cypher
        .statement()
        .param("key", key.composite())
        .param("org", key.org.as_str())
        .param("team", key.team.as_str())
        .param("issue_type", key.issue_type.as_str())
        .param("component_type", key.component.kind.as_str())
        .param("component_name", key.component.name.as_str())
}

fn strategy_column(row: &neo4rs::Row, query: &'static str) -> Result<StoredStrategy> {
    column::<StrategyRow>(row, query, "strategy").map(StoredStrategy::from)
}

impl GraphStore {
    /// The episodes the strategy of `key` is made from: ok episodes of the key's scope (its
    /// team, or the whole org for [`deja_domain::strategy::ORG_WIDE_TEAM`]) with the key's
    /// issue type and an `AFFECTS` edge to its component, newest update first.
    pub async fn strategy_sources(&self, key: &StrategyKey, limit: usize) -> Result<Vec<Episode>> {
        // Separate statements so that each seeks its own index (migration 010).
        let query = match key.team_scope() {
            Some(_) => &SOURCES_TEAM,
            None => &SOURCES_ORG,
        };
        let rows = self
            .fetch(
                query
                    .statement()
                    .param("org", key.org.as_str())
                    .param("team", key.team_scope())
                    .param("issue_type", key.issue_type.as_str())
                    .param("component_type", key.component.kind.as_str())
                    .param("component_name", key.component.name.as_str())
                    .param("limit", int(limit)),
            )
            .await?;
        rows.iter()
            .map(|row| episode_column(row, query.name, "episode"))
            .collect()
    }

    /// The stored strategy of `key`, `None` when none was stored yet.
    pub async fn get_strategy(&self, key: &StrategyKey) -> Result<Option<StoredStrategy>> {
        Ok(self.strategy_and_failure(key).await?.0)
    }

    /// [`GraphStore::get_strategy`] and the last failed synthesis of `key` recorded since
    /// the last success, in one read: what a search needs to tell a strategy on its way from
    /// one that failed recently.
    pub async fn strategy_and_failure(
        &self,
        key: &StrategyKey,
    ) -> Result<(Option<StoredStrategy>, Option<FailedSynthesis>)> {
        let rows = self
            .fetch(GET.statement().param("key", key.composite()))
            .await?;
        let Some(row) = rows.first() else {
            return Ok((None, None));
        };
        let stored =
            column::<Option<StrategyRow>>(row, GET.name, "strategy")?.map(StoredStrategy::from);
        let fingerprint: Option<String> = column(row, GET.name, "failed_fingerprint")?;
        let at: Option<DateTime<Utc>> = column(row, GET.name, "failed_at")?;
        let failed = fingerprint
            .zip(at)
            .map(|(fingerprint, at)| FailedSynthesis { fingerprint, at });
        Ok((stored, failed))
    }

    /// An org's strategies (with `team`: that team's, and the org-wide ones when `org_wide`:
    /// those are made from every team's episodes), pending proposals first, then the most
    /// recently generated.
    pub async fn list_strategies(
        &self,
        org: &str,
        team: Option<&str>,
        org_wide: bool,
        limit: usize,
    ) -> Result<Vec<StoredStrategy>> {
        self.list_strategies_from(org, team, org_wide, 0, limit)
            .await
    }

    /// [`GraphStore::list_strategies`] past the first `offset` (a page of the hub's list).
    pub async fn list_strategies_from(
        &self,
        org: &str,
        team: Option<&str>,
        org_wide: bool,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<StoredStrategy>> {
        let rows = self
            .fetch(
                LIST.statement()
                    .param("org", org)
                    .param("team", team)
                    .param("org_wide", org_wide)
                    .param("offset", int(offset))
                    .param("limit", int(limit)),
            )
            .await?;
        rows.iter()
            .map(|row| strategy_column(row, LIST.name))
            .collect()
    }

    /// The strategies of `org` (or of `team`, and the org-wide ones when `org_wide`) whose
    /// last synthesis failed, newest first: what review shows so that a person can look at
    /// the dead letter (`deja dlq`) rather than wait for a strategy that is not coming.
    pub async fn synthesis_failures(
        &self,
        org: &str,
        team: Option<&str>,
        org_wide: bool,
        limit: usize,
    ) -> Result<Vec<SynthesisFailure>> {
        let rows = self
            .fetch(
                FAILURES
                    .statement()
                    .param("org", org)
                    .param("team", team)
                    .param("org_wide", org_wide)
                    .param("limit", int(limit)),
            )
            .await?;
        rows.iter()
            .map(|row| column(row, FAILURES.name, "failure"))
            .collect()
    }

    /// Stores a synthesized strategy and re-links its sources, unless the stored one was made
    /// from a newer read of its sources ([`SavedStrategy::Stale`]). A strategy edited by a
    /// person is not replaced: the new one is kept as a proposal.
    pub async fn save_strategy(&self, write: &StrategyWrite) -> Result<SavedStrategy> {
        if write.markdown.trim().is_empty() || write.fingerprint.is_empty() {
            return Err(GraphError::invalid(
                "strategy",
                "markdown and fingerprint must not be empty",
            ));
        }
        let rows = self
            .fetch_write(
                keyed(SAVE, &write.key)
                    .param("markdown", write.markdown.as_str())
                    .param("playbook_json", write.playbook_json.as_str())
                    .param("fingerprint", write.fingerprint.as_str())
                    .param("model", write.model.as_str())
                    .param("generated_at", write.generated_at)
                    .param("sources_read_at", write.sources_read_at)
                    .param("source_ids", write.source_ids.clone()),
            )
            .await?;
        let Some(row) = rows.first() else {
            return Err(GraphError::decode(SAVE.name, "no row"));
        };
        let stale: bool = column(row, SAVE.name, "stale")?;
        let proposed: bool = column(row, SAVE.name, "proposed")?;
        Ok(match (stale, proposed) {
            (true, _) => SavedStrategy::Stale,
            (false, true) => SavedStrategy::Proposed,
            (false, false) => SavedStrategy::Stored,
        })
    }

    /// Claims the synthesis of `key` at `fingerprint`. Exactly one of any number of
    /// concurrent callers gets [`SynthesisClaim::Won`] and should publish the job.
    /// A claim older than `lease` (its worker died, its message was lost) can be retaken. A
    /// fingerprint whose synthesis failed less than `failure_cooldown` ago is refused
    /// ([`SynthesisClaim::CoolingDown`]).
    pub async fn claim_synthesis(
        &self,
        key: &StrategyKey,
        fingerprint: &str,
        lease: Duration,
        failure_cooldown: Duration,
    ) -> Result<SynthesisClaim> {
        let millis = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let statement = keyed(CLAIM, key)
                .param("fingerprint", fingerprint)
                .param("lease_ms", millis(lease))
                .param("cooldown_ms", millis(failure_cooldown));
            match self.fetch_write(statement).await {
                Ok(rows) => {
                    let Some(row) = rows.first() else {
                        return Err(GraphError::decode(CLAIM.name, "no row"));
                    };
                    return Ok(if column::<bool>(row, CLAIM.name, "won")? {
                        SynthesisClaim::Won
                    } else if column::<bool>(row, CLAIM.name, "cooling_down")? {
                        SynthesisClaim::CoolingDown
                    } else {
                        SynthesisClaim::Held
                    });
                }
                // A deadlock between first claimers is a lost race, not a failure: retry, and
                // the node the winner created makes the next attempt a plain read-check.
                Err(error) if error.is_transient() && attempt < CLAIM_ATTEMPTS => {
                    tracing::debug!(%error, attempt, "synthesis claim contended; retrying");
                    tokio::time::sleep(Duration::from_millis(5 * u64::from(attempt))).await;
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// Ends the synthesis claim of `key` if it is still held for one of `fingerprints` (the
    /// synthesizer is done); a claim taken since for another source set is left alone.
    pub async fn release_synthesis_claim(
        &self,
        key: &StrategyKey,
        fingerprints: &[&str],
    ) -> Result<()> {
        self.release_claim(key, fingerprints, None).await
    }

    /// [`GraphStore::release_synthesis_claim`] after a failed synthesis (its job
    /// dead-lettered): in the same statement, records that `failed` (the fingerprint of the
    /// sources it tried) failed now, for `reason`, so that
    /// [`GraphStore::claim_synthesis`] refuses it during the cool-down.
    pub async fn fail_synthesis_claim(
        &self,
        key: &StrategyKey,
        fingerprints: &[&str],
        failed: &str,
        reason: &str,
    ) -> Result<()> {
        self.release_claim(key, fingerprints, Some((failed, reason)))
            .await
    }

    async fn release_claim(
        &self,
        key: &StrategyKey,
        fingerprints: &[&str],
        failed: Option<(&str, &str)>,
    ) -> Result<()> {
        let fingerprints: Vec<String> = fingerprints.iter().map(|f| f.to_string()).collect();
        let reason = failed.map(|(_, reason)| {
            reason
                .chars()
                .take(FAILED_REASON_MAX_CHARS)
                .collect::<String>()
        });
        self.run(
            RELEASE_CLAIM
                .statement()
                .param("key", key.composite())
                .param("fingerprints", fingerprints)
                .param("failed_fingerprint", failed.map(|(f, _)| f))
                .param("failed_reason", reason),
        )
        .await
    }

    /// A person replaces the text of the strategy of `key`; regeneration will only propose
    /// from now on. Returns the new version, `None` when there is no such strategy.
    pub async fn edit_strategy(
        &self,
        key: &StrategyKey,
        markdown: &str,
        editor: &str,
    ) -> Result<Option<i64>> {
        Ok(self
            .edit_strategy_at(key, markdown, editor, None, None)
            .await?
            .map(StrategyEdit::version))
    }

    /// [`GraphStore::edit_strategy`] guarded by the version the person read
    /// (`expected_version`; `None` = unconditional): a strategy that moved on meanwhile is
    /// left unchanged and reported as [`StrategyEdit::Conflict`]. With `audit`, its record
    /// (`action: edit`, `version` = the new one) is written in the same statement.
    pub async fn edit_strategy_at(
        &self,
        key: &StrategyKey,
        markdown: &str,
        editor: &str,
        expected_version: Option<i64>,
        audit: Option<&ReviewRecord>,
    ) -> Result<Option<StrategyEdit>> {
        if markdown.trim().is_empty() || editor.trim().is_empty() {
            return Err(GraphError::invalid(
                "strategy edit",
                "markdown and editor must not be empty",
            ));
        }
        let statement = EDIT
            .statement()
            .param("key", key.composite())
            .param("markdown", markdown)
            .param("editor", editor)
            .param("expected_version", expected_version);
        self.guarded_strategy_write(EDIT.name, audited(statement, audit))
            .await
    }

    /// A reviewer accepts the pending proposal of `key`: it becomes the current strategy,
    /// which counts as machine-written again. Returns the new version, `None` when nothing
    /// was pending.
    pub async fn accept_proposal(&self, key: &StrategyKey, reviewer: &str) -> Result<Option<i64>> {
        Ok(self
            .accept_proposal_at(key, reviewer, None, None)
            .await?
            .map(StrategyEdit::version))
    }

    /// [`GraphStore::accept_proposal`] guarded by the version the reviewer read
    /// (`expected_version`; `None` = unconditional), with its audit record when `audit` is
    /// given (`action: accept_proposal`). `None` when nothing was pending.
    pub async fn accept_proposal_at(
        &self,
        key: &StrategyKey,
        reviewer: &str,
        expected_version: Option<i64>,
        audit: Option<&ReviewRecord>,
    ) -> Result<Option<StrategyEdit>> {
        let statement = ACCEPT_PROPOSAL
            .statement()
            .param("key", key.composite())
            .param("reviewer", reviewer)
            .param("expected_version", expected_version);
        self.guarded_strategy_write(ACCEPT_PROPOSAL.name, audited(statement, audit))
            .await
    }

    /// What people did to the strategy of `key` (edits, accepted proposals), newest first.
    pub async fn strategy_history(
        &self,
        key: &StrategyKey,
        limit: usize,
    ) -> Result<Vec<ReviewRecord>> {
        let rows = self
            .fetch(
                HISTORY
                    .statement()
                    .param("key", key.composite())
                    .param("limit", int(limit)),
            )
            .await?;
        review_records(&rows, HISTORY.name)
    }

    /// Runs an edit or an acceptance; its row says whether it applied and the version now.
    async fn guarded_strategy_write(
        &self,
        query: &'static str,
        statement: Statement,
    ) -> Result<Option<StrategyEdit>> {
        let rows = self.fetch_write(statement).await?;
        rows.first()
            .map(|row| {
                let version: i64 = column(row, query, "version")?;
                Ok(if column(row, query, "applied")? {
                    StrategyEdit::Saved { version }
                } else {
                    StrategyEdit::Conflict { current: version }
                })
            })
            .transpose()
    }
}

/// The audit parameters of a strategy write (`$audit` false: no record).
fn audited(statement: Statement, audit: Option<&ReviewRecord>) -> Statement {
    statement
        .param("audit", audit.is_some())
        .param("at", audit.map_or_else(Utc::now, |a| a.at))
        .param(
            "changes_json",
            audit.map_or("[]", |a| a.changes_json.as_str()),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(fingerprint: &str, proposed: Option<&str>) -> StoredStrategy {
        StoredStrategy {
            key: StrategyKey {
                org: "acme".into(),
                team: "*".into(),
                issue_type: "cache-eviction".into(),
                component: Component::new("cache", "redis"),
            },
            markdown: "md".into(),
            playbook_json: "{}".into(),
            fingerprint: fingerprint.into(),
            model: "m".into(),
            generated_at: None,
            version: 1,
            source_ids: vec![],
            edited_by: proposed.map(|_| "ana".to_string()),
            edited_at: None,
            reviewed_by: None,
            reviewed_at: None,
            proposed_markdown: proposed.map(|_| "new".to_string()),
            proposed_fingerprint: proposed.map(str::to_string),
            proposed_model: None,
            proposed_at: None,
            proposed_source_ids: vec![],
            changed_source_ids: vec![],
            corrected_source_ids: vec![],
        }
    }

    #[test]
    fn a_strategy_is_current_for_its_own_or_its_proposals_fingerprint_only() {
        assert!(stored("a", None).is_current("a"));
        assert!(!stored("a", None).is_current("b"));
        assert!(stored("a", Some("b")).is_current("b"));
        assert!(!stored("a", Some("b")).is_current("c"));
    }

    #[test]
    fn every_strategy_query_file_has_a_constant() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../cypher/queries/strategies");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".cypher"))
            .map(|n| format!("strategies/{}", n.trim_end_matches(".cypher")))
            .collect();
        files.sort();
        let mut names: Vec<String> = QUERIES.iter().map(|q| q.name.to_string()).collect();
        names.sort();
        assert_eq!(files, names);
    }
}
