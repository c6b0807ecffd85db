//! The extractor worker and the strategy synthesizer.
//!
//! Delivery guarantees (see also `ARCHITECTURE.md`):
//! - A delivery is acked only after its outcome is durable: the episode write committed in
//!   Neo4j, or a retry copy / dead letter confirmed by the broker.
//! - Processing is idempotent by `event_id`, so a redelivery after a crash between commit
//!   and ack changes nothing.
//! - Permanent errors (invalid JSON, schema violation, oversize) are dead-lettered at once with
//!   their reason; transient ones go through the delayed-retry path; after the last attempt
//!   an LLM failure becomes a `failed` extraction episode and any other failure a dead letter.
//! - An outage of Neo4j or the LLM endpoint (connection refused, timeouts, 5xx, 429) is not
//!   the message's fault: consumption pauses, the message waits unacked and is processed again
//!   with the same attempt once a health probe succeeds (`health.rs`). A failure the probe
//!   does not confirm three times in a row is treated as the message's after all.
//! - A delivery whose processing panics is dead-lettered with reason `panicked`.
//! - After the commit and before the ack, the episode's recurrence link is updated
//!   (`recurrence.rs`) within `search.deadline_ms`; its failure is logged and counted and
//!   never changes the outcome: a stored turn is acked as stored.
//! - On shutdown, in-flight deliveries get a deadline to finish; whatever did not finish is
//!   never acked and goes back to the queue when the channel closes.

mod app;
mod extract;
mod health;
pub mod jobs;
pub mod metrics;
pub mod recurrence;
mod run;
mod synthesize;

pub use app::{check_dimensions, Application, Dependencies, IndexMismatch, StartupError};
pub use extract::{Extractor, Outcome};
pub use health::{status_router, Dependency, Pause, Probe, Readiness, ServiceProbe};
pub use recurrence::{LinkOutcome, RecurrenceLinker};
pub use synthesize::{SynthesisOutcome, Synthesizer};
