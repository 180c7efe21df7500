"""A streamed call on the fast path: the recorded request; its OpenAI-format events read
straight (`provider_plain.PlainStream`: json per SSE data line, deltas reported from them,
the reply built once at the model's rates) while they are plain, else (and Anthropic's) read
by litellm's iterator (`litellm_contract.stream_iterator`), the reply assembled and read as
`litellm_stream.py` does litellm's; the first plain stream of a model is also read litellm's
way, and its direct reading kept only if equal. Truncated, dropped or stalled streams are
`ModelError`s, as there.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterable, AsyncIterator
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
from loopstate.engine.models.provider_plain import PlainStream
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
        self.rest = False
        self._reading = self._read()
        """Read on by litellm's iterator after a line that was not plain."""

    def __aiter__(self) -> AsyncIterator[str]:
        return self._reading  # one reading, resumed by litellm's iterator after `_read_plain`

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
    plain = None if path.provider == "anthropic" else PlainStream()
    stored: list[str] = []
    try:
        if plain is not None:
            stored = await _read_plain(lines, plain, listener, model, stall_s)
        if plain is None or lines.rest:  # not plain: litellm's iterator reads the rest
            chunks = await _replayed(path, stored[:-1])  # their deltas are reported
            rest = _then(stored[-1:], lines)
            more, finished = await _read(path, rest, listener, model, stall_s, len(chunks))
            plain, chunks = None, [*chunks, *more]
        else:
            finished = plain.finish is not None
    finally:
        with suppress(Exception):  # closing what already broke may fail again; the cause wins
            await response.aclose()
    if not finished:
        raise truncated(model)
    key = ("stream", body["model"])
    rates = None if plain is None else path.rates(key)
    made = None if plain is None or rates is None else plain.reply(rates, origin, body["model"])
    if made is not None:
        return made
    if plain is not None:
        chunks = await _replayed(path, stored)
    for chunk in chunks:
        chunk.model = body["model"]  # as litellm's wrapper names each chunk
    raw = assemble(path.litellm, chunks, body["messages"])
    if raw is None:
        raise ModelError(f"model {model} failed: the stream had no chunks", error_type="truncated")
    cost = response_cost(raw)  # as litellm's chunk builder priced it, else as litellm prices
    cost = path.cost(raw) if cost is None else cost
    read = read_reply(raw, origin, cost=cost, response_id=lines.reply_id)
    if plain is not None and key not in path.learned:
        reading = plain
        path.learn(key, raw, read, lambda r: reading.reply(r, origin, body["model"]))
    return read


async def _then(first: list[str], lines: AsyncIterable[str]) -> AsyncIterator[str]:
    for line in first:
        yield line
    async for line in lines:
        yield line


async def _replayed(path: ProviderPath, stored: list[str]) -> list[Any]:
    """The chunks litellm makes of lines already read."""

    async def lines() -> AsyncIterator[str]:
        for line in stored:
            yield line

    iterated = stream_iterator(path.contract(), path.provider, lines())
    return [chunk async for chunk in iterated if not isinstance(chunk, dict)]


async def _read_plain(
    lines: _Lines, plain: PlainStream, listener: DeltaListener, model: str, stall_s: float
) -> list[str]:
    """The stream's lines read straight while its events are plain, their deltas reported;
    at the first that is not, `lines.rest` is set and that line kept last."""
    stored: list[str] = []
    loop = asyncio.get_running_loop()
    deadline = asyncio.timeout(stall_s)
    try:
        async with deadline:
            async for line in lines:
                stored.append(line)
                data = line[5:].strip() if line.startswith("data:") else None
                if data is None or data == "[DONE]":
                    continue
                try:
                    deltas = plain.take(json.loads(data))
                except ValueError:
                    deltas = None
                if deltas is None:
                    lines.rest = True
                    return stored
                for delta in deltas:
                    if delta[0] == "text":
                        await listener.text(delta[1])
                    else:
                        await listener.tool_call(*delta[1:])
                deadline.reschedule(loop.time() + stall_s)
    except TimeoutError as exc:
        if not deadline.expired():
            raise model_error(exc, model) from exc
        raise stalled(model, stall_s, f"after {len(stored)} lines") from None
    except httpx.TransportError as exc:
        raise ModelError(
            f"model {model} failed: {type(exc).__name__}: {exc}", error_type="connection"
        ) from exc
    return stored


async def _read(
    path: ProviderPath, lines: AsyncIterable[str], listener: DeltaListener, model: str,
    stall_s: float, before: int,
) -> tuple[list[Any], bool]:  # fmt: skip
    """The chunks, and whether one carried the finish reason (`before`: chunks reported
    before these)."""
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
            if chunks or before:  # litellm makes the call again: what was reported is void
                listener.new_attempt()
            raise  # not the provider's: the fast path is turned off (`LiteLLMModel`)
        raise model_error(exc, model) from exc
    return chunks, finished
