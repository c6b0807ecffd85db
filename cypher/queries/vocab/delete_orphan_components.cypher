// `deja vocab merge --kind component`, step 3: components named $from that nothing links to
// any more (Component nodes are shared by every org, so only when no edge is left).
// $from: STRING
MATCH (c:Component {name: $from})
WHERE NOT (c)--()
DELETE c
RETURN count(*) AS deleted
