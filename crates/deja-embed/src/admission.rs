//! [`Admission`]: how many async callers a model lets in at once.
//!
//! A model runs a bounded number of inferences at once (the local embedder one, behind the
//! lock of its one session; the late-interaction encoder one per session). An async caller
//! that went straight to the blocking pool would queue there, on that lock, out of reach: a
//! caller that stops waiting (a search past its deadline) cannot take back an inference that
//! has not started, so under a burst the backlog grows with every request that already gave
//! up. [`crate::embed_blocking`] and [`crate::encode_blocking`] wait here instead, on a fair
//! async semaphore with one permit per session: dropping the wait drops the caller's place,
//! and only a caller holding a permit takes a blocking thread. The permit goes with the
//! inference and is returned when it ends, not when its caller stops waiting, so the model
//! never has more inferences in flight than it has sessions.

use crate::EmbedError;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// One permit per session of a model (see the module documentation).
#[derive(Debug, Clone)]
pub struct Admission {
    permits: Arc<Semaphore>,
    sessions: usize,
}

impl Admission {
    /// Admission to `sessions` inferences at once (at least one).
    pub fn new(sessions: usize) -> Admission {
        let sessions = sessions.max(1);
        Admission {
            permits: Arc::new(Semaphore::new(sessions)),
            sessions,
        }
    }

    /// Inferences the model runs at once.
    pub fn sessions(&self) -> usize {
        self.sessions
    }

    /// Sessions nobody holds a permit for right now.
    pub fn idle(&self) -> usize {
        self.permits.available_permits()
    }

    /// Waits, in arrival order, until `wanted` sessions (at least one, at most all of them)
    /// are this caller's. Cancel-safe: a caller whose future is dropped while waiting holds
    /// nothing and runs nothing.
    pub async fn enter(&self, wanted: usize) -> Result<OwnedSemaphorePermit, EmbedError> {
        let wanted = wanted.clamp(1, self.sessions);
        self.permits
            .clone()
            .acquire_many_owned(wanted as u32)
            .await
            // Never closed; a closed semaphore would mean the model is going away.
            .map_err(|_| EmbedError::Task("the model's admission was closed".to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_caller_that_stops_waiting_leaves_no_claim_behind() {
        let admission = Admission::new(1);
        let held = admission.enter(1).await.expect("free");
        assert_eq!(admission.idle(), 0);
        let gave_up = tokio::time::timeout(Duration::from_millis(20), admission.enter(1)).await;
        assert!(gave_up.is_err(), "the only session is held");
        drop(held);
        assert_eq!(admission.idle(), 1, "the abandoned wait claimed nothing");
        let _next = admission.enter(1).await.expect("free again");
    }

    #[tokio::test]
    async fn a_call_takes_as_many_sessions_as_it_uses_and_never_more_than_there_are() {
        let admission = Admission::new(2);
        let all = admission.enter(10).await.expect("both");
        assert_eq!(admission.idle(), 0);
        drop(all);
        let one = admission.enter(0).await.expect("one");
        assert_eq!(admission.idle(), 1);
        drop(one);
        assert_eq!(Admission::new(0).sessions(), 1);
    }
}
