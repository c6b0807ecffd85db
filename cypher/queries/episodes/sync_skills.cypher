// Makes the episode's USED_SKILL relationships exactly $skills (sorted, for lock order).
// $key: STRING, $skills: LIST<STRING>
MATCH (e:Episode {key: $key})
CALL (e) {
  MATCH (e)-[r:USED_SKILL]->(old:Skill)
  WHERE NOT old.name IN $skills
  DELETE r
}
WITH e
UNWIND $skills AS skill
MERGE (s:Skill {name: skill})
MERGE (e)-[:USED_SKILL]->(s)
