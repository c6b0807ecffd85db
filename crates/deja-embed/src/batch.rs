//! [`BatchingEmbedder`]: one model call for the texts of many concurrent callers.
//!
//! The worker embeds one episode text per delivery. Run alone, each text pays the fixed cost
//! of an ONNX Runtime call (tokenizer setup, session run, thread-pool wake-up); where a batch
//! costs less per text than single texts, concurrent callers can share one call. They hand
//! their texts to one background collector, which waits a short window after the first
//! request (or until `max_batch` texts are waiting), runs one [`Embedder::embed`] on the
//! blocking pool and hands each caller its own vectors.
//!
//! Whether it pays depends on the hardware and the texts: every text of a batch is padded to
//! the longest one. On the 2-core reference machine a batch of episode texts costs as much CPU
//! per text as single texts, so the worker's default is off (docs/BENCHMARKS.md, "Ingest with
//! micro-batched embeddings"); `embed_bench` measures it on other machines and texts.
//!
//! The collector runs one batch at a time: the local model holds a lock around its session
//! anyway (one inference already uses every core), and requests that arrive during an
//! inference simply form the next batch, so batches grow with load without a longer window.
//!
//! Guarantees: each caller gets exactly its own vectors, in the order of its texts; an error
//! of a batch reaches every caller in it; a panic in the model becomes
//! [`EmbedError::Inference`], never a hang; a caller that gives up (its future dropped) is
//! skipped if its batch has not started; the collector stops when every handle is dropped.

use crate::{EmbedError, Embedder};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// Texts per model call made by a [`BatchingEmbedder`] (a histogram: its `_sum / _count` is
/// the mean batch size).
pub const BATCH_TEXTS: &str = "deja_embed_batch_texts";
/// Time from a batch's first request to the start of its model call: what batching adds to a
/// caller's latency at most.
pub const BATCH_WAIT: &str = "deja_embed_batch_wait_seconds";

/// Describes this crate's batching metrics (call once from the process that exposes them).
pub fn describe_batch_metrics() {
    metrics::describe_histogram!(
        BATCH_TEXTS,
        "texts per embedding model call made by the micro-batcher"
    );
    metrics::describe_histogram!(
        BATCH_WAIT,
        metrics::Unit::Seconds,
        "time a micro-batch waited for more texts before its model call"
    );
}

/// How a [`BatchingEmbedder`] groups requests (`embedding.batch_window_ms`,
/// `embedding.max_batch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSettings {
    /// How long a batch waits for more texts after its first request. Zero turns batching
    /// off: every call goes to the model alone, as before batching existed.
    pub window: Duration,
    /// Texts that start a batch at once, without waiting for the window to end. One turns
    /// batching off. A single request with more texts is never split.
    pub max_batch: usize,
}

impl BatchSettings {
    /// Whether requests are grouped at all.
    pub fn is_batching(&self) -> bool {
        !self.window.is_zero() && self.max_batch > 1
    }
}

/// One caller's texts and where its vectors go.
struct Request {
    texts: Vec<String>,
    reply: oneshot::Sender<Result<Vec<Vec<f32>>, EmbedError>>,
}

/// A cloneable async front of an [`Embedder`] that micro-batches concurrent calls (see the
/// module documentation). With batching off it runs each call alone on the blocking pool,
/// exactly like [`crate::embed_blocking`].
#[derive(Clone)]
pub struct BatchingEmbedder {
    inner: Arc<dyn Embedder>,
    /// `None` when batching is off.
    requests: Option<mpsc::Sender<Request>>,
}

impl std::fmt::Debug for BatchingEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchingEmbedder")
            .field("model_id", &self.inner.model_id())
            .field("batching", &self.requests.is_some())
            .finish_non_exhaustive()
    }
}

impl BatchingEmbedder {
    /// Starts the collector task when `settings` batch at all. Must be called inside a tokio
    /// runtime (the worker builds it while starting); the task ends when the last clone of the
    /// returned handle is dropped.
    pub fn new(inner: Arc<dyn Embedder>, settings: BatchSettings) -> BatchingEmbedder {
        if !settings.is_batching() {
            return BatchingEmbedder {
                inner,
                requests: None,
            };
        }
        // Bounded so that a stalled model pushes back on callers instead of queueing without
        // limit; a few batches' worth is plenty since callers are bounded by the worker's
        // concurrency anyway.
        let (sender, receiver) = mpsc::channel(settings.max_batch.saturating_mul(4).max(16));
        tokio::spawn(collect(inner.clone(), settings, receiver));
        BatchingEmbedder {
            inner,
            requests: Some(sender),
        }
    }

    /// The embedder the batches run on.
    pub fn inner(&self) -> &Arc<dyn Embedder> {
        &self.inner
    }

    pub fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    pub fn dimensions(&self) -> usize {
        self.inner.dimensions()
    }

    /// One vector per text, in order, computed in a batch with other callers' texts.
    ///
    /// Errors as [`crate::embed_blocking`]: a panic in the model is
    /// [`EmbedError::Inference`]; a collector that is gone (runtime shutting down) is the
    /// transient [`EmbedError::Task`].
    pub async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, EmbedError> {
        let Some(requests) = &self.requests else {
            return crate::embed_blocking(self.inner.clone(), texts).await;
        };
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let (reply, answer) = oneshot::channel();
        requests
            .send(Request { texts, reply })
            .await
            .map_err(|_| collector_gone())?;
        answer.await.map_err(|_| collector_gone())?
    }
}

fn collector_gone() -> EmbedError {
    EmbedError::Task("the embedding batcher stopped before answering".to_owned())
}

/// The background loop: gather a batch, run it, answer, until every sender is dropped.
async fn collect(
    inner: Arc<dyn Embedder>,
    settings: BatchSettings,
    mut receiver: mpsc::Receiver<Request>,
) {
    // A request that did not fit in the previous batch starts the next one.
    let mut carried: Option<Request> = None;
    loop {
        let first = match carried.take() {
            Some(request) => request,
            None => match receiver.recv().await {
                Some(request) => request,
                None => return,
            },
        };
        let started = Instant::now();
        let deadline = started + settings.window;
        let mut texts = first.texts.len();
        let mut batch = vec![first];
        while texts < settings.max_batch {
            match tokio::time::timeout_at(deadline, receiver.recv()).await {
                Ok(Some(request)) if texts + request.texts.len() > settings.max_batch => {
                    carried = Some(request);
                    break;
                }
                Ok(Some(request)) => {
                    texts += request.texts.len();
                    batch.push(request);
                }
                // All handles dropped: answer this batch; the next `recv` ends the loop.
                Ok(None) => break,
                // The window is over.
                Err(_) => break,
            }
        }
        metrics::histogram!(BATCH_WAIT).record(started.elapsed().as_secs_f64());
        run_batch(&inner, batch).await;
    }
}

/// Runs one model call for `batch` and answers each caller with its share.
async fn run_batch(inner: &Arc<dyn Embedder>, batch: Vec<Request>) {
    // Callers that gave up while the batch was gathering cost no inference.
    let batch: Vec<Request> = batch
        .into_iter()
        .filter(|request| !request.reply.is_closed())
        .collect();
    if batch.is_empty() {
        return;
    }
    let mut sizes = Vec::with_capacity(batch.len());
    let mut replies = Vec::with_capacity(batch.len());
    let mut texts = Vec::new();
    for request in batch {
        sizes.push(request.texts.len());
        texts.extend(request.texts);
        replies.push(request.reply);
    }
    let total = texts.len();
    metrics::histogram!(BATCH_TEXTS).record(total as f64);

    let result = crate::embed_blocking(inner.clone(), texts)
        .await
        .and_then(|vectors| {
            // The local model checks this itself; another implementation that miscounts must
            // not hand one caller another caller's vector.
            if vectors.len() == total {
                Ok(vectors)
            } else {
                Err(EmbedError::Inference(format!(
                    "model returned {} vectors for a batch of {total} texts",
                    vectors.len()
                )))
            }
        });
    match result {
        Ok(vectors) => {
            let mut vectors = vectors.into_iter();
            for (reply, size) in replies.into_iter().zip(sizes) {
                // A caller that gave up meanwhile is fine: its vectors are dropped.
                let _ = reply.send(Ok(vectors.by_ref().take(size).collect()));
            }
        }
        Err(error) => {
            for reply in replies {
                let _ = reply.send(Err(error.duplicate()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;

    /// Embeds a text as `[len, first byte]` and records the size of every call.
    #[derive(Default)]
    struct Counting {
        calls: Mutex<Vec<usize>>,
        fail: Option<&'static str>,
        panic: AtomicBool,
    }

    impl Counting {
        fn calls(&self) -> Vec<usize> {
            self.calls.lock().unwrap_or_else(|p| p.into_inner()).clone()
        }
    }

    impl Embedder for Counting {
        fn model_id(&self) -> &str {
            "counting"
        }
        fn dimensions(&self) -> usize {
            2
        }
        fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
            self.calls
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(texts.len());
            if self.panic.load(Ordering::SeqCst) {
                panic!("onnx session exploded");
            }
            if let Some(message) = self.fail {
                return Err(EmbedError::Inference(message.to_owned()));
            }
            Ok(texts.iter().map(|t| vector_of(t)).collect())
        }
    }

    fn vector_of(text: &str) -> Vec<f32> {
        vec![text.len() as f32, f32::from(text.as_bytes()[0])]
    }

    fn batching(inner: Arc<Counting>, window_ms: u64, max_batch: usize) -> BatchingEmbedder {
        BatchingEmbedder::new(
            inner,
            BatchSettings {
                window: Duration::from_millis(window_ms),
                max_batch,
            },
        )
    }

    /// Distinct texts: caller `i` sends `i` repeated `i + 1` times, so a swapped vector shows.
    fn text(i: usize) -> String {
        char::from(b'a' + i as u8).to_string().repeat(i + 1)
    }

    /// Runs `callers` concurrent single-text embeds and returns each caller's result.
    async fn concurrent(
        embedder: &BatchingEmbedder,
        callers: usize,
    ) -> Vec<Result<Vec<Vec<f32>>, EmbedError>> {
        let tasks: Vec<_> = (0..callers)
            .map(|i| {
                let embedder = embedder.clone();
                tokio::spawn(async move { embedder.embed(vec![text(i)]).await })
            })
            .collect();
        let mut results = Vec::new();
        for task in tasks {
            results.push(task.await.expect("caller task"));
        }
        results
    }

    /// Caller `i` of [`concurrent`] got exactly the vector of its own text.
    fn assert_each_got_its_own_vector(results: Vec<Result<Vec<Vec<f32>>, EmbedError>>) {
        for (i, result) in results.into_iter().enumerate() {
            assert_eq!(result.expect("embedded"), vec![vector_of(&text(i))]);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_callers_inside_the_window_share_one_model_call_and_get_their_own_vectors() {
        let inner = Arc::new(Counting::default());
        let embedder = batching(inner.clone(), 5, 32);
        let results = concurrent(&embedder, 8).await;
        assert_eq!(inner.calls(), vec![8]);
        assert_each_got_its_own_vector(results);
    }

    #[tokio::test(start_paused = true)]
    async fn a_caller_with_several_texts_gets_them_back_in_order() {
        let inner = Arc::new(Counting::default());
        let embedder = batching(inner.clone(), 5, 32);
        let (one, many) = tokio::join!(
            embedder.embed(vec![text(0)]),
            embedder.embed(vec![text(3), text(1), text(2)])
        );
        assert_eq!(inner.calls(), vec![4]);
        assert_eq!(one.expect("embedded"), vec![vector_of(&text(0))]);
        assert_eq!(
            many.expect("embedded"),
            vec![
                vector_of(&text(3)),
                vector_of(&text(1)),
                vector_of(&text(2))
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn max_batch_splits_a_burst_into_several_model_calls() {
        let inner = Arc::new(Counting::default());
        let embedder = batching(inner.clone(), 5, 4);
        let results = concurrent(&embedder, 10).await;
        assert_eq!(inner.calls(), vec![4, 4, 2]);
        assert_each_got_its_own_vector(results);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_that_would_overflow_the_batch_starts_the_next_one() {
        let inner = Arc::new(Counting::default());
        let embedder = batching(inner.clone(), 5, 4);
        let (a, b) = tokio::join!(
            embedder.embed(vec![text(0), text(1), text(2)]),
            embedder.embed(vec![text(3), text(4)])
        );
        assert_eq!(inner.calls(), vec![3, 2]);
        assert_eq!(a.expect("embedded").len(), 3);
        assert_eq!(
            b.expect("embedded"),
            vec![vector_of(&text(3)), vector_of(&text(4))]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn callers_after_the_window_go_into_the_next_batch() {
        let inner = Arc::new(Counting::default());
        let embedder = batching(inner.clone(), 5, 32);
        let late = {
            let embedder = embedder.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                embedder.embed(vec![text(1)]).await
            })
        };
        embedder.embed(vec![text(0)]).await.expect("embedded");
        late.await.expect("late caller").expect("embedded");
        assert_eq!(inner.calls(), vec![1, 1]);
    }

    #[tokio::test(start_paused = true)]
    async fn an_error_reaches_every_caller_of_the_batch() {
        let inner = Arc::new(Counting {
            fail: Some("input too strange"),
            ..Counting::default()
        });
        let embedder = batching(inner.clone(), 5, 32);
        let results = concurrent(&embedder, 5).await;
        assert_eq!(inner.calls(), vec![5]);
        for result in results {
            match result {
                Err(EmbedError::Inference(message)) => {
                    assert_eq!(message, "input too strange")
                }
                other => panic!("expected the batch's inference error, got {other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn a_panicking_model_is_an_inference_error_for_every_caller_not_a_hang() {
        let inner = Arc::new(Counting::default());
        inner.panic.store(true, Ordering::SeqCst);
        let embedder = batching(inner.clone(), 5, 32);
        let results = tokio::time::timeout(Duration::from_secs(10), concurrent(&embedder, 3))
            .await
            .expect("callers must be answered, not left waiting");
        for result in results {
            match result {
                Err(EmbedError::Inference(message)) => {
                    assert!(message.contains("onnx session exploded"), "{message}")
                }
                other => panic!("expected an inference error, got {other:?}"),
            }
        }
        // The collector survives the panic: the next batch works.
        inner.panic.store(false, Ordering::SeqCst);
        let vectors = embedder.embed(vec![text(2)]).await.expect("embedded");
        assert_eq!(vectors, vec![vector_of(&text(2))]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_caller_that_gives_up_does_not_disturb_the_others() {
        let inner = Arc::new(Counting::default());
        let embedder = batching(inner.clone(), 5, 32);
        // Gives up after 1 ms, before the 5 ms window ends.
        let impatient =
            tokio::time::timeout(Duration::from_millis(1), embedder.embed(vec![text(0)]));
        let (gave_up, patient) = tokio::join!(impatient, embedder.embed(vec![text(1)]));
        assert!(gave_up.is_err(), "the impatient caller timed out");
        assert_eq!(patient.expect("embedded"), vec![vector_of(&text(1))]);
        // The dropped caller's text was not embedded.
        assert_eq!(inner.calls(), vec![1]);
    }

    #[tokio::test(start_paused = true)]
    async fn the_collector_stops_when_every_handle_is_dropped() {
        let inner = Arc::new(Counting::default());
        let embedder = batching(inner.clone(), 5, 32);
        embedder.embed(vec![text(0)]).await.expect("embedded");
        drop(embedder);
        // The collector held the only other reference to the model; it lets go once it ends.
        for _ in 0..100 {
            if Arc::strong_count(&inner) == 1 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        panic!("the collector still holds the embedder after every handle was dropped");
    }

    #[tokio::test]
    async fn window_zero_or_max_batch_one_calls_the_model_once_per_caller() {
        for (window_ms, max_batch) in [(0, 32), (5, 1)] {
            let inner = Arc::new(Counting::default());
            let embedder = batching(inner.clone(), window_ms, max_batch);
            let results = concurrent(&embedder, 4).await;
            assert_eq!(
                inner.calls(),
                vec![1, 1, 1, 1],
                "{window_ms} ms, {max_batch}"
            );
            for (i, result) in results.into_iter().enumerate() {
                assert_eq!(result.expect("embedded"), vec![vector_of(&text(i))]);
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn no_texts_need_no_model_call() {
        let inner = Arc::new(Counting::default());
        let embedder = batching(inner.clone(), 5, 32);
        assert!(embedder.embed(Vec::new()).await.expect("empty").is_empty());
        assert!(inner.calls().is_empty());
    }
}
