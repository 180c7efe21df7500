"""`ScriptedModel`: a model port that plays scripted turns, for tests and the offline demo."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from loopstate.engine.errors import ScriptExhausted, UnexpectedRequest
from loopstate.engine.messages import AssistantMessage, ToolCall, tool_call
from loopstate.engine.model import ModelRequest, ModelResponse, Usage
from loopstate.engine.sanitize import storable
from loopstate.engine.streaming import DeltaListener, report_reply

Expectation = Callable[[ModelRequest], bool | None]
"""Raises or returns False when a request is not what the script expects."""


@dataclass(frozen=True)
class Turn:
    """One scripted model turn and, optionally, what the request for it must satisfy."""

    reply: AssistantMessage
    expect: Expectation | None = None
    usage: Usage = field(default_factory=Usage)


def text(content: str, *, expect: Expectation | None = None) -> Turn:
    """A final answer."""
    return Turn(AssistantMessage(content=content), expect)


def call(
    name: str, arguments: dict[str, Any] | str | None = None, *, id: str | None = None
) -> ToolCall:
    """One tool call; `arguments` may be a dict or a raw (even malformed) JSON text."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    return tool_call(id or "", name, raw)


def calls(
    *tool_calls: ToolCall, content: str | None = None, expect: Expectation | None = None
) -> Turn:
    """A turn asking for one or more tool calls (a batch)."""
    return Turn(AssistantMessage(content=content, tool_calls=tuple(tool_calls)), expect)


ScriptItem = Turn | AssistantMessage | str | ToolCall
Reaction = Callable[[ModelRequest], ScriptItem]
"""A turn computed from the request, e.g. a final answer that depends on a reviewer's decision."""


class ScriptedModel:
    """Replies with the scripted turns in order; fails loudly when the script runs out or a
    request does not meet its turn's expectation.

    Items may be a `Turn`, an `AssistantMessage`, a `str` (a final answer) or a `ToolCall`
    (a turn with that single call). Calls without an id get `call_<turn>_<n>`.

    With `by_step=True` the turn is chosen by the request's step number instead of by how
    many requests this object has seen, so a run resumed in a new process continues the
    script where the run is (the demo's suspend-and-resume uses this).
    """

    def __init__(
        self,
        script: Iterable[ScriptItem | Reaction],
        *,
        name: str = "scripted",
        by_step: bool = False,
    ) -> None:
        self._turns = [
            item if callable(item) and not isinstance(item, Turn) else _as_turn(item, i + 1)
            for i, item in enumerate(script)
        ]
        self._name = name
        self._by_step = by_step
        self.requests: list[ModelRequest] = []

    @property
    def name(self) -> str:
        return self._name

    @property
    def remaining(self) -> int:
        return len(self._turns) - len(self.requests)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        index = request.step - 1 if self._by_step else len(self.requests)
        if not 0 <= index < len(self._turns):
            raise ScriptExhausted(
                f"{self._name}: the script has {len(self._turns)} turns and a request for "
                f"turn {index + 1} arrived (last message: {_last(request)})"
            )
        scripted = self._turns[index]
        turn = _as_turn(scripted(request), index + 1) if callable(scripted) else scripted
        self.requests.append(request)
        if turn.expect is not None and turn.expect(request) is False:
            raise UnexpectedRequest(
                f"{self._name}: the request for turn {index + 1} does not meet its expectation "
                f"(last message: {_last(request)})"
            )
        # a script may hold hostile text on purpose: it enters the run as a real reply would
        return storable(ModelResponse(message=turn.reply, usage=turn.usage, model=self._name))

    async def stream(self, request: ModelRequest, listener: DeltaListener) -> ModelResponse:
        """`complete`, reported as deltas first (word by word), as a provider would stream."""
        response = await self.complete(request)
        await report_reply(response.message, listener)
        return response


def _as_turn(item: ScriptItem, number: int) -> Turn:
    if isinstance(item, str):
        return text(item)
    if isinstance(item, ToolCall):
        item = calls(item)
    if isinstance(item, AssistantMessage):
        item = Turn(item)
    return _with_ids(item, number)


def _with_ids(turn: Turn, number: int) -> Turn:
    tool_calls: Sequence[ToolCall] = turn.reply.calls
    if all(c.id for c in tool_calls):
        return turn
    named = tuple(
        c if c.id else c.model_copy(update={"id": f"call_{number}_{n}"})
        for n, c in enumerate(tool_calls, 1)
    )
    return Turn(turn.reply.model_copy(update={"tool_calls": named}), turn.expect, turn.usage)


def _last(request: ModelRequest) -> str:
    if not request.messages:
        return "none"
    text_ = request.messages[-1].model_dump_json()
    return text_ if len(text_) <= 200 else text_[:200] + "…"
