// semantic_exact_org.cypher for one team: served by the (org, team, extraction_status) index,
// so it reads (and scores) the team's episodes only, never the rest of its org.
// $org, $team: STRING, then the parameters of semantic_exact_org.cypher.
// A team's chain is what its own episodes reach: a path through another team's episode (a
// person may link across teams) is not counted.
// `recurrence_seen`: the created_at of every other episode of the returned episode's
// RECURRENCE_OF chain (bounded, either direction) that the search may read (the team's: a
// person may link across teams), computed only for the rows kept, so that search answers
// carry recurrence_count / first_seen / last_seen without another round trip.
// An episode a person marked wrong (`verdict`) belongs to no chain: it is neither counted nor
// crossed, and its own count is 0 (review/recurrences.cypher, for people, still shows it).
MATCH (e:Episode {org: $org, team: $team, extraction_status: 'ok'})
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
           MATCH p = (e)-[:RECURRENCE_OF*1..10]-(x:Episode) WHERE x <> e AND x.team = $team
             AND all(m IN nodes(p) WHERE m.team = $team)
             AND none(m IN nodes(p) WHERE coalesce(m.verdict, '') = 'wrong')
           WITH DISTINCT x RETURN x.created_at }} AS episode, score
