"""Run-unique tool-call ids, assigned once, where a model's reply enters the run.

Providers send empty ids (Gemini's OpenAI-compatible endpoint: `""`), repeat them within a
turn or across turns, or pack kilobytes into them (Gemini 3's signature). Every later step
keys on the id (decisions, call records, events, the store, `loopstate approve RUN CALL`),
so a reply's calls get ids that are unique in the run before anything else sees them.

An id people and pages use must be safe as one segment of a URL path
(`/api/runs/{run}/calls/{call}/decision`): letters, digits, `_ . : -`, not `.` or `..`, at
most `MAX_ID_CHARS`; any other is replaced. A call the reply repeats (same id, tool and
arguments, as some providers send) is one call: kept once, run once, answered once.

Ids are derived from the run's call count (`call_7`), never from a clock or randomness, so a
replayed or re-executed workflow assigns the same ones. A call whose id was fine keeps it;
assigning again (a replayed reply) changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Container

from loopstate.engine.messages import AssistantMessage, IdReplaced, ToolCall
from loopstate.engine.model import ModelResponse

MAX_ID_CHARS = 40
"""Longer provider ids are kept for the wire, and people get a short one."""
_TYPABLE = re.compile(r"[A-Za-z0-9_.:-]+")


def assign_ids(
    message: AssistantMessage, used_ids: Container[str], next_index: int
) -> AssistantMessage:
    """`message` with every call's id unique among `used_ids` and within the turn.

    A replaced id becomes `call_<n>`, n counting from `next_index` (the run's call count + 1)
    by the call's position, skipping taken ids; the provider's id is kept on the call with
    the reason it was replaced.
    """
    if not message.tool_calls:
        return message
    taken = _Taken(used_ids)
    calls: list[ToolCall] = []
    changed = False
    for position, call in enumerate(message.tool_calls):
        if call.id and any(_same(call, earlier) for earlier in message.tool_calls[:position]):
            changed = True  # one call sent twice: run once, answered once
            continue
        reason = _problem(call.id, taken)
        if reason is None:
            calls.append(call)
        else:
            new_id = _fresh(next_index + position, taken)
            calls.append(_renamed(call, new_id, reason))
            changed = True
        taken.add(calls[-1].id)
    return message.evolve(tool_calls=tuple(calls)) if changed else message


def with_run_ids(
    response: ModelResponse, used_ids: Container[str], next_index: int
) -> ModelResponse:
    """`response` with its message's call ids made unique in the run (see `assign_ids`)."""
    message = assign_ids(response.message, used_ids, next_index)
    return response if message is response.message else response.evolve(message=message)


class _Taken:
    """The run's ids (not copied: a run's set grows with every turn) and this turn's."""

    def __init__(self, run: Container[str]) -> None:
        self.run, self.turn = run, set[str]()

    def __contains__(self, call_id: str) -> bool:
        return call_id in self.turn or call_id in self.run

    def add(self, call_id: str) -> None:
        self.turn.add(call_id)


def _problem(call_id: str, taken: _Taken) -> IdReplaced | None:
    if not call_id:
        return "empty"
    if call_id in taken:
        return "repeated"
    if len(call_id) > MAX_ID_CHARS or not _TYPABLE.fullmatch(call_id) or not call_id.strip("."):
        return "unwieldy"  # also `.` and `..`: a path segment that is no segment
    return None


def _same(call: ToolCall, earlier: ToolCall) -> bool:
    """The same call repeated in one reply: same id, tool and arguments."""
    return (call.id, call.name, call.function.arguments) == (
        earlier.id,
        earlier.name,
        earlier.function.arguments,
    )


def _fresh(index: int, taken: _Taken) -> str:
    while f"call_{index}" in taken:
        index += 1
    return f"call_{index}"


def _renamed(call: ToolCall, new_id: str, reason: IdReplaced) -> ToolCall:
    # A call renamed before (a replayed reply) keeps the provider's original id.
    original = call.provider_id if call.provider_id is not None else call.id
    return call.evolve(id=new_id, provider_id=original, id_replaced=reason)
