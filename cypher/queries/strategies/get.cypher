// One strategy by key with the ids of the episodes it was synthesized from, and of those that
// changed since it was written (a later turn or edit, another issue type after a merge, a
// person's verdict: review shows it stale). A node that only carries a synthesis claim (no
// markdown yet) is not a strategy.
// $key: STRING (StrategyKey::composite())
MATCH (s:Strategy {key: $key})
WHERE s.markdown IS NOT NULL
RETURN s {.*, source_ids: [(s)-[:SYNTHESIZED_FROM]->(e:Episode) | e.id],
          changed_source_ids: [(s)-[:SYNTHESIZED_FROM]->(c:Episode)
                              WHERE c.updated_at > s.sources_read_at OR c.issue_type <> s.issue_type
                                 OR c.verdict IS NOT NULL | c.id]} AS strategy
