//! Memory-search's side of recognition: the candidate stages (retrieve, fuse, rerank,
//! evidence) are `deja_recognition::Recognizer`'s, shared with the worker's recurrence
//! linking; this module runs them for a validated search and counts them under the API's
//! metric names.
//!
//! [`SearchService::recognition_candidates`] stops there: the production search then calls
//! `deja_domain::recognition::decide`, and `deja eval retrieval` decides the same candidates
//! with each cross-validation fold's calibration. One path for both.

use crate::error::SearchError;
use crate::metrics as m;
use crate::request::ValidSearch;
use crate::service::SearchService;
use deja_recognition::RecognitionQuery;
pub use deja_recognition::{CandidateSet, StageTimings};
use std::time::{Duration, Instant};

impl SearchService {
    /// Stages 1–4 for a validated semantic search with its query vector.
    pub(crate) async fn candidate_set(
        &self,
        valid: &ValidSearch,
        vector: &[f32],
        deadline: Instant,
    ) -> Result<CandidateSet, SearchError> {
        let query = RecognitionQuery {
            scope: &valid.scope,
            text: &valid.query,
            components: &valid.components,
            ruled_out: &[],
            filters: &valid.filters,
            limit: valid.limit,
            family_order: self.settings().recognition.family.is_on(),
        };
        let set = self
            .recognizer()
            .candidate_set(self.settings(), &query, vector, deadline)
            .await?;
        m::stage_duration("retrieve", seconds(set.timings.retrieve_ms));
        if set.timings.rerank_ms > 0.0 {
            m::stage_duration("rerank", seconds(set.timings.rerank_ms));
        }
        if set.timings.late_ms > 0.0 {
            m::stage_duration("late", seconds(set.timings.late_ms));
        }
        for degraded in &set.degraded {
            m::fallback(degraded.reason());
        }
        Ok(set)
    }
}

fn seconds(ms: f64) -> Duration {
    Duration::from_secs_f64(ms.max(0.0) / 1000.0)
}

pub(crate) fn millis(d: Duration) -> f64 {
    deja_recognition::millis(d)
}
