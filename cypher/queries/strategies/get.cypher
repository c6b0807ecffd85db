// One strategy by key with the ids of the episodes it was synthesized from. A node that only
// carries a synthesis claim (no markdown yet) is not a strategy.
// $key: STRING (StrategyKey::composite())
MATCH (s:Strategy {key: $key})
WHERE s.markdown IS NOT NULL
RETURN s {.*, source_ids: [(s)-[:SYNTHESIZED_FROM]->(e:Episode) | e.id]} AS strategy
