//! Importing one reviewed incident record (`deja import`, `deja eval`): its episode (with its
//! embedding and edges) written in one transaction; then its late-interaction token vectors,
//! stamped with its text (`deja_recognition::ensure_tokens`), in a step of their own.
//!
//! Re-importing a record merges it into the episode its id names
//! (`deja_domain::import::reimport`): what people did to it since (verdict, edited fields,
//! confirmation) stays, a record that changes nothing writes nothing, and an episode that
//! holds an agent conversation is refused.

use deja_domain::import::{changes_nothing, reimport, ConversationEpisode};
use deja_domain::Episode;
use deja_embed::{embed_blocking, EmbedError, Embedder, LateEncoder};
use deja_graph::{GraphError, GraphStore, UpsertError};
use deja_recognition::{ensure_tokens, TokensError};
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
    /// The record's id names an agent conversation's episode: nothing was written.
    #[error(transparent)]
    Conversation(#[from] ConversationEpisode),
}

/// What importing one record did.
#[derive(Debug, Clone)]
pub enum Imported {
    /// A new episode, or the stored one updated by the record.
    Written(Episode),
    /// The stored episode already said what the record says: nothing written, no new version.
    Unchanged(Episode),
}

impl Imported {
    pub fn episode(&self) -> &Episode {
        match self {
            Imported::Written(episode) | Imported::Unchanged(episode) => episode,
        }
    }

    pub fn into_episode(self) -> Episode {
        match self {
            Imported::Written(episode) | Imported::Unchanged(episode) => episode,
        }
    }
}

/// [`import_record`], for callers that only need the episode as stored.
pub async fn import_one(
    store: &GraphStore,
    embedder: &Arc<dyn Embedder>,
    late: Option<&Arc<dyn LateEncoder>>,
    episode: Episode,
) -> Result<Episode, ImportError> {
    Ok(import_record(store, embedder, late, episode)
        .await?
        .into_episode())
}

/// Writes one imported episode (`episode`, from `IncidentRecord::to_episode`), and with
/// `late` its token vectors. Re-importing the same id merges the record into the stored
/// episode (`deja_domain::import::reimport`): its review, turns, newer confirmation and
/// creation time stay; it is re-embedded (re-encoded) only if its embedded text (or the
/// model) changed, and not written at all when nothing changed. An episode that holds an
/// agent conversation is refused ([`ImportError::Conversation`]), writing nothing.
pub async fn import_record(
    store: &GraphStore,
    embedder: &Arc<dyn Embedder>,
    late: Option<&Arc<dyn LateEncoder>>,
    episode: Episode,
) -> Result<Imported, ImportError> {
    let key = episode.key();
    let model = embedder.model_id().to_owned();
    // The stored episode when the record changes nothing of it (set by the last attempt).
    let mut unchanged: Option<Episode> = None;
    let saved = store
        .upsert_with(&key, |current: Option<Episode>| {
            let merged = match &current {
                None => Ok(episode.clone()),
                Some(stored) => reimport(stored, episode.clone()),
            };
            unchanged = None;
            let plan = merged.map_err(ImportError::from).map(|mut next| {
                if next.embedding_model.as_deref() != Some(model.as_str()) {
                    next.embedding = None;
                    next.embedding_model = None;
                }
                match current {
                    Some(stored) if next.embedding.is_some() && changes_nothing(&stored, &next) => {
                        unchanged = Some(stored);
                        None
                    }
                    _ => Some(next),
                }
            });
            let (embedder, model) = (embedder.clone(), model.clone());
            async move {
                let Some(mut next) = plan? else {
                    return Ok(None);
                };
                if next.embedding.is_none() {
                    let mut vectors = embed_blocking(embedder, vec![next.embedding_text()]).await?;
                    next.embedding = Some(vectors.pop().ok_or(ImportError::NoVector)?);
                    next.embedding_model = Some(model);
                }
                Ok(Some(next))
            }
        })
        .await
        .map_err(|error| match error {
            UpsertError::Graph(error) => ImportError::Graph(error),
            UpsertError::Merge(error) => error,
            UpsertError::TooManyConflicts { attempts } => ImportError::Conflicts { attempts },
        })?;
    let imported = match (saved, unchanged) {
        (Some(saved), _) => Imported::Written(saved),
        (None, Some(stored)) => Imported::Unchanged(stored),
        (None, None) => unreachable!("the merge writes unless the record changes nothing"),
    };
    // Also when nothing changed: a run that stopped between the two steps is repaired by
    // importing again (a no-op when the stored vectors are the text's).
    if let Some(encoder) = late {
        ensure_tokens(store, encoder, Some(embedder), imported.episode()).await?;
    }
    Ok(imported)
}
