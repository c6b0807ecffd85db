//! Every `cypher/browse/*.cypher` file runs as a person would paste it into the Browser:
//! its `:param name => value;` lines are replaced by this test's own values.

use deja_domain::{Component, EpisodeKey, ExtractionStatus};
use deja_tests::{random_seed, random_unit_vector, sample_episode, unique_org};
use std::collections::HashMap;

#[tokio::test]
async fn every_browse_query_runs_without_error() {
    let store = deja_tests::store().await;
    let org = unique_org();
    let mut episode = sample_episode(
        &org,
        "checkout",
        "conv-1",
        random_unit_vector(random_seed()),
    );
    episode.components = vec![Component::new("service", "checkout")];
    episode.extraction_status = ExtractionStatus::Failed;
    episode.extraction_error = Some("timeout".to_owned());
    deja_domain::review::mark_wrong(&mut episode, "not this", chrono::Utc::now());
    episode.review.proposals.insert(
        "root_cause".to_owned(),
        serde_json::json!("the agent's newer guess"),
    );
    let deja_graph::SaveOutcome::Saved { version } = store.save(&episode, None).await.unwrap()
    else {
        panic!("the episode already exists");
    };
    let record =
        deja_graph::ReviewRecord::new("browse-test", "confirm", &["x"], chrono::Utc::now());
    deja_domain::review::confirm(&mut episode, chrono::Utc::now());
    store
        .save_reviewed(&episode, version, &record)
        .await
        .unwrap();
    store
        .save_turn_input(&EpisodeKey::new(&org, "conv-1"), "checkout", 1, "{}")
        .await
        .unwrap();
    let mut again = sample_episode(
        &org,
        "checkout",
        "conv-2",
        random_unit_vector(random_seed()),
    );
    again.created_at = episode.created_at + chrono::Duration::hours(1);
    store.save(&again, None).await.unwrap();
    store
        .link_recurrence(&org, &again.id, &episode.id, 0.9)
        .await
        .unwrap();
    store
        .mark_recalled(&org, std::slice::from_ref(&again.id), chrono::Utc::now())
        .await
        .unwrap();

    let params: HashMap<&str, &str> = HashMap::from([
        ("org", org.as_str()),
        ("team", "checkout"),
        ("type", "service"),
        ("name", "checkout"),
        ("correlation_id", "conv-1"),
    ]);
    // Files that must find this test's episode.
    let non_empty = [
        "team_latest_episodes",
        "component_history",
        "failed_extractions",
        "episode_graph",
        "verdicts",
        "review_history",
        "agent_proposals",
        "recurrences",
        "recently_recalled",
    ];

    let graph = deja_tests::raw_graph(&deja_tests::test_settings());
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../cypher/browse");
    let mut ran = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "cypher") {
            continue;
        }
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let mut query_text = String::new();
        let mut names = Vec::new();
        for line in text.lines() {
            match line.trim().strip_prefix(":param ") {
                Some(param) => {
                    let param_name = param.split("=>").next().unwrap().trim();
                    names.push(param_name.to_owned());
                }
                None => {
                    query_text.push_str(line);
                    query_text.push('\n');
                }
            }
        }
        let mut query = neo4rs::query(&query_text);
        for param_name in &names {
            let value = params
                .get(param_name.as_str())
                .unwrap_or_else(|| panic!("{name}: no test value for :param {param_name}"));
            query = query.param(param_name, *value);
        }
        let mut stream = graph
            .execute(query)
            .await
            .unwrap_or_else(|e| panic!("{name} failed: {e}"));
        let mut rows = 0;
        let mut verdicts = Vec::new();
        while let Some(row) = stream
            .next()
            .await
            .unwrap_or_else(|e| panic!("{name} failed: {e}"))
        {
            rows += 1;
            if let Some(column) = verdict_column(&name) {
                verdicts.push(row.get::<Option<String>>(column).unwrap_or_default());
            }
        }
        if non_empty.contains(&name.as_str()) {
            assert!(rows > 0, "{name} found nothing");
        }
        // A person's verdict is shown beside the episode (or the link's older end) it is on.
        if verdict_column(&name).is_some() {
            assert!(
                verdicts.iter().any(|v| v.as_deref() == Some("wrong")),
                "{name} does not show the verdict: {verdicts:?}"
            );
        }
        ran += 1;
    }
    assert!(ran >= 7, "only {ran} browse files found in {dir:?}");
}

/// The column in which a browse file shows the verdict of this test's wrong episode.
fn verdict_column(file: &str) -> Option<&'static str> {
    match file {
        "team_latest_episodes" | "component_history" => Some("verdict"),
        "recurrences" => Some("recurs_verdict"),
        _ => None,
    }
}
