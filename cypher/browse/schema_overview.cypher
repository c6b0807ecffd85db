// Every index and constraint-backing index with its state (all should be ONLINE) and options
// (the vector index — episode_embedding, or episode_embedding_scoped on a server with filtered
// vector search, migration 009 — shows its dimensions and similarity function).
SHOW INDEXES
YIELD name, type, entityType, labelsOrTypes, properties, state, populationPercent, options
RETURN name, type, entityType, labelsOrTypes, properties, state, populationPercent,
       options.indexConfig AS config
ORDER BY name
