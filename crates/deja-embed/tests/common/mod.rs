//! Settings pointing at the real model, shared by the test binaries of this crate.

use deja_config::{EmbeddingSettings, Settings};
use std::path::PathBuf;

/// The built-in embedding defaults with paths that work from `cargo test` (whose current
/// directory is the crate, not the repository root): `DEJA__EMBEDDING__MODEL_DIR` and
/// `ORT_DYLIB_PATH` if set, else the layout `deploy/embeddings.sh` writes under `.deja/models`.
pub fn real_model_settings() -> EmbeddingSettings {
    let models = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.deja/models");
    let mut settings = Settings::defaults().embedding;
    settings.model_dir = match std::env::var_os("DEJA__EMBEDDING__MODEL_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => models.join("all-MiniLM-L6-v2"),
    };
    settings.ort_dylib_path = match std::env::var_os("ORT_DYLIB_PATH") {
        // Empty makes the embedder read ORT_DYLIB_PATH itself, which is the path under test.
        Some(path) if !path.is_empty() => PathBuf::new(),
        _ => models.join("onnxruntime/libonnxruntime.so.1.24.4"),
    };
    settings
}

/// The reranker's paths, found the same way: `DEJA__RERANKER__MODEL_DIR` if set, else the
/// layout `deploy/embeddings.sh` writes; ONNX Runtime as for the embedder.
#[allow(dead_code)] // not every test binary of this crate reranks
pub fn real_reranker_paths() -> deja_embed::RerankerPaths {
    let models = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.deja/models");
    let mut paths = deja_embed::RerankerPaths::from_settings(
        &Settings::defaults().reranker,
        &real_model_settings(),
    );
    paths.model_dir = match std::env::var_os("DEJA__RERANKER__MODEL_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => models.join("ms-marco-MiniLM-L-12-v2"),
    };
    paths
}

/// The late-interaction encoder's paths, found the same way: `DEJA__LATE_INTERACTION__MODEL_DIR`
/// if set, else the layout `deploy/embeddings.sh` writes; ONNX Runtime as for the embedder.
#[allow(dead_code)] // not every test binary of this crate encodes tokens
pub fn real_late_paths() -> deja_embed::LatePaths {
    let models = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.deja/models");
    let mut paths = deja_embed::LatePaths::from_settings(
        &Settings::defaults().late_interaction,
        &real_model_settings(),
    );
    paths.model_dir = match std::env::var_os("DEJA__LATE_INTERACTION__MODEL_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => models.join("answerai-colbert-small-v1"),
    };
    paths
}
