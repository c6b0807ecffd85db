//! The Memory hub over real HTTP (no browser): login cookie, CSRF, list filters, the edit
//! form and its 412 page, and the other actions. The browser test drives the same pages in
//! headless Chromium (tests/browser).

use deja_tests::api_app::{maven_oom, tls_expiry, ApiApp, MAVEN_QUERY};
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use reqwest::redirect::Policy;
use serde_json::json;

struct Hub {
    client: reqwest::Client,
    base: String,
    cookie: String,
}

impl Hub {
    async fn login(app: &ApiApp, token: &str) -> Hub {
        let client = reqwest::Client::builder()
            .redirect(Policy::none())
            .build()
            .unwrap();
        let response = client
            .post(format!("{}/hub/login", app.base_url))
            .form(&[("token", token)])
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 303);
        let set_cookie = response.headers()[SET_COOKIE].to_str().unwrap().to_owned();
        assert!(set_cookie.contains("HttpOnly"), "{set_cookie}");
        assert!(set_cookie.contains("SameSite=Strict"), "{set_cookie}");
        let cookie = set_cookie.split(';').next().unwrap().to_owned();
        Hub {
            client,
            base: app.base_url.clone(),
            cookie,
        }
    }

    async fn get(&self, path: &str) -> (u16, String) {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .header(COOKIE, &self.cookie)
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    }

    /// Posts a form; returns (status, Location or body).
    async fn post(&self, path: &str, form: &[(&str, &str)]) -> (u16, String) {
        let response = self
            .client
            .post(format!("{}{path}", self.base))
            .header(COOKIE, &self.cookie)
            .form(form)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let location = response
            .headers()
            .get(LOCATION)
            .map(|l| l.to_str().unwrap().to_owned());
        let body = response.text().await.unwrap();
        (status, location.unwrap_or(body))
    }
}

/// The value of the first hidden `name` field of a page.
fn hidden(page: &str, name: &str) -> String {
    let marker = format!(r#"name="{name}" value=""#);
    let start = page
        .find(&marker)
        .unwrap_or_else(|| panic!("no {name} in page"))
        + marker.len();
    page[start..start + page[start..].find('"').unwrap()].to_owned()
}

#[tokio::test]
async fn the_hub_needs_a_login_and_lists_episodes_with_filters() {
    let app = ApiApp::start().await;
    let maven = app.seed("checkout", "conv-1", &maven_oom(0)).await;
    let tls = app.seed("payments", "conv-2", &tls_expiry()).await;
    let anonymous = reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .unwrap();
    let response = anonymous
        .get(format!("{}/hub", app.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 303);
    assert_eq!(response.headers()[LOCATION], "/hub/login");
    let refused = anonymous
        .post(format!("{}/hub/login", app.base_url))
        .form(&[("token", "not-a-token-at-all")])
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);

    let hub = Hub::login(&app, &app.tokens.review_only).await;
    let (status, page) = hub.get("/hub").await;
    assert_eq!(status, 200);
    assert!(page.contains(&maven.id) && page.contains(&tls.id));
    let (_, filtered) = hub.get("/hub?team=payments").await;
    assert!(filtered.contains(&tls.id) && !filtered.contains(&maven.id));
    let (_, css) = hub.get("/hub/assets/hub.css").await;
    assert!(css.contains("--accent"));

    // A search-only token logs in but cannot review.
    let searcher = Hub::login(&app, &app.tokens.org).await;
    let (status, page) = searcher.get("/hub").await;
    assert_eq!(status, 403, "{page}");
    app.cleanup().await;
}

#[tokio::test]
async fn hub_forms_need_the_csrf_token_and_a_stale_edit_shows_the_conflict() {
    let app = ApiApp::start().await;
    let maven = app.seed("checkout", "conv-1", &maven_oom(0)).await;
    let hub = Hub::login(&app, &app.tokens.review_only).await;
    let detail = format!("/hub/episodes/{}", maven.id);
    let (status, page) = hub.get(&detail).await;
    assert_eq!(status, 200);
    let csrf = hidden(&page, "csrf");
    let version = hidden(&page, "version");

    // Without the CSRF field nothing happens.
    let (status, _) = hub
        .post(&format!("{detail}/confirm"), &[("version", &version)])
        .await;
    assert_eq!(status, 403);

    let (status, location) = hub
        .post(
            &format!("{detail}/edit"),
            &[
                ("csrf", &csrf),
                ("version", &version),
                ("root_cause", "a leaking test fixture"),
            ],
        )
        .await;
    assert_eq!(status, 303, "{location}");
    let (_, page) = hub.get(&location).await;
    assert!(page.contains("a leaking test fixture"), "{page}");

    // The same stale version again: 412, the conflict shown, the first edit kept.
    let (status, page) = hub
        .post(
            &format!("{detail}/edit"),
            &[
                ("csrf", &csrf),
                ("version", &version),
                ("root_cause", "something else entirely"),
            ],
        )
        .await;
    assert_eq!(status, 412);
    assert!(page.contains(r#"id="conflict""#), "{page}");
    assert!(page.contains("a leaking test fixture"));

    let (status, _) = hub
        .post(
            &format!("{detail}/mark-wrong"),
            &[("csrf", &csrf), ("note", "the fixture was fine")],
        )
        .await;
    assert_eq!(status, 303);
    let answer = app.search_ok(&json!({"query": MAVEN_QUERY})).await;
    assert_eq!(answer["episodes"][0]["verdict"], "wrong", "{answer}");
    assert_eq!(
        answer["episodes"][0]["verdict_note"],
        "the fixture was fine"
    );

    let (status, _) = hub
        .post(&format!("{detail}/delete"), &[("csrf", &csrf)])
        .await;
    assert_eq!(status, 303, "an unticked delete only asks again");
    assert!(app
        .store
        .get_by_id(None, &maven.id)
        .await
        .unwrap()
        .is_some());
    let (status, location) = hub
        .post(
            &format!("{detail}/delete"),
            &[("csrf", &csrf), ("really", "yes")],
        )
        .await;
    assert_eq!(status, 303);
    assert!(location.starts_with("/hub?deleted="), "{location}");
    assert!(app
        .store
        .get_by_id(None, &maven.id)
        .await
        .unwrap()
        .is_none());
    app.cleanup().await;
}

/// A configured Neo4j Browser address is linked as given, its own query kept.
#[tokio::test]
async fn a_configured_neo4j_browser_address_keeps_its_query() {
    let app = ApiApp::start_tuned(
        |s| {
            s.api.neo4j_browser_url =
                Some("http://db.example:7474/browser/?dbms=neo4j://db.example:7687".into())
        },
        true,
    )
    .await;
    let maven = app.seed("checkout", "conv-1", &maven_oom(0)).await;
    let hub = Hub::login(&app, &app.tokens.review_only).await;
    let (_, page) = hub.get(&format!("/hub/episodes/{}", maven.id)).await;
    assert!(
        page.contains(
            r#"href="http://db.example:7474/browser/?dbms=neo4j://db.example:7687&amp;cmd=edit&amp;arg="#
        ),
        "{page}"
    );
    app.cleanup().await;
}

/// The hub's banner says only what the hub itself put there; an action that changes nothing
/// says so; an action's address opened as a page, or a mistyped one, answers a page.
#[tokio::test]
async fn the_hub_says_only_its_own_messages_and_answers_every_address_with_a_page() {
    let app = ApiApp::start().await;
    let maven = app.seed("checkout", "conv-1", &maven_oom(0)).await;
    let hub = Hub::login(&app, &app.tokens.review_only).await;
    let detail = format!("/hub/episodes/{}", maven.id);
    let (_, page) = hub.get(&detail).await;
    let csrf = hidden(&page, "csrf");
    let version = hidden(&page, "version");

    // No verdict to clear: nothing written, no history, and the page says so.
    let (status, location) = hub
        .post(
            &format!("{detail}/clear-verdict"),
            &[("csrf", &csrf), ("version", &version)],
        )
        .await;
    assert_eq!(status, 303, "{location}");
    let (_, page) = hub.get(&location).await;
    assert!(page.contains(r#"id="flash">Nothing changed."#), "{page}");
    let stored = app.store.get_by_id(None, &maven.id).await.unwrap().unwrap();
    assert_eq!(stored.version.to_string(), version);
    assert!(app
        .store
        .review_history(&app.org, &maven.id, 10)
        .await
        .unwrap()
        .is_empty());

    // A confirmation is written, and its banner is shown.
    let (_, location) = hub
        .post(
            &format!("{detail}/confirm"),
            &[("csrf", &csrf), ("version", &version)],
        )
        .await;
    let (_, page) = hub.get(&location).await;
    assert!(page.contains(r#"id="flash">confirm saved."#), "{page}");
    // The same words, or others, in a link made elsewhere: no banner.
    let forged = format!("{detail}?flash=Re-enter+your+token+at+https%3A%2F%2Fevil.example");
    let (status, page) = hub.get(&forged).await;
    assert_eq!(status, 200);
    assert!(
        !page.contains("evil.example") && !page.contains(r#"id="flash""#),
        "{page}"
    );
    let (_, page) = hub.get("/hub?deleted=everything").await;
    assert!(!page.contains("Deleted everything"), "{page}");

    // An action's address opened as a page goes to the episode; a mistyped address is a page.
    let response = hub
        .client
        .get(format!("{}{detail}/edit", hub.base))
        .header(COOKIE, &hub.cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 303);
    assert_eq!(response.headers()[LOCATION], detail.as_str());
    let (status, page) = hub.get("/hub/no-such-page").await;
    assert_eq!(status, 404);
    assert!(
        page.contains("<!doctype html>") && page.contains("no hub page"),
        "{page}"
    );
    app.cleanup().await;
}

/// People see what opened the investigation, escaped like every stored text; the search
/// answer an agent gets does not carry it.
#[tokio::test]
async fn the_episode_page_shows_the_opening_message_and_search_answers_leave_it_out() {
    let app = ApiApp::start().await;
    let mut episode = deja_tests::sample_episode(
        &app.org,
        "checkout",
        "conv-7",
        deja_tests::random_unit_vector(deja_tests::random_seed()),
    );
    episode.opening_message = Some("[FIRING] <script>CheckoutErrors</script> ratio=0.31".into());
    app.store.save(&episode, None).await.unwrap();
    let hub = Hub::login(&app, &app.tokens.review_only).await;
    let (status, page) = hub.get(&format!("/hub/episodes/{}", episode.id)).await;
    assert_eq!(status, 200);
    assert!(
        page.contains(
            r#"<span id="opening-message">[FIRING] &lt;script&gt;CheckoutErrors&lt;/script&gt; ratio=0.31</span>"#
        ),
        "{page}"
    );
    assert!(!page.contains("<script>CheckoutErrors"));

    let view = serde_json::to_value(deja_api::EpisodeView::full(&episode)).unwrap();
    assert!(!view.to_string().contains("CheckoutErrors"), "{view}");
    app.cleanup().await;
}

/// People correct recurrence links from the episode page: confirm the recognizer's guess,
/// say a linked pair is not the same failure (from either end), link a pair it missed.
#[tokio::test]
async fn recurrence_links_are_confirmed_removed_and_made_from_the_episode_page() {
    let app = ApiApp::start().await;
    let older = app.seed("checkout", "conv-1", &maven_oom(0)).await;
    let newer = app.seed("checkout", "conv-2", &maven_oom(1)).await;
    let third = app.seed("checkout", "conv-3", &maven_oom(2)).await;
    app.store
        .link_recurrence(&app.org, &newer.id, &older.id, 0.7)
        .await
        .unwrap();
    let links = |id: String| {
        let store = app.store.clone();
        let org = app.org.clone();
        async move {
            store
                .recurrences(&org, &id, None)
                .await
                .unwrap()
                .map(|r| r.links)
                .unwrap_or_default()
        }
    };
    let hub = Hub::login(&app, &app.tokens.review_only).await;

    // The newer episode's own link (it recurs of the older): confirmed by the person.
    let page_of = |id: &str| format!("/hub/episodes/{id}");
    let (_, page) = hub.get(&page_of(&newer.id)).await;
    assert!(page.contains(r#"class="confirm-link""#), "{page}");
    let csrf = hidden(&page, "csrf");
    let version = hidden(&page, "version");
    let (status, location) = hub
        .post(
            &format!("{}/confirm-link", page_of(&newer.id)),
            &[
                ("csrf", &csrf),
                ("version", &version),
                ("other", &older.id),
                ("direction", "of"),
            ],
        )
        .await;
    assert_eq!(status, 303, "{location}");
    let (_, page) = hub.get(&location).await;
    assert!(page.contains("Recurrence link saved."), "{page}");
    let link = links(newer.id.clone()).await;
    assert_eq!(link.len(), 1, "{link:?}");
    assert_eq!(link[0].confirmed_by.as_deref(), Some("review-holder"));
    assert_eq!(link[0].confidence, 1.0);

    // From the older episode's page, where the link is the newer one's: removed, and the
    // pair is remembered as not a recurrence.
    let (_, page) = hub.get(&page_of(&older.id)).await;
    let version = hidden(&page, "version");
    let (status, location) = hub
        .post(
            &format!("{}/unlink", page_of(&older.id)),
            &[
                ("csrf", &csrf),
                ("version", &version),
                ("other", &newer.id),
                ("direction", "in"),
            ],
        )
        .await;
    assert_eq!(status, 303, "{location}");
    assert!(links(newer.id.clone()).await.is_empty());
    let (_, page) = hub.get(&location).await;
    assert!(page.contains(r#"<ul id="rejected-links">"#), "{page}");

    // A pair the recognizer missed, linked by name; a name that is no episode is refused.
    let (_, page) = hub.get(&page_of(&third.id)).await;
    let version = hidden(&page, "version");
    let (status, page) = hub
        .post(
            &format!("{}/link", page_of(&third.id)),
            &[("csrf", &csrf), ("version", &version), ("of", "ep_nothing")],
        )
        .await;
    assert_eq!(status, 404, "{page}");
    let (status, _) = hub
        .post(
            &format!("{}/link", page_of(&third.id)),
            &[("csrf", &csrf), ("version", &version), ("of", &older.id)],
        )
        .await;
    assert_eq!(status, 303);
    let link = links(third.id.clone()).await;
    assert_eq!(
        link.iter()
            .map(|l| (l.direction.as_str(), l.id.as_str(), l.by.as_str()))
            .collect::<Vec<_>>(),
        vec![("of", older.id.as_str(), "review-holder")]
    );
    let history = app
        .store
        .review_history(&app.org, &third.id, 10)
        .await
        .unwrap();
    assert_eq!(history[0].action, "link_recurrence", "{history:?}");
    app.cleanup().await;
}

/// A pair a person unlinked is shown on the episode page as not a recurrence, with who said
/// so, escaped like every stored text.
#[tokio::test]
async fn the_episode_page_shows_the_recurrences_a_person_rejected() {
    let app = ApiApp::start().await;
    let older = app.seed("checkout", "conv-1", &maven_oom(0)).await;
    let newer = app.seed("checkout", "conv-2", &maven_oom(1)).await;
    assert_eq!(
        app.store
            .link_recurrence(&app.org, &newer.id, &older.id, 0.8)
            .await
            .unwrap(),
        Some(true)
    );
    let principal = deja_api::Principal::local_reviewer(&app.org, "<b>oncall</b>");
    deja_api::Review::new(app.store.clone(), None)
        .unlink(
            &principal,
            Some(app.org.clone()),
            &newer.id,
            &older.id,
            None,
        )
        .await
        .unwrap();
    let hub = Hub::login(&app, &app.tokens.review_only).await;
    let (status, page) = hub.get(&format!("/hub/episodes/{}", newer.id)).await;
    assert_eq!(status, 200);
    let rejected = &page[page.find(r#"<ul id="rejected-links">"#).expect(&page)..];
    assert!(
        rejected.contains("not a recurrence of")
            && rejected.contains(&older.id)
            && rejected.contains("unlinked by &lt;b&gt;oncall&lt;/b&gt;"),
        "{rejected}"
    );
    let (_, page) = hub.get(&format!("/hub/episodes/{}", older.id)).await;
    assert!(
        page.contains("is not a recurrence of this one") && page.contains(&newer.id),
        "{page}"
    );
    app.cleanup().await;
}

#[tokio::test]
async fn the_failed_and_strategies_pages_say_what_to_run() {
    let app = ApiApp::start().await;
    let mut failed = deja_tests::sample_episode(&app.org, "checkout", "conv-9", Vec::new());
    failed.extraction_status = deja_domain::ExtractionStatus::Failed;
    failed.extraction_error = Some("the llm answered garbage".into());
    failed.embedding = None;
    app.store.save(&failed, None).await.unwrap();
    let hub = Hub::login(&app, &app.tokens.review_only).await;
    let (status, page) = hub.get("/hub/failed").await;
    assert_eq!(status, 200);
    assert!(page.contains("the llm answered garbage"));
    assert!(page.contains(&format!("deja retry {}", failed.id)));
    // One queue holds every org's dead letters: an org's reviewer is pointed at it, not told
    // its depth (the dev-mode hub, of no single org, is: below).
    assert!(
        !page.contains(r#"id="dead-letters""#) && page.contains("shared by every org"),
        "{page}"
    );
    let (status, page) = hub.get("/hub/strategies").await;
    assert_eq!(status, 200);
    assert!(page.contains("No strategy yet"));
    assert!(!page.contains("synthesis-failures"), "{page}");

    // A synthesis that failed heads the page, with its reason, escaped.
    let key = app.maven_strategy_key();
    let lease = std::time::Duration::from_secs(60);
    app.store
        .claim_synthesis(&key, "fp-1", lease, lease)
        .await
        .unwrap();
    app.store
        .fail_synthesis_claim(&key, &["fp-1"], "fp-1", "the model's reply was <not> JSON")
        .await
        .unwrap();
    let (status, page) = hub.get("/hub/strategies").await;
    assert_eq!(status, 200);
    let failures = &page[page
        .find(r#"<table id="synthesis-failures">"#)
        .expect(&page)..];
    assert!(
        failures.contains("build-failure")
            && failures.contains("pipeline:jenkins")
            && failures.contains("the model&#39;s reply was &lt;not&gt; JSON"),
        "{failures}"
    );
    app.cleanup().await;
}

#[tokio::test]
async fn the_dev_mode_hub_of_no_single_org_counts_the_dead_letters() {
    let app = ApiApp::start_tuned(
        |s| {
            s.api.dev = true;
            s.api.tokens.clear();
        },
        true,
    )
    .await;
    let page = app
        .client
        .get(format!("{}/hub/failed?org={}", app.base_url, app.org))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains(r#"<span id="dead-letters">0</span>"#),
        "{page}"
    );
    // The Neo4j Browser link of a loopback store, Browser on its port 7474.
    let maven = app.seed("checkout", "conv-1", &maven_oom(0)).await;
    let page = app
        .client
        .get(format!(
            "{}/hub/episodes/{}?org={}",
            app.base_url, maven.id, app.org
        ))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains(r#"href="http://127.0.0.1:7474/browser/?cmd=edit&amp;arg="#),
        "{page}"
    );
    // The navigation's links carry no org: the pages ask for one instead of failing.
    for path in ["/hub/failed", "/hub/strategies"] {
        let response = app
            .client
            .get(format!("{}{path}", app.base_url))
            // A session cookie left by a server that had tokens: the open hub ignores it.
            .header(COOKIE, "deja_hub=a-token-of-another-server")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        let page = response.text().await.unwrap();
        assert!(page.contains(r#"id="pick-org""#), "{path}: {page}");
    }
    app.cleanup().await;
}

/// The hub's strategy edit form for the org-wide build-failure / pipeline:jenkins strategy.
fn strategy_form<'a>(
    csrf: &'a str,
    version: &'a str,
    markdown: &'a str,
) -> [(&'static str, &'a str); 6] {
    [
        ("csrf", csrf),
        ("version", version),
        ("team", "*"),
        ("issue_type", "build-failure"),
        ("component", "pipeline:jenkins"),
        ("markdown", markdown),
    ]
}

/// The href of the first `strategy-link` of a page, unescaped.
fn strategy_link(page: &str) -> String {
    let marker = r#"class="strategy-link" href=""#;
    let start = page.find(marker).expect("a strategy link") + marker.len();
    page[start..start + page[start..].find('"').unwrap()].replace("&amp;", "&")
}

/// Org-wide strategies are made from every team's episodes: a token limited to one team
/// does not see them in its team's listing, as it cannot open one (`team=*`).
#[tokio::test]
async fn a_team_token_lists_its_teams_strategies_without_the_org_wide_ones() {
    use deja_worker::SynthesisOutcome;
    let app = ApiApp::start().await;
    app.seed("checkout", "conv-1", &maven_oom(0)).await;
    app.seed("checkout", "conv-2", &maven_oom(1)).await;
    assert_eq!(
        app.synthesize(&app.maven_strategy_key()).await,
        SynthesisOutcome::Stored
    );
    let org_wide = Hub::login(&app, &app.tokens.review_only).await;
    let (status, page) = org_wide.get("/hub/strategies?team=checkout").await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("build-failure"), "{page}");
    let team = Hub::login(&app, &app.tokens.review_checkout).await;
    let (status, page) = team.get("/hub/strategies?team=checkout").await;
    assert_eq!(status, 200, "{page}");
    assert!(!page.contains("build-failure"), "{page}");
    assert!(page.contains("No strategy yet"), "{page}");
    let (status, _) = team
        .get("/hub/strategy?team=*&issue_type=build-failure&component=pipeline:jenkins")
        .await;
    assert_eq!(status, 403);
    app.cleanup().await;
}

#[tokio::test]
async fn a_strategy_is_edited_and_its_proposal_accepted_from_the_hub() {
    use deja_worker::SynthesisOutcome;
    let app = ApiApp::start().await;
    app.seed("checkout", "conv-1", &maven_oom(0)).await;
    app.seed("checkout", "conv-2", &maven_oom(1)).await;
    let key = app.maven_strategy_key();
    assert_eq!(app.synthesize(&key).await, SynthesisOutcome::Stored);
    let hub = Hub::login(&app, &app.tokens.review_only).await;
    let (_, list) = hub.get("/hub/strategies").await;
    let link = strategy_link(&list);
    let (status, page) = hub.get(&link).await;
    assert_eq!(status, 200, "{page}");
    let version = hidden(&page, "version");
    let csrf = hidden(&page, "csrf");
    let edited = "### Reviewed by a person\n\n1. check the surefire heap first\n";
    // As a browser sends a textarea: `\r\n` line breaks, stored as the `\n` agents read.
    let (status, location) = hub
        .post(
            "/hub/strategy/edit",
            &strategy_form(&csrf, &version, &edited.replace('\n', "\r\n")),
        )
        .await;
    assert_eq!(status, 303, "{location}");
    assert!(location.contains("flash="), "{location}");
    let (_, page) = hub.get(&location).await;
    assert!(page.contains("Strategy saved"), "{page}");
    let stored = app.store.get_strategy(&key).await.unwrap().unwrap();
    assert_eq!(stored.markdown, edited);
    assert_eq!(stored.edited_by.as_deref(), Some("review-holder"));

    // The same form again: the version it carries is no longer the stored one.
    let (status, page) = hub
        .post(
            "/hub/strategy/edit",
            &strategy_form(&csrf, &version, "### a stale edit"),
        )
        .await;
    assert_eq!(status, 412);
    assert!(page.contains(r#"id="conflict""#), "{page}");
    assert!(
        page.contains("a stale edit"),
        "what was sent is shown: {page}"
    );
    let now = app.store.get_strategy(&key).await.unwrap().unwrap();
    assert_eq!(now.markdown, edited, "nothing overwritten");

    // Newer sources: regeneration proposes beside the person's text.
    app.seed("checkout", "conv-3", &maven_oom(3)).await;
    assert_eq!(app.synthesize(&key).await, SynthesisOutcome::Proposed);
    let (_, page) = hub.get(&link).await;
    assert!(page.contains(r#"id="proposal""#), "{page}");
    let read = hidden(&page, "version");
    // A newer synthesis replaces the proposal after the page was read: accepting carries the
    // version read, and what was not read is not accepted.
    app.seed("checkout", "conv-4", &maven_oom(2)).await;
    assert_eq!(app.synthesize(&key).await, SynthesisOutcome::Proposed);
    let stale = [
        ("csrf", csrf.as_str()),
        ("version", read.as_str()),
        ("team", "*"),
        ("issue_type", "build-failure"),
        ("component", "pipeline:jenkins"),
    ];
    let (status, page) = hub.post("/hub/strategy/accept", &stale).await;
    assert_eq!(status, 412, "{page}");
    assert!(page.contains("Not accepted"), "{page}");
    let pending = app.store.get_strategy(&key).await.unwrap().unwrap();
    assert_eq!(pending.markdown, edited, "nothing accepted");
    let proposal = pending.proposed_markdown.expect("a proposal");
    // The page as it is now accepts the proposal it shows.
    let (_, page) = hub.get(&link).await;
    let current = hidden(&page, "version");
    assert_eq!(current, pending.version.to_string());
    let accept = [
        ("csrf", csrf.as_str()),
        ("version", current.as_str()),
        ("team", "*"),
        ("issue_type", "build-failure"),
        ("component", "pipeline:jenkins"),
    ];
    let (status, location) = hub.post("/hub/strategy/accept", &accept).await;
    assert_eq!(status, 303, "{location}");
    let accepted = app.store.get_strategy(&key).await.unwrap().unwrap();
    assert_eq!(accepted.markdown, proposal);
    assert_eq!(accepted.edited_by, None);
    assert_eq!(accepted.reviewed_by.as_deref(), Some("review-holder"));
    // Nothing left to accept; a post without the CSRF value is refused.
    let after = accepted.version.to_string();
    let again = [
        ("csrf", csrf.as_str()),
        ("version", after.as_str()),
        ("team", "*"),
        ("issue_type", "build-failure"),
        ("component", "pipeline:jenkins"),
    ];
    let (status, _) = hub.post("/hub/strategy/accept", &again).await;
    assert_eq!(status, 404);
    let (status, _) = hub.post("/hub/strategy/accept", &again[1..]).await;
    assert_eq!(status, 403);

    // Both writes left their audit record (who, when, what changed), newest first: on the
    // strategy's page, in the review API and in the Neo4j Browser query.
    let (_, page) = hub.get(&link).await;
    assert!(
        page.contains("<td>accept_proposal</td>") && page.contains("<td>edit</td>"),
        "{page}"
    );
    let (status, headers, json) = app
        .call(
            reqwest::Method::GET,
            "/v1/review/strategy?team=*&issue_type=build-failure&component=pipeline:jenkins",
            Some(&app.tokens.review_only),
            &[],
            None,
        )
        .await;
    assert_eq!(status, 200, "{json}");
    let view = &json["result"];
    assert_eq!(view["version"], json!(accepted.version));
    assert_eq!(
        headers.get("etag").and_then(|v| v.to_str().ok()),
        Some(format!("\"{}\"", accepted.version).as_str())
    );
    let history = view["history"].as_array().expect("a history");
    assert_eq!(history.len(), 2, "{view:#}");
    let (accept_record, edit_record) = (&history[0], &history[1]);
    assert_eq!(accept_record["action"], "accept_proposal");
    assert_eq!(accept_record["by"], "review-holder");
    assert_eq!(accept_record["version"], json!(accepted.version));
    assert!(accept_record["changes"]
        .as_array()
        .unwrap()
        .contains(&json!({"field": "markdown", "from": edited, "to": proposal})));
    assert!(accept_record["changes"]
        .as_array()
        .unwrap()
        .contains(&json!({"field": "edited_by", "from": "review-holder", "to": null})));
    assert_eq!(edit_record["action"], "edit");
    assert_eq!(edit_record["by"], "review-holder");
    assert_eq!(edit_record["version"], json!(stored.version));
    assert_eq!(edit_record["changes"][0]["field"], "markdown");
    assert_eq!(edit_record["changes"][0]["to"], edited);
    let browsed = browse_review_history(&app.org).await;
    assert_eq!(
        browsed,
        vec![
            (
                "strategy".to_owned(),
                "accept_proposal".to_owned(),
                "review-holder".to_owned()
            ),
            (
                "strategy".to_owned(),
                "edit".to_owned(),
                "review-holder".to_owned()
            ),
        ]
    );

    // A team-bound reviewer cannot open the org-wide strategy.
    let team_hub = Hub::login(&app, &app.tokens.review_checkout).await;
    let (status, _) = team_hub.get(&link).await;
    assert_eq!(status, 403);
    app.cleanup().await;
}

/// `cypher/browse/review_history.cypher` as a person runs it for `org`: (kind, action, by).
async fn browse_review_history(org: &str) -> Vec<(String, String, String)> {
    let text = include_str!("../../../cypher/browse/review_history.cypher");
    let query: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with(":param"))
        .collect::<Vec<_>>()
        .join("\n");
    let graph = deja_tests::raw_graph(&deja_tests::test_settings());
    let mut rows = graph
        .execute(neo4rs::query(&query).param("org", org))
        .await
        .expect("review_history.cypher runs");
    let mut found = Vec::new();
    while let Some(row) = rows.next().await.expect("a row") {
        found.push((
            row.get::<String>("kind").unwrap(),
            row.get::<String>("action").unwrap(),
            row.get::<String>("by").unwrap(),
        ));
    }
    found
}

/// Undoes the hub's HTML escaping.
fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// What a browser posts back from the episode page's edit form, left untouched: every field
/// (a textarea's line breaks as `\r\n`, as browsers send them) and the hidden values.
fn edit_form_as_sent(page: &str) -> Vec<(String, String)> {
    let start = page.find(r#"id="edit-form""#).expect("an edit form");
    let form = &page[start..start + page[start..].find("</form>").unwrap()];
    let mut fields = Vec::new();
    for (at, _) in form.match_indices("<textarea name=\"") {
        let rest = &form[at + "<textarea name=\"".len()..];
        let name = &rest[..rest.find('"').unwrap()];
        let value = &rest[rest.find('>').unwrap() + 1..rest.find("</textarea>").unwrap()];
        fields.push((name.to_owned(), unescape(value).replace('\n', "\r\n")));
    }
    for (at, _) in form.match_indices("<input type=\"") {
        let rest = &form[at..];
        let tag = &rest[..rest.find('>').unwrap()];
        let attribute = |name: &str| {
            let marker = format!(r#" {name}=""#);
            tag.find(&marker).map(|i| {
                let value = &tag[i + marker.len()..];
                unescape(&value[..value.find('"').unwrap()])
            })
        };
        if let (Some(name), Some(value)) = (attribute("name"), attribute("value")) {
            fields.push((name, value));
        }
    }
    fields
}

/// A browser sends every field of the form back; the one the person left alone must not
/// count as an edit, even when its line breaks come back as `\r\n`.
#[tokio::test]
async fn saving_one_field_of_the_edit_form_leaves_the_others_alone() {
    let app = ApiApp::start().await;
    let mut episode = deja_tests::sample_episode(
        &app.org,
        "checkout",
        "conv-lines",
        deja_tests::random_unit_vector(deja_tests::random_seed()),
    );
    episode.summary = "checkout failed for ten minutes\nsessions were evicted".into();
    episode.root_cause = Some("maxmemory too low\nfor the session keys".into());
    episode.resolution = Some("raised maxmemory".into());
    episode.significance = Some("minor".into());
    app.store.save(&episode, None).await.unwrap();
    let hub = Hub::login(&app, &app.tokens.review_only).await;
    let detail = format!("/hub/episodes/{}", episode.id);
    let (_, page) = hub.get(&detail).await;
    assert!(
        page.contains(r#"<textarea name="root_cause""#),
        "text with line breaks is a textarea: {page}"
    );
    let mut form = edit_form_as_sent(&page);
    assert!(form
        .iter()
        .any(|(k, v)| k == "summary" && v.contains("\r\n")));
    for (name, value) in &mut form {
        if name == "significance" {
            *value = "major".into();
        }
    }
    let fields: Vec<(&str, &str)> = form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let (status, location) = hub.post(&format!("{detail}/edit"), &fields).await;
    assert_eq!(status, 303, "{location}");

    let stored = app
        .store
        .get_by_id(None, &episode.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.significance.as_deref(), Some("major"));
    assert_eq!(stored.summary, episode.summary);
    assert_eq!(stored.root_cause, episode.root_cause);
    assert_eq!(
        stored.review.human_pinned.iter().collect::<Vec<_>>(),
        vec!["significance"]
    );
    let (_, _, view) = app
        .call(
            reqwest::Method::GET,
            &format!("/v1/review/episodes/{}", episode.id),
            Some(&app.tokens.review_only),
            &[],
            None,
        )
        .await;
    let history = &view["result"]["history"];
    assert_eq!(history.as_array().map(Vec::len), Some(1), "{history:#}");
    assert_eq!(
        history[0]["changes"],
        json!([{"field": "significance", "from": "minor", "to": "major"}])
    );

    // The untouched form again: nothing to save, nothing written.
    let (_, page) = hub.get(&detail).await;
    let form = edit_form_as_sent(&page);
    let fields: Vec<(&str, &str)> = form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let (status, location) = hub.post(&format!("{detail}/edit"), &fields).await;
    assert_eq!(status, 303, "{location}");
    let again = app
        .store
        .get_by_id(None, &episode.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.version, stored.version);
    app.cleanup().await;
}

/// A token bound to one team lists that team without naming it; one of several teams
/// picks its team first.
#[tokio::test]
async fn a_team_reviewer_gets_its_teams_lists_without_naming_the_team() {
    use deja_worker::SynthesisOutcome;
    let app = ApiApp::start().await;
    let checkout = app.seed("checkout", "conv-1", &maven_oom(0)).await;
    app.seed("checkout", "conv-2", &maven_oom(1)).await;
    let payments = app.seed("payments", "conv-3", &tls_expiry()).await;
    let mut failed = deja_tests::sample_episode(&app.org, "checkout", "conv-9", Vec::new());
    failed.extraction_status = deja_domain::ExtractionStatus::Failed;
    failed.extraction_error = Some("the llm answered garbage".into());
    failed.embedding = None;
    app.store.save(&failed, None).await.unwrap();
    let mut failed_elsewhere =
        deja_tests::sample_episode(&app.org, "payments", "conv-10", Vec::new());
    failed_elsewhere.extraction_status = deja_domain::ExtractionStatus::Failed;
    failed_elsewhere.extraction_error = Some("another team's failure".into());
    failed_elsewhere.embedding = None;
    app.store.save(&failed_elsewhere, None).await.unwrap();
    let key = deja_domain::strategy::StrategyKey {
        team: "checkout".into(),
        ..app.maven_strategy_key()
    };
    assert_eq!(app.synthesize(&key).await, SynthesisOutcome::Stored);

    let hub = Hub::login(&app, &app.tokens.review_checkout).await;
    let (status, page) = hub.get("/hub").await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains(&checkout.id) && !page.contains(&payments.id),
        "{page}"
    );
    let (status, page) = hub.get("/hub/failed").await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("the llm answered garbage"), "{page}");
    assert!(!page.contains("another team's failure"), "{page}");
    let (status, page) = hub.get("/hub/strategies").await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("build-failure"), "{page}");
    // Failed syntheses: the team's own is listed; another team's and an org-wide one (made
    // from every team's episodes) are not.
    let lease = std::time::Duration::from_secs(60);
    for (team, reason) in [
        ("checkout", "checkout synthesis refused"),
        ("payments", "payments synthesis refused"),
        (
            deja_domain::strategy::ORG_WIDE_TEAM,
            "org-wide synthesis refused",
        ),
    ] {
        let failed_key = deja_domain::strategy::StrategyKey {
            team: team.into(),
            issue_type: "disk-full".into(),
            ..app.maven_strategy_key()
        };
        app.store
            .claim_synthesis(&failed_key, "fp-1", lease, lease)
            .await
            .unwrap();
        app.store
            .fail_synthesis_claim(&failed_key, &["fp-1"], "fp-1", reason)
            .await
            .unwrap();
    }
    let (status, page) = hub.get("/hub/strategies").await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("checkout synthesis refused"), "{page}");
    assert!(
        !page.contains("payments synthesis refused") && !page.contains("org-wide synthesis"),
        "{page}"
    );
    let (status, _) = hub.get("/hub?team=payments").await;
    assert_eq!(status, 403);

    // Two teams: a page to pick one, then that team's list.
    let hub = Hub::login(&app, &app.tokens.review_teams).await;
    for path in ["/hub", "/hub/failed", "/hub/strategies"] {
        let (status, page) = hub.get(path).await;
        assert_eq!(status, 200, "{path}: {page}");
        assert!(page.contains(r#"id="pick-team""#), "{path}: {page}");
        assert!(
            page.contains(&format!(r#"href="{path}?team=payments""#)),
            "{path}: {page}"
        );
    }
    let (status, page) = hub.get("/hub?team=payments").await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains(&payments.id) && !page.contains(&checkout.id));
    app.cleanup().await;
}

/// Login CSRF: a page on another site must not log the visitor into its author's session.
#[tokio::test]
async fn a_login_posted_from_another_site_is_refused() {
    let app = ApiApp::start().await;
    let client = reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .unwrap();
    let login = |headers: &[(&str, &str)]| {
        let mut request = client
            .post(format!("{}/hub/login", app.base_url))
            .form(&[("token", app.tokens.review_only.as_str())]);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send()
    };
    for refused in [
        vec![("origin", "http://evil.example")],
        vec![("origin", "null")],
        vec![("sec-fetch-site", "cross-site")],
        vec![("sec-fetch-site", "same-site")],
        // The browser's word wins over a matching Origin.
        vec![
            ("origin", app.base_url.as_str()),
            ("sec-fetch-site", "cross-site"),
        ],
    ] {
        let response = login(&refused).await.unwrap();
        assert_eq!(response.status(), 403, "{refused:?}");
        assert!(response.headers().get(SET_COOKIE).is_none(), "{refused:?}");
    }
    let response = login(&[
        ("origin", app.base_url.as_str()),
        ("sec-fetch-site", "same-origin"),
    ])
    .await
    .unwrap();
    assert_eq!(response.status(), 303);
    let cookie = response.headers()[SET_COOKIE].to_str().unwrap().to_owned();
    assert!(cookie.starts_with("deja_hub="), "{cookie}");
    // Behind a reverse proxy that sends the upstream address as Host, the browser's
    // Sec-Fetch-Site still says the login is its own.
    let response = login(&[
        ("origin", "https://deja.example.com"),
        ("sec-fetch-site", "same-origin"),
    ])
    .await
    .unwrap();
    assert_eq!(response.status(), 303);
    assert!(!cookie.contains("Secure"), "plain http: {cookie}");
    // Behind a TLS-terminating proxy the cookie is for https only.
    let response = login(&[("x-forwarded-proto", "https")]).await.unwrap();
    assert_eq!(response.status(), 303);
    let cookie = response.headers()[SET_COOKIE].to_str().unwrap();
    assert!(cookie.contains("; Secure"), "{cookie}");
    app.cleanup().await;
}

/// Past a page of failed extractions the page says so and links to the next.
#[tokio::test]
async fn the_failed_page_says_when_there_are_more_than_it_shows() {
    let app = ApiApp::start().await;
    for i in 0..101 {
        let mut failed =
            deja_tests::sample_episode(&app.org, "checkout", &format!("conv-{i}"), Vec::new());
        failed.extraction_status = deja_domain::ExtractionStatus::Failed;
        failed.extraction_error = Some("the llm answered garbage".into());
        failed.embedding = None;
        failed.components.clear();
        failed.skills_used.clear();
        app.store.save(&failed, None).await.unwrap();
    }
    let hub = Hub::login(&app, &app.tokens.review_only).await;
    let (status, page) = hub.get("/hub/failed").await;
    assert_eq!(status, 200);
    assert!(page.contains(r#"id="truncated""#), "{page}");
    let marker = r#"id="next" href=""#;
    let start = page.find(marker).expect("a next link") + marker.len();
    let next = unescape(&page[start..start + page[start..].find('"').unwrap()]);
    assert_eq!(next, "/hub/failed?offset=100");
    let (status, page) = hub.get(&next).await;
    assert_eq!(status, 200);
    assert_eq!(page.matches("deja retry ep_").count(), 1, "{page}");
    assert!(!page.contains(r#"id="next""#));
    app.cleanup().await;
}
