//! Search latency benchmark (not a test): p50/p95/p99 of `SearchService::search` (query
//! embedding, vector search, ranking and the strategy lookup included) at 1k, 10k and 100k
//! episodes, scoped to one team and org-wide.
//!
//! ```text
//! cargo run --release -p deja-api --example search_bench -- [--sizes 1000,10000,100000]
//!     [--queries 100] [--pool 2000] [--recall 20] [--late 1] [--rerank 1]
//!     [--corpus tests/fixtures/eval [--episodes FILE]]            # --queries 0: seed only
//! ```
//!
//! `--corpus DIR` takes the episode texts from DIR/incidents.jsonl (as `deja import` builds
//! them, ~110 words each) and the queries from DIR/queries.jsonl instead of the short
//! synthetic ones (a component, a symptom, a cause): the cross-encoder's and late
//! interaction's cost grows with the episode's length, so this is the row for realistic
//! episodes (org `bench-search-corpus-v3-<size>`; the pool is the corpus's incidents, `--pool`
//! is ignored). `--episodes FILE` takes the episodes from another file of import records
//! instead, such as the memory the worker wrote with the local model
//! (`tests/fixtures/eval/extracted-qwen2.5-1.5b-other-40.jsonl`: opening messages and key
//! findings included, ~150-180 words, which both encoders cut at 256 word pieces; org
//! `bench-search-<file stem>-v3-<size>`).
//!
//! By default the configured pipeline runs as `deja serve` runs it: late interaction on
//! (`late_interaction.enabled`: every episode is seeded with the token vectors of its text,
//! and each search encodes its query and scores its candidates against theirs; the stage
//! breakdown shows `late` and `q:tokens/get`), no cross-encoder. `--late 0` runs the
//! similarity-only pipeline, the rows issue 13 set goals for; `--rerank 1` adds the
//! cross-encoder (`[reranker]`, `search.rerank_candidates` pairs per search; the breakdown
//! shows `rerank`).
//!
//! Needs `deploy/services.sh up` and `deploy/embeddings.sh`. Each size is its own bench org
//! (`bench-search-v3-<size>` with token and cause vectors, `bench-search-v1-<size>` without; ten
//! teams), seeded once and reused by later runs. The Neo4j
//! server is whatever `DEJA__NEO4J__URI` points at (5.26 or 2026.x); the first line names it
//! and the vector search path (`DEJA__SEARCH__IN_INDEX_FILTERS=false` forces the 5.26 plan).
//!
//! `--recall N` also compares, for N queries per row, the vector stage's candidates
//! (`search.candidates` of them, what the service asks for) with the exact scan's: the share
//! of the exact top found by the index path. It costs an exact scan of the scope per query.
//!
//! Vectors: embedding 100k texts takes ~40 minutes on 2 cores, so a pool of `--pool` real
//! texts (combinations of symptoms, components and root causes) is embedded with the real
//! model (cached in `.deja/bench/`), and bulk episode `i` reuses pool vector `i % pool`
//! with a small random perturbation (cosine ≈ 0.97 to the original), so that no two
//! episodes share a vector. Queries are separately written texts embedded by the service.

use deja_api::{SearchRequest, SearchService};
use deja_config::Settings;
use deja_embed::{Embedder, LocalEmbedder};
use deja_graph::GraphStore;
use neo4rs::BoltType;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SEED_CYPHER: &str = include_str!("../../../cypher/queries/testing/bench_seed.cypher");
const TEAMS: usize = 10;
const BATCH: usize = 1000;
/// Perturbation amplitude per dimension: cosine ≈ 0.97 between a bulk vector and its source.
const NOISE: f64 = 0.02;
const WARMUP: usize = 5;

const SYMPTOMS: [(&str, &str); 20] = [
    ("oom-kill", "pods OOMKilled with exit code 137"),
    ("error-spike", "spike of HTTP 500 errors"),
    ("latency", "p99 latency tripled"),
    (
        "certificate-expiry",
        "TLS handshakes fail, certificate expired",
    ),
    ("connection-pool", "database connection pool exhausted"),
    ("disk-full", "disk full, writes failing with ENOSPC"),
    ("consumer-lag", "consumer lag growing without bound"),
    ("deadlock", "transactions aborted with deadlock detected"),
    (
        "build-failure",
        "build fails with java.lang.OutOfMemoryError in tests",
    ),
    ("dns", "DNS resolution failures for internal hosts"),
    ("crash-loop", "CrashLoopBackOff right after the deploy"),
    ("replication-lag", "replica lag above ten minutes"),
    ("rate-limit", "clients get 429 Too Many Requests"),
    ("cache-eviction", "cache evicting keys, hit ratio collapsed"),
    ("cron-missed", "nightly cron job did not run"),
    ("memory-leak", "heap grows until the process restarts"),
    (
        "thread-starvation",
        "request threads all blocked, queue saturated",
    ),
    (
        "config-drift",
        "feature flag config differs between regions",
    ),
    (
        "upstream-timeout",
        "timeouts calling the downstream dependency",
    ),
    ("auth-failure", "users logged out, token validation failing"),
];

const COMPONENTS: [(&str, &str); 25] = [
    ("service", "checkout"),
    ("service", "payments-gateway"),
    ("service", "surveys-module"),
    ("service", "search-indexer"),
    ("service", "auth-service"),
    ("service", "notification-worker"),
    ("database", "inventory-db"),
    ("service", "orders-api"),
    ("pipeline", "billing-batch"),
    ("queue", "kafka-events"),
    ("cache", "redis-sessions"),
    ("database", "postgres-main"),
    ("database", "elasticsearch"),
    ("pipeline", "jenkins"),
    ("cluster", "k8s-prod"),
    ("network", "nginx-ingress"),
    ("service", "s3-uploader"),
    ("service", "grafana"),
    ("service", "vault"),
    ("network", "dns-resolver"),
    ("service", "recommendations"),
    ("service", "shipping-rates"),
    ("queue", "rabbitmq-jobs"),
    ("host", "bastion"),
    ("library", "http-client"),
];

const CAUSES: [&str; 4] = [
    "a recent deploy changed the resource limits",
    "an upstream dependency degraded and retries amplified the load",
    "a configuration value was set too low for current traffic",
    "a batch job competed for the same resources at peak time",
];

const QUERY_SYSTEMS: [&str; 5] = ["kubernetes", "production", "Jenkins", "AWS", "on-call"];

struct Args {
    /// `--corpus DIR`: episode and query texts from DIR/incidents.jsonl and DIR/queries.jsonl.
    corpus: Option<PathBuf>,
    /// `--episodes FILE`: with `--corpus`, the episodes from FILE instead of DIR/incidents.jsonl.
    episodes: Option<PathBuf>,
    sizes: Vec<usize>,
    queries: usize,
    pool: usize,
    recall: usize,
    rerank: bool,
    /// `None`: as configured (`late_interaction.enabled`).
    late: Option<bool>,
}

fn parse_args() -> Args {
    let mut args = Args {
        corpus: None,
        episodes: None,
        sizes: vec![1_000, 10_000, 100_000],
        queries: 100,
        pool: 2_000,
        recall: 0,
        rerank: false,
        late: None,
    };
    let raw: Vec<String> = std::env::args().skip(1).collect();
    for pair in raw.chunks(2) {
        let value = pair.get(1).map(String::as_str).unwrap_or("");
        let number = |v: &str| {
            v.parse::<usize>()
                .unwrap_or_else(|_| panic!("not a number: {v}"))
        };
        match pair[0].as_str() {
            "--sizes" => args.sizes = value.split(',').map(number).collect(),
            "--queries" => args.queries = number(value),
            "--pool" => args.pool = number(value),
            "--corpus" => args.corpus = Some(PathBuf::from(value)),
            "--episodes" => args.episodes = Some(PathBuf::from(value)),
            "--recall" => args.recall = number(value),
            "--rerank" => args.rerank = number(value) != 0,
            "--late" => args.late = Some(number(value) != 0),
            other => panic!("unknown argument {other}; see the file header"),
        }
    }
    args
}

/// What one pool text is made of.
#[derive(Clone)]
struct PoolEntry {
    issue_type: String,
    /// (type, name)
    component: (String, String),
    description: String,
    summary: String,
    cause: String,
    opening_message: Option<String>,
    key_findings: Vec<String>,
}

impl PoolEntry {
    /// The text the worker embeds (and encodes into token vectors) for an episode of these
    /// fields.
    fn embedding_text(&self) -> String {
        deja_domain::embedding_text(
            &self.issue_type,
            &self.description,
            self.opening_message.as_deref(),
            &self.summary,
            &self.key_findings,
            Some(&self.cause),
        )
    }

    fn cause_text(&self) -> String {
        deja_domain::cause_text(
            &self.issue_type,
            &self.description,
            &self.summary,
            Some(&self.cause),
        )
    }
}

/// Episode and query texts of a labelled corpus (`--corpus`), in place of the synthetic ones:
/// episodes as long as real ones, where the cross-encoder's cost per pair shows.
struct Corpus {
    /// Names the episodes' source in bench org ids and cache files: `corpus` for
    /// DIR/incidents.jsonl, else the `--episodes` file's stem.
    label: String,
    episodes: Vec<PoolEntry>,
    queries: Vec<String>,
}

static CORPUS: std::sync::OnceLock<Corpus> = std::sync::OnceLock::new();

fn load_corpus(dir: &Path, episodes: Option<&Path>) -> Corpus {
    let read = |path: &Path| {
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let label = match episodes {
        None => "corpus".to_owned(),
        Some(file) => org_label(file),
    };
    let episodes_file = episodes.map_or_else(|| dir.join("incidents.jsonl"), Path::to_path_buf);
    let now = chrono::Utc::now();
    // Through the import code path, so the texts are what `deja import` stores.
    let episodes = read(&episodes_file)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let episode = deja_domain::import::IncidentRecord::parse(line)
                .and_then(|record| record.to_episode(now))
                .unwrap_or_else(|e| panic!("an incident record: {e}"));
            let component = episode
                .components
                .first()
                .map(|c| (c.kind.clone(), c.name.clone()))
                .unwrap_or_default();
            PoolEntry {
                issue_type: episode.issue_type,
                component,
                description: episode.issue_description,
                summary: episode.summary,
                cause: episode.root_cause.unwrap_or_default(),
                opening_message: episode.opening_message,
                key_findings: episode.key_findings,
            }
        })
        .collect::<Vec<_>>();
    let queries = read(&dir.join("queries.jsonl"))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let query: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
            query["query"].as_str().unwrap_or("").to_owned()
        })
        .collect::<Vec<_>>();
    assert!(
        !episodes.is_empty() && !queries.is_empty(),
        "an empty corpus in {} ({})",
        dir.display(),
        episodes_file.display()
    );
    Corpus {
        label,
        episodes,
        queries,
    }
}

/// A file's stem as a part of an org id: lowercase letters, digits and `-`.
fn org_label(file: &Path) -> String {
    let stem = file
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("records");
    stem.chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' => c,
            'A'..='Z' => c.to_ascii_lowercase(),
            _ => '-',
        })
        .collect()
}

/// Pool text `i`.
fn pool_entry(i: usize) -> PoolEntry {
    if let Some(corpus) = CORPUS.get() {
        return corpus.episodes[i % corpus.episodes.len()].clone();
    }
    let (issue_type, symptom) = SYMPTOMS[i % SYMPTOMS.len()];
    let component = COMPONENTS[(i / SYMPTOMS.len()) % COMPONENTS.len()];
    let cause = CAUSES[(i / (SYMPTOMS.len() * COMPONENTS.len())) % CAUSES.len()];
    PoolEntry {
        issue_type: issue_type.to_owned(),
        component: (component.0.to_owned(), component.1.to_owned()),
        description: format!("{} {symptom}", component.1),
        summary: format!("{symptom} on {}; {cause}", component.1),
        cause: cause.to_owned(),
        opening_message: None,
        key_findings: Vec::new(),
    }
}

fn query_text(q: usize) -> String {
    if let Some(corpus) = CORPUS.get() {
        return corpus.queries[q % corpus.queries.len()].clone();
    }
    let (_, symptom) = SYMPTOMS[(q * 7) % SYMPTOMS.len()];
    let component = COMPONENTS[(q * 3) % COMPONENTS.len()].1;
    format!(
        "{symptom} {component} {}",
        QUERY_SYSTEMS[q % QUERY_SYSTEMS.len()]
    )
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn settings() -> Settings {
    let mut settings = Settings::load(None).expect("settings");
    let root = repo_root();
    if settings.embedding.model_dir.is_relative() {
        settings.embedding.model_dir = root.join(&settings.embedding.model_dir);
    }
    if settings.embedding.ort_dylib_path.is_relative()
        && !settings.embedding.ort_dylib_path.as_os_str().is_empty()
    {
        settings.embedding.ort_dylib_path = root.join(&settings.embedding.ort_dylib_path);
    }
    if settings.late_interaction.model_dir.is_relative() {
        settings.late_interaction.model_dir = root.join(&settings.late_interaction.model_dir);
    }
    if settings.reranker.model_dir.is_relative() {
        settings.reranker.model_dir = root.join(&settings.reranker.model_dir);
    }
    // Latencies are what is measured; the deadline must not cut them off.
    settings.search.deadline_ms = 60_000;
    settings
}

/// Each pool entry's text as `text` (`PoolEntry::embedding_text` or `PoolEntry::cause_text`)
/// makes it from the entry's fields.
fn pool_texts(pool: usize, text: fn(&PoolEntry) -> String) -> Vec<String> {
    (0..pool).map(|i| text(&pool_entry(i))).collect()
}

/// `texts` embedded 64 at a time; `what` names them if the model fails.
fn embed_in_chunks(embedder: &dyn Embedder, texts: &[String], what: &str) -> Vec<Vec<f32>> {
    let mut vectors = Vec::with_capacity(texts.len());
    for chunk in texts.chunks(64) {
        vectors.extend(
            embedder
                .embed(chunk)
                .unwrap_or_else(|e| panic!("embedding {what}: {e}")),
        );
    }
    vectors
}

/// The pool's vectors, embedded once and cached next to the other local assets. The cache is
/// keyed by the model and the texts, so a change of either (the embedded text gained the key
/// findings in the twenty-third session) embeds the pool again.
fn pool_vectors(embedder: &dyn Embedder, pool: usize) -> Vec<Vec<f32>> {
    let texts = pool_texts(pool, PoolEntry::embedding_text);
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    std::hash::Hash::hash(&(embedder.model_id(), &texts), &mut hasher);
    let cache = repo_root().join(format!(
        ".deja/bench/search_bench_pool_{pool}_{:016x}.json",
        std::hash::Hasher::finish(&hasher)
    ));
    if let Ok(text) = std::fs::read_to_string(&cache) {
        if let Ok(vectors) = serde_json::from_str::<Vec<Vec<f32>>>(&text) {
            if vectors.len() == pool {
                return vectors;
            }
        }
    }
    let started = Instant::now();
    let vectors = embed_in_chunks(embedder, &texts, "the pool");
    eprintln!("embedded {pool} pool texts in {:.1?}", started.elapsed());
    if let Some(dir) = cache.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = std::fs::write(&cache, serde_json::to_string(&vectors).unwrap_or_default());
    vectors
}

/// SplitMix64: deterministic noise, so a re-run reproduces the same bulk vectors.
fn splitmix(state: &mut u64) -> f64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 52) as f64 - 1.0
}

fn perturbed(base: &[f32], seed: u64) -> Vec<f32> {
    let mut state = seed;
    let raw: Vec<f64> = base
        .iter()
        .map(|x| f64::from(*x) + NOISE * splitmix(&mut state))
        .collect();
    let norm = raw.iter().map(|x| x * x).sum::<f64>().sqrt();
    raw.iter().map(|x| (x / norm) as f32).collect()
}

/// The recognition vectors of each pool text for seeding: the late-interaction token vectors
/// with their stamp, and the cause vector (the family order's).
struct PoolTokens {
    model: String,
    dims: usize,
    entries: Vec<(Vec<u8>, String, usize)>,
    cause_model: String,
    causes: Vec<Vec<f32>>,
}

fn pool_tokens(
    encoder: &dyn deja_embed::LateEncoder,
    embedder: &dyn Embedder,
    pool: usize,
) -> PoolTokens {
    let started = Instant::now();
    let model = encoder.model_id().to_owned();
    let texts = pool_texts(pool, PoolEntry::embedding_text);
    let causes = embed_in_chunks(
        embedder,
        &pool_texts(pool, PoolEntry::cause_text),
        "the pool's cause texts",
    );
    let (mut entries, mut dims) = (Vec::with_capacity(pool), 0);
    for chunk in texts.chunks(64) {
        let vectors = encoder
            .encode(chunk)
            .expect("encoding the pool's word pieces");
        for (text, vectors) in chunk.iter().zip(vectors) {
            dims = vectors.dims();
            let stamp = deja_domain::recognition::source_stamp(&model, text);
            entries.push((vectors.to_bytes(), stamp, vectors.len()));
        }
    }
    eprintln!(
        "encoded the word pieces of {pool} pool texts in {:.1?}",
        started.elapsed()
    );
    PoolTokens {
        model,
        dims,
        entries,
        cause_model: embedder.model_id().to_owned(),
        causes,
    }
}

fn row(
    org: &str,
    i: usize,
    pool: &[Vec<f32>],
    model: &str,
    tokens: Option<&PoolTokens>,
) -> BoltType {
    let PoolEntry {
        issue_type,
        component: (kind, name),
        description,
        summary,
        cause,
        opening_message,
        key_findings,
    } = pool_entry(i % pool.len());
    let correlation_id = format!("bench-{i:06}");
    let key = deja_domain::EpisodeKey::new(org, &correlation_id);
    let at = chrono::Utc::now() - chrono::Duration::minutes(i as i64);
    let values: Vec<(&str, BoltType)> = vec![
        ("key", key.composite().into()),
        ("id", key.episode_id().into()),
        ("org", org.into()),
        ("team", format!("team-{}", i % TEAMS).into()),
        ("correlation_id", correlation_id.into()),
        ("issue_type", issue_type.into()),
        ("description", description.into()),
        ("summary", summary.into()),
        ("root_cause", cause.into()),
        ("opening_message", opening_message.into()),
        ("key_findings_text", key_findings.join("\n").into()),
        ("key_findings", key_findings.into()),
        (
            "component_key",
            deja_graph::component_key(org, &deja_domain::Component::new(&kind, &name)).into(),
        ),
        ("component_type", kind.into()),
        ("component_name", name.into()),
        (
            "embedding",
            perturbed(&pool[i % pool.len()], i as u64 + 1).into(),
        ),
        ("model", model.into()),
        ("at", at.into()),
    ];
    let mut values = values;
    match tokens {
        Some(tokens) => {
            let (bytes, stamp, count) = &tokens.entries[i % pool.len()];
            values.push((
                "tokens",
                BoltType::Bytes(neo4rs::BoltBytes::new(bytes.clone().into())),
            ));
            values.push(("token_stamp", stamp.clone().into()));
            values.push(("token_model", tokens.model.clone().into()));
            values.push(("token_count", (*count as i64).into()));
            values.push(("token_dims", (tokens.dims as i64).into()));
            values.push(("cause_vector", tokens.causes[i % pool.len()].clone().into()));
            values.push(("cause_model", tokens.cause_model.clone().into()));
        }
        None => values.push(("tokens", BoltType::Null(neo4rs::BoltNull))),
    }
    values
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect::<HashMap<String, BoltType>>()
        .into()
}

async fn seed(
    settings: &Settings,
    store: &GraphStore,
    org: &str,
    size: usize,
    pool: &[Vec<f32>],
    model: &str,
    tokens: Option<&PoolTokens>,
) {
    let present = store
        .count_searchable(&deja_domain::Scope::org(org))
        .await
        .expect("count");
    if present >= size {
        return;
    }
    let config = neo4rs::ConfigBuilder::default()
        .uri(settings.neo4j.uri.as_str())
        .user(settings.neo4j.user.as_str())
        .password(settings.neo4j.password.expose())
        .db(settings.neo4j.database.as_str())
        .build()
        .expect("neo4j config");
    let graph = neo4rs::Graph::connect(config).expect("neo4j");
    let started = Instant::now();
    // Token vectors are ~60 KB an episode of the corpus: smaller batches keep a request small.
    let batch = if tokens.is_some() { BATCH / 10 } else { BATCH };
    for start in (0..size).step_by(batch) {
        let rows: Vec<BoltType> = (start..(start + batch).min(size))
            .map(|i| row(org, i, pool, model, tokens))
            .collect();
        graph
            .run(neo4rs::query(SEED_CYPHER).param("rows", rows))
            .await
            .expect("seeding");
    }
    eprintln!(
        "seeded {size} episodes of {org} in {:.1?}",
        started.elapsed()
    );
}

/// (sum of seconds, count) of every histogram series in the process's Prometheus registry,
/// keyed by `metric{labels}`: the difference of two snapshots gives each stage's mean.
fn histogram_sums() -> HashMap<String, (f64, f64)> {
    let text = deja_telemetry::prometheus().render();
    let mut sums: HashMap<String, (f64, f64)> = HashMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        let (name, labels) = series.split_once('{').unwrap_or((series, ""));
        let labels = labels.trim_end_matches('}');
        if let Some(base) = name.strip_suffix("_sum") {
            sums.entry(format!("{base}{{{labels}}}")).or_default().0 = value;
        } else if let Some(base) = name.strip_suffix("_count") {
            sums.entry(format!("{base}{{{labels}}}")).or_default().1 = value;
        }
    }
    sums
}

/// Mean milliseconds per search of each stage and each Cypher statement between two
/// snapshots, as `stage=ms` pairs (statements are called `q:<file>`).
fn breakdown(
    before: &HashMap<String, (f64, f64)>,
    after: &HashMap<String, (f64, f64)>,
    searches: usize,
) -> String {
    let mut parts = Vec::new();
    let mut keys: Vec<&String> = after.keys().collect();
    keys.sort();
    for key in keys {
        let (sum, count) = after[key];
        let (sum0, count0) = before.get(key).copied().unwrap_or((0.0, 0.0));
        if count - count0 < 0.5 {
            continue;
        }
        let label = if let Some(rest) = key.strip_prefix("deja_api_search_stage_seconds{stage=") {
            rest.trim_matches(|c| c == '"' || c == '}').to_owned()
        } else if let Some(rest) = key.strip_prefix("deja_graph_query_duration_seconds{query=") {
            format!("q:{}", rest.trim_matches(|c| c == '"' || c == '}'))
        } else {
            continue;
        };
        let per_search_ms = (sum - sum0) * 1000.0 / searches as f64;
        let calls = (count - count0) / searches as f64;
        parts.push(format!("{label}={per_search_ms:.1}ms(x{calls:.2})"));
    }
    parts.join(" ")
}

/// The share of the exact scan's top `k` that `semantic_search` returns, over `queries`
/// query texts embedded with the bench's model.
async fn recall(
    store: &GraphStore,
    embedder: &dyn Embedder,
    scope: &deja_domain::Scope,
    settings: &Settings,
    queries: usize,
) -> f64 {
    let plan = deja_graph::SearchPlanSettings::from(&settings.search);
    let k = settings.search.candidates;
    let none = deja_graph::SearchFilters::default();
    let (mut found, mut wanted) = (0usize, 0usize);
    for q in 0..queries {
        let text = query_text(1_000 + q);
        let vector = embedder
            .embed(std::slice::from_ref(&text))
            .expect("embedding a query")
            .remove(0);
        let exact = store
            .semantic_exact(scope, &vector, k, &none)
            .await
            .expect("exact scan");
        let index = store
            .semantic_search(scope, &vector, k, &none, &plan)
            .await
            .expect("search");
        let ids: std::collections::HashSet<&str> =
            index.iter().map(|(e, _)| e.id.as_str()).collect();
        wanted += exact.len();
        found += exact
            .iter()
            .filter(|(e, _)| ids.contains(e.id.as_str()))
            .count();
    }
    found as f64 / wanted.max(1) as f64
}

/// How long embedding one query takes on its own, through the same blocking-pool path a
/// search uses: every search pays it before any store work, so it is the floor of each row.
async fn embedding_floor(embedder: Arc<dyn Embedder>, queries: usize) -> Vec<Duration> {
    let mut times = Vec::with_capacity(queries);
    for q in 0..queries + WARMUP {
        let started = Instant::now();
        deja_embed::embed_blocking(embedder.clone(), vec![query_text(q)])
            .await
            .expect("embedding a query");
        if q >= WARMUP {
            times.push(started.elapsed());
        }
    }
    times.sort();
    times
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

async fn measure(
    service: &SearchService,
    org: &str,
    team: Option<usize>,
    queries: usize,
) -> (Vec<Duration>, usize, String) {
    let mut times = Vec::with_capacity(queries);
    let mut strategies = 0;
    let mut before = histogram_sums();
    for q in 0..queries + WARMUP {
        if q == WARMUP {
            before = histogram_sums();
        }
        let mut request = SearchRequest::new(org, query_text(q));
        request.team = team.map(|_| format!("team-{}", q % TEAMS));
        let started = Instant::now();
        let response = service.search(&request).await.expect("search");
        if q >= WARMUP {
            times.push(started.elapsed());
            strategies += usize::from(response.strategy.is_some());
        }
    }
    times.sort();
    let stages = breakdown(&before, &histogram_sums(), queries);
    (times, strategies, stages)
}

#[tokio::main]
async fn main() {
    let args = parse_args();
    assert!(
        args.episodes.is_none() || args.corpus.is_some(),
        "--episodes needs --corpus (the queries)"
    );
    let pool_size = match &args.corpus {
        Some(dir) => {
            let corpus = load_corpus(dir, args.episodes.as_deref());
            let size = corpus.episodes.len();
            let _ = CORPUS.set(corpus);
            size
        }
        None => args.pool,
    };
    // The stage breakdown is read back from the process's own /metrics registry.
    let _ = deja_telemetry::prometheus();
    let settings = settings();
    let store = GraphStore::connect(&settings.neo4j).await.expect("neo4j");
    store
        .migrate()
        .await
        .expect("migrate (is deploy/services.sh up?)");
    let embedder: Arc<dyn Embedder> = Arc::new(
        LocalEmbedder::load(&settings.embedding).expect("embedding model (deploy/embeddings.sh)"),
    );
    let pool = pool_vectors(embedder.as_ref(), pool_size);
    // No job queue: the strategy lookup runs, nothing is enqueued.
    let reranker = if args.rerank {
        let loaded = deja_recognition::load_cross_encoder(&settings).await;
        assert!(
            loaded.is_some(),
            "--rerank 1: no reranker (deploy/embeddings.sh, [reranker])"
        );
        loaded
    } else {
        None
    };
    let late_on = args.late.unwrap_or(settings.late_interaction.enabled);
    let late = if late_on {
        let mut on = settings.clone();
        on.late_interaction.enabled = true;
        let loaded = deja_recognition::load_late_encoder(&on).await;
        assert!(
            loaded.is_some(),
            "late interaction on: its model did not load (deploy/embeddings.sh, [late_interaction])"
        );
        loaded
    } else {
        None
    };
    let tokens = late
        .as_ref()
        .map(|encoder| pool_tokens(encoder.as_ref(), embedder.as_ref(), pool_size));
    let service = SearchService::new(
        store.clone(),
        Some(embedder.clone()),
        None,
        &settings.search,
    )
    .with_reranker(reranker)
    .with_late(late);
    let version = store.server_version().await.expect("server version");
    let index = store.vector_index().await.expect("vector index");
    let filtered = settings.search.in_index_filters && index == deja_graph::VectorIndex::Scoped;
    println!(
        "server: Neo4j {} at {}; vector index {}; path: {}",
        version.text,
        settings.neo4j.uri,
        index.name(),
        if filtered {
            "filtered inside the index (SEARCH ... WHERE)"
        } else {
            "count + exact scan / post-filtered index rounds"
        }
    );
    println!(
        "search latency, {} queries per row (after {WARMUP} warm-up), limit {}, exact_scan_max {}, {}",
        args.queries,
        settings.search.default_limit,
        settings.search.exact_scan_max,
        match (late_on, args.rerank) {
            (true, false) => format!(
                "late interaction on {} candidates (no cross-encoder)",
                settings.search.rerank_candidates
            ),
            (true, true) => format!(
                "late interaction and the cross-encoder on {} candidates",
                settings.search.rerank_candidates
            ),
            (false, true) => format!(
                "cross-encoder on {} candidates",
                settings.search.rerank_candidates
            ),
            (false, false) => "similarity only (no late interaction, no cross-encoder)".to_owned(),
        }
    );
    if args.queries > 0 {
        let floor = embedding_floor(embedder.clone(), args.queries).await;
        let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1000.0);
        println!(
            "floor: the query embedding alone (the rows' query texts, one at a time, as a search \
             embeds them): p50 {} p95 {} p99 {}",
            ms(percentile(&floor, 0.50)),
            ms(percentile(&floor, 0.95)),
            ms(percentile(&floor, 0.99)),
        );
    }
    println!(
        "{:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}",
        "episodes", "scope", "searched", "p50", "p95", "p99", "strategies"
    );
    for size in &args.sizes {
        // v3: with cause vectors beside the token vectors (v2 orgs have none).
        let version = if tokens.is_some() { "v3" } else { "v1" };
        let org = match CORPUS.get() {
            Some(corpus) => format!("bench-search-{}-{version}-{size}", corpus.label),
            None => format!("bench-search-{version}-{size}"),
        };
        seed(
            &settings,
            &store,
            &org,
            *size,
            &pool,
            embedder.model_id(),
            tokens.as_ref(),
        )
        .await;
        if args.queries == 0 {
            continue; // `--queries 0`: seed only
        }
        for (label, team) in [("team", Some(0)), ("org-wide", None)] {
            let scope = match team {
                Some(_) => deja_domain::Scope::team(&org, "team-0"),
                None => deja_domain::Scope::org(&org),
            };
            let searched = store.count_searchable(&scope).await.expect("count");
            let (times, strategies, stages) = measure(&service, &org, team, args.queries).await;
            let ms = |d: Duration| format!("{:.1}ms", d.as_secs_f64() * 1000.0);
            println!(
                "{size:>8} {label:>9} {searched:>9} {:>9} {:>9} {:>9} {strategies:>10}",
                ms(percentile(&times, 0.50)),
                ms(percentile(&times, 0.95)),
                ms(percentile(&times, 0.99)),
            );
            println!("{:>19} mean per search: {stages}", "");
            if args.recall > 0 {
                let share = recall(&store, embedder.as_ref(), &scope, &settings, args.recall).await;
                println!(
                    "{:>19} recall of the exact top {} over {} queries: {:.3}",
                    "", settings.search.candidates, args.recall, share
                );
            }
        }
    }
}
