//! Re-embedding every episode whose embedding is missing or from another model
//! (`deja reembed`), after a model change or an import without vectors; then re-encoding the
//! late-interaction token vectors that are missing or not of the episode's current text
//! (episodes written before late interaction, by a writer without its model, or renamed by
//! `deja vocab merge`).

use crate::app::{check_dimensions, IndexMismatch};
use deja_domain::recognition::source_stamp;
use deja_domain::ExtractionStatus;
use deja_embed::{embed_blocking, encode_blocking, EmbedError, Embedder, LateEncoder};
use deja_graph::{CauseVector, GraphError, GraphStore};
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum ReembedError {
    #[error(transparent)]
    Index(#[from] IndexMismatch),
    #[error(transparent)]
    Graph(#[from] GraphError),
    #[error(transparent)]
    Embed(#[from] EmbedError),
    /// Episodes that were written concurrently on every attempt to store their new vector:
    /// they keep their older one (of another model, or of an older text under this model's
    /// id, which only `--all` selects again). Everything else was re-embedded.
    #[error(
        "{} episode(s) changed during each of {MAX_PASSES} attempts to re-embed them and keep \
         their older vector ({reembedded} re-embedded): run the command again",
        left.len()
    )]
    Unfinished {
        /// How many episodes were re-embedded.
        reembedded: usize,
        /// The ids of the episodes left with their older vector.
        left: Vec<String>,
    },
}

/// Attempts at each episode before giving up on one written concurrently every time.
const MAX_PASSES: usize = 3;

/// Which episodes [`reembed`] embeds again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReembedTarget {
    /// Those without a vector or with one of another model: after a model change.
    Stale,
    /// Every episode: after an upgrade that changed what is embedded (the text of an episode
    /// written before it is not the text its vector is of, and the model id cannot tell).
    Every,
}

/// An episode whose new vector was not stored: it changed between its read and the write.
struct Conflict {
    org: String,
    id: String,
}

/// Re-embeds the episodes of `org` (or of every org) that `target` selects, `batch` at a
/// time, and returns how many were re-embedded; `progress` hears the running count after each
/// batch. Refuses a model whose dimensions differ from the vector index's.
///
/// Walks episodes in id order, so an interrupted run of the stale ones resumes where it
/// stopped: already re-embedded episodes carry the current model id and are not selected
/// again (a run of every episode starts over).
///
/// An episode written between its read and the vector's write (a compare-and-set on
/// `version`) is read again and re-embedded, up to [`MAX_PASSES`] attempts in all. A write
/// that changed the embedded text embedded it itself, but one that did not (a worker turn
/// that only adds a tool, a review verdict) keeps the older vector and still bumps the
/// version: after an upgrade that changed what is embedded, that vector is of the older text
/// under the current model id, which no later run of the stale ones would select. The
/// episodes still conflicting after the last attempt are [`ReembedError::Unfinished`].
pub async fn reembed(
    store: &GraphStore,
    embedder: &Arc<dyn Embedder>,
    org: Option<&str>,
    target: ReembedTarget,
    batch: usize,
    mut progress: impl FnMut(usize),
) -> Result<usize, ReembedError> {
    check_dimensions(store.vector_index_dimensions().await?, embedder.as_ref())?;
    let model_id = embedder.model_id().to_owned();
    let every = target == ReembedTarget::Every;
    let batch = batch.max(1);
    let (mut done, mut conflicts) = (0usize, Vec::new());
    // The first attempt: one walk over the selected episodes.
    let mut after = None::<String>;
    loop {
        let items = store
            .episodes_for_reembed(org, &model_id, every, after.as_deref(), batch)
            .await?;
        let Some(last) = items.last() else { break };
        after = Some(last.id.clone());
        let pending = items
            .into_iter()
            .map(|item| (item.key.org, item.id, item.version, item.text))
            .collect();
        done += store_vectors(store, embedder, &model_id, pending, &mut conflicts).await?;
        progress(done);
    }
    // The others: each conflicting episode read again (under its write lock, so its text and
    // version are of one commit). Bounded, so that a hot episode cannot keep the command
    // running forever.
    for _attempt in 1..MAX_PASSES {
        if conflicts.is_empty() {
            break;
        }
        let again = std::mem::take(&mut conflicts);
        for chunk in again.chunks(batch) {
            let mut pending = Vec::new();
            for Conflict { org, id } in chunk {
                let Some(episode) = store.get_by_id(Some(org), id).await? else {
                    continue; // deleted meanwhile
                };
                if episode.extraction_status != ExtractionStatus::Ok {
                    continue; // not searched by vector: nothing to embed
                }
                // Of the stale ones, an episode a writer embedded anew with this model is done.
                let current = episode.embedding.is_some()
                    && episode.embedding_model.as_deref() == Some(model_id.as_str());
                if !every && current {
                    continue;
                }
                let text = episode.embedding_text();
                pending.push((episode.key().org, episode.id, episode.version, text));
            }
            done += store_vectors(store, embedder, &model_id, pending, &mut conflicts).await?;
            progress(done);
        }
    }
    if conflicts.is_empty() {
        Ok(done)
    } else {
        Err(ReembedError::Unfinished {
            reembedded: done,
            left: conflicts.into_iter().map(|c| c.id).collect(),
        })
    }
}

/// Embeds the texts of `pending` (org, id, version read, text) and stores each vector if its
/// episode is still at the version read; returns how many were stored and adds the others to
/// `conflicts`.
async fn store_vectors(
    store: &GraphStore,
    embedder: &Arc<dyn Embedder>,
    model_id: &str,
    pending: Vec<(String, String, i64, String)>,
    conflicts: &mut Vec<Conflict>,
) -> Result<usize, ReembedError> {
    if pending.is_empty() {
        return Ok(0);
    }
    let texts: Vec<String> = pending.iter().map(|(.., text)| text.clone()).collect();
    let vectors = embed_blocking(embedder.clone(), texts).await?;
    let mut stored = 0;
    for ((org, id, version, _), vector) in pending.into_iter().zip(vectors) {
        if store.set_embedding(&id, version, &vector, model_id).await? {
            stored += 1;
        } else {
            conflicts.push(Conflict { org, id });
        }
    }
    Ok(stored)
}

/// Re-encodes the recognition vectors of the episodes of `org` (or of every org) whose stored
/// ones are missing, of another model or of an older text — token vectors by `encoder`, cause
/// vectors by `embedder` — `batch` at a time, and returns how many were stored; `progress`
/// hears the running count after each batch. Resumable like [`reembed`]: current vectors are
/// skipped, so a second run does nothing.
pub async fn retokenize(
    store: &GraphStore,
    encoder: &Arc<dyn LateEncoder>,
    embedder: &Arc<dyn Embedder>,
    org: Option<&str>,
    batch: usize,
    mut progress: impl FnMut(usize),
) -> Result<usize, ReembedError> {
    let model = encoder.model_id().to_owned();
    let cause_model = embedder.model_id().to_owned();
    let (mut after, mut done) = (None::<String>, 0usize);
    loop {
        let items = store
            .episodes_for_retokenize(org, after.as_deref(), batch.max(1))
            .await?;
        let Some(last) = items.last() else { break };
        after = Some(last.id.clone());
        let stale: Vec<_> = items
            .into_iter()
            .map(|item| {
                let stamp = source_stamp(&model, &item.text);
                (item, stamp)
            })
            .filter(|(item, stamp)| {
                item.model.as_deref() != Some(model.as_str())
                    || item.stamp.as_deref() != Some(stamp.as_str())
                    || item.cause_model.as_deref() != Some(cause_model.as_str())
            })
            .collect();
        if stale.is_empty() {
            continue;
        }
        let texts: Vec<String> = stale.iter().map(|(item, _)| item.text.clone()).collect();
        let cause_texts: Vec<String> = stale
            .iter()
            .map(|(item, _)| item.cause_text.clone())
            .collect();
        let vectors = encode_blocking(encoder.clone(), texts).await?;
        let causes = embed_blocking(embedder.clone(), cause_texts).await?;
        for (((item, stamp), vectors), cause) in stale.iter().zip(vectors).zip(causes) {
            let cause = CauseVector {
                model: cause_model.clone(),
                vector: cause,
            };
            // An episode deleted meanwhile stores nothing; one whose text changed meanwhile
            // gets vectors its readers ignore, and the writer that changed it stores its own.
            if store
                .save_tokens(&item.org, &item.id, &model, stamp, &vectors, Some(&cause))
                .await?
            {
                done += 1;
            }
        }
        progress(done);
    }
    Ok(done)
}
