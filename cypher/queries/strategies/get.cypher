// One strategy by key with the ids of the episodes it was synthesized from, and of those that
// changed since it was written (a later turn or edit, another issue type after a merge, a
// person's verdict: review shows it stale), and of those a person marked wrong (search does
// not serve a synthesized text made from them); and its last failed synthesis, if one is recorded
// (`failed_fingerprint`, `failed_at`: a search in the cool-down says so). A node that only
// carries a synthesis claim or a failure record (no markdown yet) is not a strategy:
// `strategy` is null then.
// $key: STRING (StrategyKey::composite())
MATCH (s:Strategy {key: $key})
RETURN CASE WHEN s.markdown IS NOT NULL THEN
         s {.*, source_ids: [(s)-[:SYNTHESIZED_FROM]->(e:Episode) | e.id],
            changed_source_ids: [(s)-[:SYNTHESIZED_FROM]->(c:Episode)
                                WHERE c.updated_at > s.sources_read_at
                                   OR c.issue_type <> s.issue_type
                                   OR c.verdict IS NOT NULL | c.id],
            corrected_source_ids: [(s)-[:SYNTHESIZED_FROM]->(w:Episode)
                                   WHERE w.verdict IS NOT NULL | w.id]}
       END AS strategy,
       s.failed_fingerprint AS failed_fingerprint, s.failed_at AS failed_at
