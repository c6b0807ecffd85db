//! The worker's metrics, declared in one place. Exposed in Prometheus text format on
//! `worker.metrics_addr` (`GET /metrics`).

use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};
use std::time::Duration;

pub const PROCESSED: &str = "deja_worker_events_processed_total";
pub const RETRIED: &str = "deja_worker_events_retried_total";
pub const DEAD_LETTERED: &str = "deja_worker_events_dead_lettered_total";
pub const EXTRACTION_FAILURES: &str = "deja_worker_extraction_failures_total";
pub const EMBEDDING_LATENCY: &str = "deja_worker_embedding_latency_seconds";
pub const CONCLUSIONS_GIVEN: &str = "deja_worker_conclusions_given_total";
pub const COPIES_DROPPED: &str = "deja_worker_copied_untrusted_text_dropped_total";
pub const STRATEGIES_SYNTHESIZED: &str = "deja_worker_strategies_synthesized_total";
pub const STRATEGIES_SKIPPED: &str = "deja_worker_strategy_jobs_skipped_total";
pub const REEXTRACTIONS: &str = "deja_worker_reextractions_total";
pub const PAUSED: &str = "deja_worker_paused";
pub const PANICKED: &str = "deja_worker_deliveries_panicked_total";
pub const DLQ_DEPTH: &str = "deja_dlq_depth";
pub const RECURRENCE_LINKS: &str = "deja_worker_recurrence_links_total";
pub const TOKEN_VECTORS: &str = "deja_worker_token_vectors_total";
pub const SECOND_LOOKS: &str = "deja_worker_root_cause_second_looks_total";
pub const TYPE_LOOKS: &str = "deja_worker_issue_type_second_looks_total";
pub const AFFIRMED_DROPPED: &str = "deja_worker_ruled_out_affirmed_dropped_total";
pub const SUPERSEDED: &str = "deja_worker_turns_superseded_total";

pub fn describe() {
    // The embedding micro-batcher's batch sizes and waits (`deja_embed_batch_*`).
    deja_embed::describe_batch_metrics();
    describe_counter!(
        PROCESSED,
        "turn events merged into an episode (including no-op redeliveries)"
    );
    describe_counter!(
        RETRIED,
        "turn events sent to the delayed-retry path, by reason"
    );
    describe_counter!(
        DEAD_LETTERED,
        "turn events sent to the dead-letter queue, by reason"
    );
    describe_counter!(
        EXTRACTION_FAILURES,
        "turns stored as failed extractions after the last attempt"
    );
    describe_counter!(
        CONCLUSIONS_GIVEN,
        "turns carrying a conclusion block, by completeness (complete = no llm call)"
    );
    describe_counter!(
        SUPERSEDED,
        "turns older than the episode's conclusion, merged without an llm call (skills only)"
    );
    describe_counter!(
        COPIES_DROPPED,
        "sentences or items of a conclusion dropped for copying tool output or input"
    );
    describe_counter!(
        AFFIRMED_DROPPED,
        "extracted ruled-out items dropped because the turn's own answer affirms them"
    );
    describe_histogram!(
        EMBEDDING_LATENCY,
        metrics::Unit::Seconds,
        "time to embed one episode, waiting for its micro-batch included"
    );
    describe_counter!(
        STRATEGIES_SYNTHESIZED,
        "strategies written by the synthesizer"
    );
    describe_counter!(
        REEXTRACTIONS,
        "extractions redone because another turn of the conversation committed meanwhile"
    );
    describe_counter!(
        STRATEGIES_SKIPPED,
        "synthesis jobs skipped because the strategy was current"
    );
    describe_gauge!(
        PAUSED,
        "1 while consumption is paused because a dependency (neo4j, llm, rabbitmq) is down"
    );
    describe_counter!(
        PANICKED,
        "deliveries whose processing panicked (dead-lettered as `panicked`)"
    );
    describe_counter!(
        SECOND_LOOKS,
        "second looks at a doubtful or thin extracted root cause, by reason (kept_abandoned, \
         denies, restates_ruled_out, affirms_ruled_out, misses_stated_cause, thin) and outcome \
         (restated, same, none, copied, failed)"
    );
    describe_counter!(
        TYPE_LOOKS,
        "second looks at an extracted issue type that names a ruled-out hypothesis, by outcome \
         (renamed, failed)"
    );
    describe_counter!(
        RECURRENCE_LINKS,
        "recurrence linking after a committed turn, by outcome (linked, unchanged, retracted, \
         skipped, failed)"
    );
    describe_counter!(
        TOKEN_VECTORS,
        "late-interaction token vectors after a committed turn, by outcome (stored, current, \
         failed: the episode is then decided without them until `deja reembed`)"
    );
    describe_gauge!(
        DLQ_DEPTH,
        "dead letters waiting in the dead-letter queue, by reason (refreshed periodically)"
    );
}

pub(crate) fn reextracted() {
    counter!(REEXTRACTIONS).increment(1);
}

pub(crate) fn processed() {
    counter!(PROCESSED).increment(1);
}

pub(crate) fn retried(reason: &str) {
    counter!(RETRIED, "reason" => reason.to_owned()).increment(1);
}

pub(crate) fn dead_lettered(reason: &str) {
    counter!(DEAD_LETTERED, "reason" => reason.to_owned()).increment(1);
}

pub(crate) fn extraction_failed() {
    counter!(EXTRACTION_FAILURES).increment(1);
}

pub(crate) fn conclusion_given(complete: bool) {
    let completeness = if complete { "complete" } else { "partial" };
    counter!(CONCLUSIONS_GIVEN, "completeness" => completeness).increment(1);
}

pub(crate) fn superseded() {
    counter!(SUPERSEDED).increment(1);
}

pub(crate) fn copies_dropped(count: usize) {
    counter!(COPIES_DROPPED).increment(count as u64);
}

pub(crate) fn affirmed_dropped(count: usize) {
    counter!(AFFIRMED_DROPPED).increment(count as u64);
}

pub(crate) fn embedding_latency(elapsed: Duration) {
    histogram!(EMBEDDING_LATENCY).record(elapsed.as_secs_f64());
}

pub(crate) fn strategy_synthesized() {
    counter!(STRATEGIES_SYNTHESIZED).increment(1);
}

pub(crate) fn strategy_skipped() {
    counter!(STRATEGIES_SKIPPED).increment(1);
}

pub(crate) fn paused(reason: &str, paused: bool) {
    gauge!(PAUSED, "reason" => reason.to_owned()).set(if paused { 1.0 } else { 0.0 });
}

pub(crate) fn panicked() {
    counter!(PANICKED).increment(1);
}

pub(crate) fn dlq_depth(reason: &str, depth: u64) {
    gauge!(DLQ_DEPTH, "reason" => reason.to_owned()).set(depth as f64);
}

pub(crate) fn token_vectors(outcome: &'static str) {
    counter!(TOKEN_VECTORS, "outcome" => outcome).increment(1);
}

pub(crate) fn recurrence_link(outcome: &'static str) {
    counter!(RECURRENCE_LINKS, "outcome" => outcome).increment(1);
}

pub(crate) fn second_look(reason: &'static str, outcome: &'static str) {
    counter!(SECOND_LOOKS, "reason" => reason, "outcome" => outcome).increment(1);
}

pub(crate) fn type_look(outcome: &'static str) {
    counter!(TYPE_LOOKS, "outcome" => outcome).increment(1);
}
