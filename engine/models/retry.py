"""Retrying model calls that may succeed later: a wrapper around any model port.

    model = RetryingModel(LiteLLMModel("anthropic/claude-sonnet-4-5"), RetryPolicy(attempts=4))

Only a `ModelError` that is `retryable` is retried (408, 429, 5xx including Anthropic's 529
overloaded, a dropped connection or a timeout); a 400 or an unreadable reply is raised at
once. The wait doubles from `backoff_s` up to `max_delay_s`; when the provider sent
`retry-after`, that is the wait, and if it is longer than `max_delay_s` the error is raised
rather than retried early (a retry before the provider's time is refused again). The sleep
is injectable, so tests do not wait and a workflow engine can supply its own timer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from loopstate.engine.data import Frozen
from loopstate.engine.errors import ModelError
from loopstate.engine.model import Model, ModelRequest, ModelResponse
from loopstate.engine.streaming import DeltaListener, StreamingModel

Sleep = Callable[[float], Awaitable[None]]


class RetryPolicy(Frozen):
    attempts: int = 3
    """Calls in all, the first included (1: no retry)."""
    backoff_s: float = 1.0
    """The wait before the first retry; doubled before each next one."""
    max_delay_s: float = 60.0

    def delay(self, error: ModelError, attempt: int) -> float | None:
        """Seconds to wait after failed attempt number `attempt` (1-based); None: give up."""
        if attempt >= self.attempts or not error.retryable:
            return None
        if error.retry_after is not None:
            return error.retry_after if error.retry_after <= self.max_delay_s else None
        return min(self.backoff_s * 2.0 ** (attempt - 1), self.max_delay_s)


class RetryingModel:
    """A model port that retries another one's retryable errors by a `RetryPolicy`."""

    def __init__(
        self, model: Model, policy: RetryPolicy | None = None, *, sleep: Sleep = asyncio.sleep
    ) -> None:
        self.model = model
        self.policy = policy or RetryPolicy()
        self._sleep = sleep

    @property
    def name(self) -> str:
        return self.model.name

    def __getattr__(self, name: str) -> object:
        # `settings` (read by the recorder), `origin`, ...: the wrapped model's.
        return getattr(self.model, name)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self._retrying(lambda: self.model.complete(request), None)

    async def stream(self, request: ModelRequest, listener: DeltaListener) -> ModelResponse:
        """The wrapped model's stream (its `complete` if it cannot stream); before each retry
        the listener hears that the deltas so far are void."""
        model = self.model
        if not isinstance(model, StreamingModel):
            return await self.complete(request)
        return await self._retrying(lambda: model.stream(request, listener), listener)

    async def _retrying(
        self, call: Callable[[], Awaitable[ModelResponse]], listener: DeltaListener | None
    ) -> ModelResponse:
        attempt = 1
        while True:
            if attempt > 1 and listener is not None:
                listener.new_attempt()
            try:
                return await call()
            except ModelError as error:
                delay = self.policy.delay(error, attempt)
                if delay is None:
                    raise
            await self._sleep(delay)
            attempt += 1
