use deja_domain::EpisodeKey;
use deja_tests::{random_seed, random_unit_vector, sample_episode, unique_org};

#[tokio::test]
async fn a_late_older_turn_does_not_replace_the_stored_newer_input() {
    let store = deja_tests::store().await;
    let key = EpisodeKey::new(unique_org(), "conv");
    assert_eq!(store.get_turn_input(&key).await.unwrap(), None);
    assert!(store
        .save_turn_input(&key, "payments", 2, r#"{"turn":2}"#)
        .await
        .unwrap());
    assert!(!store
        .save_turn_input(&key, "payments", 1, r#"{"turn":1}"#)
        .await
        .unwrap());
    assert_eq!(
        store.get_turn_input(&key).await.unwrap(),
        Some((2, r#"{"turn":2}"#.to_owned()))
    );
    // The same turn again (a retry or redelivery) replaces it.
    assert!(store
        .save_turn_input(&key, "payments", 2, r#"{"turn":2,"again":"é\"\\"}"#)
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
                    .save_turn_input(&key, "payments", t, &format!("{{\"turn\":{t}}}"))
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

#[tokio::test]
async fn another_teams_turn_does_not_replace_the_stored_input() {
    let store = deja_tests::store().await;
    let key = EpisodeKey::new(unique_org(), "conv");
    assert!(store
        .save_turn_input(&key, "payments", 1, r#"{"team":"payments"}"#)
        .await
        .unwrap());
    // A newer turn of another team reusing the correlation id: `deja retry` of the
    // payments episode must still re-extract the payments turn.
    assert!(!store
        .save_turn_input(&key, "search", 2, r#"{"team":"search"}"#)
        .await
        .unwrap());
    assert_eq!(
        store.get_turn_input(&key).await.unwrap(),
        Some((1, r#"{"team":"payments"}"#.to_owned()))
    );
    // The owning team's next turn still replaces it.
    assert!(store
        .save_turn_input(&key, "payments", 2, r#"{"team":"payments","turn":2}"#)
        .await
        .unwrap());
    assert_eq!(
        store.get_turn_input(&key).await.unwrap(),
        Some((2, r#"{"team":"payments","turn":2}"#.to_owned()))
    );
}

#[tokio::test]
async fn the_episodes_team_owns_the_input_another_team_stored_first() {
    let store = deja_tests::store().await;
    let org = unique_org();
    let key = EpisodeKey::new(&org, "conv");
    // A stray event of another team arrives first, before any episode exists…
    assert!(store
        .save_turn_input(&key, "search", 3, r#"{"team":"search"}"#)
        .await
        .unwrap());
    // …but the payments turn wins the episode.
    let episode = sample_episode(&org, "payments", "conv", random_unit_vector(random_seed()));
    store.save(&episode, None).await.unwrap();
    assert_eq!(
        store.get_turn_input(&key).await.unwrap(),
        None,
        "the other team's raw turn is not the episode's input"
    );
    assert!(!store
        .save_turn_input(&key, "search", 4, r#"{"team":"search","turn":4}"#)
        .await
        .unwrap());
    // The owner's next turn replaces it, though its index is lower.
    assert!(store
        .save_turn_input(&key, "payments", 1, r#"{"team":"payments"}"#)
        .await
        .unwrap());
    assert_eq!(
        store.get_turn_input(&key).await.unwrap(),
        Some((1, r#"{"team":"payments"}"#.to_owned()))
    );
}

/// The conversation's tool texts gather turn by turn for the copy guard: each turn once (a
/// redelivery or retry of a stored turn adds nothing), a late older turn's too, never another
/// team's, and only the newest `MAX_UNTRUSTED_CHARS` are kept.
#[tokio::test]
async fn the_conversations_untrusted_texts_gather_each_of_its_teams_turns_once() {
    let store = deja_tests::store().await;
    let key = EpisodeKey::new(unique_org(), "conv");
    let save = |team: &'static str, turn: u32, text: &'static str| {
        let store = store.clone();
        let key = key.clone();
        async move {
            store
                .save_turn_input_with_untrusted(&key, team, turn, "{}", text)
                .await
                .unwrap()
                .1
        }
    };
    assert_eq!(
        save("payments", 1, "first tool said A").await,
        "\nfirst tool said A"
    );
    let after_two = save("payments", 3, "third tool said C").await;
    assert!(
        after_two.ends_with("first tool said A\nthird tool said C"),
        "{after_two:?}"
    );
    // A redelivery of turn 3 adds nothing; a late turn 2 adds its own.
    assert_eq!(save("payments", 3, "third tool said C").await, after_two);
    let late = save("payments", 2, "second tool said B").await;
    assert!(late.ends_with("second tool said B"), "{late:?}");
    // That older turn redelivered (or retried) adds nothing either.
    assert_eq!(save("payments", 2, "second tool said B").await, late);
    // Another team reusing the correlation id adds nothing.
    assert_eq!(save("search", 4, "a stray team's tool").await, late);

    let long = EpisodeKey::new(unique_org(), "conv-long");
    let big = "x".repeat(deja_graph::MAX_UNTRUSTED_CHARS);
    store
        .save_turn_input_with_untrusted(&long, "payments", 1, "{}", &big)
        .await
        .unwrap();
    let (_, kept) = store
        .save_turn_input_with_untrusted(&long, "payments", 2, "{}", "the newest words")
        .await
        .unwrap();
    assert_eq!(kept.chars().count(), deja_graph::MAX_UNTRUSTED_CHARS);
    assert!(kept.ends_with("the newest words"));
}
