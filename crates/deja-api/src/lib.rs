//! memory-search: the search service, its HTTP API and MCP server.
