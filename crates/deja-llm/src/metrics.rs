//! The adapter's metrics, declared in one place. One count per `extract`/`synthesize` call
//! (a repair round trip is part of its call), so rates read as "episodes attempted".

use crate::Usage;
use std::time::Duration;

/// Labels `kind` (`extract` | `synthesize`) and `outcome` (`ok` | `repaired` |
/// `invalid_reply` | `transient` | `permanent`).
pub const REQUESTS_TOTAL: &str = "deja_llm_requests_total";
/// Label `kind`. Wall time of the whole call, repair included.
pub const LATENCY_SECONDS: &str = "deja_llm_latency_seconds";
/// Labels `kind` and `direction` (`prompt` | `completion`), as reported by the server.
pub const TOKENS_TOTAL: &str = "deja_llm_tokens_total";

/// Registers help texts with whatever recorder is installed (call once at start).
pub fn describe() {
    metrics::describe_counter!(REQUESTS_TOTAL, "LLM calls by kind and outcome");
    metrics::describe_histogram!(
        LATENCY_SECONDS,
        metrics::Unit::Seconds,
        "LLM call latency, repair attempt included"
    );
    metrics::describe_counter!(TOKENS_TOTAL, "LLM tokens by kind and direction");
}

pub(crate) fn record(kind: &'static str, outcome: &'static str, latency: Duration, usage: &Usage) {
    metrics::counter!(REQUESTS_TOTAL, "kind" => kind, "outcome" => outcome).increment(1);
    metrics::histogram!(LATENCY_SECONDS, "kind" => kind).record(latency.as_secs_f64());
    metrics::counter!(TOKENS_TOTAL, "kind" => kind, "direction" => "prompt")
        .increment(usage.prompt_tokens);
    metrics::counter!(TOKENS_TOTAL, "kind" => kind, "direction" => "completion")
        .increment(usage.completion_tokens);
}
