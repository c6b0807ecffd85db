//! Importing one reviewed incident record (`deja import`, `deja eval`): embedded and written
//! in one transaction, so a record is never half-written; then its late-interaction token
//! vectors, stamped with its text (`deja_recognition::ensure_tokens`).

use deja_domain::Episode;
use deja_embed::{embed_blocking, EmbedError, Embedder, LateEncoder};
use deja_graph::{GraphError, GraphStore, UpsertError};
use deja_recognition::{ensure_tokens, TokensError};
use std::convert::Infallible;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("could not embed the record")]
    Embed(#[from] EmbedError),
    #[error("the embedder returned no vector for the record")]
    NoVector,
    #[error("could not write the episode")]
    Graph(#[from] GraphError),
    #[error("the episode kept changing under {attempts} attempts to write it")]
    Conflicts { attempts: u32 },
    #[error("the episode was written but its token vectors were not")]
    Tokens(#[from] TokensError),
}

/// Writes one imported episode, and with `late` its token vectors. Re-importing the same id
/// updates the episode, keeps its creation time, and re-embeds (re-encodes) only if its
/// embedded text (or the model) changed.
pub async fn import_one(
    store: &GraphStore,
    embedder: &Arc<dyn Embedder>,
    late: Option<&Arc<dyn LateEncoder>>,
    mut episode: Episode,
) -> Result<Episode, ImportError> {
    let key = episode.key();
    if let Some(old) = store.get_by_key(&key).await? {
        if old.embedding_text() == episode.embedding_text()
            && old.embedding_model.as_deref() == Some(embedder.model_id())
        {
            episode.embedding = old.embedding.clone();
            episode.embedding_model = old.embedding_model.clone();
        }
        episode.created_at = old.created_at.min(episode.created_at);
    }
    if episode.embedding.is_none() {
        let mut vectors = embed_blocking(embedder.clone(), vec![episode.embedding_text()]).await?;
        episode.embedding = Some(vectors.pop().ok_or(ImportError::NoVector)?);
        episode.embedding_model = Some(embedder.model_id().to_owned());
    }
    let prepared = episode;
    let saved = store
        .upsert_with(&key, |current: Option<Episode>| {
            let mut next = prepared.clone();
            next.version = current.as_ref().map(|c| c.version).unwrap_or(0);
            async move { Ok::<_, Infallible>(Some(next)) }
        })
        .await
        .map_err(|error| match error {
            UpsertError::Graph(error) => ImportError::Graph(error),
            UpsertError::Merge(never) => match never {},
            UpsertError::TooManyConflicts { attempts } => ImportError::Conflicts { attempts },
        })?;
    let saved = saved.unwrap_or(prepared);
    if let Some(encoder) = late {
        ensure_tokens(store, encoder, Some(embedder), &saved).await?;
    }
    Ok(saved)
}
