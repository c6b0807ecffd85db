//! The `deja` binary's maintenance commands against the real services.

use deja_tests::{random_seed, random_unit_vector, sample_episode, unique_org};

#[tokio::test]
async fn reembed_gives_every_episode_of_the_org_a_vector_from_the_current_model() {
    let settings = deja_tests::worker_app::worker_settings("http://127.0.0.1:9/v1");
    let store = deja_tests::store_for(&settings).await;
    let org = unique_org();
    let mut ids = Vec::new();
    for i in 0..5 {
        let mut episode = sample_episode(
            &org,
            "checkout",
            &format!("conv-{i}"),
            random_unit_vector(random_seed()),
        );
        episode.embedding_model = Some("an-older-model".to_owned());
        if i == 4 {
            episode.embedding = None;
        }
        store.save(&episode, None).await.expect("save");
        ids.push(episode.key());
    }
    let output = tokio::process::Command::from(deja_tests::deja_command(&settings))
        .args(["reembed", "--org", &org, "--batch", "2"])
        .output()
        .await
        .expect("run deja reembed");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("re-embedded 5 episodes"));
    let embedder = deja_tests::embedder();
    for key in &ids {
        let episode = store.get_by_key(key).await.unwrap().expect("episode");
        assert_eq!(
            episode.embedding_model.as_deref(),
            Some(embedder.model_id())
        );
        let expected = embedder
            .embed(&[episode.embedding_text()])
            .unwrap()
            .remove(0);
        let stored = episode.embedding.expect("a vector");
        let cosine: f32 = stored.iter().zip(&expected).map(|(a, b)| a * b).sum();
        assert!(
            cosine > 0.999,
            "the stored vector is the model's embedding of the text ({cosine})"
        );
    }
    // A second run finds nothing left to do: the command is resumable and idempotent.
    let again = tokio::process::Command::from(deja_tests::deja_command(&settings))
        .args(["reembed", "--org", &org])
        .output()
        .await
        .expect("run deja reembed again");
    assert!(String::from_utf8_lossy(&again.stdout).contains("re-embedded 0 episodes"));
}

#[tokio::test]
async fn migrate_twice_reports_nothing_new_the_second_time() {
    let settings = deja_tests::test_settings();
    deja_tests::store_for(&settings).await;
    let output = tokio::process::Command::from(deja_tests::deja_command(&settings))
        .arg("migrate")
        .output()
        .await
        .expect("run deja migrate");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("0 applied now"), "{text}");
}
