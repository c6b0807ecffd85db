//! Runs the real all-MiniLM-L6-v2 model through ONNX Runtime. Needs the files of
//! `deploy/embeddings.sh` (see `tests/common/mod.rs` for where they are looked up).

mod common;

use common::real_model_settings;
use deja_embed::{
    cosine, embed_blocking, CachingEmbedder, EmbedError, Embedder, LocalEmbedder, FIX_HINT,
};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

fn embedder() -> &'static LocalEmbedder {
    static EMBEDDER: OnceLock<LocalEmbedder> = OnceLock::new();
    EMBEDDER.get_or_init(|| match LocalEmbedder::load(&real_model_settings()) {
        Ok(embedder) => embedder,
        Err(e) => panic!("the real model must be available for these tests: {e}"),
    })
}

fn texts(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

#[test]
fn a_similar_incident_scores_high_and_an_unrelated_one_low() {
    let v = embedder()
        .embed(&texts(&[
            "redis evicted keys climbing, payments pods crashloop",
            "redis memory eviction caused payment service crashes",
            "TLS certificate expired on the ingress",
        ]))
        .expect("embed");
    let similar = cosine(&v[0], &v[1]);
    let unrelated = cosine(&v[0], &v[2]);
    eprintln!("similar = {similar:.4}, unrelated = {unrelated:.4}");
    // Reference figures from docs/embeddings.md (Python onnxruntime on the same files).
    assert!((similar - 0.66).abs() < 0.03, "similar = {similar}");
    assert!((unrelated - 0.10).abs() < 0.03, "unrelated = {unrelated}");
}

#[test]
fn vectors_are_l2_normalised_and_of_the_configured_size() {
    let e = embedder();
    assert_eq!(e.dimensions(), 384);
    assert_eq!(e.model_id(), "all-MiniLM-L6-v2-int8");
    let v = e
        .embed(&texts(&[
            "kafka consumer lag on orders",
            "",
            "🔥 disk full on db-3",
        ]))
        .expect("embed");
    assert_eq!(v.len(), 3);
    for vector in &v {
        assert_eq!(vector.len(), 384);
        let norm: f32 = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "norm = {norm}");
    }
}

/// `embedding.intra_threads` changes how ONNX Runtime schedules the work, never the vectors:
/// the default single-threaded session and one thread per core agree.
#[test]
fn one_thread_or_one_per_core_embeds_the_same_vectors() {
    let single = embedder();
    assert_eq!(real_model_settings().intra_threads, 1, "the default");
    let mut settings = real_model_settings();
    settings.intra_threads = 0;
    let per_core = LocalEmbedder::load(&settings).expect("one thread per core");
    let items = texts(&[
        "checkout pods OOMKilled after the 2.3 deploy",
        "TLS handshake failures: the webhook certificate expired",
    ]);
    let a = single.embed(&items).expect("single thread");
    let b = per_core.embed(&items).expect("per core");
    for (x, y) in a.iter().zip(&b) {
        let agreement = cosine(x, y);
        assert!(agreement > 0.99999, "agreement = {agreement}");
    }
}

#[test]
fn a_text_embeds_the_same_alone_and_inside_a_padded_batch() {
    let e = embedder();
    let target = "postgres replication lag grew after the vacuum job".to_string();
    let alone = e.embed(std::slice::from_ref(&target)).expect("alone");
    let mut batch = texts(&[
        "a much longer neighbour so that the target gets padded: the checkout service timed out \
         talking to the inventory service because its connection pool was exhausted",
        "dns",
    ]);
    batch.push(target);
    let together = e.embed(&batch).expect("batch");
    let agreement = cosine(&alone[0], &together[2]);
    assert!(agreement > 0.9999, "agreement = {agreement}");
}

#[test]
fn more_texts_than_one_batch_come_back_in_order() {
    let e = embedder();
    let many: Vec<String> = (0..70)
        .map(|i| format!("incident {i}: node {i} of the cluster ran out of memory"))
        .collect();
    let all = e.embed(&many).expect("embed");
    assert_eq!(all.len(), many.len());
    let last = e.embed(&many[69..]).expect("single");
    assert!(cosine(&all[69], &last[0]) > 0.9999);
}

#[test]
fn a_text_longer_than_max_length_is_truncated_not_refused() {
    let long = "the load balancer dropped connections during the deploy ".repeat(200);
    let v = embedder().embed(&[long]).expect("embed");
    assert_eq!(v[0].len(), 384);
}

#[test]
fn an_empty_input_gives_no_vectors() {
    assert!(embedder().embed(&[]).expect("embed").is_empty());
}

#[test]
fn loading_twice_in_one_process_works_and_agrees() {
    let first = LocalEmbedder::load(&real_model_settings()).expect("first load");
    let second = LocalEmbedder::load(&real_model_settings()).expect("second load");
    let text = texts(&["jvm heap exhaustion on the search cluster"]);
    let a = first.embed(&text).expect("first");
    let b = second.embed(&text).expect("second");
    assert!(cosine(&a[0], &b[0]) > 0.99999);
}

#[tokio::test]
async fn embed_blocking_runs_the_embedder_off_the_async_workers() {
    let shared: Arc<dyn Embedder> =
        Arc::new(LocalEmbedder::load(&real_model_settings()).expect("load"));
    let v = embed_blocking(shared, texts(&["nginx 502s after config reload"]))
        .await
        .expect("embed");
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].len(), 384);
}

#[test]
fn async_callers_are_let_in_to_the_one_session_one_at_a_time_through_the_cache_too() {
    // embed_blocking waits on this before it takes a blocking thread (unit tests in lib.rs).
    let admission = embedder()
        .admission()
        .expect("the local model has an admission");
    assert_eq!(admission.sessions(), 1);
    let cached = CachingEmbedder::new(
        LocalEmbedder::load(&real_model_settings()).expect("load"),
        8,
    );
    assert_eq!(cached.admission().map(|a| a.sessions()), Some(1));
    let text = texts(&["kafka consumer lag on orders"]);
    assert!(cached.remembered(&text).is_none(), "nothing embedded yet");
    let embedded = cached.embed(&text).expect("embed");
    assert_eq!(cached.remembered(&text), Some(embedded));
}

#[test]
fn a_missing_model_dir_is_a_clear_error_naming_the_fix() {
    let mut settings = real_model_settings();
    settings.model_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("no-such-model");
    let err = LocalEmbedder::load(&settings).expect_err("must fail");
    assert!(matches!(err, EmbedError::MissingFile { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("no-such-model"), "{message}");
    assert!(message.contains("deploy/embeddings.sh"), "{message}");
    assert!(message.contains(FIX_HINT), "{message}");
}

#[test]
fn a_missing_model_file_is_named_in_the_error() {
    let dir = scratch_dir("model-without-onnx");
    let real = real_model_settings().model_dir;
    for name in [
        "tokenizer.json",
        "config.json",
        "special_tokens_map.json",
        "tokenizer_config.json",
    ] {
        std::fs::copy(real.join(name), dir.join(name)).expect("copy tokenizer file");
    }
    let mut settings = real_model_settings();
    settings.model_dir = dir;
    let message = LocalEmbedder::load(&settings)
        .expect_err("must fail")
        .to_string();
    assert!(message.contains("model.onnx"), "{message}");
    assert!(message.contains(FIX_HINT), "{message}");
}

#[test]
fn a_missing_runtime_library_is_an_error_not_a_panic() {
    let mut settings = real_model_settings();
    settings.ort_dylib_path = PathBuf::from("/nonexistent/libonnxruntime.so.1.24.4");
    let err = LocalEmbedder::load(&settings).expect_err("must fail");
    let message = err.to_string();
    assert!(message.contains("ONNX Runtime library"), "{message}");
    assert!(
        message.contains("/nonexistent/libonnxruntime.so"),
        "{message}"
    );
    assert!(message.contains("ORT_DYLIB_PATH"), "{message}");
}

#[test]
fn a_relative_model_dir_is_resolved_against_the_current_directory() {
    // `cargo test` runs in the crate folder, so this is the repository layout seen from there.
    let mut settings = real_model_settings();
    let cwd = std::env::current_dir().expect("cwd");
    // Up from the current directory to the root, then down to the real folder: a relative
    // path that is valid wherever the model files live.
    let absolute = std::fs::canonicalize(&settings.model_dir).expect("model dir exists");
    let mut relative = PathBuf::new();
    for _ in cwd.components().skip(1) {
        relative.push("..");
    }
    relative.push(absolute.strip_prefix("/").expect("absolute path"));
    settings.model_dir = relative;
    assert!(settings.model_dir.is_relative());
    let paths = deja_embed::ModelPaths::resolve(&settings).expect("resolve");
    assert!(paths.model_dir.is_absolute());
}

#[test]
fn a_dimension_setting_the_model_does_not_produce_is_refused_at_load() {
    let mut settings = real_model_settings();
    settings.dimensions = 768;
    match LocalEmbedder::load(&settings) {
        Err(EmbedError::DimensionMismatch {
            expected, actual, ..
        }) => assert_eq!((expected, actual), (768, 384)),
        other => panic!("expected a dimension mismatch, got {other:?}"),
    }
}

#[test]
fn a_zero_max_length_is_refused_with_the_key_name() {
    let mut settings = real_model_settings();
    settings.max_length = 0;
    let message = LocalEmbedder::load(&settings)
        .expect_err("must fail")
        .to_string();
    assert!(message.contains("embedding.max_length"), "{message}");
}

#[test]
fn a_repeated_text_is_answered_by_the_cache_with_the_models_own_vector() {
    let model = LocalEmbedder::load(&real_model_settings()).expect("load");
    let direct = model
        .embed(&texts(&["kafka consumer lag on orders"]))
        .expect("embed");
    let cached = deja_embed::CachingEmbedder::new(model, 2);
    cached.warm_up().expect("warm-up");
    let first = cached
        .embed(&texts(&[
            "kafka consumer lag on orders",
            "disk full on db-3",
        ]))
        .expect("embed");
    let again = cached
        .embed(&texts(&[
            "disk full on db-3",
            "kafka consumer lag on orders",
        ]))
        .expect("embed");
    assert_eq!(first[0], direct[0]);
    assert_eq!(again[1], direct[0]);
    assert_eq!(again[0], first[1]);
    assert_eq!(
        cached.stats(),
        deja_embed::CacheStats { hits: 2, misses: 2 }
    );
    assert_eq!(cached.model_id(), "all-MiniLM-L6-v2-int8");
    assert_eq!(cached.dimensions(), 384);
}
