// The server's kernel version (e.g. `5.26.30`, `2026.08.1`): migrations and the vector search
// path depend on what the server supports.
CALL dbms.components() YIELD name, versions
WHERE name = 'Neo4j Kernel'
RETURN versions[0] AS version
