//! Re-extracting failed episodes from their stored turn input (`deja retry`).

use crate::extract::{Extractor, Outcome};
use deja_config::Settings;
use deja_domain::{Episode, EpisodeKey, ExtractionStatus};
use deja_embed::{EmbedError, LocalEmbedder};
use deja_graph::{GraphError, GraphStore, ReviewRecord};
use deja_llm::{LlmClient, LlmError};
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum RetryError {
    #[error("no episode {0}")]
    NoEpisode(String),
    #[error(transparent)]
    Graph(#[from] GraphError),
    #[error("could not load the embedding model")]
    Embed(#[from] EmbedError),
    #[error("could not set up the LLM client")]
    Llm(#[from] LlmError),
    /// A repaired episode would be stored without its token and cause vectors, unnoticed.
    #[error(
        "late_interaction.enabled is on but its model did not load (see the log): nothing \
         retried"
    )]
    LateEncoderMissing,
}

/// Which conversations to re-extract.
pub enum RetryTarget<'a> {
    /// Every failed extraction, of one org or of every org, however many: read `page` at
    /// first, and twice as many each time a read comes back full.
    AllFailed { org: Option<&'a str>, page: usize },
    /// The conversation of one episode (`ep_...`), looked up within `org` when given.
    Episode { id: &'a str, org: Option<&'a str> },
    /// One conversation.
    Conversation(EpisodeKey),
}

/// The conversations `target` names.
pub async fn keys_to_retry(
    store: &GraphStore,
    target: RetryTarget<'_>,
) -> Result<Vec<EpisodeKey>, RetryError> {
    match target {
        RetryTarget::AllFailed { org, page } => {
            // The query has no cursor (a retried conversation leaves the list or moves in
            // it), so it is asked again for more until it returns fewer than asked: every
            // conversation failed at that read, not the first `page` alone.
            let mut limit = page.max(1);
            loop {
                let keys = store.keys_needing_retry(org, limit).await?;
                if keys.len() < limit {
                    return Ok(keys);
                }
                limit = limit.saturating_mul(2);
            }
        }
        RetryTarget::Episode { id, org } => match store.get_by_id(org, id).await? {
            Some(episode) => Ok(vec![episode.key()]),
            None => Err(RetryError::NoEpisode(id.to_owned())),
        },
        RetryTarget::Conversation(key) => Ok(vec![key]),
    }
}

/// Who re-extracted which turn, in the episode's history: the retry may have replaced its
/// conclusion. The retry is done by then, so a failure to record it is logged, not raised.
async fn record_retry(store: &GraphStore, episode: &Episode, turn_index: u32, by: &str) {
    let record = ReviewRecord::retry(by, turn_index, chrono::Utc::now());
    if let Err(error) = store
        .record_review(&episode.key(), episode.version, &record)
        .await
    {
        tracing::warn!(id = %episode.id, error = %deja_domain::error_chain(&error),
            "retried, but its audit record was not written");
    }
}

/// How a retry run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetrySummary {
    pub retried: usize,
    /// Conversations whose extraction failed again, or that could not be retried.
    pub still_failing: usize,
}

/// Re-extracts the stored latest turn of each conversation of `keys`, with the worker's own
/// extractor and models (token vectors, recurrence links), as a last attempt (a failure is
/// recorded on the episode, not retried); `report` hears each outcome. Each attempt is
/// recorded in the episode's review history as a `retry` by `by`, as the API's retry is.
pub async fn retry(
    settings: &Settings,
    store: GraphStore,
    keys: &[EpisodeKey],
    by: &str,
    mut report: impl FnMut(&EpisodeKey, &Outcome),
) -> Result<RetrySummary, RetryError> {
    let embedder = Arc::new(LocalEmbedder::load(&settings.embedding)?);
    let llm = Arc::new(LlmClient::new(&settings.llm)?);
    let late = deja_recognition::load_late_encoder(settings).await;
    if settings.late_interaction.enabled && late.is_none() {
        return Err(RetryError::LateEncoderMissing);
    }
    let reranker = if settings.worker.link_recurrences {
        deja_recognition::load_reranker(settings).await
    } else {
        None
    };
    let extractor = Extractor::new(store.clone(), llm, embedder, settings)
        .with_reranker(reranker)
        .with_late(late);
    let mut still_failing = 0;
    for key in keys {
        let (turn_index, outcome) = extractor.retry_stored(key).await?;
        let after = store.get_by_key(key).await?;
        // Repaired is what the episode says afterwards: a failure merged again onto an
        // episode that already records one is reported as "seen", not as a failure.
        let repaired = matches!(
            outcome,
            Outcome::Stored {
                status: ExtractionStatus::Ok,
                ..
            }
        ) && after
            .as_ref()
            .is_some_and(|episode| episode.failed_turn().is_none());
        if !repaired {
            still_failing += 1;
        }
        if let (Some(episode), Some(turn_index)) = (&after, turn_index) {
            record_retry(&store, episode, turn_index, by).await;
        }
        report(key, &outcome);
    }
    Ok(RetrySummary {
        retried: keys.len(),
        still_failing,
    })
}
