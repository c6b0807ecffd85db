//! The Memory hub end to end in a real headless Chromium, driven over WebDriver
//! (chromedriver; `deploy/browser.sh install` sets both up): log in, filter, open an episode,
//! edit it, hit the 412 path when another edit landed first, mark it wrong and see the verdict
//! in a memory-search answer, delete it; then review a strategy: edit it, hit its 412 path,
//! accept a regenerated proposal, see its history, and see an episode's recurrence chain. Screenshots of each
//! view go to
//! `$DEJA_HUB_SCREENSHOTS` (docs/hub when refreshing the docs) or a temporary directory.

// The one test awaits the whole hub walk-through in one future; computing its layout from a
// cold incremental cache (a fresh clone, as CI builds) needs deeper queries than the default 128.
#![recursion_limit = "256"]

use deja_tests::api_app::{maven_oom, tls_expiry, ApiApp, MAVEN_QUERY};
use deja_tests::webdriver::{chromedriver_path, Browser};
use serde_json::json;
use std::path::PathBuf;

fn screenshot_dir() -> PathBuf {
    match std::env::var_os("DEJA_HUB_SCREENSHOTS") {
        Some(dir) => PathBuf::from(dir),
        None => std::env::temp_dir().join(format!("deja-hub-{}", deja_tests::unique_suffix())),
    }
}

/// A passing run's temporary screenshots are removed (a failing one keeps them to look at);
/// `$DEJA_HUB_SCREENSHOTS` is never touched.
fn remove_temporary(dir: &std::path::Path) {
    if std::env::var_os("DEJA_HUB_SCREENSHOTS").is_none() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

async fn shot(browser: &Browser, dir: &std::path::Path, name: &str) {
    let path = dir.join(format!("{name}.png"));
    browser.screenshot(&path).await;
    let bytes = std::fs::read(&path).expect("screenshot written");
    assert!(bytes.starts_with(b"\x89PNG"), "{name}.png is not a PNG");
}

#[tokio::test]
async fn a_person_reviews_memory_in_the_hub_from_login_to_delete() {
    let driver = chromedriver_path()
        .filter(|p| p.exists())
        .expect("chromedriver is missing: run deploy/browser.sh install");
    let app = ApiApp::start().await;
    let mut maven_seed = maven_oom(0);
    maven_seed
        .components
        .push(deja_domain::Component::new("service", "checkout"));
    let maven = app.seed("checkout", "conv-maven", &maven_seed).await;
    let tls = app.seed("payments", "conv-tls", &tls_expiry()).await;
    let mut failed = deja_tests::sample_episode(&app.org, "checkout", "conv-failed", Vec::new());
    failed.extraction_status = deja_domain::ExtractionStatus::Failed;
    failed.extraction_error = Some("the LLM answered with invalid JSON twice".into());
    failed.embedding = None;
    app.store.save(&failed, None).await.expect("failed episode");
    let dir = screenshot_dir();
    let browser = Browser::start(&driver).await;
    let hub = format!("{}/hub", app.base_url);

    // Log in: the hub sends strangers to the login form.
    browser.goto(&hub).await;
    assert!(browser.current_url().await.ends_with("/hub/login"));
    shot(&browser, &dir, "login").await;
    browser.fill("#token", &app.tokens.review_only).await;
    browser.click("#login").await;
    browser.wait_for("#filters").await;
    assert!(browser.current_url().await.ends_with("/hub"));
    let list = browser.source().await;
    assert!(list.contains(&maven.id) && list.contains(&tls.id));
    shot(&browser, &dir, "memory-list").await;

    // Filter by team.
    browser.fill("#f-team", "payments").await;
    browser.click("#apply-filters").await;
    browser.wait_for_url("team=payments").await;
    assert_eq!(browser.count("tr.episode").await, 1);
    assert!(browser.source().await.contains(&tls.id));
    shot(&browser, &dir, "memory-list-filtered").await;

    // Open the Maven episode and correct its root cause.
    browser
        .goto(&format!("{hub}?team=checkout&component=pipeline:jenkins"))
        .await;
    browser
        .click(&format!("tr.episode[data-id='{}'] a", maven.id))
        .await;
    browser.wait_for("#edit-form").await;
    assert!(browser.current_url().await.contains(&maven.id));
    shot(&browser, &dir, "episode-detail").await;
    browser
        .fill(
            "#e-root_cause",
            "a test fixture loads the whole survey dataset",
        )
        .await;
    browser
        .fill("#e-key_findings", "SurveyFixture holds 1.8 GB of rows")
        .await;
    browser.click("#save-edit").await;
    browser.wait_for("#flash").await;
    assert_eq!(
        browser.text("#root-cause").await,
        "a test fixture loads the whole survey dataset"
    );
    assert!(browser.text("#flash").await.contains("edit saved"));
    // The corrected findings are stored, pinned and embedded with the episode.
    let corrected = app.store.get_by_id(None, &maven.id).await.unwrap().unwrap();
    assert_eq!(
        corrected.key_findings,
        vec!["SurveyFixture holds 1.8 GB of rows"]
    );
    assert!(corrected.review.human_pinned.contains("key_findings"));
    deja_tests::assert_embedding_of(&corrected);

    // Somebody else edits while this page is open: saving shows the conflict, not an overwrite.
    let current = app.store.get_by_id(None, &maven.id).await.unwrap().unwrap();
    let (status, _, _) = app
        .call(
            reqwest::Method::PATCH,
            &format!("/v1/review/episodes/{}", maven.id),
            Some(&app.tokens.review_only),
            &[("If-Match", format!("\"{}\"", current.version))],
            Some(&json!({"resolution": "moved the fixture to a lazy loader"})),
        )
        .await;
    assert_eq!(status, 200);
    browser.fill("#e-summary", "my stale edit").await;
    browser.click("#save-edit").await;
    browser.wait_for("#conflict").await;
    assert!(browser.text("#conflict").await.contains("Not saved"));
    let stored = app.store.get_by_id(None, &maven.id).await.unwrap().unwrap();
    assert_ne!(stored.summary, "my stale edit");
    shot(&browser, &dir, "edit-conflict").await;

    // Mark it wrong: agents see the verdict in their next memory search.
    browser.goto(&format!("{hub}/episodes/{}", maven.id)).await;
    browser
        .fill("#note", "the heap was fine; a test leaked threads")
        .await;
    browser.click("#mark-wrong").await;
    browser.wait_for("#verdict").await;
    assert!(browser.text("#verdict").await.contains("wrong"));
    shot(&browser, &dir, "episode-marked-wrong").await;
    let answer = app.search_ok(&json!({"query": MAVEN_QUERY})).await;
    let hit = answer["episodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == json!(maven.id))
        .expect("the episode is still found");
    assert_eq!(hit["verdict"], "wrong");
    assert_eq!(
        hit["verdict_note"],
        "the heap was fine; a test leaked threads"
    );

    // The other views.
    browser.goto(&format!("{hub}/failed")).await;
    assert!(browser.source().await.contains("invalid JSON twice"));
    shot(&browser, &dir, "failed-extractions").await;
    browser.goto(&format!("{hub}/strategies")).await;
    assert!(browser.source().await.contains("No strategy yet"));

    // Delete it.
    browser.goto(&format!("{hub}/episodes/{}", maven.id)).await;
    browser.click("#really").await;
    browser.click("#delete").await;
    browser.wait_for_url("deleted=").await;
    assert!(app
        .store
        .get_by_id(None, &maven.id)
        .await
        .unwrap()
        .is_none());
    assert!(!browser
        .source()
        .await
        .contains(&format!("data-id=\"{}\"", maven.id)));

    browser.quit().await;
    app.cleanup().await;
    remove_temporary(&dir);
}

#[tokio::test]
async fn a_person_edits_a_strategy_accepts_its_proposal_and_sees_a_recurrence_chain() {
    use deja_worker::SynthesisOutcome;
    let driver = chromedriver_path()
        .filter(|p| p.exists())
        .expect("chromedriver is missing: run deploy/browser.sh install");
    let app = ApiApp::start().await;
    let first = app.seed("checkout", "conv-maven-1", &maven_oom(0)).await;
    let second = app.seed("checkout", "conv-maven-2", &maven_oom(1)).await;
    let key = app.maven_strategy_key();
    assert_eq!(app.synthesize(&key).await, SynthesisOutcome::Stored);
    let dir = screenshot_dir();
    let browser = Browser::start(&driver).await;
    let hub = format!("{}/hub", app.base_url);
    browser.goto(&format!("{hub}/login")).await;
    browser.fill("#token", &app.tokens.review_only).await;
    browser.click("#login").await;
    browser.wait_for("#filters").await;

    // The strategies list, then one strategy with its edit form.
    browser.goto(&format!("{hub}/strategies")).await;
    assert_eq!(browser.count("a.strategy-link").await, 1);
    shot(&browser, &dir, "strategies").await;
    browser.click("a.strategy-link").await;
    browser.wait_for("#strategy-edit").await;
    shot(&browser, &dir, "strategy").await;
    browser
        .fill(
            "#strategy-markdown-input",
            "### Maven OOM on Jenkins (reviewed)\n1. Check the surefire fork heap first.",
        )
        .await;
    browser.click("#save-strategy").await;
    browser.wait_for("#flash").await;
    assert!(browser.text("#flash").await.contains("Strategy saved"));
    assert!(browser
        .text("#strategy-markdown")
        .await
        .contains("Check the surefire fork heap first"));
    let stored = app.store.get_strategy(&key).await.unwrap().unwrap();
    assert_eq!(stored.edited_by.as_deref(), Some("review-holder"));

    // Someone else edits while this page is open: saving shows the conflict.
    app.store
        .edit_strategy(&key, "### edited by bob meanwhile", "bob")
        .await
        .unwrap()
        .expect("the strategy exists");
    browser
        .fill("#strategy-markdown-input", "### my stale edit")
        .await;
    browser.click("#save-strategy").await;
    browser.wait_for("#conflict").await;
    assert!(browser.text("#conflict").await.contains("Not saved"));
    let stored = app.store.get_strategy(&key).await.unwrap().unwrap();
    assert_eq!(stored.markdown, "### edited by bob meanwhile");
    shot(&browser, &dir, "strategy-edit-conflict").await;

    // A newer episode: regeneration proposes beside the person's text; accept it.
    let third = app.seed("checkout", "conv-maven-3", &maven_oom(2)).await;
    assert_eq!(app.synthesize(&key).await, SynthesisOutcome::Proposed);
    browser.click("a[href^='/hub/strategies']").await;
    browser.click("a.strategy-link").await;
    browser.wait_for("#proposal").await;
    shot(&browser, &dir, "strategy-proposal").await;
    browser.click("#accept-proposal").await;
    browser.wait_for("#flash").await;
    assert!(browser.text("#flash").await.contains("Proposal accepted"));
    assert_eq!(browser.count("#proposal").await, 0);
    let accepted = app.store.get_strategy(&key).await.unwrap().unwrap();
    assert_eq!(accepted.reviewed_by.as_deref(), Some("review-holder"));
    assert_eq!(accepted.edited_by, None);
    assert_eq!(accepted.source_ids.len(), 3);
    // The person's edit and acceptance are on the page as the strategy's history (its audit
    // records, newest first); the edit that landed meanwhile went around the review use case.
    let history = browser.text("#history").await;
    assert!(
        history.contains("accept_proposal") && history.contains("edit"),
        "{history}"
    );
    let history_shot = dir.join("strategy-history.png");
    browser.element_screenshot("#history", &history_shot).await;
    assert!(std::fs::read(&history_shot)
        .unwrap()
        .starts_with(b"\x89PNG"));

    // The recurrence chain on the episode page: three conversations of one failure.
    app.store
        .link_recurrence(&app.org, &second.id, &first.id, 0.91)
        .await
        .unwrap();
    app.store
        .link_recurrence(&app.org, &third.id, &second.id, 0.88)
        .await
        .unwrap();
    browser.goto(&format!("{hub}/episodes/{}", first.id)).await;
    browser.wait_for("#recurrence-chain").await;
    assert_eq!(browser.count("#recurrence-chain li").await, 3);
    assert!(browser
        .text("#recurrences")
        .await
        .contains("Recurrences (2)"));
    let chain_shot = dir.join("recurrence-chain.png");
    browser
        .element_screenshot("#recurrences", &chain_shot)
        .await;
    assert!(std::fs::read(&chain_shot).unwrap().starts_with(b"\x89PNG"));

    browser.quit().await;
    app.cleanup().await;
    remove_temporary(&dir);
}
