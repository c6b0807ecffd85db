//! deja's settings. Every key is documented in `docs/configuration.md`.
//!
//! Layers, later wins: built-in defaults, then `deja.toml` (or the path given), then
//! environment variables `DEJA__SECTION__KEY` (e.g. `DEJA__NEO4J__PASSWORD`). Validation runs
//! once at start and names the bad key.

mod secret;

pub use secret::Secret;

use deja_domain::digest::JsonPath;
use deja_domain::ranking::RankingParams;
use deja_domain::recognition::{LinkBar, Model, RecognitionParams};
use serde::Deserialize;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("could not load configuration: {0}")]
    Load(#[from] config::ConfigError),
    #[error("invalid configuration: `{key}` {problem}")]
    Invalid { key: &'static str, problem: String },
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub neo4j: Neo4jSettings,
    pub rabbitmq: RabbitSettings,
    pub worker: WorkerSettings,
    pub llm: LlmSettings,
    pub embedding: EmbeddingSettings,
    pub reranker: RerankerSettings,
    pub late_interaction: LateSettings,
    pub search: SearchSettings,
    pub api: ApiSettings,
    pub digest: DigestSettings,
    pub log: LogSettings,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Neo4jSettings {
    pub uri: String,
    pub user: String,
    pub password: Secret,
    pub database: String,
    pub max_connections: usize,
    pub fetch_size: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueType {
    Classic,
    Quorum,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RabbitSettings {
    pub uri: Secret,
    /// Durable topic exchange the agent runtime publishes turn events to.
    pub exchange: String,
    /// The extraction queue's name, and the prefix of every other name (retry levels,
    /// requeue, dead-letter exchange and queue, synthesis queue).
    pub name_prefix: String,
    /// `queue`, the old name of `name_prefix`: still read, and when set (only a file or
    /// `DEJA__RABBITMQ__QUEUE` sets it) it wins. [`Settings::load`] folds it in.
    #[serde(default, rename = "queue")]
    legacy_queue: Option<String>,
    pub queue_type: QueueType,
    /// With `queue_type = "quorum"`: deliveries of one message before the broker dead-letters
    /// it (bounds a message that crashes the worker process); 0 = unlimited.
    pub delivery_limit: u32,
    pub prefetch: u16,
    pub max_attempts: u32,
    pub retry_base_ms: u64,
    pub retry_max_ms: u64,
    pub reconnect_max_ms: u64,
}

impl RabbitSettings {
    /// The queue turn events are consumed from: the prefix itself.
    pub fn extract_queue(&self) -> String {
        self.name_prefix.clone()
    }
    /// The retry exchange's name, which is also the prefix of the retry level queues
    /// (`{name_prefix}.retry.{n}`).
    pub fn retry_exchange(&self) -> String {
        format!("{}.retry", self.name_prefix)
    }
    pub fn requeue_exchange(&self) -> String {
        format!("{}.requeue", self.name_prefix)
    }
    pub fn dead_letter_exchange(&self) -> String {
        format!("{}.dlx", self.name_prefix)
    }
    pub fn dead_letter_queue(&self) -> String {
        format!("{}.dlq", self.name_prefix)
    }
    pub fn synthesis_queue(&self) -> String {
        format!("{}.synthesize", self.name_prefix)
    }

    /// Moves a value given under the old key `queue` into `name_prefix`.
    fn fold_legacy_keys(&mut self) {
        if let Some(queue) = self.legacy_queue.take() {
            self.name_prefix = queue;
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerSettings {
    pub concurrency: usize,
    pub max_event_bytes: usize,
    pub tool_output_budget: usize,
    pub shutdown_grace_secs: u64,
    /// Where `/metrics` and `/readyz` are served; empty disables them.
    pub metrics_addr: String,
    /// Upper bound of the delay between health probes while consumption is paused by a
    /// Neo4j or LLM outage (the delay starts at 250 ms and doubles).
    pub probe_max_ms: u64,
    /// How often the worker counts the dead-letter queue by reason for `deja_dlq_depth`
    /// (0 = never).
    pub dlq_metrics_secs: u64,
    /// After each committed turn, link the conversation's episode to the older episode the
    /// recognition decision strongly matches (`RECURRENCE_OF`), within `search.deadline_ms`.
    pub link_recurrences: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmSettings {
    /// OpenAI-compatible base URL ending in `/v1`. Empty = not configured.
    pub base_url: String,
    pub model: String,
    pub api_key: Secret,
    pub timeout_secs: u64,
    pub max_tokens: u32,
    pub temperature: f32,
}

impl LlmSettings {
    pub fn is_configured(&self) -> bool {
        !self.base_url.trim().is_empty()
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingSettings {
    /// Folder with `model.onnx`, `tokenizer.json`, `config.json`, `special_tokens_map.json`,
    /// `tokenizer_config.json` (fetched by `deploy/embeddings.sh`).
    pub model_dir: PathBuf,
    /// The ONNX Runtime shared library (≥ 1.24). `ORT_DYLIB_PATH` overrides it when this is empty.
    pub ort_dylib_path: PathBuf,
    /// Recorded on every episode so that a model change is detectable.
    pub model_id: String,
    pub dimensions: usize,
    pub max_length: usize,
    pub batch_size: usize,
    /// Query vectors the API keeps in its LRU (`deja_embed::CachingEmbedder`); 0 = no cache.
    pub query_cache_size: usize,
    /// How long the worker's micro-batcher (`deja_embed::BatchingEmbedder`) waits after a
    /// text for other deliveries' texts before one model call; 0 = no batching.
    pub batch_window_ms: u64,
    /// Texts that start a micro-batch at once, before the window ends; 1 = no batching.
    pub max_batch: usize,
    /// ONNX Runtime intra-op threads of the embedding session; 0 = one per core (fastembed's
    /// default).
    pub intra_threads: usize,
}

/// The longest `search.strategy_failure_cooldown_secs` accepted: a year. A failed source set
/// is never refused for good: its episodes change, or a person replays the dead letter.
pub const STRATEGY_FAILURE_COOLDOWN_MAX_SECS: u64 = 365 * 24 * 3600;

/// The longest micro-batching window accepted: every embedding may wait this long, and past a
/// few milliseconds waiting costs more latency than it saves inference.
pub const EMBEDDING_BATCH_WINDOW_MAX_MS: u64 = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VerifyMode {
    Off,
    Llm,
}

/// The cross-encoder that rescores (query, episode) pairs. It shares ONNX Runtime with the
/// embedder (`embedding.ort_dylib_path` / `ORT_DYLIB_PATH`); whether and how search uses it is
/// decided in `[search]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RerankerSettings {
    /// Folder with `model.onnx`, `tokenizer.json`, `config.json`, `special_tokens_map.json`,
    /// `tokenizer_config.json` (fetched by `deploy/embeddings.sh`).
    pub model_dir: PathBuf,
    /// Names the model in logs and evaluation output.
    pub model_id: String,
    /// Tokens per (query, document) pair, both texts together; longer pairs are truncated.
    pub max_length: usize,
}

/// The reranker's `max_length` bounds: below 16 tokens a pair is mostly special tokens; the
/// model has 512 positions.
pub const RERANKER_MAX_LENGTH_RANGE: std::ops::RangeInclusive<usize> = 16..=512;

/// Late interaction: one vector per word piece of each episode, stored when the episode's
/// text is written, and the query's, compared piece by piece at search time
/// (`deja_domain::recognition::late`). It shares ONNX Runtime with the embedder.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LateSettings {
    /// Writers store token vectors and searches score candidates with them; off = neither
    /// (the stored ones are kept).
    pub enabled: bool,
    /// Folder with `model.onnx`, `tokenizer.json`, `config.json`, `special_tokens_map.json`,
    /// `tokenizer_config.json` (fetched by `deploy/embeddings.sh`).
    pub model_dir: PathBuf,
    /// Recorded with stored vectors: vectors of another model are never compared.
    pub model_id: String,
    /// Word pieces per text, special ones included; the rest of a longer text is cut off.
    pub max_length: usize,
}

/// `late_interaction.max_length` bounds: the two special pieces and one of text; the model
/// has 512 positions.
pub const LATE_MAX_LENGTH_RANGE: std::ops::RangeInclusive<usize> = 3..=512;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchSettings {
    pub default_limit: usize,
    pub max_limit: usize,
    pub deadline_ms: u64,
    /// How long a qualifying search waits for a freshly enqueued strategy (0 = return at once).
    pub strategy_wait_ms: u64,
    /// The strategy step's own time limit (reads of sources and strategy), on top of
    /// `strategy_wait_ms`; past it the search answers without a strategy.
    pub strategy_timeout_ms: u64,
    /// After a synthesis of a source set failed (its job dead-lettered), how long searches
    /// refuse to claim that same source set again (a changed one is claimed at once);
    /// 0 = at once.
    pub strategy_failure_cooldown_secs: u64,
    /// Tenants with at most this many searchable episodes are scanned exactly; bigger ones
    /// use the vector index with over-fetching (see `docs/ranking.md`).
    pub exact_scan_max: usize,
    /// Candidates asked of the vector index per result wanted, for large tenants.
    pub ann_overfetch: usize,
    /// Where the database has the filtering vector index (Neo4j 2026.01+, migration 009),
    /// search inside it; off = the post-filtering plan of 5.26 on every server.
    pub in_index_filters: bool,
    /// Candidates each retrieval stage (vector search, full-text search) contributes.
    pub candidates: usize,
    /// Rerank the fused candidates with the cross-encoder (`[reranker]`); off = the
    /// cosine-only calibration decides.
    pub rerank: bool,
    /// How many fused candidates the cross-encoder reads (its cost grows with it).
    pub rerank_candidates: usize,
    /// Time the reranking stage may take before the search answers without it.
    pub rerank_budget_ms: u64,
    /// `llm`: one LLM call per search confirms or demotes the top matches (hosted models;
    /// the bundled small one is too weak). Off by default.
    pub verify: VerifyMode,
    /// Time the verification may take before the search answers without it.
    pub verify_budget_ms: u64,
    /// Repeated searches reuse a verification (keyed by query, ids and versions).
    pub verify_cache_entries: usize,
    /// The ranking formula's parameters (`deja_domain::ranking`).
    pub ranking: RankingParams,
    /// The recognition decision's calibrations (`deja_domain::recognition`), chosen by
    /// `deja eval retrieval`.
    pub recognition: RecognitionParams,
    /// The bar of the worker's automatic recurrence links over `recognition`: a link is
    /// written with no person looking, from a whole episode standing for the query (not an
    /// agent's symptoms), so it needs a higher confidence than a search's `strong`; chosen
    /// by `deja eval retrieval` over labelled episodes (`deja_domain::recognition::links`).
    pub recurrence: LinkBar,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiToken {
    pub token: Secret,
    pub org: String,
    /// Teams the token may read; empty = every team of the org.
    #[serde(default)]
    pub teams: Vec<String>,
    /// `search` and/or `review`.
    pub scopes: Vec<String>,
    /// Who holds the token: the `by` of review audit records (default `token:<org>`).
    #[serde(default)]
    pub name: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiSettings {
    pub bind: String,
    pub tokens: Vec<ApiToken>,
    /// Serve without tokens; only allowed on a loopback bind address.
    pub dev: bool,
    /// The legacy pre-injection endpoint `/v1/memory/preamble`, kept for comparison only.
    pub preamble_enabled: bool,
    /// Neo4j Browser as the hub's users reach it (`http://host:7474/browser/`). Unset: derived
    /// from a loopback `neo4j.uri` (the Bolt host, port 7474), else the hub shows no link.
    #[serde(default)]
    pub neo4j_browser_url: Option<String>,
}

/// The related-history digest (`POST /v1/memory/digest`): recent episodes about the entities
/// a new investigation's trigger names. Off by default.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DigestSettings {
    pub enabled: bool,
    /// Episodes confirmed within this many days qualify.
    pub window_days: u32,
    /// At most this many episodes per digest.
    pub max_episodes: usize,
    /// Per signal type (lowercase): JSON paths into the trigger's payload, tried in order;
    /// the first that yields values names the entities. `default` serves the signal types
    /// without an entry of their own.
    pub signals: std::collections::BTreeMap<String, Vec<String>>,
}

impl DigestSettings {
    /// The parsed paths for `signal_type` (its own entry, else `default`). Paths were
    /// checked by validation; one that does not parse is skipped.
    pub fn paths_for(&self, signal_type: &str) -> Vec<JsonPath> {
        self.signals
            .get(&signal_type.trim().to_lowercase())
            .or_else(|| self.signals.get(DIGEST_DEFAULT_SIGNAL))
            .map(|paths| {
                paths
                    .iter()
                    .filter_map(|p| JsonPath::parse(p).ok())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The `[digest.signals]` entry for signal types without their own.
pub const DIGEST_DEFAULT_SIGNAL: &str = "default";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Pretty,
    Json,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogSettings {
    pub format: LogFormat,
    /// A `tracing` filter directive, e.g. `info,deja_worker=debug`.
    pub filter: String,
}

/// Thresholds are probabilities with `possible` <= `strong`; weights are finite.
fn check_model(model: &Model) -> Result<(), String> {
    let finite = model.bias.is_finite() && model.weights().iter().all(|w| w.is_finite());
    if !finite {
        return Err("has a weight that is not a finite number".into());
    }
    if !(0.0..=1.0).contains(&model.possible)
        || !(0.0..=1.0).contains(&model.strong)
        || model.possible > model.strong
    {
        return Err("needs 0 <= possible <= strong <= 1".into());
    }
    Ok(())
}

/// The most deliveries a worker processes at once: far past what any LLM endpoint serves,
/// and what a semaphore can count.
pub const MAX_WORKER_CONCURRENCY: usize = 4096;

/// The built-in defaults, as TOML so that the documented file and the code agree.
pub const DEFAULTS: &str = include_str!("defaults.toml");

impl Settings {
    /// Loads defaults, then `file` if it exists (an explicitly given path must exist), then
    /// the `DEJA__` environment.
    pub fn load(file: Option<&Path>) -> Result<Settings, ConfigError> {
        Self::load_with_env(file, None)
    }

    /// [`Settings::load`] with the environment variables of `env` instead of the process's.
    fn load_with_env(
        file: Option<&Path>,
        env: Option<config::Map<String, String>>,
    ) -> Result<Settings, ConfigError> {
        let mut builder = config::Config::builder()
            .add_source(config::File::from_str(DEFAULTS, config::FileFormat::Toml));
        builder = match file {
            Some(path) => builder.add_source(config::File::from(path).required(true)),
            None => builder.add_source(config::File::with_name("deja.toml").required(false)),
        };
        let mut settings: Settings = builder
            .add_source(
                // Values stay strings until a field's type asks for a number or a bool: parsing
                // every value up front ("try_parsing") turned a password "0123456789" into
                // 123456789 and "TRUE" into "true".
                config::Environment::with_prefix("DEJA")
                    .prefix_separator("__")
                    .separator("__")
                    .source(env),
            )
            .build()?
            .try_deserialize()?;
        settings.rabbitmq.fold_legacy_keys();
        settings.validate()?;
        Ok(settings)
    }

    /// Defaults only: what tests start from before overriding what they need.
    pub fn defaults() -> Settings {
        let settings: Settings = config::Config::builder()
            .add_source(config::File::from_str(DEFAULTS, config::FileFormat::Toml))
            .build()
            .and_then(|c| c.try_deserialize())
            .expect("built-in defaults are valid");
        settings
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        fn bad(key: &'static str, problem: impl Into<String>) -> ConfigError {
            ConfigError::Invalid {
                key,
                problem: problem.into(),
            }
        }
        if !self.neo4j.uri.contains("://") {
            return Err(bad(
                "neo4j.uri",
                "must be a URI such as bolt://127.0.0.1:7687",
            ));
        }
        if let Some(url) = self.api.neo4j_browser_url.as_deref().map(str::trim) {
            if !(url.is_empty() || url.starts_with("http://") || url.starts_with("https://")) {
                return Err(bad(
                    "api.neo4j_browser_url",
                    "must be an http:// or https:// address, such as http://127.0.0.1:7474/browser/",
                ));
            }
        }
        if self.neo4j.fetch_size == 0 {
            // Neo4j refuses a PULL of 0 records: every query would fail.
            return Err(bad("neo4j.fetch_size", "must be at least 1"));
        }
        if self.neo4j.max_connections == 0 {
            return Err(bad("neo4j.max_connections", "must be at least 1"));
        }
        if !self.rabbitmq.uri.expose().starts_with("amqp") {
            return Err(bad("rabbitmq.uri", "must be an amqp:// or amqps:// URI"));
        }
        if self.rabbitmq.exchange.trim().is_empty() || self.rabbitmq.name_prefix.trim().is_empty() {
            return Err(bad(
                "rabbitmq.name_prefix",
                "exchange and queue names must not be empty",
            ));
        }
        if self.rabbitmq.max_attempts == 0 {
            return Err(bad("rabbitmq.max_attempts", "must be at least 1"));
        }
        if self.rabbitmq.retry_base_ms == 0
            || self.rabbitmq.retry_max_ms < self.rabbitmq.retry_base_ms
        {
            return Err(bad(
                "rabbitmq.retry_max_ms",
                "must be at least rabbitmq.retry_base_ms, which must be positive",
            ));
        }
        if self.rabbitmq.prefetch == 0 {
            return Err(bad("rabbitmq.prefetch", "must be at least 1"));
        }
        if !(1..=MAX_WORKER_CONCURRENCY).contains(&self.worker.concurrency) {
            return Err(bad(
                "worker.concurrency",
                format!("must be between 1 and {MAX_WORKER_CONCURRENCY}"),
            ));
        }
        if self.worker.max_event_bytes < 1024 {
            return Err(bad("worker.max_event_bytes", "must be at least 1024"));
        }
        if self.worker.probe_max_ms < 250 {
            return Err(bad("worker.probe_max_ms", "must be at least 250"));
        }
        if self.worker.tool_output_budget < 64 {
            return Err(bad("worker.tool_output_budget", "must be at least 64"));
        }
        if self.llm.is_configured() && !self.llm.base_url.starts_with("http") {
            return Err(bad(
                "llm.base_url",
                "must be an http(s) URL such as http://127.0.0.1:8081/v1",
            ));
        }
        if self.llm.timeout_secs == 0 {
            return Err(bad("llm.timeout_secs", "must be at least 1"));
        }
        if self.llm.max_tokens < 64 {
            return Err(bad("llm.max_tokens", "must be at least 64"));
        }
        if self.embedding.dimensions == 0 {
            return Err(bad("embedding.dimensions", "must be positive"));
        }
        if self.embedding.batch_size == 0 {
            return Err(bad("embedding.batch_size", "must be at least 1"));
        }
        if self.embedding.max_batch == 0 {
            return Err(bad(
                "embedding.max_batch",
                "must be at least 1 (1 = no batching)",
            ));
        }
        if self.embedding.batch_window_ms > EMBEDDING_BATCH_WINDOW_MAX_MS {
            return Err(bad(
                "embedding.batch_window_ms",
                format!("must be at most {EMBEDDING_BATCH_WINDOW_MAX_MS} (0 = no batching)"),
            ));
        }
        if self.reranker.model_dir.as_os_str().is_empty() {
            return Err(bad("reranker.model_dir", "must not be empty"));
        }
        if self.reranker.model_id.trim().is_empty() {
            return Err(bad("reranker.model_id", "must not be empty"));
        }
        if !RERANKER_MAX_LENGTH_RANGE.contains(&self.reranker.max_length) {
            return Err(bad(
                "reranker.max_length",
                format!(
                    "must be between {} and {} tokens",
                    RERANKER_MAX_LENGTH_RANGE.start(),
                    RERANKER_MAX_LENGTH_RANGE.end()
                ),
            ));
        }
        if self.late_interaction.model_dir.as_os_str().is_empty() {
            return Err(bad("late_interaction.model_dir", "must not be empty"));
        }
        if self.late_interaction.model_id.trim().is_empty() {
            return Err(bad("late_interaction.model_id", "must not be empty"));
        }
        if !LATE_MAX_LENGTH_RANGE.contains(&self.late_interaction.max_length) {
            return Err(bad(
                "late_interaction.max_length",
                format!(
                    "must be between {} and {} word pieces",
                    LATE_MAX_LENGTH_RANGE.start(),
                    LATE_MAX_LENGTH_RANGE.end()
                ),
            ));
        }
        let ranking = &self.search.ranking;
        if !(-1.0..=1.0).contains(&ranking.similarity_floor) {
            return Err(bad(
                "search.ranking.similarity_floor",
                "must be between -1 and 1",
            ));
        }
        // A range check refuses NaN too, which a `< 0.0` test lets through.
        if !(0.0..f64::INFINITY).contains(&ranking.recency_half_life_days) {
            return Err(bad(
                "search.ranking.recency_half_life_days",
                "must be 0 (off) or positive",
            ));
        }
        for (key, weight) in [
            (
                "search.ranking.effectiveness_weight",
                ranking.effectiveness_weight,
            ),
            ("search.ranking.resolved_weight", ranking.resolved_weight),
        ] {
            if !weight.is_finite() {
                return Err(bad(key, "must be a finite number"));
            }
        }
        if !(0.0..=2.0).contains(&self.llm.temperature) {
            // OpenAI-compatible servers refuse other values with a 400, which fails every turn.
            return Err(bad("llm.temperature", "must be between 0 and 2"));
        }
        if !(0.0..=1.0).contains(&ranking.recency_weight) {
            return Err(bad(
                "search.ranking.recency_weight",
                "must be between 0 and 1",
            ));
        }
        for (key, model) in [
            (
                "search.recognition.reranked",
                &self.search.recognition.reranked,
            ),
            (
                "search.recognition.cosine_only",
                &self.search.recognition.cosine_only,
            ),
        ] {
            check_model(model).map_err(|problem| bad(key, problem))?;
        }
        for (key, bar) in [
            (
                "search.recurrence.reranked",
                self.search.recurrence.reranked,
            ),
            (
                "search.recurrence.cosine_only",
                self.search.recurrence.cosine_only,
            ),
        ] {
            if !(0.0..=1.0).contains(&bar) {
                return Err(bad(key, "must be between 0 and 1 (1 links nothing)"));
            }
        }
        let family = &self.search.recognition.family;
        if !(family.weight >= 0.0 && family.weight.is_finite()) {
            return Err(bad(
                "search.recognition.family.weight",
                "must be 0 (off) or positive",
            ));
        }
        if !(0.0..=1.0).contains(&family.floor) {
            return Err(bad(
                "search.recognition.family.floor",
                "must be between 0 and 1",
            ));
        }
        if self.search.verify == VerifyMode::Llm && !self.llm.is_configured() {
            return Err(bad(
                "search.verify",
                "is `llm` but `llm.base_url` is not configured",
            ));
        }
        if self.search.candidates == 0 || self.search.rerank_candidates == 0 {
            return Err(bad(
                "search.candidates",
                "search.candidates and search.rerank_candidates must be at least 1",
            ));
        }
        if self.search.default_limit == 0 || self.search.default_limit > self.search.max_limit {
            return Err(bad(
                "search.default_limit",
                "must be between 1 and search.max_limit",
            ));
        }
        if self.search.deadline_ms == 0 {
            return Err(bad("search.deadline_ms", "must be positive"));
        }
        if self.search.strategy_failure_cooldown_secs > STRATEGY_FAILURE_COOLDOWN_MAX_SECS {
            return Err(bad(
                "search.strategy_failure_cooldown_secs",
                format!("must be at most {STRATEGY_FAILURE_COOLDOWN_MAX_SECS} (a year; 0 = none)"),
            ));
        }
        if self.search.ann_overfetch == 0 {
            return Err(bad("search.ann_overfetch", "must be at least 1"));
        }
        for (at, token) in self.api.tokens.iter().enumerate() {
            if self.api.tokens[..at]
                .iter()
                .any(|earlier| earlier.token.expose() == token.token.expose())
            {
                // One token would silently grant only one of the entries' org, teams and scopes.
                return Err(bad(
                    "api.tokens.token",
                    format!("entry {} repeats an earlier entry's token", at + 1),
                ));
            }
            if token.token.expose().len() < 16 {
                return Err(bad("api.tokens.token", "must be at least 16 characters"));
            }
            if token.org.trim().is_empty() {
                return Err(bad("api.tokens.org", "must not be empty"));
            }
            if let Some(scope) = token
                .scopes
                .iter()
                .find(|s| !matches!(s.as_str(), "search" | "review"))
            {
                return Err(bad(
                    "api.tokens.scopes",
                    format!("has unknown scope `{scope}`; use search or review"),
                ));
            }
        }
        if !(1..=365).contains(&self.digest.window_days) {
            return Err(bad("digest.window_days", "must be between 1 and 365"));
        }
        if !(1..=50).contains(&self.digest.max_episodes) {
            return Err(bad("digest.max_episodes", "must be between 1 and 50"));
        }
        for (signal, paths) in &self.digest.signals {
            // Signal types are looked up in lower case: another key would never match.
            if signal != &signal.to_lowercase() {
                return Err(bad(
                    "digest.signals",
                    format!(
                        "{signal}: signal types are lower case ({})",
                        signal.to_lowercase()
                    ),
                ));
            }
            for path in paths {
                JsonPath::parse(path)
                    .map_err(|problem| bad("digest.signals", format!("{signal}: {problem}")))?;
            }
        }
        if !matches!(self.log.format, LogFormat::Pretty | LogFormat::Json) {
            return Err(bad("log.format", "must be pretty or json"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn defaults_are_valid() {
        Settings::defaults().validate().unwrap();
    }

    #[test]
    fn the_old_rabbitmq_queue_key_still_names_the_prefix() {
        let mut file = tempfile::NamedTempFile::with_suffix(".toml").unwrap();
        writeln!(file, "[rabbitmq]\nqueue = \"acme.extract\"").unwrap();
        let settings = Settings::load(Some(file.path())).unwrap();
        assert_eq!(settings.rabbitmq.name_prefix, "acme.extract");
        assert_eq!(settings.rabbitmq.dead_letter_queue(), "acme.extract.dlq");

        let mut file = tempfile::NamedTempFile::with_suffix(".toml").unwrap();
        writeln!(file, "[rabbitmq]\nname_prefix = \"acme.extract\"").unwrap();
        let settings = Settings::load(Some(file.path())).unwrap();
        assert_eq!(settings.rabbitmq.extract_queue(), "acme.extract");
    }

    #[test]
    fn a_file_overrides_defaults_and_a_bad_value_names_its_key() {
        let mut file = tempfile::NamedTempFile::with_suffix(".toml").unwrap();
        writeln!(file, "[worker]\nconcurrency = 0").unwrap();
        let err = Settings::load(Some(file.path())).unwrap_err();
        assert!(err.to_string().contains("worker.concurrency"), "{err}");
        // Past any semaphore's count: refused by name, not a panic when the worker starts.
        let mut file = tempfile::NamedTempFile::with_suffix(".toml").unwrap();
        writeln!(file, "[worker]\nconcurrency = 4611686018427387904").unwrap();
        let err = Settings::load(Some(file.path())).unwrap_err();
        assert!(err.to_string().contains("between 1 and 4096"), "{err}");
        // A signal type is looked up in lower case: a key in another case would never match.
        let mut file = tempfile::NamedTempFile::with_suffix(".toml").unwrap();
        writeln!(
            file,
            "[digest.signals]\nAlertManager = [\"labels.service\"]"
        )
        .unwrap();
        let err = Settings::load(Some(file.path())).unwrap_err();
        assert!(
            err.to_string().contains("lower case (alertmanager)"),
            "{err}"
        );
    }

    #[test]
    fn environment_values_keep_their_text_and_still_fill_numbers_bools_and_floats() {
        let env = |pairs: &[(&str, &str)]| {
            let env = pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            Settings::load_with_env(None, Some(env))
        };
        let settings = env(&[
            ("DEJA__NEO4J__PASSWORD", "0123456789"),
            ("DEJA__RABBITMQ__NAME_PREFIX", "TRUE"),
            ("DEJA__WORKER__CONCURRENCY", "3"),
            ("DEJA__SEARCH__RERANK", "true"),
            ("DEJA__SEARCH__RANKING__RECENCY_WEIGHT", "0.25"),
        ])
        .unwrap();
        assert_eq!(settings.neo4j.password.expose(), "0123456789");
        assert_eq!(settings.rabbitmq.name_prefix, "TRUE");
        assert_eq!(settings.worker.concurrency, 3);
        assert!(settings.search.rerank);
        assert_eq!(settings.search.ranking.recency_weight, 0.25);
        let err = env(&[("DEJA__WORKER__CONCURRENCY", "three")]).unwrap_err();
        assert!(err.to_string().contains("concurrency"), "{err}");
        for (key, value, named) in [
            ("DEJA__NEO4J__FETCH_SIZE", "0", "neo4j.fetch_size"),
            (
                "DEJA__SEARCH__RANKING__RECENCY_HALF_LIFE_DAYS",
                "NaN",
                "recency_half_life_days",
            ),
            (
                "DEJA__SEARCH__RANKING__RESOLVED_WEIGHT",
                "inf",
                "resolved_weight",
            ),
            ("DEJA__LLM__TEMPERATURE", "7", "llm.temperature"),
        ] {
            let err = env(&[(key, value)]).unwrap_err();
            assert!(err.to_string().contains(named), "{key}={value}: {err}");
        }
    }

    #[test]
    fn an_unknown_key_is_refused() {
        let mut file = tempfile::NamedTempFile::with_suffix(".toml").unwrap();
        writeln!(file, "[worker]\nconcurency = 3").unwrap();
        let err = Settings::load(Some(file.path())).unwrap_err();
        assert!(err.to_string().contains("concurency"), "{err}");
    }

    #[test]
    fn a_neo4j_browser_url_must_be_a_web_address() {
        let mut file = tempfile::NamedTempFile::with_suffix(".toml").unwrap();
        writeln!(file, "[api]\nneo4j_browser_url = \"bolt://127.0.0.1:7687\"").unwrap();
        let err = Settings::load(Some(file.path())).unwrap_err();
        assert!(err.to_string().contains("api.neo4j_browser_url"), "{err}");
        let mut file = tempfile::NamedTempFile::with_suffix(".toml").unwrap();
        writeln!(
            file,
            "[api]\nneo4j_browser_url = \"http://db.example:7474/browser/\""
        )
        .unwrap();
        let settings = Settings::load(Some(file.path())).unwrap();
        assert_eq!(
            settings.api.neo4j_browser_url.as_deref(),
            Some("http://db.example:7474/browser/")
        );
    }

    #[test]
    fn a_wrong_type_names_its_key() {
        let mut file = tempfile::NamedTempFile::with_suffix(".toml").unwrap();
        writeln!(file, "[search.ranking]\nsimilarity_floor = \"high\"").unwrap();
        let err = Settings::load(Some(file.path())).unwrap_err();
        assert!(err.to_string().contains("similarity_floor"), "{err}");
    }

    #[test]
    fn a_token_given_twice_is_refused() {
        let mut file = tempfile::NamedTempFile::with_suffix(".toml").unwrap();
        let entry = "[[api.tokens]]\ntoken = \"0123456789abcdef0123\"\norg = \"ORG\"\nscopes = [\"search\"]\n";
        write!(
            file,
            "{}{}",
            entry.replace("ORG", "acme"),
            entry.replace("ORG", "other")
        )
        .unwrap();
        let err = Settings::load(Some(file.path())).unwrap_err();
        assert!(err.to_string().contains("repeats"), "{err}");
    }

    #[test]
    fn a_recognition_model_with_possible_above_strong_is_refused() {
        let mut file = tempfile::NamedTempFile::with_suffix(".toml").unwrap();
        writeln!(
            file,
            "[search.recognition.reranked]\nstrong = 0.3\npossible = 0.6"
        )
        .unwrap();
        let err = Settings::load(Some(file.path())).unwrap_err();
        assert!(
            err.to_string().contains("search.recognition.reranked"),
            "{err}"
        );
    }

    #[test]
    fn the_reranker_defaults_point_at_the_fetched_cross_encoder() {
        let reranker = Settings::defaults().reranker;
        assert_eq!(
            reranker.model_dir,
            Path::new(".deja/models/ms-marco-MiniLM-L-12-v2")
        );
        assert_eq!(reranker.model_id, "ms-marco-MiniLM-L-12-v2-int8");
        assert_eq!(reranker.max_length, 192);
    }

    #[test]
    fn a_reranker_max_length_beyond_the_model_positions_names_its_key() {
        for bad_length in [0, 8, 513] {
            let mut settings = Settings::defaults();
            settings.reranker.max_length = bad_length;
            let err = settings.validate().unwrap_err().to_string();
            assert!(err.contains("reranker.max_length"), "{err}");
        }
        let mut settings = Settings::defaults();
        settings.reranker.max_length = 512;
        settings.validate().unwrap();
    }

    #[test]
    fn a_bad_embedding_batch_setting_names_its_key() {
        let mut settings = Settings::defaults();
        settings.embedding.max_batch = 0;
        let err = settings.validate().unwrap_err().to_string();
        assert!(err.contains("embedding.max_batch"), "{err}");

        let mut settings = Settings::defaults();
        settings.embedding.batch_window_ms = EMBEDDING_BATCH_WINDOW_MAX_MS + 1;
        let err = settings.validate().unwrap_err().to_string();
        assert!(err.contains("embedding.batch_window_ms"), "{err}");

        // Both "off" values are valid.
        let mut settings = Settings::defaults();
        settings.embedding.batch_window_ms = 0;
        settings.embedding.max_batch = 1;
        settings.validate().unwrap();
    }

    #[test]
    fn an_empty_reranker_model_dir_names_its_key() {
        // Validated directly: `DEJA__RERANKER__MODEL_DIR`, exported by the test command,
        // would override a file.
        let mut settings = Settings::defaults();
        settings.reranker.model_dir = PathBuf::new();
        let err = settings.validate().unwrap_err();
        assert!(err.to_string().contains("reranker.model_dir"), "{err}");
    }

    #[test]
    fn the_digest_is_off_by_default_and_a_bad_path_names_its_key() {
        let settings = Settings::defaults();
        assert!(!settings.digest.enabled);
        assert_eq!(settings.digest.window_days, 14);
        assert_eq!(settings.digest.max_episodes, 5);
        assert!(!settings.digest.paths_for("alertmanager").is_empty());
        assert_eq!(
            settings.digest.paths_for("no-such-signal"),
            settings.digest.paths_for(DIGEST_DEFAULT_SIGNAL)
        );
        let mut file = tempfile::NamedTempFile::with_suffix(".toml").unwrap();
        writeln!(
            file,
            "[digest.signals]\nalertmanager = [\"labels.service\"]"
        )
        .unwrap();
        let err = Settings::load(Some(file.path())).unwrap_err();
        assert!(err.to_string().contains("digest.signals"), "{err}");
    }

    #[test]
    fn a_failed_synthesis_cools_down_for_an_hour_by_default_and_a_year_at_most() {
        let mut settings = Settings::defaults();
        assert_eq!(settings.search.strategy_failure_cooldown_secs, 3600);
        settings.search.strategy_failure_cooldown_secs = 0;
        settings.validate().unwrap();
        settings.search.strategy_failure_cooldown_secs = STRATEGY_FAILURE_COOLDOWN_MAX_SECS + 1;
        let err = settings.validate().unwrap_err().to_string();
        assert!(
            err.contains("search.strategy_failure_cooldown_secs"),
            "{err}"
        );
    }

    #[test]
    fn a_missing_explicit_file_is_an_error() {
        assert!(Settings::load(Some(Path::new("/nonexistent/deja.toml"))).is_err());
    }
}
