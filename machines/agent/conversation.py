"""Conversations: a run that answered goes on with the user's next message.

    done ──user_message──▶ thinking        the message is appended, the audit trail goes on
    awaiting_approval + decisions + message → the message joins the history after the
                                              batch's results, before the next model call

The step budget (`max_steps`) counts from the turn's first model call, so a long conversation
is never cut short by the steps of its earlier turns.
"""

from __future__ import annotations

from loopstate.engine.errors import RunNotResumable
from loopstate.engine.messages import Message, UserMessage
from loopstate.engine.sanitize import storable_text
from loopstate.engine.state import RunState
from loopstate.machines.agent.loop import AgentLoop


def check_message(state: RunState, message: str | None, *, decided: bool) -> None:
    """Refuse (`RunNotResumable`, one line) a message the run cannot take, or a run that
    answered resumed without one."""
    run, where = state.run_id, state.state
    if message is None:
        if where == AgentLoop.done.id:
            raise RunNotResumable(
                f"run {run} has answered; continue the conversation with message=..."
            )
        return
    if not message.strip():
        raise RunNotResumable(f"run {run}: the message is empty; say something")
    if where == AgentLoop.awaiting_approval.id and not decided:
        raise RunNotResumable(
            f"run {run} is awaiting approval: a message may only accompany decisions"
        )
    if where not in (AgentLoop.done.id, AgentLoop.awaiting_approval.id):
        raise RunNotResumable(
            f"run {run} is {state.status} ({where}): a message continues a run that answered "
            "or accompanies decisions"
        )


def turn_start(state: RunState) -> int:
    """The run's `steps` when the current turn began: one model call per assistant message
    since the user's last message."""
    replies = 0
    for message in reversed(state.messages):
        if message.role == "user":
            break
        replies += message.role == "assistant"
    return state.steps - replies


def queued_message(state: RunState) -> tuple[Message, ...]:
    """The user message that came with decisions, as history (none if there is none)."""
    if state.queued_message is None:
        return ()
    return (UserMessage(content=state.queued_message),)


def with_message(state: RunState, message: str) -> RunState:
    """`state` holding the user's message until the batch's results are in."""
    return state.evolve(queued_message=storable_text(message))


def user_turn(state: RunState, message: str) -> RunState:
    """`state` with the user's next message appended and the last answer cleared (the
    transition is sent by the caller, with the machine)."""
    return state.evolve(
        messages=(*state.messages, UserMessage(content=storable_text(message))),
        output=None,
        stop_reason=None,
    )
