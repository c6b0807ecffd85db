// Test check: the outgoing relationships of one episode, as (type, target key or name).
// $key: STRING
MATCH (e:Episode {key: $key})-[r]->(n)
RETURN type(r) AS type, coalesce(n.key, n.name) AS target
ORDER BY type, target
