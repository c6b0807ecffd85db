//! Timings behind the tenant scoping rule (docs/ranking.md, "Tenant scoping"). Ignored by
//! default; run with
//! `cargo test -p deja-tests --test integration bench -- --ignored --nocapture`.

use super::crowd::{crowd_query, ensure_crowd, population_row, CROWD_ORG, INSERT};
use deja_domain::Scope;
use deja_graph::{GraphStore, SearchFilters, SearchPlanSettings};
use std::future::Future;
use std::time::{Duration, Instant};

/// A second fixed tenant, far from the crowd's query: the worst case for the vector index
/// (the crowd fills every candidate list before any of it appears).
const MEDIUM_ORG: &str = "deja-test-bench-2k-v1";
const MEDIUM_SIZE: usize = 2_000;
const RUNS: usize = 7;

async fn median<F, Fut, T>(mut f: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future<Output = T>,
{
    f().await; // warm the page cache and the query plan cache
    let mut times = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let started = Instant::now();
        f().await;
        times.push(started.elapsed());
    }
    times.sort();
    times[RUNS / 2]
}

async fn ensure_medium(store: &GraphStore) {
    if store
        .count_searchable(&Scope::org(MEDIUM_ORG))
        .await
        .unwrap()
        >= MEDIUM_SIZE
    {
        return;
    }
    let graph = deja_tests::raw_graph(&deja_tests::test_settings());
    let query = crowd_query();
    for start in (0..MEDIUM_SIZE).step_by(500) {
        let rows: Vec<neo4rs::BoltType> = (start..start + 500)
            .map(|i| population_row(MEDIUM_ORG, &query, 0.2 + 0.1 * (i % 100) as f64 / 100.0, i))
            .collect();
        graph
            .run(neo4rs::query(INSERT).param("rows", rows))
            .await
            .unwrap();
    }
}

#[tokio::test]
#[ignore = "benchmark: prints timings, asserts nothing"]
async fn semantic_search_plans_timed_on_twenty_thousand_episodes() {
    let store = deja_tests::store().await;
    ensure_crowd(&store).await;
    ensure_medium(&store).await;
    let query = crowd_query();
    let none = SearchFilters::default();
    let exact_only = SearchPlanSettings {
        exact_scan_max: usize::MAX,
        ann_overfetch: 20,
        in_index_filters: false,
    };
    let ann_only = SearchPlanSettings {
        exact_scan_max: 0,
        ann_overfetch: 20,
        in_index_filters: false,
    };
    let small = deja_tests::unique_org();
    for i in 0..5 {
        let v =
            deja_tests::vector_with_cosine(&query, 0.3 + 0.1 * i as f64, deja_tests::random_seed());
        store
            .save(
                &deja_tests::sample_episode(&small, "t", &format!("c{i}"), v),
                None,
            )
            .await
            .unwrap();
    }

    println!("limit 5; median of {RUNS} runs");
    for (label, org, size) in [
        ("crowd", CROWD_ORG, 20_000),
        ("medium", MEDIUM_ORG, MEDIUM_SIZE),
        ("small", small.as_str(), 5),
    ] {
        let scope = Scope::org(org);
        let count = median(|| store.count_searchable(&scope)).await;
        let exact = median(|| store.semantic_search(&scope, &query, 5, &none, &exact_only)).await;
        let ann = median(|| store.semantic_search(&scope, &query, 5, &none, &ann_only)).await;
        println!("{label:>6} ({size:>5} episodes): count {count:>9.2?}  exact scan {exact:>9.2?}  vector index (+growth/fallback) {ann:>9.2?}");
    }
    for k in [100, 800, 6_400, 10_000] {
        let scope = Scope::org(MEDIUM_ORG);
        let round = median(|| store.semantic_ann(&scope, &query, k, 5, &none)).await;
        let (fetched, kept) = store
            .semantic_ann(&scope, &query, k, 5, &none)
            .await
            .unwrap();
        println!("one vector index round k={k:>6}: {round:>9.2?} (fetched {fetched}, medium tenant hits {})", kept.len());
    }
}
