// Fields a person pinned and that a later agent turn concluded differently on: the agent's
// value waits in proposals_json beside the person's. Review them with `deja episode show`.
:param org => 'acme';
MATCH (e:Episode {org: $org})
WHERE e.proposals_json IS NOT NULL
RETURN e.updated_at AS updated_at, e.team AS team, e.id AS id, e.human_pinned AS pinned,
       e.root_cause AS root_cause, e.proposals_json AS proposals
ORDER BY e.updated_at DESC
LIMIT 50
