"""The agent `tests/test_service_streaming.py` serves: its model is a real model server over
HTTP (`MODEL_BASE`), and its one tool is gated, so each run waits in the inbox."""

from __future__ import annotations

import os

from loopstate import Agent, LiteLLMModel, MemoryStore, tool


@tool(needs_approval=True)
def deploy(env: str) -> str:
    """Deploy to an environment."""
    return f"deployed to {env}"


agent = Agent(
    LiteLLMModel("openai/test-model", api_base=os.environ["MODEL_BASE"], api_key="k"),
    [deploy],
    store=MemoryStore(),
)
