//! Re-embedding every episode whose embedding is missing or from another model
//! (`deja reembed`), after a model change or an import without vectors; then re-encoding the
//! late-interaction token vectors that are missing or not of the episode's current text
//! (episodes written before late interaction, by a writer without its model, or renamed by
//! `deja vocab merge`).

use crate::app::{check_dimensions, IndexMismatch};
use deja_domain::recognition::source_stamp;
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
}

/// Passes over the episodes before giving up on the ones written concurrently.
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

/// Re-embeds the episodes of `org` (or of every org) that `target` selects, `batch` at a
/// time, and returns how many were re-embedded; `progress` hears the running count after each
/// batch. Refuses a model whose dimensions differ from the vector index's.
///
/// Walks episodes in id order, so an interrupted run of the stale ones resumes where it
/// stopped: already re-embedded episodes carry the current model id and are not selected
/// again (a run of every episode starts over).
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
    let mut done = 0usize;
    // An episode written concurrently keeps its old vector and is picked up by the next
    // pass; passes are bounded so a hot episode cannot keep the command running forever.
    // Re-embedding every episode takes one pass: whoever wrote an episode meanwhile embedded
    // its current text, and a second pass would only embed everything again.
    let passes = if every { 1 } else { MAX_PASSES };
    for _pass in 0..passes {
        let (mut after, mut conflicts) = (None::<String>, 0usize);
        loop {
            let items = store
                .episodes_for_reembed(org, &model_id, every, after.as_deref(), batch.max(1))
                .await?;
            let Some(last) = items.last() else { break };
            after = Some(last.id.clone());
            let texts: Vec<String> = items.iter().map(|item| item.text.clone()).collect();
            let vectors = embed_blocking(embedder.clone(), texts).await?;
            for (item, vector) in items.iter().zip(vectors) {
                if store
                    .set_embedding(&item.id, item.version, &vector, &model_id)
                    .await?
                {
                    done += 1;
                } else {
                    conflicts += 1;
                }
            }
            progress(done);
        }
        if conflicts == 0 {
            break;
        }
    }
    Ok(done)
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
