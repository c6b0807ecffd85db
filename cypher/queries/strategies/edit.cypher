// A person replaces a strategy's text. From now on regeneration only proposes (save.cypher).
// With $expected_version (the version the person read; null = unconditional, the CLI's
// `deja strategy edit`), a strategy that moved on meanwhile is left as it is and reported
// with `applied = false` and its current version: never a silent overwrite.
// Returns no row when there is no stored strategy under the key.
// $key: STRING, $markdown: STRING, $editor: STRING, $expected_version: INTEGER or null
MATCH (s:Strategy {key: $key})
WHERE s.markdown IS NOT NULL
SET s._lock = true
WITH s, ($expected_version IS NULL OR coalesce(s.version, 0) = $expected_version) AS applied
FOREACH (_ IN CASE WHEN applied THEN [1] ELSE [] END |
  SET s.markdown = $markdown,
      s.edited_by = $editor,
      s.edited_at = datetime(),
      s.version = coalesce(s.version, 0) + 1)
REMOVE s._lock
RETURN s.version AS version, applied
