"""The agent loop: its machine (`loop`), its steps (`steps`, `decisions`) and `Agent`."""

from loopstate.machines.agent.agent import Agent
from loopstate.machines.agent.loop import AgentLoop

__all__ = ["Agent", "AgentLoop"]
