"""History views: what the model is shown of a run's history (`LoopConfig.view`, the
`view=` of an `Agent`).

`TokenBudget` keeps a conversation longer than the context window within a number of tokens.
It never drops a system message and never separates a tool call from its result: the history
is cut into units (a user message; an assistant turn with the tool results that answer it) and
the oldest whole turns go first, then the oldest units of the current turn; the user's latest
message and the latest unit always stay, even alone over the budget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from loopstate.engine.errors import DefinitionError
from loopstate.engine.messages import Message

TokenCounter = Callable[[Message], int]
"""The tokens one message costs."""

Unit = tuple[Message, ...]

_CACHE_LIMIT = 50_000


@dataclass(frozen=True)
class TokenBudget:
    """Show the model the newest history that fits `max_tokens` (counted by `counter`, by
    default litellm's token counter for `model`, imported when first used)."""

    max_tokens: int
    model: str = "gpt-4o"
    counter: TokenCounter | None = None
    _counts: dict[int, tuple[Message, int]] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise DefinitionError("TokenBudget needs max_tokens of at least 1")
        if self.counter is None:
            from loopstate.engine.models.tokens import litellm_counter

            object.__setattr__(self, "counter", litellm_counter(self.model))

    def __call__(self, messages: tuple[Message, ...]) -> tuple[Message, ...]:
        system_cost = sum(self.tokens(m) for m in messages if m.role == "system")
        turns = _turns([m for m in messages if m.role != "system"])
        kept = _fit(turns, self.max_tokens - system_cost, self._unit_tokens)
        shown = {id(m) for unit in kept for m in unit}
        return tuple(m for m in messages if m.role == "system" or id(m) in shown)

    def tokens(self, message: Message) -> int:
        """The tokens `message` costs (counted once per message object)."""
        cached = self._counts.get(id(message))
        if cached is not None and cached[0] is message:
            return cached[1]
        if len(self._counts) > _CACHE_LIMIT:
            self._counts.clear()
        assert self.counter is not None
        count = self.counter(message)
        self._counts[id(message)] = (message, count)
        return count

    def _unit_tokens(self, unit: Unit) -> int:
        return sum(self.tokens(m) for m in unit)


def _turns(messages: Sequence[Message]) -> list[list[Unit]]:
    """Turns (each from a user message to the next), each a list of units."""
    turns: list[list[Unit]] = []
    for message in messages:
        if message.role == "user" or not turns:
            turns.append([])
        if message.role == "tool" and turns[-1] and turns[-1][-1][0].role == "assistant":
            turns[-1][-1] = (*turns[-1][-1], message)
        else:
            turns[-1].append((message,))
    return turns


def _fit(turns: list[list[Unit]], budget: int, cost: Callable[[Unit], int]) -> list[Unit]:
    """The newest units that fit `budget`: whole turns, newest first, then the newest units
    of the oldest turn still shown (after its user message); the last turn's first and last
    units always."""
    if not turns:
        return []
    last = turns[-1]
    head, tail = last[0], last[1:]
    kept: list[Unit] = [head]
    used = cost(head)
    for newest, unit in enumerate(reversed(tail)):
        used += cost(unit)
        if used > budget and newest:
            break
        kept.insert(1, unit)
    else:
        for turn in reversed(turns[:-1]):
            size = sum(cost(u) for u in turn)
            if used + size > budget:
                break
            used += size
            kept[:0] = turn
    return kept
