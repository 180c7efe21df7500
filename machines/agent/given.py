"""A run started from a given history whose last assistant turn asked for tool calls that
have no results yet: those calls are that turn's batch — gated ones wait for a decision,
ungated ones run — instead of a dangling call being sent to the model (which providers
refuse). The history is taken as it is: no model call is made for that turn."""

from __future__ import annotations

from loopstate.engine.core import Cause
from loopstate.engine.messages import AssistantMessage, Message, ToolCall, ToolMessage
from loopstate.machines.agent.loop import AgentLoop
from loopstate.machines.agent.steps import LoopSteps


def unanswered_calls(messages: tuple[Message, ...]) -> tuple[ToolCall, ...]:
    """The calls of the last message's assistant turn that no tool message after it answers
    (none unless the history ends with that turn and some of its results)."""
    answered: set[str] = set()
    for message in reversed(messages):
        if isinstance(message, ToolMessage):
            answered.add(message.tool_call_id)
        elif isinstance(message, AssistantMessage):
            return tuple(c for c in message.calls if c.id not in answered)
        else:
            return ()
    return ()


async def take_given_calls(loop: LoopSteps) -> None:
    """Start a new run whose history ends with unanswered calls at that turn's batch."""
    state = loop.state
    calls = unanswered_calls(state.messages)
    if state.state != AgentLoop.idle.id or not calls:
        return
    loop.send(None, loop.machine.start)
    records = loop.executor.prepare(calls, loop.context)
    loop.state = loop.state.evolve(calls=(*state.calls, *records), batch_start=len(state.calls))
    for record in records:
        if record.decided_by == "auto_approve":
            await loop.announce(record, "auto")
    gated = sum(r.status == "awaiting" for r in records)
    cause = Cause("the given history ends with calls that have no results", "user")
    loop.send(cause, loop.machine.replied, calls=len(records), gated=gated)
    loop.mark_running()
    await loop.core.save()
