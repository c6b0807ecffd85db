//! Realistic conversations (alerts, raw tool output, some poisoned with an injected
//! instruction) through the real prompt, over HTTP, into the fake's `Auto` reply: every turn
//! must validate on the first try, and no injected text may leave its untrusted section.
//!
//! Sources: the repo's `tests/fixtures/turn-events.sample.jsonl` and the eval corpus's
//! transcripts (`DEJA_EVAL_TRANSCRIPTS`, default the repo's
//! `tests/fixtures/eval/transcripts.jsonl`, whose poisoned conversations the injection checks
//! read).

mod common;

use chrono::Utc;
use deja_domain::{merge_turn, Episode, ExtractionLimits, TurnEvent, TurnUpdate, Vocabulary};
use deja_fake_llm::FakeLlm;
use deja_llm::{ExtractionRequest, LlmClient};
use serde_json::Value;
use std::path::PathBuf;

/// What the worker passes as `tool_output_budget` by default, roughly.
const TOOL_OUTPUT_BUDGET: usize = 4_000;

struct Conversation {
    turns: Vec<TurnEvent>,
    injected: Option<String>,
}

fn fixture_conversations() -> Vec<Conversation> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/turn-events.sample.jsonl");
    let text = std::fs::read_to_string(&path).expect("turn-event fixture");
    let mut conversations: Vec<Conversation> = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let event = TurnEvent::parse(line.as_bytes(), 1 << 22).expect("fixture event parses");
        match conversations
            .iter_mut()
            .find(|c| c.turns[0].correlation_id == event.correlation_id)
        {
            Some(conversation) => conversation.turns.push(event),
            None => conversations.push(Conversation {
                turns: vec![event],
                injected: None,
            }),
        }
    }
    conversations
}

/// Maps one eval transcript (conversation-level JSON) onto turn events.
fn transcript_conversation(transcript: &Value) -> Conversation {
    let turns = transcript["turns"]
        .as_array()
        .expect("turns")
        .iter()
        .map(|turn| {
            let index = turn["turn_index"].as_u64().expect("turn_index");
            let body = serde_json::json!({
                "schema_version": 1,
                "event_id": format!("evt-{}-{index}", transcript["correlation_id"].as_str().unwrap_or("x")),
                "org": transcript["org"], "team": transcript["team"],
                "agent_id": transcript["agent_id"], "correlation_id": transcript["correlation_id"],
                "agent_run_id": turn["agent_run_id"], "turn_index": index,
                "started_at": transcript["started_at"], "ended_at": transcript["started_at"],
                "user_message": turn["user_message"], "final_answer": turn["final_answer"],
                "tool_calls": turn["tool_calls"],
            });
            TurnEvent::parse(&serde_json::to_vec(&body).unwrap(), 1 << 22).expect("event parses")
        })
        .collect();
    Conversation {
        turns,
        injected: transcript["injected_text"].as_str().map(str::to_owned),
    }
}

fn transcript_conversations() -> Vec<Conversation> {
    let path = std::env::var("DEJA_EVAL_TRANSCRIPTS").map_or_else(
        |_| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../tests/fixtures/eval/transcripts.jsonl")
        },
        PathBuf::from,
    );
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("eval transcripts {}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| transcript_conversation(&serde_json::from_str(line).expect("transcript json")))
        .collect()
}

/// The text of each section that carries what tools and the agent wrote — a tool call (its
/// input line and its `<untrusted-tool-output>`) and the agent's final answer, which may echo
/// what a tool said: where an injected text may appear, and nowhere else.
fn untrusted_sections(user: &str) -> Vec<&str> {
    let mut sections = Vec::new();
    for (open, close) in [
        ("<tool-call ", "</tool-call>"),
        ("<agent-final-answer>", "</agent-final-answer>"),
    ] {
        let mut rest = user;
        while let Some(start) = rest.find(open) {
            let after = &rest[start..];
            let end = after.find(close).expect("section closed");
            sections.push(&after[..end]);
            rest = &after[end..];
        }
    }
    sections
}

#[tokio::test]
async fn every_real_turn_yields_a_valid_episode_first_time_and_injections_stay_in_their_section() {
    let fake = FakeLlm::start().await;
    let client = LlmClient::new(&common::settings(&fake.base_url(), 10)).unwrap();
    let limits = ExtractionLimits::default();
    let mut vocabulary = Vocabulary::default();
    let mut conversations = fixture_conversations();
    conversations.extend(transcript_conversations());
    let mut turns_seen = 0;
    let mut poisoned_seen = 0;

    for conversation in &conversations {
        let mut stored: Option<Episode> = None;
        for raw in &conversation.turns {
            let event = raw.bounded(TOOL_OUTPUT_BUDGET);
            let before = fake.calls();
            let extraction = client
                .extract(&ExtractionRequest {
                    event: &event,
                    existing: stored.as_ref(),
                    vocabulary: &vocabulary,
                    limits: &limits,
                    given: None,
                })
                .await
                .unwrap_or_else(|e| {
                    panic!("{} turn {}: {e}", event.correlation_id, event.turn_index)
                });
            assert_eq!(
                extraction.usage.calls, 1,
                "{}: needed a repair",
                event.correlation_id
            );
            turns_seen += 1;

            let requests = fake.requests();
            assert_eq!(requests.len(), before + 1);
            let user = requests[before].message("user").unwrap();
            if let Some(injected) = &conversation.injected {
                let episode = format!("{:?}", extraction.episode);
                assert!(!episode.contains(injected.as_str()), "{episode}");
                let inside: usize = untrusted_sections(&user)
                    .iter()
                    .map(|s| s.matches(injected.as_str()).count())
                    .sum();
                if user.contains(injected.as_str()) {
                    poisoned_seen += 1;
                    assert_eq!(user.matches(injected.as_str()).count(), inside);
                }
            }

            let update = TurnUpdate::from_event(&event);
            stored = merge_turn(stored.as_ref(), &update, &extraction.episode, Utc::now());
            let episode = stored.as_ref().expect("a new event always merges");
            if !vocabulary.issue_types.contains(&episode.issue_type) {
                vocabulary.issue_types.push(episode.issue_type.clone());
            }
            for component in &episode.components {
                if !vocabulary.components.contains(component) {
                    vocabulary.components.push(component.clone());
                }
            }
        }
    }
    assert!(turns_seen >= 8, "only {turns_seen} turns");
    assert!(
        poisoned_seen >= 3,
        "only {poisoned_seen} poisoned turns seen"
    );
}
