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
//! [`embed_blocking`] / [`encode_blocking`] / [`rerank_blocking`] (or their own
//! `spawn_blocking`) so that a batch never stalls the tokio workers. The first two wait for
//! the model's [`Admission`] before they take a blocking thread, so that a caller that stops
//! waiting never runs its inference.

mod admission;
mod batch;
mod cache;
mod error;
mod folder;
mod late;
mod local;
mod rerank;
mod runtime;

pub use admission::Admission;
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
    /// How many inferences the model runs at once, for [`embed_blocking`] to wait on before
    /// it takes a blocking thread. `None` (the default): no limit of its own to wait for.
    fn admission(&self) -> Option<&Admission> {
        None
    }
    /// The vectors of every one of `texts` when they are known without an inference (a
    /// [`CachingEmbedder`] remembers them), else `None` (the default). Cheap enough for an
    /// async worker thread.
    fn remembered(&self, _texts: &[String]) -> Option<Vec<Vec<f32>>> {
        None
    }
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

/// Runs [`LateEncoder::encode`] on tokio's blocking pool, once the encoder's [`Admission`]
/// lets it in (as many sessions as it has texts, at most all); errors as [`embed_blocking`].
/// Cancel-safe the same way.
pub async fn encode_blocking(
    encoder: Arc<dyn LateEncoder>,
    texts: Vec<String>,
) -> Result<Vec<deja_domain::recognition::TokenVectors>, EmbedError> {
    let permit = match encoder.admission() {
        Some(admission) => Some(admission.enter(texts.len()).await?),
        None => None,
    };
    let task = tokio::task::spawn_blocking(move || {
        let _inference = permit;
        encoder.encode(&texts)
    });
    join_blocking(task.await, "late-interaction encoder")
}

/// Runs [`Embedder::embed`] on tokio's blocking pool.
///
/// Texts the embedder remembers ([`Embedder::remembered`]) are answered at once. Otherwise
/// the caller first waits for the model's [`Admission`] (an async wait: dropping the future
/// gives up its place, and nothing runs for it), asks again whether the texts are remembered
/// (another caller may have embedded the same text meanwhile: 50 agents searching one alert
/// text cost one inference), and only then takes a blocking thread; the permit is held until
/// the inference ends, even when the caller stopped waiting for it.
///
/// A panic inside the embedder surfaces as [`EmbedError::Inference`] (retrying the same input
/// would panic again); a task cancelled by runtime shutdown as the transient
/// [`EmbedError::Task`].
pub async fn embed_blocking(
    embedder: Arc<dyn Embedder>,
    texts: Vec<String>,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    if let Some(vectors) = embedder.remembered(&texts) {
        return Ok(vectors);
    }
    let permit = match embedder.admission() {
        Some(admission) => {
            let permit = admission.enter(1).await?;
            if let Some(vectors) = embedder.remembered(&texts) {
                return Ok(vectors);
            }
            Some(permit)
        }
        None => None,
    };
    let task = tokio::task::spawn_blocking(move || {
        let _inference = permit;
        embedder.embed(&texts)
    });
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

    /// A one-session model (as [`LocalEmbedder`]) whose inference takes `busy`: counts the
    /// calls that reached it and the texts it embedded.
    struct OneSession {
        admission: Admission,
        model: std::sync::Mutex<()>,
        busy: std::time::Duration,
        calls: std::sync::atomic::AtomicUsize,
        texts: std::sync::Mutex<Vec<String>>,
    }

    impl OneSession {
        fn new(busy_ms: u64) -> OneSession {
            OneSession {
                admission: Admission::new(1),
                model: std::sync::Mutex::new(()),
                busy: std::time::Duration::from_millis(busy_ms),
                calls: Default::default(),
                texts: Default::default(),
            }
        }
    }

    impl Embedder for Arc<OneSession> {
        fn model_id(&self) -> &str {
            "one-session"
        }
        fn dimensions(&self) -> usize {
            1
        }
        fn admission(&self) -> Option<&Admission> {
            Some(&self.admission)
        }
        fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
            use std::sync::atomic::Ordering;
            self.calls.fetch_add(1, Ordering::SeqCst);
            let _session = self.model.lock().unwrap_or_else(|e| e.into_inner());
            std::thread::sleep(self.busy);
            self.texts
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(texts.iter().cloned());
            Ok(texts.iter().map(|t| vec![t.len() as f32]).collect())
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn callers_that_stop_waiting_for_a_busy_model_never_run_their_inference() {
        let model = Arc::new(OneSession::new(200));
        let shared: Arc<dyn Embedder> = Arc::new(model.clone());
        // Ten searches at once, each giving up after 50 ms, as a deadline does.
        let callers = (0..10).map(|k| {
            let shared = shared.clone();
            tokio::spawn(async move {
                let embedding = embed_blocking(shared, vec![format!("query {k}")]);
                tokio::time::timeout(std::time::Duration::from_millis(50), embedding).await
            })
        });
        for caller in futures_join(callers).await {
            assert!(caller.is_err(), "nobody waits 200 ms");
        }
        // Long enough for a backlog of ten to show (all of them reach the model at once
        // without an admission), then for the one admitted inference to end.
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let calls = model.calls.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(calls, 1, "only the admitted caller ran its inference");
        assert_eq!(model.admission.idle(), 1, "its permit came back");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn identical_texts_asked_at_once_are_embedded_once() {
        let model = Arc::new(OneSession::new(100));
        let cached: Arc<dyn Embedder> = Arc::new(CachingEmbedder::new(model.clone(), 16));
        let callers = (0..8).map(|_| {
            let cached = cached.clone();
            tokio::spawn(embed_blocking(cached, vec!["disk full on db-3".to_owned()]))
        });
        for caller in futures_join(callers).await {
            assert_eq!(caller.expect("embedded"), vec![vec![17.0]]);
        }
        assert_eq!(
            *model.texts.lock().unwrap(),
            vec!["disk full on db-3".to_owned()],
            "one inference for eight callers"
        );
    }

    /// Every task's output, in order (a panicked task fails the test).
    async fn futures_join<T: Send + 'static>(
        tasks: impl Iterator<Item = tokio::task::JoinHandle<T>>,
    ) -> Vec<T> {
        let mut out = Vec::new();
        for task in tasks.collect::<Vec<_>>() {
            out.push(task.await.expect("the task ran"));
        }
        out
    }

    #[test]
    fn only_an_interrupted_task_is_transient() {
        assert!(EmbedError::Task("cancelled".into()).is_transient());
        assert!(!EmbedError::Inference("bad".into()).is_transient());
        assert!(!EmbedError::NoRuntimeConfigured.is_transient());
    }
}
