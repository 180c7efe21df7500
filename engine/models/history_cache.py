"""What a thin path made of each recent history, found again on the history's next call.

A run's history only grows, so a call finds what the last call of the same history made
(keyed by the identity of its first message, checked message by message) and does only the
rest. The last `KEPT` histories are kept: runs sharing one model at once; more, and a
history's next call is made whole again (the same result, more work).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, Protocol, TypeVar

from loopstate.engine.messages import Message

KEPT = 64


class Made(Protocol):
    @property
    def source(self) -> tuple[Message, ...]:
        """The messages it was made of."""


M = TypeVar("M", bound=Made)


class HistoryCache(Generic[M]):
    """The last `KEPT` histories' made values; `empty` when a history has none."""

    def __init__(self, empty: M) -> None:
        self._empty = empty
        self._made: OrderedDict[int, M] = OrderedDict()

    def last(self, messages: tuple[Message, ...]) -> M:
        """What was made of the longest earlier state of this history (`empty` if none)."""
        if messages:
            last = self._made.get(id(messages[0]))
            if (
                last is not None
                and len(last.source) <= len(messages)
                and all(a is b for a, b in zip(last.source, messages, strict=False))
            ):
                return last
        return self._empty

    def keep(self, made: M) -> None:
        if made.source:
            key = id(made.source[0])
            self._made[key] = made
            self._made.move_to_end(key)
            while len(self._made) > KEPT:
                self._made.popitem(last=False)
