//! Recognition vectors — late-interaction token vectors and cause vectors
//! (`GraphStore::save_tokens`, `tokens`, `tokens_stamp`, `tokens_source`,
//! `episodes_for_retokenize`) and `deja_recognition::ensure_tokens`, against the real Neo4j
//! and the real models.

use deja_domain::recognition::{max_sim, source_stamp, TokenVectors};
use deja_domain::ExtractionStatus;
use deja_graph::{CauseVector, ReviewRecord};
use deja_tests::{random_seed, random_unit_vector, sample_episode, unique_org};

fn vectors(rows: &[&[f32]]) -> TokenVectors {
    TokenVectors::new(rows[0].len(), rows.concat()).expect("valid vectors")
}

#[tokio::test]
async fn token_vectors_are_stored_by_episode_and_read_back_within_the_org_only() {
    let store = deja_tests::store().await;
    let (org, other_org) = (unique_org(), unique_org());
    let vector = random_unit_vector(random_seed());
    let mine = sample_episode(&org, "t", "mine", vector.clone());
    let theirs = sample_episode(&other_org, "t", "theirs", vector);
    for episode in [&mine, &theirs] {
        store.save(episode, None).await.unwrap();
    }
    let tokens = vectors(&[&[0.6, 0.8, 0.0], &[0.0, -1.0, 0.0]]);
    let cause = CauseVector {
        model: "embedder-a".to_owned(),
        vector: vec![0.0, 0.6, 0.8],
    };
    assert!(store
        .save_tokens(&org, &mine.id, "model-a", "stamp-1", &tokens, Some(&cause))
        .await
        .unwrap());
    assert!(store
        .save_tokens(&other_org, &theirs.id, "model-a", "stamp-2", &tokens, None)
        .await
        .unwrap());
    // Another org's id writes nothing, and an unknown id neither.
    assert!(!store
        .save_tokens(&org, &theirs.id, "model-a", "stamp-x", &tokens, None)
        .await
        .unwrap());
    assert!(!store
        .save_tokens(&org, "no-such-episode", "model-a", "stamp-x", &tokens, None)
        .await
        .unwrap());

    let ids = vec![mine.id.clone(), theirs.id.clone(), "no-such-id".to_owned()];
    let found = store.tokens(&org, &ids).await.unwrap();
    assert_eq!(found.len(), 1, "{:?}", found.keys());
    let stored = &found[&mine.id];
    assert_eq!(
        (stored.model.as_str(), stored.stamp.as_str()),
        ("model-a", "stamp-1")
    );
    assert_eq!(stored.vectors.len(), 2);
    let same = max_sim(&tokens, &stored.vectors).expect("comparable");
    assert!(same > 0.99, "{same}");
    assert_eq!(stored.cause.as_ref(), Some(&cause));
    assert_eq!(
        store.tokens_stamp(&org, &mine.id).await.unwrap(),
        Some(("model-a".to_owned(), "stamp-1".to_owned()))
    );
    let source = store.tokens_source(&org, &mine.id).await.unwrap();
    assert_eq!(
        source.and_then(|s| s.cause_model).as_deref(),
        Some("embedder-a")
    );
    assert_eq!(store.tokens_stamp(&org, &theirs.id).await.unwrap(), None);

    // A second write replaces the first, the cause vector too (none given: none stored).
    let newer = vectors(&[&[1.0, 0.0, 0.0]]);
    store
        .save_tokens(&org, &mine.id, "model-b", "stamp-3", &newer, None)
        .await
        .unwrap();
    let found = store.tokens(&org, &ids).await.unwrap();
    assert_eq!(found[&mine.id].stamp, "stamp-3");
    assert_eq!(found[&mine.id].vectors.len(), 1);
    assert_eq!(found[&mine.id].cause, None);
    assert!(store.tokens(&org, &[]).await.unwrap().is_empty());
}

#[tokio::test]
async fn deleting_an_episode_deletes_its_token_vectors() {
    let store = deja_tests::store().await;
    let org = unique_org();
    let episode = sample_episode(&org, "t", "gone", random_unit_vector(random_seed()));
    store.save(&episode, None).await.unwrap();
    store
        .save_tokens(&org, &episode.id, "m", "s", &vectors(&[&[1.0, 0.0]]), None)
        .await
        .unwrap();
    let record = ReviewRecord::new("tester", "delete", &Vec::<u8>::new(), chrono::Utc::now());
    let stored = store
        .get_by_id(Some(&org), &episode.id)
        .await
        .unwrap()
        .expect("stored");
    assert!(
        store
            .delete_episode(&org, &episode.id, Some(stored.version + 1), None, &record)
            .await
            .unwrap()
            .is_none(),
        "an If-Match the episode is not at deletes nothing"
    );
    assert!(store
        .get_by_id(Some(&org), &episode.id)
        .await
        .unwrap()
        .is_some());
    store
        .delete_episode(&org, &episode.id, Some(stored.version), None, &record)
        .await
        .unwrap()
        .expect("deleted");
    assert_eq!(store.tokens_stamp(&org, &episode.id).await.unwrap(), None);
    // An episode id that comes back (a re-import of the same conversation) starts clean.
    store.save(&episode, None).await.unwrap();
    assert!(store
        .tokens(&org, std::slice::from_ref(&episode.id))
        .await
        .unwrap()
        .is_empty());
}

/// Writes `episode` over its stored version (a writer's own commit, before its vectors).
async fn commit(store: &deja_graph::GraphStore, episode: &mut deja_domain::Episode) {
    let stored = store
        .get_by_id(Some(&episode.org), &episode.id)
        .await
        .unwrap()
        .expect("the episode is stored");
    match store.save(episode, Some(stored.version)).await.unwrap() {
        deja_graph::SaveOutcome::Saved { version } => episode.version = version,
        other => panic!("not saved: {other:?}"),
    }
}

/// Two writers of one episode (two turns committing close together) may store their vectors
/// in either order: the one that encoded the older text and stores last still leaves the
/// current text's vectors, not its own.
#[tokio::test]
async fn a_writer_that_encoded_an_older_text_and_stores_last_leaves_the_current_texts_vectors() {
    let store = deja_tests::store().await;
    let encoder = deja_tests::late_encoder();
    let embedder = deja_tests::embedder();
    let org = unique_org();
    let mut episode = sample_episode(&org, "t", "conv", random_unit_vector(random_seed()));
    episode.root_cause = Some("redis maxmemory policy evicted session keys".to_owned());
    store.save(&episode, None).await.unwrap();
    let older = episode.clone();
    episode.root_cause = Some("a batch job flushed the whole cache at peak".to_owned());
    commit(&store, &mut episode).await;
    assert!(
        deja_recognition::ensure_tokens(&store, &encoder, Some(&embedder), &episode)
            .await
            .unwrap()
    );
    // The first turn's writer, late, with the text it committed before the second turn.
    assert!(
        deja_recognition::ensure_tokens(&store, &encoder, Some(&embedder), &older)
            .await
            .unwrap()
    );
    assert_eq!(
        store.tokens_stamp(&org, &episode.id).await.unwrap(),
        Some((
            encoder.model_id().to_owned(),
            source_stamp(encoder.model_id(), &episode.embedding_text())
        ))
    );
    deja_tests::assert_cause_vector_of(&store, &episode).await;
}

#[tokio::test]
async fn ensure_tokens_encodes_a_text_once_and_again_when_it_changes() {
    let store = deja_tests::store().await;
    let encoder = deja_tests::late_encoder();
    let embedder = deja_tests::embedder();
    let org = unique_org();
    let mut episode = sample_episode(&org, "t", "conv", random_unit_vector(random_seed()));
    episode.root_cause = Some("redis maxmemory policy evicted session keys".to_owned());
    store.save(&episode, None).await.unwrap();

    // Written before cause vectors existed (no embedder): token vectors only.
    assert!(
        deja_recognition::ensure_tokens(&store, &encoder, None, &episode)
            .await
            .unwrap()
    );
    let stamp = source_stamp(encoder.model_id(), &episode.embedding_text());
    assert_eq!(
        store.tokens_stamp(&org, &episode.id).await.unwrap(),
        Some((encoder.model_id().to_owned(), stamp.clone()))
    );
    let ids = [episode.id.clone()];
    assert_eq!(
        store.tokens(&org, &ids).await.unwrap()[&episode.id].cause,
        None
    );
    // With an embedder the missing cause vector makes them stale: stored now, of the cause
    // text (issue type and root cause).
    assert!(
        deja_recognition::ensure_tokens(&store, &encoder, Some(&embedder), &episode)
            .await
            .unwrap()
    );
    deja_tests::assert_cause_vector_of(&store, &episode).await;
    // Current already: nothing encoded, and a writer without an embedder keeps the cause
    // vector of the current text.
    assert!(
        !deja_recognition::ensure_tokens(&store, &encoder, Some(&embedder), &episode)
            .await
            .unwrap()
    );
    assert!(
        !deja_recognition::ensure_tokens(&store, &encoder, None, &episode)
            .await
            .unwrap()
    );
    deja_tests::assert_cause_vector_of(&store, &episode).await;

    // A newer conclusion: the stored vectors are of an older text, so they are replaced.
    episode.root_cause = Some("a batch job flushed the whole cache at peak".to_owned());
    commit(&store, &mut episode).await;
    assert!(
        deja_recognition::ensure_tokens(&store, &encoder, Some(&embedder), &episode)
            .await
            .unwrap()
    );
    deja_tests::assert_cause_vector_of(&store, &episode).await;
    let (_, newer) = store
        .tokens_stamp(&org, &episode.id)
        .await
        .unwrap()
        .unwrap();
    assert_ne!(newer, stamp);
    assert_eq!(
        newer,
        source_stamp(encoder.model_id(), &episode.embedding_text())
    );

    // A writer without an embedder that changes the text cannot store a cause vector of the
    // new text: the older one goes rather than being compared as this text's.
    episode.root_cause = Some("a cron job restarted every cache node at once".to_owned());
    commit(&store, &mut episode).await;
    assert!(
        deja_recognition::ensure_tokens(&store, &encoder, None, &episode)
            .await
            .unwrap()
    );
    assert_eq!(
        store.tokens(&org, &ids).await.unwrap()[&episode.id].cause,
        None
    );

    // A failed extraction is never searched semantically: nothing to encode.
    let mut failed = sample_episode(&org, "t", "failed", random_unit_vector(random_seed()));
    failed.extraction_status = ExtractionStatus::Failed;
    store.save(&failed, None).await.unwrap();
    assert!(
        !deja_recognition::ensure_tokens(&store, &encoder, Some(&embedder), &failed)
            .await
            .unwrap()
    );
    assert_eq!(store.tokens_stamp(&org, &failed.id).await.unwrap(), None);
}

#[tokio::test]
async fn the_retokenize_pages_carry_the_stored_stamp_and_skip_failed_extractions() {
    let store = deja_tests::store().await;
    let org = unique_org();
    let with = sample_episode(&org, "t", "with", random_unit_vector(random_seed()));
    let without = sample_episode(&org, "t", "without", random_unit_vector(random_seed()));
    let mut failed = sample_episode(&org, "t", "failed", random_unit_vector(random_seed()));
    failed.extraction_status = ExtractionStatus::Failed;
    for episode in [&with, &without, &failed] {
        store.save(episode, None).await.unwrap();
    }
    store
        .save_tokens(
            &org,
            &with.id,
            "m",
            "s-with",
            &vectors(&[&[1.0, 0.0]]),
            Some(&CauseVector {
                model: "e".to_owned(),
                vector: vec![1.0, 0.0],
            }),
        )
        .await
        .unwrap();
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = store
            .episodes_for_retokenize(Some(&org), after.as_deref(), 1)
            .await
            .unwrap();
        let Some(last) = page.last() else { break };
        after = Some(last.id.clone());
        seen.extend(page);
    }
    assert_eq!(seen.len(), 2, "{seen:?}");
    let of = |id: &str| seen.iter().find(|i| i.id == id).expect("listed");
    assert_eq!(of(&with.id).stamp.as_deref(), Some("s-with"));
    assert_eq!(of(&with.id).text, with.embedding_text());
    assert_eq!(of(&with.id).cause_text, with.cause_text());
    assert_eq!(of(&with.id).cause_model.as_deref(), Some("e"));
    assert_eq!(of(&without.id).cause_model, None);
    assert_eq!(of(&without.id).stamp, None);
    assert_eq!(of(&without.id).model, None);
}
