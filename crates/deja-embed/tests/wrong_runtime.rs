//! A file that is not ONNX Runtime must give an error, and must not spoil a later load with
//! the right library. Its own test binary: ONNX Runtime is loaded once per process, so this
//! only means something in a process where nothing has loaded it yet.

mod common;

use common::real_model_settings;
use deja_embed::{EmbedError, Embedder, LocalEmbedder};

#[test]
fn a_file_that_is_not_onnx_runtime_is_an_error_and_the_right_library_still_loads_after() {
    let good = real_model_settings();
    let mut wrong = good.clone();
    // Exists, but is JSON rather than a shared library.
    wrong.ort_dylib_path = good.model_dir.join("config.json");
    let err = LocalEmbedder::load(&wrong).expect_err("must fail");
    assert!(matches!(err, EmbedError::Runtime { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("config.json"), "{message}");
    assert!(message.contains("ORT_DYLIB_PATH"), "{message}");

    let embedder = LocalEmbedder::load(&good).expect("the right library loads after a failure");
    assert_eq!(embedder.dimensions(), 384);
}
