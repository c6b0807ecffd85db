//! Tenant isolation (no episode of another org or team is ever returned) and completeness
//! (a small tenant still gets its best match when other tenants dominate the index).

use super::crowd::{
    crowd_cosine, crowd_query, ensure_crowd, CROWD_MIN_COSINE, CROWD_ORG, CROWD_SUMMARY,
};
use deja_domain::{Episode, Scope};
use deja_graph::{GraphStore, ListFilter, SearchFilters, SearchPlanSettings};
use deja_tests::{random_seed, random_unit_vector, sample_episode, unique_org, vector_with_cosine};

/// The defaults: on Neo4j 2026 the filtering vector index, on 5.26 the post-filtering plan.
const DEFAULT_PLAN: SearchPlanSettings = SearchPlanSettings {
    exact_scan_max: 20_000,
    ann_overfetch: 20,
    in_index_filters: true,
};
/// The 5.26 plan on any server: exact scan of small tenants, post-filtered index otherwise.
const POST_FILTER: SearchPlanSettings = SearchPlanSettings {
    in_index_filters: false,
    ..DEFAULT_PLAN
};
/// Forces the post-filtered vector index path whatever the tenant's size.
const ANN_ONLY: SearchPlanSettings = SearchPlanSettings {
    exact_scan_max: 0,
    ann_overfetch: 20,
    in_index_filters: false,
};

fn orgs_and_teams(episodes: &[Episode]) -> Vec<(String, String)> {
    let mut seen: Vec<(String, String)> = episodes
        .iter()
        .map(|e| (e.org.clone(), e.team.clone()))
        .collect();
    seen.sort();
    seen.dedup();
    seen
}

async fn every_read(store: &GraphStore, scope: &Scope, query: &[f32]) -> Vec<Vec<Episode>> {
    let none = SearchFilters::default();
    let firsts = |hits: Vec<(Episode, f64)>| hits.into_iter().map(|(e, _)| e).collect();
    vec![
        firsts(
            store
                .semantic_search(scope, query, 50, &none, &DEFAULT_PLAN)
                .await
                .unwrap(),
        ),
        firsts(
            store
                .semantic_search(scope, query, 50, &none, &ANN_ONLY)
                .await
                .unwrap(),
        ),
        firsts(
            store
                .text_search(scope, "redis evicted checkout", 50, &none)
                .await
                .unwrap(),
        ),
        store.timeline(scope, &[], 50, &none).await.unwrap(),
        store
            .list(scope, &ListFilter::default(), 50, 0)
            .await
            .unwrap(),
    ]
}

#[tokio::test]
async fn team_a_never_sees_team_b_and_org_x_never_sees_org_y() {
    let store = deja_tests::store().await;
    let (x, y) = (unique_org(), unique_org());
    let vector = random_unit_vector(random_seed());
    // Identical text and vectors everywhere: only the scope tells the episodes apart.
    for (org, team, conv) in [
        (&x, "a", "c1"),
        (&x, "a", "c2"),
        (&x, "b", "c3"),
        (&y, "a", "c4"),
    ] {
        let episode = sample_episode(org, team, conv, vector.clone());
        store.save(&episode, None).await.unwrap();
    }
    let x_a = (x.clone(), "a".to_owned());
    let x_b = (x.clone(), "b".to_owned());
    for (i, found) in every_read(&store, &Scope::team(&x, "a"), &vector)
        .await
        .iter()
        .enumerate()
    {
        assert_eq!(orgs_and_teams(found), vec![x_a.clone()], "read #{i}");
        assert_eq!(found.len(), 2, "read #{i}");
    }
    for (i, found) in every_read(&store, &Scope::org(&x), &vector)
        .await
        .iter()
        .enumerate()
    {
        assert_eq!(
            orgs_and_teams(found),
            vec![x_a.clone(), x_b.clone()],
            "read #{i}"
        );
    }
    for (i, found) in every_read(&store, &Scope::org(&y), &vector)
        .await
        .iter()
        .enumerate()
    {
        assert_eq!(
            orgs_and_teams(found),
            vec![(y.clone(), "a".to_owned())],
            "read #{i}"
        );
    }
    let vocabulary = store.team_vocabulary(&x, "b").await.unwrap();
    assert_eq!(vocabulary.issue_types, vec!["cache-eviction"]);
    let y_episode = sample_episode(&y, "a", "c4", vector.clone());
    assert_eq!(
        store.get_by_id(Some(&x), &y_episode.id).await.unwrap(),
        None
    );
}

#[tokio::test]
async fn a_small_team_finds_its_best_match_first_among_twenty_thousand_closer_episodes() {
    let store = deja_tests::store().await;
    ensure_crowd(&store).await;
    let query = crowd_query();
    let org = unique_org();
    let cosines = [0.3, 0.8, 0.5, 0.6, 0.4];
    for (i, cosine) in cosines.iter().enumerate() {
        let vector = vector_with_cosine(&query, *cosine, random_seed());
        let mut episode = sample_episode(&org, "payments", &format!("conv-{i}"), vector);
        episode.summary = format!("incident {i}: {CROWD_SUMMARY}");
        store.save(&episode, None).await.unwrap();
    }
    let scope = Scope::team(&org, "payments");
    let none = SearchFilters::default();

    // Left to itself, the vector index hands back only the crowd.
    let (fetched, kept) = store
        .semantic_ann(&scope, &query, 60, 3, &none)
        .await
        .unwrap();
    assert_eq!(fetched, 60);
    assert!(
        kept.is_empty(),
        "the crowd should fill the first 60 candidates"
    );

    for plan in [DEFAULT_PLAN, POST_FILTER, ANN_ONLY] {
        let hits = store
            .semantic_search(&scope, &query, 3, &none, &plan)
            .await
            .unwrap();
        let found: Vec<&str> = hits
            .iter()
            .map(|(e, _)| e.correlation_id.as_str())
            .collect();
        assert_eq!(found, ["conv-1", "conv-3", "conv-2"], "{plan:?}");
        // Raw cosine similarity, not Neo4j's (1 + cos) / 2.
        assert!((hits[0].1 - 0.8).abs() < 1e-3, "{}", hits[0].1);
        assert!((hits[2].1 - 0.5).abs() < 1e-3, "{}", hits[2].1);
    }
    for plan in [DEFAULT_PLAN, ANN_ONLY] {
        let org_hits = store
            .semantic_search(&Scope::org(&org), &query, 1, &none, &plan)
            .await
            .unwrap();
        assert_eq!(org_hits[0].0.correlation_id, "conv-1", "{plan:?}");
    }
    // Filters beyond the scope thin the index's hits: the search still finds the match.
    let without_best = SearchFilters {
        exclude_correlation_id: Some("conv-1".to_owned()),
        ..SearchFilters::default()
    };
    let hits = store
        .semantic_search(&scope, &query, 1, &without_best, &DEFAULT_PLAN)
        .await
        .unwrap();
    assert_eq!(hits[0].0.correlation_id, "conv-3");

    // The crowd's text matches every word too; the scope token keeps it out of Lucene's limit.
    let text = store
        .text_search(&scope, "OOMKilled exit code 137", 3, &none)
        .await
        .unwrap();
    assert_eq!(text.len(), 3);
    assert!(text.iter().all(|(e, _)| e.org == org));
}

#[tokio::test]
async fn a_big_tenant_is_served_by_the_vector_index() {
    let store = deja_tests::store().await;
    ensure_crowd(&store).await;
    let query = crowd_query();
    let scope = Scope::org(CROWD_ORG);
    let none = SearchFilters::default();
    let (fetched, kept) = store
        .semantic_ann(&scope, &query, 60, 5, &none)
        .await
        .unwrap();
    assert_eq!((fetched, kept.len()), (60, 5));
    let ann = store
        .semantic_search(&scope, &query, 5, &none, &ANN_ONLY)
        .await
        .unwrap();
    let exact = store
        .semantic_exact(&scope, &query, 5, &none)
        .await
        .unwrap();
    assert_eq!(ann.len(), 5);
    assert!(ann
        .iter()
        .all(|(e, s)| e.org == CROWD_ORG && *s >= CROWD_MIN_COSINE - 1e-3));
    // Approximate, but on this well-separated data the best hit is the exact best hit.
    assert!(
        (ann[0].1 - exact[0].1).abs() < 1e-3,
        "{} vs {}",
        ann[0].1,
        exact[0].1
    );
    // The index reports (1 + cos) / 2; what comes back is each hit's true cosine.
    for (episode, similarity) in ann.iter().chain(&exact) {
        let i: usize = episode
            .correlation_id
            .trim_start_matches("crowd-")
            .parse()
            .unwrap();
        let want = crowd_cosine(i);
        assert!(
            (similarity - want).abs() < 1e-3,
            "{}: {similarity} vs {want}",
            episode.correlation_id
        );
    }
}
