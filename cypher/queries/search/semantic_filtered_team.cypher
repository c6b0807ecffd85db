// The team's $k nearest searchable episodes, filtered inside the vector index (Cypher 25 SEARCH,
// Neo4j 2026.01+; index from migration 009): the index itself returns this tenant's nearest
// neighbours, however many closer episodes other tenants have. The remaining filters are not
// index properties, so they apply afterwards and the store grows $k while they thin the hits.
// `fetched` < $k means the tenant has no more searchable episodes. The store asks for a few
// times $limit: the index is quantized, so its nearest are re-scored exactly here, like
// semantic_ann.cypher, so that every path returns the same similarity for an episode.
// `recurrence_seen`: as in semantic_exact_org.cypher, for the rows kept.
// $org, $team: STRING, $embedding, $k, $limit and the filters of semantic_exact_org.cypher.
CYPHER 25
MATCH (e:Episode)
  SEARCH e IN (
    VECTOR INDEX episode_embedding_scoped
    FOR $embedding
    WHERE e.org = $org AND e.team = $team AND e.extraction_status = 'ok'
    LIMIT $k
  )
WITH collect(e) AS hits
CALL (hits) {
  UNWIND hits AS e
  WITH e
  WHERE ($issue_type IS NULL OR e.issue_type = $issue_type)
    AND ($resolved IS NULL OR e.resolved = $resolved)
    AND ($significance IS NULL OR e.significance = $significance)
    AND ($exclude_correlation_id IS NULL OR e.correlation_id <> $exclude_correlation_id)
    AND (size($component_keys) = 0
         OR EXISTS { MATCH (e)-[:AFFECTS]->(c:Component) WHERE c.key IN $component_keys })
  WITH e, vector.similarity.cosine(e.embedding, $embedding) AS score
  ORDER BY score DESC, e.id
  LIMIT $limit
  RETURN collect({episode: e {.*, embedding: null, recurrence_seen: COLLECT {
           MATCH p = (e)-[:RECURRENCE_OF*1..10]-(x:Episode) WHERE x <> e AND x.team = $team
             AND all(m IN nodes(p) WHERE m.team = $team)
             AND none(m IN nodes(p) WHERE coalesce(m.verdict, '') = 'wrong')
           WITH DISTINCT x RETURN x.created_at }}, score: score}) AS kept
}
RETURN size(hits) AS fetched, kept
