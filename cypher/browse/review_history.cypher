// What people changed, newest first: edits, verdicts, confirmations and deletions (a deleted
// episode keeps its `Review {action: 'delete'}` record, without the episode).
:param org => 'acme';
MATCH (r:Review)
OPTIONAL MATCH (e:Episode)-[:HAS_REVIEW]->(r)
WITH r, e
WHERE e.org = $org OR r.org = $org
RETURN r.at AS at, r.by AS by, r.action AS action, coalesce(e.id, r.episode_id) AS episode,
       coalesce(e.team, r.team) AS team, r.changes_json AS changes, r.version AS version
ORDER BY r.at DESC
LIMIT 100
