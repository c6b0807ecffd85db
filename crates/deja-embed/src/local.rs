//! [`LocalEmbedder`]: a sentence-transformer ONNX model run in-process by fastembed.

use crate::folder::ModelFolder;
use crate::{runtime, Admission, EmbedError, Embedder};
use deja_config::EmbeddingSettings;
use fastembed::{InitOptionsUserDefined, Pooling, TextEmbedding, UserDefinedEmbeddingModel};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

/// The text embedded once at load to learn the model's real output size.
const PROBE_TEXT: &str = "redis evicted keys, payments pods crashloop";

/// Where the model and ONNX Runtime are, after resolving relative paths and `ORT_DYLIB_PATH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelPaths {
    pub model_dir: PathBuf,
    pub ort_dylib: PathBuf,
}

impl ModelPaths {
    /// Resolves the configured paths and checks that every file is there, so that a missing
    /// file is reported by name before anything is loaded.
    ///
    /// Relative paths are taken from the current directory (the documented layout is relative
    /// to the repository root). `ORT_DYLIB_PATH` is used only when `ort_dylib_path` is empty.
    pub fn resolve(settings: &EmbeddingSettings) -> Result<ModelPaths, EmbedError> {
        let folder = ModelFolder::resolve(
            &settings.model_dir,
            &settings.ort_dylib_path,
            |what, path| EmbedError::MissingFile { what, path },
        )?;
        Ok(ModelPaths {
            model_dir: folder.dir,
            ort_dylib: folder.ort_dylib,
        })
    }

    fn folder(&self) -> ModelFolder {
        ModelFolder {
            dir: self.model_dir.clone(),
            ort_dylib: self.ort_dylib.clone(),
        }
    }
}

/// The ONNX Runtime library to load: the configured path, or `ORT_DYLIB_PATH` when none is
/// configured; absolute either way. Shared by the embedder and the reranker.
pub(crate) fn ort_dylib_path(configured: &Path) -> Result<PathBuf, EmbedError> {
    if !configured.as_os_str().is_empty() {
        return Ok(absolute(configured));
    }
    match std::env::var_os("ORT_DYLIB_PATH") {
        Some(path) if !path.is_empty() => Ok(absolute(Path::new(&path))),
        _ => Err(EmbedError::NoRuntimeConfigured),
    }
}

/// A missing library is reported by name before anything tries to load it.
pub(crate) fn check_ort_dylib(path: &Path) -> Result<(), EmbedError> {
    if path.is_file() {
        Ok(())
    } else {
        Err(EmbedError::MissingFile {
            what: "ONNX Runtime library",
            path: path.to_path_buf(),
        })
    }
}

/// `ort` resolves a relative library path against the *executable's* folder, which is never
/// what an operator means; resolve everything against the current directory instead.
pub(crate) fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        return path.to_path_buf();
    }
    match std::env::current_dir() {
        Ok(cwd) => cwd.join(path),
        // No usable current directory: keep the path as given; the existence check that
        // follows will name it.
        Err(_) => path.to_path_buf(),
    }
}

/// all-MiniLM-L6-v2 (or any BERT-style sentence-transformer ONNX export with mean pooling) run
/// locally. Vectors are L2-normalised, so a dot product is the cosine similarity.
pub struct LocalEmbedder {
    model_id: String,
    dimensions: usize,
    batch_size: usize,
    paths: ModelPaths,
    /// fastembed's `embed` takes `&mut self`. One inference at a time is no loss: ONNX Runtime
    /// already spreads a single batch over every core.
    model: Mutex<TextEmbedding>,
    /// One async caller at a time ([`crate::embed_blocking`]), matching the one session.
    admission: Admission,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("model_id", &self.model_id)
            .field("dimensions", &self.dimensions)
            .field("batch_size", &self.batch_size)
            .field("paths", &self.paths)
            .finish_non_exhaustive()
    }
}

impl LocalEmbedder {
    /// Loads ONNX Runtime (once per process), the model and its tokenizer, then embeds a probe
    /// text to check that the model really produces `settings.dimensions` values.
    ///
    /// Blocking and slow (a fraction of a second to seconds): call it at start-up, or from
    /// `spawn_blocking`.
    pub fn load(settings: &EmbeddingSettings) -> Result<LocalEmbedder, EmbedError> {
        if settings.max_length == 0 {
            return Err(EmbedError::InvalidSetting {
                key: "embedding.max_length",
                problem: "must be at least 1",
            });
        }
        if settings.batch_size == 0 {
            return Err(EmbedError::InvalidSetting {
                key: "embedding.batch_size",
                problem: "must be at least 1",
            });
        }
        let started = Instant::now();
        let paths = ModelPaths::resolve(settings)?;
        let environment = runtime::environment(&paths.ort_dylib)?;

        let folder = paths.folder();
        let model = UserDefinedEmbeddingModel::new(folder.model()?, folder.tokenizer_files()?)
            // fastembed defaults to CLS pooling; sentence-transformers MiniLM was trained with
            // mean pooling, and CLS vectors of it rank noticeably worse.
            .with_pooling(Pooling::Mean);
        let mut options = InitOptionsUserDefined::new()
            .with_environment(environment)
            .with_max_length(settings.max_length);
        if settings.intra_threads > 0 {
            options = options.with_intra_threads(settings.intra_threads);
        }
        let model = TextEmbedding::try_new_from_user_defined(model, options).map_err(|e| {
            EmbedError::Model {
                dir: paths.model_dir.clone(),
                reason: e.to_string(),
            }
        })?;

        let embedder = LocalEmbedder {
            model_id: settings.model_id.clone(),
            dimensions: settings.dimensions,
            batch_size: settings.batch_size,
            paths,
            model: Mutex::new(model),
            admission: Admission::new(1),
        };
        let actual = embedder
            .run(&[PROBE_TEXT.to_string()])?
            .first()
            .map_or(0, Vec::len);
        if actual != settings.dimensions {
            return Err(EmbedError::DimensionMismatch {
                model_id: settings.model_id.clone(),
                expected: settings.dimensions,
                actual,
            });
        }
        tracing::info!(
            model_id = %embedder.model_id,
            model_dir = %embedder.paths.model_dir.display(),
            dimensions = embedder.dimensions,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "embedding model loaded"
        );
        Ok(embedder)
    }

    /// Where the model and runtime were loaded from.
    pub fn paths(&self) -> &ModelPaths {
        &self.paths
    }

    /// The model's raw output, unchecked.
    fn run(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        // The session and tokenizer keep no per-call state, so a panic in an earlier call
        // cannot have left them half updated: a poisoned lock is safe to reuse.
        let mut model = self.model.lock().unwrap_or_else(PoisonError::into_inner);
        model
            .embed(texts, Some(self.batch_size))
            .map_err(|e| EmbedError::Inference(e.to_string()))
    }
}

impl Embedder for LocalEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dimensions(&self) -> usize {
        self.dimensions
    }

    fn admission(&self) -> Option<&Admission> {
        Some(&self.admission)
    }

    fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let vectors = self.run(texts)?;
        // Guard the invariants callers store and index on; a violation means a broken model
        // file, and a bad vector written to the graph would poison every later search.
        if vectors.len() != texts.len() {
            return Err(EmbedError::Inference(format!(
                "model returned {} vectors for {} texts",
                vectors.len(),
                texts.len()
            )));
        }
        if let Some(bad) = vectors
            .iter()
            .find(|v| v.len() != self.dimensions || !v.iter().all(|x| x.is_finite()))
        {
            return Err(EmbedError::Inference(format!(
                "model returned a vector of {} values (expected {}) or with non-finite values",
                bad.len(),
                self.dimensions
            )));
        }
        Ok(vectors)
    }
}
