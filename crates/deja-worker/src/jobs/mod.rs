//! Use cases the `deja` binary runs outside the delivery loop. They live here, next to the
//! worker that owns the same stores, so that the CLI only parses and dispatches.

mod import;
mod reembed;
mod retry;

pub use import::{import_one, import_record, ImportError, Imported};
pub use reembed::{reembed, retokenize, ReembedError, ReembedTarget};
pub use retry::{keys_to_retry, retry, RetryError, RetrySummary, RetryTarget};
