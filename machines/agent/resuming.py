"""The agent loop's side of the start/resume protocol (`loopstate.engine.protocol`): what an
agent run checks when it is resumed, and how it routes what a resume brings:

    a message to a run that answered → user_message, a new turn
    otherwise → recover → queued decisions → given decisions (those for calls waiting in
                child runs queued on them) → retry a failed model call, or go on from
                `budget_exceeded` once the budget allows → drive
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from loopstate.engine.compat import Pin
from loopstate.engine.core import Cause, RunCore
from loopstate.engine.errors import RunNotResumable
from loopstate.engine.messages import Message, SystemMessage, UserMessage
from loopstate.engine.operations import queue_routed, route_decisions
from loopstate.engine.outside import outside, outside_text
from loopstate.engine.protocol import Given
from loopstate.engine.state import RunState
from loopstate.machines.agent.conversation import check_message, user_turn, with_message
from loopstate.machines.agent.given import take_given_calls
from loopstate.machines.agent.loop import AgentLoop
from loopstate.machines.agent.pinned import AgentPins
from loopstate.machines.agent.steps import LoopConfig, LoopSteps

if TYPE_CHECKING:
    from collections.abc import Sequence


def opening_messages(
    instructions: str | None, prompt: str | Sequence[Message]
) -> tuple[Message, ...]:
    """An agent run's first messages: its instructions, then the prompt."""
    system: tuple[Message, ...] = (SystemMessage(content=instructions),) if instructions else ()
    if isinstance(prompt, str):
        return (*system, UserMessage(content=outside_text(prompt)))
    return (*system, *outside(tuple(prompt)))


class AgentKind:
    """An agent run, as `RunProtocol` starts and resumes it."""

    def __init__(
        self,
        instructions: str | None,
        turn: Callable[[RunState], LoopConfig],
        session: Callable[[], AbstractAsyncContextManager[None]],
        pins: AgentPins | None = None,
    ) -> None:
        self.instructions = instructions
        self.pins = pins or AgentPins(instructions)
        self.turn = turn
        """The loop's configuration (tools included) for the run's current turn."""
        self.session = session
        """The agent's toolsets held (and listed, the first time) while a run is driven."""

    def stepper(self, core: RunCore) -> LoopSteps:
        return LoopSteps(core, self.turn(core.state))

    def check(self, state: RunState, given: Given) -> None:
        check_resumable(state, given.decisions, given.message, as_child=given.as_child)

    def pin(self, state: RunState) -> Pin:
        """What the run is checked against (tools, schemas, instructions: `engine/compat`)."""
        config = self.turn(state)
        return self.pins.pin(config.tools, config.model.name)

    async def route(self, loop: LoopSteps, given: Given) -> tuple[str, ...]:
        core = loop.core
        if given.message is not None and core.state.state == AgentLoop.done.id:
            who = "user" if given.actor == "resume" else given.actor
            loop.send(Cause("the user wrote", who), loop.machine.user_message)
            core.state = user_turn(core.state, given.message)
            loop.config = self.turn(core.state)
            await core.save()
            return ()
        if given.message is not None:
            core.state = with_message(core.state, given.message)
        return await resume_loop(loop, given)

    def position(self, state: RunState) -> str:
        return state.state

    async def begin(self, loop: LoopSteps) -> None:
        await take_given_calls(loop)  # a history given with unanswered calls: its batch


async def resume_loop(loop: LoopSteps, given: Given) -> tuple[str, ...]:
    """Before a resumed loop is driven: recover, queued decisions, given decisions (those for
    calls that wait in child runs are queued on them), a failed model call retried. Returns
    the recovered call ids."""
    options, state = loop.config.options, loop.state
    decisions, routed = await route_decisions(options.store, state, given.decisions)
    recovered = await loop.prepare(decisions, given.actor)
    await queue_routed(options.store, routed, actor=given.actor, clock=options.clock)
    if state.state == AgentLoop.model_failed.id:
        await loop.retry(actor=given.actor)
    if state.state == AgentLoop.budget_exceeded.id:
        await loop.limits.raised(actor=given.actor)
    if state.state == AgentLoop.paused.id:
        await loop.pausing.unpause(actor=given.actor)
    return recovered


def check_resumable(
    state: RunState,
    decisions: Mapping[str, Any] | None,
    message: str | None,
    *,
    as_child: bool = False,
) -> None:
    run_id = state.run_id
    parent = state.parent
    if parent is not None and not as_child:
        raise RunNotResumable(
            f"run {run_id} is sub-agent {parent.name!r} of run {parent.run_id}: resume that "
            "run (decisions for this run's calls given to it are routed here)"
        )
    if state.flow is not None:
        raise RunNotResumable(f"run {run_id} is a flow's run; resume it with its Flow")
    if state.state in (AgentLoop.failed.id, AgentLoop.aborted.id):
        raise RunNotResumable(f"run {run_id} has ended ({state.state}); nothing to resume")
    if decisions and state.state == AgentLoop.done.id:
        raise RunNotResumable(
            f"run {run_id} has ended (done): no call awaits a decision; a message continues it"
        )
    if decisions and state.state != AgentLoop.awaiting_approval.id:
        raise RunNotResumable(
            f"run {run_id} is {state.state}, not awaiting approval: decisions cannot apply"
        )
    check_message(state, message, decided=bool(decisions) or bool(state.inbox))
