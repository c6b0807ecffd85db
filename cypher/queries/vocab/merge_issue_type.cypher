// `deja vocab merge --kind issue-type`: every episode of the org with issue type $from gets
// $into. The version bump makes a worker that read the episode before retry its write. The
// issue type is part of the embedded text, so the renamed episodes' search embedding is now
// of an older text: its model is cleared, which marks it for `deja reembed` (the command
// re-embeds them right after) while the old vector keeps them searchable meanwhile.
// $org: STRING, $from: STRING, $into: STRING
// The match reads committed values without a lock: an episode a worker is rewriting meanwhile
// is locked first and its issue type read again, so a conclusion committed in between (another
// type) is not overwritten with $into. `properties(e)` reads the node as it is now, not the
// value the index seek cached.
MATCH (e:Episode {org: $org, issue_type: $from})
SET e._lock = true
REMOVE e._lock
WITH e
WHERE properties(e).issue_type = $from
SET e.issue_type = $into, e.version = e.version + 1, e.embedding_model = null
RETURN count(e) AS episodes
