// `deja vocab merge --kind component`, step 3: the org's components named $from that nothing
// links to any more.
// $org: STRING, $from: STRING
MATCH (c:Component {org: $org, name: $from})
WHERE NOT (c)--()
DELETE c
RETURN count(*) AS deleted
