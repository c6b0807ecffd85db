// The recognition decision's recurrence link for one conversation's episode $new_id, run by
// the worker after each committed turn. At most one automatic link per episode, so that a
// conversation is counted once however many turns it has:
// - $old_id set (the newest conclusion strongly matches that older episode): create
//   (n)-[:RECURRENCE_OF {detected_at, confidence, by: $by}]->(o) unless it exists; an
//   automatic, unconfirmed link of n to another episode is replaced by it;
// - $old_id null (the newest conclusion recognizes nothing): an automatic, unconfirmed link
//   of n is retracted.
// A link a person made or confirmed (confirmed_by set) is never touched, and while n has one
// the decision adds nothing: the person already said what n recurs. Nor is n linked to an
// episode a person rejected as its recurrence (a NOT_RECURRENCE_OF between the two, either
// way, left by review/unlink_recurrence.cypher) or marked wrong (`verdict`): such a $old_id
// counts as recognizing nothing. The SET takes n's write lock, so concurrent turns of one
// conversation (and a person's unlink) apply one after the other.
// Returns `created` and `retracted` (automatic links removed); no row when n is missing.
// $org: STRING, $new_id: STRING, $old_id: STRING or null, $confidence: FLOAT, $by: STRING,
// $at: DATETIME
MATCH (n:Episode {id: $new_id, org: $org})
SET n._lock = true
WITH n, EXISTS {
  MATCH (n)-[r:RECURRENCE_OF]->() WHERE r.confirmed_by IS NOT NULL
} AS person_said
OPTIONAL MATCH (found:Episode {id: $old_id, org: $org})
WITH n, person_said,
     CASE WHEN person_said OR found = n OR coalesce(found.verdict, '') = 'wrong'
               OR EXISTS { MATCH (n)-[:NOT_RECURRENCE_OF]-(found) }
          THEN null ELSE found END AS o
CALL (n, o, person_said) {
  OPTIONAL MATCH (n)-[stale:RECURRENCE_OF]->(x:Episode)
  WHERE NOT person_said AND stale.by = $by AND stale.confirmed_by IS NULL
    AND (o IS NULL OR x <> o)
  WITH collect(stale) AS stale
  FOREACH (r IN stale | DELETE r)
  RETURN size(stale) AS retracted
}
WITH n, o, retracted,
     o IS NOT NULL AND NOT EXISTS { MATCH (n)-[:RECURRENCE_OF]->(o) } AS creating
FOREACH (_ IN CASE WHEN creating THEN [1] ELSE [] END |
  CREATE (n)-[:RECURRENCE_OF {detected_at: $at, confidence: $confidence, by: $by}]->(o))
REMOVE n._lock
RETURN creating AS created, retracted
