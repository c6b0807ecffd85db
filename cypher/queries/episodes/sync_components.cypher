// Makes the episode's AFFECTS relationships exactly $components: unlinks the ones no longer
// listed, links the new ones. Components belong to the episode's org (their key starts with
// it) and are shared by its episodes; they stay when unlinked.
// $components is sorted by key so that concurrent saves lock components in the same order.
// $key: STRING, $org: STRING, $component_keys: LIST<STRING>, $components: LIST<{key, type, name}>
MATCH (e:Episode {key: $key})
CALL (e) {
  MATCH (e)-[r:AFFECTS]->(old:Component)
  WHERE NOT old.key IN $component_keys
  DELETE r
}
WITH e
UNWIND $components AS component
MERGE (c:Component {key: component.key})
  ON CREATE SET c.org = $org, c.type = component.type, c.name = component.name
MERGE (e)-[:AFFECTS]->(c)
