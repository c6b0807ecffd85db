use deja_graph::{GraphStore, ServerFeature, VectorIndex, MIGRATIONS};

#[tokio::test]
async fn migrating_twice_applies_nothing_the_second_time_and_indexes_the_vectors_in_384_dimensions()
{
    let store = deja_tests::store().await;
    let first = store.migrate().await.unwrap();
    let second = store.migrate().await.unwrap();
    assert!(
        first.applied.is_empty(),
        "the harness migrated already: {first:?}"
    );
    assert!(second.applied.is_empty());
    let version = store.server_version().await.unwrap();
    let taken = MIGRATIONS.iter().filter(|m| m.applies_to(&version)).count();
    assert_eq!(second.already, taken, "server {}", version.text);
    assert!(store.is_migrated().await.unwrap());
    assert_eq!(store.vector_index_dimensions().await.unwrap(), Some(384));
    // The filtering index exactly where the server can search with it (migration 009).
    let index = store.vector_index().await.unwrap();
    assert_eq!(
        index == VectorIndex::Scoped,
        version.supports(ServerFeature::VectorSearchFilters),
        "server {}",
        version.text
    );

    let graph = deja_tests::raw_graph(&deja_tests::test_settings());
    let mut stream = graph
        .execute(neo4rs::query(
            "SHOW INDEXES YIELD name, type, state, options RETURN name, type, state, options",
        ))
        .await
        .unwrap();
    let mut vector = None;
    let mut names = Vec::new();
    while let Some(row) = stream.next().await.unwrap() {
        let name: String = row.get("name").unwrap();
        let state: String = row.get("state").unwrap();
        if name.starts_with("episode_") {
            assert_eq!(state, "ONLINE", "{name}");
        }
        if name == index.name() {
            let options: serde_json::Value = row.get("options").unwrap();
            vector = Some((row.get::<String>("type").unwrap(), options));
        }
        names.push(name);
    }
    let (kind, options) = vector.expect("the episodes' vector index exists");
    assert_eq!(kind, "VECTOR");
    assert_eq!(options["indexConfig"]["vector.dimensions"], 384);
    assert_eq!(
        options["indexConfig"]["vector.similarity_function"],
        "COSINE"
    );
    for expected in [
        "episode_text",
        "episode_key",
        "episode_id",
        "component_key",
        "component_org_type_name",
        "skill_key",
        "skill_org_name",
        "strategy_key",
        "turn_input_key",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} missing from {names:?}"
        );
    }
}

const RECORD: &str = include_str!("../../../cypher/queries/schema/record.cypher");

/// The shared database was migrated long ago, so `migrate` skips everything; this runs every
/// migration statement and the record statement again to prove they are no-ops.
#[tokio::test]
async fn every_migration_statement_can_run_again_without_changing_anything() {
    let store = deja_tests::store().await;
    let graph = deja_tests::raw_graph(&deja_tests::test_settings());
    let applied_at = |graph: neo4rs::Graph| async move {
        let mut stream = graph
            .execute(neo4rs::query(
                "MATCH (m:SchemaMigration) RETURN m.version AS v, toString(m.applied_at) AS at ORDER BY v",
            ))
            .await
            .unwrap();
        let mut out = Vec::new();
        while let Some(row) = stream.next().await.unwrap() {
            out.push((
                row.get::<i64>("v").unwrap(),
                row.get::<String>("at").unwrap(),
            ));
        }
        out
    };
    let before = applied_at(graph.clone()).await;
    let version = store.server_version().await.unwrap();
    for migration in MIGRATIONS.iter().filter(|m| m.applies_to(&version)) {
        for statement in migration.statements() {
            graph
                .run(neo4rs::query(&statement))
                .await
                .unwrap_or_else(|e| panic!("{}: {e}\n{statement}", migration.label()));
        }
        let record = neo4rs::query(RECORD)
            .param("version", migration.version)
            .param("name", migration.name());
        graph.run(record).await.unwrap();
    }
    assert_eq!(applied_at(graph).await, before);
    assert!(store.is_migrated().await.unwrap());
}

/// A store from before migration 012 had one `Component` node for every org; running 012's
/// statements gives each org its own node with the same edges, and removes the shared one.
#[tokio::test]
async fn migration_012_gives_each_org_its_own_component_node() {
    let store = deja_tests::store().await;
    let graph = deja_tests::raw_graph(&deja_tests::test_settings());
    let (acme, globex) = (deja_tests::unique_org(), deja_tests::unique_org());
    // A name no other test uses, so that the shared node is this test's alone.
    let name = format!("legacy-{}", deja_tests::random_seed());
    let mut keys = Vec::new();
    for org in [&acme, &globex] {
        let episode = deja_tests::sample_episode(
            org,
            "checkout",
            "conv",
            deja_tests::random_unit_vector(deja_tests::random_seed()),
        );
        store.save(&episode, None).await.unwrap();
        keys.push(episode.key().composite());
    }
    let legacy = neo4rs::query(
        "MERGE (c:Component {key: 'service' + '\\u001F' + $name})
           ON CREATE SET c.type = 'service', c.name = $name
         WITH c UNWIND $keys AS key
         MATCH (e:Episode {key: key}) MERGE (e)-[:AFFECTS]->(c)",
    )
    .param("name", name.as_str())
    .param("keys", keys.clone());
    graph.run(legacy).await.unwrap();

    let migration = MIGRATIONS.iter().find(|m| m.version == 12).unwrap();
    for statement in migration.statements() {
        graph
            .run(neo4rs::query(&statement))
            .await
            .unwrap_or_else(|e| panic!("{e}\n{statement}"));
    }

    let nodes = neo4rs::query(
        "MATCH (c:Component {name: $name})
         OPTIONAL MATCH (e:Episode)-[:AFFECTS]->(c)
         RETURN c.org AS org, c.key AS key, collect(e.org) AS episode_orgs ORDER BY org",
    )
    .param("name", name.as_str());
    let mut stream = graph.execute(nodes).await.unwrap();
    let mut found = Vec::new();
    while let Some(row) = stream.next().await.unwrap() {
        let org: Option<String> = row.get("org").unwrap();
        let key: String = row.get("key").unwrap();
        let episode_orgs: Vec<String> = row.get("episode_orgs").unwrap();
        found.push((org, key, episode_orgs));
    }
    let mut expected: Vec<_> = [&acme, &globex]
        .into_iter()
        .map(|org| {
            let key =
                deja_graph::component_key(org, &deja_domain::Component::new("service", &name));
            (Some(org.clone()), key, vec![org.clone()])
        })
        .collect();
    expected.sort();
    assert_eq!(
        found, expected,
        "the shared node is gone, each org has its own"
    );
}

/// A store from before migration 013 had one `Skill` node per name for every org; running
/// 013's statements gives each org its own node with the same edges, and removes the shared
/// one.
#[tokio::test]
async fn migration_013_gives_each_org_its_own_skill_node() {
    let store = deja_tests::store().await;
    let graph = deja_tests::raw_graph(&deja_tests::test_settings());
    let (acme, globex) = (deja_tests::unique_org(), deja_tests::unique_org());
    // A name no other test uses, so that the shared node is this test's alone.
    let name = format!("legacy-skill-{}", deja_tests::random_seed());
    let mut keys = Vec::new();
    for org in [&acme, &globex] {
        let episode = deja_tests::sample_episode(
            org,
            "checkout",
            "conv",
            deja_tests::random_unit_vector(deja_tests::random_seed()),
        );
        store.save(&episode, None).await.unwrap();
        keys.push(episode.key().composite());
    }
    // The layout before 013: a node with a name and nothing else.
    let legacy = neo4rs::query(
        "CREATE (s:Skill {name: $name})
         WITH s UNWIND $keys AS key
         MATCH (e:Episode {key: key}) MERGE (e)-[:USED_SKILL]->(s)",
    )
    .param("name", name.as_str())
    .param("keys", keys.clone());
    graph.run(legacy).await.unwrap();

    let migration = MIGRATIONS.iter().find(|m| m.version == 13).unwrap();
    for statement in migration.statements() {
        graph
            .run(neo4rs::query(&statement))
            .await
            .unwrap_or_else(|e| panic!("{e}\n{statement}"));
    }

    let nodes = neo4rs::query(
        "MATCH (s:Skill {name: $name})
         OPTIONAL MATCH (e:Episode)-[:USED_SKILL]->(s)
         RETURN s.org AS org, s.key AS key, collect(e.org) AS episode_orgs ORDER BY org",
    )
    .param("name", name.as_str());
    let mut stream = graph.execute(nodes).await.unwrap();
    let mut found = Vec::new();
    while let Some(row) = stream.next().await.unwrap() {
        let org: Option<String> = row.get("org").unwrap();
        let key: Option<String> = row.get("key").unwrap();
        let episode_orgs: Vec<String> = row.get("episode_orgs").unwrap();
        found.push((org, key, episode_orgs));
    }
    let mut expected: Vec<_> = [&acme, &globex]
        .into_iter()
        .map(|org| {
            let key = deja_graph::skill_key(org, &name);
            (Some(org.clone()), Some(key), vec![org.clone()])
        })
        .collect();
    expected.sort();
    assert_eq!(
        found, expected,
        "the shared node is gone, each org has its own"
    );
}

#[tokio::test]
async fn the_store_answers_a_ping() {
    deja_tests::store().await.ping().await.unwrap();
}

#[tokio::test]
async fn an_unreachable_neo4j_is_a_transient_error() {
    let mut settings = deja_tests::test_settings();
    settings.neo4j.uri = "bolt://127.0.0.1:1".to_owned();
    let store = GraphStore::connect(&settings.neo4j).await.unwrap();
    let error = store.ping().await.unwrap_err();
    assert!(error.is_transient(), "{error:?}");
}
