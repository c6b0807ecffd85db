use deja_graph::{GraphStore, ServerFeature, VectorIndex, MIGRATIONS};

/// Held by the test that runs every migration statement again and by the one that reads the
/// indexes' states: running 003 again re-creates the vector index a later migration (009)
/// replaced, which populates until 009 drops it again, so the two must not overlap.
static SCHEMA_STATEMENTS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test]
async fn migrating_twice_applies_nothing_the_second_time_and_indexes_the_vectors_in_384_dimensions()
{
    let _schema = SCHEMA_STATEMENTS.lock().await;
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
    assert!(
        !names.iter().any(|n| n == "episode_text"),
        "episode_search_text replaced episode_text: {names:?}"
    );
    for expected in [
        "episode_search_text",
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
    let _schema = SCHEMA_STATEMENTS.lock().await;
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

/// Replicas that each run `deja migrate` at start create the same indexes and constraints at
/// once. Neo4j checks `IF NOT EXISTS` and creates the rule in two steps, so the slower of
/// two gets `EquivalentSchemaRuleAlreadyExists` (or, for a constraint, a deadlock); every
/// process must still succeed. Several rounds of eight, so that the race happens.
#[tokio::test]
async fn processes_creating_the_same_schema_rules_at_once_all_succeed() {
    let store = deja_tests::store().await;
    let graph = deja_tests::raw_graph(&deja_tests::test_settings());
    for _round in 0..4 {
        let name = format!("deja_race_{}", deja_tests::unique_suffix());
        let statements = [
            format!("CREATE INDEX {name}_index IF NOT EXISTS FOR (n:DejaRaceTest) ON (n.{name})"),
            format!(
                "CREATE CONSTRAINT {name}_unique IF NOT EXISTS \
                 FOR (n:DejaRaceTest) REQUIRE n.{name}_key IS UNIQUE"
            ),
        ];
        for statement in &statements {
            let runs = (0..8).map(|_| store.run_schema_statement(statement));
            let results = futures::future::join_all(runs).await;
            graph
                .run(neo4rs::query(&format!("DROP INDEX {name}_index IF EXISTS")))
                .await
                .unwrap();
            graph
                .run(neo4rs::query(&format!(
                    "DROP CONSTRAINT {name}_unique IF EXISTS"
                )))
                .await
                .unwrap();
            for result in results {
                result.unwrap_or_else(|e| panic!("{statement}: {e:?}"));
            }
        }
    }
}

/// A schema migrated by a newer binary (a version recorded above every version this one
/// knows) is reported, and `deja migrate` warns about it; it still succeeds.
#[tokio::test]
async fn a_schema_newer_than_the_binary_is_reported() {
    let _schema = SCHEMA_STATEMENTS.lock().await;
    let store = deja_tests::store().await;
    let settings = deja_tests::test_settings();
    let graph = deja_tests::raw_graph(&settings);
    let known = MIGRATIONS.last().unwrap().version;
    let newer = 1_000_000 + i64::try_from(deja_tests::random_seed() % 1_000_000).unwrap();
    graph
        .run(
            neo4rs::query(RECORD)
                .param("version", newer)
                .param("name", "from_a_newer_binary"),
        )
        .await
        .unwrap();
    let report = store.migrate().await;
    let output = tokio::process::Command::from(deja_tests::deja_command(&settings))
        .arg("migrate")
        .output()
        .await;
    // The record goes before anything is asserted: the database is shared.
    graph
        .run(
            neo4rs::query("MATCH (m:SchemaMigration {version: $version}) DELETE m")
                .param("version", newer),
        )
        .await
        .unwrap();
    let report = report.unwrap();
    assert!(report.newer.contains(&newer), "{report:?}");
    assert!(store.is_migrated().await.unwrap());
    let output = output.expect("run deja migrate");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("the schema is newer than this binary")
            && stderr.contains(&format!("knows up to {known}")),
        "{stderr}"
    );
}

/// The orgs, the shared node's name and what a per-org migration left: (node org, node key,
/// orgs of the episodes linked to it) per node of that name.
struct Split {
    orgs: [String; 2],
    name: String,
    nodes: Vec<(Option<String>, Option<String>, Vec<String>)>,
}

/// Two orgs with an episode each, both linked by `legacy` (params `$name`, `$keys`) to one
/// node shared by the orgs, as before the migration; then `version`'s statements run, and
/// `read` (param `$name`, columns `org`, `key`, `episode_orgs`) says what became of it.
async fn split_a_shared_node(version: i64, legacy: &str, read: &str) -> Split {
    let store = deja_tests::store().await;
    let graph = deja_tests::raw_graph(&deja_tests::test_settings());
    let orgs = [deja_tests::unique_org(), deja_tests::unique_org()];
    // A name no other test uses, so that the shared node is this test's alone.
    let name = format!("legacy-{}", deja_tests::random_seed());
    let mut keys = Vec::new();
    for org in &orgs {
        let episode = deja_tests::sample_episode(
            org,
            "checkout",
            "conv",
            deja_tests::random_unit_vector(deja_tests::random_seed()),
        );
        store.save(&episode, None).await.unwrap();
        keys.push(episode.key().composite());
    }
    let legacy = neo4rs::query(legacy)
        .param("name", name.as_str())
        .param("keys", keys);
    graph.run(legacy).await.unwrap();

    let migration = MIGRATIONS.iter().find(|m| m.version == version).unwrap();
    for statement in migration.statements() {
        graph
            .run(neo4rs::query(&statement))
            .await
            .unwrap_or_else(|e| panic!("{e}\n{statement}"));
    }

    let mut stream = graph
        .execute(neo4rs::query(read).param("name", name.as_str()))
        .await
        .unwrap();
    let mut nodes = Vec::new();
    while let Some(row) = stream.next().await.unwrap() {
        nodes.push((
            row.get("org").unwrap(),
            row.get("key").unwrap(),
            row.get("episode_orgs").unwrap(),
        ));
    }
    Split { orgs, name, nodes }
}

/// One node per org, keyed by `key_of(org)`, linked to that org's episode only.
fn assert_one_node_per_org(split: &Split, key_of: impl Fn(&str) -> String) {
    let mut expected: Vec<_> = split
        .orgs
        .iter()
        .map(|org| (Some(org.clone()), Some(key_of(org)), vec![org.clone()]))
        .collect();
    expected.sort();
    assert_eq!(
        split.nodes, expected,
        "the shared node is gone, each org has its own"
    );
}

/// A store from before migration 012 had one `Component` node for every org; running 012's
/// statements gives each org its own node with the same edges, and removes the shared one.
#[tokio::test]
async fn migration_012_gives_each_org_its_own_component_node() {
    let split = split_a_shared_node(
        12,
        "MERGE (c:Component {key: 'service' + '\\u001F' + $name})
           ON CREATE SET c.type = 'service', c.name = $name
         WITH c UNWIND $keys AS key
         MATCH (e:Episode {key: key}) MERGE (e)-[:AFFECTS]->(c)",
        "MATCH (c:Component {name: $name})
         OPTIONAL MATCH (e:Episode)-[:AFFECTS]->(c)
         RETURN c.org AS org, c.key AS key, collect(e.org) AS episode_orgs ORDER BY org",
    )
    .await;
    let component = |name: &str| deja_domain::Component::new("service", name);
    assert_one_node_per_org(&split, |org| {
        deja_graph::component_key(org, &component(&split.name))
    });
}

/// A store from before migration 013 had one `Skill` node per name for every org; running
/// 013's statements gives each org its own node with the same edges, and removes the shared
/// one.
#[tokio::test]
async fn migration_013_gives_each_org_its_own_skill_node() {
    let split = split_a_shared_node(
        13,
        "CREATE (s:Skill {name: $name})
         WITH s UNWIND $keys AS key
         MATCH (e:Episode {key: key}) MERGE (e)-[:USED_SKILL]->(s)",
        "MATCH (s:Skill {name: $name})
         OPTIONAL MATCH (e:Episode)-[:USED_SKILL]->(s)
         RETURN s.org AS org, s.key AS key, collect(e.org) AS episode_orgs ORDER BY org",
    )
    .await;
    assert_one_node_per_org(&split, |org| deja_graph::skill_key(org, &split.name));
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
