// Atomically claims the synthesis of one (key, fingerprint): of N concurrent callers exactly
// one gets `won = true` and publishes the job. MERGE on the uniquely constrained key
// serializes creation; the SET takes the node's write lock before the claim is read, so
// the read-check-write below cannot interleave with another caller's. A claim for another
// fingerprint, or one older than the lease (a crashed worker, a lost message), is retaken.
// Nothing is won when the stored strategy (or its pending proposal) already has this
// fingerprint: a search that read the strategy just before it was stored enqueues nothing.
// Nor when the synthesis of this very fingerprint failed less than $cooldown_ms ago
// (`failed_fingerprint`, `failed_at`, written by release_claim.cypher): that is
// `cooling_down = true`. Another fingerprint (the sources changed) is claimed at once.
// The node may be a bare claim (no markdown) until the first strategy is stored.
// $key, $org, $team, $issue_type, $component_type, $component_name: STRING,
// $fingerprint: STRING, $lease_ms: INTEGER, $cooldown_ms: INTEGER
MERGE (s:Strategy {key: $key})
  ON CREATE SET s.org = $org, s.team = $team, s.issue_type = $issue_type,
                s.component_type = $component_type, s.component_name = $component_name,
                s.version = 0
SET s._lock = true
WITH s,
     (coalesce(s.fingerprint, '') = $fingerprint
      OR coalesce(s.proposed_fingerprint, '') = $fingerprint
      OR coalesce(s.claim_fingerprint = $fingerprint
                  AND s.claimed_at >= datetime() - duration({milliseconds: $lease_ms}),
                  false)) AS held,
     coalesce(s.failed_fingerprint = $fingerprint
              AND s.failed_at >= datetime() - duration({milliseconds: $cooldown_ms}),
              false) AS failed_recently
WITH s, NOT held AND NOT failed_recently AS won, NOT held AND failed_recently AS cooling_down
FOREACH (_ IN CASE WHEN won THEN [1] ELSE [] END |
  SET s.claim_fingerprint = $fingerprint, s.claimed_at = datetime())
REMOVE s._lock
RETURN won, cooling_down
