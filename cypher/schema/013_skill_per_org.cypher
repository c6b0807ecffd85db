// Skills belong to one org, like components (012). Before this migration a skill was one node
// for every org (unique by `name`): a Browser user following a skill from one org's episode
// reached other orgs' episodes, and concurrent writes of different tenants locked the same
// node. Now `key` = org + U+001F + name and the node carries `org` and `name`
// (deja-graph's `skill_key`). Each shared node's edges move to their org's own node, in
// batches; the emptied shared nodes go. A re-run finds no skill without an org and changes
// nothing.
DROP CONSTRAINT skill_name IF EXISTS;
CREATE CONSTRAINT skill_key IF NOT EXISTS FOR (s:Skill) REQUIRE s.key IS UNIQUE;
MATCH (e:Episode)-[r:USED_SKILL]->(shared:Skill)
WHERE shared.org IS NULL
CALL (e, r, shared) {
  MERGE (own:Skill {key: e.org + '\u001F' + shared.name})
    ON CREATE SET own.org = e.org, own.name = shared.name
  MERGE (e)-[:USED_SKILL]->(own)
  DELETE r
} IN TRANSACTIONS OF 2000 ROWS;
MATCH (shared:Skill)
WHERE shared.org IS NULL AND NOT (shared)--()
CALL (shared) {
  DELETE shared
} IN TRANSACTIONS OF 2000 ROWS;
CREATE INDEX skill_org_name IF NOT EXISTS FOR (s:Skill) ON (s.org, s.name);
