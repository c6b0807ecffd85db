//! The automatic recurrence link's rules in the store (`review/auto_link_recurrence.cypher`):
//! one automatic link per episode, so a conversation is counted once; it follows the newest
//! conclusion; a person's link is never touched.

use deja_graph::{GraphStore, ReviewRecord};
use deja_tests::{sample_episode, unique_org};

async fn saved(store: &GraphStore, org: &str, conversation: &str, hours: i64) -> String {
    let mut e = sample_episode(org, "checkout", conversation, Vec::new());
    e.embedding = None;
    e.created_at += chrono::Duration::hours(hours);
    store.save(&e, None).await.expect("save");
    e.id
}

async fn links_of(
    store: &GraphStore,
    org: &str,
    id: &str,
) -> Vec<(String, String, Option<String>)> {
    let chain = store
        .recurrences(org, id, None)
        .await
        .unwrap()
        .expect("episode");
    chain
        .links
        .into_iter()
        .filter(|l| l.direction == "of")
        .map(|l| (l.id, l.by, l.confirmed_by))
        .collect()
}

#[tokio::test]
async fn an_episode_keeps_one_automatic_link_that_follows_its_newest_conclusion() {
    let store = deja_tests::store().await;
    let org = unique_org();
    let first = saved(&store, &org, "conv-first", 0).await;
    let second = saved(&store, &org, "conv-second", 1).await;
    let new = saved(&store, &org, "conv-new", 2).await;

    let linked = store
        .auto_link_recurrence(&org, &new, Some((&first, 0.9)))
        .await
        .unwrap()
        .unwrap();
    assert!(linked.created);
    // Every later turn recognizing the same episode: nothing new, counted once.
    for _ in 0..3 {
        let again = store
            .auto_link_recurrence(&org, &new, Some((&first, 0.95)))
            .await
            .unwrap()
            .unwrap();
        assert!(!again.created && again.retracted == 0, "{again:?}");
    }
    assert_eq!(links_of(&store, &org, &new).await.len(), 1);
    assert_eq!(
        store
            .recurrences(&org, &first, None)
            .await
            .unwrap()
            .unwrap()
            .recurrence_count,
        1
    );

    // The newest conclusion recognizes another incident: the link moves.
    let moved = store
        .auto_link_recurrence(&org, &new, Some((&second, 0.9)))
        .await
        .unwrap()
        .unwrap();
    assert!(moved.created && moved.retracted == 1, "{moved:?}");
    assert_eq!(
        links_of(&store, &org, &new).await,
        vec![(second.clone(), "recognition".to_owned(), None)]
    );
    // It recognizes nothing: the automatic link is retracted.
    let retracted = store
        .auto_link_recurrence(&org, &new, None)
        .await
        .unwrap()
        .unwrap();
    assert!(
        !retracted.created && retracted.retracted == 1,
        "{retracted:?}"
    );
    assert!(links_of(&store, &org, &new).await.is_empty());

    // A person's link replaces the recognizer's unconfirmed guess of another recurrence
    // (which no later turn could retract once a person has linked the episode) ...
    let guessed = store
        .auto_link_recurrence(&org, &new, Some((&second, 0.7)))
        .await
        .unwrap()
        .unwrap();
    assert!(guessed.created, "{guessed:?}");
    let record = ReviewRecord::new("ana", "link_recurrence", &["x"], chrono::Utc::now());
    store
        .link_recurrence_as(&org, &new, &first, 1.0, "ana", Some(&record))
        .await
        .unwrap();
    assert_eq!(
        links_of(&store, &org, &new).await,
        vec![(first.clone(), "ana".to_owned(), Some("ana".to_owned()))]
    );
    // ... and stands: the decision neither adds another nor removes it.
    for target in [Some((second.as_str(), 0.99)), None] {
        let kept = store
            .auto_link_recurrence(&org, &new, target)
            .await
            .unwrap()
            .unwrap();
        assert!(!kept.created && kept.retracted == 0, "{kept:?}");
    }
    assert_eq!(
        links_of(&store, &org, &new).await,
        vec![(first.clone(), "ana".to_owned(), Some("ana".to_owned()))]
    );
    // Another org's episode is never linked; a missing episode answers nothing.
    let lone = saved(&store, &org, "conv-lone", 3).await;
    let other = saved(&store, &format!("{org}-other"), "conv-x", 0).await;
    let foreign = store
        .auto_link_recurrence(&org, &lone, Some((&other, 0.9)))
        .await
        .unwrap()
        .unwrap();
    assert!(!foreign.created, "{foreign:?}");
    assert!(links_of(&store, &org, &lone).await.is_empty());
    let missing = store
        .auto_link_recurrence(&org, "ep_missing", Some((&first, 0.9)))
        .await
        .unwrap();
    assert!(missing.is_none());
}
