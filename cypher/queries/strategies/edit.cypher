// A person replaces a strategy's text. From now on regeneration only proposes (save.cypher).
// With $expected_version (the version the person read; null = unconditional), a strategy
// that moved on meanwhile is left as it is and reported with `applied = false` and its
// current version: never a silent overwrite. With $audit, the write carries its audit record
// `(s)-[:HAS_REVIEW]->(:Review {action: 'edit'})` in the same statement, as episode reviews do.
// Returns no row when there is no stored strategy under the key.
// $key: STRING, $markdown: STRING, $editor: STRING, $expected_version: INTEGER or null,
// $audit: BOOLEAN, $at: DATETIME, $changes_json: STRING
MATCH (s:Strategy {key: $key})
WHERE s.markdown IS NOT NULL
SET s._lock = true
WITH s, ($expected_version IS NULL OR coalesce(s.version, 0) = $expected_version) AS applied
FOREACH (_ IN CASE WHEN applied THEN [1] ELSE [] END |
  SET s.markdown = $markdown,
      s.edited_by = $editor,
      s.edited_at = datetime(),
      s.version = coalesce(s.version, 0) + 1)
FOREACH (_ IN CASE WHEN applied AND $audit THEN [1] ELSE [] END |
  CREATE (s)-[:HAS_REVIEW]->(:Review {at: $at, by: $editor, action: 'edit',
                                      changes_json: $changes_json, version: s.version}))
REMOVE s._lock
RETURN s.version AS version, applied
