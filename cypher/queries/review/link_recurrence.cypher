// Links a newer conversation's episode to an older one it recurs:
// (new)-[:RECURRENCE_OF {detected_at, confidence, by}]->(old). Idempotent: one relationship
// per pair however often it is detected (one per conversation, since an episode is one
// conversation); a person's link also confirms it. Both episodes must be in $org. The SET
// before the MERGE takes the new episode's write lock, so concurrent detections of the same
// pair cannot both create it (the lock flag never outlives the statement). With $audit, a
// Review record is written on the new episode in the same statement.
// A person's rejection of the pair (NOT_RECURRENCE_OF, either way, left by
// review/unlink_recurrence.cypher) stands against an unconfirmed link, which is then not made;
// a person's link ($confirm) takes the rejection back, sets the confidence they give, and
// replaces the recognizer's unconfirmed guess of another recurrence for n (`by:
// 'recognition'`, which no later turn could retract once a person has linked n).
// Returns no row when either episode is missing (or they are the same), or when the pair is
// rejected and $confirm is false.
// $org: STRING, $new_id: STRING, $old_id: STRING, $confidence: FLOAT, $by: STRING,
// $at: DATETIME, $confirm: BOOLEAN, $audit: BOOLEAN, $changes_json: STRING
MATCH (n:Episode {id: $new_id, org: $org})
MATCH (o:Episode {id: $old_id, org: $org})
WHERE n <> o
  AND ($confirm OR NOT EXISTS { MATCH (n)-[:NOT_RECURRENCE_OF]-(o) })
SET n._lock = true
WITH n, o, EXISTS { (n)-[:RECURRENCE_OF]->(o) } AS existed
CALL (n, o) {
  OPTIONAL MATCH (n)-[rejected:NOT_RECURRENCE_OF]-(o)
  WHERE $confirm
  DELETE rejected
}
CALL (n, o) {
  OPTIONAL MATCH (n)-[guess:RECURRENCE_OF]->(x:Episode)
  WHERE $confirm AND x <> o AND guess.by = 'recognition' AND guess.confirmed_by IS NULL
  DELETE guess
}
MERGE (n)-[r:RECURRENCE_OF]->(o)
  ON CREATE SET r.detected_at = $at, r.confidence = $confidence, r.by = $by
FOREACH (_ IN CASE WHEN $confirm THEN [1] ELSE [] END |
  SET r.confirmed_by = $by, r.confirmed_at = $at, r.confidence = $confidence)
FOREACH (_ IN CASE WHEN $audit THEN [1] ELSE [] END |
  CREATE (n)-[:HAS_REVIEW]->(:Review {at: $at, by: $by, action: 'link_recurrence',
                                      changes_json: $changes_json, version: n.version}))
REMOVE n._lock
RETURN NOT existed AS created
