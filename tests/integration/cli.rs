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

#[tokio::test]
async fn a_person_edits_a_strategy_with_the_review_command_and_search_serves_the_edit() {
    use deja_tests::api_app::{maven_oom, ApiApp, MAVEN_QUERY};
    let app = ApiApp::start().await;
    app.seed("checkout", "conv-1", &maven_oom(0)).await;
    app.seed("checkout", "conv-2", &maven_oom(1)).await;
    let key = deja_domain::strategy::StrategyKey {
        org: app.org.clone(),
        team: deja_domain::strategy::ORG_WIDE_TEAM.to_owned(),
        issue_type: "build-failure".to_owned(),
        component: deja_domain::Component::new("pipeline", "jenkins"),
    };
    app.synthesize(&key).await;
    let reviewed =
        tempfile_with("### Reviewed\n\n1. raise the surefire heap before anything else\n");
    let key_args = [
        "--org",
        app.org.as_str(),
        "--issue-type",
        "build-failure",
        "--component",
        "pipeline:jenkins",
    ];
    let edit = tokio::process::Command::from(deja_tests::deja_command(&app.settings))
        .args(["strategy", "edit"])
        .args(key_args)
        .args(["--file", reviewed.to_str().unwrap(), "--editor", "ana"])
        .output()
        .await
        .expect("run deja strategy edit");
    assert!(
        edit.status.success(),
        "{}",
        String::from_utf8_lossy(&edit.stderr)
    );
    let show = tokio::process::Command::from(deja_tests::deja_command(&app.settings))
        .args(["strategy", "show"])
        .args(key_args)
        .output()
        .await
        .expect("run deja strategy show");
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(
        text.contains("raise the surefire heap") && text.contains("edited by ana"),
        "{text}"
    );
    let result = app
        .search_ok(&serde_json::json!({"query": MAVEN_QUERY}))
        .await;
    assert_eq!(
        result["strategy"].as_str().unwrap_or_default(),
        std::fs::read_to_string(&reviewed).unwrap()
    );
    app.cleanup().await;
}

fn tempfile_with(text: &str) -> std::path::PathBuf {
    let path =
        std::env::temp_dir().join(format!("deja-strategy-{}.md", deja_tests::unique_suffix()));
    std::fs::write(&path, text).expect("write temp file");
    path
}
