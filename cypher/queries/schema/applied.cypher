// The migration versions already recorded.
MATCH (m:SchemaMigration)
RETURN m.version AS version
ORDER BY version
