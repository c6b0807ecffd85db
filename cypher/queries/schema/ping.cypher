// Liveness: the cheapest round trip that proves Bolt, auth and the database all answer.
RETURN 1 AS ok
