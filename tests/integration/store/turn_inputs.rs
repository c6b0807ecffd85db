use deja_domain::EpisodeKey;
use deja_tests::unique_org;

#[tokio::test]
async fn a_late_older_turn_does_not_replace_the_stored_newer_input() {
    let store = deja_tests::store().await;
    let key = EpisodeKey::new(unique_org(), "conv");
    assert_eq!(store.get_turn_input(&key).await.unwrap(), None);
    assert!(store
        .save_turn_input(&key, 2, r#"{"turn":2}"#)
        .await
        .unwrap());
    assert!(!store
        .save_turn_input(&key, 1, r#"{"turn":1}"#)
        .await
        .unwrap());
    assert_eq!(
        store.get_turn_input(&key).await.unwrap(),
        Some((2, r#"{"turn":2}"#.to_owned()))
    );
    // The same turn again (a retry or redelivery) replaces it.
    assert!(store
        .save_turn_input(&key, 2, r#"{"turn":2,"again":"é\"\\"}"#)
        .await
        .unwrap());
    assert_eq!(
        store.get_turn_input(&key).await.unwrap(),
        Some((2, r#"{"turn":2,"again":"é\"\\"}"#.to_owned()))
    );
}

#[tokio::test]
async fn concurrent_turn_inputs_keep_the_highest_turn() {
    let store = deja_tests::store().await;
    let key = EpisodeKey::new(unique_org(), "conv");
    let tasks: Vec<_> = (1..=12u32)
        .rev()
        .map(|t| {
            let (store, key) = (store.clone(), key.clone());
            tokio::spawn(async move {
                store
                    .save_turn_input(&key, t, &format!("{{\"turn\":{t}}}"))
                    .await
            })
        })
        .collect();
    for task in futures::future::join_all(tasks).await {
        task.unwrap().unwrap();
    }
    assert_eq!(
        store.get_turn_input(&key).await.unwrap(),
        Some((12, "{\"turn\":12}".to_owned()))
    );
}
