//! OpenAI-compatible LLM adapter: episode extraction and strategy synthesis.
