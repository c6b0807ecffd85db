// `deja vocab merge --kind component`, step 1: every AFFECTS edge from an episode of the org
// to the org's component named $from (any type) moves to the org's component of the same type
// named $into (created if needed). Returns the keys of the episodes touched.
// The key is built as `component_key` builds it in Rust: org, type, name joined by U+001F.
// $org: STRING, $from: STRING, $into: STRING, $separator: STRING (the component key's U+001F)
MATCH (e:Episode {org: $org})-[r:AFFECTS]->(old:Component {org: $org, name: $from})
MERGE (new:Component {key: $org + $separator + old.type + $separator + $into})
  ON CREATE SET new.org = $org, new.type = old.type, new.name = $into
MERGE (e)-[:AFFECTS]->(new)
DELETE r
RETURN collect(DISTINCT e.key) AS keys
