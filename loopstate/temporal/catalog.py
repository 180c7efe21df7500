"""The agents a worker process serves, by name.

Temporal builds workflow objects from their class, with nothing but the run's input, so the
workflow and the activities find the agent they serve here: `agent_worker` fills it, the
workflow reads it (loopstate passes through the sandbox, so both see this one dict). Only the
agent's tools, model, instructions and limits are used; its store, hooks and approver are not
(the workflow is the store, decisions arrive by Update or Signal).
"""

from __future__ import annotations

from collections.abc import Mapping

from loopstate.engine.errors import DefinitionError
from loopstate.machines.agent.agent import Agent

_SERVED: dict[str, Agent] = {}


def serve(agents: Mapping[str, Agent]) -> None:
    """Make `agents` available, by name, to the workflows and activities of this process."""
    for name, agent in agents.items():
        if not isinstance(agent, Agent):
            raise DefinitionError(f"{name!r} is not an Agent: {type(agent).__name__}")
        _SERVED[name] = agent


def served(name: str) -> Agent:
    """The agent served as `name`; `DefinitionError` if this process serves none."""
    try:
        return _SERVED[name]
    except KeyError:
        known = ", ".join(sorted(_SERVED)) or "none"
        raise DefinitionError(
            f"this worker serves no agent {name!r} (it serves: {known})"
        ) from None
