"""`replay`: run an agent against a cassette and check it does what was recorded.

The recording machinery (cassettes, the replay model, flows) is imported when a replay starts,
not with this module: `import loopstate` imports this module for its `replay` (see
`loopstate/__init__.py`), and most programs never replay."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from pydantic import TypeAdapter

from loopstate.engine.errors import DefinitionError
from loopstate.engine.messages import Message, SystemMessage
from loopstate.engine.result import RunResult
from loopstate.engine.stores.memory import MemoryStore
from loopstate.engine.sync import blocking
from loopstate.machines.agent import Agent

if TYPE_CHECKING:
    from loopstate.engine.recording.cassette import Cassette
    from loopstate.engine.recording.replay import ReplayModel
    from loopstate.machines.flows import Flow, FlowResult
    from loopstate.replay_from import Departure


@overload
async def replay(
    cassette: Cassette | str | Path,
    agent: Agent | None = None,
    *,
    prompt: str | Sequence[Message] | None = None,
    live_tools: bool = False,
    live_approver: bool = False,
    from_step: None = None,
) -> RunResult: ...


@overload
async def replay(
    cassette: Cassette | str | Path,
    agent: Agent,
    *,
    prompt: str | Sequence[Message] | None = None,
    live_tools: bool = False,
    live_approver: bool = False,
    from_step: int,
) -> Departure: ...


async def replay(
    cassette: Cassette | str | Path,
    agent: Agent | None = None,
    *,
    prompt: str | Sequence[Message] | None = None,
    live_tools: bool = False,
    live_approver: bool = False,
    from_step: int | None = None,
) -> RunResult | Departure:
    """Replay `cassette` with no network: recorded model turns, recorded tool results (or the
    agent's real tools with `live_tools=True`), recorded decisions (or the agent's own
    approver with `live_approver=True`, so a changed approval policy is tested: a different
    decision diverges). Raises `ReplayDivergence` at the first request, transition or outcome
    that differs from the recording.

    Without an `agent`, the run is rebuilt from the cassette alone (its recorded tool schemas
    and instructions); with one, its instructions, tools and machine are checked against it.
    `prompt` (default: the recorded one) is what the run starts from, so a test that changes
    its prompt diverges at step 1.

    Sub-agents (`Agent.as_tool`) of a recorded `agent` replay too: each child run from its
    own cassette next to `cassette` (given as a path), recorded by the parent's `Recorder`.

    `from_step=N` serves only the recording's first N model turns and their tool results,
    then `agent` goes on live (its model, tools, approver) and the `Departure` returned says
    where the new run leaves the recording (see `loopstate.replay_from`).
    """
    from loopstate.engine.recording.cassette import Cassette
    from loopstate.engine.recording.replay import ReplayDivergence, ReplayModel, load
    from loopstate.replay_children import ChildReplays
    from loopstate.replay_from import replay_from

    tape = load(cassette)
    children = ChildReplays(None if isinstance(cassette, Cassette) else Path(cassette), live_tools)
    model = ReplayModel(tape)
    turns = tape.model_turns()
    if not turns:
        raise ReplayDivergence(0, "the cassette has no model turns")
    opening: str | Sequence[Message] = (
        prompt
        if prompt is not None
        else _opening(turns[min(turns)]["request"]["messages"], keep_system=agent is None)
    )
    if from_step is not None:
        if agent is None:
            raise DefinitionError("replay(from_step=...) needs the agent that goes on live")
        return await replay_from(tape, agent, from_step, opening)
    base = agent or Agent(model)
    real = list(base.tools) if agent is not None else None
    outcome = tape.outcome() or {}
    runs = tape.of_kind("run")
    run_id = runs[0]["run_id"] if runs else "replay"
    replaying = base.clone(
        model=model,
        tools=children.tools(tape, real, children.path),
        ids=lambda: run_id,  # the recorded id: tools that use it see what they saw
        approver=_approver(tape, base, live_approver, children.tapes()),
        store=MemoryStore(),
        hooks=None,
        auto_approve=False,
        max_steps=len(turns) if outcome.get("stop_reason") == "max_steps" else 10**6,
    )
    result = await replaying.run(opening)
    _raise_divergence(model)
    if (child := children.divergence()) is not None:
        raise child.with_traceback(None) from None
    _check(tape, result)
    return result


def _approver(
    tape: Cassette, target: Agent | Flow, live: bool, children: Sequence[Cassette] = ()
) -> Any:
    """The recorded decisions (the sub-agents' too), or with `live` the target's own approver
    (None: suspend)."""
    from loopstate.engine.recording.replay import recorded_approver

    return target._options["approver"] if live else recorded_approver(tape, *children)


def _raise_divergence(model: ReplayModel) -> None:
    """Raise the divergence the model met, without the engine's frames between the model
    and here: the diff is what a person needs, not forty lines of driver internals."""
    if model.divergence is not None:
        raise model.divergence.with_traceback(None) from None


def replay_sync(
    cassette: Cassette | str | Path,
    agent: Agent | None = None,
    *,
    prompt: str | Sequence[Message] | None = None,
    live_tools: bool = False,
    live_approver: bool = False,
) -> RunResult:
    """`replay` for code that is not async (a plain test function). Inside a running event
    loop it raises `RuntimeError`: `await replay(...)` there instead."""
    coroutine = replay(
        cassette, agent, prompt=prompt, live_tools=live_tools, live_approver=live_approver
    )
    return blocking(coroutine, instead="replay(...)")


@cache
def _messages() -> TypeAdapter[list[Message]]:
    return TypeAdapter(list[Message])


def _opening(messages: list[dict[str, Any]], *, keep_system: bool) -> list[Message]:
    parsed = _messages().validate_python(messages)
    return [m for m in parsed if keep_system or not isinstance(m, SystemMessage)]


def _check(tape: Cassette, result: RunResult) -> None:
    from loopstate.engine.recording.replay import ReplayDivergence

    recorded = [(t["source"], t["target"], t["event"]) for t in tape.of_kind("transition")]
    replayed = [(t.source, t.target, t.event) for t in result.transitions]
    if recorded and recorded != replayed:
        raise ReplayDivergence(result.steps, "the transitions differ", recorded, replayed)
    outcome = tape.outcome()
    if outcome is not None:
        expected = {k: outcome.get(k) for k in ("status", "output", "stop_reason")}
        actual = {"status": result.status, "output": result.output,
                  "stop_reason": result.stop_reason}  # fmt: skip
        if expected != actual:
            raise ReplayDivergence(result.steps, "the outcome differs", expected, actual)


async def replay_flow(
    cassette: Cassette | str | Path, flow: Flow, *, live_approver: bool = False
) -> FlowResult:
    """Replay a recorded flow run (every phase, every user turn) with no network and no side
    effects; raises `ReplayDivergence` where this flow asks for something else.
    `live_approver=True` decides with the flow's own approver instead of the recording."""
    from loopstate.engine.recording.replay import (
        ReplayDivergence,
        ReplayModel,
        load,
        stand_in_tools,
    )

    tape = load(cassette)
    model = ReplayModel(tape)
    turns = tape.model_turns()
    if not turns:
        raise ReplayDivergence(0, "the cassette has no model turns")
    specs = {name: bound.spec for name, bound in flow.phases.items()}
    real = [t for spec in specs.values() for t in spec.tools]
    stand_ins = {t.name: t for t in stand_in_tools(tape, list({t.name: t for t in real}.values()))}
    phases = {
        name: replace(spec, tools=[stand_ins[t.name] for t in spec.tools], model=None)
        for name, spec in specs.items()
    }
    runs = tape.of_kind("run")
    run_id = runs[0]["run_id"] if runs else "replay"
    replaying = flow.clone(
        phases=phases,
        models={name: model for name, b in flow.phases.items() if b.model is not None},
        approver=_approver(tape, flow, live_approver),
        store=MemoryStore(),
        hooks=None,
        auto_approve=False,
        ids=lambda: run_id,
    )
    said = [m["content"] for m in turns[max(turns)]["request"]["messages"] if m["role"] == "user"]
    result = await replaying.run(said[0])
    for message in said[1:]:
        if result.status != "awaiting_input":
            break
        result = await replaying.resume(result.run_id, message=message)
    _raise_divergence(model)
    _check(tape, result)
    return result
