//! Listings that include failed extractions, the team vocabulary, and the retry backlog.

use crate::queries::{LIST, NEEDING_RETRY, VOCABULARY_COMPONENTS, VOCABULARY_ISSUE_TYPES};
use crate::rows::int;
use crate::{column, episode_column, GraphStore, Result};
use deja_domain::{
    Component, Episode, EpisodeKey, ExtractionStatus, Provenance, Scope, Vocabulary,
};

/// At most this many issue types and this many components go into a team's vocabulary: it is
/// pasted into an LLM prompt.
pub const VOCABULARY_LIMIT: usize = 30;

/// What [`GraphStore::list`] keeps; every field is optional and they combine with AND.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListFilter {
    pub status: Option<ExtractionStatus>,
    /// Only episodes with an `extraction_error` recorded (failed, or ok with a failed newer
    /// turn).
    pub pending_error: bool,
    pub provenance: Option<Provenance>,
}

impl GraphStore {
    /// The scope's episodes, failed extractions included, most recently updated first.
    /// Episodes carry no embedding.
    pub async fn list(
        &self,
        scope: &Scope,
        filter: &ListFilter,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<Episode>> {
        let statement = LIST
            .statement()
            .param("org", scope.org.as_str())
            .param("team", scope.team.as_deref())
            .param("status", filter.status.map(ExtractionStatus::as_str))
            .param("pending_error", filter.pending_error)
            .param("provenance", filter.provenance.map(Provenance::as_str))
            .param("offset", int(offset))
            .param("limit", int(limit));
        let rows = self.fetch(statement).await?;
        rows.iter()
            .map(|row| episode_column(row, LIST.name, "episode"))
            .collect()
    }

    /// The issue types and components a team's `ok` episodes use, most frequent first, at
    /// most [`VOCABULARY_LIMIT`] of each.
    pub async fn team_vocabulary(&self, org: &str, team: &str) -> Result<Vocabulary> {
        let scoped = |statement: crate::queries::Statement| {
            statement
                .param("org", org)
                .param("team", team)
                .param("limit", int(VOCABULARY_LIMIT))
        };
        let issue_types = self
            .fetch(scoped(VOCABULARY_ISSUE_TYPES.statement()))
            .await?
            .iter()
            .map(|row| column::<String>(row, VOCABULARY_ISSUE_TYPES.name, "issue_type"))
            .collect::<Result<Vec<_>>>()?;
        let components = self
            .fetch(scoped(VOCABULARY_COMPONENTS.statement()))
            .await?
            .iter()
            .map(|row| {
                Ok(Component {
                    kind: column(row, VOCABULARY_COMPONENTS.name, "type")?,
                    name: column(row, VOCABULARY_COMPONENTS.name, "name")?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Vocabulary {
            issue_types,
            components,
            ..Vocabulary::default()
        })
    }

    /// Conversations whose latest extraction failed (status `failed`, or an ok episode with
    /// an `extraction_error`), least recently updated first; all orgs when `org` is `None`.
    pub async fn keys_needing_retry(
        &self,
        org: Option<&str>,
        limit: usize,
    ) -> Result<Vec<EpisodeKey>> {
        let rows = self
            .fetch(
                NEEDING_RETRY
                    .statement()
                    .param("org", org)
                    .param("limit", int(limit)),
            )
            .await?;
        rows.iter()
            .map(|row| {
                Ok(EpisodeKey::new(
                    column::<String>(row, NEEDING_RETRY.name, "org")?,
                    column::<String>(row, NEEDING_RETRY.name, "correlation_id")?,
                ))
            })
            .collect()
    }
}
