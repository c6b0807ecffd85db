//! Re-embedding after a model change: page through stale episodes, store new vectors.
//!
//! `set_embedding` is a compare-and-set on `version` that also bumps it. Compare: if the
//! episode changed since it was read, its text may have changed and the new vector would be
//! stale; it is skipped and the next run picks it up. Bump: a worker holding an older copy
//! then gets a conflict and re-reads, instead of writing the old model's vector back.

use crate::queries::{FOR_REEMBED, SET_EMBEDDING};
use crate::rows::int;
use crate::{column, GraphStore, Result, TextColumns};
use deja_domain::EpisodeKey;

/// One episode to re-embed.
#[derive(Debug, Clone, PartialEq)]
pub struct ReembedItem {
    pub id: String,
    pub key: EpisodeKey,
    /// Pass back to [`GraphStore::set_embedding`].
    pub version: i64,
    /// [`deja_domain::embedding_text`] of the stored episode.
    pub text: String,
}

impl GraphStore {
    /// Up to `batch` `ok` episodes (of `org`, or of every org) whose embedding is missing or
    /// not from `model_id` (every one with `all`), in id order after `after_id` (pass the last
    /// id of the previous page to resume).
    pub async fn episodes_for_reembed(
        &self,
        org: Option<&str>,
        model_id: &str,
        all: bool,
        after_id: Option<&str>,
        batch: usize,
    ) -> Result<Vec<ReembedItem>> {
        // Locked: text and version must be of one commit, or the vector of an older text
        // would be stored under the newer version.
        let rows = self
            .fetch_locked(
                FOR_REEMBED
                    .statement()
                    .param("org", org.unwrap_or(""))
                    .param("model_id", model_id)
                    .param("all", all)
                    .param("after_id", after_id.unwrap_or(""))
                    .param("batch", int(batch)),
            )
            .await?;
        let name = FOR_REEMBED.name;
        rows.iter()
            .map(|row| {
                let text = TextColumns::read(row, name)?.embedding_text();
                Ok(ReembedItem {
                    id: column(row, name, "id")?,
                    key: EpisodeKey::new(
                        column::<String>(row, name, "org")?,
                        column::<String>(row, name, "correlation_id")?,
                    ),
                    version: column(row, name, "version")?,
                    text,
                })
            })
            .collect()
    }

    /// Stores `embedding` from `model_id` if episode `id` is still at `expected_version`, and
    /// bumps its version. `Ok(false)` = it changed (or vanished) meanwhile; nothing written.
    pub async fn set_embedding(
        &self,
        id: &str,
        expected_version: i64,
        embedding: &[f32],
        model_id: &str,
    ) -> Result<bool> {
        let rows = self
            .fetch_write(
                SET_EMBEDDING
                    .statement()
                    .param("id", id)
                    .param("expected_version", expected_version)
                    .param("embedding", embedding.to_vec())
                    .param("model_id", model_id),
            )
            .await?;
        match rows.first() {
            Some(row) => column(row, SET_EMBEDDING.name, "stored"),
            None => Ok(false),
        }
    }
}
