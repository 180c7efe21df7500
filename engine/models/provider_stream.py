"""A streamed call on the fast path: the recorded request, its SSE lines read by litellm's
iterator for the provider (`litellm_contract.stream_iterator`), deltas reported as they come,
the reply assembled and read as `litellm_stream.py` does litellm's (without litellm's
per-chunk wrapper); truncated, dropped or stalled streams are `ModelError`s, as there.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import suppress
from typing import TYPE_CHECKING, Any

import httpx

from loopstate.engine.errors import ModelError
from loopstate.engine.messages import Origin
from loopstate.engine.model import ModelResponse
from loopstate.engine.models.litellm_contract import response_cost, stream_iterator
from loopstate.engine.models.litellm_errors import model_error
from loopstate.engine.models.litellm_reply import read_reply
from loopstate.engine.models.litellm_stream import assemble, report, stalled, truncated
from loopstate.engine.streaming import DeltaListener

if TYPE_CHECKING:
    from loopstate.engine.models.provider_path import ProviderPath


class _Lines:
    """A reply's SSE lines, noting the provider's reply id (the first event's `id`, or its
    `message.id`: Anthropic's `message_start`)."""

    def __init__(self, response: httpx.Response) -> None:
        self._lines = response.aiter_lines()
        self.reply_id: str | None = None
        self._looking = True

    def __aiter__(self) -> AsyncIterator[str]:
        return self._read()

    async def _read(self) -> AsyncIterator[str]:
        async for line in self._lines:
            if self._looking and line.startswith("data:"):
                self._looking = False
                self.reply_id = _reply_id(line[5:])
            yield line


def _reply_id(data: str) -> str | None:
    try:
        event = json.loads(data)
    except ValueError:
        return None
    if not isinstance(event, dict):
        return None
    found = event.get("id") or (event.get("message") or {}).get("id")
    return found if isinstance(found, str) else None


async def stream_reply(
    path: ProviderPath, request: httpx.Request, body: dict[str, Any], origin: Origin,
    listener: DeltaListener, stall_s: float,
) -> ModelResponse:  # fmt: skip
    model = origin.model
    try:
        response = await asyncio.wait_for(path.send(request, stream=True), stall_s)
    except TimeoutError:
        raise stalled(model, stall_s, "before the stream began") from None
    lines = _Lines(response)
    try:
        chunks, finished = await _read(path, lines, listener, model, stall_s)
    finally:
        with suppress(Exception):  # closing what already broke may fail again; the cause wins
            await response.aclose()
    if not finished:
        raise truncated(model)
    for chunk in chunks:
        chunk.model = body["model"]  # as litellm's wrapper names each chunk
    raw = assemble(path.litellm, chunks, body["messages"])
    if raw is None:
        raise ModelError(f"model {model} failed: the stream had no chunks", error_type="truncated")
    cost = response_cost(raw)  # as litellm's chunk builder priced it, else as litellm prices
    cost = path.cost(raw) if cost is None else cost
    return read_reply(raw, origin, cost=cost, response_id=lines.reply_id)


async def _read(
    path: ProviderPath, lines: _Lines, listener: DeltaListener, model: str, stall_s: float
) -> tuple[list[Any], bool]:
    """The chunks, and whether one carried the finish reason."""
    chunks: list[Any] = []
    finished = False
    loop = asyncio.get_running_loop()
    deadline = asyncio.timeout(stall_s)
    try:
        async with deadline:
            async for chunk in stream_iterator(path.contract(), path.provider, lines):
                if isinstance(chunk, dict):
                    continue  # the iterator's marker of the stream's `[DONE]`, no chunk
                chunks.append(chunk)
                finished = await report(chunk, listener) or finished
                deadline.reschedule(loop.time() + stall_s)
    except TimeoutError as exc:
        if not deadline.expired():
            raise model_error(exc, model) from exc
        raise stalled(model, stall_s, f"after {len(chunks)} chunks") from None
    except (asyncio.CancelledError, ModelError):
        raise
    except httpx.TransportError as exc:
        raise ModelError(
            f"model {model} failed: {type(exc).__name__}: {exc}", error_type="connection"
        ) from exc
    except Exception as exc:
        if not isinstance(getattr(exc, "status_code", None), int):
            if chunks:  # litellm makes the call again: what was reported is void
                listener.new_attempt()
            raise  # not the provider's: the fast path is turned off (`LiteLLMModel`)
        raise model_error(exc, model) from exc
    return chunks, finished
