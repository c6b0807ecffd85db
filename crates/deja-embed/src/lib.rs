//! Local embeddings with fastembed and a dynamically loaded ONNX Runtime, offline.
//!
//! [`Embedder`] is the narrow trait the rest of deja depends on; [`LocalEmbedder`] is its one
//! implementation: all-MiniLM-L6-v2 (int8 ONNX), mean pooling, L2-normalised 384-dimension
//! vectors. Nothing is downloaded at build or run time: the model folder and the ONNX Runtime
//! library are fetched beforehand by `deploy/embeddings.sh` (see `docs/embeddings.md`).
//!
//! [`Reranker`] scores (query, document) pairs with a cross-encoder; [`LocalReranker`] runs
//! ms-marco-MiniLM-L-12-v2 (int8 ONNX, Apache-2.0) on the same ONNX Runtime, fetched by the
//! same script (see `docs/ranking.md`, "Cross-encoder reranking").
//!
//! [`LateEncoder`] turns a text into one vector per word piece for late-interaction scoring;
//! [`LocalLateEncoder`] runs answerai-colbert-small-v1's encoder (int8 ONNX, MIT), fetched by
//! the same script (see `docs/ranking.md`, "Late interaction").
//!
//! [`CachingEmbedder`] wraps any embedder with a bounded LRU of vectors: the API puts it in
//! front of the model so that a repeated query costs no inference.
//!
//! [`BatchingEmbedder`] is an async front of any embedder that gathers the texts of
//! concurrent callers into one model call (micro-batching with a short window): the worker
//! embeds through it, so concurrent deliveries share inferences.
//!
//! Embedding and reranking are CPU-bound and synchronous. Async callers go through
//! [`embed_blocking`] / [`rerank_blocking`] (or their own `spawn_blocking`) so that a batch
//! never stalls the tokio workers.

mod batch;
mod cache;
mod error;
mod folder;
mod late;
mod local;
mod rerank;
mod runtime;

pub use batch::{describe_batch_metrics, BatchSettings, BatchingEmbedder, BATCH_TEXTS, BATCH_WAIT};
pub use cache::{CacheStats, CachingEmbedder, CACHE_LOOKUPS};
pub use error::{EmbedError, FIX_HINT, LATE_FIX_HINT, RERANKER_FIX_HINT};
pub use late::{LateEncoder, LatePaths, LocalLateEncoder};
pub use local::{LocalEmbedder, ModelPaths};
pub use rerank::{LocalReranker, RerankerPaths};

use std::sync::Arc;

/// Turns texts into vectors. Implementations are synchronous and CPU-bound.
pub trait Embedder: Send + Sync {
    /// Recorded next to every stored vector so that a model change is detectable.
    fn model_id(&self) -> &str;
    /// Length of every vector returned.
    fn dimensions(&self) -> usize;
    /// One L2-normalised vector per text, in order. An empty slice gives an empty result.
    fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// Scores (query, document) pairs with a cross-encoder. Synchronous, CPU-bound.
pub trait Reranker: Send + Sync {
    /// Names the model in logs and evaluation output.
    fn model_id(&self) -> &str;
    /// One raw relevance score (the model's logit) per document, in input order. Higher is
    /// more relevant; an empty slice gives an empty result.
    fn score(&self, query: &str, documents: &[String]) -> Result<Vec<f32>, EmbedError>;
}

/// Runs [`Reranker::score`] on tokio's blocking pool.
///
/// A panic inside the reranker surfaces as [`EmbedError::Inference`]; a task cancelled by
/// runtime shutdown as the transient [`EmbedError::Task`] (as [`embed_blocking`]).
pub async fn rerank_blocking(
    reranker: Arc<dyn Reranker>,
    query: String,
    documents: Vec<String>,
) -> Result<Vec<f32>, EmbedError> {
    let task = tokio::task::spawn_blocking(move || reranker.score(&query, &documents));
    join_blocking(task.await, "reranker")
}

/// A finished blocking task's result, with a panic or a cancellation turned into an error.
fn join_blocking<T>(
    joined: Result<Result<T, EmbedError>, tokio::task::JoinError>,
    who: &str,
) -> Result<T, EmbedError> {
    match joined {
        Ok(result) => result,
        Err(join) if join.is_panic() => {
            let payload = join.into_panic();
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            Err(EmbedError::Inference(format!("{who} panicked: {message}")))
        }
        Err(join) => Err(EmbedError::Task(join.to_string())),
    }
}

/// Runs [`LateEncoder::encode`] on tokio's blocking pool (errors as [`embed_blocking`]).
pub async fn encode_blocking(
    encoder: Arc<dyn LateEncoder>,
    texts: Vec<String>,
) -> Result<Vec<deja_domain::recognition::TokenVectors>, EmbedError> {
    let task = tokio::task::spawn_blocking(move || encoder.encode(&texts));
    join_blocking(task.await, "late-interaction encoder")
}

/// Runs [`Embedder::embed`] on tokio's blocking pool.
///
/// A panic inside the embedder surfaces as [`EmbedError::Inference`] (retrying the same input
/// would panic again); a task cancelled by runtime shutdown as the transient
/// [`EmbedError::Task`].
pub async fn embed_blocking(
    embedder: Arc<dyn Embedder>,
    texts: Vec<String>,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    let task = tokio::task::spawn_blocking(move || embedder.embed(&texts));
    join_blocking(task.await, "embedder")
}

/// Cosine similarity of two vectors of equal length (0 when either is all zeros). For the
/// L2-normalised output of an [`Embedder`] this equals the dot product.
/// ([`deja_domain::ranking::cosine`] in f32.)
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    deja_domain::ranking::cosine(a, b) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_of_a_vector_with_itself_is_one() {
        let v = [0.3, -1.2, 4.0];
        assert!((cosine(&v, &v) - 1.0).abs() < 1e-6);
    }

    #[test]
    fn cosine_of_orthogonal_vectors_is_zero() {
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 2.0]), 0.0);
    }

    #[test]
    fn cosine_with_a_zero_vector_is_zero_not_nan() {
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 2.0]), 0.0);
    }

    struct Panicking;

    impl Reranker for Panicking {
        fn model_id(&self) -> &str {
            "panicking"
        }
        fn score(&self, _query: &str, _documents: &[String]) -> Result<Vec<f32>, EmbedError> {
            panic!("tokenizer exploded")
        }
    }

    #[tokio::test]
    async fn a_panicking_reranker_is_an_inference_error_not_a_crash() {
        let err = rerank_blocking(Arc::new(Panicking), "q".into(), vec!["d".into()])
            .await
            .expect_err("must fail");
        match err {
            EmbedError::Inference(message) => {
                assert!(message.contains("tokenizer exploded"), "{message}")
            }
            other => panic!("expected an inference error, got {other:?}"),
        }
    }

    #[test]
    fn only_an_interrupted_task_is_transient() {
        assert!(EmbedError::Task("cancelled".into()).is_transient());
        assert!(!EmbedError::Inference("bad".into()).is_transient());
        assert!(!EmbedError::NoRuntimeConfigured.is_transient());
    }
}
