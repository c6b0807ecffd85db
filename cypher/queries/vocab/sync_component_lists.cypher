// `deja vocab merge --kind component`, step 2: the episodes' component lists (read by search)
// rewritten from their AFFECTS edges, their versions bumped and `updated_at` moved: what they
// affect changed, so a strategy made from them under the old name reads stale in review (it
// no longer fits its sources) rather than current.
// $keys: LIST<STRING>
UNWIND $keys AS key
MATCH (e:Episode {key: key})
CALL (e) {
  MATCH (e)-[:AFFECTS]->(c:Component)
  WITH c
  ORDER BY c.type, c.name
  RETURN collect(c.type) AS types, collect(c.name) AS names
}
SET e.component_types = types, e.component_names = names, e.version = e.version + 1,
    e.updated_at = datetime()
RETURN count(e) AS episodes
