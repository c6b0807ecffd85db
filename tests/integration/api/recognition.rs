//! Recognition against the real stack: incidents of the eval corpus imported through the
//! import code path into the test's org, searched over HTTP with the production settings
//! (real embedder, real late-interaction encoder and token vectors stored at import, the
//! calibration in `defaults.toml`; the cross-encoder where a test turns it on).

use deja_tests::api_app::ApiApp;
use serde_json::{json, Value};

/// Three families of the eval corpus (their 9 incidents) and one more incident each of
/// three other families: a small memory where look-alikes exist.
pub(super) const MEMORY: &[&str] = &[
    // fd-exhaustion
    "inc-dev-003",
    "inc-dev-014",
    "inc-dev-020",
    // tls-certificate-expiry
    "inc-dev-033",
    "inc-dev-048",
    "inc-dev-053",
    // poison-message
    "inc-dev-006",
    "inc-dev-009",
    "inc-dev-013",
    // one each of retry-storm, oom-unbounded-in-memory-cache, stale-dns-after-failover
    "inc-dev-001",
    "inc-dev-057",
    "inc-dev-034",
];

fn strength(episode: &Value) -> &str {
    episode["match"].as_str().unwrap_or("missing")
}

fn correlation(episode: &Value) -> &str {
    episode["correlation_id"].as_str().unwrap_or("")
}

const FD_FAMILY: [&str; 3] = ["inc-dev-003", "inc-dev-014", "inc-dev-020"];
const TLS_EXPIRY_FAMILY: [&str; 3] = ["inc-dev-033", "inc-dev-048", "inc-dev-053"];
const POISON_FAMILY: [&str; 3] = ["inc-dev-006", "inc-dev-009", "inc-dev-013"];

#[tokio::test]
async fn a_recurrence_told_the_way_it_was_seen_before_is_a_strong_match_with_its_evidence() {
    let app = ApiApp::start().await;
    app.import_eval_incidents(MEMORY).await;
    let result = app
        .search_ok(&json!({
            "query": "checkout pods degrade hours after the deploy and refuse connections until \
                      restarted; open file descriptors climb to the 65536 limit with EMFILE and \
                      lsof shows thousands of CLOSE_WAIT sockets to the merchant webhook \
                      endpoints",
            "details": true
        }))
        .await;
    let episodes = result["episodes"].as_array().expect("episodes");
    let first = &episodes[0];
    assert_eq!(correlation(first), "inc-dev-014", "{result:#}");
    assert_eq!(strength(first), "strong", "{result:#}");
    let confidence = first["confidence"].as_f64().expect("confidence");
    assert!((0.0..=1.0).contains(&confidence));
    assert!(
        first.get("check").is_none(),
        "a strong match needs no check: {first:#}"
    );
    // The evidence behind it is shown with `details`: both similarities and the literal
    // error strings the query shares with the episode.
    let evidence = &first["evidence"];
    assert!(
        evidence["late"]
            .as_f64()
            .is_some_and(|l| (0.5..=1.0).contains(&l)),
        "{first:#}"
    );
    assert!(
        evidence["rerank"].is_null(),
        "the cross-encoder is off: {first:#}"
    );
    assert!(evidence["cosine"].is_number(), "{first:#}");
    let literals = evidence["literals"].as_array().expect("literals");
    assert!(literals.contains(&json!("close_wait")), "{first:#}");
    assert!(result.get("notice").is_none(), "{result:#}");
}

#[tokio::test]
async fn a_recurrence_in_new_words_leads_with_its_family() {
    let app = ApiApp::start().await;
    app.import_eval_incidents(MEMORY).await;
    let result = app
        .search_ok(&json!({
            "query": "api pods fail with 'too many open files'; lsof shows thousands of \
                      sockets stuck in CLOSE_WAIT to the payments upstream, count grows \
                      since the last release",
        }))
        .await;
    let episodes = result["episodes"].as_array().expect("episodes");
    let first = &episodes[0];
    assert!(FD_FAMILY.contains(&correlation(first)), "{result:#}");
    let confidence = first["confidence"].as_f64().expect("confidence");
    assert!((0.0..=1.0).contains(&confidence));
    // Whatever its label, the answer is usable in one step: a recognized recurrence, or a
    // lead with the check that confirms or discards it.
    match strength(first) {
        "strong" => {}
        "possible" => assert!(
            first["check"]
                .as_str()
                .is_some_and(|c| c.contains("socket")),
            "{first:#}"
        ),
        other => panic!("unexpected match label {other}: {first:#}"),
    }
}

#[tokio::test]
async fn a_look_alike_novel_incident_that_denies_the_past_cause_is_not_recognized_as_a_recurrence()
{
    let app = ApiApp::start().await;
    app.import_eval_incidents(MEMORY).await;
    // Same vocabulary as the certificate-expiry family (x509, TLS, handshake, issued, year),
    // another mechanism: a certificate that is current but lacks the hostname, and the
    // agent says so. (A lexical rule cannot read every such word: "expires next year" is
    // no denial to it; docs/EVALUATION.md.)
    let result = app
        .search_ok(&json!({
            "query": "clients fail TLS handshake to the new api.shop hostname: x509 \
                      certificate is valid for www.shop and shop only; the certificate \
                      was issued last week and is not expired",
            "details": true,
            // Contradicted leads come after every other lead, weak ones included: asked
            // for more than the default 3, the answer reaches them.
            "limit": 8
        }))
        .await;
    let episodes = result["episodes"].as_array().expect("episodes");
    for episode in episodes.iter().filter(|e| strength(e) != "strong") {
        assert!(
            episode["check"]
                .as_str()
                .is_some_and(|c| c.starts_with("Check whether")),
            "a possible lead carries its check: {episode:#}"
        );
    }
    let contradicted: Vec<&Value> = episodes
        .iter()
        .filter(|e| TLS_EXPIRY_FAMILY.contains(&correlation(e)))
        .filter(|e| {
            e["evidence"]["contradicted"]
                .as_array()
                .is_some_and(|words| {
                    words
                        .iter()
                        .any(|w| w.as_str().is_some_and(|w| w.starts_with("expir")))
                })
        })
        .collect();
    // The episode that had expired is still among the leads (the closest text: it does not
    // disappear), and its evidence says the query denies its cause.
    assert!(
        episodes.iter().any(|e| correlation(e) == "inc-dev-053"),
        "{result:#}"
    );
    assert!(!contradicted.is_empty(), "{result:#}");
    for lead in &contradicted {
        assert_eq!(
            strength(lead),
            "possible",
            "a look-alike whose cause the query denies is never a recognized recurrence: \
             {lead:#}"
        );
        assert!(
            lead["check"]
                .as_str()
                .is_some_and(|c| c.contains("is denied in the query")),
            "a contradicted lead says which words the query denies: {lead:#}"
        );
    }
    // Contradicted leads come after every other lead.
    let first_contradicted = episodes
        .iter()
        .position(|e| e["evidence"].get("contradicted").is_some());
    if let Some(first) = first_contradicted {
        assert!(
            episodes[first..]
                .iter()
                .all(|e| e["evidence"].get("contradicted").is_some()),
            "{result:#}"
        );
    }
}

/// The look-alike saying only what is fine, without a negation: "the certificate is still
/// valid" rules out the certificates that expired, as "not expired" would
/// (`recognition::healthy`); inc-dev-033's cause names its "365-day validity" and agrees.
#[tokio::test]
async fn a_look_alike_that_says_the_past_failure_is_fine_is_not_recognized_as_a_recurrence() {
    let app = ApiApp::start().await;
    app.import_eval_incidents(MEMORY).await;
    let result = app
        .search_ok(&json!({
            "query": "older POS terminals fail the TLS handshake to checkout since the load \
                      balancer's TLS policy was tightened: the handshake fails on a cipher \
                      suite mismatch; the server certificate is still valid for months",
            "details": true,
            "limit": 8
        }))
        .await;
    let episodes = result["episodes"].as_array().expect("episodes");
    let words = |lead: &Value| -> Vec<String> {
        lead["evidence"]["contradicted"]
            .as_array()
            .map(|w| {
                w.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let expired: Vec<&Value> = episodes
        .iter()
        .filter(|e| ["inc-dev-048", "inc-dev-053"].contains(&correlation(e)))
        .collect();
    assert!(!expired.is_empty(), "{result:#}");
    for lead in &expired {
        assert_eq!(strength(lead), "possible", "{lead:#}");
        assert!(
            words(lead).iter().any(|w| w.starts_with("expir")),
            "a certificate the query says is valid had expired: {lead:#}"
        );
    }
    // What the query says is fine is no denial of anything else: the certificate whose cause
    // names its validity agrees, and the other families' leads are not contradicted.
    for lead in episodes
        .iter()
        .filter(|e| !["inc-dev-048", "inc-dev-053"].contains(&correlation(e)))
    {
        assert!(words(lead).is_empty(), "{lead:#}");
    }
}

#[tokio::test]
async fn a_recurrence_whose_evidence_denies_what_its_cause_also_denies_is_still_recognized() {
    let app = ApiApp::start().await;
    app.import_eval_incidents(MEMORY).await;
    // "no redrive policy" is the past root cause's own words: the two agree.
    let result = app
        .search_ok(&json!({
            "query": "batch workers crash one after another on the same job message; the \
                      input file it points at is corrupted and the parser segfaults; the \
                      queue has no redrive policy, so the message reappears after every \
                      visibility timeout",
            "details": true
        }))
        .await;
    let episodes = result["episodes"].as_array().expect("episodes");
    let first = &episodes[0];
    assert!(POISON_FAMILY.contains(&correlation(first)), "{result:#}");
    assert_eq!(strength(first), "strong", "{result:#}");
    assert!(
        first["evidence"].get("contradicted").is_none(),
        "agreeing denials contradict nothing: {first:#}"
    );
}

#[tokio::test]
async fn an_incident_unlike_anything_in_memory_gets_nothing_and_the_notice() {
    let app = ApiApp::start().await;
    app.import_eval_incidents(MEMORY).await;
    let result = app
        .search_ok(&json!({
            "query": "order confirmation emails land in spam; SPF check returns permerror \
                      for too many DNS lookups after adding a sender",
        }))
        .await;
    assert_eq!(result["episodes"], json!([]), "{result:#}");
    assert_eq!(result["notice"], "nothing similar in memory", "{result:#}");
    assert_eq!(result["strategy"], Value::Null);
}

#[tokio::test]
async fn a_search_whose_reranking_runs_out_of_time_is_decided_without_it_and_says_so() {
    let app = ApiApp::start_tuned(
        |s| {
            s.search.rerank = true;
            s.search.rerank_budget_ms = 0;
        },
        true,
    )
    .await;
    app.import_eval_incidents(MEMORY).await;
    let result = app
        .search_ok(&json!({
            "query": "open file descriptors climb to the limit with EMFILE; thousands of \
                      CLOSE_WAIT sockets to the webhook endpoints",
            "details": true
        }))
        .await;
    let notice = result["notice"].as_str().unwrap_or_default();
    assert!(
        notice.contains("cross-encoder ran out of time"),
        "{result:#}"
    );
    let episodes = result["episodes"].as_array().expect("episodes");
    let first = &episodes[0];
    assert!(FD_FAMILY.contains(&correlation(first)), "{result:#}");
    assert!(first["evidence"]["rerank"].is_null(), "{first:#}");
    // Late interaction scored it all the same.
    assert!(first["evidence"]["late"].is_number(), "{first:#}");
    assert!(
        ["strong", "possible"].contains(&strength(first)),
        "{first:#}"
    );
}

/// With `search.verify = "llm"` (the fake LLM standing in for a hosted model): a `no` verdict
/// demotes a strong match to `possible`, the verdict is cached for the same search, and an
/// LLM failure leaves the calibrated labels and says so.
#[tokio::test]
async fn llm_verification_can_demote_a_match_is_cached_and_never_blocks_the_search() {
    let app = ApiApp::start_tuned(|s| s.search.verify = deja_config::VerifyMode::Llm, true).await;
    app.import_eval_incidents(MEMORY).await;
    let query = json!({
        "query": "checkout pods degrade hours after the deploy and refuse connections until \
                  restarted; open file descriptors climb to the 65536 limit with EMFILE and \
                  lsof shows thousands of CLOSE_WAIT sockets to the merchant webhook endpoints",
    });
    let verifications = |app: &ApiApp| {
        app.fake
            .requests()
            .iter()
            .filter(|r| r.kind == deja_fake_llm::RequestKind::Verification)
            .count()
    };

    // The fake's own answer is `unsure` for every candidate: the labels stand.
    let calibrated = app.search_ok(&query).await;
    let first = &calibrated["episodes"][0];
    assert_eq!(correlation(first), "inc-dev-014", "{calibrated:#}");
    assert_eq!(strength(first), "strong", "{calibrated:#}");
    assert_eq!(verifications(&app), 1);
    // The same search again is answered from the cache: no second call.
    assert_eq!(app.search_ok(&query).await, calibrated);
    assert_eq!(verifications(&app), 1);

    // Another query (so no cache hit) whose verification says `no` for the top episode.
    let mut other = query.clone();
    other["query"] = json!(format!("{} (again)", query["query"].as_str().unwrap_or("")));
    let top = calibrated["episodes"][0]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    app.fake.push(deja_fake_llm::Reply::Json(json!({
        "candidates": [{"id": top, "verdict": "no", "reason": "a leak in another client"}]
    })));
    let demoted = app.search_ok(&other).await;
    let first = &demoted["episodes"][0];
    assert_eq!(
        first["id"],
        json!(top),
        "nothing is reordered or dropped: {demoted:#}"
    );
    assert_eq!(strength(first), "possible", "{demoted:#}");
    assert_eq!(verifications(&app), 2);

    // The LLM failing: the calibrated labels and a notice, never a failed search.
    other["query"] = json!("open file descriptors at the limit, EMFILE, CLOSE_WAIT sockets");
    app.fake.push(deja_fake_llm::Reply::Status(500));
    let unverified = app.search_ok(&other).await;
    let notice = unverified["notice"].as_str().unwrap_or_default();
    assert!(
        notice.contains("verification by the LLM failed"),
        "{unverified:#}"
    );
    assert!(!unverified["episodes"]
        .as_array()
        .expect("episodes")
        .is_empty());
}

/// The embedding of an answered episode's issue type and root cause.
fn cause_vector(episode: &Value) -> Vec<f32> {
    let text = deja_domain::cause_text(
        episode["issue_type"].as_str().expect("issue_type"),
        "",
        "",
        Some(episode["root_cause"].as_str().expect("root_cause")),
    );
    deja_tests::embedder()
        .embed(&[text])
        .expect("embedded")
        .pop()
        .expect("one vector")
}

/// The family order: after the first lead come the past incidents most like it, even when
/// the query reads less like them than like a look-alike — the whole family in the top 3,
/// which the confidence order and cut alone do not always give.
#[tokio::test]
async fn after_the_first_lead_come_the_past_incidents_most_like_it() {
    let on = ApiApp::start().await;
    on.import_eval_incidents(MEMORY).await;
    let off = ApiApp::start_tuned(
        |s| s.search.recognition.family = deja_domain::recognition::FamilyOrder::OFF,
        true,
    )
    .await;
    off.import_eval_incidents(MEMORY).await;
    let mut whole_family_only_with_the_order = 0;
    for (query, family) in [
        // Two sibling queries of the eval corpus (q-dev-016, q-dev-037).
        (
            "message broker refuses new clients with EMFILE; process limit still at the \
             distro default of 1024",
            FD_FAMILY,
        ),
        (
            "worker process dies every time it pulls one specific event; redelivery keeps \
             crashing it and the subscription never drains",
            POISON_FAMILY,
        ),
    ] {
        let search = json!({"query": query, "details": true});
        let with_family = on.search_ok(&search).await;
        let episodes = with_family["episodes"].as_array().expect("episodes");
        let found: Vec<&str> = episodes.iter().map(correlation).collect();
        assert_eq!(found.len(), 3, "{with_family:#}");
        assert!(
            found.iter().all(|id| family.contains(id)),
            "the whole family in the top 3: {with_family:#}"
        );
        assert!(
            episodes[0]["evidence"].get("first_lead_cosine").is_none(),
            "{with_family:#}"
        );
        let first_cause = cause_vector(&episodes[0]);
        for lead in &episodes[1..] {
            let cosine = lead["evidence"]["first_lead_cosine"].as_f64();
            assert!(
                cosine.is_some_and(|c| (-1.0..=1.0).contains(&c)),
                "a lead after the first says how like the first it is: {lead:#}"
            );
            // Alike in what failed and why: the cosine of the two cause vectors (issue type
            // and root cause embedded), not of the symptoms each engineer wrote.
            let expected = deja_embed::cosine(&first_cause, &cause_vector(lead));
            assert!(
                cosine.is_some_and(|c| (c - f64::from(expected)).abs() < 1e-3),
                "{cosine:?} against {expected}: {lead:#}"
            );
            let confidence = lead["confidence"].as_f64().expect("confidence");
            let floor = deja_config::Settings::defaults()
                .search
                .recognition
                .family
                .floor;
            assert!(confidence >= floor, "never under the floor: {lead:#}");
            if strength(lead) == "possible" {
                assert!(lead["check"].is_string(), "{lead:#}");
            }
        }
        // Off, the same search orders its leads by confidence alone: the same first lead,
        // and for a query that reads more like a look-alike than like the third member, the
        // look-alike in its place.
        let without = off.search_ok(&search).await;
        let found_off: Vec<&str> = without["episodes"]
            .as_array()
            .expect("episodes")
            .iter()
            .map(correlation)
            .collect();
        assert_eq!(
            found_off[0], found[0],
            "the first lead is the same: {without:#}"
        );
        if found_off
            .iter()
            .take(3)
            .filter(|id| family.contains(id))
            .count()
            < 3
        {
            whole_family_only_with_the_order += 1;
        }
    }
    assert!(
        whole_family_only_with_the_order > 0,
        "the family order brings a member the confidence order leaves out"
    );
}

/// Late interaction compares a query with the token vectors of a candidate's *current* text:
/// vectors stored for an older text (or none) leave that candidate to the similarity-only
/// calibration, and the others keep theirs.
#[tokio::test]
async fn a_candidate_without_current_token_vectors_is_decided_without_them() {
    let app = ApiApp::start().await;
    let imported = app.import_eval_incidents(MEMORY).await;
    let stale = imported
        .iter()
        .find(|e| e.correlation_id == "inc-dev-014")
        .expect("imported");
    // Vectors of another text under the episode's id: what a writer that lost its race, or
    // a text edited without the encoder, leaves behind.
    let other_text = deja_tests::late_encoder()
        .encode(&["redis evicted session keys".to_owned()])
        .expect("encode")
        .remove(0);
    app.store
        .save_tokens(
            &app.org,
            &stale.id,
            deja_tests::late_encoder().model_id(),
            "stamp-of-an-older-text",
            &other_text,
            None,
        )
        .await
        .expect("save");
    let result = app
        .search_ok(&json!({
            "query": "checkout pods degrade hours after the deploy and refuse connections until \
                      restarted; open file descriptors climb to the 65536 limit with EMFILE and \
                      lsof shows thousands of CLOSE_WAIT sockets to the merchant webhook \
                      endpoints",
            "details": true,
            "limit": 8
        }))
        .await;
    let episodes = result["episodes"].as_array().expect("episodes");
    let found = episodes
        .iter()
        .find(|e| correlation(e) == "inc-dev-014")
        .unwrap_or_else(|| panic!("still found by its other evidence: {result:#}"));
    assert!(found["evidence"]["late"].is_null(), "{found:#}");
    assert!(
        episodes
            .iter()
            .filter(|e| correlation(e) != "inc-dev-014")
            .all(|e| e["evidence"]["late"].is_number()),
        "{result:#}"
    );
    // Not a degraded search: the stage ran, one candidate had nothing current to compare.
    assert!(result.get("notice").is_none(), "{result:#}");
}
