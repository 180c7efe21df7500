"""State machines: the agent loop, flows, and the shipped example flows."""

from loopstate.machines.agent_loop import AgentLoop
from loopstate.machines.coaching import CoachingFlow

SHIPPED: dict[str, type] = {"agent": AgentLoop, "coaching": CoachingFlow}
"""Every machine loopstate ships, by the name the CLI and the diagrams use."""

__all__ = ["SHIPPED", "AgentLoop", "CoachingFlow"]
