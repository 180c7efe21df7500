"""A history's fields of a provider request (`messages`; Anthropic's `system`), made by the
config's `transform_request` (Anthropic's: `litellm_contract.anthropic_turns`) of only what the
history gained since its last call.

litellm transforms the plain messages admitted here (text and tool messages; None fields
dropped as its `validate_and_fix_openai_messages` drops them) one by one for OpenAI-compatible
providers. Anthropic's transform walks rounds (user and tool messages, then assistant ones),
each made into turns from its own messages, and strips trailing whitespace from the very last
turn only: the turns of closed rounds are kept, and a call transforms the open rounds with the
leading system messages (which make `system`). `remember` checks a shape's first request
(litellm's) against the whole history transformed here.

Each turn kept is also kept encoded (`coded`, by the `encode` of the path's templates), so a
request's body is encoded anew only for the turns the history gained (`Template.build`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from loopstate.engine.messages import Message, Origin
from loopstate.engine.models.litellm_contract import anthropic_turns
from loopstate.engine.models.wire import provider_messages

KEPT = 64
"""Histories kept (runs sharing one model at once); more, and a history is made whole again."""

_USER = frozenset({"user", "tool", "function"})
_KEYS = frozenset({"role", "content", "tool_calls", "tool_call_id", "name"} | {
    "thinking_blocks", "reasoning_content", "reasoning", "reasoning_details",
})  # fmt: skip
_SIGNED_ID = "__thought__"  # litellm's separator of a Gemini thought signature in a call id


@dataclass(frozen=True)
class _Done:
    """What was made of a history: its messages, their call ids on the wire, the wire
    messages, the leading system run's count, and the turns of the first `closed`
    conversation messages (all of them, for an OpenAI-compatible provider), with their
    encodings (`coded`, by `Histories.encode`; shorter when none was set)."""

    source: tuple[Message, ...]
    wire_ids: dict[str, str]
    wire: tuple[dict[str, Any], ...]
    lead: int
    closed: int
    turns: tuple[Any, ...]
    coded: tuple[bytes, ...]


_EMPTY = _Done((), {}, (), 0, 0, (), ())
HISTORY = ("messages", "system")  # a request's fields made here; the others are its template's


def _plain(messages: list[dict[str, Any]]) -> bool:
    for m in messages:
        if not m.keys() <= _KEYS or not isinstance(m.get("content"), str | None):
            return False
        ids = [c.get("id") or "" for c in m.get("tool_calls") or ()]
        if any(_SIGNED_ID in i for i in [*ids, m.get("tool_call_id") or ""]):
            return False
    return True


class Histories:
    """What the last `KEPT` histories of one model were made into. A run's history only
    grows: a call finds what the last call of the same history made (keyed by its first
    message's identity, checked message by message) and makes only the rest."""

    def __init__(self, config: Any, rounds: bool, litellm_params: dict[str, Any] | None = None):
        self._config = config
        self._rounds = rounds
        """Anthropic's: turns made by round, `system` of the leading system messages."""
        self._litellm_params = litellm_params or {}
        """What litellm hands `transform_request` of the model (its provider, its `api_base`)."""
        self._made: OrderedDict[int, _Done] = OrderedDict()
        self.encode: Callable[[Any], bytes] | None = None
        """How the path's templates encode one turn (set when the first is kept)."""

    def _last(self, messages: tuple[Message, ...]) -> _Done:
        last = self._made.get(id(messages[0])) if messages else None
        if last is None or len(last.source) > len(messages):
            return _EMPTY
        return last if all(a is b for a, b in zip(last.source, messages, strict=False)) else _EMPTY

    def _keep(self, done: _Done) -> None:
        if done.source:
            key = id(done.source[0])
            self._made[key] = done
            self._made.move_to_end(key)
            while len(self._made) > KEPT:
                self._made.popitem(last=False)

    def remember(self, messages: tuple[Message, ...], origin: Origin, body: dict[str, Any]) -> bool:
        """Whether `body` (litellm's) has the fields made here of `messages`."""
        made = self.fields(messages, origin, body, fresh=True)
        return made is not None and all(body.get(k) == v for k, v in made[0].items())

    def fields(
        self, messages: tuple[Message, ...], origin: Origin, body: dict[str, Any], *,
        fresh: bool = False,
    ) -> tuple[dict[str, Any], tuple[bytes, ...]] | None:  # fmt: skip
        """The history fields of a request of `messages` like `body` (its template's), and the
        encodings of its first turns; or None: not a history this makes."""
        last = _EMPTY if fresh else self._last(messages)
        wire_ids = dict(last.wire_ids)
        new = [
            {k: v for k, v in m.items() if v is not None}
            for m in provider_messages(messages[len(last.source) :], origin, wire_ids)
        ]
        if not _plain(new):
            return None
        wire = (*last.wire, *new)
        if not self._rounds:
            turns = (*last.turns, *self._transform(body, new)["messages"])
            done = _Done(messages, wire_ids, wire, 0, len(wire), turns, self._coded(last, turns))
            self._keep(done)
            return {"messages": list(turns)}, done.coded
        return self._by_round(messages, wire_ids, wire, last, body)

    def _coded(self, last: _Done, turns: tuple[Any, ...]) -> tuple[bytes, ...]:
        """The encodings of `turns`: `last`'s, and the others' made now."""
        if self.encode is None or len(last.coded) != len(last.turns):
            return ()
        return (*last.coded, *map(self.encode, turns[len(last.coded) :]))

    def _by_round(
        self, messages: tuple[Message, ...], wire_ids: dict[str, str],
        wire: tuple[dict[str, Any], ...], last: _Done, body: dict[str, Any],
    ) -> tuple[dict[str, Any], tuple[bytes, ...]] | None:  # fmt: skip
        lead = last.lead if last.source else _leading(wire)
        system, conversation = list(wire[:lead]), wire[lead:]
        if not conversation or any(m["role"] == "system" for m in conversation):
            return None
        cut = _cut(conversation, last.closed)
        turns, closed = last.turns, last.closed
        made = self._transform(body, system + list(conversation[closed:]))
        tail = made["messages"]
        if cut is not None:  # a turn per run of one side's messages: the closed rounds' lead
            ran = _runs(conversation[closed:cut])
            if len(tail) != ran + _runs(conversation[cut:]):
                return None  # turns not of runs: litellm makes this history
            turns, closed, tail = (*turns, *tail[:ran]), cut, tail[ran:]
        done = _Done(messages, wire_ids, wire, lead, closed, turns, self._coded(last, turns))
        self._keep(done)
        return {"messages": [*turns, *tail], "system": made.get("system")}, done.coded

    def _transform(self, body: dict[str, Any], messages: list[dict[str, Any]]) -> dict[str, Any]:
        model = body.get("model")
        if self._rounds:
            return anthropic_turns(self._config, model, messages)
        # The call's other parameters, as litellm hands them over (DeepSeek's `thinking` fills
        # in reasoning); not its tools, which a plain history's messages do not depend on and
        # the transform would check again at each call.
        params = {k: v for k, v in body.items() if k not in (*HISTORY, "model", "tools")}
        made: dict[str, Any] = self._config.transform_request(
            model=model, messages=messages, optional_params=params,
            litellm_params=dict(self._litellm_params), headers={},
        )  # fmt: skip
        return made


def _runs(messages: tuple[dict[str, Any], ...]) -> int:
    """The runs of one side's messages (user and tool ones, or assistant ones)."""
    sides = [m["role"] in _USER for m in messages]
    return sum(1 for i, side in enumerate(sides) if i == 0 or side != sides[i - 1])


def _leading(wire: tuple[dict[str, Any], ...]) -> int:
    return next((i for i, m in enumerate(wire) if m["role"] != "system"), len(wire))


def _cut(conversation: tuple[dict[str, Any], ...], closed: int) -> int | None:
    """Where the last round of `conversation` starts, if its rounds before can be closed: the
    texts of the assistant run before it end without whitespace (a history's final turn
    loses trailing whitespace, so it would differ once it is no longer final)."""
    for i in range(len(conversation) - 1, closed, -1):
        if conversation[i]["role"] in _USER and conversation[i - 1]["role"] == "assistant":
            run = i - 1
            while run >= 0 and conversation[run]["role"] == "assistant":
                content = conversation[run].get("content")
                if isinstance(content, str) and content != content.rstrip():
                    return None
                run -= 1
            return i
    return None
