// The latest episodes of one team, newest update first, with a person's verdict (`wrong`:
// search shows it as disproved, its old cause moved to ruled_out). Paste into Neo4j Browser;
// edit the :param lines first.
:param org => 'acme';
:param team => 'checkout';
MATCH (e:Episode {org: $org, team: $team})
RETURN e.updated_at AS updated_at, e.correlation_id AS conversation, e.issue_type AS issue_type,
       e.summary AS summary, e.resolved AS resolved, e.extraction_status AS status,
       e.turn_count AS turns, e.verdict AS verdict, e.verdict_note AS verdict_note, e.id AS id
ORDER BY e.updated_at DESC
LIMIT 25
