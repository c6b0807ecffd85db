// Placeholder until strategy storage lands: every stored strategy node, by key.
MATCH (s:Strategy)
RETURN s
ORDER BY s.key
LIMIT 25
