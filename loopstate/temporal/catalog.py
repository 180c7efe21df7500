"""The agents and flows a worker process serves, by name, and the runs below them by address.

Temporal builds workflow objects from their class, with nothing but the run's input, so the
workflows and the activities find what they serve here: `agent_worker` fills it, the workflows
read it (loopstate passes through the sandbox, so both see this one dict). Only the agent's
(or flow's) tools, models, instructions and limits are used; its store, hooks and approver are
not (the workflow is the store, decisions arrive by Update or Signal).

An address names a run's definition from a served one down: `docs` (served), `docs/research`
(the sub-agent `docs` calls as its tool `research`), `coaching/review` (the agent of the flow
`coaching`'s agent phase `review`), `coaching/intake` (the flow's model phase `intake`: its
model and tools, for the activities). A child is its definition as its parent runs it
(`under_parent`: the stricter gates, auto-approval only if the parent's), so a child workflow
gates exactly as the in-process child run does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopstate.engine.errors import DefinitionError
from loopstate.engine.model import Model
from loopstate.engine.stores.memory import MemoryStore
from loopstate.engine.tool import Tool
from loopstate.machines.agent.agent import Agent
from loopstate.machines.agent.delegation import AgentTool, ChildScope, under_parent
from loopstate.machines.flows.flow import Flow
from loopstate.machines.flows.phase import BoundPhase
from loopstate.machines.flows.result import FlowDeps

_SERVED: dict[str, Agent | Flow] = {}
_RESOLVED: dict[str, Agent | Flow | Phase] = {}


@dataclass(frozen=True)
class Phase:
    """A flow's model phase, as its activities run it."""

    flow: Flow
    bound: BoundPhase


@dataclass(frozen=True)
class Effects:
    """What an activity runs with at an address: the model, the tools, where and with what."""

    model: Model | None
    tools: Mapping[str, Tool]
    deps: Any
    workspace: Path | None
    phase: bool = False
    """A flow's model phase: its tools' `deps` are a `FlowDeps` over the data the call carries."""
    auto_approve: bool = False
    """Gated calls are approved as they are made (the run's `auto_approve`)."""
    deadline: tuple[float | None, Any] = (None, None)
    """The run-wide default deadline of a gated call (`decide_within`, `on_expiry`)."""

    def deps_for(self, data: dict[str, Any] | None) -> Any:
        return FlowDeps(data=data or {}, user=self.deps) if self.phase else self.deps


def serve(runs: Mapping[str, Agent | Flow]) -> None:
    """Make `runs` (agents and flows) available, by name, to this process's workflows."""
    for name, run in runs.items():
        if not isinstance(run, Agent | Flow):
            raise DefinitionError(f"{name!r} is not an Agent or a Flow: {type(run).__name__}")
        if not name or "/" in name:
            raise DefinitionError(f"{name!r}: a served name is not empty and has no '/'")
        _SERVED[name] = run
    _RESOLVED.clear()


def served(address: str) -> Agent:
    """The agent at `address`; `DefinitionError` if this process serves none there."""
    found = resolve(address)
    if isinstance(found, Flow):
        raise DefinitionError(
            f"{address!r} is a flow, not an agent: start it as a flow "
            "(TemporalRuns.start_flow, loopstate temporal start --flow)"
        )
    if not isinstance(found, Agent):
        raise DefinitionError(f"{address!r} is a flow's model phase, not an agent")
    return found


def served_flow(name: str) -> Flow:
    """The flow served as `name`; `DefinitionError` if this process serves none."""
    found = resolve(name)
    if not isinstance(found, Flow):
        raise DefinitionError(f"{name!r} is an agent, not a flow: start it as an agent")
    return found


def effects(address: str) -> Effects:
    """What the activities of the run (or flow phase) at `address` run with."""
    found = resolve(address)
    if isinstance(found, Agent):
        o = found.options
        tools = {t.name: t for t in found.tools}
        return Effects(found.model, tools, o.deps, o.workspace, False, o.auto_approve, o.deadline)
    if isinstance(found, Phase):
        o, bound = found.flow.options, found.bound
        return Effects(
            bound.model, bound.tools, o.deps, o.workspace, True, o.auto_approve, o.deadline
        )
    raise DefinitionError(f"{address!r} is a flow: its phases run its effects")


def resolve(address: str) -> Agent | Flow | Phase:
    """The definition at `address` (computed once per process)."""
    found = _RESOLVED.get(address)
    if found is None:
        found = _RESOLVED[address] = _walk(address)
    return found


def _walk(address: str) -> Agent | Flow | Phase:
    root, *path = address.split("/")
    try:
        node: Agent | Flow | Phase = _SERVED[root]
    except KeyError:
        known = ", ".join(sorted(_SERVED)) or "none"
        raise DefinitionError(
            f"this worker serves no agent {root!r} nor a flow of that name (it serves: {known})"
        ) from None
    for name in path:
        node = _below(node, name, address)
    return node


def _below(node: Agent | Flow | Phase, name: str, address: str) -> Agent | Phase:
    """The child definition `name` of `node`: a flow's phase, or a sub-agent tool's agent."""
    if isinstance(node, Flow):
        bound = node.phases.get(name)
        if bound is None:
            raise DefinitionError(f"{address!r}: the flow has no phase {name!r}")
        if bound.agent is None:
            return Phase(node, bound)
        return _child(bound.agent, node.options.auto_approve, {})
    tools = {t.name: t for t in node.tools} if isinstance(node, Agent) else node.bound.tools
    tool = tools.get(name)
    if not isinstance(tool, AgentTool) or tool.agent is None:
        raise DefinitionError(f"{address!r}: no sub-agent tool {name!r} there")
    auto = node.options.auto_approve if isinstance(node, Agent) else node.flow.options.auto_approve
    gates = {**tool.inherited_gates}
    gates.update({n: t for n, t in tools.items() if t.needs_approval is not False})
    return _child(tool.agent, auto, gates)


def _child(agent: Agent, auto_approve: bool, gates: Mapping[str, Tool]) -> Agent:
    """`agent` as its parent runs it (the store is unused: the workflow is the store)."""
    scope = ChildScope(store=MemoryStore(), approver=None, auto_approve=auto_approve, gates=gates)
    return under_parent(agent, scope)
