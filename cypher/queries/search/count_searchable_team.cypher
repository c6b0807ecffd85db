// count_searchable_org.cypher for one team: served by the (org, team, extraction_status)
// index, so it reads the team's episodes only, never the rest of its org.
// $org: STRING, $team: STRING, $cap: INTEGER
MATCH (e:Episode {org: $org, team: $team, extraction_status: 'ok'})
WHERE e.embedding IS NOT NULL
WITH e LIMIT $cap
RETURN count(e) AS searchable
