// The related-history digest (POST /v1/memory/digest): a tenant's searchable episodes
// confirmed within the window whose component names or issue type (the episode's tag) match
// one of the trigger's entities, ignoring case (deja_domain::digest::matches, the same rule),
// most recently confirmed first. Failed extractions are excluded, as in search.
// `recurrence_seen` as in search/timeline.cypher: with $team, only that team's members of the
// chain count (a person may link across teams; a team's digest shows no other team's dates).
// $org: STRING, $team: STRING or null, $entities: LIST<STRING> (lowercase),
// $since: DATETIME, $limit: INTEGER
MATCH (e:Episode {org: $org, extraction_status: 'ok'})
WHERE ($team IS NULL OR e.team = $team)
  AND e.last_confirmed_at >= $since
  AND (toLower(e.issue_type) IN $entities
       OR any(name IN coalesce(e.component_names, []) WHERE toLower(name) IN $entities))
WITH e
ORDER BY e.last_confirmed_at DESC, e.id
LIMIT $limit
RETURN e {.*, embedding: null, recurrence_seen: COLLECT {
           MATCH p = (e)-[:RECURRENCE_OF*1..10]-(x:Episode) WHERE x <> e AND ($team IS NULL OR all(m IN nodes(p) WHERE m.team = $team))
             AND none(m IN nodes(p) WHERE coalesce(m.verdict, '') = 'wrong')
           WITH DISTINCT x RETURN x.created_at }} AS episode
ORDER BY e.last_confirmed_at DESC, e.id
