// The options of one index (its `indexConfig` carries `vector.dimensions`).
// $name: STRING
SHOW INDEXES YIELD name, options
WHERE name = $name
RETURN options
