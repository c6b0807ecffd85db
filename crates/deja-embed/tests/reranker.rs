//! Runs the real ms-marco-MiniLM-L-12-v2 cross-encoder through ONNX Runtime. Needs the files of
//! `deploy/embeddings.sh` (see `tests/common/mod.rs` for where they are looked up).

mod common;

use common::{real_model_settings, real_reranker_paths};
use deja_config::Settings;
use deja_embed::{
    rerank_blocking, EmbedError, LocalReranker, Reranker, RerankerPaths, RERANKER_FIX_HINT,
};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

const QUERY: &str = "redis evicted keys, sessions lost";
const RELEVANT: &str = "maxmemory policy evicted session keys";
const UNRELATED: &str = "TLS certificate expired on ingress";
const NEAR_MISS: &str = "redis replica fell behind after a network partition";

fn reranker() -> &'static LocalReranker {
    static RERANKER: OnceLock<LocalReranker> = OnceLock::new();
    RERANKER.get_or_init(|| match LocalReranker::load(&real_reranker_paths()) {
        Ok(reranker) => reranker,
        Err(e) => panic!("the real reranker must be available for these tests: {e}"),
    })
}

fn docs(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

#[test]
fn a_relevant_incident_scores_above_an_unrelated_one() {
    let scores = reranker()
        .score(QUERY, &docs(&[RELEVANT, UNRELATED]))
        .expect("score");
    eprintln!("relevant = {:.3}, unrelated = {:.3}", scores[0], scores[1]);
    assert_eq!(scores.len(), 2);
    // Raw logits: ms-marco puts a relevant pair above 0 and an unrelated one far below.
    assert!(scores[0] > 0.0, "relevant = {}", scores[0]);
    assert!(scores[1] < -5.0, "unrelated = {}", scores[1]);
    assert!(scores[0] > scores[1] + 5.0, "{scores:?}");
}

#[test]
fn scores_come_back_in_input_order_whatever_the_order() {
    let r = reranker();
    let forward = r
        .score(QUERY, &docs(&[RELEVANT, UNRELATED, NEAR_MISS]))
        .expect("forward");
    let permuted = r
        .score(QUERY, &docs(&[UNRELATED, NEAR_MISS, RELEVANT]))
        .expect("permuted");
    eprintln!("forward = {forward:?}, permuted = {permuted:?}");
    assert_eq!(forward.len(), 3);
    assert_eq!(permuted, vec![forward[1], forward[2], forward[0]]);
    // The unrelated one, whatever its position, stays last: the order is not the input's.
    assert!(
        forward[1] < forward[0] && forward[1] < forward[2],
        "{forward:?}"
    );
}

#[test]
fn no_documents_give_no_scores() {
    assert!(reranker().score(QUERY, &[]).expect("score").is_empty());
}

#[test]
fn the_same_pairs_score_the_same_twice() {
    let documents = docs(&[RELEVANT, UNRELATED, NEAR_MISS]);
    let first = reranker().score(QUERY, &documents).expect("first");
    let second = reranker().score(QUERY, &documents).expect("second");
    assert_eq!(first, second);
}

#[test]
fn a_document_scores_the_same_alone_and_among_longer_neighbours() {
    let r = reranker();
    let alone = r.score(QUERY, &docs(&[RELEVANT])).expect("alone");
    let long_neighbour = "the checkout service timed out talking to the inventory service \
                          because its connection pool was exhausted during the sale "
        .repeat(3);
    let together = r
        .score(QUERY, &[long_neighbour, RELEVANT.to_string()])
        .expect("together");
    assert_eq!(alone[0], together[1]);
}

#[test]
fn a_pair_longer_than_max_length_is_truncated_not_refused() {
    let mut paths = real_reranker_paths();
    paths.max_length = 32;
    let short = LocalReranker::load(&paths).expect("load");
    assert_eq!(short.max_length(), 32);
    // Two documents that agree on their first 60 words and differ only after: cut at 32
    // tokens, the model sees the same pair twice.
    let common = "the disk on the primary database filled up with write ahead log segments \
                  because archiving to object storage had been failing silently for days "
        .repeat(2);
    let a = format!("{common} resolved by restarting the archiver");
    let b = format!("{common} and then {UNRELATED} and nobody noticed the redis evictions");
    let cut = short.score(QUERY, &[a.clone(), b.clone()]).expect("score");
    assert!(cut.iter().all(|s| s.is_finite()), "{cut:?}");
    assert_eq!(cut[0], cut[1]);
    // With the model's full length the endings are read and the scores differ.
    let full = reranker().score(QUERY, &[a, b]).expect("score");
    assert_ne!(full[0], full[1]);
}

#[test]
fn a_max_length_above_the_model_positions_is_lowered_not_refused() {
    let mut paths = real_reranker_paths();
    paths.max_length = 4096;
    let long = "connection reset by peer on the payments gateway ".repeat(200);
    let scores = LocalReranker::load(&paths)
        .expect("load")
        .score(QUERY, &[long])
        .expect("score");
    assert!(scores[0].is_finite());
}

#[tokio::test]
async fn rerank_blocking_scores_off_the_async_workers() {
    let shared: Arc<dyn Reranker> =
        Arc::new(LocalReranker::load(&real_reranker_paths()).expect("load"));
    let scores = rerank_blocking(shared, QUERY.to_string(), docs(&[UNRELATED, RELEVANT]))
        .await
        .expect("score");
    assert_eq!(scores.len(), 2);
    assert!(scores[1] > scores[0], "{scores:?}");
}

#[test]
fn the_configured_model_id_names_the_reranker() {
    let mut settings = Settings::defaults().reranker;
    settings.model_dir = real_reranker_paths().model_dir;
    let loaded = LocalReranker::from_settings(&settings, &real_model_settings()).expect("load");
    assert_eq!(loaded.model_id(), "ms-marco-MiniLM-L-12-v2-int8");
    // Without configuration, the folder's name.
    assert_eq!(reranker().model_id(), "ms-marco-MiniLM-L-12-v2");
}

#[test]
fn a_missing_model_dir_is_a_clear_error_naming_the_path_and_the_fix() {
    let mut paths = real_reranker_paths();
    paths.model_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("no-such-reranker");
    let err = LocalReranker::load(&paths).expect_err("must fail");
    assert!(
        matches!(err, EmbedError::MissingRerankerFile { .. }),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(message.contains("no-such-reranker"), "{message}");
    assert!(message.contains("deploy/embeddings.sh fetch"), "{message}");
    assert!(message.contains(RERANKER_FIX_HINT), "{message}");
}

#[test]
fn a_missing_tokenizer_file_is_named_in_the_error() {
    let dir = scratch_dir("reranker-without-tokenizer");
    let real = real_reranker_paths().model_dir;
    for name in [
        "model.onnx",
        "config.json",
        "special_tokens_map.json",
        "tokenizer_config.json",
    ] {
        std::fs::copy(real.join(name), dir.join(name)).expect("copy model file");
    }
    let mut paths = real_reranker_paths();
    paths.model_dir = dir;
    let message = LocalReranker::load(&paths)
        .expect_err("must fail")
        .to_string();
    assert!(message.contains("tokenizer.json"), "{message}");
    assert!(message.contains(RERANKER_FIX_HINT), "{message}");
}

#[test]
fn an_embedding_model_in_the_reranker_folder_is_refused_at_load() {
    // all-MiniLM-L6-v2 has every file a reranker needs but no `logits` output.
    let paths = RerankerPaths {
        model_dir: real_model_settings().model_dir,
        ..real_reranker_paths()
    };
    match LocalReranker::load(&paths) {
        Err(EmbedError::RerankerModel { reason, .. }) => {
            assert!(reason.contains("logits"), "{reason}")
        }
        other => panic!("expected a reranker model error, got {other:?}"),
    }
}

#[test]
fn a_missing_runtime_library_is_an_error_not_a_panic() {
    let mut paths = real_reranker_paths();
    paths.ort_dylib_path = PathBuf::from("/nonexistent/libonnxruntime.so.1.24.4");
    let message = LocalReranker::load(&paths)
        .expect_err("must fail")
        .to_string();
    assert!(
        message.contains("/nonexistent/libonnxruntime.so"),
        "{message}"
    );
}

#[test]
fn a_zero_max_length_is_refused_with_the_key_name() {
    let mut paths = real_reranker_paths();
    paths.max_length = 0;
    let message = LocalReranker::load(&paths)
        .expect_err("must fail")
        .to_string();
    assert!(message.contains("reranker.max_length"), "{message}");
}

#[test]
fn several_sessions_score_each_pair_as_one_session_does() {
    let paths = real_reranker_paths();
    let one = LocalReranker::load_sessions(&paths, 1).expect("one session");
    let three = LocalReranker::load_sessions(&paths, 3).expect("three sessions");
    assert_eq!((one.sessions(), three.sessions()), (1, 3));
    // Seven documents: shares of 3, 3 and 1, each scored on its own session at once.
    let documents = docs(&[
        RELEVANT,
        UNRELATED,
        NEAR_MISS,
        "session keys disappear when redis reaches maxmemory with allkeys-lru",
        "the payment gateway's client certificate expired overnight",
        "kafka consumer lag grows on one hot partition",
        "cart-api pods restart: OOMKilled after the cache grew unbounded",
    ]);
    let alone = one.score(QUERY, &documents).expect("one session");
    let shared = three.score(QUERY, &documents).expect("three sessions");
    assert_eq!(alone.len(), documents.len());
    for (index, (a, b)) in alone.iter().zip(&shared).enumerate() {
        assert!(
            (a - b).abs() < 1e-4,
            "document {index}: {a} alone, {b} shared"
        );
    }
    assert!(shared[0] > shared[1], "{shared:?}");
}
