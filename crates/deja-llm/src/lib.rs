//! OpenAI-compatible LLM adapter: episode extraction and strategy synthesis.
//!
//! Every call sends a strict JSON schema as `response_format`, validates the reply again in
//! Rust (a constrained server can still be wrong, an unconstrained one often is) and makes at
//! most one repair round trip. Errors split into transient (retry later) and the rest.
//!
//! Architecture invariant: conversation text reaches the model only inside the delimited
//! sections built by [`prompt`]; tool output only inside `<untrusted-tool-output>`.

mod client;
mod error;
pub mod metrics;
pub mod prompt;
mod transport;

pub use client::LlmClient;
pub use error::LlmError;

use deja_domain::{Conclusion, Episode, ExtractedEpisode, ExtractionLimits, TurnEvent, Vocabulary};
use std::time::Duration;

/// What one extraction needs.
#[derive(Debug, Clone, Copy)]
pub struct ExtractionRequest<'a> {
    /// Already bounded by the caller (`TurnEvent::bounded`).
    pub event: &'a TurnEvent,
    /// The episode so far, whose conclusion the turn may revise.
    pub existing: Option<&'a Episode>,
    /// The org's issue types (with descriptions) and components, offered for reuse.
    pub vocabulary: &'a Vocabulary,
    pub limits: &'a ExtractionLimits,
    /// Fields the agent runtime already gave (the event's `conclusion` block): the prompt
    /// asks only for the missing ones; the caller overlays the given ones on the reply.
    pub given: Option<&'a Conclusion>,
}

/// Tokens as reported by the server, summed over the calls (a repair makes two).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub calls: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Extraction {
    /// Validated and normalised (`ExtractedEpisode::parse`).
    pub episode: ExtractedEpisode,
    pub usage: Usage,
    /// Wall time of the whole call, repair included.
    pub latency: Duration,
}
