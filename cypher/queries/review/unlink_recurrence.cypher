// A person removes a recurrence link, with its audit record on the newer episode.
// Returns no row when either episode is missing in $org; `removed` = 0 when no link existed.
// $org: STRING, $new_id: STRING, $old_id: STRING, $by: STRING, $at: DATETIME,
// $changes_json: STRING
MATCH (n:Episode {id: $new_id, org: $org})
MATCH (o:Episode {id: $old_id, org: $org})
OPTIONAL MATCH (n)-[r:RECURRENCE_OF]->(o)
WITH n, count(r) AS removed, collect(r) AS links
FOREACH (link IN links | DELETE link)
FOREACH (_ IN CASE WHEN removed > 0 THEN [1] ELSE [] END |
  CREATE (n)-[:HAS_REVIEW]->(:Review {at: $at, by: $by, action: 'unlink_recurrence',
                                      changes_json: $changes_json, version: n.version}))
RETURN removed
