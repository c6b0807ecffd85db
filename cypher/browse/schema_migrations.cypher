// Which schema migrations (cypher/schema/NNN_name.cypher) have been applied, and when.
MATCH (m:SchemaMigration)
RETURN m.version AS version, m.name AS name, m.applied_at AS applied_at
ORDER BY m.version
