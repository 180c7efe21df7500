"""State machines: the agent loop, flows, and the shipped example flows."""

from loopstate.machines.agent_loop import AgentLoop

SHIPPED: dict[str, type] = {"agent": AgentLoop}
"""Every machine loopstate ships, by the name the CLI and the diagrams use."""

__all__ = ["SHIPPED", "AgentLoop"]
