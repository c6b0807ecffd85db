// The identity of an episode. Neo4j Community has no node keys, so (org, correlation_id) is
// stored as one composite property, `key` = EpisodeKey::composite(). `id` is derived from the
// key and is what the API hands out. SchemaMigration.version makes migration records unique.
CREATE CONSTRAINT episode_key IF NOT EXISTS FOR (e:Episode) REQUIRE e.key IS UNIQUE;
CREATE CONSTRAINT episode_id IF NOT EXISTS FOR (e:Episode) REQUIRE e.id IS UNIQUE;
CREATE CONSTRAINT schema_migration_version IF NOT EXISTS FOR (m:SchemaMigration) REQUIRE m.version IS UNIQUE;
