//! Automatic recurrence links (issue 11) against the real stack: eval incidents imported into
//! the test's org, agent turns through the worker's own step on the fake LLM (auto mode), the
//! recognition decision with the real embedder and cross-encoder. Then what search answers
//! carry: each episode's `recurrence_count` and first / last seen dates.

// The memory of the recognition tests: among others inc-dev-014 and inc-dev-053, two
// incidents of team `checkout`, the team of the turns below.
use super::recognition::MEMORY;
use deja_tests::api_app::ApiApp;
use deja_tests::worker_app::TurnBuilder;
use deja_worker::Outcome;
use reqwest::Method;
use serde_json::{json, Value};

async fn review(app: &ApiApp, id: &str) -> Value {
    let (status, _, json) = app
        .call(
            Method::GET,
            &format!("/v1/review/episodes/{id}"),
            Some(&app.tokens.review_only),
            &[],
            None,
        )
        .await;
    assert_eq!(status, 200, "{json}");
    json["result"].clone()
}

/// The episode a turn stored. The worker's step is boxed: its future is large, and a test
/// awaiting it besides the linker's overflowed the test thread's stack.
async fn stored(app: &ApiApp, turn: &deja_domain::TurnEvent) -> String {
    match Box::pin(app.agent_turn(turn)).await {
        Outcome::Stored {
            episode_id,
            changed: true,
            ..
        } => episode_id,
        other => panic!("turn not stored: {other:?}"),
    }
}

/// What the agent sees of the socket leak before it knows the mechanism.
const SOCKET_LEAK_SYMPTOMS: &str = "Checkout pods run out of file descriptors (EMFILE, too \
     many open files) hours after the deploy; lsof shows thousands of CLOSE_WAIT sockets to \
     the merchant webhook endpoints.";

/// The socket leak's mechanism, as the recurrence's agent concludes it.
const SOCKET_LEAK_CAUSE: &str = "the merchant webhook client never closes the response body \
     when a delivery fails, so every failed webhook leaks a socket until the descriptor limit";

/// inc-dev-014 (webhook client leaking sockets after each deploy) happening again, told by
/// another agent in other words, over two turns.
fn socket_leak_turn(app: &ApiApp, index: u32, answer: &str) -> deja_domain::TurnEvent {
    TurnBuilder::new(&app.org, "checkout", "conv-socket-leak-again", index)
        .user_message(
            "[FIRING] CheckoutConnectionsRefused service=checkout: checkout pods stop \
             accepting connections some hours after today's release",
        )
        .answer(answer)
        .tool(
            "lsof",
            "linux-diagnostics",
            "4012 sockets in CLOSE_WAIT to hooks.merchant.example:443",
        )
        .build()
}

/// The recurrence's turn `index` that concludes the socket leak's mechanism.
fn socket_leak_concluded(app: &ApiApp, index: u32) -> deja_domain::TurnEvent {
    socket_leak_turn(
        app,
        index,
        &format!(
            "{SOCKET_LEAK_SYMPTOMS} Root cause: {SOCKET_LEAK_CAUSE}. Confirmed by the socket \
             count dropping after a fix."
        ),
    )
}

/// A test app whose memory holds the recognition tests' incidents; returns inc-dev-014's
/// episode, the first occurrence of the socket leak the turns below recur.
async fn app_remembering_the_socket_leak() -> (ApiApp, deja_domain::Episode) {
    let app = ApiApp::start().await;
    let memory = app.import_eval_incidents(MEMORY).await;
    let first = memory
        .into_iter()
        .find(|e| e.correlation_id == "inc-dev-014")
        .expect("inc-dev-014 imported");
    (app, first)
}

#[tokio::test]
async fn a_recurrence_in_new_words_is_linked_to_its_first_occurrence_once_across_turns() {
    let (app, first) = app_remembering_the_socket_leak().await;

    let new_id = stored(&app, &socket_leak_concluded(&app, 1)).await;
    let after_one = review(&app, &new_id).await;
    let links = after_one["recurrences"].as_array().expect("links");
    assert_eq!(links.len(), 1, "{after_one:#}");
    assert_eq!(links[0]["direction"], "of");
    assert_eq!(links[0]["id"], first.id.as_str(), "{after_one:#}");
    assert_eq!(links[0]["by"], "recognition");
    let confidence = links[0]["confidence"].as_f64().expect("confidence");
    assert!((0.0..=1.0).contains(&confidence), "{confidence}");
    assert_eq!(after_one["recurrence_count"], 1, "{after_one:#}");

    // A later turn of the same conversation recognizes the same incident: still one link,
    // the conversation counted once.
    stored(
        &app,
        &socket_leak_turn(
            &app,
            2,
            "Still the socket leak: file descriptors exhausted, EMFILE, CLOSE_WAIT sockets to \
             merchant webhooks pile up. Root cause: the merchant webhook client leaks a \
             socket on every failed delivery because it never drains or closes the response \
             body. Confirmed: fixed by closing bodies.",
        ),
    )
    .await;
    let after_two = review(&app, &new_id).await;
    assert_eq!(after_two["turn_count"], 2, "{after_two:#}");
    assert_eq!(
        after_two["recurrences"].as_array().map(Vec::len),
        Some(1),
        "{after_two:#}"
    );
    let old = review(&app, &first.id).await;
    assert_eq!(old["recurrence_count"], 1, "{old:#}");
    assert_eq!(old["recurrences"][0]["direction"], "recurred_in");
    assert_eq!(old["recurrences"][0]["id"], new_id.as_str());
    let chain = old["chain"].as_array().expect("the chain");
    assert_eq!(chain.len(), 2, "{old:#}");
    assert_eq!(chain[0]["id"], first.id.as_str(), "oldest first: {old:#}");

    // Search answers carry the chain of each episode they return.
    let result = app
        .search_ok(&json!({
            "query": "webhook client leaks sockets: CLOSE_WAIT, EMFILE too many open files",
            "mode": "text",
            "limit": 10
        }))
        .await;
    let episodes = result["episodes"].as_array().expect("episodes");
    let answer_of = |id: &str| {
        episodes
            .iter()
            .find(|e| e["id"] == id)
            .unwrap_or_else(|| panic!("{id} not in {result:#}"))
    };
    let old_answer = answer_of(&first.id);
    assert_eq!(old_answer["recurrence_count"], 1, "{old_answer:#}");
    assert_eq!(answer_of(&new_id)["recurrence_count"], 1);
    let seen = |v: &Value| {
        chrono::DateTime::parse_from_rfc3339(v.as_str().expect("a date"))
            .expect("rfc3339")
            .with_timezone(&chrono::Utc)
    };
    assert_eq!(seen(&old_answer["first_seen"]), first.created_at);
    assert!(
        seen(&old_answer["last_seen"]) > first.created_at,
        "{old_answer:#}"
    );
    // An episode outside any chain was seen once.
    let lonely = episodes
        .iter()
        .find(|e| e["id"] != first.id.as_str() && e["id"] != new_id.as_str())
        .unwrap_or_else(|| panic!("an episode outside the chain in {result:#}"));
    assert_eq!(lonely["recurrence_count"], 0, "{lonely:#}");
    assert_eq!(lonely["first_seen"], lonely["last_seen"]);
    app.cleanup().await;
}

/// Symptoms alone (no root cause yet) are what a look-alike shares too: the early turn links
/// nothing, the turn that names the mechanism links the recurrence.
#[tokio::test]
async fn an_episode_is_linked_only_once_its_conclusion_names_a_root_cause() {
    let (app, first) = app_remembering_the_socket_leak().await;

    let new_id = stored(
        &app,
        &socket_leak_turn(
            &app,
            1,
            &format!("{SOCKET_LEAK_SYMPTOMS} Still looking for what leaks them."),
        ),
    )
    .await;
    let early = review(&app, &new_id).await;
    assert!(early["root_cause"].is_null(), "{early:#}");
    assert!(
        early["recurrences"]
            .as_array()
            .is_none_or(|links| links.is_empty()),
        "no mechanism, no link: {early:#}"
    );

    stored(
        &app,
        &socket_leak_turn(
            &app,
            2,
            "Found it: the pods ran out of file descriptors (EMFILE) because CLOSE_WAIT \
             sockets to the merchant webhook endpoints pile up. Root cause: the merchant \
             webhook client never closes the response body when a delivery fails, so every \
             failed webhook leaks a socket until the descriptor limit. Confirmed by the \
             socket count dropping after a fix.",
        ),
    )
    .await;
    let concluded = review(&app, &new_id).await;
    let links = concluded["recurrences"]
        .as_array()
        .unwrap_or_else(|| panic!("no link: {concluded:#}"));
    assert_eq!(links.len(), 1, "{concluded:#}");
    assert_eq!(links[0]["id"], first.id.as_str(), "{concluded:#}");
    assert_eq!(links[0]["by"], "recognition");
    app.cleanup().await;
}

/// A look-alike shares a past incident's vocabulary and even much of its cause's; what keeps
/// it from being linked is what its conversation ruled out, read as the search reads an
/// agent's denials. (Without that denial this one reads at the link bar: the linker cannot
/// tell every look-alike by words alone; docs/EVALUATION.md, "Recurrence links", measures how
/// often.)
#[tokio::test]
async fn a_look_alike_that_ruled_out_the_past_cause_is_not_linked_as_a_recurrence() {
    let app = ApiApp::start().await;
    app.import_eval_incidents(MEMORY).await;
    // The vocabulary of inc-dev-053 (checkout's expired acquirer client certificate: TLS
    // handshake, x509, the acquirer), another mechanism: a valid, current certificate that
    // lacks the acquirer's new hostname.
    let turn = TurnBuilder::new(&app.org, "checkout", "conv-tls-hostname", 1)
        .user_message(
            "[FIRING] AcquirerHandshakeFailures service=payment-gateway: TLS handshakes to \
             the acquirer fail",
        )
        .answer(
            "payment-gateway calls to the acquirer fail the TLS handshake: x509 certificate \
             is valid for api.acquirer.example, not for the new auth.acquirer.example \
             hostname. The certificate was issued last week and expires next year. Ruled \
             out: an expired certificate. Root cause: the acquirer moved authorisations to a \
             hostname missing from its certificate's subject alternative names. Confirmed \
             with openssl s_client.",
        )
        .build();
    let id = stored(&app, &turn).await;
    let view = review(&app, &id).await;
    assert_eq!(
        view["ruled_out"],
        json!(["an expired certificate"]),
        "{view:#}"
    );
    assert!(
        view["recurrences"]
            .as_array()
            .is_none_or(|links| links.is_empty()),
        "a look-alike must not be linked: {view:#}"
    );
    assert_eq!(view["recurrence_count"], 0, "{view:#}");
    app.cleanup().await;
}

/// An outage has many conversations: the threads that began after this one and were stored
/// first match it better than its first occurrence does (they are of the same day, in the
/// same words). They are not what a recurrence link is for, and however many of them rank
/// above it, the older occurrence is still the one linked.
#[tokio::test]
async fn newer_threads_of_the_same_outage_do_not_crowd_out_the_first_occurrence() {
    let (app, first) = app_remembering_the_socket_leak().await;
    let thread = deja_tests::api_app::Seed {
        issue_type: "file-descriptor-exhaustion",
        description: SOCKET_LEAK_SYMPTOMS,
        summary: "Checkout pods exhaust file descriptors: CLOSE_WAIT sockets to merchant \
             webhooks leak on every failed delivery.",
        root_cause: Some(SOCKET_LEAK_CAUSE),
        finding: "4012 sockets in CLOSE_WAIT to hooks.merchant.example:443",
        components: vec![deja_domain::Component::new("service", "checkout")],
    };
    // More of them than the five candidates the link query asks for.
    let mut threads = Vec::new();
    for i in 0..6 {
        let episode = app
            .seed("checkout", &format!("conv-outage-thread-{i}"), &thread)
            .await;
        threads.push(episode.id);
    }

    let new_id = stored(&app, &socket_leak_concluded(&app, 1)).await;
    let view = review(&app, &new_id).await;
    let links = view["recurrences"]
        .as_array()
        .unwrap_or_else(|| panic!("no link: {view:#}"));
    assert_eq!(links.len(), 1, "{view:#}");
    assert_eq!(
        links[0]["id"],
        first.id.as_str(),
        "the first occurrence, not one of the newer threads {threads:?}: {view:#}"
    );
    app.cleanup().await;
}

/// Two turns of one conversation link from their own copies, in either order: the first
/// turn's copy, linking last, does not bring back the link that the second turn's conclusion
/// (another mechanism) took away.
#[tokio::test]
async fn an_older_copy_linking_last_does_not_restore_a_link_the_newer_conclusion_dropped() {
    let (app, first) = app_remembering_the_socket_leak().await;
    let new_id = stored(&app, &socket_leak_concluded(&app, 1)).await;
    let linked_to_first = |view: &Value| {
        view["recurrences"].as_array().is_some_and(|links| {
            links
                .iter()
                .any(|l| l["id"] == first.id.as_str() && l["direction"] == "of")
        })
    };
    assert!(linked_to_first(&review(&app, &new_id).await));
    let older = app
        .store
        .get_by_id(Some(&app.org), &new_id)
        .await
        .unwrap()
        .expect("the episode");

    stored(
        &app,
        &socket_leak_turn(
            &app,
            2,
            "Not the webhook client after all: with webhooks paused the sockets still pile \
             up. Root cause: the new node image halved the kernel conntrack table, so \
             checkout's connection churn fills it and new connections are dropped. Confirmed \
             by raising nf_conntrack_max.",
        ),
    )
    .await;
    let view = review(&app, &new_id).await;
    assert!(
        !linked_to_first(&view),
        "the newer conclusion links elsewhere: {view:#}"
    );

    // The first turn's linker, late, with its copy of the episode.
    let linker = deja_worker::RecurrenceLinker::new(
        app.store.clone(),
        app.settings
            .worker
            .link_recurrences
            .then(deja_tests::reranker),
        &app.settings.search,
    )
    .with_late(app.late());
    linker.link(&older).await;
    let view = review(&app, &new_id).await;
    assert!(!linked_to_first(&view), "{view:#}");
    app.cleanup().await;
}

/// A reviewer's request on `/v1/review/episodes/{id}/{tail}`: (status, result).
async fn review_call(
    app: &ApiApp,
    method: Method,
    id: &str,
    tail: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    let (status, _, json) = app
        .call(
            method,
            &format!("/v1/review/episodes/{id}/{tail}"),
            Some(&app.tokens.review_only),
            &[],
            body,
        )
        .await;
    (status, json)
}

/// Whether an episode view links it as a recurrence of `old`.
fn linked_to(view: &Value, old: &str) -> bool {
    view["recurrences"].as_array().is_some_and(|links| {
        links
            .iter()
            .any(|l| l["id"] == old && l["direction"] == "of")
    })
}

const RELATIONSHIPS: &str = include_str!("../../../cypher/queries/testing/relationships.cypher");

/// The episodes (by key) that the episode of `correlation_id` has a person's rejection
/// (`NOT_RECURRENCE_OF`) towards.
async fn rejections(app: &ApiApp, correlation_id: &str) -> Vec<String> {
    let key = deja_domain::EpisodeKey::new(&app.org, correlation_id);
    let graph = deja_tests::raw_graph(&app.settings);
    let mut rows = graph
        .execute(neo4rs::query(RELATIONSHIPS).param("key", key.composite()))
        .await
        .expect("relationships query");
    let mut rejected = Vec::new();
    while let Some(row) = rows.next().await.expect("relationships row") {
        if row.get::<String>("type").unwrap() == "NOT_RECURRENCE_OF" {
            rejected.push(row.get("target").unwrap());
        }
    }
    rejected
}

/// A person's correction sticks: a recurrence link a reviewer removed is not made again by
/// the worker, however often the conversation's later turns recognize the same incident,
/// until a person links the pair themselves.
#[tokio::test]
async fn a_link_a_reviewer_removed_is_not_recreated_by_later_turns_until_a_person_links_it() {
    let (app, first) = app_remembering_the_socket_leak().await;
    let new_id = stored(&app, &socket_leak_concluded(&app, 1)).await;
    let view = review(&app, &new_id).await;
    assert!(
        linked_to(&view, &first.id),
        "linked by the worker: {view:#}"
    );

    let (status, unlinked) = review_call(
        &app,
        Method::DELETE,
        &new_id,
        &format!("recurrences/{}", first.id),
        None,
    )
    .await;
    assert_eq!(status, 200, "{unlinked}");
    assert!(!linked_to(&unlinked["result"], &first.id), "{unlinked:#}");

    // The next turn concludes the same mechanism: the worker recognizes the same incident
    // and must leave the pair alone.
    stored(&app, &socket_leak_concluded(&app, 2)).await;
    let view = review(&app, &new_id).await;
    assert_eq!(view["turn_count"], 2, "{view:#}");
    assert!(
        !linked_to(&view, &first.id),
        "a removed link came back: {view:#}"
    );
    assert_eq!(view["recurrence_count"], 0, "{view:#}");
    assert_eq!(
        rejections(&app, "conv-socket-leak-again").await,
        [first.key().composite()],
        "the rejection is recorded"
    );
    // Linking the stored episode again (what a retried turn's linker does) changes nothing.
    let episode = app
        .store
        .get_by_id(Some(&app.org), &new_id)
        .await
        .unwrap()
        .expect("the episode");
    let linker = deja_worker::RecurrenceLinker::new(
        app.store.clone(),
        app.settings
            .worker
            .link_recurrences
            .then(deja_tests::reranker),
        &app.settings.search,
    )
    .with_late(app.late());
    let outcome = Box::pin(linker.link(&episode)).await;
    assert!(
        !matches!(outcome, deja_worker::LinkOutcome::Linked { .. }),
        "{outcome:?}"
    );
    assert!(!linked_to(&review(&app, &new_id).await, &first.id));

    // A person links the pair: the link stands, confirmed, and the rejection is gone.
    let (status, linked) = review_call(
        &app,
        Method::POST,
        &new_id,
        "recurrences",
        Some(&json!({"of": first.id})),
    )
    .await;
    assert_eq!(status, 200, "{linked}");
    let view = &linked["result"];
    assert!(linked_to(view, &first.id), "{view:#}");
    assert_eq!(view["recurrences"][0]["confirmed_by"], "review-holder");
    assert_eq!(view["recurrence_count"], 1, "{view:#}");
    assert!(rejections(&app, "conv-socket-leak-again").await.is_empty());
    stored(&app, &socket_leak_concluded(&app, 3)).await;
    assert!(linked_to(&review(&app, &new_id).await, &first.id));
    app.cleanup().await;
}

/// An episode a person marked wrong is no recurrence target: the worker's link to it is
/// retracted rather than made, and search answers and the review leave it out of the chain
/// figures (the review still lists the link, for people to see).
#[tokio::test]
async fn an_episode_marked_wrong_is_neither_linked_nor_counted_in_chains() {
    let (app, first) = app_remembering_the_socket_leak().await;
    let new_id = stored(&app, &socket_leak_concluded(&app, 1)).await;
    assert!(linked_to(&review(&app, &new_id).await, &first.id));

    let (status, marked) = review_call(
        &app,
        Method::POST,
        &first.id,
        "mark-wrong",
        Some(&json!({"note": "not the webhook client"})),
    )
    .await;
    assert_eq!(status, 200, "{marked}");

    // Search answers: the recurrence no longer counts the wrong episode.
    let result = app
        .search_ok(&json!({
            "query": "webhook client leaks sockets: CLOSE_WAIT, EMFILE too many open files",
            "mode": "text",
            "limit": 10
        }))
        .await;
    let answer = result["episodes"]
        .as_array()
        .and_then(|episodes| episodes.iter().find(|e| e["id"] == new_id.as_str()))
        .unwrap_or_else(|| panic!("{new_id} not in {result:#}"));
    assert_eq!(answer["recurrence_count"], 0, "{answer:#}");
    assert_eq!(answer["first_seen"], answer["last_seen"], "{answer:#}");
    // The review counts alike while it still shows the link, on both episodes.
    for id in [&new_id, &first.id] {
        let view = review(&app, id).await;
        assert_eq!(view["recurrence_count"], 0, "{view:#}");
        assert_eq!(view["first_seen"], view["last_seen"], "{view:#}");
        // Listed though not counted, the wrong one tagged: for a person to unlink.
        let chain = view["chain"].as_array().expect("the chain is listed");
        assert_eq!(chain.len(), 2, "{view:#}");
        let wrong = chain.iter().find(|e| e["id"] == first.id.as_str()).unwrap();
        assert_eq!(wrong["verdict"], "wrong", "{view:#}");
    }
    assert!(linked_to(&review(&app, &new_id).await, &first.id));

    // The store refuses the wrong episode as a target even when a decision read before the
    // verdict names it: the automatic link is retracted, not kept.
    let linked = app
        .store
        .auto_link_recurrence(&app.org, &new_id, Some((&first.id, 0.95)))
        .await
        .unwrap()
        .expect("the episode");
    assert!(!linked.created, "{linked:?}");
    assert_eq!(linked.retracted, 1, "{linked:?}");
    assert!(!linked_to(&review(&app, &new_id).await, &first.id));
    app.cleanup().await;
}
