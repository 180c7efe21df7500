"""`PlainFallback`: a served model whose provider refuses streamed requests still answers.

With streaming on (`Service(..., stream=True)`, `loopstate serve --stream`) every served step
asks for a stream, for the pages' live text. An endpoint that cannot stream (many
OpenAI-compatible servers) refuses such a request with a 4xx that says so: the step is then
asked once more as a plain call, and the service logs once per model that it fell back. Live
deltas then simply do not appear; the stored run is the same.
"""

from __future__ import annotations

import re
from typing import ClassVar

from loopstate.engine.errors import ModelError
from loopstate.engine.logs import get_logger
from loopstate.engine.model import Model, ModelRequest, ModelResponse
from loopstate.engine.models.retry import RetryingModel
from loopstate.engine.streaming import DeltaListener, StreamingModel

_SAYS_STREAM = re.compile(r"stream", re.IGNORECASE)


def refuses_streaming(error: ModelError) -> bool:
    """Whether the provider refused the request because it asked for a stream: a 4xx (not a
    rate limit or a timeout, which pass) whose message names streaming."""
    status = error.status
    if status is None or not 400 <= status < 500 or status in (408, 409, 429):
        return False
    said = f"{error.provider_message or ''} {error}"
    return bool(_SAYS_STREAM.search(said))


class PlainFallback:
    """`model`, streamed when it can be; a streamed request its provider refuses is asked
    again as a plain call. `fell_back` names the models that did (logged once each)."""

    fell_back: ClassVar[set[str]] = set()
    """Shared by every served model of the process: one log line per model name."""

    def __init__(self, model: StreamingModel) -> None:
        self.model = model

    @property
    def name(self) -> str:
        return self.model.name

    def __getattr__(self, name: str) -> object:
        return getattr(self.model, name)  # `settings`, `origin`, ...: the wrapped model's

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self.model.complete(request)

    async def stream(self, request: ModelRequest, listener: DeltaListener) -> ModelResponse:
        try:
            return await self.model.stream(request, listener)
        except ModelError as exc:
            if not refuses_streaming(exc):
                raise
            if self.name not in PlainFallback.fell_back:
                PlainFallback.fell_back.add(self.name)
                get_logger().warning(
                    "stream_refused",
                    model=self.name,
                    status=exc.status,
                    error=str(exc).splitlines()[0],
                    then="plain calls for this model's refused streams",
                )
            return await self.model.complete(request)


def with_fallback(model: Model) -> Model:
    """`model` wrapped in `PlainFallback` when it can stream (as is otherwise); a retrying
    model keeps its retries around the fallback."""
    if isinstance(model, RetryingModel):
        return RetryingModel(with_fallback(model.model), model.policy)
    return PlainFallback(model) if isinstance(model, StreamingModel) else model
