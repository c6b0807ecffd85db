//! The Neo4j store (`deja-graph`) against the real Neo4j.

mod bench;
mod browse;
mod crowd;
mod episodes;
mod migrations;
mod recurrence;
mod scoping;
mod search;
mod tokens;
mod turn_inputs;
mod vocab;

use chrono::{DateTime, Utc};
use deja_domain::{Component, EpisodeKey, ExtractedEpisode, TurnUpdate};
use deja_graph::GraphStore;

/// A turn of conversation `correlation_id`, `turn` minutes after the base time.
fn turn(org: &str, correlation_id: &str, turn: u32, skills: &[&str]) -> TurnUpdate {
    let at = deja_tests::at(i64::from(turn) * 60);
    TurnUpdate {
        org: org.to_owned(),
        agent_id: "agent-1".to_owned(),
        agent_run_id: format!("run-{turn}"),
        skills: skills.iter().map(|s| s.to_string()).collect(),
        started_at: at,
        ended_at: at,
        opening_message: Some(format!("alert that opened turn {turn}")),
        ..deja_domain::testing::turn_update(correlation_id, turn)
    }
}

/// What the LLM concluded at `turn`.
fn conclusion(turn: u32) -> ExtractedEpisode {
    ExtractedEpisode {
        issue_type: "cache-eviction".to_owned(),
        issue_description: format!("checkout errors, as seen at turn {turn}"),
        components: vec![Component::new("service", format!("svc-{turn}"))],
        key_findings: vec![format!("finding of turn {turn}")],
        ruled_out: vec![],
        root_cause: Some(format!("root cause of turn {turn}")),
        summary: format!("summary of turn {turn}"),
        resolved: true,
    }
}

fn now() -> DateTime<Utc> {
    deja_tests::at(100_000)
}

/// Merges one successful turn through the optimistic loop, as the worker does.
async fn upsert_turn(store: &GraphStore, update: &TurnUpdate) -> Option<deja_domain::Episode> {
    let extracted = conclusion(update.turn_index);
    store
        .upsert_with(&update.key(), |existing| {
            let merged = deja_domain::merge_turn(existing.as_ref(), update, &extracted, now());
            async move { Ok::<_, std::convert::Infallible>(merged) }
        })
        .await
        .expect("upsert")
}

const RELATIONSHIPS: &str = include_str!("../../../cypher/queries/testing/relationships.cypher");

/// `(relationship type, target key or name)` of every relationship leaving the episode.
async fn relationships(graph: &neo4rs::Graph, key: &EpisodeKey) -> Vec<(String, String)> {
    let mut stream = graph
        .execute(neo4rs::query(RELATIONSHIPS).param("key", key.composite()))
        .await
        .expect("relationships query");
    let mut out = Vec::new();
    while let Some(row) = stream.next().await.expect("relationships row") {
        out.push((row.get("type").unwrap(), row.get("target").unwrap()));
    }
    out
}
