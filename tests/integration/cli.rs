//! The `deja` binary's maintenance commands against the real services.

use deja_tests::{random_seed, random_unit_vector, sample_episode, unique_org};

/// Runs `deja ARGS` with `settings`, asserts that it succeeded and returns its stdout.
async fn deja_ok(settings: &deja_config::Settings, args: &[&str]) -> String {
    let output = tokio::process::Command::from(deja_tests::deja_command(settings))
        .args(args)
        .output()
        .await
        .unwrap_or_else(|e| panic!("run deja {args:?}: {e}"));
    assert!(
        output.status.success(),
        "deja {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Also the token vectors: every episode without current ones (none stored, or of another
/// text) gets them, and a second run encodes nothing.
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
        if i == 1 {
            // Vectors of an older text: stale, re-encoded.
            store
                .save_tokens(
                    &org,
                    &episode.id,
                    deja_tests::late_encoder().model_id(),
                    "stamp-of-an-older-text",
                    &deja_tests::late_encoder()
                        .encode(&["an older conclusion".to_owned()])
                        .unwrap()
                        .remove(0),
                    None,
                )
                .await
                .expect("save tokens");
        }
        ids.push(episode.key());
    }
    let stdout = deja_ok(&settings, &["reembed", "--org", &org, "--batch", "2"]).await;
    assert!(stdout.contains("re-embedded 5 episodes"), "{stdout}");
    assert!(
        stdout.contains("stored token vectors of 5 episodes"),
        "{stdout}"
    );
    let late = deja_tests::late_encoder();
    for key in &ids {
        let episode = store.get_by_key(key).await.unwrap().expect("episode");
        deja_tests::assert_embedding_of(&episode);
        let stamp =
            deja_domain::recognition::source_stamp(late.model_id(), &episode.embedding_text());
        assert_eq!(
            store.tokens_stamp(&org, &episode.id).await.unwrap(),
            Some((late.model_id().to_owned(), stamp)),
            "the token vectors are of the current text"
        );
        deja_tests::assert_cause_vector_of(&store, &episode).await;
    }
    // A second run finds nothing left to do: the command is resumable and idempotent.
    let stdout = deja_ok(&settings, &["reembed", "--org", &org]).await;
    assert!(stdout.contains("re-embedded 0 episodes"), "{stdout}");
    assert!(
        stdout.contains("stored token vectors of 0 episodes"),
        "{stdout}"
    );

    // An upgrade changed what is embedded: an episode's vector, of the current model, is of
    // another text. `--all` embeds every episode again; the stale run cannot see it.
    let mut changed = store.get_by_key(&ids[0]).await.unwrap().expect("episode");
    let version = changed.version;
    changed.embedding = Some(random_unit_vector(random_seed()));
    assert!(matches!(
        store.save(&changed, Some(version)).await.expect("save"),
        deja_graph::SaveOutcome::Saved { .. }
    ));
    let stdout = deja_ok(&settings, &["reembed", "--org", &org, "--all"]).await;
    assert!(stdout.contains("re-embedded 5 episodes"), "{stdout}");
    for key in &ids {
        let episode = store.get_by_key(key).await.unwrap().expect("episode");
        deja_tests::assert_embedding_of(&episode);
    }
}

/// An embedder that, while it embeds, has a writer commit a turn to one episode that leaves
/// its embedded text (and so its older vector) as it is but bumps its version — as a worker
/// turn that only adds a tool call does — on its first `times` calls.
struct WriterMeanwhile {
    inner: std::sync::Arc<dyn deja_embed::Embedder>,
    store: deja_graph::GraphStore,
    key: deja_domain::EpisodeKey,
    times: usize,
    calls: std::sync::atomic::AtomicUsize,
}

impl deja_embed::Embedder for WriterMeanwhile {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn dimensions(&self) -> usize {
        self.inner.dimensions()
    }

    fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, deja_embed::EmbedError> {
        let call = self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if call < self.times {
            // On tokio's blocking pool (embed_blocking): the test's runtime runs the write.
            tokio::runtime::Handle::current().block_on(async {
                let mut episode = self.store.get_by_key(&self.key).await.unwrap().unwrap();
                let version = episode.version;
                episode.turn_count += 1;
                assert!(matches!(
                    self.store.save(&episode, Some(version)).await.unwrap(),
                    deja_graph::SaveOutcome::Saved { .. }
                ));
            });
        }
        self.inner.embed(texts)
    }
}

/// Three episodes whose vectors, of the current model's id, are of an older text (what an
/// upgrade that changed the embedded text leaves), and `deja reembed --all`'s use case with
/// a writer committing to the second one while it embeds, on the first `times` embeddings.
async fn reembed_all_with_a_writer_meanwhile(
    times: usize,
) -> (
    deja_graph::GraphStore,
    Vec<deja_domain::EpisodeKey>,
    Result<usize, deja_worker::jobs::ReembedError>,
) {
    let store = deja_tests::store().await;
    let org = unique_org();
    let embedder = deja_tests::embedder();
    let mut keys = Vec::new();
    for i in 0..3 {
        let mut episode = sample_episode(
            &org,
            "checkout",
            &format!("conv-{i}"),
            random_unit_vector(random_seed()),
        );
        episode.embedding_model = Some(embedder.model_id().to_owned());
        store.save(&episode, None).await.expect("save");
        keys.push(episode.key());
    }
    let meanwhile: std::sync::Arc<dyn deja_embed::Embedder> =
        std::sync::Arc::new(WriterMeanwhile {
            inner: embedder,
            store: store.clone(),
            key: keys[1].clone(),
            times,
            calls: Default::default(),
        });
    let result = deja_worker::jobs::reembed(
        &store,
        &meanwhile,
        Some(&org),
        deja_worker::jobs::ReembedTarget::Every,
        64,
        |_| {},
    )
    .await;
    (store, keys, result)
}

/// The writer's commit makes the vector's compare-and-set miss; the episode is read again
/// and re-embedded, instead of keeping a vector of its older text that no later stale run
/// would select.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reembed_all_embeds_again_an_episode_written_while_it_was_embedded() {
    let (store, keys, result) = reembed_all_with_a_writer_meanwhile(1).await;
    assert_eq!(result.expect("re-embedded"), 3);
    for key in &keys {
        let episode = store.get_by_key(key).await.unwrap().expect("episode");
        deja_tests::assert_embedding_of(&episode);
    }
}

/// An episode written during every attempt is reported, not passed over in silence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reembed_all_reports_an_episode_written_during_every_attempt() {
    let (_, keys, result) = reembed_all_with_a_writer_meanwhile(usize::MAX).await;
    match result {
        Err(deja_worker::jobs::ReembedError::Unfinished { reembedded, left }) => {
            assert_eq!(reembedded, 2);
            assert_eq!(left, vec![keys[1].episode_id()]);
        }
        other => panic!("expected the episode reported as left over, got {other:?}"),
    }
}

/// `--all-failed` retries every failed conversation, not only the first page of them (it
/// stopped at 10,000 in silence). A page of two here; these conversations have no stored
/// turn input, so each is reported as not retried and the command exits non-zero.
#[tokio::test]
async fn retry_all_failed_retries_every_failed_conversation_beyond_one_page() {
    let settings = deja_tests::worker_app::worker_settings("http://127.0.0.1:9/v1");
    let store = deja_tests::store_for(&settings).await;
    let org = unique_org();
    for i in 0..5 {
        let mut episode = sample_episode(&org, "checkout", &format!("conv-{i}"), Vec::new());
        episode.embedding = None;
        episode.extraction_status = deja_domain::ExtractionStatus::Failed;
        store.save(&episode, None).await.expect("save");
    }
    let output = tokio::process::Command::from(deja_tests::deja_command(&settings))
        .args(["retry", "--all-failed", "--org", &org, "--page-size", "2"])
        .output()
        .await
        .expect("run deja retry");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success(), "{stdout}");
    assert!(stdout.contains("retried 5, still failing 5"), "{stdout}");
    for i in 0..5 {
        assert!(
            stdout.contains(&format!("conv-{i}\tnot retried")),
            "{stdout}"
        );
    }
}

/// A mistyped conversation id or org is said as such, before any model loads (here the LLM
/// address answers nothing: a retry that ran would fail differently).
#[tokio::test]
async fn retrying_a_conversation_with_no_stored_turn_names_it() {
    let settings = deja_tests::worker_app::worker_settings("http://127.0.0.1:9/v1");
    deja_tests::store_for(&settings).await;
    let org = unique_org();
    let output = tokio::process::Command::from(deja_tests::deja_command(&settings))
        .args(["retry", "conv-typo", "--org", &org])
        .output()
        .await
        .expect("run deja retry");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("no conversation `conv-typo` with a stored turn") && stderr.contains(&org),
        "{stderr}"
    );
    assert!(String::from_utf8_lossy(&output.stdout).is_empty());
}

#[tokio::test]
async fn migrate_twice_reports_nothing_new_the_second_time() {
    let settings = deja_tests::test_settings();
    deja_tests::store_for(&settings).await;
    let text = deja_ok(&settings, &["migrate"]).await;
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
    // The team's strategy too: a listing of one says there are more.
    let team_key = deja_domain::strategy::StrategyKey {
        team: "checkout".to_owned(),
        ..key.clone()
    };
    app.synthesize(&team_key).await;
    let list = deja_ok(
        &app.settings,
        &["strategy", "list", "--org", &app.org, "--limit", "1"],
    )
    .await;
    assert!(list.contains("1 strategies shown; more exist"), "{list}");
    let list = deja_ok(&app.settings, &["strategy", "list", "--org", &app.org]).await;
    assert!(list.contains("2 strategies"), "{list}");
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
        .args(["--file", reviewed.to_str().unwrap(), "--by", "ana"])
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
    // The edit left its audit record, shown in the strategy's history.
    let history = text.split_once("history:").map_or("", |(_, h)| h);
    assert!(
        history.contains("edit") && history.contains("ana") && history.contains("markdown"),
        "{text}"
    );
    // An edit of a version that is no longer the stored one is refused, naming the strategy.
    let stale = tokio::process::Command::from(deja_tests::deja_command(&app.settings))
        .args(["strategy", "edit"])
        .args(key_args)
        .args(["--file", reviewed.to_str().unwrap(), "--editor", "bob"])
        .args(["--if-match", "1"])
        .output()
        .await
        .expect("run deja strategy edit --if-match");
    let error = String::from_utf8_lossy(&stale.stderr);
    assert!(!stale.status.success());
    assert!(
        error.contains("strategy `*/build-failure/pipeline:jenkins` changed since version 1")
            && !error.contains("episode"),
        "{error}"
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

/// Runs `deja episode ARGS --json` with `settings`; returns (success, envelope).
async fn deja_episode(
    settings: &deja_config::Settings,
    args: &[&str],
) -> (bool, serde_json::Value) {
    let mut command = tokio::process::Command::from(deja_tests::deja_command(settings));
    command.arg("episode").args(args);
    json_output(command).await
}

/// Runs `command --json`; returns (success, the printed envelope).
async fn json_output(mut command: tokio::process::Command) -> (bool, serde_json::Value) {
    let output = command.arg("--json").output().await.expect("run deja");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let json = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "not json ({e}): {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.success(), json)
}

#[tokio::test]
async fn a_person_lists_edits_marks_wrong_and_deletes_episodes_with_the_episode_command() {
    let app = deja_tests::api_app::ApiApp::start().await;
    let maven = app
        .seed("checkout", "conv-1", &deja_tests::api_app::maven_oom(0))
        .await;
    let settings = &app.settings;
    let org = app.org.as_str();
    let (ok, list) = deja_episode(settings, &["list", "--org", org, "--team", "checkout"]).await;
    assert!(ok, "{list}");
    assert_eq!(
        list["result"]["episodes"][0]["id"],
        serde_json::json!(maven.id)
    );

    let version = maven.version.to_string();
    let edit = [
        "edit",
        &maven.id,
        "--org",
        org,
        "--if-match",
        &version,
        "--by",
        "alice",
        "--root-cause",
        "a leaking fixture",
    ];
    let (ok, edited) = deja_episode(settings, &edit).await;
    assert!(ok, "{edited}");
    assert_eq!(edited["result"]["root_cause"], "a leaking fixture");
    assert_eq!(edited["result"]["history"][0]["by"], "alice");
    // The same stale version again: refused, exit status non-zero, code in the envelope.
    let (ok, conflict) = deja_episode(settings, &edit).await;
    assert!(!ok);
    assert_eq!(conflict["error"]["code"], "version_conflict");

    let (ok, wrong) = deja_episode(
        settings,
        &[
            "mark-wrong",
            &maven.id,
            "--org",
            org,
            "--note",
            "not the heap",
        ],
    )
    .await;
    assert!(ok, "{wrong}");
    assert_eq!(wrong["result"]["verdict"], "wrong");
    let (_, wrong_list) =
        deja_episode(settings, &["list", "--org", org, "--verdict", "wrong"]).await;
    assert_eq!(
        wrong_list["result"]["episodes"].as_array().unwrap().len(),
        1
    );

    let (ok, deleted) = deja_episode(settings, &["delete", &maven.id, "--org", org]).await;
    assert!(ok, "{deleted}");
    assert!(app
        .store
        .get_by_id(None, &maven.id)
        .await
        .unwrap()
        .is_none());
    app.cleanup().await;
}

/// Runs `deja digest ... --json` for the checkout team's alert on `service`, with the digest
/// on or off; returns (success, envelope).
async fn deja_digest(
    app: &deja_tests::api_app::ApiApp,
    enabled: bool,
    team: &str,
    service: &str,
) -> (bool, serde_json::Value) {
    let payload =
        serde_json::json!({"commonLabels": {"alertname": "BuildRed", "service": service}});
    let mut command = tokio::process::Command::from(deja_tests::deja_command(&app.settings));
    command
        .env("DEJA__DIGEST__ENABLED", enabled.to_string())
        .args(["digest", "--org", &app.org, "--team", team])
        .args([
            "--signal-type",
            "alertmanager",
            "--payload",
            &payload.to_string(),
        ]);
    json_output(command).await
}

#[tokio::test]
async fn the_digest_command_answers_like_the_endpoint_off_by_default_and_scoped_to_the_team() {
    use deja_tests::api_app::{maven_oom, ApiApp};
    let app = ApiApp::start().await;
    let checkout = app.seed("checkout", "conv-1", &maven_oom(0)).await;
    let surveys = app.seed("surveys", "conv-2", &maven_oom(1)).await;

    let (ok, off) = deja_digest(&app, false, "checkout", "surveys-module").await;
    assert!(!ok, "{off}");
    assert_eq!(off["error"]["code"], "not_found", "{off}");
    assert!(
        off["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("digest.enabled = false"),
        "{off}"
    );

    let (ok, on) = deja_digest(&app, true, "checkout", "surveys-module").await;
    assert!(ok, "{on}");
    assert_eq!(
        on["result"]["entities"],
        serde_json::json!(["surveys-module"])
    );
    let ids = deja_tests::episode_ids(&on["result"]);
    assert_eq!(
        ids,
        vec![checkout.id.as_str()],
        "the team's episode only: {on}"
    );
    assert_ne!(ids[0], surveys.id);

    let (ok, none) = deja_digest(&app, true, "checkout", "payments-gateway").await;
    assert!(ok, "{none}");
    assert_eq!(none["result"]["episodes"], serde_json::json!([]));
    assert!(none["result"]["notice"].as_str().is_some(), "{none}");
    app.cleanup().await;
}

/// `deja get --json` prints the envelope of `GET /v1/memory/episodes/{id}`, the very one, and
/// on failure (an episode that does not exist, Neo4j unreachable) the failure envelope, not
/// nothing; the exit status is non-zero then.
#[tokio::test]
async fn get_json_prints_the_endpoints_envelope_on_success_and_failure() {
    use deja_tests::api_app::{maven_oom, ApiApp};
    let app = ApiApp::start().await;
    let episode = app.seed("checkout", "conv-1", &maven_oom(0)).await;
    let get = |settings: &deja_config::Settings, id: &str| {
        let mut command = tokio::process::Command::from(deja_tests::deja_command(settings));
        command.args(["get", id, "--org", &app.org]);
        json_output(command)
    };
    let (ok, envelope) = get(&app.settings, &episode.id).await;
    assert!(ok, "{envelope}");
    let (status, http) = app
        .get(
            Some(&app.tokens.org),
            &format!("/v1/memory/episodes/{}", episode.id),
        )
        .await;
    assert_eq!(status, 200, "{http}");
    assert_eq!(envelope, http, "the envelope HTTP answers");

    let (ok, missing) = get(&app.settings, "ep_not_there").await;
    assert!(!ok, "{missing}");
    assert_eq!(missing["success"], false, "{missing}");
    assert_eq!(missing["error"]["code"], "not_found", "{missing}");

    let mut unreachable = app.settings.clone();
    unreachable.neo4j.uri = "bolt://127.0.0.1:1".to_owned();
    let (ok, down) = get(&unreachable, &episode.id).await;
    assert!(!ok, "{down}");
    assert_eq!(down["error"]["code"], "neo4j_unavailable", "{down}");
    // Without --json, a person is told which address did not answer and where it is set.
    let output = tokio::process::Command::from(deja_tests::deja_command(&unreachable))
        .args(["list", "--org", &app.org])
        .output()
        .await
        .expect("run deja list");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("no answer from neo4j at bolt://127.0.0.1:1 (neo4j.uri"),
        "{stderr}"
    );
    app.cleanup().await;
}

/// With `--json`, a failure before the search (arguments that make no request, a store that
/// cannot be set up) is the failure envelope on stdout too, with a non-zero exit status.
#[tokio::test]
async fn json_failures_before_the_use_case_are_envelopes_too() {
    let settings = deja_tests::test_settings();
    let org = unique_org();
    let deja = |settings: &deja_config::Settings, args: &[&str]| {
        let mut command = tokio::process::Command::from(deja_tests::deja_command(settings));
        command.args(args);
        json_output(command)
    };
    let (ok, envelope) = deja(
        &settings,
        &["search", "--org", &org, "--component", "redis", "q"],
    )
    .await;
    assert!(!ok, "{envelope}");
    assert_eq!(envelope["success"], false, "{envelope}");
    assert_eq!(envelope["error"]["code"], "bad_request", "{envelope}");
    assert!(
        envelope["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("invalid `--component`"),
        "{envelope}"
    );
    let digest = [
        "digest",
        "--org",
        &org,
        "--signal-type",
        "alertmanager",
        "--payload",
    ];
    let (ok, envelope) = deja(
        &settings,
        &[
            "episode",
            "edit",
            "ep_none",
            "--org",
            &org,
            "--if-match",
            "1",
            "--component",
            "redis",
        ],
    )
    .await;
    assert!(!ok, "{envelope}");
    assert_eq!(envelope["error"]["code"], "bad_request", "{envelope}");
    let (ok, envelope) = deja(&settings, &[&digest[..], &["{bad"][..]].concat()).await;
    assert!(!ok, "{envelope}");
    assert_eq!(envelope["error"]["code"], "bad_request", "{envelope}");
    assert!(
        envelope["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("invalid `--payload`"),
        "{envelope}"
    );
    // A connection that cannot even be configured (no Neo4j speaks http): the store is
    // unavailable, as a search reports it, for both commands.
    let mut misconfigured = settings.clone();
    misconfigured.neo4j.uri = "http://127.0.0.1:7687".to_owned();
    for args in [
        vec!["search", "--org", org.as_str(), "q"],
        [&digest[..], &["{}"][..]].concat(),
        vec!["episode", "show", "ep_none", "--org", org.as_str()],
        vec!["episode", "list", "--org", org.as_str()],
        vec!["episode", "confirm", "ep_none", "--org", org.as_str()],
    ] {
        let (ok, envelope) = deja(&misconfigured, &args).await;
        assert!(!ok, "{args:?}: {envelope}");
        assert_eq!(
            envelope["error"]["code"], "neo4j_unavailable",
            "{args:?}: {envelope}"
        );
    }
    // A configuration that does not load at all: still one envelope on stdout.
    for args in [
        vec!["search", "--org", org.as_str(), "q"],
        vec!["get", "ep_none", "--org", org.as_str()],
        [&digest[..], &["{}"][..]].concat(),
        vec!["episode", "show", "ep_none", "--org", org.as_str()],
    ] {
        let mut command = tokio::process::Command::from(deja_tests::deja_command(&settings));
        command.env("DEJA__SEARCH__DEFAULT_LIMIT", "0").args(&args);
        let (ok, envelope) = json_output(command).await;
        assert!(!ok, "{args:?}: {envelope}");
        assert_eq!(envelope["success"], false, "{args:?}: {envelope}");
        assert_eq!(
            envelope["error"]["code"], "internal",
            "{args:?}: {envelope}"
        );
    }
}

/// `deja vocab merge redis-sessions redis-eviction --org ORG` with `settings`.
async fn merge_redis_sessions(settings: &deja_config::Settings, org: &str) -> std::process::Output {
    tokio::process::Command::from(deja_tests::deja_command(settings))
        .args([
            "vocab",
            "merge",
            "redis-sessions",
            "redis-eviction",
            "--org",
            org,
        ])
        .output()
        .await
        .expect("run deja vocab merge")
}

/// An issue type is part of an episode's embedded text: merging two spellings re-encodes the
/// renamed episodes' token vectors (their stamps follow the new text), and only theirs.
#[tokio::test]
async fn merging_issue_types_re_embeds_the_renamed_episodes_and_re_encodes_their_vectors() {
    let settings = deja_tests::worker_app::worker_settings("http://127.0.0.1:9/v1");
    let store = deja_tests::store_for(&settings).await;
    let late = deja_tests::late_encoder();
    let org = unique_org();
    let mut episodes = Vec::new();
    for (i, issue_type) in ["redis-sessions", "redis-sessions", "tls-expiry"]
        .iter()
        .enumerate()
    {
        let mut episode = sample_episode(
            &org,
            "checkout",
            &format!("conv-{i}"),
            random_unit_vector(random_seed()),
        );
        episode.issue_type = (*issue_type).to_owned();
        // Embedded by the model in use: only what the merge renames is stale afterwards.
        episode.embedding_model = Some(deja_tests::embedder().model_id().to_owned());
        store.save(&episode, None).await.expect("save");
        deja_recognition::ensure_tokens(&store, &late, Some(&deja_tests::embedder()), &episode)
            .await
            .expect("tokens");
        episodes.push(episode);
    }
    let untouched_before = store.tokens_stamp(&org, &episodes[2].id).await.unwrap();
    let output = merge_redis_sessions(&settings, &org).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("2 episodes rewritten"), "{stdout}");
    assert!(
        stdout.contains("re-embedded 2 episodes of the org"),
        "{stdout}"
    );
    assert!(
        stdout.contains("stored token vectors of 2 episodes of the org"),
        "{stdout}"
    );
    for episode in &episodes[..2] {
        let renamed = store
            .get_by_id(Some(&org), &episode.id)
            .await
            .unwrap()
            .expect("episode");
        assert_eq!(renamed.issue_type, "redis-eviction");
        // The search embedding is of the renamed text too.
        deja_tests::assert_embedding_of(&renamed);
        let stamp =
            deja_domain::recognition::source_stamp(late.model_id(), &renamed.embedding_text());
        assert_eq!(
            store.tokens_stamp(&org, &episode.id).await.unwrap(),
            Some((late.model_id().to_owned(), stamp))
        );
        // The cause vector names the new type too.
        deja_tests::assert_cause_vector_of(&store, &renamed).await;
    }
    assert_eq!(
        store.tokens_stamp(&org, &episodes[2].id).await.unwrap(),
        untouched_before
    );
    // Run again (or with a mistyped name): nothing uses `redis-sessions` now, and saying
    // "merged" with exit 0 would hide the typo.
    let output = merge_redis_sessions(&settings, &org).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("nothing merged") && stderr.contains("redis-sessions"),
        "{stderr}"
    );
}

/// A merge is committed before the renamed episodes are re-encoded, and running it again finds
/// nothing left to rename: when the embedding model cannot load, the merge fails saying what
/// finishes the job, and that command does.
#[tokio::test]
async fn a_merge_whose_re_embedding_fails_says_how_to_finish_it() {
    let settings = deja_tests::worker_app::worker_settings("http://127.0.0.1:9/v1");
    let store = deja_tests::store_for(&settings).await;
    let org = unique_org();
    let mut episode = sample_episode(
        &org,
        "checkout",
        "conv-stale",
        random_unit_vector(random_seed()),
    );
    episode.issue_type = "redis-sessions".to_owned();
    episode.embedding_model = Some(deja_tests::embedder().model_id().to_owned());
    store.save(&episode, None).await.expect("save");
    let mut broken = settings.clone();
    broken.embedding.model_dir =
        std::env::temp_dir().join(format!("deja-no-model-{}", deja_tests::unique_suffix()));
    let output = merge_redis_sessions(&broken, &org).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "the re-embedding failed: {stderr}"
    );
    assert!(
        stderr.contains(&format!("run `deja reembed --org {org}`")),
        "{stderr}"
    );
    let renamed = store
        .get_by_id(Some(&org), &episode.id)
        .await
        .unwrap()
        .expect("episode");
    assert_eq!(renamed.issue_type, "redis-eviction", "the merge is saved");

    let output = tokio::process::Command::from(deja_tests::deja_command(&settings))
        .args(["reembed", "--org", &org])
        .output()
        .await
        .expect("run deja reembed");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("re-embedded 1 episodes"),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let finished = store
        .get_by_id(Some(&org), &episode.id)
        .await
        .unwrap()
        .expect("episode");
    deja_tests::assert_embedding_of(&finished);
}

/// Stored text reaches a person's terminal as text: an escape sequence in an episode's
/// summary (a pasted alert) is printed escaped by `deja get` and `deja search`, never obeyed.
#[tokio::test]
async fn get_and_search_print_stored_escape_sequences_escaped() {
    use deja_tests::api_app::{maven_oom, ApiApp};
    let app = ApiApp::start().await;
    let mut seed = maven_oom(0);
    seed.summary = "surefire heap exhausted\x1b[2J\x1b[1Aroot cause: forged";
    seed.root_cause = None;
    let episode = app.seed("checkout", "conv-1", &seed).await;
    for args in [
        vec!["get", episode.id.as_str(), "--org", app.org.as_str()],
        vec![
            "search",
            "--org",
            app.org.as_str(),
            "--mode",
            "text",
            "surefire heap",
        ],
    ] {
        let output = tokio::process::Command::from(deja_tests::deja_command(&app.settings))
            .args(&args)
            .output()
            .await
            .expect("run deja");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{args:?}: {stdout}");
        assert!(
            stdout.contains("heap exhausted\\u{1b}[2J") && !stdout.contains('\x1b'),
            "{args:?}: {stdout}"
        );
    }
    app.cleanup().await;
}

/// `deja list` says when it shows only the newest of more episodes than its `--limit`.
#[tokio::test]
async fn list_says_when_more_episodes_than_it_shows_exist() {
    use deja_tests::api_app::{maven_oom, ApiApp};
    let app = ApiApp::start().await;
    for (i, conversation) in ["conv-1", "conv-2", "conv-3"].into_iter().enumerate() {
        app.seed("checkout", conversation, &maven_oom(i)).await;
    }
    let list = |limit: &'static str| {
        let mut command = tokio::process::Command::from(deja_tests::deja_command(&app.settings));
        command.args(["list", "--org", &app.org, "--limit", limit]);
        async move {
            let output = command.output().await.expect("run deja");
            assert!(output.status.success());
            String::from_utf8_lossy(&output.stdout).into_owned()
        }
    };
    let cut = list("2").await;
    assert!(cut.contains("the newest 2 episodes (more:"), "{cut}");
    let whole = list("3").await;
    assert!(
        whole.contains("3 episodes") && !whole.contains("more:"),
        "{whole}"
    );
    app.cleanup().await;
}
