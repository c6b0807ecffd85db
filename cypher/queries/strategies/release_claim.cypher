// Ends a synthesis claim (the synthesizer is done, whatever the outcome), but only a claim
// for one of $fingerprints: a claim another search has since taken for a newer source set
// stays. With $failed_fingerprint (the synthesis failed: its job is dead-lettered), the
// failure is recorded in the same statement (`failed_fingerprint`, `failed_at`,
// `failed_reason`), so that no search can claim that source set again between the release
// and the record: claim.cypher refuses it for the cool-down. Not when another job has stored
// (or proposed) a strategy of that very source set meanwhile: nothing failed for it then. A node that is only a claim
// (nothing stored: too few sources) and no longer claimed, with no failure recorded, is
// removed.
// $key: STRING, $fingerprints: LIST<STRING>, $failed_fingerprint: STRING or null,
// $failed_reason: STRING or null
MATCH (s:Strategy {key: $key})
SET s._lock = true
WITH s
CALL (s) {
  WITH s
  WHERE s.claim_fingerprint IN $fingerprints
  REMOVE s.claim_fingerprint, s.claimed_at
}
CALL (s) {
  WITH s
  WHERE $failed_fingerprint IS NOT NULL
    AND coalesce(s.fingerprint, '') <> $failed_fingerprint
    AND coalesce(s.proposed_fingerprint, '') <> $failed_fingerprint
  SET s.failed_fingerprint = $failed_fingerprint,
      s.failed_at = datetime(),
      s.failed_reason = $failed_reason
}
REMOVE s._lock
WITH s
CALL (s) {
  WITH s
  WHERE s.markdown IS NULL AND s.claim_fingerprint IS NULL AND s.failed_fingerprint IS NULL
  DETACH DELETE s
}
