//! Local embeddings with fastembed and a dynamically loaded ONNX Runtime, offline.
//!
//! [`Embedder`] is the narrow trait the rest of deja depends on; [`LocalEmbedder`] is its one
//! implementation: all-MiniLM-L6-v2 (int8 ONNX), mean pooling, L2-normalised 384-dimension
//! vectors. Nothing is downloaded at build or run time: the model folder and the ONNX Runtime
//! library are fetched beforehand by `deploy/embeddings.sh` (see `docs/embeddings.md`).
//!
//! [`CachingEmbedder`] wraps any embedder with a bounded LRU of vectors: the API puts it in
//! front of the model so that a repeated query costs no inference.
//!
//! Embedding is CPU-bound and synchronous. Async callers go through [`embed_blocking`] (or
//! their own `spawn_blocking`) so that a batch never stalls the tokio workers.

mod cache;
mod error;
mod local;
mod runtime;

pub use cache::{CacheStats, CachingEmbedder, CACHE_LOOKUPS};
pub use error::{EmbedError, FIX_HINT};
pub use local::{LocalEmbedder, ModelPaths};

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

/// Runs [`Embedder::embed`] on tokio's blocking pool.
///
/// A panic inside the embedder surfaces as [`EmbedError::Inference`] (retrying the same input
/// would panic again); a task cancelled by runtime shutdown as the transient
/// [`EmbedError::Task`].
pub async fn embed_blocking(
    embedder: Arc<dyn Embedder>,
    texts: Vec<String>,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    match tokio::task::spawn_blocking(move || embedder.embed(&texts)).await {
        Ok(result) => result,
        Err(join) if join.is_panic() => {
            let payload = join.into_panic();
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            Err(EmbedError::Inference(format!(
                "embedder panicked: {message}"
            )))
        }
        Err(join) => Err(EmbedError::Task(join.to_string())),
    }
}

/// Cosine similarity of two vectors of equal length (0 when either is all zeros). For the
/// L2-normalised output of an [`Embedder`] this equals the dot product.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let (mut dot, mut na, mut nb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    dot / (na.sqrt() * nb.sqrt())
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

    #[test]
    fn only_an_interrupted_task_is_transient() {
        assert!(EmbedError::Task("cancelled".into()).is_transient());
        assert!(!EmbedError::Inference("bad".into()).is_transient());
        assert!(!EmbedError::NoRuntimeConfigured.is_transient());
    }
}
