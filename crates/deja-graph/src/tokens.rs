//! Recognition vectors, one `:EpisodeTokens` node per episode, apart from the episode (~60 KB
//! that no episode read should carry): the late-interaction token vectors
//! (`deja_domain::recognition::late`) and the cause vector, the embedding of the episode's
//! issue type and root cause that the family order compares (`Episode::cause_text`).
//!
//! They are not written in the episode's own transaction. Each carries a `stamp` of the text
//! and model it was computed from (`deja_domain::recognition::source_stamp`), and a reader
//! uses them only when that stamp is the episode's current text's: vectors written for a
//! text that a later turn replaced, or by a writer that lost its compare-and-set, are never
//! compared. The episode's deletion deletes them (`review/delete.cypher`).

use crate::queries::{FOR_RETOKENIZE, GET_TOKENS, SAVE_TOKENS, TOKENS_STAMP};
use crate::rows::int;
use crate::{column, GraphError, GraphStore, Result, TextColumns};
use chrono::Utc;
use deja_domain::recognition::TokenVectors;
use std::collections::HashMap;

/// Token vectors as stored, with what they were computed from.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredTokens {
    pub model: String,
    pub stamp: String,
    pub vectors: TokenVectors,
    /// Stored beside them from the same text (same stamp); `None` when the writer had no
    /// embedder, or wrote before cause vectors existed.
    pub cause: Option<CauseVector>,
}

/// What an episode's stored recognition vectors were computed from.
#[derive(Debug, Clone, PartialEq)]
pub struct TokensSource {
    /// The late-interaction encoder.
    pub model: String,
    /// [`deja_domain::recognition::source_stamp`] of that model and the embedded text.
    pub stamp: String,
    /// The embedding model of the stored cause vector; `None` without one.
    pub cause_model: Option<String>,
}

/// The embedding of an episode's [`deja_domain::Episode::cause_text`], and the embedding
/// model that computed it.
#[derive(Debug, Clone, PartialEq)]
pub struct CauseVector {
    pub model: String,
    pub vector: Vec<f32>,
}

/// One episode of a re-tokenizing pass: its current embedded text and cause text, the stamp
/// and model of its stored token vectors and the model of its cause vector (`None` without
/// any).
#[derive(Debug, Clone, PartialEq)]
pub struct RetokenizeItem {
    pub id: String,
    pub org: String,
    pub text: String,
    pub cause_text: String,
    pub stamp: Option<String>,
    pub model: Option<String>,
    pub cause_model: Option<String>,
}

impl GraphStore {
    /// Stores `vectors` as episode `episode_id`'s (of `org`), computed by `model` from the
    /// text whose stamp is `stamp`, with `cause` (computed from the same fields; `None`
    /// removes a stored one). `Ok(false)`: no such episode in `org`, nothing stored.
    pub async fn save_tokens(
        &self,
        org: &str,
        episode_id: &str,
        model: &str,
        stamp: &str,
        vectors: &TokenVectors,
        cause: Option<&CauseVector>,
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
                    .param("cause_vector", cause.map(|c| c.vector.clone()))
                    .param("cause_model", cause.map(|c| c.model.clone()))
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
                            cause: cause_vector(row, name)?,
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

    /// What episode `episode_id`'s stored recognition vectors (of `org`) were computed from,
    /// if any are stored.
    pub async fn tokens_source(&self, org: &str, episode_id: &str) -> Result<Option<TokensSource>> {
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
            .map(|row| {
                Ok(TokensSource {
                    model: column(row, name, "model")?,
                    stamp: column(row, name, "stamp")?,
                    cause_model: column(row, name, "cause_model")?,
                })
            })
            .transpose()
    }

    /// `(model, stamp)` of episode `episode_id`'s stored token vectors (of `org`), if any.
    pub async fn tokens_stamp(
        &self,
        org: &str,
        episode_id: &str,
    ) -> Result<Option<(String, String)>> {
        Ok(self
            .tokens_source(org, episode_id)
            .await?
            .map(|source| (source.model, source.stamp)))
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
                let texts = TextColumns::read(row, name)?;
                Ok(RetokenizeItem {
                    id: column(row, name, "id")?,
                    org: column(row, name, "org")?,
                    text: texts.embedding_text(),
                    cause_text: texts.cause_text(),
                    stamp: column(row, name, "stamp")?,
                    model: column(row, name, "model")?,
                    cause_model: column(row, name, "cause_model")?,
                })
            })
            .collect()
    }
}

/// The row's cause vector, when one is stored with its model.
fn cause_vector(row: &neo4rs::Row, name: &'static str) -> Result<Option<CauseVector>> {
    let vector: Option<Vec<f32>> = column(row, name, "cause_vector")?;
    let model: Option<String> = column(row, name, "cause_model")?;
    Ok(vector
        .zip(model)
        .map(|(vector, model)| CauseVector { model, vector }))
}
