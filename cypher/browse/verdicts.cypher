// Episodes people marked wrong, with their note and the root cause they ruled out. Agents see
// the same verdict in every memory-search answer.
:param org => 'acme';
MATCH (e:Episode {org: $org})
WHERE e.verdict IS NOT NULL
RETURN e.updated_at AS updated_at, e.team AS team, e.id AS id, e.issue_type AS issue_type,
       e.verdict AS verdict, e.verdict_note AS note, e.ruled_out AS ruled_out,
       e.human_pinned AS pinned_fields
ORDER BY e.updated_at DESC
LIMIT 50
