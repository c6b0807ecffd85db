// `deja vocab merge --kind issue-type`: every episode of the org with issue type $from gets
// $into. The version bump makes a worker that read the episode before retry its write. The
// issue type is part of the embedded text, so the renamed episodes' search embedding is now
// of an older text: its model is cleared, which marks it for `deja reembed` (the command
// re-embeds them right after) while the old vector keeps them searchable meanwhile.
// $org: STRING, $from: STRING, $into: STRING
MATCH (e:Episode {org: $org, issue_type: $from})
SET e.issue_type = $into, e.version = e.version + 1, e.embedding_model = null
RETURN count(e) AS episodes
