// The review history of one episode, newest first.
// $id: STRING, $org: STRING, $limit: INTEGER
MATCH (:Episode {id: $id, org: $org})-[:HAS_REVIEW]->(r:Review)
RETURN r.at AS at, r.by AS by, r.action AS action, r.changes_json AS changes_json,
       r.version AS version
ORDER BY r.at DESC
LIMIT $limit
