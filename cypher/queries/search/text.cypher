// Full-text search. $query is built by the store: the tenant's scope token is required
// inside Lucene (so other tenants cannot crowd the limit out) and the user's words are
// escaped. The exact org/team check below still runs. Failed extractions are excluded.
// `fetched` < $k means the index ran dry. Filters as in semantic_exact_org.cypher.
// $query: STRING (Lucene), $k: INTEGER, $limit: INTEGER
// `recurrence_seen`: the created_at of every other episode of the returned episode's
// RECURRENCE_OF chain (bounded, either direction), computed only for the rows kept, so that
// search answers carry recurrence_count / first_seen / last_seen without another round trip.
// An episode a person marked wrong (`verdict`) belongs to no chain: it is neither counted nor
// crossed, and its own count is 0 (review/recurrences.cypher, for people, still shows it).
CALL db.index.fulltext.queryNodes('episode_search_text', $query, {limit: $k}) YIELD node, score
WITH collect({e: node, score: score}) AS hits
CALL (hits) {
  UNWIND hits AS hit
  WITH hit.e AS e, hit.score AS score
  WHERE e.org = $org
    AND ($team IS NULL OR e.team = $team)
    AND e.extraction_status = 'ok'
    AND ($issue_type IS NULL OR e.issue_type = $issue_type)
    AND ($resolved IS NULL OR e.resolved = $resolved)
    AND ($significance IS NULL OR e.significance = $significance)
    AND ($exclude_correlation_id IS NULL OR e.correlation_id <> $exclude_correlation_id)
    AND (size($component_keys) = 0
         OR EXISTS { MATCH (e)-[:AFFECTS]->(c:Component) WHERE c.key IN $component_keys })
  WITH e, score
  ORDER BY score DESC, e.id
  LIMIT $limit
  RETURN collect({episode: e {.*, embedding: null, recurrence_seen: COLLECT {
             MATCH p = (e)-[:RECURRENCE_OF*1..10]-(x:Episode) WHERE x <> e AND ($team IS NULL OR all(m IN nodes(p) WHERE m.team = $team))
               AND none(m IN nodes(p) WHERE coalesce(m.verdict, '') = 'wrong')
             WITH DISTINCT x RETURN x.created_at }},
                  score: score}) AS kept
}
RETURN size(hits) AS fetched, kept
