//! The process-wide ONNX Runtime environment.
//!
//! ONNX Runtime is loaded with `dlopen` and `ort` allows exactly one environment per process,
//! so both live for the whole process and every [`crate::LocalEmbedder`] shares them. We load
//! the library ourselves with [`ort::init_from`] before anything else touches `ort`: left to
//! itself, `ort` would load it lazily on first use and *panic* if it is missing.

use crate::EmbedError;
use ort::environment::Environment;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

struct Loaded {
    path: PathBuf,
    environment: Environment,
}

/// A `Mutex<Option<_>>` rather than a `OnceLock`: a failed attempt (wrong path, too old a
/// library) must leave the slot empty so that a later attempt with a good path can succeed,
/// and `OnceLock::get_or_try_init` is not stable. `ort` itself only records a library once it
/// has loaded and passed its version check, so retrying is safe on its side too.
static RUNTIME: Mutex<Option<Loaded>> = Mutex::new(None);

/// The shared environment, loading ONNX Runtime from `library` on the first call.
///
/// Later calls reuse whatever was loaded first: a process cannot unload one ONNX Runtime and
/// load another, so a different `library` only earns a warning.
pub(crate) fn environment(library: &Path) -> Result<Environment, EmbedError> {
    // Nothing below can panic while holding the lock in a way that leaves `Loaded` half
    // written, so a poisoned lock is still consistent.
    let mut slot = RUNTIME.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(loaded) = slot.as_ref() {
        if !same_file(&loaded.path, library) {
            tracing::warn!(
                loaded = %loaded.path.display(),
                requested = %library.display(),
                "onnx runtime is already loaded in this process from another path; reusing it"
            );
        }
        return Ok(loaded.environment.clone());
    }

    let runtime_error = |reason: String| EmbedError::Runtime {
        path: library.to_path_buf(),
        reason,
    };
    let environment = ort::init_from(library)
        .map_err(|e| runtime_error(e.to_string()))?
        .with_name("deja")
        .build()
        .map_err(|e| runtime_error(e.to_string()))?;
    tracing::info!(library = %library.display(), "onnx runtime loaded");
    *slot = Some(Loaded {
        path: library.to_path_buf(),
        environment: environment.clone(),
    });
    Ok(environment)
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}
