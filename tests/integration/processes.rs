//! The real `deja worker` binary: killed mid-batch, and two of them on one queue.

use deja_fake_llm::FakeLlm;
use deja_tests::worker_app::{worker_settings, TurnBuilder, WorkerApp};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

fn spawn_worker(settings: &deja_config::Settings) -> Child {
    deja_tests::deja_command(settings)
        .arg("worker")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn deja worker")
}

/// Publishes `conversations` × 3 interleaved turns; turn 3 carries the conclusion.
async fn publish_conversations(app: &WorkerApp, prefix: &str, conversations: usize) {
    for turn in 1..=3u32 {
        for c in 0..conversations {
            let answer = if turn == 3 {
                format!("Root cause: connection pool exhausted in {prefix}-{c}, confirmed.")
            } else {
                format!("Turn {turn}: looking at {prefix}-{c}.")
            };
            let event = TurnBuilder::new(&app.org, "checkout", &format!("{prefix}-{c}"), turn)
                .answer(&answer)
                .tool("tool", &format!("skill-{turn}"), "output")
                .build();
            app.publish(&event).await;
        }
    }
}

async fn wait_all_final(app: &WorkerApp, prefix: &str, conversations: usize, timeout: Duration) {
    for c in 0..conversations {
        let episode = app
            .wait_for_episode(&format!("{prefix}-{c}"), timeout, |e| e.turn_count == 3)
            .await;
        assert_eq!(episode.last_turn_index, 3);
        assert!(
            episode
                .root_cause
                .as_deref()
                .unwrap_or("")
                .contains(&format!("{prefix}-{c}")),
            "{episode:#?}"
        );
        assert_eq!(episode.skills_used.len(), 3, "{episode:#?}");
    }
}

#[tokio::test]
async fn a_worker_killed_mid_batch_loses_nothing_after_restart() {
    let fake = FakeLlm::start().await;
    fake.set_latency(Duration::from_millis(150));
    let mut settings = worker_settings(&fake.base_url());
    settings.worker.concurrency = 2;
    let mut app = WorkerApp::start_with(settings, fake).await;
    app.stop_worker().await; // only the child processes consume in this test
    let conversations = 8;
    publish_conversations(&app, "kill", conversations).await;
    app.publish_raw(b"not json at all").await;
    app.publish_raw(b"{\"schema_version\": 1}").await;

    let mut child = spawn_worker(&app.settings);
    let deadline = Instant::now() + Duration::from_secs(60);
    while app.fake.calls() < 4 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        app.fake.calls() >= 4,
        "the child worker made progress before the kill"
    );
    child.kill().expect("SIGKILL the worker");
    let _ = child.wait();

    let mut restarted = spawn_worker(&app.settings);
    wait_all_final(&app, "kill", conversations, Duration::from_secs(90)).await;
    let letters = app.take_dead_letters(2, Duration::from_secs(30)).await;
    restarted.kill().expect("stop the second worker");
    let _ = restarted.wait();

    assert_eq!(letters.len(), 2, "both invalid events are dead letters");
    let stored = app
        .store
        .list(
            &deja_domain::Scope::org(&app.org),
            &Default::default(),
            100,
            0,
        )
        .await
        .expect("list");
    assert_eq!(
        stored.len() + letters.len(),
        conversations + 2,
        "published = episodes + dead letters"
    );
    app.cleanup().await;
}

#[tokio::test]
async fn two_worker_processes_on_one_queue_build_correct_episodes() {
    let fake = FakeLlm::start().await;
    fake.set_latency(Duration::from_millis(20));
    let mut app = WorkerApp::start_with(worker_settings(&fake.base_url()), fake).await;
    app.stop_worker().await;
    let mut first = spawn_worker(&app.settings);
    let mut second = spawn_worker(&app.settings);
    publish_conversations(&app, "pair", 6).await;
    wait_all_final(&app, "pair", 6, Duration::from_secs(90)).await;
    for child in [&mut first, &mut second] {
        child.kill().expect("stop worker");
        let _ = child.wait();
    }
    app.cleanup().await;
}

#[tokio::test]
async fn sigterm_drains_in_flight_work_and_leaves_the_rest_queued() {
    let fake = FakeLlm::start().await;
    // Slow enough that the signal lands while a delivery is in flight.
    fake.set_latency(Duration::from_millis(1500));
    let mut settings = worker_settings(&fake.base_url());
    settings.worker.concurrency = 1;
    settings.rabbitmq.prefetch = 1;
    let mut app = WorkerApp::start_with(settings, fake).await;
    app.stop_worker().await;
    for i in 0..4 {
        let event = TurnBuilder::new(&app.org, "checkout", &format!("term-{i}"), 1)
            .answer(&format!(
                "Root cause: thread pool starvation in term-{i}, confirmed."
            ))
            .build();
        app.publish(&event).await;
    }
    let mut child = tokio::process::Command::from(deja_tests::deja_command(&app.settings))
        .arg("worker")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn deja worker");
    let deadline = Instant::now() + Duration::from_secs(60);
    while app.fake.calls() < 1 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(app.fake.calls(), 1, "one delivery is in flight");
    let pid = child.id().expect("child pid").to_string();
    let status = tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .expect("send SIGTERM");
    assert!(status.success());
    let exit = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the worker exits within its grace period")
        .expect("wait for the worker");
    assert!(exit.success(), "a graceful shutdown exits 0: {exit:?}");

    // The in-flight turn finished and was acked; the others wait in the queue, untouched.
    app.wait_for_episode("term-0", Duration::from_secs(5), |e| e.embedding.is_some())
        .await;
    let queue = app.bus.topology().extract_queue.clone();
    let depth = app.bus.queue_depth(&queue).await.expect("queue depth");
    let stored = app
        .store
        .list(
            &deja_domain::Scope::org(&app.org),
            &Default::default(),
            10,
            0,
        )
        .await
        .expect("list");
    assert_eq!(
        stored.len() + depth as usize,
        4,
        "nothing lost: {} stored, {depth} queued",
        stored.len()
    );
    assert!(
        depth >= 2,
        "the worker stopped taking new work after the signal"
    );
    app.cleanup().await;
}
