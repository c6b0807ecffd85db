// Ends a synthesis claim (the synthesizer is done, whatever the outcome), but only a claim
// for one of $fingerprints: a claim another search has since taken for a newer source set
// stays. A node that is only a claim (nothing stored: too few sources, or the LLM failed)
// and no longer claimed is removed.
// $key: STRING, $fingerprints: LIST<STRING>
MATCH (s:Strategy {key: $key})
SET s._lock = true
WITH s
CALL (s) {
  WITH s
  WHERE s.claim_fingerprint IN $fingerprints
  REMOVE s.claim_fingerprint, s.claimed_at
}
REMOVE s._lock
WITH s
CALL (s) {
  WITH s
  WHERE s.markdown IS NULL AND s.claim_fingerprint IS NULL
  DETACH DELETE s
}
