//! The crowd: 20,000 searchable episodes of one other org whose vectors are all closer to
//! [`crowd_query`] than anything a test tenant stores, and whose text matches the error
//! strings the tests search for. It is what "other tenants dominate the index" looks like.
//!
//! Creating it takes a while, so it is shared: a fixed org (`CROWD_ORG`) created by the first
//! test run that finds it missing, reused by every later run. Vectors come from a seeded
//! SplitMix64, so every run computes the same ones; inserts MERGE on the key, so concurrent or
//! interrupted runs converge. Bump the `-vN` suffix when the crowd's definition changes.

use deja_domain::{EpisodeKey, Scope};
use deja_graph::GraphStore;
use deja_tests::{random_unit_vector, vector_with_cosine};
use neo4rs::BoltType;
use std::collections::HashMap;
use tokio::sync::OnceCell;

pub const CROWD_ORG: &str = "deja-test-crowd-v1";
pub const CROWD_SIZE: usize = 20_000;
/// Every crowd vector has a cosine of at least this with the query.
pub const CROWD_MIN_COSINE: f64 = 0.90;
const QUERY_SEED: u64 = 0x00C0_FFEE;
const BATCH: usize = 500;
pub const INSERT: &str = include_str!("../../../cypher/queries/testing/insert_crowd.cypher");
pub const CROWD_SUMMARY: &str =
    "checkout pod OOMKilled exit code 137 on ip-10-42-7-201 after a timeout";

/// The query every crowd vector is close to.
pub fn crowd_query() -> Vec<f32> {
    random_unit_vector(QUERY_SEED)
}

static CROWD: OnceCell<()> = OnceCell::const_new();

/// Makes sure the crowd exists (once per test process).
pub async fn ensure_crowd(store: &GraphStore) {
    CROWD
        .get_or_init(|| async {
            let present = store
                .count_searchable(&Scope::org(CROWD_ORG))
                .await
                .unwrap();
            if present >= CROWD_SIZE {
                return;
            }
            let started = std::time::Instant::now();
            let graph = deja_tests::raw_graph(&deja_tests::test_settings());
            let query = crowd_query();
            for start in (0..CROWD_SIZE).step_by(BATCH) {
                let rows: Vec<BoltType> = (start..(start + BATCH).min(CROWD_SIZE))
                    .map(|i| crowd_row(&query, i))
                    .collect();
                graph
                    .run(neo4rs::query(INSERT).param("rows", rows))
                    .await
                    .expect("inserting the crowd");
            }
            eprintln!(
                "created the crowd of {CROWD_SIZE} episodes in {:?}",
                started.elapsed()
            );
        })
        .await;
}

/// The cosine of crowd episode `i` with [`crowd_query`]: spread over [0.90, 0.99), closer
/// than any tenant vector in the tests.
pub fn crowd_cosine(i: usize) -> f64 {
    CROWD_MIN_COSINE + 0.09 * (i % 1000) as f64 / 1000.0
}

fn crowd_row(query: &[f32], i: usize) -> BoltType {
    population_row(CROWD_ORG, query, crowd_cosine(i), i)
}

/// One row of `insert_crowd.cypher`: episode `i` of `org`, at `cosine` from `query`.
pub fn population_row(org: &str, query: &[f32], cosine: f64, i: usize) -> BoltType {
    let correlation_id = format!("crowd-{i:05}");
    let key = EpisodeKey::new(org, &correlation_id);
    let seed = 1_000_000 + i as u64 + u64::from(org.len() as u32) * 1_000_000_000;
    let embedding = vector_with_cosine(query, cosine, seed);
    let row: HashMap<String, BoltType> = HashMap::from([
        ("key".to_owned(), key.composite().into()),
        ("id".to_owned(), key.episode_id().into()),
        ("org".to_owned(), org.into()),
        ("correlation_id".to_owned(), correlation_id.into()),
        ("summary".to_owned(), CROWD_SUMMARY.into()),
        ("embedding".to_owned(), embedding.into()),
    ]);
    row.into()
}
