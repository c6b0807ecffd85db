// Records one applied migration. MERGE keeps the first `applied_at` when two processes
// migrate at the same time.
// $version: INTEGER, $name: STRING
MERGE (m:SchemaMigration {version: $version})
  ON CREATE SET m.name = $name, m.applied_at = datetime()
