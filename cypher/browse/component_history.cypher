// Everything that touched one component in an org, most recently confirmed first, with a
// person's verdict (`wrong`: the summary may still tell the disproved cause; ruled_out holds
// it). Switch to the graph view to see the episodes around the component.
:param org => 'acme';
:param type => 'service';
:param name => 'checkout';
MATCH (c:Component {org: $org, type: $type, name: $name})<-[:AFFECTS]-(e:Episode)
RETURN e.last_confirmed_at AS confirmed_at, e.team AS team, e.issue_type AS issue_type,
       e.summary AS summary, e.root_cause AS root_cause, e.resolved AS resolved,
       e.verdict AS verdict, e.verdict_note AS verdict_note, e.ruled_out AS ruled_out, e.id AS id
ORDER BY e.last_confirmed_at DESC
LIMIT 50
