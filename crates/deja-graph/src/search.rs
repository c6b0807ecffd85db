//! Semantic, full-text and timeline search, always inside one tenant's scope.
//!
//! Tenant scoping (docs/ranking.md, "Tenant scoping"): Neo4j 5.26's vector index cannot be
//! pre-filtered, so "the k nearest episodes" are the k nearest of *every* tenant. A small
//! tenant among big ones would get nothing back. Semantic search therefore either scans the
//! tenant exactly (`vector.similarity.cosine` over its own episodes) or asks the index for an
//! over-fetched k, keeps the tenant's hits, grows k while too few come back, and falls back
//! to the exact scan. The choice is made on the tenant's searchable episode count.
//!
//! On Neo4j 2026.01+ (migration 009, [`VectorIndex::Scoped`]) the index filters by org, team
//! and status itself: one `SEARCH` round trip returns the tenant's nearest episodes, with no
//! count, no over-fetching and no exact scan (`search.in_index_filters` can turn it off).
//!
//! Similarities returned are RAW cosine similarities in [-1, 1]: Neo4j reports cosine as
//! (1 + cos) / 2 from both the index and `vector.similarity.cosine`, converted back here.

use crate::queries::{
    Cypher, Statement, COUNT_SEARCHABLE_ORG, COUNT_SEARCHABLE_TEAM, DIGEST_RELATED, SEMANTIC_ANN,
    SEMANTIC_EXACT_ORG, SEMANTIC_EXACT_TEAM, SEMANTIC_FILTERED_ORG, SEMANTIC_FILTERED_TEAM, TEXT,
    TIMELINE,
};
use crate::rows::{component_keys, int, EpisodeRow};
use crate::server::VectorIndex;
use crate::{column, episode_column, lucene, GraphError, GraphStore, Result};
use deja_config::SearchSettings;
use deja_domain::{Component, Episode, Scope};
use serde::Deserialize;

/// Narrows a search; every field is optional and they combine with AND.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SearchFilters {
    /// The episode must affect at least one of these (empty = any).
    pub components: Vec<Component>,
    pub issue_type: Option<String>,
    pub resolved: Option<bool>,
    pub significance: Option<String>,
    /// Leave out this conversation (an agent searching from inside it).
    pub exclude_correlation_id: Option<String>,
}

/// How semantic search picks between the exact scan and the vector index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchPlanSettings {
    /// Scopes with at most this many searchable episodes are scanned exactly.
    pub exact_scan_max: usize,
    /// Candidates asked of the vector index per result wanted, for bigger scopes.
    pub ann_overfetch: usize,
    /// Search inside the filtering vector index where the database has one
    /// ([`VectorIndex::Scoped`]); off = the post-filtering plan above on every server.
    pub in_index_filters: bool,
}

impl From<&SearchSettings> for SearchPlanSettings {
    fn from(settings: &SearchSettings) -> Self {
        SearchPlanSettings {
            exact_scan_max: settings.exact_scan_max,
            ann_overfetch: settings.ann_overfetch,
            in_index_filters: settings.in_index_filters,
        }
    }
}

/// The vector index is asked at most this many candidates before the exact scan takes over:
/// past it, HNSW search costs as much as scanning a large tenant (docs/ranking.md).
const ANN_MAX_K: usize = 10_000;
/// Candidates asked of the filtering index per result wanted. Its vectors are binary
/// quantized (2026.08's default): asked for exactly the 20 candidates a search wants, it
/// returned 66–76% of the exact top 20 at 100k episodes; asked for 3× or more, all of them, at
/// no measurable cost, since the statement re-scores the hits exactly (docs/BENCHMARKS.md).
const FILTERED_OVERFETCH: usize = 5;
/// Growth factor of k between vector index rounds.
const ANN_GROWTH: usize = 8;
/// Full-text candidates per result wanted; the scope token already restricts Lucene to the
/// tenant, so only the remaining filters (team, status, issue type...) thin the candidates.
const TEXT_OVERFETCH: usize = 10;
const TEXT_MAX_K: usize = 10_000;

/// Neo4j's normalised cosine score (1 + cos) / 2 back to the cosine itself.
pub(crate) fn raw_cosine(normalised: f64) -> f64 {
    (2.0 * normalised - 1.0).clamp(-1.0, 1.0)
}

/// One hit inside the `kept` list of the over-fetching queries.
#[derive(Deserialize)]
struct KeptHit {
    episode: EpisodeRow,
    score: f64,
}

impl GraphStore {
    /// The `limit` episodes of `scope` most similar to `embedding`, most similar first, with
    /// their raw cosine similarity in [-1, 1]. Only `ok` episodes with an embedding are
    /// searchable. Returned episodes carry no embedding (`embedding: None`).
    pub async fn semantic_search(
        &self,
        scope: &Scope,
        embedding: &[f32],
        limit: usize,
        filters: &SearchFilters,
        plan: &SearchPlanSettings,
    ) -> Result<Vec<(Episode, f64)>> {
        check_query_vector(embedding)?;
        if limit == 0 {
            return Ok(Vec::new());
        }
        if plan.in_index_filters && self.vector_index().await? == VectorIndex::Scoped {
            return or_exact_scan(
                self.semantic_filtered(scope, embedding, limit, filters, plan),
                || self.semantic_exact(scope, embedding, limit, filters),
            )
            .await;
        }
        let searchable = self
            .count_searchable_up_to(scope, plan.exact_scan_max.saturating_add(1))
            .await?;
        if searchable == 0 {
            return Ok(Vec::new());
        }
        if searchable <= plan.exact_scan_max {
            return self.semantic_exact(scope, embedding, limit, filters).await;
        }
        let rounds = growing_k(overfetched_k(limit, plan), ANN_MAX_K, |k| async move {
            let (_, hits) = self
                .semantic_ann(scope, embedding, k, limit, filters)
                .await?;
            // The tenant's hits among the global top k outrank every tenant episode outside
            // it, so `limit` of them is the answer (up to the index's approximation). Fewer
            // proves nothing: HNSW may return fewer than k candidates even when the index
            // holds more (measured: 8,671 of k = 10,000 over 22,000 vectors).
            let enough = hits.len() >= limit;
            Ok((hits, enough))
        })
        .await?;
        match rounds {
            Rounds::Answered(hits) => Ok(hits),
            Rounds::Exhausted(hits) => {
                tracing::debug!(kept = hits.len(), "vector index too crowded; exact scan");
                self.semantic_exact(scope, embedding, limit, filters).await
            }
        }
    }

    /// The exact scan alone (what `semantic_search` uses for small scopes). Public for the
    /// benchmark and for tools that must not depend on the index's approximation.
    pub async fn semantic_exact(
        &self,
        scope: &Scope,
        embedding: &[f32],
        limit: usize,
        filters: &SearchFilters,
    ) -> Result<Vec<(Episode, f64)>> {
        check_query_vector(embedding)?;
        let query = by_scope(scope, &SEMANTIC_EXACT_TEAM, &SEMANTIC_EXACT_ORG);
        let statement = filtered(query.statement(), scope, filters)
            .param("embedding", embedding.to_vec())
            .param("limit", int(limit));
        let rows = self.fetch(statement).await?;
        rows.iter()
            .map(|row| {
                let episode = episode_column(row, query.name, "episode")?;
                let score: f64 = column(row, query.name, "score")?;
                Ok((episode, raw_cosine(score)))
            })
            .collect()
    }

    /// Semantic search inside the filtering vector index ([`VectorIndex::Scoped`], Neo4j
    /// 2026.01+): the index returns the scope's own nearest episodes (`FILTERED_OVERFETCH`
    /// per result, re-scored exactly). One round trip, unless
    /// filters beyond the scope (issue type, components...) thin the hits: then k grows as in
    /// the post-filtering plan, and the exact scan answers past `ANN_MAX_K`.
    pub async fn semantic_filtered(
        &self,
        scope: &Scope,
        embedding: &[f32],
        limit: usize,
        filters: &SearchFilters,
        plan: &SearchPlanSettings,
    ) -> Result<Vec<(Episode, f64)>> {
        check_query_vector(embedding)?;
        let query = by_scope(scope, &SEMANTIC_FILTERED_TEAM, &SEMANTIC_FILTERED_ORG);
        let narrowed = *filters != SearchFilters::default();
        let first_k = if narrowed {
            overfetched_k(limit, plan)
        } else {
            limit.saturating_mul(FILTERED_OVERFETCH)
        };
        let rounds = growing_k(first_k, ANN_MAX_K, |k| async move {
            let statement = filtered(query.statement(), scope, filters)
                .param("embedding", embedding.to_vec())
                .param("k", int(k))
                .param("limit", int(limit));
            let (fetched, hits) = self.over_fetched(statement).await?;
            // Fewer than k from the index: the scope has no more searchable episodes.
            let enough = hits.len() >= limit || fetched < k;
            Ok((hits, enough))
        })
        .await?;
        match rounds {
            Rounds::Answered(hits) => {
                Ok(hits.into_iter().map(|(e, s)| (e, raw_cosine(s))).collect())
            }
            Rounds::Exhausted(_) => self.semantic_exact(scope, embedding, limit, filters).await,
        }
    }

    /// One vector index round: (candidates the index returned, the tenant's hits among them,
    /// best first). Exposed for the benchmark and diagnostics; `semantic_search` decides.
    /// Whatever the index, it is asked for the nearest episodes of every tenant.
    pub async fn semantic_ann(
        &self,
        scope: &Scope,
        embedding: &[f32],
        k: usize,
        limit: usize,
        filters: &SearchFilters,
    ) -> Result<(usize, Vec<(Episode, f64)>)> {
        check_query_vector(embedding)?;
        let index = self.vector_index().await?;
        let statement = filtered(SEMANTIC_ANN.statement(), scope, filters)
            .param("index", index.name())
            .param("embedding", embedding.to_vec())
            .param("k", int(k))
            .param("limit", int(limit));
        let (fetched, hits) = self.over_fetched(statement).await?;
        Ok((
            fetched,
            hits.into_iter().map(|(e, s)| (e, raw_cosine(s))).collect(),
        ))
    }

    /// Full-text search of `scope` for `query` (user text, escaped here), best Lucene score
    /// first. Failed extractions are excluded, as in semantic search. Text without a single
    /// word (e.g. only punctuation) finds nothing. Episodes carry no embedding.
    pub async fn text_search(
        &self,
        scope: &Scope,
        query: &str,
        limit: usize,
        filters: &SearchFilters,
    ) -> Result<Vec<(Episode, f64)>> {
        let Some(lucene_query) = lucene::scoped_query(scope, query) else {
            return Ok(Vec::new());
        };
        if limit == 0 {
            return Ok(Vec::new());
        }
        let first_k = limit.saturating_mul(TEXT_OVERFETCH).max(100);
        let lucene_query = lucene_query.as_str();
        let rounds = growing_k(first_k, TEXT_MAX_K, |k| async move {
            let statement = filtered(TEXT.statement(), scope, filters)
                .param("query", lucene_query)
                .param("k", int(k))
                .param("limit", int(limit));
            let (fetched, hits) = self.over_fetched(statement).await?;
            // Unlike HNSW, Lucene's top k is exact: fewer than k back means no more matches.
            let enough = hits.len() >= limit || fetched < k;
            Ok((hits, enough))
        })
        .await?;
        // Lucene's best `TEXT_MAX_K` are as good an answer as any: no fallback to scan.
        Ok(rounds.into_hits())
    }

    /// The scope's `ok` episodes that affected any of `components` (plus any in
    /// `filters.components`), or all of them when none is given, most recently confirmed
    /// first. Episodes carry no embedding.
    pub async fn timeline(
        &self,
        scope: &Scope,
        components: &[Component],
        limit: usize,
        filters: &SearchFilters,
    ) -> Result<Vec<Episode>> {
        let mut filters = filters.clone();
        filters.components.extend(components.iter().cloned());
        let statement = filtered(TIMELINE.statement(), scope, &filters).param("limit", int(limit));
        let rows = self.fetch(statement).await?;
        rows.iter()
            .map(|row| episode_column(row, TIMELINE.name, "episode"))
            .collect()
    }

    /// The related-history digest: `scope`'s `ok` episodes confirmed since `since` whose
    /// component names or issue type match one of `entities` (lowercase; ignoring case),
    /// most recently confirmed first, with their recurrence chain. Episodes carry no
    /// embedding.
    pub async fn related_episodes(
        &self,
        scope: &Scope,
        entities: &[String],
        since: chrono::DateTime<chrono::Utc>,
        limit: usize,
    ) -> Result<Vec<Episode>> {
        if entities.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let statement = DIGEST_RELATED
            .statement()
            .param("org", scope.org.as_str())
            .param("team", scope.team.as_deref())
            .param("entities", entities.to_vec())
            .param("since", since)
            .param("limit", int(limit));
        let rows = self.fetch(statement).await?;
        rows.iter()
            .map(|row| episode_column(row, DIGEST_RELATED.name, "episode"))
            .collect()
    }

    /// How many episodes of `scope` semantic search can return (`ok`, with an embedding).
    pub async fn count_searchable(&self, scope: &Scope) -> Result<usize> {
        self.count_searchable_up_to(scope, usize::MAX).await
    }

    /// Like [`GraphStore::count_searchable`], but stops counting at `cap`.
    pub async fn count_searchable_up_to(&self, scope: &Scope, cap: usize) -> Result<usize> {
        let query = by_scope(scope, &COUNT_SEARCHABLE_TEAM, &COUNT_SEARCHABLE_ORG);
        let rows = self
            .fetch(
                query
                    .statement()
                    .param("org", scope.org.as_str())
                    .param("team", scope.team.as_deref())
                    .param("cap", i64::try_from(cap).unwrap_or(i64::MAX)),
            )
            .await?;
        let Some(row) = rows.first() else {
            return Err(GraphError::decode(query.name, "no row"));
        };
        let n: i64 = column(row, query.name, "searchable")?;
        usize::try_from(n).map_err(|_| GraphError::decode(query.name, "negative count"))
    }

    /// Runs a query returning one row `{fetched, kept: [{episode, score}]}`.
    async fn over_fetched(&self, statement: Statement) -> Result<(usize, Vec<(Episode, f64)>)> {
        let name = statement.name;
        let rows = self.fetch(statement).await?;
        let Some(row) = rows.first() else {
            return Err(GraphError::decode(name, "no row"));
        };
        let fetched: i64 = column(row, name, "fetched")?;
        let kept: Vec<KeptHit> = column(row, name, "kept")?;
        let mut hits = kept
            .into_iter()
            .map(|hit| {
                let episode = hit
                    .episode
                    .into_episode()
                    .map_err(|detail| GraphError::decode(name, detail))?;
                Ok((episode, hit.score))
            })
            .collect::<Result<Vec<_>>>()?;
        // `collect` in Cypher keeps the ORDER BY order in practice; sorting again makes the
        // contract independent of that.
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.id.cmp(&b.0.id)));
        Ok((usize::try_from(fetched).unwrap_or(0), hits))
    }
}

/// How a search that grows k ended.
enum Rounds<T> {
    /// A round had enough hits (or proved there are no more).
    Answered(T),
    /// The round at the largest k still had too few: the caller decides what answers now.
    Exhausted(T),
}

impl<T> Rounds<T> {
    fn into_hits(self) -> T {
        match self {
            Rounds::Answered(hits) | Rounds::Exhausted(hits) => hits,
        }
    }
}

/// Asks `round` for the top k, from `first_k`, multiplying k by `ANN_GROWTH` (capped at
/// `max_k`) while the round answers "not enough" (`(hits, false)`). Every over-fetching
/// search of the store grows k this way; they differ only in what "enough" means and in what
/// answers once k cannot grow.
///
/// `round` is a closure returning a future rather than an async closure: the futures of
/// async closures lose `Send` in rustc's inference, and the worker's futures must be `Send`.
async fn growing_k<T, Round, RoundFuture>(
    first_k: usize,
    max_k: usize,
    mut round: Round,
) -> Result<Rounds<T>>
where
    Round: FnMut(usize) -> RoundFuture,
    RoundFuture: std::future::Future<Output = Result<(T, bool)>>,
{
    let mut k = first_k.min(max_k);
    loop {
        let (hits, enough) = round(k).await?;
        if enough {
            return Ok(Rounds::Answered(hits));
        }
        if k >= max_k {
            return Ok(Rounds::Exhausted(hits));
        }
        k = k.saturating_mul(ANN_GROWTH).min(max_k);
    }
}

/// The filtering index's answer, or the exact scan's when Neo4j refused the index statement
/// (`GraphError::Query`). The exact scan reads no index, so it answers whatever state the
/// index is in: seen on Neo4j 2026.08, a long-lived store whose filtered vector search failed
/// inside Lucene (`ArrayIndexOutOfBoundsException` in `DenseLiveDocs`) for one team, every
/// search of that team failing until the index was rebuilt. Slower (it reads the whole
/// scope), but memory stays available. An unreachable database is not retried this way: the
/// scan would fail the same, later.
async fn or_exact_scan<T, Exact, ExactFuture>(
    filtered: impl std::future::Future<Output = Result<T>>,
    exact: Exact,
) -> Result<T>
where
    Exact: FnOnce() -> ExactFuture,
    ExactFuture: std::future::Future<Output = Result<T>>,
{
    match filtered.await {
        Err(GraphError::Query { query, source }) => {
            tracing::warn!(query, error = %deja_domain::error_chain(&source),
                "the filtering vector index failed; answering with the exact scan");
            exact().await
        }
        answered => answered,
    }
}

/// The team-scoped or the org-wide variant of a statement. They are separate files, not one
/// statement with `$team IS NULL OR e.team = $team`, because such a predicate keeps Neo4j from
/// seeking the (org, team, ...) index: a team's scan would read its whole org.
fn by_scope<'q>(scope: &Scope, team: &'q Cypher, org: &'q Cypher) -> &'q Cypher {
    if scope.team.is_some() {
        team
    } else {
        org
    }
}

/// Adds the scope and filter parameters shared by every search statement.
fn filtered(statement: Statement, scope: &Scope, filters: &SearchFilters) -> Statement {
    statement
        .param("org", scope.org.as_str())
        .param("team", scope.team.as_deref())
        .param("issue_type", filters.issue_type.as_deref())
        .param("resolved", filters.resolved)
        .param("significance", filters.significance.as_deref())
        .param(
            "exclude_correlation_id",
            filters.exclude_correlation_id.as_deref(),
        )
        .param(
            "component_keys",
            component_keys(&scope.org, &filters.components),
        )
}

/// The first k asked of the vector index when its hits get filtered afterwards.
fn overfetched_k(limit: usize, plan: &SearchPlanSettings) -> usize {
    limit.saturating_mul(plan.ann_overfetch.max(1)).max(limit)
}

/// Cosine is undefined for a zero vector and Neo4j rejects non-finite values; say so here
/// rather than with a server error.
fn check_query_vector(embedding: &[f32]) -> Result<()> {
    if embedding.is_empty() || embedding.iter().any(|x| !x.is_finite()) {
        return Err(GraphError::invalid(
            "query embedding",
            "must be non-empty and finite",
        ));
    }
    if embedding.iter().all(|x| *x == 0.0) {
        return Err(GraphError::invalid(
            "query embedding",
            "must not be all zeros",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalised_scores_convert_back_to_cosine() {
        assert_eq!(raw_cosine(1.0), 1.0);
        assert_eq!(raw_cosine(0.5), 0.0);
        assert_eq!(raw_cosine(0.0), -1.0);
        assert!((raw_cosine(0.853_553_4) - std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-6);
        assert_eq!(raw_cosine(1.000_001), 1.0);
    }

    #[test]
    fn bad_query_vectors_are_refused() {
        assert!(check_query_vector(&[]).is_err());
        assert!(check_query_vector(&[0.0, 0.0]).is_err());
        assert!(check_query_vector(&[f32::NAN, 1.0]).is_err());
        assert!(check_query_vector(&[0.0, 1.0]).is_ok());
    }

    /// Runs `growing_k` with rounds that are "enough" from `enough_at` on; returns the ks asked
    /// and how it ended.
    async fn rounds_asked(first_k: usize, max_k: usize, enough_at: usize) -> (Vec<usize>, bool) {
        let asked = std::cell::RefCell::new(Vec::new());
        let rounds = growing_k(first_k, max_k, |k| {
            asked.borrow_mut().push(k);
            async move { Ok((k, k >= enough_at)) }
        })
        .await
        .unwrap();
        let asked = asked.into_inner();
        let answered = matches!(rounds, Rounds::Answered(_));
        assert_eq!(rounds.into_hits(), *asked.last().unwrap());
        (asked, answered)
    }

    #[tokio::test]
    async fn k_grows_until_a_round_has_enough_and_stops_at_its_cap() {
        assert_eq!(rounds_asked(20, 10_000, 0).await, (vec![20], true));
        assert_eq!(
            rounds_asked(20, 10_000, 1_000).await,
            (vec![20, 160, 1_280], true)
        );
        // The cap is asked once, then the caller's fallback answers.
        assert_eq!(
            rounds_asked(200, 10_000, usize::MAX).await,
            (vec![200, 1_600, 10_000], false)
        );
        assert_eq!(
            rounds_asked(20_000, 10_000, usize::MAX).await,
            (vec![10_000], false)
        );
    }

    #[tokio::test]
    async fn a_failing_round_ends_the_search_with_its_error() {
        let calls = std::cell::Cell::new(0);
        let result: Result<Rounds<()>> = growing_k(10, 100, |_| {
            calls.set(calls.get() + 1);
            async { Err(GraphError::decode("probe", "boom")) }
        })
        .await;
        assert!(result.is_err());
        assert_eq!(calls.get(), 1);
    }

    fn refused(query: &'static str) -> GraphError {
        GraphError::Query {
            query,
            source: neo4rs::Error::UnexpectedMessage("index failure".into()),
        }
    }

    #[tokio::test]
    async fn a_refused_index_statement_is_answered_by_the_exact_scan() {
        let scanned = std::cell::Cell::new(false);
        let answer = or_exact_scan(async { Err(refused("semantic_filtered_team")) }, || {
            scanned.set(true);
            async { Ok("exact") }
        })
        .await;
        assert_eq!(answer.unwrap(), "exact");
        assert!(scanned.get());
    }

    #[tokio::test]
    async fn the_exact_scan_runs_only_when_the_index_statement_was_refused() {
        let scanned = std::cell::Cell::new(false);
        let scan = || {
            scanned.set(true);
            async { Ok("exact") }
        };
        assert_eq!(
            or_exact_scan(async { Ok("index") }, scan).await.unwrap(),
            "index"
        );
        // An outage or a row of the wrong shape would fail the scan too: passed on as it is.
        let outage = GraphError::Unavailable {
            query: "semantic_filtered_team",
            source: neo4rs::Error::ConnectionTimedOut,
        };
        let passed_on = or_exact_scan(async { Err::<&str, _>(outage) }, scan).await;
        assert!(matches!(passed_on, Err(GraphError::Unavailable { .. })));
        let decode = GraphError::decode("semantic_filtered_team", "no row");
        let passed_on = or_exact_scan(async { Err::<&str, _>(decode) }, scan).await;
        assert!(matches!(passed_on, Err(GraphError::Decode { .. })));
        assert!(!scanned.get());
    }

    #[test]
    fn plan_settings_come_from_the_search_settings() {
        let settings = deja_config::Settings::defaults().search;
        let plan = SearchPlanSettings::from(&settings);
        assert_eq!(plan.exact_scan_max, settings.exact_scan_max);
        assert_eq!(plan.ann_overfetch, settings.ann_overfetch);
        assert_eq!(plan.in_index_filters, settings.in_index_filters);
    }
}
