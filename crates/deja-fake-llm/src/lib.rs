//! A deterministic, scriptable OpenAI-compatible chat completions server for tests and benchmarks.
