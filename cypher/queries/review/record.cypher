// The audit record of one review write, in the same transaction as the write itself:
// who (the token's name), when, what (the action) and the field changes as JSON.
// $key: STRING (the episode's composite key), $at: DATETIME, $by: STRING, $action: STRING,
// $changes_json: STRING, $version: INTEGER (the episode version the write produced)
MATCH (e:Episode {key: $key})
CREATE (e)-[:HAS_REVIEW]->(:Review {at: $at, by: $by, action: $action,
                                    changes_json: $changes_json, version: $version})
