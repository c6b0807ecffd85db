//! Replaying neutral-format transcripts through the real pipeline: each turn becomes a turn
//! event (the mapping of `tests/fixtures/turn-events.sample.jsonl`), is published to
//! RabbitMQ, and is waited for until the worker has merged it into the episode.
//!
//! Conversations are replayed one at a time, oldest first, each turn only after the previous
//! one is merged: that is how they happened, and it is what makes the worker's team
//! vocabulary (issue types reused across siblings) meaningful.

use crate::EvalError;
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use deja_bus::{Bus, PublishMeta};
use deja_domain::{Episode, EpisodeKey, ToolCall, Trigger, TurnEvent, SCHEMA_VERSION};
use deja_graph::GraphStore;
use serde::Deserialize;
use std::path::Path;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Deserialize)]
pub struct Transcript {
    pub incident_id: String,
    pub team: String,
    pub agent_id: String,
    pub correlation_id: String,
    pub started_at: DateTime<Utc>,
    #[serde(default)]
    pub poisoned: bool,
    #[serde(default)]
    pub injected_text: Option<String>,
    /// The first answer was wrong and later corrected.
    #[serde(default)]
    pub hypothesis_revised: bool,
    pub turns: Vec<TranscriptTurn>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct TranscriptTurn {
    pub turn_index: u32,
    pub agent_run_id: String,
    pub user_message: String,
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    pub final_answer: String,
}

/// Minutes between the starts of two turns, and the length of one, in the fixture mapping.
const TURN_SPACING_MIN: i64 = 6;
const TURN_LENGTH_MIN: i64 = 5;

impl Transcript {
    /// Turn `turn` of this conversation as a turn event of `org`.
    pub fn event(&self, turn: &TranscriptTurn, org: &str) -> TurnEvent {
        let offset = i64::from(turn.turn_index.saturating_sub(1)) * TURN_SPACING_MIN;
        let started_at = self.started_at + ChronoDuration::minutes(offset);
        TurnEvent {
            schema_version: SCHEMA_VERSION,
            event_id: format!("evt-{}-{}", self.correlation_id, turn.turn_index),
            org: org.to_owned(),
            team: self.team.clone(),
            agent_id: self.agent_id.clone(),
            correlation_id: self.correlation_id.clone(),
            agent_run_id: turn.agent_run_id.clone(),
            turn_index: turn.turn_index,
            started_at,
            ended_at: started_at + ChronoDuration::minutes(TURN_LENGTH_MIN),
            user_message: turn.user_message.clone(),
            final_answer: turn.final_answer.clone(),
            tool_calls: turn.tool_calls.clone(),
            // The first turn is opened by the page, the rest by the on-call engineer.
            trigger: Some(Trigger {
                signal_type: if turn.turn_index <= 1 {
                    "alert"
                } else {
                    "chat"
                }
                .to_owned(),
                payload: serde_json::json!({}),
            }),
            linked_episode_ids: Vec::new(),
            conclusion: None,
        }
    }
}

/// Transcripts of `path`, oldest first.
pub fn load(path: &Path) -> Result<Vec<Transcript>, EvalError> {
    let text = crate::corpus::read(path)?;
    let mut transcripts = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut transcript: Transcript =
            serde_json::from_str(line).map_err(|source| EvalError::Line {
                location: format!("{}:{}", path.display(), index + 1),
                what: "transcript",
                source,
            })?;
        if transcript.turns.is_empty() {
            return Err(EvalError::Input(format!(
                "{}:{}: a transcript without turns",
                path.display(),
                index + 1
            )));
        }
        transcript.turns.sort_by_key(|t| t.turn_index);
        transcripts.push(transcript);
    }
    transcripts.sort_by_key(|t| t.started_at);
    Ok(transcripts)
}

/// What became of one conversation.
#[derive(Debug, Clone, Default)]
pub struct Replayed {
    /// The episode after the first turn (the early hypothesis).
    pub after_first_turn: Option<Episode>,
    /// The episode after the last turn that was merged.
    pub last: Option<Episode>,
    /// Turns that were not merged in time (dead-lettered, or the worker too slow).
    pub lost_turns: Vec<u32>,
    /// Turns whose extraction failed for good: merged as an error beside the conclusion
    /// the earlier turns left (or as a failed episode), so their content is not in it.
    pub failed_turns: Vec<u32>,
}

/// Publishes every turn of `transcript` in order, each after the previous one is merged.
/// `progress` is told about each turn as it is done.
pub async fn replay(
    bus: &Bus,
    store: &GraphStore,
    org: &str,
    transcript: &Transcript,
    turn_timeout: Duration,
    progress: &mut dyn FnMut(&str),
) -> Result<Replayed, EvalError> {
    let key = EpisodeKey::new(org, &transcript.correlation_id);
    let mut replayed = Replayed::default();
    for turn in &transcript.turns {
        let started = Instant::now();
        let event = transcript.event(turn, org);
        let body = serde_json::to_vec(&event)?;
        let meta = PublishMeta::turn(&event.org, &event.team)
            .with_message_id(&event.event_id)
            .with_correlation_id(&event.correlation_id);
        bus.publish_turn(&body, &meta)
            .await
            .map_err(|source| EvalError::Publish {
                event_id: event.event_id.clone(),
                source: Box::new(source),
            })?;
        let merged = wait_merged(store, &key, &event.event_id, turn_timeout).await?;
        let failed = merged
            .as_ref()
            .is_some_and(|episode| episode.failed_turn() == Some(turn.turn_index));
        if failed {
            replayed.failed_turns.push(turn.turn_index);
        }
        let outcome = match &merged {
            Some(episode) => format!(
                "merged ({}{}, {:.1} s)",
                episode.extraction_status.as_str(),
                if failed { ", this turn failed" } else { "" },
                started.elapsed().as_secs_f64()
            ),
            None => {
                replayed.lost_turns.push(turn.turn_index);
                format!("NOT merged after {} s", turn_timeout.as_secs())
            }
        };
        progress(&format!(
            "{} turn {}/{}: {outcome}",
            transcript.correlation_id,
            turn.turn_index,
            transcript.turns.len()
        ));
        if merged.is_some() {
            if replayed.after_first_turn.is_none() {
                replayed.after_first_turn = merged.clone();
            }
            replayed.last = merged;
        }
    }
    Ok(replayed)
}

/// Polls the store until the episode of `key` has merged `event_id` (successfully or as a
/// failed extraction), or `timeout` passes.
async fn wait_merged(
    store: &GraphStore,
    key: &EpisodeKey,
    event_id: &str,
    timeout: Duration,
) -> Result<Option<Episode>, EvalError> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(episode) = store.get_by_key(key).await? {
            if episode.event_ids.iter().any(|id| id == event_id) {
                return Ok(Some(episode));
            }
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRANSCRIPTS: &str = include_str!("../../../tests/fixtures/eval/transcripts.jsonl");
    const EVENTS: &str = include_str!("../../../tests/fixtures/turn-events.sample.jsonl");

    #[test]
    fn turns_map_to_events_exactly_as_the_fixture_was_made() {
        let transcripts: Vec<Transcript> = TRANSCRIPTS
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let mut compared = 0;
        for line in EVENTS.lines() {
            let expected: TurnEvent = serde_json::from_str(line).unwrap();
            let transcript = transcripts
                .iter()
                .find(|t| t.correlation_id == expected.correlation_id)
                .unwrap();
            let turn = transcript
                .turns
                .iter()
                .find(|t| t.turn_index == expected.turn_index)
                .unwrap();
            assert_eq!(transcript.event(turn, &expected.org), expected);
            compared += 1;
        }
        assert!(compared >= 3, "{compared}");
    }
}
