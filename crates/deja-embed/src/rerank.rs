//! [`LocalReranker`]: a cross-encoder (ms-marco-MiniLM-L-12-v2, int8 ONNX) run in-process by
//! fastembed's `TextRerank`.
//!
//! A cross-encoder reads the query and one document *together* and returns one relevance
//! logit for the pair. It is far more precise than comparing two embeddings, and far more
//! expensive: one model run per pair, so it only ever sees a short list of candidates.

use crate::folder::{share_out, ModelFolder};
use crate::{runtime, EmbedError, Reranker};
use deja_config::{EmbeddingSettings, RerankerSettings};
use fastembed::{
    RerankInitOptionsUserDefined, RerankResult, TextRerank, UserDefinedRerankingModel,
};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

/// Sessions [`LocalReranker::load`] opens at most, whatever the core count: beyond a few,
/// each search's pairs are too few to share out.
pub const MAX_SESSIONS: usize = 4;

/// The pair scored once at load to check that the model really is a cross-encoder.
const PROBE: (&str, &str) = (
    "redis evicted keys, sessions lost",
    "maxmemory policy evicted session keys",
);

/// Where the reranker and ONNX Runtime are, and how many tokens a pair may have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RerankerPaths {
    /// Folder with `model.onnx`, `tokenizer.json`, `config.json`, `special_tokens_map.json`,
    /// `tokenizer_config.json`. A relative path is taken from the current directory.
    pub model_dir: PathBuf,
    /// The ONNX Runtime shared library (≥ 1.24). Empty = `ORT_DYLIB_PATH`. A relative path is
    /// taken from the current directory.
    pub ort_dylib_path: PathBuf,
    /// Tokens per (query, document) pair, special tokens included. Longer pairs are truncated
    /// by the tokenizer, the longer of the two texts first (Hugging Face's `longest_first`);
    /// values above the model's 512 positions are lowered to 512.
    pub max_length: usize,
}

impl RerankerPaths {
    /// The reranker's paths from the configuration: `[reranker]` for the model, and the
    /// embedder's ONNX Runtime (`embedding.ort_dylib_path`, else `ORT_DYLIB_PATH` at load), since
    /// a process can only load one.
    pub fn from_settings(reranker: &RerankerSettings, embedding: &EmbeddingSettings) -> Self {
        RerankerPaths {
            model_dir: reranker.model_dir.clone(),
            ort_dylib_path: embedding.ort_dylib_path.clone(),
            max_length: reranker.max_length,
        }
    }

    /// Absolute paths, `ORT_DYLIB_PATH` applied, every file checked, so that a missing file is
    /// reported by name before anything is loaded.
    fn resolve(&self) -> Result<ModelFolder, EmbedError> {
        ModelFolder::resolve(&self.model_dir, &self.ort_dylib_path, |what, path| {
            EmbedError::MissingRerankerFile { what, path }
        })
    }
}

/// A cross-encoder run locally: ms-marco-MiniLM-L-12-v2 int8 by default (any BERT-style
/// sequence classifier ONNX export with one `logits` output works).
///
/// Scores are the model's raw logits (fastembed's `TextRerank` applies no sigmoid): higher is
/// more relevant, unbounded, comparable across queries only roughly. ms-marco models put
/// relevant pairs well above 0 and unrelated ones well below.
///
/// Each pair is run on its own by default, so that a document's score never depends on the
/// other documents of the call (padding a batch shifts the int8 model's scores slightly);
/// batching was slower on 2 cores (`docs/EVALUATION.md`).
///
/// One single-threaded ONNX session per core, each scoring a share of the pairs at once:
/// a pair of ~150 tokens is too small a run for intra-op threads to pay, and two sessions
/// scored 8 pairs ~18% faster than one two-threaded session (docs/EVALUATION.md). Each
/// session holds its own copy of the model (~35 MB).
pub struct LocalReranker {
    model_id: String,
    model_dir: PathBuf,
    max_length: usize,
    pairs_per_run: usize,
    /// `TextRerank::rerank` takes `&mut self`, so each session is behind its own lock; a call
    /// scores its documents in contiguous shares, one per session.
    sessions: Vec<Mutex<TextRerank>>,
}

impl std::fmt::Debug for LocalReranker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalReranker")
            .field("model_id", &self.model_id)
            .field("model_dir", &self.model_dir)
            .field("max_length", &self.max_length)
            .field("pairs_per_run", &self.pairs_per_run)
            .finish_non_exhaustive()
    }
}

impl LocalReranker {
    /// Loads ONNX Runtime (once per process, shared with the embedder), the model and its
    /// tokenizer, then scores a probe pair to check that the model answers with finite
    /// logits. The model id is the folder's name until [`LocalReranker::with_model_id`].
    ///
    /// Blocking and slow (about a second per session): call it at start-up, or from
    /// `spawn_blocking`. One session per available core, at most [`MAX_SESSIONS`].
    pub fn load(paths: &RerankerPaths) -> Result<Self, EmbedError> {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Self::load_sessions(paths, cores.min(MAX_SESSIONS))
    }

    /// [`LocalReranker::load`] with `sessions` single-threaded sessions (at least 1).
    pub fn load_sessions(paths: &RerankerPaths, sessions: usize) -> Result<Self, EmbedError> {
        if paths.max_length == 0 {
            return Err(EmbedError::InvalidSetting {
                key: "reranker.max_length",
                problem: "must be at least 1",
            });
        }
        let started = Instant::now();
        let folder = paths.resolve()?;
        let environment = runtime::environment(&folder.ort_dylib)?;
        let model = UserDefinedRerankingModel::new(folder.model()?, folder.tokenizer_files()?);
        let model_dir = folder.dir;
        let model_error = |reason: String| EmbedError::RerankerModel {
            dir: model_dir.clone(),
            reason,
        };
        let sessions = (0..sessions.max(1))
            .map(|_| {
                let options = RerankInitOptionsUserDefined::new()
                    .with_environment(environment.clone())
                    .with_max_length(paths.max_length)
                    .with_intra_threads(1);
                TextRerank::try_new_from_user_defined(model.clone(), options)
                    .map(Mutex::new)
                    .map_err(|e| model_error(e.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;

        let model_id = model_dir
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_else(|| "reranker".to_string());
        let reranker = LocalReranker {
            model_id,
            model_dir: model_dir.clone(),
            max_length: paths.max_length,
            pairs_per_run: 1,
            sessions,
        };
        // A model without a `logits` output (an embedding model put in the wrong folder, say)
        // fails here rather than on the first search.
        let probe = reranker
            .score(PROBE.0, &[PROBE.1.to_string()])
            .map_err(|e| model_error(format!("probe pair failed: {e}")))?;
        if probe.len() != 1 {
            return Err(model_error(format!(
                "probe pair gave {} scores instead of 1",
                probe.len()
            )));
        }
        tracing::info!(
            model_id = %reranker.model_id,
            model_dir = %reranker.model_dir.display(),
            max_length = reranker.max_length,
            sessions = reranker.sessions.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "reranker model loaded"
        );
        Ok(reranker)
    }

    /// [`LocalReranker::load`] with the paths of the configuration (see
    /// [`RerankerPaths::from_settings`]) and `reranker.model_id` as the model id.
    pub fn from_settings(
        reranker: &RerankerSettings,
        embedding: &EmbeddingSettings,
    ) -> Result<Self, EmbedError> {
        Ok(
            Self::load(&RerankerPaths::from_settings(reranker, embedding))?
                .with_model_id(reranker.model_id.clone()),
        )
    }

    /// Names the model in logs and evaluation output (e.g. `reranker.model_id`).
    pub fn with_model_id(mut self, model_id: impl Into<String>) -> Self {
        self.model_id = model_id.into();
        self
    }

    /// How many pairs go through the model in one run (default 1, at least 1). More than one
    /// pads the shorter pairs, which shifts the int8 model's scores slightly, so that a
    /// document's score then depends on its neighbours; it exists for benchmarks.
    pub fn with_pairs_per_run(mut self, pairs: usize) -> Self {
        self.pairs_per_run = pairs.max(1);
        self
    }

    /// How many sessions score a call's pairs in parallel.
    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }

    /// Scores `documents` on one session; `offset` is the first one's index in the call.
    fn score_share(
        &self,
        session: &Mutex<TextRerank>,
        query: &str,
        documents: &[&str],
        offset: usize,
    ) -> Result<Vec<RerankResult>, EmbedError> {
        // The session and tokenizer keep no per-call state, so a panic in an earlier call
        // cannot have left them half updated: a poisoned lock is safe to reuse.
        let mut model = session.lock().unwrap_or_else(PoisonError::into_inner);
        let mut results = model
            .rerank(query, documents, false, Some(self.pairs_per_run))
            .map_err(|e| EmbedError::Inference(format!("reranker: {e}")))?;
        for result in &mut results {
            result.index += offset;
        }
        Ok(results)
    }

    /// Tokens per pair (after lowering to the model's 512 positions, the tokenizer truncates).
    pub fn max_length(&self) -> usize {
        self.max_length
    }

    /// The model folder it was loaded from, absolute.
    pub fn model_dir(&self) -> &Path {
        &self.model_dir
    }
}

impl Reranker for LocalReranker {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn score(&self, query: &str, documents: &[String]) -> Result<Vec<f32>, EmbedError> {
        if documents.is_empty() {
            return Ok(Vec::new());
        }
        let documents: Vec<&str> = documents.iter().map(String::as_str).collect();
        let results: Vec<RerankResult> = share_out(
            self.sessions.len(),
            &documents,
            "reranker",
            |part, share, offset| self.score_share(&self.sessions[part], query, share, offset),
        )?;
        // fastembed sorts by score; put the scores back in input order, checking that every
        // document got exactly one.
        let mut scores: Vec<Option<f32>> = vec![None; documents.len()];
        for result in results {
            match scores.get_mut(result.index) {
                Some(slot @ None) => *slot = Some(result.score),
                _ => {
                    return Err(EmbedError::Inference(format!(
                        "reranker returned a score for document {} out of {}, or twice",
                        result.index,
                        documents.len()
                    )))
                }
            }
        }
        scores
            .into_iter()
            .enumerate()
            .map(|(index, score)| match score {
                Some(score) if score.is_finite() => Ok(score),
                Some(score) => Err(EmbedError::Inference(format!(
                    "reranker scored document {index} as {score}"
                ))),
                None => Err(EmbedError::Inference(format!(
                    "reranker returned no score for document {index}"
                ))),
            })
            .collect()
    }
}
