"""What a flow's phase asks for: instructions, model, tools, tool choice, structured output.

A phase runs the agent loop (with its approvals) until the loop ends; then the flow folds the
phase's successful tool calls into the run's data and lets its machine's gates decide.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel

from loopstate.engine.approval import Gate
from loopstate.engine.errors import DefinitionError
from loopstate.engine.model import Model, ToolChoice
from loopstate.engine.options import StopCondition
from loopstate.engine.state import CallRecord, RunState
from loopstate.engine.tool import Tool, ToolContext, Toolset

if TYPE_CHECKING:
    from loopstate.machines.agent.agent import Agent

FlowData = dict[str, Any]
"""What a flow has collected so far: JSON values by key."""

Instructions = str | Callable[[FlowData], str]
"""A callable over the data, or a `str.format` template over it (`"Goal: {goal}"`); a key
not yet collected renders as `(unknown: key)`. Nothing is evaluated."""

Update = Callable[[FlowData, dict[str, Any]], FlowData]
"""Folds one successful call of a tool (its executed arguments) into the data: returns the new
data and leaves its input unchanged."""

DataStep = Callable[[FlowData], FlowData]


M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Output(Generic[M]):
    """A structured output the phase must produce: the model submits it by calling `tool`,
    whose parameters are `model`'s schema. Arguments that do not validate go back to the model
    with the validation error, up to `attempts` times; then the run fails, saying why."""

    model: type[M]
    tool: str | None = None
    """Default: `submit_<phase>`."""
    key: str | None = None
    """Where the validated output lands in the data (JSON). Default: the phase's name."""
    needs_approval: bool | Callable[[M, ToolContext[Any]], bool | Gate] = False
    """Whether a submission waits for a decision: always, never, or as a predicate over the
    submitted output (typed: `M`) and the call's context decides (`ctx.deps` is `FlowDeps`:
    the data so far), e.g. only when the safety check flagged something."""
    attempts: int = 3
    description: str | None = None


@dataclass(frozen=True)
class Phase:
    """One phase of a flow. A phase with an `action` is code only: no model is called."""

    instructions: Instructions = ""
    tools: Sequence[Tool] = ()
    model: str | Model | None = None
    """Overridden by the flow's `models[name]`; falls back to `models["default"]`."""
    tool_choice: ToolChoice = "auto"
    output: type[BaseModel] | Output[Any] | None = None
    stop_when: Sequence[StopCondition] = ()
    waits_for_user: bool = False
    """When the loop ends and no gate opens, wait (durably) for the user's next message."""
    updates: Mapping[str, Update] = field(default_factory=dict)
    """Tool name → how a successful call of it changes the data."""
    on_enter: DataStep | None = None
    action: DataStep | None = None
    max_steps: int = 10
    """Model calls per turn of the phase (a turn ends when the loop ends)."""
    agent: Agent | None = None
    """An agent phase: `agent` runs `task` as a child run of the flow's run, in its store,
    with its own model, instructions and tools only (nothing of the flow's is inherited, and
    no `instructions`, `tools` or `model` of the phase). Its gated calls go to the flow's
    approver; if one is left undecided the flow suspends with it. With an `output`, the agent
    must submit it (a `submit_<phase>` tool is added to its own); without one, its answer
    lands in the data as text. A child that fails fails the flow."""
    task: Instructions = ""
    """An agent phase's task for its agent: a callable over the data or a template over it."""


@dataclass(frozen=True)
class BoundPhase:
    """A phase with its name, its model resolved and its output tool built."""

    name: str
    spec: Phase
    model: Model | None
    tools: Mapping[str, Tool]
    stop_when: tuple[StopCondition, ...]
    tool_choice: ToolChoice
    output: Output[Any] | None
    output_tool: str | None
    output_key: str | None
    agent: Agent | None = None
    """An agent phase's agent, with the output tool and the stops that end it once it has
    submitted the output."""

    @staticmethod
    def build(name: str, spec: Phase, model: Model | None) -> BoundPhase:
        if spec.agent is not None:
            return _agent_phase(name, spec)
        if spec.action is None and model is None:
            raise DefinitionError(f"phase {name!r} has no model (give it one, or models=)")
        model = model if spec.action is None else None  # a code phase calls no model
        if any(isinstance(t, Toolset) for t in spec.tools):
            raise DefinitionError(
                f"phase {name!r}: a toolset (e.g. an MCP server) is listed when a run starts; "
                "give it to an agent phase's Agent(tools=...) instead"
            )
        tools = {t.name: t for t in spec.tools}
        stops = tuple(spec.stop_when)
        output = Output(spec.output) if isinstance(spec.output, type) else spec.output
        tool_name = key = None
        choice = spec.tool_choice
        if output is not None:
            if output.attempts < 1:
                raise DefinitionError(f"phase {name!r}: output attempts must be at least 1")
            tool_name, key = output.tool or f"submit_{name}", output.key or name
            if tool_name in tools:
                raise DefinitionError(f"phase {name!r}: two tools are named {tool_name!r}")
            tools[tool_name] = output_tool(tool_name, output)
            stops = (has_tool_call(tool_name), _attempts_spent(tool_name, output.attempts), *stops)
            choice = "required"
        unknown = set(spec.updates) - set(tools)
        if unknown:
            raise DefinitionError(f"phase {name!r}: updates for tools it lacks: {sorted(unknown)}")
        return BoundPhase(name, spec, model, tools, stops, choice, output, tool_name, key)

    def instructions(self, data: FlowData) -> str:
        return render(self.spec.instructions, data)

    def task(self, data: FlowData) -> str:
        """An agent phase's task, rendered over the data."""
        return render(self.spec.task, data)


def render(template: Instructions, data: FlowData) -> str:
    return template(data) if callable(template) else template.format_map(_Known(data))


_AGENT_PHASE_TAKES_NOTHING_OF = ("instructions", "tools", "model", "updates", "action")


def _agent_phase(name: str, spec: Phase) -> BoundPhase:
    """An agent phase bound: its agent given the output tool and stops."""
    agent = spec.agent
    assert agent is not None
    given = [f for f in _AGENT_PHASE_TAKES_NOTHING_OF if getattr(spec, f)]
    if given:
        raise DefinitionError(
            f"phase {name!r} runs agent and takes its {', '.join(given)} from it: "
            "set them on the Agent"
        )
    if spec.waits_for_user:
        raise DefinitionError(f"phase {name!r} runs an agent: it cannot wait for the user")
    if not spec.task:
        raise DefinitionError(f"phase {name!r} runs an agent: give it a task= (the prompt)")
    output = Output(spec.output) if isinstance(spec.output, type) else spec.output
    tool_name = key = None
    if output is not None:
        if output.attempts < 1:
            raise DefinitionError(f"phase {name!r}: output attempts must be at least 1")
        tool_name, key = output.tool or f"submit_{name}", output.key or name
        if tool_name in {t.name for t in agent.tools}:
            raise DefinitionError(f"phase {name!r}: its agent has a tool named {tool_name!r}")
        stops = (has_tool_call(tool_name), _attempts_spent(tool_name, output.attempts))
        agent = agent.clone(
            tools=(*agent.tools, output_tool(tool_name, output)),
            stop_when=(*stops, *agent.stop_when),
            tool_choice="required",
        )
    key = key or name
    return BoundPhase(name, spec, None, {}, (), "auto", output, tool_name, key, agent)


class _Known(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return f"(unknown: {key})"


def output_tool(name: str, output: Output[Any]) -> Tool:
    """The tool through which a model submits a phase's structured output."""
    doc = output.description or (output.model.__doc__ or "").strip()
    title = output.model.__name__

    def accept(**_: Any) -> str:
        return f"{title} accepted."

    return Tool(
        name=name,
        description=f"Submit the {title}. {doc}".strip(),
        args_model=output.model,
        fn=accept,
        needs_approval=output.needs_approval,
    )


def has_tool_call(name: str) -> StopCondition:
    """Stop the loop once a call of `name` has run successfully in the latest batch."""

    def condition(state: RunState) -> str | None:
        ran = any(c.tool == name and c.status == "succeeded" for c in state.batch)
        return f"has_tool_call({name})" if ran else None

    return condition


def step_count_is(n: int) -> StopCondition:
    """Stop the loop once `n` model calls were made in the current phase (in an agent run,
    in the run)."""

    def condition(state: RunState) -> str | None:
        entered = state.flow.phase_step if state.flow is not None else 0
        return f"step_count_is({n})" if state.steps - entered >= n else None

    return condition


def _attempts_spent(tool: str, limit: int) -> StopCondition:
    def condition(state: RunState) -> str | None:
        turn = this_turn(state)
        bad = sum(c.tool == tool and c.status in ("invalid", "failed") for c in turn)
        return f"output_invalid({tool}, {bad})" if bad >= limit else None

    return condition


def this_turn(state: RunState) -> tuple[CallRecord, ...]:
    """The calls of the phase's current turn (not yet folded into the data)."""
    return state.calls[state.flow.folded_calls if state.flow is not None else 0 :]


def last_error(state: RunState, tool: str) -> str:
    """The latest reason a call of `tool` in this turn did not validate."""
    turn = this_turn(state)
    bad = [c for c in turn if c.tool == tool and c.status in ("invalid", "failed")]
    return (bad[-1].reason or bad[-1].result or "") if bad else ""
