"""loopstate: an explicit state-machine orchestration engine for LLM agents."""
