// Components belong to one org. Before this migration a component was one node for every
// org (`key` = type + U+001F + name): episodes of different tenants met at it, so a Browser
// user following a component from one org's episode reached other orgs' episodes, and
// concurrent writes of different tenants locked the same node. Now `key` = org + U+001F +
// type + U+001F + name and the node carries `org` (deja-graph's `component_key`).
// Each shared node's edges move to their org's own node, in batches; the emptied shared
// nodes go. A re-run finds no component without an org and changes nothing.
MATCH (e:Episode)-[r:AFFECTS]->(shared:Component)
WHERE shared.org IS NULL
CALL (e, r, shared) {
  MERGE (own:Component {key: e.org + '\u001F' + shared.type + '\u001F' + shared.name})
    ON CREATE SET own.org = e.org, own.type = shared.type, own.name = shared.name
  MERGE (e)-[:AFFECTS]->(own)
  DELETE r
} IN TRANSACTIONS OF 2000 ROWS;
MATCH (shared:Component)
WHERE shared.org IS NULL AND NOT (shared)--()
CALL (shared) {
  DELETE shared
} IN TRANSACTIONS OF 2000 ROWS;
CREATE INDEX component_org_type_name IF NOT EXISTS FOR (c:Component) ON (c.org, c.type, c.name);
