// `deja vocab merge --kind issue-type`: every episode of the org with issue type $from gets
// $into. The version bump makes a worker that read the episode before retry its write.
// $org: STRING, $from: STRING, $into: STRING
MATCH (e:Episode {org: $org, issue_type: $from})
SET e.issue_type = $into, e.version = e.version + 1
RETURN count(e) AS episodes
