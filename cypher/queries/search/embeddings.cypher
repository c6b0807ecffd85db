// The stored embeddings of a few episodes of one org (recognition's family order compares
// the leads of one answer with each other: deja_domain::recognition::FamilyOrder). Ids of
// another org, or without an embedding, are left out.
// $org: STRING, $ids: LIST<STRING>
MATCH (e:Episode)
WHERE e.id IN $ids AND e.org = $org AND e.embedding IS NOT NULL
RETURN e.id AS id, e.embedding AS embedding
