//! One vocabulary per org: `org_vocabulary` and `merge_vocabulary` against the real Neo4j.

use deja_domain::{Component, EpisodeKey, VocabKind};
use deja_graph::GraphStore;
use deja_tests::{random_seed, random_unit_vector, sample_episode, unique_org, unique_suffix};

async fn save(
    store: &GraphStore,
    org: &str,
    team: &str,
    conv: &str,
    issue_type: &str,
    components: &[(&str, &str)],
) {
    let mut episode = sample_episode(org, team, conv, random_unit_vector(random_seed()));
    episode.issue_type = issue_type.to_owned();
    episode.components = components
        .iter()
        .map(|(kind, name)| Component::new(*kind, *name))
        .collect();
    store.save(&episode, None).await.unwrap();
}

async fn count(graph: &neo4rs::Graph, query: &str, name: &str) -> i64 {
    let mut rows = graph
        .execute(neo4rs::query(query).param("name", name))
        .await
        .unwrap();
    let row = rows.next().await.unwrap().unwrap();
    row.get::<i64>("n").unwrap()
}

#[tokio::test]
async fn the_org_vocabulary_spans_every_team_most_used_first_with_descriptions() {
    let store = deja_tests::store().await;
    let org = unique_org();
    save(&store, &org, "a", "1", "oom-killed", &[("service", "api")]).await;
    save(&store, &org, "b", "2", "oom-killed", &[("service", "api")]).await;
    save(
        &store,
        &org,
        "b",
        "3",
        "dns-failure",
        &[("service", "coredns")],
    )
    .await;
    let vocabulary = store.org_vocabulary(&org, 10).await.unwrap();
    let names: Vec<&str> = vocabulary
        .issue_types
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(names, ["oom-killed", "dns-failure"]);
    assert_eq!(vocabulary.issue_types[0].uses, 2);
    assert!(
        vocabulary.issue_types[0].description.is_some(),
        "{vocabulary:?}"
    );
    let prompt = vocabulary.for_prompt();
    assert_eq!(prompt.components[0], Component::new("service", "api"));
    assert!(prompt.issue_type_descriptions.contains_key("dns-failure"));
    assert!(store
        .org_vocabulary(&unique_org(), 10)
        .await
        .unwrap()
        .issue_types
        .is_empty());
}

#[tokio::test]
async fn merging_two_component_spellings_leaves_one_node_relinks_every_episode_and_orphans_nothing()
{
    let store = deja_tests::store().await;
    let graph = deja_tests::raw_graph(&deja_tests::test_settings());
    let org = unique_org();
    let suffix = unique_suffix();
    let old = format!("Redis_Sessions_{suffix}");
    let new = format!("redis-sessions-{suffix}");
    save(
        &store,
        &org,
        "a",
        "1",
        "cache-eviction",
        &[("cache", &old), ("service", "checkout")],
    )
    .await;
    save(&store, &org, "b", "2", "cache-eviction", &[("cache", &new)]).await;
    save(
        &store,
        &org,
        "b",
        "3",
        "cache-eviction",
        &[("cache", &old), ("cache", &new)],
    )
    .await;
    let before = store
        .get_by_key(&EpisodeKey::new(&org, "1"))
        .await
        .unwrap()
        .unwrap();

    // The name to keep may be typed in any spelling: it is normalised.
    let merged = store
        .merge_vocabulary(
            &org,
            VocabKind::Component,
            &old,
            &format!("Redis Sessions {suffix}"),
        )
        .await
        .unwrap();
    assert_eq!(merged.episodes, 2);
    assert_eq!(merged.components_deleted, 1);

    let one = store
        .get_by_key(&EpisodeKey::new(&org, "1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        one.components,
        [
            Component::new("cache", &new),
            Component::new("service", "checkout")
        ]
    );
    assert!(
        one.version > before.version,
        "a concurrent writer must see the change"
    );
    assert!(
        one.updated_at > before.updated_at,
        "what it affects changed: strategies made from it read stale"
    );
    let three = store
        .get_by_key(&EpisodeKey::new(&org, "3"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(three.components, [Component::new("cache", &new)]);

    let nodes = "MATCH (c:Component {name: $name}) RETURN count(c) AS n";
    assert_eq!(count(&graph, nodes, &old).await, 0, "the old node is gone");
    assert_eq!(
        count(&graph, nodes, &new).await,
        1,
        "one node for the kept name"
    );
    let edges = "MATCH (:Episode)-[r:AFFECTS]->(:Component {name: $name}) RETURN count(r) AS n";
    assert_eq!(
        count(&graph, edges, &new).await,
        3,
        "every episode re-linked once"
    );
    let vocabulary = store.org_vocabulary(&org, 10).await.unwrap();
    let cache: Vec<_> = vocabulary
        .components
        .iter()
        .filter(|e| e.component_type.as_deref() == Some("cache"))
        .collect();
    assert_eq!(cache.len(), 1);
    assert_eq!((cache[0].name.as_str(), cache[0].uses), (new.as_str(), 3));
}

#[tokio::test]
async fn merging_an_issue_type_rewrites_the_orgs_episodes_only() {
    let store = deja_tests::store().await;
    let org = unique_org();
    let other = unique_org();
    save(&store, &org, "a", "1", "query-slowness", &[]).await;
    save(&store, &org, "b", "2", "slow-queries", &[]).await;
    save(&store, &other, "a", "1", "slow-queries", &[]).await;

    let merged = store
        .merge_vocabulary(&org, VocabKind::IssueType, "slow-queries", "Query Slowness")
        .await
        .unwrap();
    assert_eq!(merged.episodes, 1);
    let two = store
        .get_by_key(&EpisodeKey::new(&org, "2"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(two.issue_type, "query-slowness");
    let untouched = store
        .get_by_key(&EpisodeKey::new(&other, "1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        untouched.issue_type, "slow-queries",
        "another org keeps its names"
    );
    let vocabulary = store.org_vocabulary(&org, 10).await.unwrap();
    assert_eq!(vocabulary.issue_types.len(), 1);
    assert_eq!(vocabulary.issue_types[0].uses, 2);
}

#[tokio::test]
async fn a_conversation_is_offered_the_issue_types_of_the_other_episodes_only() {
    let store = deja_tests::store().await;
    let org = unique_org();
    save(
        &store,
        &org,
        "a",
        "guessing",
        "time-drift",
        &[("service", "idp")],
    )
    .await;
    save(
        &store,
        &org,
        "b",
        "other",
        "oom-killed",
        &[("service", "api")],
    )
    .await;
    let names = |vocabulary: &deja_graph::OrgVocabulary| -> Vec<String> {
        let mut names: Vec<String> = vocabulary
            .issue_types
            .iter()
            .map(|e| e.name.clone())
            .collect();
        names.sort();
        names
    };
    let everyone = store.org_vocabulary(&org, 10).await.unwrap();
    assert_eq!(names(&everyone), ["oom-killed", "time-drift"]);

    let offered = store
        .vocabulary_offered_to(&EpisodeKey::new(&org, "guessing"), 10)
        .await
        .unwrap();
    assert_eq!(
        names(&offered),
        ["oom-killed"],
        "its own earlier type is not the org's"
    );
    let components: Vec<&str> = offered.components.iter().map(|e| e.name.as_str()).collect();
    assert!(
        components.contains(&"idp"),
        "its components stay: {components:?}"
    );

    // Used by another episode too, the type is the org's, counted without the conversation.
    save(
        &store,
        &org,
        "c",
        "later",
        "time-drift",
        &[("service", "idp")],
    )
    .await;
    let offered = store
        .vocabulary_offered_to(&EpisodeKey::new(&org, "guessing"), 10)
        .await
        .unwrap();
    let drift = offered
        .issue_types
        .iter()
        .find(|e| e.name == "time-drift")
        .expect("offered once another episode uses it");
    assert_eq!(drift.uses, 1);
}
