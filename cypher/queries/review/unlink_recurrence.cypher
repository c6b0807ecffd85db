// A person removes a recurrence link, with its audit record on the newer episode, and records
// that they rejected it: (n)-[:NOT_RECURRENCE_OF {by, at}]->(o), so that the worker's
// automatic linking never makes the pair again (review/auto_link_recurrence.cypher); only a
// person's link of the pair (review/link_recurrence.cypher) removes the rejection. Nothing is
// recorded when no link existed. The SET takes n's write lock, as the automatic linking does,
// so a turn linking n meanwhile applies before or after this, never in between.
// Returns no row when either episode is missing in $org; `removed` = 0 when no link existed.
// $org: STRING, $new_id: STRING, $old_id: STRING, $by: STRING, $at: DATETIME,
// $changes_json: STRING
MATCH (n:Episode {id: $new_id, org: $org})
MATCH (o:Episode {id: $old_id, org: $org})
SET n._lock = true
WITH n, o
OPTIONAL MATCH (n)-[r:RECURRENCE_OF]->(o)
WITH n, o, count(r) AS removed, collect(r) AS links
FOREACH (link IN links | DELETE link)
FOREACH (_ IN CASE WHEN removed > 0 THEN [1] ELSE [] END |
  MERGE (n)-[rejected:NOT_RECURRENCE_OF]->(o)
  SET rejected.by = $by, rejected.at = $at
  CREATE (n)-[:HAS_REVIEW]->(:Review {at: $at, by: $by, action: 'unlink_recurrence',
                                      changes_json: $changes_json, version: n.version}))
REMOVE n._lock
RETURN removed
