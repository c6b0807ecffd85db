// `deja vocab merge --kind component`, step 2: the episodes' component lists (read by search)
// rewritten from their AFFECTS edges, and their versions bumped.
// $keys: LIST<STRING>
UNWIND $keys AS key
MATCH (e:Episode {key: key})
CALL (e) {
  MATCH (e)-[:AFFECTS]->(c:Component)
  WITH c
  ORDER BY c.type, c.name
  RETURN collect(c.type) AS types, collect(c.name) AS names
}
SET e.component_types = types, e.component_names = names, e.version = e.version + 1
RETURN count(e) AS episodes
