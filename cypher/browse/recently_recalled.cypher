// The episodes memory-search returned most recently (`last_recalled_at`, stamped after each
// answer): what agents are leaning on right now, with their verdict if a person gave one.
:param org => 'acme';
MATCH (e:Episode {org: $org})
WHERE e.last_recalled_at IS NOT NULL
RETURN e.last_recalled_at AS recalled_at, e.team AS team, e.id AS id,
       e.issue_type AS issue_type, e.root_cause AS root_cause, e.verdict AS verdict
ORDER BY e.last_recalled_at DESC
LIMIT 50
