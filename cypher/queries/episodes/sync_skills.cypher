// Makes the episode's USED_SKILL relationships exactly $skills. Skills belong to the episode's
// org (their key starts with it) and are shared by its episodes; they stay when unlinked.
// $skills is sorted by key so that concurrent saves lock skills in the same order.
// $key: STRING, $org: STRING, $skill_keys: LIST<STRING>, $skills: LIST<{key, name}>
MATCH (e:Episode {key: $key})
CALL (e) {
  MATCH (e)-[r:USED_SKILL]->(old:Skill)
  WHERE NOT old.key IN $skill_keys
  DELETE r
}
WITH e
UNWIND $skills AS skill
MERGE (s:Skill {key: skill.key})
  ON CREATE SET s.org = $org, s.name = skill.name
MERGE (e)-[:USED_SKILL]->(s)
