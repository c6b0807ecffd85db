// One conversation's episode with its components and skills, for the graph view.
:param org => 'acme';
:param correlation_id => 'conv-123';
MATCH (e:Episode {org: $org, correlation_id: $correlation_id})
OPTIONAL MATCH (e)-[r:AFFECTS|USED_SKILL]->(n)
RETURN e, r, n
