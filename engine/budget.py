"""Budgets: limits a run keeps across processes, and what it has spent against them.

A `Budget` is stored with the run (`RunState.budget`), so a run resumed anywhere keeps it and
`resume(budget=...)` raises it. The loop checks it before each model call and before each
batch of tools (`machines/agent/limits.py`): a call that would start past a limit does not
start, and the run rests in `budget_exceeded` with an `Overrun` saying which limit and the
counts. For a run with sub-agents the counts are the whole tree's (`Spent` adds up).

How the next model call is estimated (it has not happened yet): its tokens are the request's
characters / 4 (the usual rule of thumb), or the prompt the run's last call read if that is
more (a history only grows), plus the completion tokens of that last call; its cost is those
tokens at the last priced call's price per token. The first call of a run is estimated by its
request alone, at no cost (nothing is known of the model's price yet).
"""

from __future__ import annotations

import json
import math
from typing import Literal

from pydantic import Field

from loopstate.engine.data import Frozen
from loopstate.engine.model import Usage

Limit = Literal["tokens", "cost_usd", "tool_calls", "model_calls", "wall_s"]
LIMITS: tuple[Limit, ...] = ("tokens", "cost_usd", "tool_calls", "model_calls", "wall_s")


class Budget(Frozen):
    """Limits for a run (None: no limit). `tokens` counts prompt and completion tokens of
    every model call, priced or not; `cost_usd` the calls litellm could price (a run with
    unpriced calls says so when it stops); `tool_calls` the calls that ran; `model_calls` the
    model calls; `wall_s` the seconds spent in model calls and tools (not waiting for people)."""

    tokens: int | None = Field(default=None, ge=0)
    cost_usd: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    tool_calls: int | None = Field(default=None, ge=0)
    model_calls: int | None = Field(default=None, ge=0)
    wall_s: float | None = Field(default=None, ge=0, allow_inf_nan=False)

    def raised(self, given: Budget) -> Budget:
        """The budget with the limits `given` names replaced (a limit given as None lifts it)."""
        return self.evolve(**{k: getattr(given, k) for k in given.model_fields_set})


class Spent(Frozen):
    """What a run (or a tree of runs) has spent, in the budget's terms."""

    tokens: int = 0
    cost_usd: float = 0.0
    unpriced: int = 0
    """Model calls whose cost is unknown: counted in `tokens`, not in `cost_usd`."""
    tool_calls: int = 0
    model_calls: int = 0
    wall_s: float = 0.0

    def __add__(self, other: Spent) -> Spent:
        return Spent(
            tokens=self.tokens + other.tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            unpriced=self.unpriced + other.unpriced,
            tool_calls=self.tool_calls + other.tool_calls,
            model_calls=self.model_calls + other.model_calls,
            wall_s=self.wall_s + other.wall_s,
        )


class Overrun(Frozen):
    """Which limit a run stopped at, what it had spent, and what the next act would add."""

    limit: Limit
    allowed: float
    spent: Spent
    next: float
    """What the call or batch that did not start would have added (estimated for a call)."""
    before: Literal["model call", "tool batch"]

    @property
    def message(self) -> str:
        used = getattr(self.spent, self.limit)
        text = (
            f"budget {self.limit} exceeded before a {self.before}: spent {used:g} of "
            f"{self.allowed:g}, the {self.before} would add {self.next:g}"
        )
        if self.limit == "cost_usd" and self.spent.unpriced:
            text += (
                f"; {self.spent.unpriced} model call(s) could not be priced and are not in "
                "the cost (they count toward tokens)"
            )
        return text + "; resume with a raised budget to go on"


class Estimate(Frozen):
    """What the next model call is expected to spend (see the module's docstring)."""

    tokens: int
    cost_usd: float


def estimate_call(request_chars: int, last: Usage | None, priced: Usage) -> Estimate:
    """The next call's estimate from its request's size, the run's last call's usage, and
    the run's priced usage so far (its price per token)."""
    prompt = math.ceil(request_chars / 4)
    if last is not None:
        prompt = max(prompt, last.prompt_tokens)
    tokens = prompt + (last.completion_tokens if last is not None else 0)
    per_token = 0.0
    if priced.cost_usd and priced.total_tokens:
        per_token = priced.cost_usd / priced.total_tokens
    return Estimate(tokens=tokens, cost_usd=tokens * per_token)


def request_chars(messages: object, tools: object) -> int:
    """The size of a request as the model reads it (its messages and tools as JSON)."""
    return len(json.dumps([messages, tools], default=str, separators=(",", ":")))


def still_over(budget: Budget, spent: Spent, stopped: Overrun) -> Overrun | None:
    """Whether the step a run stopped before (`stopped`) would still pass `budget` (a raised
    one) at `spent`: the limit it stopped at is checked again."""
    adds = Spent.model_validate({stopped.limit: stopped.next})
    return overrun(budget, spent, adds, stopped.before)


def overrun(
    budget: Budget, spent: Spent, adds: Spent, before: Literal["model call", "tool batch"]
) -> Overrun | None:
    """The first limit that `spent + adds` would pass, or None."""
    for limit in LIMITS:
        allowed = getattr(budget, limit)
        if allowed is None:
            continue
        extra = getattr(adds, limit)
        if extra and getattr(spent, limit) + extra > allowed:
            return Overrun(limit=limit, allowed=allowed, spent=spent, next=extra, before=before)
        if limit == "wall_s" and spent.wall_s >= allowed:
            return Overrun(limit=limit, allowed=allowed, spent=spent, next=0, before=before)
    return None
