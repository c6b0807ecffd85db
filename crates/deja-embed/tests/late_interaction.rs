//! Runs the real answerai-colbert-small-v1 encoder through ONNX Runtime. Needs the files of
//! `deploy/embeddings.sh` (see `tests/common/mod.rs` for where they are looked up).

mod common;

use common::real_late_paths;
use deja_config::Settings;
use deja_domain::recognition::{max_sim, TokenVectors};
use deja_embed::{encode_blocking, EmbedError, LateEncoder, LocalLateEncoder, LATE_FIX_HINT};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

const QUERY: &str = "redis evicted keys, sessions lost";
const RELEVANT: &str = "maxmemory policy evicted session keys";
const UNRELATED: &str = "TLS certificate expired on ingress";

fn encoder() -> &'static LocalLateEncoder {
    static ENCODER: OnceLock<LocalLateEncoder> = OnceLock::new();
    ENCODER.get_or_init(|| {
        let model_id = Settings::defaults().late_interaction.model_id;
        match LocalLateEncoder::load(&real_late_paths(), &model_id) {
            Ok(encoder) => encoder,
            Err(e) => panic!("the real late-interaction model must be available: {e}"),
        }
    })
}

fn texts(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_relevant_incident_covers_the_query_better_than_an_unrelated_one() {
    let v = encoder()
        .encode(&texts(&[QUERY, RELEVANT, UNRELATED]))
        .expect("encode");
    let relevant = max_sim(&v[0], &v[1]).expect("comparable");
    let unrelated = max_sim(&v[0], &v[2]).expect("comparable");
    eprintln!("relevant = {relevant:.4}, unrelated = {unrelated:.4}");
    // Reference figures: Python onnxruntime on the same files, the same word pieces
    // (punctuation left out), 0.8024 and 0.6422.
    assert!((relevant - 0.802).abs() < 0.01, "relevant = {relevant}");
    assert!((unrelated - 0.642).abs() < 0.01, "unrelated = {unrelated}");
}

#[test]
fn every_word_piece_but_punctuation_gets_a_unit_vector_of_384_values() {
    let v = encoder().encode(&texts(&[QUERY])).expect("encode");
    // [CLS] red ##is evicted keys sessions lost [SEP]: the comma is left out.
    assert_eq!(v[0].len(), 8);
    assert_eq!(v[0].dims(), 384);
    for row in v[0].rows() {
        let norm: f32 = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "norm {norm}");
    }
}

#[test]
fn texts_encoded_together_or_alone_get_the_same_vectors() {
    let together = encoder()
        .encode(&texts(&[QUERY, RELEVANT, UNRELATED, "disk full on db-3"]))
        .expect("encode");
    for (k, text) in [QUERY, RELEVANT, UNRELATED, "disk full on db-3"]
        .iter()
        .enumerate()
    {
        let alone = encoder().encode(&texts(&[text])).expect("encode");
        assert_eq!(alone[0], together[k], "{text}");
    }
    assert!(encoder().encode(&[]).expect("empty").is_empty());
}

#[test]
fn concurrent_callers_each_get_their_own_texts_vectors() {
    let model_id = Settings::defaults().late_interaction.model_id;
    let two = LocalLateEncoder::load_sessions(&real_late_paths(), &model_id, 2).expect("load");
    assert_eq!(two.admission().map(|a| a.sessions()), Some(2));
    let all = [QUERY, RELEVANT, UNRELATED, "disk full on db-3"];
    let alone: Vec<TokenVectors> = all
        .iter()
        .map(|text| encoder().encode(&texts(&[text])).expect("encode").remove(0))
        .collect();
    // More callers than sessions, one text or several each: every caller waits for a session
    // of its own and gets exactly its texts' vectors.
    std::thread::scope(|scope| {
        let two = &two;
        let alone = &alone;
        for k in 0..6 {
            scope.spawn(move || {
                let mine: Vec<&str> = all
                    .iter()
                    .copied()
                    .cycle()
                    .skip(k)
                    .take(1 + k % 3)
                    .collect();
                let got = two.encode(&texts(&mine)).expect("encode");
                for (text, vectors) in mine.iter().zip(&got) {
                    let i = all.iter().position(|t| t == text).expect("known");
                    assert_eq!(vectors, &alone[i], "{text}");
                }
            });
        }
    });
}

#[test]
fn a_text_beyond_max_length_is_cut_not_refused() {
    let long = "connection pool exhausted ".repeat(400);
    let v = encoder().encode(&[long]).expect("encode");
    assert!(v[0].len() <= Settings::defaults().late_interaction.max_length);
    assert!(!v[0].is_empty());
}

#[tokio::test]
async fn encode_blocking_runs_off_the_async_workers() {
    let shared: Arc<dyn LateEncoder> = Arc::new(
        LocalLateEncoder::load_sessions(&real_late_paths(), "answerai-colbert-small-v1-int8", 1)
            .expect("load"),
    );
    let v = encode_blocking(shared, texts(&[QUERY]))
        .await
        .expect("encode");
    assert_eq!(v.len(), 1);
    let stored = TokenVectors::from_bytes(384, &v[0].to_bytes()).expect("decodes");
    let score = max_sim(&v[0], &stored).expect("comparable");
    assert!(score > 0.99, "{score}");
}

#[test]
fn a_missing_model_folder_names_the_key_to_fix() {
    let mut paths = real_late_paths();
    paths.model_dir = PathBuf::from("/nonexistent/late-model");
    let err = LocalLateEncoder::load(&paths, "x").expect_err("no model");
    assert!(matches!(err, EmbedError::MissingLateFile { .. }), "{err}");
    assert!(err.to_string().contains(LATE_FIX_HINT), "{err}");
}

#[test]
fn a_cross_encoder_in_the_late_folder_is_refused_at_load() {
    // It has every file, but no `last_hidden_state`: the load-time probe fails.
    let mut paths = real_late_paths();
    paths.model_dir = paths
        .model_dir
        .parent()
        .expect("models dir")
        .join("ms-marco-MiniLM-L-12-v2");
    let err = LocalLateEncoder::load(&paths, "x").expect_err("a cross-encoder is no encoder");
    assert!(matches!(err, EmbedError::LateModel { .. }), "{err}");
}
