use super::{relationships, turn, upsert_turn};
use deja_domain::{Component, EpisodeKey, Scope};
use deja_graph::{GraphStore, ListFilter, SaveOutcome};
use deja_tests::{random_seed, random_unit_vector, sample_episode, unique_org};
use std::future::Future;
use std::time::Duration;

#[tokio::test]
async fn an_episode_round_trips_every_field_exactly() {
    let store = deja_tests::store().await;
    let org = unique_org();
    let mut episode = sample_episode(
        &org,
        "checkout",
        "conv-1",
        random_unit_vector(random_seed()),
    );
    episode.significance = Some("high".to_owned());
    episode.root_cause_confidence = Some("confirmed".to_owned());
    episode.ruled_out = vec!["bad deploy".to_owned(), "dns".to_owned()];
    episode.resolution = Some("raised maxmemory".to_owned());
    episode.extraction_error = Some("turn 2: llm timeout".to_owned());
    episode.provenance = deja_domain::Provenance::Imported;
    episode.opening_message = Some("[FIRING] CheckoutErrors: 5xx ratio 0.31".to_owned());
    episode
        .components
        .push(Component::new("host", "ip-10-0-0-1:9100"));

    let outcome = store.save(&episode, None).await.unwrap();
    assert_eq!(outcome, SaveOutcome::Saved { version: 1 });
    episode.version = 1;
    let stored = store.get_by_key(&episode.key()).await.unwrap().unwrap();
    assert_eq!(stored, episode);
    assert_eq!(stored.created_at.timestamp_subsec_micros(), 123_456);

    let by_id = store.get_by_id(Some(&org), &episode.id).await.unwrap();
    assert_eq!(by_id.as_ref(), Some(&episode));
    assert_eq!(
        store.get_by_id(None, &episode.id).await.unwrap().as_ref(),
        Some(&episode)
    );
    assert_eq!(
        store
            .get_by_id(Some("another-org"), &episode.id)
            .await
            .unwrap(),
        None
    );
}

#[tokio::test]
async fn two_upserts_of_one_conversation_give_one_node() {
    let store = deja_tests::store().await;
    let org = unique_org();
    upsert_turn(&store, &turn(&org, "conv", 1, &["k8s"]))
        .await
        .unwrap();
    let second = upsert_turn(&store, &turn(&org, "conv", 2, &["redis"]))
        .await
        .unwrap();
    assert_eq!(second.version, 2);
    let all = store
        .list(&Scope::org(&org), &ListFilter::default(), 10, 0)
        .await
        .unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].turn_count, 2);
    assert_eq!(all[0].summary, "summary of turn 2");
}

#[tokio::test]
async fn out_of_order_turns_keep_the_newest_conclusion_and_every_skill() {
    let store = deja_tests::store().await;
    let org = unique_org();
    // The first turn arrives last: it still gives the episode its opening message.
    for t in [2, 3, 1] {
        upsert_turn(&store, &turn(&org, "conv", t, &[&format!("skill-{t}")]))
            .await
            .unwrap();
    }
    // A redelivered event changes nothing and writes nothing.
    assert!(upsert_turn(&store, &turn(&org, "conv", 2, &["x"]))
        .await
        .is_none());
    let episode = store
        .get_by_key(&EpisodeKey::new(&org, "conv"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(episode.summary, "summary of turn 3");
    assert_eq!(episode.last_turn_index, 3);
    assert_eq!(episode.turn_count, 3);
    assert_eq!(episode.skills_used.len(), 3);
    assert_eq!(episode.components, vec![Component::new("service", "svc-3")]);
    assert_eq!(
        episode.opening_message.as_deref(),
        Some("alert that opened turn 1")
    );
    assert_eq!(episode.version, 3);
}

/// Turns 1 to 20 of conversation `conv` (skill `skill-NN` each), merged by 20 concurrent
/// tasks; the future resolves once every one is stored.
fn upsert_twenty_turns_at_once(store: &GraphStore, org: &str) -> impl Future<Output = ()> {
    let tasks: Vec<_> = (1..=20)
        .map(|t| {
            let store = store.clone();
            let update = turn(org, "conv", t, &[&format!("skill-{t:02}")]);
            tokio::spawn(async move { upsert_turn(&store, &update).await })
        })
        .collect();
    async move {
        for task in futures::future::join_all(tasks).await {
            assert!(task.unwrap().is_some());
        }
    }
}

#[tokio::test]
async fn twenty_concurrent_upserts_of_one_conversation_keep_every_skill() {
    let store = deja_tests::store().await;
    let org = unique_org();
    upsert_twenty_turns_at_once(&store, &org).await;
    let key = EpisodeKey::new(&org, "conv");
    let episode = store.get_by_key(&key).await.unwrap().unwrap();
    assert_eq!(episode.turn_count, 20);
    assert_eq!(episode.event_ids.len(), 20);
    assert_eq!(episode.skills_used.len(), 20);
    assert_eq!(episode.last_turn_index, 20);
    assert_eq!(episode.summary, "summary of turn 20");
    assert_eq!(episode.version, 20);
    let graph = deja_tests::raw_graph(&deja_tests::test_settings());
    let links = relationships(&graph, &key).await;
    let skills = links.iter().filter(|(t, _)| t == "USED_SKILL").count();
    assert_eq!(skills, 20, "{links:?}");
    let affects: Vec<_> = links.iter().filter(|(t, _)| t == "AFFECTS").collect();
    assert_eq!(affects.len(), 1, "{links:?}");
}

#[tokio::test]
async fn a_save_against_a_stale_version_is_a_conflict_and_writes_nothing() {
    let store = deja_tests::store().await;
    let org = unique_org();
    let mut episode = sample_episode(&org, "checkout", "conv", random_unit_vector(random_seed()));
    assert_eq!(
        store.save(&episode, None).await.unwrap(),
        SaveOutcome::Saved { version: 1 }
    );
    episode.summary = "second".to_owned();
    assert_eq!(
        store.save(&episode, Some(1)).await.unwrap(),
        SaveOutcome::Saved { version: 2 }
    );
    episode.summary = "lost update".to_owned();
    assert_eq!(
        store.save(&episode, Some(1)).await.unwrap(),
        SaveOutcome::Conflict
    );
    assert_eq!(
        store.save(&episode, None).await.unwrap(),
        SaveOutcome::Conflict
    );
    let stored = store.get_by_key(&episode.key()).await.unwrap().unwrap();
    assert_eq!(stored.summary, "second");
    assert_eq!(stored.version, 2);

    // An update of an episode that does not exist creates nothing.
    let ghost = sample_episode(&org, "checkout", "ghost", random_unit_vector(random_seed()));
    assert_eq!(
        store.save(&ghost, Some(4)).await.unwrap(),
        SaveOutcome::Conflict
    );
    assert_eq!(store.get_by_key(&ghost.key()).await.unwrap(), None);
}

/// The worker seeds the write with the episode it read before asking the LLM: when another
/// writer committed meanwhile, the stale read costs one more attempt on a fresh read and
/// neither write is lost.
#[tokio::test]
async fn an_upsert_from_a_stale_read_merges_again_on_the_stored_episode() {
    let store = deja_tests::store().await;
    let org = unique_org();
    let episode = sample_episode(&org, "checkout", "conv", random_unit_vector(random_seed()));
    let key = episode.key();
    store.save(&episode, None).await.unwrap();
    let stale = store.get_by_key(&key).await.unwrap();
    let mut other = stale.clone().unwrap();
    other.summary = "written meanwhile".to_owned();
    assert_eq!(
        store.save(&other, Some(1)).await.unwrap(),
        SaveOutcome::Saved { version: 2 }
    );

    let mut seen_versions = Vec::new();
    let saved = store
        .upsert_from(&key, stale, |current: Option<deja_domain::Episode>| {
            seen_versions.push(current.as_ref().map(|e| e.version));
            let next = current.map(|mut e| {
                e.key_findings.push("found by the seeded writer".to_owned());
                e
            });
            async move { Ok::<_, std::convert::Infallible>(next) }
        })
        .await
        .unwrap()
        .expect("written");
    assert_eq!(seen_versions, vec![Some(1), Some(2)]);
    assert_eq!(saved.version, 3);
    let stored = store.get_by_key(&key).await.unwrap().unwrap();
    assert_eq!(stored.summary, "written meanwhile");
    assert!(stored
        .key_findings
        .contains(&"found by the seeded writer".to_owned()));
}

#[tokio::test]
async fn components_and_skills_removed_from_an_episode_are_unlinked() {
    let store = deja_tests::store().await;
    let org = unique_org();
    let mut episode = sample_episode(&org, "checkout", "conv", random_unit_vector(random_seed()));
    episode.components = vec![
        Component::new("service", "a"),
        Component::new("service", "b"),
    ];
    episode.skills_used = ["s1".to_owned(), "s2".to_owned()].into_iter().collect();
    store.save(&episode, None).await.unwrap();
    episode.components = vec![Component::new("service", "b"), Component::new("queue", "c")];
    episode.skills_used = ["s2".to_owned(), "s3".to_owned()].into_iter().collect();
    assert_eq!(
        store.save(&episode, Some(1)).await.unwrap(),
        SaveOutcome::Saved { version: 2 }
    );

    let graph = deja_tests::raw_graph(&deja_tests::test_settings());
    let links = relationships(&graph, &episode.key()).await;
    let expected: Vec<(String, String)> = [
        ("AFFECTS", format!("{org}\u{1f}queue\u{1f}c")),
        ("AFFECTS", format!("{org}\u{1f}service\u{1f}b")),
        ("USED_SKILL", format!("{org}\u{1f}s2")),
        ("USED_SKILL", format!("{org}\u{1f}s3")),
    ]
    .into_iter()
    .map(|(t, k)| (t.to_owned(), k))
    .collect();
    assert_eq!(links, expected);
}

#[tokio::test]
async fn two_orgs_naming_the_same_component_or_skill_get_a_node_each_and_no_path_between_them() {
    let store = deja_tests::store().await;
    let (acme, globex) = (unique_org(), unique_org());
    let checkout = Component::new("service", "checkout");
    for org in [&acme, &globex] {
        for conversation in ["conv-1", "conv-2"] {
            let mut episode = sample_episode(
                org,
                "checkout",
                conversation,
                random_unit_vector(random_seed()),
            );
            episode.components = vec![checkout.clone()];
            episode.skills_used = ["observability-prometheus".to_owned()].into();
            store.save(&episode, None).await.unwrap();
        }
    }

    let graph = deja_tests::raw_graph(&deja_tests::test_settings());
    let query = neo4rs::query(
        "MATCH (e:Episode)-[:AFFECTS]->(c:Component {type: 'service', name: 'checkout'})
         WHERE e.org IN [$acme, $globex]
         RETURN e.org AS org, c.org AS component_org, c.key AS key ORDER BY org",
    )
    .param("acme", acme.as_str())
    .param("globex", globex.as_str());
    let mut stream = graph.execute(query).await.unwrap();
    let mut links = Vec::new();
    while let Some(row) = stream.next().await.unwrap() {
        let org: String = row.get("org").unwrap();
        let component_org: String = row.get("component_org").unwrap();
        let key: String = row.get("key").unwrap();
        links.push((org, component_org, key));
    }
    assert_eq!(links.len(), 4, "{links:?}");
    for (org, component_org, key) in &links {
        assert_eq!(org, component_org, "{links:?}");
        assert_eq!(key, &deja_graph::component_key(org, &checkout));
    }

    // Following a component from one org's episode never reaches another org's episode.
    let crossing = neo4rs::query(
        "MATCH (e:Episode {org: $acme})-[:AFFECTS]->(:Component)<-[:AFFECTS]-(other:Episode)
         WHERE other.org <> $acme RETURN count(other) AS n",
    )
    .param("acme", acme.as_str());
    let mut stream = graph.execute(crossing).await.unwrap();
    let row = stream.next().await.unwrap().unwrap();
    assert_eq!(row.get::<i64>("n").unwrap(), 0);

    // The same for skills: one node per org, shared by that org's two episodes only.
    let skills = neo4rs::query(
        "MATCH (e:Episode)-[:USED_SKILL]->(s:Skill {name: 'observability-prometheus'})
         WHERE e.org IN [$acme, $globex]
         RETURN s.org AS skill_org, s.key AS key, collect(DISTINCT e.org) AS episode_orgs,
                count(e) AS episodes ORDER BY skill_org",
    )
    .param("acme", acme.as_str())
    .param("globex", globex.as_str());
    let mut stream = graph.execute(skills).await.unwrap();
    let mut found = Vec::new();
    while let Some(row) = stream.next().await.unwrap() {
        let skill_org: String = row.get("skill_org").unwrap();
        let key: String = row.get("key").unwrap();
        let episode_orgs: Vec<String> = row.get("episode_orgs").unwrap();
        let episodes: i64 = row.get("episodes").unwrap();
        found.push((skill_org, key, episode_orgs, episodes));
    }
    let mut expected: Vec<_> = [&acme, &globex]
        .into_iter()
        .map(|org| {
            let key = deja_graph::skill_key(org, "observability-prometheus");
            (org.clone(), key, vec![org.clone()], 2)
        })
        .collect();
    expected.sort();
    assert_eq!(found, expected);
}

#[tokio::test]
async fn hostile_text_is_stored_verbatim_and_found_by_text_search() {
    let store = deja_tests::store().await;
    let org = unique_org();
    let hostile = "quote \" backslash \\ brace } colon : newline\nunicode Zürich 東京 🚒 \
                   MATCH (n) DETACH DELETE n // '; DROP INDEX episode_text";
    let mut episode = sample_episode(&org, "checkout", "conv", random_unit_vector(random_seed()));
    episode.summary = hostile.to_owned();
    episode.root_cause = Some("pod OOMKilled exit code 137 on host ip-10-42-7-201".to_owned());
    episode.key_findings = vec![hostile.to_owned(), "second \"finding\"".to_owned()];
    episode.issue_description = hostile.to_owned();
    store.save(&episode, None).await.unwrap();

    let stored = store.get_by_key(&episode.key()).await.unwrap().unwrap();
    assert_eq!(stored.summary, hostile);
    assert_eq!(stored.key_findings, episode.key_findings);

    let scope = Scope::team(&org, "checkout");
    let none = deja_graph::SearchFilters::default();
    for query in [
        "OOMKilled exit code 137",
        "ip-10-42-7-201",
        "Zürich",
        "东京 東京",
    ] {
        let hits = store.text_search(&scope, query, 5, &none).await.unwrap();
        assert_eq!(hits.len(), 1, "{query}");
        assert_eq!(hits[0].0.id, episode.id, "{query}");
        assert!(hits[0].1 > 0.0);
    }
    for query in [
        hostile,
        "}",
        "\\",
        "\"",
        "a:b",
        "(unclosed",
        "AND OR NOT",
        "*",
        "title:x~2^3",
    ] {
        store
            .text_search(&scope, query, 5, &none)
            .await
            .unwrap_or_else(|e| panic!("{query}: {e:?}"));
    }
    assert!(store
        .text_search(&scope, "kubernetes", 5, &none)
        .await
        .unwrap()
        .is_empty());
}

/// The opening message (the alert that started the conversation) is searchable by its words
/// like the conclusion is: the next alert of the same failure names the same alert.
#[tokio::test]
async fn text_search_reads_the_opening_message() {
    let store = deja_tests::store().await;
    let org = unique_org();
    let mut episode = sample_episode(&org, "checkout", "conv", random_unit_vector(random_seed()));
    let alert = "[FIRING:1] SessionStoreEvictions instance=redis-7";
    assert!(!episode.embedding_text().contains("SessionStoreEvictions"));
    episode.opening_message = Some(alert.to_owned());
    store.save(&episode, None).await.unwrap();
    let scope = Scope::team(&org, "checkout");
    let none = deja_graph::SearchFilters::default();
    let hits = store
        .text_search(&scope, "SessionStoreEvictions", 5, &none)
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].0.opening_message.as_deref(), Some(alert));
}

#[tokio::test]
async fn re_embedding_stores_a_vector_only_for_the_version_it_read() {
    let store = deja_tests::store().await;
    let org = unique_org();
    let mut episode = sample_episode(&org, "checkout", "conv", random_unit_vector(random_seed()));
    episode.embedding_model = Some("old-model".to_owned());
    store.save(&episode, None).await.unwrap();
    // Page from just before this episode's id: the database is shared with other tests.
    let before = &episode.id[..episode.id.len() - 1];
    let page = store
        .episodes_for_reembed(Some(&org), "new-model", false, Some(before), 1)
        .await
        .unwrap();
    assert_eq!(page.len(), 1);
    let item = &page[0];
    assert_eq!(item.id, episode.id);
    assert_eq!(item.key, episode.key());
    assert_eq!(item.version, 1);
    assert_eq!(item.text, episode.embedding_text());

    let vector = random_unit_vector(random_seed());
    assert!(store
        .set_embedding(&item.id, item.version, &vector, "new-model")
        .await
        .unwrap());
    assert!(!store
        .set_embedding(&item.id, item.version, &vector, "new-model")
        .await
        .unwrap());
    assert!(!store
        .set_embedding("ep_missing", 1, &vector, "new-model")
        .await
        .unwrap());
    let stored = store.get_by_key(&episode.key()).await.unwrap().unwrap();
    assert_eq!(stored.version, 2);
    assert_eq!(stored.embedding.as_deref(), Some(vector.as_slice()));
    assert_eq!(stored.embedding_model.as_deref(), Some("new-model"));
    // A writer holding the pre-embedding copy now conflicts instead of restoring the old vector.
    assert_eq!(
        store.save(&episode, Some(1)).await.unwrap(),
        SaveOutcome::Conflict
    );
    let next = store
        .episodes_for_reembed(Some(&org), "new-model", false, Some(before), 1)
        .await
        .unwrap();
    assert!(next.iter().all(|i| i.id != episode.id));
    // Asked for every episode, it is selected again although its vector is of the model.
    let every = store
        .episodes_for_reembed(Some(&org), "new-model", true, Some(before), 1)
        .await
        .unwrap();
    assert_eq!(every.len(), 1);
    assert_eq!(every[0].id, episode.id);
    assert_eq!(every[0].version, 2);
}

/// Neo4j reads committed data, not one snapshot: a plain read overlapping a commit can mix
/// two versions' properties, and a merge computed from that mix would pass the version check
/// and lose a turn for good. Every read of one episode is of one committed version.
#[tokio::test]
async fn reads_racing_writers_see_one_committed_version_each() {
    let store = deja_tests::store().await;
    // Reads that saw a version before the last one: the reader really raced the writers.
    let mut racing_reads = 0;
    for _round in 0..5 {
        let org = unique_org();
        let key = EpisodeKey::new(&org, "conv");
        let writers = upsert_twenty_turns_at_once(&store, &org);
        let reader = {
            let store = store.clone();
            let key = key.clone();
            tokio::spawn(async move {
                let mut reads = 0;
                loop {
                    let Some(e) = store.get_by_key(&key).await.unwrap() else {
                        tokio::task::yield_now().await;
                        continue;
                    };
                    reads += 1;
                    // Each turn adds one of each, and each write one version.
                    let counts = [
                        e.event_ids.len(),
                        e.turns.len(),
                        e.skills_used.len(),
                        usize::try_from(e.version).unwrap(),
                    ];
                    assert!(
                        counts.iter().all(|&n| n == e.turn_count as usize),
                        "read {reads} mixes versions: turn_count {} vs event ids, turns, \
                         skills, version {counts:?}",
                        e.turn_count
                    );
                    if e.turn_count == 20 {
                        return reads - 1;
                    }
                }
            })
        };
        writers.await;
        // A lost turn would keep the reader waiting for turn 20: fail instead of hanging.
        racing_reads += tokio::time::timeout(std::time::Duration::from_secs(60), reader)
            .await
            .expect("the reader saw all 20 turns")
            .unwrap();
    }
    assert!(racing_reads >= 1, "no read overlapped the writers");
}

/// A read that takes the episode's lock and whose caller stops waiting (a search deadline)
/// must not leave its transaction open holding the lock: the next write would wait on it.
#[tokio::test]
async fn a_read_abandoned_while_it_waits_for_the_lock_leaves_no_lock_behind() {
    let store = deja_tests::store().await;
    let org = unique_org();
    let episode = sample_episode(&org, "checkout", "conv", random_unit_vector(random_seed()));
    let key = episode.key();
    store.save(&episode, None).await.unwrap();

    let graph = deja_tests::raw_graph(&deja_tests::test_settings());
    let holder = hold_lock(&graph, &key).await;
    let abandoned = tokio::time::timeout(Duration::from_millis(300), store.get_by_key(&key));
    assert!(
        abandoned.await.is_err(),
        "the read should still wait for the lock"
    );
    holder.rollback().await.unwrap();

    // The abandoned read took the lock after its caller left, and let it go.
    write_goes_through(&graph, &key).await;
    assert_eq!(
        store.save(&episode, Some(1)).await.unwrap(),
        SaveOutcome::Saved { version: 2 }
    );
}

/// Same for a save whose caller stops waiting (an HTTP client gone): the transaction ends
/// (here it commits, as a request finished on the server would) and releases the lock.
#[tokio::test]
async fn a_save_abandoned_while_it_waits_for_the_lock_still_ends_its_transaction() {
    let store = deja_tests::store().await;
    let org = unique_org();
    let mut episode = sample_episode(&org, "checkout", "conv", random_unit_vector(random_seed()));
    let key = episode.key();
    store.save(&episode, None).await.unwrap();

    let graph = deja_tests::raw_graph(&deja_tests::test_settings());
    let holder = hold_lock(&graph, &key).await;
    episode.summary = "saved by a caller that left".to_owned();
    let abandoned = tokio::time::timeout(Duration::from_millis(300), store.save(&episode, Some(1)));
    assert!(
        abandoned.await.is_err(),
        "the save should still wait for the lock"
    );
    holder.rollback().await.unwrap();

    write_goes_through(&graph, &key).await;
    let stored = store.get_by_key(&key).await.unwrap().unwrap();
    assert_eq!(stored.version, 2);
    assert_eq!(stored.summary, "saved by a caller that left");
}

/// An open transaction of another client holding the episode's write lock.
async fn hold_lock(graph: &neo4rs::Graph, key: &EpisodeKey) -> neo4rs::Txn {
    let mut holder = graph.start_txn().await.unwrap();
    holder
        .run(
            neo4rs::query("MATCH (e:Episode {key: $key}) SET e._lock = true")
                .param("key", key.composite()),
        )
        .await
        .unwrap();
    holder
}

/// Asserts that another client can take the episode's write lock (and lets it go).
async fn write_goes_through(graph: &neo4rs::Graph, key: &EpisodeKey) {
    let write = async { hold_lock(graph, key).await.rollback().await.unwrap() };
    tokio::time::timeout(Duration::from_secs(30), write)
        .await
        .expect("a write waited on a lock nobody releases");
}

/// Commits, in another client's open transaction that holds the episode's lock, a rewrite
/// of `set` (a worker's turn landing), after the statement under test has read the episode.
async fn commit_after_it_waits<T>(
    graph: &neo4rs::Graph,
    key: &EpisodeKey,
    set: &str,
    waiting: impl Future<Output = T>,
) -> T {
    let mut holder = hold_lock(graph, key).await;
    holder
        .run(
            neo4rs::query(&format!(
                "MATCH (e:Episode {{key: $key}}) SET {set}, e.version = e.version + 1"
            ))
            .param("key", key.composite()),
        )
        .await
        .unwrap();
    tokio::pin!(waiting);
    assert!(
        tokio::time::timeout(Duration::from_millis(300), &mut waiting)
            .await
            .is_err(),
        "the statement should wait for the lock"
    );
    holder.commit().await.unwrap();
    tokio::time::timeout(Duration::from_secs(30), waiting)
        .await
        .expect("the statement went on once the lock was released")
}

/// A delete with If-Match that read the episode before a concurrent write committed must not
/// delete the version it never checked.
#[tokio::test]
async fn a_delete_checks_its_version_after_the_lock_not_before() {
    let store = deja_tests::store().await;
    let org = unique_org();
    let episode = sample_episode(&org, "checkout", "conv", random_unit_vector(random_seed()));
    let key = episode.key();
    store.save(&episode, None).await.unwrap();
    let graph = deja_tests::raw_graph(&deja_tests::test_settings());
    let record = deja_graph::ReviewRecord::new("reviewer", "delete", &["v1"], chrono::Utc::now());

    let deletion = commit_after_it_waits(
        &graph,
        &key,
        "e.summary = 'the worker concluded meanwhile'",
        store.delete_episode(&org, &episode.id, Some(1), None, &record),
    )
    .await
    .unwrap();
    assert!(deletion.is_none(), "version 1 is gone: nothing to delete");
    let kept = store.get_by_key(&key).await.unwrap().expect("kept");
    assert_eq!(
        (kept.version, kept.summary.as_str()),
        (2, "the worker concluded meanwhile")
    );
}

/// `deja vocab merge` matched an episode by its issue type before a worker's turn changed it:
/// the turn's type stands.
#[tokio::test]
async fn merging_an_issue_type_does_not_overwrite_one_a_worker_changed_meanwhile() {
    let store = deja_tests::store().await;
    let org = unique_org();
    let mut episode = sample_episode(&org, "checkout", "conv", random_unit_vector(random_seed()));
    episode.issue_type = "oom-killed".to_owned();
    let key = episode.key();
    store.save(&episode, None).await.unwrap();
    let graph = deja_tests::raw_graph(&deja_tests::test_settings());

    let merged = commit_after_it_waits(
        &graph,
        &key,
        "e.issue_type = 'disk-full'",
        store.merge_vocabulary(
            &org,
            deja_domain::VocabKind::IssueType,
            "oom-killed",
            "memory-exhaustion",
        ),
    )
    .await
    .unwrap();
    assert_eq!(merged.episodes, 0);
    let kept = store.get_by_key(&key).await.unwrap().expect("kept");
    assert_eq!((kept.version, kept.issue_type.as_str()), (2, "disk-full"));
}
