"""A flow run as `RunProtocol` starts and resumes it (`FlowKind`): what a resume must find,
where the given message or decisions go, how a new run says its first phase."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import TYPE_CHECKING

from loopstate.engine.approval import Decision
from loopstate.engine.clock import Clock
from loopstate.engine.compat import Pin
from loopstate.engine.core import RunCore
from loopstate.engine.errors import RunNotResumable, UnknownCall
from loopstate.engine.events import PhaseChanged
from loopstate.engine.operations import queue_routed, route_decisions
from loopstate.engine.protocol import Given
from loopstate.engine.state import RunState
from loopstate.engine.store import Store
from loopstate.machines.agent.loop import LOOP_FINAL, AgentLoop
from loopstate.machines.agent.resuming import resume_loop
from loopstate.machines.flows.children import raise_budget
from loopstate.machines.flows.driver import FlowSteps
from loopstate.machines.flows.machine import FINAL
from loopstate.machines.flows.pinned import FlowPins

if TYPE_CHECKING:
    from loopstate.machines.flows.flow import Flow

_LOOP_STATES = tuple(s.id for s in AgentLoop.states if s.id not in LOOP_FINAL and not s.initial)


class FlowKind:
    """A flow run, as `RunProtocol` starts and resumes it."""

    def __init__(self, flow: Flow, pins: FlowPins) -> None:
        self.flow = flow
        self.pins = pins

    def stepper(self, core: RunCore) -> FlowSteps:
        return FlowSteps(core, self.flow._config)

    def check(self, state: RunState, given: Given) -> None:
        flow = self.flow
        _check_resumable(state, flow.name, message=given.message, decisions=given.decisions)

    def pin(self, state: RunState) -> Pin:
        """Its tools, schemas and phases against the run's (`engine/compat`)."""
        return self.pins.pin(state)

    async def route(self, steps: FlowSteps, given: Given) -> tuple[str, ...]:
        """The user's message to a phase that waits for it; decisions for an agent phase's
        calls to the runs they wait in; else the phase's loop resumes as an agent's does."""
        state, flow = steps.state, self.flow
        if given.message is not None:
            steps.user_replied(
                given.message, actor="user" if given.actor == "resume" else given.actor
            )
        elif flow.phases[state.phase or ""].agent is not None:
            if state.state == "budget_exceeded":  # its run goes on with the raised budget
                await raise_budget(steps.core, flow.store, given.actor)
            await _route(flow.store, state, given.decisions, given.actor, flow.clock)
        elif state.state in _LOOP_STATES:
            return await resume_loop(steps.loop, given)
        return ()

    def position(self, state: RunState) -> str:
        return f"{state.phase}:{state.state}"

    def session(self) -> AbstractAsyncContextManager[None]:
        return nullcontext()

    async def begin(self, steps: FlowSteps) -> None:
        """A new run says which phase it starts in (`phase_changed` from nothing)."""
        core = steps.core
        await core.emit(PhaseChanged(**core.at(), target=self.flow.initial))


async def _route(
    store: Store,
    state: RunState,
    decisions: Mapping[str, Decision] | None,
    actor: str,
    clock: Clock,
) -> None:
    """Record decisions given to the flow for its agent phase's calls on the runs they wait in."""
    own, routed = await route_decisions(store, state, decisions)
    if own:
        raise UnknownCall(
            f"run {state.run_id} has no pending call {', '.join(own)} (its phase "
            f"{state.phase!r} runs an agent: see the result's pending)"
        )
    await queue_routed(store, routed, actor=actor, clock=clock)


def _check_resumable(
    state: RunState,
    name: str,
    *,
    message: str | None,
    decisions: Mapping[str, Decision] | None,
) -> None:
    run = state.run_id
    check_flow(state, name)
    if state.phase in FINAL:
        raise RunNotResumable(f"run {run} has ended ({state.phase}); nothing to resume")
    if decisions and state.state != "awaiting_approval":
        raise RunNotResumable(f"run {run} is {state.status}, not awaiting approval")
    waiting = state.status == "awaiting_input"
    if waiting and message is None:
        raise RunNotResumable(f"run {run} waits for the user: resume it with message=...")
    if message is not None and not waiting:
        raise RunNotResumable(f"run {run} is {state.status}, not waiting for the user's message")


def check_flow(state: RunState, name: str) -> None:
    if state.flow is None or state.machine != name:
        raise RunNotResumable(
            f"run {state.run_id} is a {state.machine!r} run, not one of flow {name!r}"
        )
