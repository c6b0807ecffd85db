// Exact cosine scan of one org's searchable episodes: complete and correct however many
// episodes other tenants have, costs linear in the org's size (docs/ranking.md). Served by the
// (org, extraction_status) index; team-scoped scans use semantic_exact_team.cypher.
// vector.similarity.cosine returns (1 + cos) / 2 like the index; the store converts it back.
// $org, $embedding: LIST<FLOAT>, $limit, and the filters (the queries that name this file's
// filters also take $team: STRING or null, null = every team of the org):
// $issue_type, $resolved, $significance, $exclude_correlation_id (each null = any),
// $component_keys: LIST<STRING> (empty = any; else any one must be affected)
// `recurrence_seen`: the created_at of every other episode of the returned episode's
// RECURRENCE_OF chain (bounded, either direction), computed only for the rows kept, so that
// search answers carry recurrence_count / first_seen / last_seen without another round trip.
// An episode a person marked wrong (`verdict`) belongs to no chain: it is neither counted nor
// crossed, and its own count is 0 (review/recurrences.cypher, for people, still shows it).
MATCH (e:Episode {org: $org, extraction_status: 'ok'})
WHERE e.embedding IS NOT NULL
  AND size(e.embedding) = size($embedding)
  AND ($issue_type IS NULL OR e.issue_type = $issue_type)
  AND ($resolved IS NULL OR e.resolved = $resolved)
  AND ($significance IS NULL OR e.significance = $significance)
  AND ($exclude_correlation_id IS NULL OR e.correlation_id <> $exclude_correlation_id)
  AND (size($component_keys) = 0
       OR EXISTS { MATCH (e)-[:AFFECTS]->(c:Component) WHERE c.key IN $component_keys })
WITH e, vector.similarity.cosine(e.embedding, $embedding) AS score
ORDER BY score DESC, e.id
LIMIT $limit
RETURN e {.*, embedding: null, recurrence_seen: COLLECT {
           MATCH p = (e)-[:RECURRENCE_OF*1..10]-(x:Episode) WHERE x <> e
             AND none(m IN nodes(p) WHERE coalesce(m.verdict, '') = 'wrong')
           WITH DISTINCT x RETURN x.created_at }} AS episode, score
