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
//! - On shutdown, in-flight deliveries get a deadline to finish; whatever did not finish is
//!   never acked and goes back to the queue when the channel closes.

mod extract;
pub mod jobs;
pub mod metrics;
mod run;
mod synthesize;

pub use extract::{Extractor, Outcome};
pub use run::{run_worker, WorkerHandles};
pub use synthesize::{SynthesisOutcome, Synthesizer};
