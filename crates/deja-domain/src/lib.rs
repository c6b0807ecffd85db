//! deja's domain: the turn-event contract, the episode, the rules that merge turns into an
//! episode, effectiveness scoring, ranking math and strategy qualification.
//!
//! Architecture invariant: this crate does no IO. It depends on serde, chrono and hashing
//! only, so every rule here is a pure function that unit and property tests can drive.

pub mod affirmed;
pub mod conclusion;
pub mod confirmed;
pub mod digest;
pub mod episode;
mod error_chain;
pub mod event;
pub mod extraction;
pub mod import;
pub mod merge;
pub mod poisoning;
pub mod ranking;
pub mod recognition;
pub mod review;
pub mod schema;
pub mod second_look;
pub mod strategy;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod type_look;
pub mod vocab;

pub use conclusion::Conclusion;
pub use episode::{
    cause_text, effectiveness_score, embedding_text, observed_findings, opening_message_of,
    Component, Episode, EpisodeKey, ExtractionStatus, Provenance, RecurrenceSummary, Vocabulary,
    OPENING_MESSAGE_MAX_CHARS, VERIFICATION_PREFIX,
};
pub use error_chain::error_chain;
pub use event::{bound_text, EventError, ToolCall, Trigger, TurnEvent, SCHEMA_VERSION};
pub use extraction::{ExtractedEpisode, ExtractionLimits, ExtractionViolation};
pub use merge::{
    is_redelivery, is_superseded, merge_failed_turn, merge_superseded_turn, merge_turn, TurnUpdate,
};
pub use review::{EpisodeEdit, FieldChange, ReviewState, TurnRecord};
pub use vocab::VocabKind;

/// Which episodes a read may see: one org, and one team or the whole org.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Scope {
    pub org: String,
    pub team: Option<String>,
}

impl Scope {
    pub fn org(org: impl Into<String>) -> Self {
        Scope {
            org: org.into(),
            team: None,
        }
    }

    pub fn team(org: impl Into<String>, team: impl Into<String>) -> Self {
        Scope {
            org: org.into(),
            team: Some(team.into()),
        }
    }
}
