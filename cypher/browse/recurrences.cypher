// Recurrence links of an org, newest detection first: which conversation repeated which older
// incident, how sure the recognition decision was, and whether a person confirmed it
// (`by = 'recognition'` = linked automatically by the worker). A link with an end a person
// marked wrong (`episode_verdict` or `recurs_verdict` = 'wrong') is in no chain search or the
// hub shows. Switch to the graph view and return `n, r, o` instead to see the chains.
:param org => 'acme';
MATCH (n:Episode {org: $org})-[r:RECURRENCE_OF]->(o:Episode)
RETURN r.detected_at AS detected_at, n.team AS team, n.id AS episode,
       n.issue_type AS issue_type, o.id AS recurs, o.created_at AS first_seen_at,
       r.confidence AS confidence, r.by AS by, r.confirmed_by AS confirmed_by,
       n.verdict AS episode_verdict, o.verdict AS recurs_verdict
ORDER BY r.detected_at DESC
LIMIT 100
