// Approximate search: the $k nearest episodes of ALL tenants, then the tenant and filters.
// `fetched` (how many the index returned) tells the caller whether the index ran dry
// (fetched < $k: the answer is complete) or whether asking for more could find more.
// The index's own score is approximate (its vectors may be quantized), so the tenant's hits
// are re-scored exactly: both search paths then return the same similarity for an episode.
// $index is the episodes' vector index: episode_embedding, or episode_embedding_scoped where
// migration 009 replaced it (queried here without its filters, for comparison and tests).
// Same parameters as semantic_exact_org.cypher, plus $k: INTEGER, $index: STRING.
// `recurrence_seen`: the created_at of every other episode of the returned episode's
// RECURRENCE_OF chain (bounded, either direction), computed only for the rows kept, so that
// search answers carry recurrence_count / first_seen / last_seen without another round trip.
// An episode a person marked wrong (`verdict`) belongs to no chain: it is neither counted nor
// crossed, and its own count is 0 (review/recurrences.cypher, for people, still shows it).
CALL db.index.vector.queryNodes($index, $k, $embedding) YIELD node, score
WITH collect({e: node, score: score}) AS hits
CALL (hits) {
  UNWIND hits AS hit
  WITH hit.e AS e
  WHERE e.org = $org
    AND ($team IS NULL OR e.team = $team)
    AND e.extraction_status = 'ok'
    AND ($issue_type IS NULL OR e.issue_type = $issue_type)
    AND ($resolved IS NULL OR e.resolved = $resolved)
    AND ($significance IS NULL OR e.significance = $significance)
    AND ($exclude_correlation_id IS NULL OR e.correlation_id <> $exclude_correlation_id)
    AND (size($component_keys) = 0
         OR EXISTS { MATCH (e)-[:AFFECTS]->(c:Component) WHERE c.key IN $component_keys })
  WITH e, vector.similarity.cosine(e.embedding, $embedding) AS score
  ORDER BY score DESC, e.id
  LIMIT $limit
  RETURN collect({episode: e {.*, embedding: null, recurrence_seen: COLLECT {
             MATCH p = (e)-[:RECURRENCE_OF*1..10]-(x:Episode) WHERE x <> e AND ($team IS NULL OR all(m IN nodes(p) WHERE m.team = $team))
               AND none(m IN nodes(p) WHERE coalesce(m.verdict, '') = 'wrong')
             WITH DISTINCT x RETURN x.created_at }},
                  score: score}) AS kept
}
RETURN size(hits) AS fetched, kept
