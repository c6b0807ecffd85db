// The ids of an org's episodes a person deleted: the audit records `review/delete.cypher`
// leaves (`Review {action: 'delete'}`, kept without their episode). `deja import` does not
// bring those back when it re-reads a file that still holds their records.
// $org: STRING
MATCH (r:Review {action: 'delete', org: $org})
RETURN collect(DISTINCT r.episode_id) AS ids
