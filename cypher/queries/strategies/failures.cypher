// The strategies of an org (or one team, and the org-wide ones) whose last synthesis failed
// and none succeeded since (release_claim.cypher records the failure, save.cypher clears it):
// a source set with no strategy yet (a node that is only the record), or a stored strategy
// whose refresh failed and which is still served. Newest failure first. `asked_again_at`: when
// a search claimed its synthesis again since it failed (its sources changed, or the cool-down
// ended), while that job has not finished; null otherwise.
// With $team, that team's and (when $org_wide) the org-wide ones, as list.cypher.
// $org: STRING, $team: STRING or null, $org_wide: BOOLEAN, $limit: INTEGER
MATCH (s:Strategy {org: $org})
WHERE s.failed_at IS NOT NULL
  AND ($team IS NULL OR s.team = $team OR ($org_wide AND s.team = '*'))
RETURN {team: s.team, issue_type: s.issue_type, component_type: s.component_type,
        component_name: s.component_name, failed_at: s.failed_at,
        reason: coalesce(s.failed_reason, ''), has_strategy: s.markdown IS NOT NULL,
        asked_again_at: CASE WHEN s.claimed_at > s.failed_at THEN s.claimed_at END} AS failure
ORDER BY s.failed_at DESC, s.key
LIMIT $limit
