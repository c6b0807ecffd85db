// The components an org's episodes affect (every team), most used first.
// $org: STRING, $limit: INTEGER
MATCH (e:Episode {org: $org})-[:AFFECTS]->(c:Component)
WHERE e.extraction_status = 'ok'
WITH c, count(*) AS uses
ORDER BY uses DESC, c.type, c.name
LIMIT $limit
RETURN c.type AS type, c.name AS name, uses
