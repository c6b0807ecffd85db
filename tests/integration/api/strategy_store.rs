//! The strategy store (`cypher/queries/strategies/*`) on its own: claims, saves, edits,
//! proposals and listings.

use deja_domain::strategy::{StrategyKey, ORG_WIDE_TEAM};
use deja_domain::Component;
use deja_graph::{GraphStore, SavedStrategy, StrategyWrite, SynthesisClaim};
use deja_tests::{random_seed, random_unit_vector, sample_episode, unique_org};
use std::time::Duration;

const LEASE: Duration = Duration::from_secs(300);
const COOLDOWN: Duration = Duration::from_secs(3600);

fn key(org: &str, team: &str) -> StrategyKey {
    StrategyKey {
        org: org.to_owned(),
        team: team.to_owned(),
        issue_type: "cache-eviction".to_owned(),
        component: Component::new("cache", "redis-sessions"),
    }
}

fn write(key: &StrategyKey, fingerprint: &str, source_ids: Vec<String>) -> StrategyWrite {
    StrategyWrite {
        key: key.clone(),
        markdown: format!("### strategy {fingerprint}"),
        playbook_json: "{}".to_owned(),
        fingerprint: fingerprint.to_owned(),
        source_ids,
        model: "fake".to_owned(),
        generated_at: chrono::Utc::now(),
        sources_read_at: chrono::Utc::now(),
    }
}

async fn episodes(store: &GraphStore, org: &str, team: &str, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        let episode = sample_episode(
            org,
            team,
            &format!("conv-{team}-{i}"),
            random_unit_vector(random_seed()),
        );
        store.save(&episode, None).await.unwrap();
        ids.push(episode.id);
    }
    ids
}

#[tokio::test]
async fn twenty_concurrent_claims_of_one_fingerprint_have_exactly_one_winner() {
    let store = deja_tests::store().await;
    let key = key(&unique_org(), ORG_WIDE_TEAM);
    let claims = (0..20).map(|_| store.claim_synthesis(&key, "fp-1", LEASE, COOLDOWN));
    let won = futures::future::join_all(claims)
        .await
        .into_iter()
        .map(|r| r.unwrap())
        .filter(|c| c.won())
        .count();
    assert_eq!(won, 1);
    assert!(
        store.get_strategy(&key).await.unwrap().is_none(),
        "a claim is not a strategy"
    );
}

#[tokio::test]
async fn a_claim_is_retaken_for_a_new_fingerprint_after_release_or_after_its_lease() {
    let store = deja_tests::store().await;
    let key = key(&unique_org(), "checkout");
    assert!(store
        .claim_synthesis(&key, "fp-1", LEASE, COOLDOWN)
        .await
        .unwrap()
        .won());
    assert!(!store
        .claim_synthesis(&key, "fp-1", LEASE, COOLDOWN)
        .await
        .unwrap()
        .won());
    assert!(
        store
            .claim_synthesis(&key, "fp-2", LEASE, COOLDOWN)
            .await
            .unwrap()
            .won(),
        "new sources, new job"
    );
    store
        .release_synthesis_claim(&key, &["fp-1", "fp-2"])
        .await
        .unwrap();
    assert!(store
        .claim_synthesis(&key, "fp-2", LEASE, COOLDOWN)
        .await
        .unwrap()
        .won());
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        store
            .claim_synthesis(&key, "fp-2", Duration::from_millis(10), COOLDOWN)
            .await
            .unwrap()
            .won(),
        "a claim older than the lease is retaken"
    );
    store
        .release_synthesis_claim(&key, &["fp-1", "fp-2"])
        .await
        .unwrap();
}

#[tokio::test]
async fn nothing_is_claimed_for_the_fingerprint_already_stored() {
    let store = deja_tests::store().await;
    let org = unique_org();
    let key = key(&org, "checkout");
    let ids = episodes(&store, &org, "checkout", 2).await;
    assert_eq!(
        store
            .save_strategy(&write(&key, "fp-1", ids))
            .await
            .unwrap(),
        SavedStrategy::Stored
    );
    assert!(!store
        .claim_synthesis(&key, "fp-1", LEASE, COOLDOWN)
        .await
        .unwrap()
        .won());
    assert!(store
        .claim_synthesis(&key, "fp-2", LEASE, COOLDOWN)
        .await
        .unwrap()
        .won());
}

#[tokio::test]
async fn saving_relinks_the_sources_and_an_edit_turns_the_next_save_into_a_proposal() {
    let store = deja_tests::store().await;
    let org = unique_org();
    let key = key(&org, "checkout");
    let ids = episodes(&store, &org, "checkout", 3).await;
    assert_eq!(
        store
            .save_strategy(&write(&key, "fp-1", ids[..2].to_vec()))
            .await
            .unwrap(),
        SavedStrategy::Stored
    );
    assert_eq!(
        store
            .save_strategy(&write(&key, "fp-2", ids[1..].to_vec()))
            .await
            .unwrap(),
        SavedStrategy::Stored
    );
    let stored = store.get_strategy(&key).await.unwrap().unwrap();
    let mut sources = stored.source_ids.clone();
    sources.sort();
    let mut expected = ids[1..].to_vec();
    expected.sort();
    assert_eq!(
        sources, expected,
        "SYNTHESIZED_FROM is exactly the latest source set"
    );
    assert_eq!((stored.version, stored.fingerprint.as_str()), (2, "fp-2"));

    assert_eq!(
        store
            .edit_strategy(&key, "### by hand", "ana")
            .await
            .unwrap(),
        Some(3)
    );
    assert_eq!(
        store
            .save_strategy(&write(&key, "fp-3", ids.clone()))
            .await
            .unwrap(),
        SavedStrategy::Proposed
    );
    let stored = store.get_strategy(&key).await.unwrap().unwrap();
    assert_eq!(stored.markdown, "### by hand");
    assert_eq!(stored.proposed_fingerprint.as_deref(), Some("fp-3"));
    assert_eq!(stored.proposed_source_ids.len(), 3);
    assert_eq!(
        stored.source_ids.len(),
        2,
        "the edited strategy keeps its sources"
    );
    let other = key_with_team(&key, "payments");
    assert_eq!(store.edit_strategy(&other, "x", "ana").await.unwrap(), None);
    assert_eq!(store.accept_proposal(&other, "bob").await.unwrap(), None);
}

fn key_with_team(key: &StrategyKey, team: &str) -> StrategyKey {
    StrategyKey {
        team: team.to_owned(),
        ..key.clone()
    }
}

#[tokio::test]
async fn a_listing_shows_pending_proposals_first_and_a_teams_view_includes_org_wide_ones() {
    let store = deja_tests::store().await;
    let org = unique_org();
    let ids = episodes(&store, &org, "checkout", 2).await;
    let team = key(&org, "checkout");
    let org_wide = key(&org, ORG_WIDE_TEAM);
    let payments = key(&org, "payments");
    for k in [&team, &org_wide, &payments] {
        store
            .save_strategy(&write(k, "fp-1", ids.clone()))
            .await
            .unwrap();
    }
    store
        .edit_strategy(&payments, "edited", "ana")
        .await
        .unwrap();
    store
        .save_strategy(&write(&payments, "fp-2", ids.clone()))
        .await
        .unwrap();
    // A bare claim is not listed.
    assert!(store
        .claim_synthesis(&key_with_team(&team, "search"), "fp", LEASE, COOLDOWN)
        .await
        .unwrap()
        .won());

    let all = store.list_strategies(&org, None, true, 10).await.unwrap();
    assert_eq!(all.len(), 3);
    assert_eq!(all[0].key, payments, "the pending proposal comes first");
    for (org_wide, expected) in [(true, vec!["*", "checkout"]), (false, vec!["checkout"])] {
        let listed = store
            .list_strategies(&org, Some("checkout"), org_wide, 10)
            .await
            .unwrap();
        let mut teams: Vec<String> = listed.into_iter().map(|s| s.key.team).collect();
        teams.sort();
        assert_eq!(teams, expected, "org-wide strategies included: {org_wide}");
    }
}

#[tokio::test]
async fn releasing_a_bare_claim_removes_its_node() {
    let store = deja_tests::store().await;
    let org = unique_org();
    let key = key(&org, "checkout");
    assert!(store
        .claim_synthesis(&key, "fp-1", LEASE, COOLDOWN)
        .await
        .unwrap()
        .won());
    store
        .release_synthesis_claim(&key, &["fp-1", "fp-2"])
        .await
        .unwrap();
    let graph = deja_tests::raw_graph(&deja_tests::test_settings());
    let mut rows = graph
        .execute(
            neo4rs::query("MATCH (s:Strategy {key: $key}) RETURN count(s) AS n")
                .param("key", key.composite()),
        )
        .await
        .unwrap();
    let row = rows.next().await.unwrap().unwrap();
    assert_eq!(row.get::<i64>("n").unwrap(), 0);
}

#[tokio::test]
async fn an_older_source_set_written_late_does_not_overwrite_a_newer_strategy() {
    let store = deja_tests::store().await;
    let org = unique_org();
    let key = key(&org, "checkout");
    let ids = episodes(&store, &org, "checkout", 3).await;
    let read_early = chrono::Utc::now() - chrono::Duration::seconds(30);
    let mut older = write(&key, "fp-old", ids[..2].to_vec());
    older.sources_read_at = read_early;
    let newer = write(&key, "fp-new", ids.clone());
    assert_eq!(
        store.save_strategy(&newer).await.unwrap(),
        SavedStrategy::Stored
    );
    // The slow synthesis of the older set finishes last.
    assert_eq!(
        store.save_strategy(&older).await.unwrap(),
        SavedStrategy::Stale
    );
    let stored = store.get_strategy(&key).await.unwrap().unwrap();
    assert_eq!(stored.fingerprint, "fp-new");
    assert_eq!(stored.markdown, "### strategy fp-new");
    assert_eq!(stored.source_ids.len(), 3);
}

#[tokio::test]
async fn releasing_a_claim_leaves_a_newer_source_sets_claim_alone() {
    let store = deja_tests::store().await;
    let key = key(&unique_org(), "checkout");
    assert!(store
        .claim_synthesis(&key, "fp-1", LEASE, COOLDOWN)
        .await
        .unwrap()
        .won());
    assert!(store
        .claim_synthesis(&key, "fp-2", LEASE, COOLDOWN)
        .await
        .unwrap()
        .won());
    // The synthesizer of fp-1 finishes: fp-2's claim must stand.
    store
        .release_synthesis_claim(&key, &["fp-1"])
        .await
        .unwrap();
    assert!(
        !store
            .claim_synthesis(&key, "fp-2", LEASE, COOLDOWN)
            .await
            .unwrap()
            .won(),
        "fp-2 is still claimed: no second job"
    );
    store
        .release_synthesis_claim(&key, &["fp-2"])
        .await
        .unwrap();
    assert!(store
        .claim_synthesis(&key, "fp-2", LEASE, COOLDOWN)
        .await
        .unwrap()
        .won());
    store
        .release_synthesis_claim(&key, &["fp-2"])
        .await
        .unwrap();
}

#[tokio::test]
async fn a_person_edit_is_not_bypassed_by_a_synthesis_keyed_with_another_component_spelling() {
    let store = deja_tests::store().await;
    let org = unique_org();
    let ids = episodes(&store, &org, "checkout", 2).await;
    let mut lower = key(&org, "checkout");
    lower.component = Component::new("cache", "redis");
    let mut upper = lower.clone();
    upper.component = Component::new("cache", "Redis");
    assert_eq!(
        store
            .save_strategy(&write(&lower, "fp-1", ids.clone()))
            .await
            .unwrap(),
        SavedStrategy::Stored
    );
    store
        .edit_strategy(&lower, "### by hand", "ana")
        .await
        .unwrap()
        .expect("strategy exists");
    assert_eq!(
        store
            .save_strategy(&write(&upper, "fp-2", ids))
            .await
            .unwrap(),
        SavedStrategy::Proposed,
        "`Redis` is the strategy a person edited as `redis`"
    );
    let stored = store.get_strategy(&upper).await.unwrap().unwrap();
    assert_eq!(stored.markdown, "### by hand");
}

/// A failed synthesis is released with its failure recorded, in one statement: its source set
/// is refused for the cool-down (and only for it), a changed source set is claimed at once, and
/// a strategy written later clears the record.
#[tokio::test]
async fn a_failed_fingerprint_is_not_claimed_again_during_the_cool_down() {
    let store = deja_tests::store().await;
    let org = unique_org();
    let key = key(&org, "checkout");
    let claim = |fingerprint: &'static str, cooldown: Duration| {
        let (store, key) = (store.clone(), key.clone());
        async move {
            store
                .claim_synthesis(&key, fingerprint, LEASE, cooldown)
                .await
                .unwrap()
        }
    };
    assert_eq!(claim("fp-1", COOLDOWN).await, SynthesisClaim::Won);
    store
        .fail_synthesis_claim(&key, &["fp-1"], "fp-1", "llm reply invalid after a repair")
        .await
        .unwrap();
    assert_eq!(
        claim("fp-1", COOLDOWN).await,
        SynthesisClaim::CoolingDown,
        "the same sources are not tried again"
    );
    assert!(
        store.get_strategy(&key).await.unwrap().is_none(),
        "a recorded failure is not a strategy"
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        claim("fp-1", Duration::from_millis(10)).await,
        SynthesisClaim::Won,
        "after the cool-down they are"
    );
    store
        .fail_synthesis_claim(&key, &["fp-1"], "fp-1", "again")
        .await
        .unwrap();
    assert_eq!(
        claim("fp-2", COOLDOWN).await,
        SynthesisClaim::Won,
        "changed sources are tried at once"
    );
    assert_eq!(claim("fp-2", COOLDOWN).await, SynthesisClaim::Held);
    let ids = episodes(&store, &org, "checkout", 2).await;
    assert_eq!(
        store
            .save_strategy(&write(&key, "fp-2", ids))
            .await
            .unwrap(),
        SavedStrategy::Stored
    );
    store
        .release_synthesis_claim(&key, &["fp-2"])
        .await
        .unwrap();
    assert_eq!(
        claim("fp-1", COOLDOWN).await,
        SynthesisClaim::Won,
        "a written strategy clears the failure"
    );
    store
        .release_synthesis_claim(&key, &["fp-1"])
        .await
        .unwrap();
}

/// A job whose last attempt fails just after another job stored the strategy of the same
/// source set records no failure: nothing failed for the sources that strategy is made from,
/// and review would otherwise list a current strategy as "last synthesis failed".
#[tokio::test]
async fn a_failure_of_a_source_set_already_stored_is_not_recorded() {
    let store = deja_tests::store().await;
    let org = unique_org();
    let key = key(&org, "checkout");
    assert_eq!(
        store
            .claim_synthesis(&key, "fp-1", LEASE, COOLDOWN)
            .await
            .unwrap(),
        SynthesisClaim::Won
    );
    let ids = episodes(&store, &org, "checkout", 2).await;
    assert_eq!(
        store
            .save_strategy(&write(&key, "fp-1", ids))
            .await
            .unwrap(),
        SavedStrategy::Stored
    );
    store
        .fail_synthesis_claim(&key, &["fp-1"], "fp-1", "the late job's model timed out")
        .await
        .unwrap();
    let (stored, failed) = store.strategy_and_failure(&key).await.unwrap();
    assert_eq!(stored.map(|s| s.fingerprint).as_deref(), Some("fp-1"));
    assert_eq!(failed, None);
    assert!(store
        .synthesis_failures(&org, None, true, 10)
        .await
        .unwrap()
        .is_empty());
    // A failure of another source set is still recorded.
    store
        .fail_synthesis_claim(&key, &["fp-2"], "fp-2", "invalid reply")
        .await
        .unwrap();
    let (_, failed) = store.strategy_and_failure(&key).await.unwrap();
    assert_eq!(failed.map(|f| f.fingerprint).as_deref(), Some("fp-2"));
}
