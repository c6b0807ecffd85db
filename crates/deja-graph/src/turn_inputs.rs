//! The raw event of each conversation's newest turn, kept apart from the episode so that
//! `deja retry` can re-extract a failed turn without the agent runtime sending it again.

use crate::queries::{GET_TURN_INPUT, SAVE_TURN_INPUT};
use crate::{column, GraphError, GraphStore, Result};
use deja_domain::EpisodeKey;

/// The most characters of a conversation's earlier tool texts kept for the copy guard (the
/// newest; an event is at most `worker.max_event_bytes` itself).
pub const MAX_UNTRUSTED_CHARS: usize = 256 * 1024;

impl GraphStore {
    /// Stores `event_json` as the conversation's turn input unless a newer turn (higher
    /// `turn_index`) or another team's turn is already stored. Returns whether it was stored.
    pub async fn save_turn_input(
        &self,
        key: &EpisodeKey,
        team: &str,
        turn_index: u32,
        event_json: &str,
    ) -> Result<bool> {
        self.save_turn_input_with_untrusted(key, team, turn_index, event_json, "")
            .await
            .map(|(stored, _)| stored)
    }

    /// [`GraphStore::save_turn_input`], adding `untrusted` (this turn's tool texts) to the
    /// conversation's (each turn once, the newest [`MAX_UNTRUSTED_CHARS`] kept). Returns
    /// whether the input was stored, and the conversation's untrusted texts with this turn's.
    pub async fn save_turn_input_with_untrusted(
        &self,
        key: &EpisodeKey,
        team: &str,
        turn_index: u32,
        event_json: &str,
        untrusted: &str,
    ) -> Result<(bool, String)> {
        let rows = self
            .fetch_write(
                SAVE_TURN_INPUT
                    .statement()
                    .param("key", key.composite())
                    .param("org", key.org.as_str())
                    .param("team", team)
                    .param("correlation_id", key.correlation_id.as_str())
                    .param("turn_index", turn_index)
                    .param("event_json", event_json)
                    .param("untrusted", untrusted)
                    .param("max_untrusted", MAX_UNTRUSTED_CHARS as i64),
            )
            .await?;
        match rows.first() {
            Some(row) => Ok((
                column(row, SAVE_TURN_INPUT.name, "stored")?,
                column(row, SAVE_TURN_INPUT.name, "untrusted")?,
            )),
            None => Err(GraphError::decode(SAVE_TURN_INPUT.name, "no row")),
        }
    }

    /// The stored newest turn of a conversation: `(turn_index, event_json)`.
    pub async fn get_turn_input(&self, key: &EpisodeKey) -> Result<Option<(u32, String)>> {
        let rows = self
            .fetch(GET_TURN_INPUT.statement().param("key", key.composite()))
            .await?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let index: i64 = column(row, GET_TURN_INPUT.name, "turn_index")?;
        let index = u32::try_from(index)
            .map_err(|_| GraphError::decode(GET_TURN_INPUT.name, "turn_index out of range"))?;
        let event_json: String = column(row, GET_TURN_INPUT.name, "event_json")?;
        Ok(Some((index, event_json)))
    }
}
