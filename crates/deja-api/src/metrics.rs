//! Every metric memory-search records, declared in one place. Rendered by `GET /metrics`
//! through the process-wide recorder of `deja-telemetry`.

use std::time::Duration;

/// Seconds one search (or episode read) took, by the mode that answered (`semantic`,
/// `text`, `timeline`, `get`, `digest`), failures included.
pub const REQUEST_DURATION: &str = "deja_api_request_duration_seconds";
/// Episodes returned per successful search, by mode.
pub const RESULT_COUNT: &str = "deja_api_search_results";
/// Failed searches and reads, by error code.
pub const ERRORS: &str = "deja_api_search_errors_total";
/// Qualifying searches whose strategy was current (`hit`) or missing/stale (`miss`).
pub const STRATEGY_CACHE: &str = "deja_api_strategy_cache_total";
/// Synthesis jobs: `published`, `deduplicated` (another search holds the claim),
/// `cooling_down` (the synthesis of the same sources failed recently), `failed`.
pub const SYNTHESIS_JOBS: &str = "deja_api_synthesis_jobs_total";
/// Qualifying searches whose strategy step ran out of its time limit.
pub const STRATEGY_TIMEOUTS: &str = "deja_api_strategy_timeouts_total";
/// Semantic searches answered by text search because the embedder failed
/// (`embedder_unavailable`), or decided without their rerank stage (`rerank_failed`,
/// `rerank_timeout`, `late_failed`).
pub const FALLBACKS: &str = "deja_api_search_fallback_total";
/// LLM verifications of a search decision: `called`, `cached`, `failed`, `timeout`.
pub const VERIFICATIONS: &str = "deja_api_search_verifications_total";
/// Episodes returned by semantic search, by match label (`strong`, `possible`).
pub const MATCHES: &str = "deja_api_search_matches_total";

/// Recall stamps (`last_recalled_at` on the episodes a search returned), written off the
/// search's path: `stamped`, `skipped` (too many stamps in flight), `failed`.
pub const RECALL_STAMPS: &str = "deja_api_recall_stamps_total";

/// Seconds each stage of a semantic search took: `embed` (the query vector, cache hits
/// included), `retrieve` (the vector and full-text searches, concurrently; every Cypher round
/// trip of them — `deja_graph_query_duration_seconds` splits it by statement), `late` (the
/// candidates' token vectors loaded and scored; the query is encoded during `retrieve`), `rerank`,
/// `decide`, `verify` (when on), `strategy` (lookup, sources and enqueueing included).
pub const STAGE_DURATION: &str = "deja_api_search_stage_seconds";

pub fn request_duration(mode: &'static str, elapsed: Duration) {
    metrics::histogram!(REQUEST_DURATION, "mode" => mode).record(elapsed.as_secs_f64());
}

pub fn result_count(mode: &'static str, count: usize) {
    metrics::histogram!(RESULT_COUNT, "mode" => mode).record(count as f64);
}

pub fn error(code: &'static str) {
    metrics::counter!(ERRORS, "code" => code).increment(1);
}

pub fn strategy_cache(hit: bool) {
    let outcome = if hit { "hit" } else { "miss" };
    metrics::counter!(STRATEGY_CACHE, "outcome" => outcome).increment(1);
}

pub fn synthesis_job(outcome: &'static str) {
    metrics::counter!(SYNTHESIS_JOBS, "outcome" => outcome).increment(1);
}

pub fn fallback(reason: &'static str) {
    metrics::counter!(FALLBACKS, "reason" => reason).increment(1);
}

pub fn stage_duration(stage: &'static str, elapsed: Duration) {
    metrics::histogram!(STAGE_DURATION, "stage" => stage).record(elapsed.as_secs_f64());
}

pub fn match_strength(strength: &'static str) {
    metrics::counter!(MATCHES, "match" => strength).increment(1);
}

pub fn verification(outcome: &'static str) {
    metrics::counter!(VERIFICATIONS, "outcome" => outcome).increment(1);
}

pub fn strategy_timeout() {
    metrics::counter!(STRATEGY_TIMEOUTS).increment(1);
}

pub fn recall_stamp(outcome: &'static str) {
    metrics::counter!(RECALL_STAMPS, "outcome" => outcome).increment(1);
}
