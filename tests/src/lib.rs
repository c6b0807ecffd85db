//! Shared harness of the integration tests.
//!
//! Tests run against the real services started by `deploy/services.sh up`. They never wipe
//! anything: each test works inside its own org (`unique_org()`), and Neo4j Community's one
//! database is shared by every test, every run and every developer.

use chrono::{DateTime, TimeZone, Utc};
use deja_config::Settings;
use deja_domain::{Component, Episode, EpisodeKey};
use deja_graph::GraphStore;
use tokio::sync::OnceCell;

/// Dimensions of the embeddings the schema indexes (`cypher/schema/003_*`).
pub const DIMENSIONS: usize = 384;

/// Built-in defaults overridden by `deja.toml` and `DEJA__SECTION__KEY` variables if present
/// (e.g. `DEJA__NEO4J__URI` to point the suite at another Neo4j).
pub fn test_settings() -> Settings {
    Settings::load(None).unwrap_or_else(|e| panic!("test settings: {e}"))
}

/// A short suffix unique to this call: uuid v4 without dashes.
pub fn unique_suffix() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// An org id no other test, run or developer uses: the unit of test isolation.
pub fn unique_org() -> String {
    format!("test-{}", unique_suffix())
}

/// A fresh random seed, for vectors that must not repeat across runs (the database keeps
/// every run's episodes, and identical vectors piling up would crowd the vector index).
pub fn random_seed() -> u64 {
    uuid::Uuid::new_v4().as_u64_pair().0
}

static MIGRATED: OnceCell<()> = OnceCell::const_new();

/// A store on the test Neo4j with the schema migrated (once per test process). Each test
/// gets its own connection pool: pools are tied to the runtime of the test that made them.
pub async fn store_for(settings: &Settings) -> GraphStore {
    let store = GraphStore::connect(&settings.neo4j)
        .await
        .unwrap_or_else(|e| panic!("neo4j settings: {e}"));
    MIGRATED
        .get_or_init(|| async {
            store.migrate().await.unwrap_or_else(|e| {
                panic!("migrating neo4j failed (is `deploy/services.sh up` running?): {e:?}")
            });
        })
        .await;
    store
}

/// [`store_for`] the default test settings.
pub async fn store() -> GraphStore {
    store_for(&test_settings()).await
}

/// A raw driver connection, for checks the store does not offer (SHOW INDEXES, browse files).
pub fn raw_graph(settings: &Settings) -> neo4rs::Graph {
    let config = neo4rs::ConfigBuilder::default()
        .uri(settings.neo4j.uri.as_str())
        .user(settings.neo4j.user.as_str())
        .password(settings.neo4j.password.expose())
        .db(settings.neo4j.database.as_str())
        .max_connections(4)
        .build()
        .expect("neo4j config");
    neo4rs::Graph::connect(config).expect("neo4j graph")
}

/// SplitMix64: a tiny PRNG whose sequence never changes between crate versions, so vectors
/// stored by an earlier run (the shared crowd) are reproduced exactly by later runs.
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    pub fn next_signed(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
}

/// A deterministic random unit vector of [`DIMENSIONS`] dimensions.
/// The `id` of each episode of an answer's `episodes` array, in order.
pub fn episode_ids(result: &serde_json::Value) -> Vec<&str> {
    result["episodes"]
        .as_array()
        .map(|episodes| episodes.iter().filter_map(|e| e["id"].as_str()).collect())
        .unwrap_or_default()
}

pub fn random_unit_vector(seed: u64) -> Vec<f32> {
    let mut rng = SplitMix64::new(seed);
    let raw: Vec<f64> = (0..DIMENSIONS).map(|_| rng.next_signed()).collect();
    normalise(&raw)
}

/// A deterministic unit vector whose cosine similarity with the unit vector `base` is
/// `cosine`: `cosine·base + sin·u` with `u` a random unit vector orthogonal to `base`.
pub fn vector_with_cosine(base: &[f32], cosine: f64, seed: u64) -> Vec<f32> {
    let base: Vec<f64> = base.iter().map(|x| f64::from(*x)).collect();
    let random: Vec<f64> = random_unit_vector(seed)
        .iter()
        .map(|x| f64::from(*x))
        .collect();
    let along: f64 = random.iter().zip(&base).map(|(r, b)| r * b).sum();
    let orthogonal: Vec<f64> = random
        .iter()
        .zip(&base)
        .map(|(r, b)| r - along * b)
        .collect();
    let orthogonal = normalise(&orthogonal);
    let sine = (1.0 - cosine * cosine).max(0.0).sqrt();
    let mixed: Vec<f64> = base
        .iter()
        .zip(&orthogonal)
        .map(|(b, o)| cosine * b + sine * f64::from(*o))
        .collect();
    normalise(&mixed)
}

fn normalise(v: &[f64]) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
    v.iter().map(|x| (x / norm) as f32).collect()
}

/// Cosine similarity, for checking what the store returns.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum();
    let na: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb)
}

/// A fixed instant with microseconds, so round-trip checks catch truncation.
pub fn at(seconds_after_base: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_770_000_000 + seconds_after_base, 123_456_000)
        .single()
        .expect("valid timestamp")
}

/// A complete, searchable (`ok`, embedded) episode of one conversation, ready to save: the
/// domain's fixture in this org and team, with a cache-eviction conclusion.
pub fn sample_episode(org: &str, team: &str, correlation_id: &str, embedding: Vec<f32>) -> Episode {
    let key = EpisodeKey::new(org, correlation_id);
    Episode {
        id: key.episode_id(),
        org: org.to_owned(),
        team: team.to_owned(),
        agent_id: "agent-1".to_owned(),
        last_turn_index: 1,
        issue_type: "cache-eviction".to_owned(),
        issue_description: "checkout pods crash with 500s".to_owned(),
        components: vec![
            Component::new("service", "checkout"),
            Component::new("cache", "redis-sessions"),
        ],
        skills_used: ["database-redis".to_owned()].into_iter().collect(),
        key_findings: vec!["evicted_keys climbing".to_owned()],
        root_cause: Some("redis maxmemory too low".to_owned()),
        summary: "redis evicted session keys, checkout failed".to_owned(),
        effectiveness_score: 0.8,
        embedding: Some(embedding),
        embedding_model: Some("test-model".to_owned()),
        event_ids: vec![format!("evt-{correlation_id}-1")],
        created_at: at(0),
        updated_at: at(60),
        last_confirmed_at: at(60),
        version: 0,
        ..deja_domain::testing::episode(correlation_id)
    }
}

pub mod api_app;
pub mod process;
pub mod webdriver;
pub mod worker_app;

pub use process::{deja_command, user_prompt};

/// The real embedding model, loaded once per test process, behind the same LRU of vectors as
/// `deja serve` (`embedding.query_cache_size`). Relative paths in the settings are resolved
/// against the repository root (cargo runs tests from `tests/`).
pub fn embedder() -> std::sync::Arc<dyn deja_embed::Embedder> {
    static EMBEDDER: std::sync::OnceLock<std::sync::Arc<dyn deja_embed::Embedder>> =
        std::sync::OnceLock::new();
    EMBEDDER
        .get_or_init(|| {
            let settings = embedding_settings();
            let embedder = deja_embed::LocalEmbedder::load(&settings)
                .unwrap_or_else(|e| panic!("embedding model (run deploy/embeddings.sh): {e}"));
            std::sync::Arc::new(deja_embed::CachingEmbedder::new(
                embedder,
                settings.query_cache_size,
            ))
        })
        .clone()
}

/// Asserts that `episode` (as read back from the store) carries the real embedding model's
/// vector of its current embedded text.
pub fn assert_embedding_of(episode: &deja_domain::Episode) {
    let embedder = embedder();
    assert_eq!(
        episode.embedding_model.as_deref(),
        Some(embedder.model_id())
    );
    let expected = embedder
        .embed(&[episode.embedding_text()])
        .expect("embed the text")
        .remove(0);
    let stored = episode.embedding.as_ref().expect("a vector");
    let cosine = deja_embed::cosine(stored, &expected);
    assert!(
        cosine > 0.999,
        "the stored vector is the model's embedding of the text ({cosine})"
    );
}

/// Asserts that `episode`'s stored cause vector is the real embedding model's vector of its
/// current cause text (issue type and root cause), as the family order reads it.
pub async fn assert_cause_vector_of(
    store: &deja_graph::GraphStore,
    episode: &deja_domain::Episode,
) {
    let stored = store
        .tokens(&episode.org, std::slice::from_ref(&episode.id))
        .await
        .expect("read the recognition vectors");
    let cause = stored
        .get(&episode.id)
        .and_then(|tokens| tokens.cause.as_ref())
        .unwrap_or_else(|| panic!("no cause vector stored for {}", episode.id));
    let embedder = embedder();
    assert_eq!(cause.model, embedder.model_id());
    let expected = embedder
        .embed(&[episode.cause_text()])
        .expect("embed the cause text")
        .remove(0);
    let cosine = deja_embed::cosine(&cause.vector, &expected);
    assert!(cosine > 0.999, "a cause vector of another text ({cosine})");
}

/// The cross-encoder of the rerank stage, loaded once per test process from the files
/// `deploy/embeddings.sh` fetched.
pub fn reranker() -> std::sync::Arc<dyn deja_embed::Reranker> {
    static RERANKER: std::sync::OnceLock<std::sync::Arc<dyn deja_embed::Reranker>> =
        std::sync::OnceLock::new();
    RERANKER
        .get_or_init(|| {
            let settings = reranker_settings();
            let paths = deja_embed::RerankerPaths {
                model_dir: settings.model_dir,
                ort_dylib_path: embedding_settings().ort_dylib_path,
                max_length: settings.max_length,
            };
            let reranker = deja_embed::LocalReranker::load(&paths)
                .unwrap_or_else(|e| panic!("reranker model (run deploy/embeddings.sh): {e}"));
            std::sync::Arc::new(reranker)
        })
        .clone()
}

/// The late-interaction encoder, loaded once per test process from the files
/// `deploy/embeddings.sh` fetched.
pub fn late_encoder() -> std::sync::Arc<dyn deja_embed::LateEncoder> {
    static ENCODER: std::sync::OnceLock<std::sync::Arc<dyn deja_embed::LateEncoder>> =
        std::sync::OnceLock::new();
    ENCODER
        .get_or_init(|| {
            let settings = late_settings();
            let paths = deja_embed::LatePaths::from_settings(&settings, &embedding_settings());
            let encoder = deja_embed::LocalLateEncoder::load(&paths, &settings.model_id)
                .unwrap_or_else(|e| {
                    panic!("late-interaction model (run deploy/embeddings.sh): {e}")
                });
            std::sync::Arc::new(encoder)
        })
        .clone()
}

/// Late-interaction settings with an absolute model path.
pub fn late_settings() -> deja_config::LateSettings {
    let mut settings = test_settings().late_interaction;
    if settings.model_dir.is_relative() {
        settings.model_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(&settings.model_dir);
    }
    settings
}

/// Reranker settings with an absolute model path.
pub fn reranker_settings() -> deja_config::RerankerSettings {
    let mut settings = test_settings().reranker;
    if settings.model_dir.is_relative() {
        settings.model_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(&settings.model_dir);
    }
    settings
}

/// Embedding settings with absolute paths.
pub fn embedding_settings() -> deja_config::EmbeddingSettings {
    let mut settings = test_settings().embedding;
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    if settings.model_dir.is_relative() {
        settings.model_dir = repo.join(&settings.model_dir);
    }
    if settings.ort_dylib_path.is_relative() && !settings.ort_dylib_path.as_os_str().is_empty() {
        settings.ort_dylib_path = repo.join(&settings.ort_dylib_path);
    }
    settings
}
