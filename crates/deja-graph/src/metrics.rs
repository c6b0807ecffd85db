//! Every metric the store records, declared in one place. Rendered by `GET /metrics` through
//! the process-wide recorder of `deja-telemetry` (a process without one records nothing).

use std::time::{Duration, Instant};

/// Seconds one Cypher round trip took (sent, executed, every row received), by statement
/// name (`search/semantic_exact_team`, `strategies/sources_team`, ...), failures included.
/// A slow search shows here which of its round trips spent the time.
pub const QUERY_DURATION: &str = "deja_graph_query_duration_seconds";

pub fn query_duration(query: &'static str, elapsed: Duration) {
    metrics::histogram!(QUERY_DURATION, "query" => query).record(elapsed.as_secs_f64());
}

/// Records [`QUERY_DURATION`] when dropped: at the end of the round trip, whether it
/// succeeded, failed, or its future was dropped (a search past its deadline).
pub(crate) struct QueryTimer {
    query: &'static str,
    started: Instant,
}

impl QueryTimer {
    pub(crate) fn start(query: &'static str) -> Self {
        QueryTimer {
            query,
            started: Instant::now(),
        }
    }
}

impl Drop for QueryTimer {
    fn drop(&mut self) {
        query_duration(self.query, self.started.elapsed());
    }
}
