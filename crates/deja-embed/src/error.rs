//! The one error type of this crate.

use std::path::PathBuf;

/// What to tell an operator whenever a local asset is missing or unusable. Kept in one place so
/// that every message points at the same fix. The settings, not `ORT_DYLIB_PATH`: that variable
/// is read only when `embedding.ort_dylib_path` is empty, and its default is not.
pub const FIX_HINT: &str = "run deploy/embeddings.sh (or set embedding.model_dir / \
     embedding.ort_dylib_path, i.e. DEJA__EMBEDDING__MODEL_DIR / DEJA__EMBEDDING__ORT_DYLIB_PATH)";

/// The same for the cross-encoder reranker's files.
pub const RERANKER_FIX_HINT: &str =
    "run deploy/embeddings.sh fetch (or set reranker.model_dir / DEJA__RERANKER__MODEL_DIR)";

/// The same for the late-interaction encoder's files.
pub const LATE_FIX_HINT: &str = "run deploy/embeddings.sh fetch (or set \
     late_interaction.model_dir / DEJA__LATE_INTERACTION__MODEL_DIR, or \
     late_interaction.enabled = false)";

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// A setting that cannot work (config validation does not cover it).
    #[error("invalid configuration: `{key}` {problem}")]
    InvalidSetting {
        key: &'static str,
        problem: &'static str,
    },

    /// A file the model needs is not on disk. `what` says which role it plays.
    #[error("embedding {what} not found at `{path}`: {hint}", hint = FIX_HINT)]
    MissingFile { what: &'static str, path: PathBuf },

    /// A file the reranker needs is not on disk. `what` says which role it plays.
    #[error("reranker {what} not found at `{path}`: {hint}", hint = RERANKER_FIX_HINT)]
    MissingRerankerFile { what: &'static str, path: PathBuf },

    /// fastembed/ONNX Runtime refused the reranker's model or tokenizer files, or the model
    /// does not behave like a cross-encoder (no `logits` output, non-finite scores).
    #[error("could not load reranker model from `{dir}`: {reason}; {hint}", hint = RERANKER_FIX_HINT)]
    RerankerModel { dir: PathBuf, reason: String },

    /// A file the late-interaction encoder needs is not on disk.
    #[error("late-interaction {what} not found at `{path}`: {hint}", hint = LATE_FIX_HINT)]
    MissingLateFile { what: &'static str, path: PathBuf },

    /// fastembed/ONNX Runtime refused the late-interaction encoder's files, or its token
    /// vectors do not rank a paraphrase above an unrelated text.
    #[error("could not load late-interaction model from `{dir}`: {reason}; {hint}", hint = LATE_FIX_HINT)]
    LateModel { dir: PathBuf, reason: String },

    /// No path to the ONNX Runtime library was configured at all.
    #[error(
        "no ONNX Runtime library configured (embedding.ort_dylib_path is empty and \
         ORT_DYLIB_PATH is unset): {hint}",
        hint = FIX_HINT
    )]
    NoRuntimeConfigured,

    /// The ONNX Runtime library exists but could not be loaded (not a shared library, too old,
    /// wrong architecture...).
    #[error("could not load ONNX Runtime from `{path}`: {reason}; {hint}", hint = FIX_HINT)]
    Runtime { path: PathBuf, reason: String },

    /// A model file exists but could not be read.
    #[error("could not read embedding {what} `{path}`: {source}")]
    Read {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// fastembed/ONNX Runtime refused the model or tokenizer files.
    #[error("could not load embedding model from `{dir}`: {reason}; {hint}", hint = FIX_HINT)]
    Model { dir: PathBuf, reason: String },

    /// The model produces vectors of another size than `embedding.dimensions` says; vectors of
    /// different sizes must never share one index.
    #[error(
        "embedding model `{model_id}` produces {actual} dimensions but embedding.dimensions is {expected}"
    )]
    DimensionMismatch {
        model_id: String,
        expected: usize,
        actual: usize,
    },

    /// Running the model on some input failed.
    #[error("embedding inference failed: {0}")]
    Inference(String),

    /// The blocking task running the model was cancelled or panicked (runtime shutting down).
    #[error("embedding task did not complete: {0}")]
    Task(String),
}

impl EmbedError {
    /// Whether trying the same input again later may succeed. Only an interrupted task
    /// qualifies: a missing file, a bad model or an input the model rejects will fail the same
    /// way next time, so callers should dead-letter rather than retry.
    pub fn is_transient(&self) -> bool {
        matches!(self, EmbedError::Task(_))
    }

    /// The same error again, for each caller of a micro-batch (`batch.rs`) that shares one
    /// model call. Every variant and field is kept, so callers still match on the variant and
    /// [`EmbedError::is_transient`] answers the same; only a file read's `io::Error` is
    /// rebuilt from its kind and message (it is not `Clone`).
    pub(crate) fn duplicate(&self) -> EmbedError {
        match self {
            EmbedError::InvalidSetting { key, problem } => {
                EmbedError::InvalidSetting { key, problem }
            }
            EmbedError::MissingFile { what, path } => EmbedError::MissingFile {
                what,
                path: path.clone(),
            },
            EmbedError::MissingRerankerFile { what, path } => EmbedError::MissingRerankerFile {
                what,
                path: path.clone(),
            },
            EmbedError::RerankerModel { dir, reason } => EmbedError::RerankerModel {
                dir: dir.clone(),
                reason: reason.clone(),
            },
            EmbedError::MissingLateFile { what, path } => EmbedError::MissingLateFile {
                what,
                path: path.clone(),
            },
            EmbedError::LateModel { dir, reason } => EmbedError::LateModel {
                dir: dir.clone(),
                reason: reason.clone(),
            },
            EmbedError::NoRuntimeConfigured => EmbedError::NoRuntimeConfigured,
            EmbedError::Runtime { path, reason } => EmbedError::Runtime {
                path: path.clone(),
                reason: reason.clone(),
            },
            EmbedError::Read { what, path, source } => EmbedError::Read {
                what,
                path: path.clone(),
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
            EmbedError::Model { dir, reason } => EmbedError::Model {
                dir: dir.clone(),
                reason: reason.clone(),
            },
            EmbedError::DimensionMismatch {
                model_id,
                expected,
                actual,
            } => EmbedError::DimensionMismatch {
                model_id: model_id.clone(),
                expected: *expected,
                actual: *actual,
            },
            EmbedError::Inference(message) => EmbedError::Inference(message.clone()),
            EmbedError::Task(message) => EmbedError::Task(message.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duplicated_error_says_the_same_and_keeps_its_transience() {
        let errors = [
            EmbedError::Task("cancelled".into()),
            EmbedError::Inference("bad input".into()),
            EmbedError::Read {
                what: "model",
                path: PathBuf::from("/m/model.onnx"),
                source: std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied"),
            },
        ];
        for error in errors {
            let copy = error.duplicate();
            assert_eq!(copy.to_string(), error.to_string());
            assert_eq!(copy.is_transient(), error.is_transient());
        }
    }
}
