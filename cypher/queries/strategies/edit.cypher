// A person replaces a strategy's text. From now on regeneration only proposes (save.cypher).
// Returns no row when there is no stored strategy under the key.
// $key: STRING, $markdown: STRING, $editor: STRING
MATCH (s:Strategy {key: $key})
WHERE s.markdown IS NOT NULL
SET s._lock = true
SET s.markdown = $markdown,
    s.edited_by = $editor,
    s.edited_at = datetime(),
    s.version = coalesce(s.version, 0) + 1
REMOVE s._lock
RETURN s.version AS version
