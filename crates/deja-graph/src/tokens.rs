//! Late-interaction token vectors (`deja_domain::recognition::late`), one `:EpisodeTokens`
//! node per episode, apart from the episode: ~60 KB that no episode read should carry.
//!
//! They are not written in the episode's own transaction. Each carries a `stamp` of the text
//! and model it was computed from (`deja_domain::recognition::source_stamp`), and a reader
//! uses them only when that stamp is the episode's current text's: vectors written for a
//! text that a later turn replaced, or by a writer that lost its compare-and-set, are never
//! compared. The episode's deletion deletes them (`review/delete.cypher`).

use crate::queries::{FOR_RETOKENIZE, GET_TOKENS, SAVE_TOKENS, TOKENS_STAMP};
use crate::rows::int;
use crate::{column, GraphError, GraphStore, Result};
use chrono::Utc;
use deja_domain::embedding_text;
use deja_domain::recognition::TokenVectors;
use std::collections::HashMap;

/// Token vectors as stored, with what they were computed from.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredTokens {
    pub model: String,
    pub stamp: String,
    pub vectors: TokenVectors,
}

/// One episode of a re-tokenizing pass: its current embedded text and the stamp and model
/// of its stored vectors (`None` without any).
#[derive(Debug, Clone, PartialEq)]
pub struct RetokenizeItem {
    pub id: String,
    pub org: String,
    pub text: String,
    pub stamp: Option<String>,
    pub model: Option<String>,
}

impl GraphStore {
    /// Stores `vectors` as episode `episode_id`'s (of `org`), computed by `model` from the
    /// text whose stamp is `stamp`. `Ok(false)`: no such episode in `org`, nothing stored.
    pub async fn save_tokens(
        &self,
        org: &str,
        episode_id: &str,
        model: &str,
        stamp: &str,
        vectors: &TokenVectors,
    ) -> Result<bool> {
        let bytes = neo4rs::BoltType::Bytes(neo4rs::BoltBytes::new(vectors.to_bytes().into()));
        let rows = self
            .fetch_write(
                SAVE_TOKENS
                    .statement()
                    .param("episode_id", episode_id)
                    .param("org", org)
                    .param("model", model)
                    .param("stamp", stamp)
                    .param("dims", int(vectors.dims()))
                    .param("count", int(vectors.len()))
                    .param("vectors", bytes)
                    .param("at", Utc::now()),
            )
            .await?;
        Ok(!rows.is_empty())
    }

    /// The stored token vectors of `ids` within `org`, by episode id; ids of another org or
    /// without any are absent. Vectors that do not decode are left out with a warning (the
    /// candidate is then decided without them).
    pub async fn tokens(&self, org: &str, ids: &[String]) -> Result<HashMap<String, StoredTokens>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let rows = self
            .fetch(
                GET_TOKENS
                    .statement()
                    .param("org", org)
                    .param("ids", ids.to_vec()),
            )
            .await?;
        let name = GET_TOKENS.name;
        let mut found = HashMap::with_capacity(rows.len());
        for row in &rows {
            let id: String = column(row, name, "episode_id")?;
            let dims: i64 = column(row, name, "dims")?;
            let bytes: neo4rs::BoltBytes = column(row, name, "vectors")?;
            let dims = usize::try_from(dims)
                .map_err(|_| GraphError::decode(name, format!("dims {dims} out of range")))?;
            match TokenVectors::from_bytes(dims, &bytes.value) {
                Ok(vectors) => {
                    found.insert(
                        id,
                        StoredTokens {
                            model: column(row, name, "model")?,
                            stamp: column(row, name, "stamp")?,
                            vectors,
                        },
                    );
                }
                Err(error) => {
                    tracing::warn!(episode_id = %id, %error, "stored token vectors unreadable; skipped");
                }
            }
        }
        Ok(found)
    }

    /// `(model, stamp)` of episode `episode_id`'s stored token vectors (of `org`), if any.
    pub async fn tokens_stamp(
        &self,
        org: &str,
        episode_id: &str,
    ) -> Result<Option<(String, String)>> {
        let rows = self
            .fetch(
                TOKENS_STAMP
                    .statement()
                    .param("org", org)
                    .param("episode_id", episode_id),
            )
            .await?;
        let name = TOKENS_STAMP.name;
        rows.first()
            .map(|row| Ok((column(row, name, "model")?, column(row, name, "stamp")?)))
            .transpose()
    }

    /// Up to `batch` `ok` episodes (of `org`, or of every org) in id order after `after_id`,
    /// with the stamp and model of their stored token vectors.
    pub async fn episodes_for_retokenize(
        &self,
        org: Option<&str>,
        after_id: Option<&str>,
        batch: usize,
    ) -> Result<Vec<RetokenizeItem>> {
        let rows = self
            .fetch(
                FOR_RETOKENIZE
                    .statement()
                    .param("org", org.unwrap_or(""))
                    .param("after_id", after_id.unwrap_or(""))
                    .param("batch", int(batch)),
            )
            .await?;
        let name = FOR_RETOKENIZE.name;
        rows.iter()
            .map(|row| {
                Ok(RetokenizeItem {
                    id: column(row, name, "id")?,
                    org: column(row, name, "org")?,
                    text: embedding_text(
                        &column::<String>(row, name, "issue_type")?,
                        &column::<String>(row, name, "issue_description")?,
                        &column::<String>(row, name, "summary")?,
                        column::<Option<String>>(row, name, "root_cause")?.as_deref(),
                    ),
                    stamp: column(row, name, "stamp")?,
                    model: column(row, name, "model")?,
                })
            })
            .collect()
    }
}
