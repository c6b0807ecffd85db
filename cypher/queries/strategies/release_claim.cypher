// Ends a synthesis claim (the synthesizer is done, whatever the outcome). A node that was
// only a claim (nothing was stored: too few sources, or the LLM failed) is removed.
// $key: STRING
MATCH (s:Strategy {key: $key})
SET s._lock = true
REMOVE s.claim_fingerprint, s.claimed_at, s._lock
WITH s
CALL (s) {
  WITH s
  WHERE s.markdown IS NULL
  DETACH DELETE s
}
