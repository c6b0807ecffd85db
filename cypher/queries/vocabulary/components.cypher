// The components a team's episodes affect, most frequent first (offered to the LLM).
// $org: STRING, $team: STRING, $limit: INTEGER
MATCH (e:Episode {org: $org, team: $team})-[:AFFECTS]->(c:Component)
WHERE e.extraction_status = 'ok'
WITH c, count(*) AS uses
ORDER BY uses DESC, c.type, c.name
LIMIT $limit
RETURN c.type AS type, c.name AS name
