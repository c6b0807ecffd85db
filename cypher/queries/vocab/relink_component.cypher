// `deja vocab merge --kind component`, step 1: every AFFECTS edge from an episode of the org
// to a component named $from (any type) moves to the component of the same type named $into
// (created if needed). Returns the keys of the episodes touched.
// $org: STRING, $from: STRING, $into: STRING, $separator: STRING (the component key's U+001F)
MATCH (e:Episode {org: $org})-[r:AFFECTS]->(old:Component {name: $from})
MERGE (new:Component {key: old.type + $separator + $into})
  ON CREATE SET new.type = old.type, new.name = $into
MERGE (e)-[:AFFECTS]->(new)
DELETE r
RETURN collect(DISTINCT e.key) AS keys
