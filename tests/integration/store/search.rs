use deja_domain::{Component, ExtractionStatus, Scope};
use deja_graph::{ListFilter, SearchFilters, SearchPlanSettings};
use deja_tests::{
    at, random_seed, random_unit_vector, sample_episode, unique_org, vector_with_cosine,
};

const PLAN: SearchPlanSettings = SearchPlanSettings {
    exact_scan_max: 20_000,
    ann_overfetch: 20,
    in_index_filters: true,
};

#[tokio::test]
async fn a_failed_extraction_is_listed_but_never_searchable() {
    let store = deja_tests::store().await;
    let org = unique_org();
    let vector = random_unit_vector(random_seed());
    let mut failed = sample_episode(&org, "checkout", "failed", vector.clone());
    // Even with a vector and text, a failed extraction must stay out of every search.
    failed.extraction_status = ExtractionStatus::Failed;
    failed.extraction_error = Some("llm returned garbage".to_owned());
    store.save(&failed, None).await.unwrap();
    let ok = sample_episode(&org, "checkout", "ok", vector.clone());
    store.save(&ok, None).await.unwrap();

    let scope = Scope::team(&org, "checkout");
    let none = SearchFilters::default();
    let semantic = store
        .semantic_search(&scope, &vector, 10, &none, &PLAN)
        .await
        .unwrap();
    assert_eq!(semantic.len(), 1);
    assert_eq!(semantic[0].0.correlation_id, "ok");
    assert!((semantic[0].1 - 1.0).abs() < 1e-4, "{}", semantic[0].1);
    let text = store
        .text_search(&scope, "redis checkout", 10, &none)
        .await
        .unwrap();
    assert_eq!(text.len(), 1);
    assert_eq!(
        store.timeline(&scope, &[], 10, &none).await.unwrap().len(),
        1
    );
    assert_eq!(store.count_searchable(&scope).await.unwrap(), 1);

    let all = store
        .list(&scope, &ListFilter::default(), 10, 0)
        .await
        .unwrap();
    assert_eq!(all.len(), 2);
    assert!(
        all.iter().all(|e| e.embedding.is_none()),
        "listings leave vectors out"
    );
    let failed_only = ListFilter {
        status: Some(ExtractionStatus::Failed),
        ..ListFilter::default()
    };
    let listed = store.list(&scope, &failed_only, 10, 0).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        listed[0].extraction_error.as_deref(),
        Some("llm returned garbage")
    );
    let pending = ListFilter {
        pending_error: true,
        ..ListFilter::default()
    };
    assert_eq!(store.list(&scope, &pending, 10, 0).await.unwrap().len(), 1);
    let imported = ListFilter {
        provenance: Some(deja_domain::Provenance::Imported),
        ..ListFilter::default()
    };
    assert!(store
        .list(&scope, &imported, 10, 0)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        store
            .list(&scope, &ListFilter::default(), 10, 1)
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        store.keys_needing_retry(Some(&org), 10).await.unwrap(),
        vec![failed.key()]
    );
    assert!(store.keys_needing_retry(None, 5).await.unwrap().len() <= 5);
}

#[tokio::test]
async fn semantic_similarity_is_the_raw_cosine() {
    let store = deja_tests::store().await;
    let org = unique_org();
    let query = random_unit_vector(random_seed());
    for (conv, cosine) in [
        ("same", 1.0),
        ("half", 0.5),
        ("orthogonal", 0.0),
        ("opposite", -0.5),
    ] {
        let vector = vector_with_cosine(&query, cosine, random_seed());
        store
            .save(&sample_episode(&org, "t", conv, vector), None)
            .await
            .unwrap();
    }
    let scope = Scope::org(&org);
    let none = SearchFilters::default();
    let exact = store
        .semantic_exact(&scope, &query, 10, &none)
        .await
        .unwrap();
    let found: Vec<(&str, f64)> = exact
        .iter()
        .map(|(e, s)| (e.correlation_id.as_str(), *s))
        .collect();
    let expected = [
        ("same", 1.0),
        ("half", 0.5),
        ("orthogonal", 0.0),
        ("opposite", -0.5),
    ];
    assert_eq!(found.len(), 4);
    for ((conv, score), (want_conv, want)) in found.iter().zip(expected) {
        assert_eq!(*conv, want_conv);
        assert!((score - want).abs() < 1e-3, "{conv}: {score}");
    }
}

#[tokio::test]
async fn filters_narrow_semantic_text_and_timeline_results() {
    let store = deja_tests::store().await;
    let org = unique_org();
    let vector = random_unit_vector(random_seed());
    let mut a = sample_episode(&org, "t", "a", vector.clone());
    a.components = vec![Component::new("service", "checkout")];
    a.significance = Some("high".to_owned());
    let mut b = sample_episode(&org, "t", "b", vector.clone());
    b.components = vec![Component::new("queue", "orders")];
    b.issue_type = "queue-backlog".to_owned();
    b.resolved = false;
    for episode in [&a, &b] {
        store.save(episode, None).await.unwrap();
    }
    let scope = Scope::team(&org, "t");
    let cases: Vec<(SearchFilters, Vec<&str>)> = vec![
        (SearchFilters::default(), vec!["a", "b"]),
        (
            SearchFilters {
                components: vec![Component::new("queue", "orders"), Component::new("x", "y")],
                ..Default::default()
            },
            vec!["b"],
        ),
        (
            SearchFilters {
                issue_type: Some("queue-backlog".into()),
                ..Default::default()
            },
            vec!["b"],
        ),
        (
            SearchFilters {
                resolved: Some(true),
                ..Default::default()
            },
            vec!["a"],
        ),
        (
            SearchFilters {
                significance: Some("high".into()),
                ..Default::default()
            },
            vec!["a"],
        ),
        (
            SearchFilters {
                exclude_correlation_id: Some("a".into()),
                ..Default::default()
            },
            vec!["b"],
        ),
    ];
    for (filters, expected) in cases {
        let ids = |mut v: Vec<String>| {
            v.sort();
            v
        };
        let want: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
        let semantic = store
            .semantic_search(&scope, &vector, 10, &filters, &PLAN)
            .await
            .unwrap();
        assert_eq!(
            ids(semantic
                .into_iter()
                .map(|(e, _)| e.correlation_id)
                .collect()),
            want,
            "{filters:?}"
        );
        let text = store
            .text_search(&scope, "redis checkout", 10, &filters)
            .await
            .unwrap();
        assert_eq!(
            ids(text.into_iter().map(|(e, _)| e.correlation_id).collect()),
            want,
            "{filters:?}"
        );
        let timeline = store.timeline(&scope, &[], 10, &filters).await.unwrap();
        assert_eq!(
            ids(timeline.into_iter().map(|e| e.correlation_id).collect()),
            want,
            "{filters:?}"
        );
    }
}

#[tokio::test]
async fn a_timeline_lists_what_touched_the_components_newest_first() {
    let store = deja_tests::store().await;
    let org = unique_org();
    let checkout = Component::new("service", "checkout");
    for (conv, minutes, components) in [
        ("old", 1, vec![checkout.clone()]),
        (
            "new",
            3,
            vec![checkout.clone(), Component::new("cache", "redis")],
        ),
        ("other", 2, vec![Component::new("queue", "orders")]),
    ] {
        let mut episode = sample_episode(&org, "t", conv, random_unit_vector(random_seed()));
        episode.components = components;
        episode.last_confirmed_at = at(minutes * 60);
        store.save(&episode, None).await.unwrap();
    }
    let scope = Scope::team(&org, "t");
    let none = SearchFilters::default();
    let convs = |episodes: Vec<deja_domain::Episode>| {
        episodes
            .into_iter()
            .map(|e| e.correlation_id)
            .collect::<Vec<_>>()
    };
    let touched = store
        .timeline(&scope, &[checkout], 10, &none)
        .await
        .unwrap();
    assert_eq!(convs(touched), ["new", "old"]);
    assert_eq!(
        convs(store.timeline(&scope, &[], 10, &none).await.unwrap()),
        ["new", "other", "old"]
    );
    assert_eq!(
        convs(store.timeline(&scope, &[], 1, &none).await.unwrap()),
        ["new"]
    );
}

#[tokio::test]
async fn a_team_vocabulary_lists_the_most_used_names_first() {
    let store = deja_tests::store().await;
    let org = unique_org();
    for (conv, issue_type, component) in [
        ("1", "cache-eviction", "redis"),
        ("2", "cache-eviction", "redis"),
        ("3", "dns-failure", "coredns"),
    ] {
        let mut episode = sample_episode(&org, "t", conv, random_unit_vector(random_seed()));
        episode.issue_type = issue_type.to_owned();
        episode.components = vec![Component::new("service", component)];
        store.save(&episode, None).await.unwrap();
    }
    let vocabulary = store.team_vocabulary(&org, "t").await.unwrap();
    assert_eq!(vocabulary.issue_types, ["cache-eviction", "dns-failure"]);
    assert_eq!(
        vocabulary.components,
        [
            Component::new("service", "redis"),
            Component::new("service", "coredns")
        ]
    );
    assert_eq!(
        store.team_vocabulary(&org, "nobody").await.unwrap(),
        Default::default()
    );
}
