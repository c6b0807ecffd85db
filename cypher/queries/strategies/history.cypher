// The review history of one strategy (edits and accepted proposals), newest first.
// $key: STRING (StrategyKey::composite()), $limit: INTEGER
MATCH (:Strategy {key: $key})-[:HAS_REVIEW]->(r:Review)
RETURN r.at AS at, r.by AS by, r.action AS action, r.changes_json AS changes_json,
       r.version AS version
ORDER BY r.at DESC
LIMIT $limit
